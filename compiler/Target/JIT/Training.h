//===- Training.h - Compile training steps of DSL models ---------*- C++ -*-===//
//
// Compiles a loss graph of a DSL module into one training step (loss,
// gradients, clipping, optimizer update; kiln-training-step), or into a
// gradient step and an update step for data-parallel runs, for kiln::Trainer
// (runtime/Trainer.h) to run.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_JIT_TRAINING_H
#define KILN_COMPILER_TARGET_JIT_TRAINING_H

#include "compiler/Target/Common/TrainingStep.h"
#include "compiler/Target/JIT/Jit.h"
#include "runtime/Trainer.h"

#include <memory>
#include <string>

namespace kiln {
namespace dsl {
class Module;
} // namespace dsl

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

#endif // KILN_COMPILER_TARGET_JIT_TRAINING_H
