//===- Init.h - Parameter initializers ---------------------------*- C++
//-*-===//
//
// How a parameter is initialized, and the seeded generator that does it, so
// that a run is reproducible from its seed on any machine.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_INIT_H
#define KILN_RUNTIME_INIT_H

#include <cstdint>
#include <string>

namespace kiln {

class Tensor;

/// An initializer. Fan-in/fan-out for the xavier kinds follow PyTorch
/// (for a [out, in] weight: fan_in = in, fan_out = out).
struct Init {
  enum class Kind {
    zeros,
    ones,
    constant,        // value
    normal,          // N(mean, std)
    truncatedNormal, // N(mean, std) redrawn outside mean ± 2·std
                     // (trunc_normal_)
    uniform,         // U(low, high)
    xavierUniform,   // U(±gain·sqrt(6 / (fan_in + fan_out)))
    xavierNormal,    // N(0, gain·sqrt(2 / (fan_in + fan_out)))
  };
  Kind kind = Kind::zeros;
  double a = 0.0; // value | mean | low | gain
  double b = 0.0; // std | high

  static Init zeros() { return {Kind::zeros, 0, 0}; }
  static Init ones() { return {Kind::ones, 0, 0}; }
  static Init constant(double value) { return {Kind::constant, value, 0}; }
  static Init normal(double mean, double std) {
    return {Kind::normal, mean, std};
  }
  static Init truncatedNormal(double std = 0.02, double mean = 0.0) {
    return {Kind::truncatedNormal, mean, std};
  }
  static Init uniform(double low, double high) {
    return {Kind::uniform, low, high};
  }
  static Init xavierUniform(double gain = 1.0) {
    return {Kind::xavierUniform, gain, 0};
  }
  static Init xavierNormal(double gain = 1.0) {
    return {Kind::xavierNormal, gain, 0};
  }

  /// "normal(mean=0, std=0.02)" and the like, for reports.
  std::string describe() const;
};

/// A deterministic, platform-independent random generator (counter-based:
/// the same seed gives the same numbers everywhere; no std::*_distribution).
class Rng {
public:
  explicit Rng(uint64_t seed = 0) : state_(seed) {}
  /// Uniform 64 random bits.
  uint64_t next();
  /// Uniform in [0, 1).
  double uniform();
  /// Standard normal.
  double normal();
  uint64_t state() const { return state_; }
  void setState(uint64_t state) { state_ = state; }

private:
  uint64_t state_;
};

/// Fills a float tensor as `init` says. Throws kiln::Error for a tensor that
/// the initializer does not apply to (xavier on a tensor of rank < 2).
void initialize(Tensor &tensor, const Init &init, Rng &rng);

} // namespace kiln

#endif // KILN_RUNTIME_INIT_H
