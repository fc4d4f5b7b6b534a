//===- TrainingStep.h - How a training step is compiled ----------*- C++ -*-===//
//
// The optimizer of a compiled training step and the kiln-training-step
// pipeline that adds it to a module: what the JIT (compileTraining) and the
// ahead-of-time generator (generatorMain) both compile from.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_COMMON_TRAININGSTEP_H
#define KILN_COMPILER_TARGET_COMMON_TRAININGSTEP_H

#include "runtime/Communicator.h"

#include <string>

namespace kiln {

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

} // namespace kiln

#endif // KILN_COMPILER_TARGET_COMMON_TRAININGSTEP_H
