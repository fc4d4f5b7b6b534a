//===- TrainingStep.cpp - How a training step is compiled -----------------===//
//
// Implements stepKindFor() and trainingStepPipeline().
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/Common/TrainingStep.h"

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

} // namespace kiln
