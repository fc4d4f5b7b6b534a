//===- Trainer.cpp - Run compiled training steps --------------------------===//
//
// Implements kiln::Trainer.
//
//===----------------------------------------------------------------------===//

#include "runtime/Trainer.h"

#include "base/BoundaryNames.h"
#include "base/SplitMix64.h"
#include "runtime/Cuda.h"
#include "runtime/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

namespace kiln {

Trainer::Trainer(std::shared_ptr<const Executable> executable, uint64_t seed,
                 std::shared_ptr<Communicator> communicator)
    : executable_(std::move(executable)),
      communicator_(communicator ? std::move(communicator) : singleProcess()),
      seed_(seed) {
  bool fused = executable_->contains(steps::kTrain);
  bool split = executable_->contains(steps::kGrad) &&
               executable_->contains(steps::kUpdate);
  int world = communicator_->size();
  if (world > 1 && !split) {
    throw Error(fmt::format(
        "kiln: data-parallel training over {} processes needs a model "
        "compiled with a split step (compileTraining with StepKind::split: "
        "'grad_step' and 'update_step')",
        world));
  }
  if (!fused && !split) {
    throw Error("kiln: the compiled model has no 'train_step' (compile it "
                "with a training step)");
  }
  split_ = world > 1 || !fused;
  parameters_ = executable_->initParameters(seed);
  for (const ArgSpec &arg :
       executable_->spec(split_ ? steps::kUpdate : steps::kTrain).args) {
    if (arg.role == ArgSpec::Role::state) {
      state_.add(arg.name, Tensor::zeros(arg.shape, DType::f32));
    }
    onDevice_ |= arg.onDevice;
  }
  // Every process starts from rank 0's parameters (the same seed gives the
  // same ones; this makes sure of it).
  broadcastStore(*communicator_, parameters_);
}

void Trainer::toDevice() const {
  if (onDevice_ && deviceStale_) {
    cuda::mirror(parameters_, deviceParameters_);
    cuda::mirror(state_, deviceState_);
    deviceStale_ = false;
  }
}

void Trainer::toHost() {
  if (!onDevice_) {
    return;
  }
  if (hostStale_) {
    for (auto [from, to] : {std::pair{&deviceParameters_, &parameters_},
                            std::pair{&deviceState_, &state_}}) {
      for (const Parameter &p : *from) {
        cuda::copy(p.tensor, to->get(p.name));
      }
    }
    hostStale_ = false;
  }
  deviceStale_ = true;
}

ParameterStore &Trainer::parameters() {
  toHost();
  return parameters_;
}

ParameterStore &Trainer::state() {
  toHost();
  return state_;
}

const ParameterStore &Trainer::callParameters() const {
  toDevice();
  return onDevice_ ? deviceParameters_ : parameters_;
}

const ParameterStore &Trainer::callState() const {
  toDevice();
  return onDevice_ ? deviceState_ : state_;
}

int64_t Trainer::dropoutSeed() const {
  // A distinct, reproducible seed per step and per process.
  Rng mix(seed_ ^ (splitmix64::kIncrement * uint64_t(steps_ + 1)) ^
          (splitmix64::kMultiplier1 * uint64_t(communicator_->rank())));
  return int64_t(mix.next() >> 1);
}

std::map<std::string, Arg>
Trainer::shard(const std::map<std::string, Arg> &inputs) const {
  return shardBatch(inputs, communicator_->rank(), communicator_->size());
}

/// Adds the arguments a step function takes from the trainer (its
/// optimizer state, learning rate, step number and dropout seed, by their
/// roles) to `all`. Throws kiln::Error when `all` already holds one: an
/// input of the caller's must not stand for the trainer's own.
static void addStepArguments(const FunctionSpec &spec,
                             const ParameterStore &state, float lr,
                             int64_t step, int64_t seed,
                             std::map<std::string, Arg> &all) {
  for (const ArgSpec &arg : spec.args) {
    std::optional<Arg> value;
    switch (arg.role) {
    case ArgSpec::Role::state:
      value = state.get(arg.name);
      break;
    case ArgSpec::Role::learningRate:
      value = Tensor::full({}, lr);
      break;
    case ArgSpec::Role::step:
      value = Arg(step);
      break;
    case ArgSpec::Role::seed:
      value = Arg(seed);
      break;
    case ArgSpec::Role::input:
    case ArgSpec::Role::param:
    case ArgSpec::Role::prepared:
      break;
    }
    if (value && !all.emplace(arg.name, *value).second) {
      throw Error("kiln: the input '" + arg.name + "' given to '" + spec.name +
                  "' names an argument the trainer passes itself (its "
                  "optimizer state, learning rate, step or dropout seed)");
    }
  }
}

static Error nonFiniteLoss(float loss, int64_t step) {
  return Error("kiln: the loss is " + std::to_string(loss) + " at step " +
               std::to_string(step) +
               "; the parameters were left as they were before it");
}

float Trainer::step(const std::map<std::string, Arg> &inputs, float lr) {
  if (split_) {
    return splitStep(inputs, lr);
  }
  std::map<std::string, Arg> all = inputs;
  addStepArguments(executable_->spec(steps::kTrain), callState(), lr,
                   steps_ + 1, dropoutSeed(), all);
  std::vector<Tensor> out =
      executable_->run(steps::kTrain, callParameters(), all);
  float loss = out[0].data<float>()[0];
  if (!std::isfinite(loss)) {
    throw nonFiniteLoss(loss, steps_ + 1);
  }
  // Results: loss, the parameters, then the state, in argument order.
  keep(steps::kTrain, out, 1);
  ++steps_;
  return loss;
}

void Trainer::keep(const std::string &function, std::vector<Tensor> &out,
                   size_t first) {
  ParameterStore &parameters = onDevice_ ? deviceParameters_ : parameters_;
  ParameterStore &state = onDevice_ ? deviceState_ : state_;
  size_t k = first;
  for (const ArgSpec &arg : executable_->spec(function).args) {
    if (arg.role == ArgSpec::Role::param) {
      parameters.get(arg.name) = out[k++];
    }
  }
  for (const ArgSpec &arg : executable_->spec(function).args) {
    if (arg.role == ArgSpec::Role::state) {
      state.get(arg.name) = out[k++];
    }
  }
  hostStale_ = onDevice_;
}

float Trainer::splitStep(const std::map<std::string, Arg> &inputs, float lr) {
  std::map<std::string, Arg> local = shard(inputs);
  const FunctionSpec &gradSpec = executable_->spec(steps::kGrad);
  std::map<std::string, Arg> gradInputs = local;
  addStepArguments(gradSpec, callState(), lr, steps_ + 1, dropoutSeed(),
                   gradInputs);
  std::vector<Tensor> out =
      executable_->run(steps::kGrad, callParameters(), gradInputs);
  // A mean loss over kept tokens: this process's loss and gradients stand
  // for as many tokens as it kept. A summed loss: the processes' sums add
  // up. Any other loss: taken as a mean over rows, each process weighs as
  // many rows as its share has.
  double weight = 1.0;
  bool average = true;
  if (gradSpec.lossTokens && gradSpec.lossTokens->sum) {
    average = false;
  } else if (gradSpec.lossTokens) {
    const ArgSpec &targets = gradSpec.args[size_t(gradSpec.lossTokens->arg)];
    weight = double(
        countTokens(*gradSpec.lossTokens, local.at(targets.name).tensor));
  } else {
    for (const auto &[name, arg] : local) {
      if (!arg.isScalar && arg.tensor.rank() > 0) {
        weight = double(arg.tensor.dim(0));
        break;
      }
    }
  }
  // The gradients are averaged in place: results sharing a buffer (equal
  // gradients the compiled code returned once) get their own.
  std::vector<Tensor> grads(out.begin() + 1, out.end());
  std::set<const void *> seen;
  for (Tensor &g : grads) {
    if (!seen.insert(g.raw()).second) {
      g = g.clone();
    }
  }
  float loss = reduce(grads, out[0].data<float>()[0], weight, average);
  if (!std::isfinite(loss)) {
    throw nonFiniteLoss(loss, steps_ + 1);
  }

  std::map<std::string, Arg> update;
  size_t k = 0;
  for (const ArgSpec &arg : gradSpec.args) {
    if (arg.role == ArgSpec::Role::param) {
      update.emplace("grad." + arg.name, grads[k++]);
    }
  }
  update.emplace("loss", Tensor::full({}, loss));
  addStepArguments(executable_->spec(steps::kUpdate), callState(), lr,
                   steps_ + 1, 0, update);
  std::vector<Tensor> updated =
      executable_->run(steps::kUpdate, callParameters(), update);
  keep(steps::kUpdate, updated, 0);
  ++steps_;
  return loss;
}

void Trainer::setBucketFloats(size_t floats) {
  if (floats < 2) {
    throw Error("kiln: an all-reduce bucket holds at least 2 floats, got " +
                std::to_string(floats));
  }
  bucketFloats_ = floats;
}

float Trainer::reduce(std::vector<Tensor> &grads, float loss, double weight,
                      bool average) {
  // The weight and the weighted loss lead the first bucket, so the sum of
  // the weights is known when the gradients come back. A process that kept
  // no token adds nothing (its mean loss is 0/0).
  bool empty = weight == 0.0;
  float head[2] = {empty ? 0.0f : float(double(loss) * weight), float(weight)};
  size_t total = 2;
  for (const Tensor &g : grads) {
    total += size_t(g.numel());
  }
  bucket_.resize(std::min(total, bucketFloats_));
  // Walks the sequence head, grads[0], grads[1], ... in bucket-sized parts.
  struct Cursor {
    size_t tensor = 0; // 0: head; 1 + i: grads[i]
    size_t offset = 0;
  };
  auto segment = [&](const Cursor &c) -> std::pair<float *, size_t> {
    if (c.tensor == 0) {
      return {head, 2};
    }
    Tensor &g = grads[c.tensor - 1];
    return {g.data<float>(), size_t(g.numel())};
  };
  float scale = 1.0f;
  Cursor read;
  for (size_t done = 0; done < total;) {
    size_t n = std::min(bucket_.size(), total - done);
    // Pack: this process's terms, weighted.
    Cursor write = read;
    for (size_t filled = 0; filled < n;) {
      auto [data, size] = segment(read);
      size_t take = std::min(size - read.offset, n - filled);
      float w = read.tensor == 0 ? 1.0f : float(weight);
      for (size_t i = 0; i < take; ++i) {
        // 0 · NaN would be NaN: an empty share packs zeros.
        bucket_[filled + i] =
            empty && read.tensor != 0 ? 0.0f : data[read.offset + i] * w;
      }
      filled += take;
      read.offset += take;
      if (read.offset == size) {
        ++read.tensor;
        read.offset = 0;
      }
    }
    communicator_->allReduceSum(bucket_.data(), n);
    if (done == 0) {
      // The first two floats: the summed weighted loss and weight.
      double sum = bucket_[0], weights = bucket_[1];
      loss = float(average ? sum / weights : sum);
      scale = average ? float(1.0 / weights) : 1.0f;
    }
    // Unpack: the averaged gradients.
    for (size_t used = 0; used < n;) {
      auto [data, size] = segment(write);
      size_t take = std::min(size - write.offset, n - used);
      if (write.tensor != 0) {
        for (size_t i = 0; i < take; ++i) {
          data[write.offset + i] = bucket_[used + i] * scale;
        }
      }
      used += take;
      write.offset += take;
      if (write.offset == size) {
        ++write.tensor;
        write.offset = 0;
      }
    }
    done += n;
  }
  return loss;
}

std::vector<Tensor>
Trainer::run(const std::string &graph,
             const std::map<std::string, Arg> &inputs) const {
  if (graph == steps::kTrain) {
    throw Error("kiln: Trainer::run: use step() for the training step");
  }
  return executable_->run(graph, callParameters(), inputs);
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
  hooks.toHost = [this] { toHost(); };
  hooks.restoreStep = [this](int64_t steps) { setSteps(steps); };
  hooks.communicator = communicator_;
  return hooks;
}

} // namespace kiln
