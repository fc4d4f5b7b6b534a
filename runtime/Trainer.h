//===- Trainer.h - Run compiled training steps -------------------*- C++
//-*-===//
//
// Runs the `train_step` function of an Executable (JIT or ahead-of-time; made
// by kiln-training-step: loss, gradients, clipping, optimizer update),
// keeping the parameters and the optimizer state in stores.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TRAINER_H
#define KILN_RUNTIME_TRAINER_H

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
  /// Trains with `executable`'s "train_step". Initializes the parameters as
  /// the model declares them from `seed` and the optimizer state to zero.
  /// Throws kiln::Error when there is no "train_step".
  explicit Trainer(std::shared_ptr<const Executable> executable,
                   uint64_t seed = 0);

  /// One step with learning rate `lr` on `inputs` (by name); returns the
  /// loss. A training-mode graph's dropout "seed" is derived from the
  /// trainer's seed and the step unless `inputs` gives one, so a run is
  /// reproducible and a resumed run draws the same masks. Throws
  /// kiln::Error, and changes nothing, when the loss is not finite.
  float step(const std::map<std::string, Arg> &inputs, float lr);

  /// Runs another function of the executable (evaluation, forward,
  /// decoding) on the current parameters.
  std::vector<Tensor> run(const std::string &graph,
                          const std::map<std::string, Arg> &inputs) const;

  /// Hooks for runTraining(): step s trains on `batch(s)` with the
  /// schedule's rate; checkpoints hold the parameters, the optimizer state
  /// and the step count. Add the data generators (rngs) and an evaluation.
  TrainingHooks
  hooks(std::function<std::map<std::string, Arg>(int64_t step)> batch);

  ParameterStore &parameters() { return parameters_; }
  ParameterStore &state() { return state_; }
  /// Steps taken so far (Adam's bias correction uses it).
  int64_t steps() const { return steps_; }
  /// Sets the count, as when resuming from a checkpoint.
  void setSteps(int64_t steps);
  const Executable &executable() const { return *executable_; }

private:
  std::shared_ptr<const Executable> executable_;
  ParameterStore parameters_, state_;
  uint64_t seed_;
  int64_t steps_ = 0;
};

} // namespace kiln

#endif // KILN_RUNTIME_TRAINER_H
