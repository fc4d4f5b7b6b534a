//===- Init.cpp - Parameter initializers ---------------------------------===//
//
// Rng is splitmix64 (a counter stepped by the golden-ratio increment, then
// mixed): its integers are the same on every platform. Normals come from a
// hand-written Box–Muller transform, never from std::normal_distribution,
// whose algorithm differs between standard libraries.
//
//===----------------------------------------------------------------------===//

#include "runtime/Init.h"

#include "base/SplitMix64.h"
#include "runtime/Error.h"
#include "runtime/Tensor.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <numbers>

using namespace kiln;

//===----------------------------------------------------------------------===//
// Init
//===----------------------------------------------------------------------===//

std::string Init::describe() const {
  switch (kind) {
  case Kind::zeros:
    return "zeros";
  case Kind::ones:
    return "ones";
  case Kind::constant:
    return fmt::format("constant(value={})", a);
  case Kind::normal:
    return fmt::format("normal(mean={}, std={})", a, b);
  case Kind::truncatedNormal:
    return fmt::format("truncatedNormal(mean={}, std={}, range=mean±2·std)", a,
                       b);
  case Kind::uniform:
    return fmt::format("uniform(low={}, high={})", a, b);
  case Kind::xavierUniform:
    return fmt::format("xavierUniform(gain={})", a);
  case Kind::xavierNormal:
    return fmt::format("xavierNormal(gain={})", a);
  }
  return "unknown";
}

//===----------------------------------------------------------------------===//
// Rng
//===----------------------------------------------------------------------===//

uint64_t Rng::next() {
  state_ += splitmix64::kIncrement;
  return splitmix64::finalize(state_);
}

double Rng::uniform() {
  // The top 53 bits, scaled: every value is a multiple of 2^-53 in [0, 1).
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

double Rng::normal() {
  // Box–Muller, keeping the cosine branch only so that state() is the whole
  // state of the generator (no cached second value). u1 is in (0, 1], so the
  // logarithm is finite.
  double u1 = 1.0 - uniform();
  double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

//===----------------------------------------------------------------------===//
// initialize
//===----------------------------------------------------------------------===//

namespace {
/// fan_in and fan_out of a weight, as torch.nn.init computes them.
struct Fans {
  double in;
  double out;
};
} // namespace

/// PyTorch's _calculate_fan_in_and_fan_out: for [out, in, *rest], the
/// receptive field is the product of rest.
static Fans computeFans(const Tensor &tensor, const Init &init) {
  if (tensor.rank() < 2) {
    throw Error(fmt::format("{} needs a tensor of rank >= 2 to compute fan_in "
                            "and fan_out, got shape {}",
                            init.describe(), formatShape(tensor.shape())));
  }
  double receptive = 1.0;
  for (int64_t i = 2; i < tensor.rank(); ++i) {
    receptive *= static_cast<double>(tensor.shape()[i]);
  }
  return {static_cast<double>(tensor.shape()[1]) * receptive,
          static_cast<double>(tensor.shape()[0]) * receptive};
}

/// Throws unless `value` is finite (a NaN or infinite parameter would fill
/// the tensor with garbage silently).
static void checkFinite(const Init &init, double value) {
  if (!std::isfinite(value)) {
    throw Error(fmt::format("{} has a non-finite parameter", init.describe()));
  }
}

/// Fills a non-float tensor with a constant that it can represent exactly.
static void fillInteger(Tensor &tensor, const Init &init, double value) {
  if (value != std::floor(value) ||
      (tensor.dtype() == DType::i1 && value != 0.0 && value != 1.0) ||
      (tensor.dtype() == DType::i32 &&
       (value < -2147483648.0 || value > 2147483647.0)) ||
      (tensor.dtype() == DType::i64 &&
       (value < -9223372036854775808.0 || value >= 9223372036854775808.0))) {
    throw Error(fmt::format("{} cannot fill a tensor of dtype {}",
                            init.describe(), name(tensor.dtype())));
  }
  int64_t numel = tensor.numel();
  switch (tensor.dtype()) {
  case DType::i32: {
    int32_t *data = tensor.data<int32_t>();
    for (int64_t i = 0; i < numel; ++i) {
      data[i] = static_cast<int32_t>(value);
    }
    return;
  }
  case DType::i64: {
    int64_t *data = tensor.data<int64_t>();
    for (int64_t i = 0; i < numel; ++i) {
      data[i] = static_cast<int64_t>(value);
    }
    return;
  }
  case DType::i1: {
    bool *data = tensor.data<bool>();
    for (int64_t i = 0; i < numel; ++i) {
      data[i] = value != 0.0;
    }
    return;
  }
  case DType::f32:
  case DType::bf16:
    break;
  }
}

void kiln::initialize(Tensor &tensor, const Init &init, Rng &rng) {
  if (!tensor.defined()) {
    throw Error(fmt::format("cannot initialize an undefined tensor with {}",
                            init.describe()));
  }
  checkFinite(init, init.a);
  checkFinite(init, init.b);
  if (tensor.dtype() == DType::bf16) {
    // The f32 values rounded: the same draws as an f32 tensor's.
    Tensor values = Tensor::empty(tensor.shape(), DType::f32);
    initialize(values, init, rng);
    const float *from = values.data<float>();
    BFloat16 *to = tensor.data<BFloat16>();
    for (int64_t i = 0, n = tensor.numel(); i < n; ++i) {
      to[i] = BFloat16::round(from[i]);
    }
    return;
  }

  bool isConstant = init.kind == Init::Kind::zeros ||
                    init.kind == Init::Kind::ones ||
                    init.kind == Init::Kind::constant;
  if (tensor.dtype() != DType::f32) {
    if (!isConstant) {
      throw Error(fmt::format("{} needs a tensor of dtype f32, got {}",
                              init.describe(), name(tensor.dtype())));
    }
    double value = init.kind == Init::Kind::zeros  ? 0.0
                   : init.kind == Init::Kind::ones ? 1.0
                                                   : init.a;
    fillInteger(tensor, init, value);
    return;
  }

  if (isConstant && std::fabs(init.a) > std::numeric_limits<float>::max()) {
    throw Error(fmt::format("{} is out of the range of f32", init.describe()));
  }

  float *data = tensor.data<float>();
  int64_t numel = tensor.numel();
  auto fill = [&](auto &&draw) {
    for (int64_t i = 0; i < numel; ++i) {
      data[i] = static_cast<float>(draw());
    }
  };
  auto fillNormal = [&](double mean, double std) {
    if (std < 0) {
      throw Error(
          fmt::format("{} has a negative standard deviation", init.describe()));
    }
    fill([&] { return mean + std * rng.normal(); });
  };
  auto fillUniform = [&](double low, double high) {
    if (low > high) {
      throw Error(fmt::format("{} has low > high", init.describe()));
    }
    fill([&] { return low + (high - low) * rng.uniform(); });
  };

  switch (init.kind) {
  case Init::Kind::zeros:
    fill([] { return 0.0; });
    return;
  case Init::Kind::ones:
    fill([] { return 1.0; });
    return;
  case Init::Kind::constant:
    fill([&] { return init.a; });
    return;
  case Init::Kind::normal:
    fillNormal(init.a, init.b);
    return;
  case Init::Kind::truncatedNormal: {
    double mean = init.a;
    double std = init.b;
    if (std < 0) {
      throw Error(
          fmt::format("{} has a negative standard deviation", init.describe()));
    }
    // Redraw outside [-2, 2] standard deviations: the same distribution as
    // trunc_normal_(mean, std, a=mean-2std, b=mean+2std). Each draw is
    // accepted with probability 0.954, so the loop ends quickly.
    fill([&] {
      double z = rng.normal();
      while (std::fabs(z) > 2.0) {
        z = rng.normal();
      }
      return mean + std * z;
    });
    return;
  }
  case Init::Kind::uniform:
    fillUniform(init.a, init.b);
    return;
  case Init::Kind::xavierUniform: {
    Fans fans = computeFans(tensor, init);
    double bound = init.a * std::sqrt(6.0 / (fans.in + fans.out));
    if (numel == 0) {
      return;
    }
    double magnitude = std::fabs(bound);
    fillUniform(-magnitude, magnitude);
    return;
  }
  case Init::Kind::xavierNormal: {
    Fans fans = computeFans(tensor, init);
    double std = init.a * std::sqrt(2.0 / (fans.in + fans.out));
    if (numel == 0) {
      return;
    }
    fillNormal(0.0, std::fabs(std));
    return;
  }
  }
}
