//===- Training.cpp - Compile training steps of DSL models ----------------===//
//
// Implements compileTraining() and trainingStepPipeline().
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/JIT/Trainer.h"

#include "compiler/DSL/DSL.h"
#include "runtime/Error.h"

#include "mlir/IR/BuiltinOps.h"

#include <sstream>

namespace kiln {

StepKind stepKindFor(const Communicator &communicator) {
  return communicator.size() > 1 ? StepKind::split : StepKind::fused;
}

std::string trainingStepPipeline(const std::string &graph,
                                 const OptimizerConfig &o, StepKind kind) {
  std::ostringstream os;
  os.precision(17);
  os << "kiln-training-step{function=" << graph << " optimizer=" << o.kind
     << " beta1=" << o.beta1 << " beta2=" << o.beta2 << " eps=" << o.eps
     << " weight-decay=" << o.weightDecay << " momentum=" << o.momentum
     << " clip-norm=" << o.clipNorm
     << (kind == StepKind::split ? " split=1" : "") << "},canonicalize";
  return os.str();
}

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
  return JitModule::compileCached(module.op(), withStep);
}

} // namespace kiln
