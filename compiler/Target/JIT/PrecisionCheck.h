//===- PrecisionCheck.h - A function in fp32 and bf16, value by value -----===//
//
// The precision-checked compile: a graph compiled twice, in fp32 and in a
// reduced precision (JitOptions::precision, "bf16"), from the same
// parameters, run on the same inputs, and every value its kiln ops compute
// compared (kiln-expose-values returns them all), so that the first value
// in program order whose error exceeds the budget names the op, and the
// line of the model's C++, where precision is lost. docs/precision.md.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_JIT_PRECISIONCHECK_H
#define KILN_COMPILER_TARGET_JIT_PRECISIONCHECK_H

#include "compiler/Target/JIT/Jit.h"

#include "runtime/Function.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln {

namespace dsl {
class Module;
} // namespace dsl

struct PrecisionCheckOptions {
  /// The precision checked against fp32 (JitOptions::precision).
  std::string precision = "bf16";
  /// The largest relative error |low - fp32|_2 / |fp32|_2 a value may have:
  /// 2^-6 by default (bf16 rounds each operand of a product by up to 2^-8,
  /// a product by up to 2^-7; the rest allows errors carried from a few
  /// products before). In (0, 1].
  double budget = 1.0 / 64;
  /// Values whose fp32 root mean square is below this are judged against
  /// it instead (their error's RMS must stay within budget * floor): a value
  /// that is zero in exact arithmetic, such as the gradient of attention's
  /// key bias, holds rounding noise alone in either precision. 2^-10 by
  /// default; 0 judges every value relative to itself. At least 0.
  double floor = 1.0 / 1024;
  /// Check the graph's gradient function (kiln-autodiff: the loss and every
  /// parameter's gradient, the backward pass's values too) instead of the
  /// graph itself; the graph's first output must be a scalar loss.
  bool gradients = false;
  /// The parameters' initialization seed (both compiles get the same).
  uint64_t seed = 0;
  /// Everything else of both compiles (the CPU, ...); its precision,
  /// prePipeline and functions are the check's.
  JitOptions jit;
};

/// One value of the checked function.
struct ValueCheck {
  /// "#3:kiln.linear@model.cpp:42:7" (the kiln op and its location), or
  /// "output <result name>" for the function's own results.
  std::string value;
  std::vector<int64_t> shape;
  /// |low - fp32|_2 / |fp32|_2; 0 when both are zero, infinite when the
  /// low-precision value is not finite where the fp32 one is.
  double relativeError = 0;
  double maxAbsError = 0;
  /// The fp32 value's root mean square.
  double rms = 0;
  bool overBudget = false;
};

struct PrecisionReport {
  std::string precision;
  double budget = 0, floor = 0;
  /// The kiln ops' values in program order, then the function's outputs.
  std::vector<ValueCheck> values;
  /// The index in `values` of the first value over budget, or -1.
  int64_t firstOverBudget = -1;
  /// One line per value (error, budget, the first over it marked), ending
  /// with a verdict.
  std::string str() const;
};

/// Compiles graph `graph` of `module` in fp32 and in `options.precision`,
/// runs both on `inputs` (bound by name, parameters from the seed) and
/// compares every value. Throws kiln::Error for an unknown graph or
/// precision, a budget outside (0, 1] or a negative floor, a precision the
/// CPU lacks (bf16
/// without AVX512-BF16), or inputs the graph does not take.
PrecisionReport checkPrecision(const dsl::Module &module,
                               const std::string &graph,
                               const std::map<std::string, Arg> &inputs,
                               const PrecisionCheckOptions &options = {});

} // namespace kiln

#endif // KILN_COMPILER_TARGET_JIT_PRECISIONCHECK_H
