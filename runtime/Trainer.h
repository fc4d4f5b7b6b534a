//===- Trainer.h - Run compiled training steps -------------------*- C++
//-*-===//
//
// Runs the `train_step` function of an Executable (JIT or ahead-of-time; made
// by kiln-training-step: loss, gradients, clipping, optimizer update),
// keeping the parameters and the optimizer state in stores. Data-parallel
// (a Communicator of several processes): each process runs `grad_step` on
// its share of the global batch, the gradients, the loss and the count of
// kept tokens are summed over the processes in a few packed buckets, and
// `update_step` applies the averaged gradients on every process alike.
// A step compiled for the GPU in-process keeps the parameters and the
// optimizer state in GPU memory across steps (ArgSpec::onDevice): a step
// copies its batch in and its loss out; parameters() and state() copy them
// to the host when asked for, and the next step copies them back.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TRAINER_H
#define KILN_RUNTIME_TRAINER_H

#include "runtime/Communicator.h"
#include "runtime/Function.h"
#include "runtime/ParameterStore.h"
#include "runtime/TrainingLoop.h"

#include <functional>
#include <map>
#include <memory>
#include <string>

namespace kiln {

class Trainer {
public:
  /// Trains with `executable`'s "train_step", or with its "grad_step" and
  /// "update_step" (compileTraining with StepKind::split), which a
  /// `communicator` of more than one process needs. Initializes the
  /// parameters as the model declares them from `seed` (then copies rank 0's
  /// to every process) and the optimizer state to zero. Throws kiln::Error
  /// when the executable has no step fit for the communicator.
  explicit Trainer(std::shared_ptr<const Executable> executable,
                   uint64_t seed = 0,
                   std::shared_ptr<Communicator> communicator = nullptr);

  /// One step with learning rate `lr` on `inputs` (by name): the global
  /// batch, of which each process trains on its share (shardBatch()).
  /// Returns the loss of the whole batch: with a cross-entropy or NLL loss
  /// that is a mean over kept tokens each process's loss and gradients weigh
  /// as many tokens as it kept, a summed one adds up, and any other loss is
  /// taken as a mean over rows (each process weighs its share's rows). A
  /// training-mode graph's dropout "seed" is derived from the trainer's seed,
  /// the step and the rank unless `inputs` gives one, so a run is reproducible
  /// and a resumed run draws the same masks. Throws kiln::Error, and changes
  /// nothing, when the loss is not finite (on every process alike).
  float step(const std::map<std::string, Arg> &inputs, float lr);

  /// This process's share of a global batch (all of it in a world of one).
  std::map<std::string, Arg>
  shard(const std::map<std::string, Arg> &inputs) const;

  /// Runs another function of the executable (evaluation, forward,
  /// decoding) on the current parameters.
  std::vector<Tensor> run(const std::string &graph,
                          const std::map<std::string, Arg> &inputs) const;

  /// Hooks for runTraining(): step s trains on `batch(s)` with the
  /// schedule's rate; checkpoints hold the parameters, the optimizer state
  /// and the step count. Add the data generators (rngs) and an evaluation.
  TrainingHooks
  hooks(std::function<std::map<std::string, Arg>(int64_t step)> batch);

  /// The parameters and the optimizer state. When they live on the GPU,
  /// these copy them to the host first (if a step changed them since), and
  /// the next step or run() copies the host's values back: the caller may
  /// read and write the stores.
  ParameterStore &parameters();
  ParameterStore &state();
  /// Steps taken so far (Adam's bias correction uses it).
  int64_t steps() const { return steps_; }
  /// Sets the count, as when resuming from a checkpoint.
  void setSteps(int64_t steps);
  const Executable &executable() const { return *executable_; }
  Communicator &communicator() const { return *communicator_; }
  /// The size of the buckets in which gradients are summed over the
  /// processes (8M floats, 32 MiB, by default; at least 2).
  void setBucketFloats(size_t floats);

private:
  /// The dropout seed of the next step on this process.
  int64_t dropoutSeed() const;
  /// grad_step, the sums over the processes, update_step.
  float splitStep(const std::map<std::string, Arg> &inputs, float lr);
  /// Sums `grads`·weight, loss·weight and weight over the processes in
  /// buckets, then (`average`) divides the gradients by the summed weight in
  /// place. Returns the loss of the global batch.
  float reduce(std::vector<Tensor> &grads, float loss, double weight,
               bool average);
  /// Copies the step's results (new parameters, then new state, from
  /// `first`) into the stores (the GPU's when the state lives there).
  void keep(const std::string &function, std::vector<Tensor> &out,
            size_t first);
  /// The parameters and state the compiled functions take: the host
  /// stores, or (state on the GPU) their GPU copies, brought up to date.
  const ParameterStore &callParameters() const;
  const ParameterStore &callState() const;
  /// With the state on the GPU: copies the host stores there when they may
  /// have changed since.
  void toDevice() const;
  /// With the state on the GPU: copies it into the host stores when a step
  /// changed it since, and takes the host stores as the ones to copy back.
  void toHost();

  std::shared_ptr<const Executable> executable_;
  std::shared_ptr<Communicator> communicator_;
  ParameterStore parameters_, state_;
  /// Whether the steps keep the state on the GPU; then its GPU copies,
  /// whether the host stores may hold newer values (deviceStale_) and
  /// whether the GPU holds newer ones (hostStale_).
  bool onDevice_ = false;
  mutable ParameterStore deviceParameters_, deviceState_;
  mutable bool deviceStale_ = true;
  bool hostStale_ = false;
  uint64_t seed_;
  int64_t steps_ = 0;
  bool split_ = false;
  size_t bucketFloats_ = size_t(8) << 20; // 32 MiB
  std::vector<float> bucket_;
};

} // namespace kiln

#endif // KILN_RUNTIME_TRAINER_H
