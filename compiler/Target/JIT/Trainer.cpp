//===- Trainer.cpp - Run compiled training steps of a DSL model -----------===//
//
// Implements kiln::Trainer.
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/JIT/Trainer.h"

#include "compiler/DSL/DSL.h"
#include "runtime/Error.h"

#include "mlir/IR/BuiltinOps.h"

#include <cmath>
#include <sstream>

namespace kiln {

static std::string trainingStepPipeline(const std::string &graph,
                                        const OptimizerConfig &o) {
  std::ostringstream os;
  os.precision(17);
  os << "kiln-training-step{function=" << graph << " optimizer=" << o.kind
     << " beta1=" << o.beta1 << " beta2=" << o.beta2 << " eps=" << o.eps
     << " weight-decay=" << o.weightDecay << " momentum=" << o.momentum
     << " clip-norm=" << o.clipNorm << "},canonicalize";
  return os.str();
}

Trainer::Trainer(const dsl::Module &module, const std::string &lossGraph,
                 const OptimizerConfig &optimizer, uint64_t seed,
                 const JitOptions &options) {
  if (!module.findGraph(lossGraph)) {
    throw Error("kiln: the module has no graph '" + lossGraph + "'");
  }
  module.verify();
  JitOptions withStep = options;
  withStep.prePipeline = trainingStepPipeline(lossGraph, optimizer);
  jit_ = JitModule::compileCached(module.op(), withStep);
  Rng rng(seed);
  for (const dsl::ParamSpec &spec : module.params()) {
    parameters_.add(spec.name, spec.shape, spec.init, rng);
  }
  for (const ArgSpec &arg : jit_->spec("train_step").args) {
    if (arg.isState) {
      state_.add(arg.name, Tensor::zeros(arg.shape, DType::f32));
    }
  }
}

float Trainer::step(const std::map<std::string, Arg> &inputs, float lr) {
  const FunctionSpec &spec = jit_->spec("train_step");
  std::vector<Arg> args;
  std::vector<std::string> params, states;
  for (const ArgSpec &arg : spec.args) {
    if (arg.isParam) {
      args.emplace_back(parameters_.get(arg.name));
      params.push_back(arg.name);
    } else if (state_.contains(arg.name)) {
      args.emplace_back(state_.get(arg.name));
      states.push_back(arg.name);
    } else if (arg.name == "lr") {
      args.emplace_back(Tensor::full({}, lr));
    } else if (arg.name == "step") {
      args.emplace_back(steps_ + 1);
    } else {
      auto it = inputs.find(arg.name);
      if (it == inputs.end()) {
        throw Error("kiln: the training step needs the input '" + arg.name +
                    "'");
      }
      args.push_back(it->second);
    }
  }
  std::vector<Tensor> out = jit_->call("train_step", args);
  float loss = out[0].data<float>()[0];
  if (!std::isfinite(loss)) {
    throw Error("kiln: the loss is " + std::to_string(loss) + " at step " +
                std::to_string(steps_ + 1) +
                "; the parameters were left as they were before it");
  }
  // Results: loss, the parameters, then the state, in argument order.
  for (size_t k = 0; k < params.size(); ++k) {
    parameters_.get(params[k]) = out[1 + k];
  }
  for (size_t k = 0; k < states.size(); ++k) {
    state_.get(states[k]) = out[1 + params.size() + k];
  }
  ++steps_;
  return loss;
}

} // namespace kiln
