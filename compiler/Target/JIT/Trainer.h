//===- Trainer.h - Compile training steps of DSL models ----------*- C++
//-*-===//
//
// Compiles a loss graph of a DSL module into one training step (loss,
// gradients, clipping, optimizer update; kiln-training-step), or into a
// gradient step and an update step for data-parallel runs, for kiln::Trainer
// (runtime/Trainer.h) to run.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_JIT_TRAINER_H
#define KILN_COMPILER_TARGET_JIT_TRAINER_H

#include "compiler/Target/JIT/Jit.h"
#include "runtime/Trainer.h"

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

/// How a training step is compiled: one fused "train_step", or
/// "grad_step" + "update_step", between which the processes of a
/// data-parallel run sum their gradients.
enum class StepKind { fused, split };

/// `split` for a communicator of several processes, else `fused`.
StepKind stepKindFor(const Communicator &communicator);

/// The pass pipeline that adds the training step(s) for `lossGraph` (its
/// first result a scalar loss) with `optimizer`.
std::string trainingStepPipeline(const std::string &lossGraph,
                                 const OptimizerConfig &optimizer,
                                 StepKind kind = StepKind::fused);

/// Compiles every graph of `module` as it is (an evaluation loss, a forward
/// pass, decoding) plus the training step(s) for `lossGraph`; once per
/// process for the same module. Throws kiln::Error when there is no such
/// graph.
std::shared_ptr<JitModule> compileTraining(const dsl::Module &module,
                                           const std::string &lossGraph,
                                           const OptimizerConfig &optimizer,
                                           const JitOptions &options = {},
                                           StepKind kind = StepKind::fused);

} // namespace kiln

#endif // KILN_COMPILER_TARGET_JIT_TRAINER_H
