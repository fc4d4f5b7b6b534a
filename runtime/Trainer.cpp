//===- Trainer.cpp - Run compiled training steps --------------------------===//
//
// Implements kiln::Trainer.
//
//===----------------------------------------------------------------------===//

#include "runtime/Trainer.h"

#include "runtime/Error.h"

#include <cmath>

namespace kiln {

Trainer::Trainer(std::shared_ptr<const Executable> executable, uint64_t seed)
    : executable_(std::move(executable)), seed_(seed) {
  if (!executable_->contains("train_step")) {
    throw Error("kiln: the compiled model has no 'train_step' (compile it "
                "with a training step)");
  }
  parameters_ = executable_->initParameters(seed);
  for (const ArgSpec &arg : executable_->spec("train_step").args) {
    if (arg.isState) {
      state_.add(arg.name, Tensor::zeros(arg.shape, DType::f32));
    }
  }
}

float Trainer::step(const std::map<std::string, Arg> &inputs, float lr) {
  const FunctionSpec &spec = executable_->spec("train_step");
  std::map<std::string, Arg> all = inputs;
  std::vector<std::string> params, states;
  for (const ArgSpec &arg : spec.args) {
    if (arg.isParam) {
      params.push_back(arg.name);
    } else if (arg.isState) {
      all.emplace(arg.name, state_.get(arg.name));
      states.push_back(arg.name);
    } else if (arg.name == "lr") {
      all.emplace("lr", Tensor::full({}, lr));
    } else if (arg.name == "step") {
      all.emplace("step", Arg(steps_ + 1));
    } else if (arg.name == "seed" && arg.isScalar) {
      // A distinct, reproducible dropout seed per step.
      Rng mix(seed_ ^ (0x9e3779b97f4a7c15ull * uint64_t(steps_ + 1)));
      all.emplace("seed", Arg(int64_t(mix.next() >> 1)));
    }
  }
  std::vector<Tensor> out = executable_->run("train_step", parameters_, all);
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

std::vector<Tensor>
Trainer::run(const std::string &graph,
             const std::map<std::string, Arg> &inputs) const {
  if (graph == "train_step") {
    throw Error("kiln: Trainer::run: use step() for the training step");
  }
  return executable_->run(graph, parameters_, inputs);
}

void Trainer::setSteps(int64_t steps) {
  if (steps < 0) {
    throw Error("kiln: a step count cannot be negative, got " +
                std::to_string(steps));
  }
  steps_ = steps;
}

TrainingHooks
Trainer::hooks(std::function<std::map<std::string, Arg>(int64_t step)> batch) {
  TrainingHooks hooks;
  hooks.step = [this, batch = std::move(batch)](int64_t s, float lr) {
    return step(batch(s), lr);
  };
  hooks.parameters = &parameters_;
  hooks.optimizerState = &state_;
  hooks.restoreStep = [this](int64_t steps) { setSteps(steps); };
  return hooks;
}

} // namespace kiln
