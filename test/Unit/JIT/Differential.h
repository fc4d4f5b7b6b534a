//===- Differential.h - One kiln op against its reference, every size -*- C++
//-*-===//
//
// The differential harness of DifferentialTest*.cpp. A case names one kiln op,
// the symbolic shapes of its operands and results, and a naive double
// reference. The harness compiles the op through the JIT (the pipeline users
// run) and checks, at sizes that cross every tile and vector boundary
// (1, 7, 15, 16, 17, 31, 32, 33, 65, 257 along each symbol):
//
// - the forward results against the reference, elementwise;
// - the gradients kiln-autodiff derives for loss = sum_k sum(result_k · w_k)
//   (w_k fixed random weights) against central differences of the same loss
//   computed by the reference in double: element by element at the first,
//   last and tile-boundary positions of each differentiated operand, and
//   along two random directions over all elements (which catches a wrong
//   scale anywhere, such as a count that is 16x too small).
//
// Each case runs with every symbol dynamic (one compilation; every symbol
// swept on its own through it, the others at their base value), for the
// host CPU and for x86-64-v3 and x86-64-v4 (run where the host has the
// features, compiled otherwise), and with static shapes for the host (one
// compilation per size). Compilation is nearly all of a case's time, so the
// static sizes sweep the symbols together (`diagonal`): the k-th gives each
// symbol the k-th value of its sweep (descending for every other symbol, so
// that large values do not meet), so every value of every symbol is compiled
// static, in as many compilations as the longest sweep has values. Symbols a
// case keeps static in the dynamic variant (sizes an attribute needs, or
// that kiln-autodiff needs static) join that diagonal: the dynamic variant
// runs at their base value, the static one at every value. Where every
// symbol is kept static, the dynamic variant is compiled once per step of
// their diagonal instead.
//
// Nothing here shares code with the compiler: references are plain loops.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_JIT_DIFFERENTIAL_H
#define KILN_TEST_UNIT_JIT_DIFFERENTIAL_H

#include "Reference.h"

#include "compiler/Target/JIT/Jit.h"
#include "runtime/Error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace kiln::diff {

/// Sizes that cross every tiling and vector boundary of the pipeline (tiles
/// and vectors of 8, 16 and 32 lanes, and their multiples).
inline const std::vector<int64_t> kBoundarySizes = {1,  7,  15, 16, 17,
                                                    31, 32, 33, 65, 257};

using Sizes = std::map<std::string, int64_t>;
using Values = std::vector<std::vector<double>>;
/// The reference: operand values (ids and masks as numbers, an i64 scalar
/// as one element) and the sizes -> one flat row-major vector per result.
using Reference = std::function<Values(const Values &, const Sizes &)>;

/// One operand of the op under test, referred to as %a<i> in `Case::op`.
struct Operand {
  enum Kind {
    Param,  ///< f32, differentiated (kiln.kind = "param")
    Input,  ///< f32, not differentiated
    Ids,    ///< integer ids in [0, bound); `elem` i64 or i32
    Mask,   ///< i1, random with the first position of each row kept
    Scalar, ///< an i64 scalar of value `scalar`
  };
  std::vector<std::string> dims; ///< symbols ("B", "D") or literals ("3")
  Kind kind = Param;
  std::string bound;    ///< Ids: a symbol or a literal
  int64_t firstId = -1; ///< Ids: when >= 0, the value at flat index 0
  int64_t scalar = 0;   ///< Scalar: the value
  float lo = -1.0f, hi = 1.0f;
  std::string elem = "f32";
  /// When set, makes the operand's tensor instead (shape, seed, sizes).
  std::function<Tensor(const std::vector<int64_t> &, uint32_t,
                       const std::map<std::string, int64_t> &)>
      make;
};

struct Case {
  std::string name;
  std::vector<Operand> operands;
  std::vector<std::vector<std::string>> results; ///< dims of each result
  /// The op, without its type signature: "kiln.tanh %a0",
  /// "kiln.layernorm %a0, %a1, %a2 {eps = 1.0e-5 : f64}".
  std::string op;
  Reference reference;
  /// The sizes each symbol takes (default kBoundarySizes) and the value it
  /// keeps while another symbol is swept (default 17).
  std::map<std::string, std::vector<int64_t>> sweep;
  Sizes base;
  /// Symbols that stay static in the dynamic variant (sizes an attribute
  /// or the op's type inference needs statically). Such a symbol may be
  /// swept: the dynamic variant is then compiled once per value it takes.
  std::set<std::string> alwaysStatic;
  /// The operands whose types the op's signature lists, in order, when the
  /// op uses one twice (self-attention "kiln.mha %a0, %a0 ...": {0, 0, 1,
  /// ...}); by default every operand once, in order.
  std::vector<size_t> signature;
  /// False for ops without a gradient (the optimizer updates).
  bool differentiable = true;
  /// The central-difference step (relative to each element's magnitude,
  /// at least 1). Smaller where the reference has kinks (relu), so that no
  /// step crosses one.
  double fdStep = 1e-6;
  /// When set, the sizes the op accepts (causal attention: no more queries
  /// than keys). Symbols swept together (see `diagonal`) take a rejected
  /// step's values one at a time instead.
  std::function<bool(const Sizes &)> admits;
  /// |compiled - reference| <= atol + rtol·|reference|, fixed per case.
  double atol = 1e-5, rtol = 1e-4;
};

namespace detail {

inline std::vector<std::string> symbols(const Case &c) {
  std::set<std::string> seen;
  std::vector<std::string> out;
  auto add = [&](const std::vector<std::string> &dims) {
    for (const std::string &d : dims) {
      if (!d.empty() && !std::isdigit(static_cast<unsigned char>(d[0])) &&
          seen.insert(d).second) {
        out.push_back(d);
      }
    }
  };
  for (const Operand &o : c.operands) {
    add(o.dims);
  }
  for (const auto &r : c.results) {
    add(r);
  }
  return out;
}

inline int64_t sizeOf(const std::string &dim, const Sizes &sizes) {
  if (std::isdigit(static_cast<unsigned char>(dim[0]))) {
    return std::stoll(dim);
  }
  return sizes.at(dim);
}

inline std::vector<int64_t> shapeOf(const std::vector<std::string> &dims,
                                    const Sizes &sizes) {
  std::vector<int64_t> shape;
  for (const std::string &d : dims) {
    shape.push_back(sizeOf(d, sizes));
  }
  return shape;
}

/// "tensor<?x17xf32>": symbols in `dynamic` print as '?'.
inline std::string tensorType(const std::vector<std::string> &dims,
                              const std::string &elem, const Sizes &sizes,
                              const std::set<std::string> &dynamic) {
  std::string s = "tensor<";
  for (const std::string &d : dims) {
    s += dynamic.count(d) ? std::string("?") : std::to_string(sizeOf(d, sizes));
    s += "x";
  }
  return s + elem + ">";
}

inline std::string operandType(const Operand &o, const Sizes &sizes,
                               const std::set<std::string> &dynamic) {
  if (o.kind == Operand::Scalar) {
    return "i64";
  }
  std::string elem = o.kind == Operand::Mask ? "i1" : o.elem;
  return tensorType(o.dims, elem, sizes, dynamic);
}

/// The module: @f(operands) -> results, and @loss(operands, weights) ->
/// sum_k sum(result_k · w_k), differentiated into @loss_grad.
inline std::string moduleSource(const Case &c, const Sizes &sizes,
                                const std::set<std::string> &dynamic) {
  std::string args, types;
  for (size_t i = 0; i < c.operands.size(); ++i) {
    const Operand &o = c.operands[i];
    std::string type = operandType(o, sizes, dynamic);
    args += (i ? ", " : "") + std::string("%a") + std::to_string(i) + ": " +
            type + " {kiln.kind = \"" +
            (o.kind == Operand::Param ? "param" : "input") + "\"}";
    if (c.signature.empty()) {
      types += (i ? ", " : "") + type;
    }
  }
  for (size_t i = 0; i < c.signature.size(); ++i) {
    types += (i ? ", " : "") +
             operandType(c.operands[c.signature[i]], sizes, dynamic);
  }
  std::vector<std::string> resultTypes;
  std::string results;
  for (size_t k = 0; k < c.results.size(); ++k) {
    resultTypes.push_back(tensorType(c.results[k], "f32", sizes, dynamic));
    results += (k ? ", " : "") + resultTypes.back();
  }
  std::string signature =
      " : (" + types + ") -> " +
      (c.results.size() == 1 ? results : "(" + results + ")");
  std::string lhs =
      c.results.size() == 1 ? "%y" : "%y:" + std::to_string(c.results.size());
  auto resultValue = [&](size_t k) {
    return c.results.size() == 1 ? std::string("%y")
                                 : "%y#" + std::to_string(k);
  };
  std::string src = "func.func @f(" + args + ") -> (" + results + ") {\n  " +
                    lhs + " = " + c.op + signature + "\n  return ";
  for (size_t k = 0; k < c.results.size(); ++k) {
    src += (k ? ", " : "") + resultValue(k);
  }
  src += " : " + results + "\n}\n";
  if (!c.differentiable) {
    return src;
  }
  std::string lossArgs = args;
  for (size_t k = 0; k < c.results.size(); ++k) {
    lossArgs += ", %w" + std::to_string(k) + ": " + resultTypes[k] +
                " {kiln.kind = \"input\"}";
  }
  src += "func.func @loss(" + lossArgs + ") -> tensor<f32> {\n  " + lhs +
         " = " + c.op + signature + "\n";
  std::string total;
  for (size_t k = 0; k < c.results.size(); ++k) {
    std::string id = std::to_string(k);
    src += "  %p" + id + " = kiln.mul " + resultValue(k) + ", %w" + id +
           " : (" + resultTypes[k] + ", " + resultTypes[k] + ") -> " +
           resultTypes[k] + "\n";
    std::string sum = "%p" + id;
    if (!c.results[k].empty()) {
      std::string axes;
      for (size_t d = 0; d < c.results[k].size(); ++d) {
        axes += (d ? ", " : "") + std::to_string(d);
      }
      sum = "%s" + id;
      src += "  " + sum + " = kiln.reduce sum %p" + id +
             " {axes = array<i64: " + axes + ">} : (" + resultTypes[k] +
             ") -> tensor<f32>\n";
    }
    if (total.empty()) {
      total = sum;
    } else {
      src += "  %t" + id + " = kiln.add " + total + ", " + sum +
             " : (tensor<f32>, tensor<f32>) -> tensor<f32>\n";
      total = "%t" + id;
    }
  }
  src += "  return " + total + " : tensor<f32>\n}\n";
  return src;
}

/// Compiles `source` for `cpu`, with @loss differentiated into @loss_grad
/// first when asked (JitOptions::prePipeline). A module that does not
/// verify or differentiate is a kiln::Error naming the diagnostics.
inline std::shared_ptr<JitModule>
compile(const std::string &source, bool differentiate, const std::string &cpu) {
  JitOptions options;
  options.cpu = cpu;
  if (differentiate) {
    options.prePipeline = "kiln-autodiff{function=loss},canonicalize";
  }
  try {
    return JitModule::compileSource(source, options);
  } catch (const Error &e) {
    ADD_FAILURE() << e.what() << "\nin:\n" << source;
    return nullptr;
  }
}

inline uint32_t seedOf(const std::string &name, const Sizes &sizes,
                       size_t operand) {
  uint32_t h = 2166136261u;
  auto mix = [&](uint64_t v) { h = (h ^ uint32_t(v)) * 16777619u; };
  for (char ch : name) {
    mix(uint8_t(ch));
  }
  for (const auto &[symbol, size] : sizes) {
    mix(size);
  }
  mix(operand);
  return h;
}

inline Arg makeOperand(const Operand &o, const Sizes &sizes, uint32_t seed) {
  if (o.kind == Operand::Scalar) {
    return Arg(o.scalar);
  }
  std::vector<int64_t> shape = shapeOf(o.dims, sizes);
  if (o.make) {
    return o.make(shape, seed, sizes);
  }
  if (o.kind == Operand::Ids) {
    Tensor ids = ref::randomIds(shape, sizeOf(o.bound, sizes), seed);
    if (o.firstId >= 0 && ids.numel() > 0) {
      ids.data<int64_t>()[0] = o.firstId;
    }
    if (o.elem == "i64") {
      return ids;
    }
    Tensor narrow = Tensor::empty(shape, DType::i32);
    for (int64_t i = 0; i < ids.numel(); ++i) {
      narrow.data<int32_t>()[i] = int32_t(ids.data<int64_t>()[i]);
    }
    return narrow;
  }
  if (o.kind == Operand::Mask) {
    Tensor mask = Tensor::empty(shape, DType::i1);
    std::mt19937 gen(seed);
    int64_t row = shape.empty() ? 1 : shape.back();
    for (int64_t i = 0; i < mask.numel(); ++i) {
      mask.data<bool>()[i] = i % row == 0 || gen() % 4 != 0;
    }
    return mask;
  }
  return ref::randomTensor(shape, seed, o.lo, o.hi);
}

inline std::vector<double> valuesOf(const Arg &arg) {
  if (arg.isScalar) {
    return {double(arg.scalar)};
  }
  const Tensor &t = arg.tensor;
  std::vector<double> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (t.dtype()) {
    case DType::f32:
      v[i] = t.data<float>()[i];
      break;
    case DType::i64:
      v[i] = double(t.data<int64_t>()[i]);
      break;
    case DType::i32:
      v[i] = t.data<int32_t>()[i];
      break;
    case DType::bf16:
      v[i] = t.data<BFloat16>()[i].toFloat();
      break;
    case DType::i1:
      v[i] = t.data<bool>()[i] ? 1.0 : 0.0;
      break;
    }
  }
  return v;
}

/// Flat indices to check one by one: the first element, and along each
/// dimension (the others at their last index) the first, last and
/// tile-boundary positions.
inline std::vector<int64_t> probeIndices(const std::vector<int64_t> &shape) {
  static const int64_t kProbes[] = {0,  1,  6,  7,  8,  14, 15,  16, 17,
                                    31, 32, 33, 63, 64, 65, 255, 256};
  std::set<int64_t> out = {0};
  int64_t rank = int64_t(shape.size());
  for (int64_t d = 0; d < rank; ++d) {
    std::set<int64_t> positions(std::begin(kProbes), std::end(kProbes));
    positions.insert(shape[d] - 1);
    for (int64_t p : positions) {
      if (p >= shape[d]) {
        continue;
      }
      int64_t flat = 0;
      for (int64_t e = 0; e < rank; ++e) {
        flat = flat * shape[e] + (e == d ? p : shape[e] - 1);
      }
      out.insert(flat);
    }
  }
  return {out.begin(), out.end()};
}

/// What the reference says at one size: computed once, compared with
/// every compiled variant (dynamic for each CPU level, static).
struct Expected {
  Values inputs;  ///< the operands' values
  Values forward; ///< the results
  Values weights; ///< w_k of the loss
  double loss = 0, magnitude = 0;
  /// Per differentiated operand: (flat index, central difference) at the
  /// probe positions, and the directional differences with their +-1
  /// directions.
  std::vector<std::vector<std::pair<int64_t, double>>> probes;
  std::vector<std::vector<std::pair<std::vector<double>, double>>> directions;
};

inline Expected expect(const Case &c, const std::vector<Arg> &args,
                       const Sizes &sizes) {
  Expected e;
  for (const Arg &arg : args) {
    e.inputs.push_back(valuesOf(arg));
  }
  e.forward = c.reference(e.inputs, sizes);
  if (!c.differentiable) {
    return e;
  }
  for (size_t k = 0; k < c.results.size(); ++k) {
    e.weights.push_back(valuesOf(Arg(ref::randomTensor(
        shapeOf(c.results[k], sizes), seedOf(c.name + "w", sizes, k)))));
  }
  auto loss = [&](const Values &in, double *magnitude) {
    Values y = c.reference(in, sizes);
    double total = 0, abs = 0;
    for (size_t k = 0; k < y.size(); ++k) {
      for (size_t i = 0; i < y[k].size(); ++i) {
        total += y[k][i] * e.weights[k][i];
        abs += std::fabs(y[k][i] * e.weights[k][i]);
      }
    }
    if (magnitude) {
      *magnitude = abs;
    }
    return total;
  };
  e.loss = loss(e.inputs, &e.magnitude);
  Values x = e.inputs;
  for (size_t i = 0; i < c.operands.size(); ++i) {
    if (c.operands[i].kind != Operand::Param) {
      continue;
    }
    std::vector<double> &p = x[i];
    // Element by element where tiles begin and end.
    e.probes.emplace_back();
    for (int64_t flat : probeIndices(shapeOf(c.operands[i].dims, sizes))) {
      double saved = p[flat], h = c.fdStep * std::max(1.0, std::fabs(saved));
      p[flat] = saved + h;
      double up = loss(x, nullptr);
      p[flat] = saved - h;
      double down = loss(x, nullptr);
      p[flat] = saved;
      e.probes.back().push_back({flat, (up - down) / (2 * h)});
    }
    // Along random directions over every element.
    e.directions.emplace_back();
    for (uint32_t trial = 0; trial < 2; ++trial) {
      std::mt19937 gen(seedOf(c.name + "dir", sizes, i * 2 + trial));
      std::vector<double> v(p.size());
      for (double &d : v) {
        d = gen() % 2 ? 1.0 : -1.0;
      }
      std::vector<double> saved = p;
      double h = c.fdStep;
      for (size_t j = 0; j < p.size(); ++j) {
        p[j] = saved[j] + h * v[j];
      }
      double up = loss(x, nullptr);
      for (size_t j = 0; j < p.size(); ++j) {
        p[j] = saved[j] - h * v[j];
      }
      double down = loss(x, nullptr);
      p = saved;
      e.directions.back().push_back({std::move(v), (up - down) / (2 * h)});
    }
  }
  return e;
}

inline void checkForward(const Case &c, const JitModule &jit,
                         const std::vector<Arg> &args, const Expected &e,
                         const Sizes &sizes, const std::string &where) {
  std::vector<Tensor> out = jit.call("f", args);
  const Values &want = e.forward;
  ASSERT_EQ(out.size(), c.results.size()) << where;
  ASSERT_EQ(want.size(), c.results.size()) << where;
  for (size_t k = 0; k < out.size(); ++k) {
    ASSERT_EQ(out[k].shape(), shapeOf(c.results[k], sizes))
        << where << " result " << k;
    ASSERT_EQ(int64_t(want[k].size()), out[k].numel())
        << where << ": the reference's result " << k << " has a wrong size";
    int64_t bad = 0;
    for (int64_t i = 0; i < out[k].numel(); ++i) {
      double got = out[k].data<float>()[i], expected = want[k][i];
      bool bothNaN = std::isnan(got) && std::isnan(expected);
      if (!bothNaN && !(std::fabs(got - expected) <=
                        c.atol + c.rtol * std::fabs(expected))) {
        if (++bad <= 3) {
          ADD_FAILURE() << where << " result " << k << " element " << i
                        << ": got " << got << ", expected " << expected;
        }
      }
    }
    EXPECT_EQ(bad, 0) << where << " result " << k << ": of " << out[k].numel();
  }
}

inline void checkGradients(const Case &c, const JitModule &jit,
                           std::vector<Arg> args, const Expected &e,
                           const Sizes &sizes, const std::string &where) {
  for (size_t k = 0; k < c.results.size(); ++k) {
    args.push_back(Tensor::fromVector<float>(
        shapeOf(c.results[k], sizes),
        std::vector<float>(e.weights[k].begin(), e.weights[k].end())));
  }
  std::vector<Tensor> out = jit.call("loss_grad", args);
  EXPECT_NEAR(out[0].data<float>()[0], e.loss, 1e-4 * (1 + e.magnitude))
      << where << ": the loss";
  ASSERT_EQ(out.size(), e.probes.size() + 1) << where;
  size_t param = 0;
  for (size_t i = 0; i < c.operands.size(); ++i) {
    if (c.operands[i].kind != Operand::Param) {
      continue;
    }
    const Tensor &g = out[param + 1];
    ASSERT_EQ(g.numel(), int64_t(e.inputs[i].size()))
        << where << " operand " << i;
    const float *grad = g.data<float>();
    for (auto [flat, fd] : e.probes[param]) {
      EXPECT_NEAR(grad[flat], fd, 1e-3 * (1 + std::fabs(fd)))
          << where << ": d loss / d operand " << i << " element " << flat;
    }
    for (const auto &[v, fd] : e.directions[param]) {
      double dot = 0, scale = 0;
      for (size_t j = 0; j < v.size(); ++j) {
        dot += grad[j] * v[j];
        scale += std::fabs(grad[j]);
      }
      EXPECT_NEAR(dot, fd, 1e-4 * (1 + scale))
          << where << ": directional derivative along operand " << i;
    }
    ++param;
  }
}

inline std::string describe(const Sizes &sizes) {
  std::string s;
  for (const auto &[symbol, size] : sizes) {
    s += (s.empty() ? "" : " ") + symbol + "=" + std::to_string(size);
  }
  return s;
}

/// Does this host run code for `cpu`?
inline bool hostRuns(const std::string &cpu) {
  if (cpu == "x86-64-v4") {
    return __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512cd");
  }
  if (cpu == "x86-64-v3") {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("bmi2");
  }
  return true;
}

/// The operands at `sizes` (the same in every variant: seeded by the case
/// and the sizes).
inline std::vector<Arg> operandsAt(const Case &c, const Sizes &sizes) {
  std::vector<Arg> args;
  for (size_t i = 0; i < c.operands.size(); ++i) {
    args.push_back(makeOperand(c.operands[i], sizes, seedOf(c.name, sizes, i)));
  }
  return args;
}

/// Runs one compiled variant at `sizes` against the reference's values,
/// computed on first use and kept in `cache`.
inline void runAt(const Case &c, const JitModule &jit, const Sizes &sizes,
                  const std::string &where, std::map<Sizes, Expected> &cache) {
  std::vector<Arg> args = operandsAt(c, sizes);
  auto found = cache.find(sizes);
  if (found == cache.end()) {
    found = cache.emplace(sizes, expect(c, args, sizes)).first;
  }
  std::string at = where + " at " + describe(sizes);
  checkForward(c, jit, args, found->second, sizes, at);
  if (c.differentiable) {
    checkGradients(c, jit, args, found->second, sizes, at);
  }
}

} // namespace detail

/// The size assignments of a case, by the compilation that runs them.
struct Plan {
  /// The base sizes, then each symbol the dynamic variant leaves dynamic
  /// through its sweep, the others at their base value: one compilation.
  std::vector<Sizes> dynamicSweep;
  /// Where every symbol is kept static: the symbols swept together (the
  /// k-th value of each, see `diagonal`): one compilation each.
  std::vector<Sizes> staticSymbolSteps;
  /// Static shapes: the base sizes, then every symbol (the dynamic ones,
  /// then the kept-static ones) swept together: one compilation each.
  std::vector<Sizes> staticShapes;
};

namespace detail {

inline const std::vector<int64_t> &sweepOf(const Case &c,
                                           const std::string &symbol) {
  return c.sweep.count(symbol) ? c.sweep.at(symbol) : kBoundarySizes;
}

/// `symbols` swept together from `base`: step k gives each symbol the k-th
/// value of its sweep (ascending for every other symbol, descending for the
/// rest, so that the large values of two symbols do not meet; a symbol
/// whose sweep is shorter keeps its base value past its end), until every
/// value of every sweep has been taken. Steps equal to `base` are left out;
/// a step the case does not admit becomes one step per symbol it changes.
inline std::vector<Sizes> diagonal(const Case &c, const Sizes &base,
                                   const std::vector<std::string> &symbols) {
  size_t steps = 0;
  for (const std::string &s : symbols) {
    steps = std::max(steps, sweepOf(c, s).size());
  }
  std::vector<Sizes> out;
  for (size_t k = 0; k < steps; ++k) {
    Sizes at = base;
    for (size_t i = 0; i < symbols.size(); ++i) {
      const std::vector<int64_t> &values = sweepOf(c, symbols[i]);
      if (k < values.size()) {
        at[symbols[i]] = values[i % 2 ? values.size() - 1 - k : k];
      }
    }
    if (at == base) {
      continue;
    }
    if (!c.admits || c.admits(at)) {
      out.push_back(at);
      continue;
    }
    for (const std::string &s : symbols) {
      if (at.at(s) != base.at(s)) {
        Sizes one = base;
        one[s] = at.at(s);
        out.push_back(one);
      }
    }
  }
  return out;
}

} // namespace detail

inline Plan plan(const Case &c) {
  std::vector<std::string> symbols = detail::symbols(c);
  Sizes base;
  std::vector<std::string> dynamic, keptStatic;
  for (const std::string &s : symbols) {
    base[s] = c.base.count(s) ? c.base.at(s) : 17;
    (c.alwaysStatic.count(s) ? keptStatic : dynamic).push_back(s);
  }
  Plan p;
  p.dynamicSweep = {base};
  for (const std::string &s : dynamic) {
    for (int64_t size : detail::sweepOf(c, s)) {
      Sizes at = base;
      at[s] = size;
      if (at != base) {
        p.dynamicSweep.push_back(at);
      }
    }
  }
  if (dynamic.empty()) {
    p.staticSymbolSteps = detail::diagonal(c, base, keptStatic);
    return p;
  }
  // One diagonal over every symbol (a compilation each): the kept-static
  // values are compiled static, not once more dynamic at each.
  std::vector<std::string> all = dynamic;
  all.insert(all.end(), keptStatic.begin(), keptStatic.end());
  p.staticShapes = {base};
  for (const Sizes &at : detail::diagonal(c, base, all)) {
    p.staticShapes.push_back(at);
  }
  return p;
}

/// Every check of the header comment for one case.
inline void run(const Case &c) {
  std::set<std::string> dynamic;
  for (const std::string &s : detail::symbols(c)) {
    if (!c.alwaysStatic.count(s)) {
      dynamic.insert(s);
    }
  }
  Plan p = plan(c);
  std::map<Sizes, detail::Expected> cache;
  auto compileAndRun = [&](const std::vector<Sizes> &sizes,
                           const std::set<std::string> &dynamicSymbols,
                           const std::string &cpu, const std::string &what) {
    auto jit =
        detail::compile(detail::moduleSource(c, sizes.front(), dynamicSymbols),
                        c.differentiable, cpu);
    ASSERT_TRUE(jit) << c.name;
    if (!detail::hostRuns(cpu)) {
      return; // compiled, not run
    }
    for (const Sizes &at : sizes) {
      detail::runAt(c, *jit, at, c.name + " (" + what + ")", cache);
      if (::testing::Test::HasFatalFailure()) {
        return;
      }
    }
  };
  // Dynamic sizes: one compilation per CPU, every size of the sweep through
  // it; for the host, also one per step of the symbols kept static.
  for (const std::string cpu : {"host", "x86-64-v3", "x86-64-v4"}) {
    compileAndRun(p.dynamicSweep, dynamic, cpu, "dynamic, " + cpu);
    if (::testing::Test::HasFatalFailure()) {
      return;
    }
  }
  for (const Sizes &at : p.staticSymbolSteps) {
    compileAndRun({at}, dynamic, "host", "dynamic, host");
    if (::testing::Test::HasFatalFailure()) {
      return;
    }
  }
  // Static shapes: one compilation per size, on the host CPU.
  for (const Sizes &at : p.staticShapes) {
    compileAndRun({at}, {}, "host", "static");
    if (::testing::Test::HasFatalFailure()) {
      return;
    }
  }
}

} // namespace kiln::diff

#endif // KILN_TEST_UNIT_JIT_DIFFERENTIAL_H
