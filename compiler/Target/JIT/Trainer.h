//===- Trainer.h - Run compiled training steps of a DSL model ----*- C++
//-*-===//
//
// Compiles a loss graph of a DSL module into one training step (loss,
// gradients, clipping, optimizer update; kiln-training-step) and runs it,
// keeping the parameters and the optimizer state in stores.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_JIT_TRAINER_H
#define KILN_COMPILER_TARGET_JIT_TRAINER_H

#include "compiler/Target/JIT/Jit.h"
#include "runtime/ParameterStore.h"
#include "runtime/TrainingLoop.h"

#include <map>
#include <memory>
#include <string>

namespace kiln {
namespace dsl {
class Module;
} // namespace dsl

/// The optimizer of a compiled training step (PyTorch semantics).
struct OptimizerConfig {
  std::string kind = "adamw"; ///< adamw, adam or sgd
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weightDecay = 0.0;
  double momentum = 0.0; ///< sgd only
  double clipNorm = 0.0; ///< clip the gradients' global norm (0: off)
};

class Trainer {
public:
  /// Compiles `lossGraph` of `module` (its first result a scalar loss) with
  /// the optimizer, and every other graph of the module as it is (an
  /// evaluation loss, a forward pass: run() calls them on the parameters
  /// being trained). Initializes the parameters from `seed` and the
  /// optimizer state to zero.
  Trainer(const dsl::Module &module, const std::string &lossGraph,
          const OptimizerConfig &optimizer, uint64_t seed = 0,
          const JitOptions &options = {});

  /// One step with learning rate `lr` on `inputs` (by name); returns the
  /// loss. A training-mode graph's dropout "seed" is derived from the
  /// trainer's seed and the step unless `inputs` gives one, so a run is
  /// reproducible and a resumed run draws the same masks. Throws
  /// kiln::Error, and changes nothing, when the loss is not finite.
  float step(const std::map<std::string, Arg> &inputs, float lr);

  /// Runs another graph of the module (evaluation, forward) on the current
  /// parameters.
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
  const JitModule &jit() const { return *jit_; }

private:
  std::shared_ptr<JitModule> jit_;
  ParameterStore parameters_, state_;
  uint64_t seed_;
  int64_t steps_ = 0;
};

} // namespace kiln

#endif // KILN_COMPILER_TARGET_JIT_TRAINER_H
