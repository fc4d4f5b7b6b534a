//===- Training.cpp - Compile training steps of DSL models ----------------===//
//
// Implements compileTraining().
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/JIT/Training.h"

#include "compiler/DSL/DSL.h"
#include "runtime/Error.h"

#include "mlir/IR/BuiltinOps.h"

namespace kiln {

std::shared_ptr<JitModule> compileTraining(const dsl::Module &module,
                                           const std::string &lossGraph,
                                           const OptimizerConfig &optimizer,
                                           const JitOptions &options,
                                           StepKind kind) {
  if (!module.findGraph(lossGraph)) {
    throw Error("kiln: the module has no graph '" + lossGraph + "'");
  }
  module.verify();
  JitOptions withStep = options;
  withStep.prePipeline = trainingStepPipeline(lossGraph, optimizer, kind);
  // The parameters change at every step: a prepared copy would be made
  // again for each (the fused step updates in place and is left alone
  // anyway; the split step's gradients would not be).
  withStep.prepareWeights = false;
  return JitModule::compileCached(module.op(), withStep);
}

} // namespace kiln
