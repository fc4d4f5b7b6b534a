//===- DifferentialElementwiseTest.cpp - Elementwise ops at every size ----===//
//
// The elementwise, normalization, reduction and shape ops through
// Differential.h: unary activations (and abs), broadcasting binary ops, dropout against
// its documented mask, softmax and log-softmax on the last and an inner axis,
// reductions over several axes with and without keep_dims, and reshape,
// transpose, slice and concat. The references are naive loops in double over
// row-major indices; no code is shared with the compiler.
//
// Tolerances are the harness defaults (|got - want| <= 1e-5 + 1e-4·|want|)
// everywhere: every op here is one or a few correctly rounded float
// operations or a polynomial approximation (exp, log, tanh, erf) whose error
// is a few ulp, far inside the default bounds over the input ranges used.
//
//===----------------------------------------------------------------------===//

#include "Differential.h"

#include <algorithm>
#include <numeric>
#include <optional>

using namespace kiln;
using diff::Case;
using diff::Operand;

namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// An f32 operand of the given kind, uniform in [lo, hi).
Operand tensorOperand(std::vector<std::string> dims, float lo = -1.0f,
                      float hi = 1.0f, Operand::Kind kind = Operand::Param) {
  Operand o;
  o.dims = std::move(dims);
  o.kind = kind;
  o.lo = lo;
  o.hi = hi;
  return o;
}

/// The common batch sweep: [B, T, D] with B small (it is an outer loop
/// only), T and D through every boundary size.
void sweepBatchSmall(Case &c) {
  c.base["B"] = 2;
  c.sweep["B"] = {1, 3, 16, 17};
}

/// Row-major strides of `shape`.
std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t d = int64_t(shape.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * shape[d + 1];
  }
  return strides;
}

int64_t numelOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    n *= s;
  }
  return n;
}

/// The multi-index of flat position `flat` in `shape`.
std::vector<int64_t> unflatten(int64_t flat,
                               const std::vector<int64_t> &shape) {
  std::vector<int64_t> index(shape.size());
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

/// The flat position in an operand of shape `shape` (right-aligned with
/// the result, size-1 dimensions broadcast) of the result index `index`.
int64_t broadcastFlat(const std::vector<int64_t> &index,
                      const std::vector<int64_t> &shape) {
  int64_t offset = int64_t(index.size()) - int64_t(shape.size());
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t i = shape[d] == 1 ? 0 : index[offset + d];
    flat = flat * shape[d] + i;
  }
  return flat;
}

/// Normalizes a possibly negative axis.
int64_t axisOf(int64_t axis, size_t rank) {
  return axis < 0 ? axis + int64_t(rank) : axis;
}

//===----------------------------------------------------------------------===//
// Unary ops
//===----------------------------------------------------------------------===//

/// y = f(x) over [B, T, D], x uniform in [lo, hi).
Case unaryCase(const std::string &name, const std::string &op,
               std::function<double(double)> f, float lo, float hi) {
  Case c;
  c.name = name;
  c.operands = {tensorOperand({"B", "T", "D"}, lo, hi)};
  c.results = {{"B", "T", "D"}};
  c.op = op;
  c.reference = [f](const diff::Values &in, const diff::Sizes &) {
    std::vector<double> y(in[0].size());
    for (size_t i = 0; i < y.size(); ++i) {
      y[i] = f(in[0][i]);
    }
    return diff::Values{y};
  };
  sweepBatchSmall(c);
  return c;
}

} // namespace

TEST(DifferentialElementwise, Relu) {
  // Random floats are never within the finite-difference step of 0.
  diff::run(unaryCase(
      "relu", "kiln.relu %a0", [](double x) { return x > 0 ? x : 0.0; }, -1,
      1));
}

TEST(DifferentialElementwise, Tanh) {
  // Out to where tanh saturates.
  diff::run(unaryCase(
      "tanh", "kiln.tanh %a0", [](double x) { return std::tanh(x); }, -5, 5));
}

TEST(DifferentialElementwise, Exp) {
  diff::run(unaryCase(
      "exp", "kiln.exp %a0", [](double x) { return std::exp(x); }, -4, 4));
}

TEST(DifferentialElementwise, LogOfPositive) {
  diff::run(unaryCase(
      "log", "kiln.log %a0", [](double x) { return std::log(x); }, 0.05f, 4));
}

TEST(DifferentialElementwise, Abs) {
  // |x| has a kink at 0: the values keep 0.05 away from it (a random sign
  // on a magnitude in [0.05, 2)), so that no finite-difference step crosses
  // it. The gradient at 0 itself is checked in Gradients.AbsIsZeroAtZero.
  Case c = unaryCase(
      "abs", "kiln.abs %a0", [](double x) { return std::fabs(x); }, 0.05f, 2);
  c.operands[0].make = [](const std::vector<int64_t> &shape, uint32_t seed,
                          const diff::Sizes &) {
    Tensor t = ref::randomTensor(shape, seed, 0.05f, 2.0f);
    std::mt19937 signs(seed + 1);
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (signs() % 2 != 0) {
        t.data<float>()[i] = -t.data<float>()[i];
      }
    }
    return t;
  };
  diff::run(c);
}

TEST(DifferentialElementwise, Silu) {
  // Out to where the sigmoid saturates on both sides.
  diff::run(unaryCase(
      "silu", "kiln.silu %a0",
      [](double x) { return x / (1.0 + std::exp(-x)); }, -8, 8));
}

TEST(DifferentialElementwise, GeluErf) {
  diff::run(unaryCase(
      "gelu", "kiln.gelu %a0", [](double x) { return ref::gelu(x, false); }, -4,
      4));
}

TEST(DifferentialElementwise, GeluTanh) {
  diff::run(unaryCase(
      "gelu tanh", "kiln.gelu %a0 {approximate_tanh}",
      [](double x) { return ref::gelu(x, true); }, -4, 4));
}

TEST(DifferentialElementwise, Scale) {
  diff::run(unaryCase(
      "scale", "kiln.scale %a0 {factor = -1.25 : f64}",
      [](double x) { return -1.25 * x; }, -1, 1));
}

//===----------------------------------------------------------------------===//
// Binary ops with broadcasting
//===----------------------------------------------------------------------===//

namespace {

/// Values of random sign with magnitude in [0.5, 2): denominators kept
/// away from 0.
Tensor awayFromZero(const std::vector<int64_t> &shape, uint32_t seed,
                    const diff::Sizes &) {
  Tensor t = ref::randomTensor(shape, seed, 0.5f, 2.0f);
  std::mt19937 gen(seed ^ 0x5bd1e995u);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (gen() % 2) {
      t.data<float>()[i] = -t.data<float>()[i];
    }
  }
  return t;
}

/// lhs `op` rhs with NumPy broadcasting into `result`.
Case binaryCase(const std::string &name, const std::string &op,
                std::function<double(double, double)> f,
                std::vector<std::string> lhs, std::vector<std::string> rhs,
                std::vector<std::string> result, bool rhsAwayFromZero = false) {
  Case c;
  c.name = name;
  Operand a = tensorOperand(lhs), b = tensorOperand(rhs);
  if (rhsAwayFromZero) {
    b.make = awayFromZero;
  }
  c.operands = {a, b};
  c.results = {result};
  c.op = op + " %a0, %a1";
  c.reference = [=](const diff::Values &in, const diff::Sizes &s) {
    std::vector<int64_t> shape = diff::detail::shapeOf(result, s);
    std::vector<int64_t> lshape = diff::detail::shapeOf(lhs, s);
    std::vector<int64_t> rshape = diff::detail::shapeOf(rhs, s);
    std::vector<double> y(numelOf(shape));
    for (int64_t i = 0; i < int64_t(y.size()); ++i) {
      std::vector<int64_t> index = unflatten(i, shape);
      y[i] = f(in[0][broadcastFlat(index, lshape)],
               in[1][broadcastFlat(index, rshape)]);
    }
    return diff::Values{y};
  };
  sweepBatchSmall(c);
  return c;
}

double add(double a, double b) { return a + b; }
double sub(double a, double b) { return a - b; }
double mul(double a, double b) { return a * b; }
double divide(double a, double b) { return a / b; }

} // namespace

TEST(DifferentialElementwise, AddSameShape) {
  diff::run(binaryCase("add same", "kiln.add", add, {"B", "T", "D"},
                       {"B", "T", "D"}, {"B", "T", "D"}));
}

TEST(DifferentialElementwise, AddRowVector) {
  // A bias: its gradient sums over B and T.
  diff::run(binaryCase("add row", "kiln.add", add, {"B", "T", "D"}, {"D"},
                       {"B", "T", "D"}));
}

TEST(DifferentialElementwise, AddBothSidesBroadcast) {
  // [B, 1, D] + [T, 1] -> [B, T, D]: each operand broadcast along another
  // axis.
  diff::run(binaryCase("add both", "kiln.add", add, {"B", "1", "D"}, {"T", "1"},
                       {"B", "T", "D"}));
}

TEST(DifferentialElementwise, SubVectorMinusTensor) {
  diff::run(binaryCase("sub row lhs", "kiln.sub", sub, {"D"}, {"B", "T", "D"},
                       {"B", "T", "D"}));
}

TEST(DifferentialElementwise, SubBatchScalar) {
  diff::run(binaryCase("sub batch", "kiln.sub", sub, {"B", "T", "D"},
                       {"B", "1", "1"}, {"B", "T", "D"}));
}

TEST(DifferentialElementwise, MulSameShape) {
  diff::run(binaryCase("mul same", "kiln.mul", mul, {"B", "T", "D"},
                       {"B", "T", "D"}, {"B", "T", "D"}));
}

TEST(DifferentialElementwise, MulColumn) {
  diff::run(binaryCase("mul column", "kiln.mul", mul, {"B", "T", "D"},
                       {"B", "T", "1"}, {"B", "T", "D"}));
}

TEST(DifferentialElementwise, MulBatchScalarLhs) {
  diff::run(binaryCase("mul batch lhs", "kiln.mul", mul, {"B", "1", "1"},
                       {"B", "T", "D"}, {"B", "T", "D"}));
}

TEST(DifferentialElementwise, DivSameShape) {
  diff::run(binaryCase("div same", "kiln.div", divide, {"B", "T", "D"},
                       {"B", "T", "D"}, {"B", "T", "D"}, true));
}

TEST(DifferentialElementwise, DivByColumn) {
  // A normalization: each row by its own denominator.
  diff::run(binaryCase("div column", "kiln.div", divide, {"B", "T", "D"},
                       {"B", "T", "1"}, {"B", "T", "D"}, true));
}

TEST(DifferentialElementwise, DivVectorByTensor) {
  diff::run(binaryCase("div row lhs", "kiln.div", divide, {"D"},
                       {"B", "T", "D"}, {"B", "T", "D"}, true));
}

TEST(DifferentialElementwise, DivByRowVector) {
  diff::run(binaryCase("div row rhs", "kiln.div", divide, {"B", "T", "D"},
                       {"D"}, {"B", "T", "D"}, true));
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

namespace {

/// kiln.dropout of [B, T, D] with the i64 seed `seed`: y = x · scale(i),
/// i the row-major index over the whole tensor.
Case dropoutCase(const std::string &name, double p, int64_t stream,
                 int64_t seed) {
  Case c;
  c.name = name;
  Operand s;
  s.kind = Operand::Scalar;
  s.scalar = seed;
  c.operands = {tensorOperand({"B", "T", "D"}), s};
  c.results = {{"B", "T", "D"}};
  c.op = "kiln.dropout %a0, %a1 {p = " + std::to_string(p) +
         " : f64, stream = " + std::to_string(stream) + " : i64}";
  c.reference = [=](const diff::Values &in, const diff::Sizes &) {
    uint64_t key = uint64_t(int64_t(in[1][0]));
    std::vector<double> y(in[0].size());
    for (size_t i = 0; i < y.size(); ++i) {
      y[i] = in[0][i] * double(ref::dropoutScale(key, stream, p, i));
    }
    return diff::Values{y};
  };
  sweepBatchSmall(c);
  return c;
}

} // namespace

TEST(DifferentialElementwise, DropoutTenPercent) {
  diff::run(dropoutCase("dropout 0.1", 0.1, 7, 1234));
}

TEST(DifferentialElementwise, DropoutHalfLargeSeed) {
  // A seed above 2^32 (its high bits must reach the mask) and stream 0.
  diff::run(dropoutCase("dropout 0.5", 0.5, 0, 0x123456789abLL));
}

//===----------------------------------------------------------------------===//
// Softmax and log-softmax
//===----------------------------------------------------------------------===//

namespace {

/// (log-)softmax of `dims` along `axis`, inputs in [-4, 4).
Case softmaxCase(const std::string &name, bool log,
                 std::vector<std::string> dims, int64_t axis,
                 bool explicitAxis) {
  Case c;
  c.name = name;
  c.operands = {tensorOperand(dims, -4, 4)};
  c.results = {dims};
  c.op = std::string(log ? "kiln.log_softmax" : "kiln.softmax") + " %a0";
  if (explicitAxis) {
    c.op += " {axis = " + std::to_string(axis) + " : i64}";
  }
  c.reference = [=](const diff::Values &in, const diff::Sizes &s) {
    std::vector<int64_t> shape = diff::detail::shapeOf(dims, s);
    int64_t a = axisOf(axis, shape.size());
    int64_t outer = 1, n = shape[a], inner = 1;
    for (int64_t d = 0; d < a; ++d) {
      outer *= shape[d];
    }
    for (size_t d = a + 1; d < shape.size(); ++d) {
      inner *= shape[d];
    }
    const std::vector<double> &x = in[0];
    std::vector<double> y(x.size());
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        auto at = [&](int64_t j) { return (o * n + j) * inner + i; };
        double mx = -INFINITY;
        for (int64_t j = 0; j < n; ++j) {
          mx = std::max(mx, x[at(j)]);
        }
        double sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          sum += std::exp(x[at(j)] - mx);
        }
        for (int64_t j = 0; j < n; ++j) {
          y[at(j)] = log ? x[at(j)] - mx - std::log(sum)
                         : std::exp(x[at(j)] - mx) / sum;
        }
      }
    }
    return diff::Values{y};
  };
  sweepBatchSmall(c);
  return c;
}

} // namespace

TEST(DifferentialElementwise, SoftmaxLastAxis) {
  diff::run(softmaxCase("softmax last", false, {"B", "T", "D"}, -1, false));
}

TEST(DifferentialElementwise, SoftmaxMiddleAxis) {
  diff::run(softmaxCase("softmax axis 1", false, {"B", "T", "D"}, 1, true));
}

TEST(DifferentialElementwise, LogSoftmaxLastAxis) {
  diff::run(softmaxCase("log_softmax last", true, {"B", "T", "D"}, -1, true));
}

TEST(DifferentialElementwise, LogSoftmaxMiddleAxis) {
  diff::run(softmaxCase("log_softmax axis 1", true, {"B", "T", "D"}, 1, true));
}

TEST(DifferentialElementwise, LogSoftmaxFirstAxisNegative) {
  // axis = -3 of a rank-3 tensor: the batch axis.
  diff::run(
      softmaxCase("log_softmax axis -3", true, {"B", "T", "D"}, -3, true));
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

namespace {

/// Distinct values (a random permutation of an evenly spaced grid over
/// [-1, 1)), so a max has no ties, nor near-ties within the
/// finite-difference step.
Tensor distinctValues(const std::vector<int64_t> &shape, uint32_t seed,
                      const diff::Sizes &) {
  Tensor t = Tensor::empty(shape, DType::f32);
  std::vector<int64_t> order(t.numel());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  for (int64_t i = 0; i < t.numel(); ++i) {
    t.data<float>()[i] = float(-1.0 + 2.0 * double(order[i]) / t.numel());
  }
  return t;
}

/// kiln.reduce `kind` of [B, T, D] over `axes`.
Case reduceCase(const std::string &name, const std::string &kind,
                std::vector<int64_t> axes, bool keepDims,
                std::vector<std::string> result) {
  Case c;
  c.name = name;
  std::vector<std::string> dims = {"B", "T", "D"};
  Operand x = tensorOperand(dims);
  if (kind == "max") {
    x.make = distinctValues;
  }
  c.operands = {x};
  c.results = {result};
  std::string list;
  for (size_t i = 0; i < axes.size(); ++i) {
    list += (i ? ", " : "") + std::to_string(axes[i]);
  }
  c.op = "kiln.reduce " + kind + " %a0 {axes = array<i64: " + list + ">" +
         (keepDims ? ", keep_dims" : "") + "}";
  c.reference = [=](const diff::Values &in, const diff::Sizes &s) {
    std::vector<int64_t> shape = diff::detail::shapeOf(dims, s);
    std::vector<bool> reduced(shape.size(), false);
    for (int64_t a : axes) {
      reduced[axisOf(a, shape.size())] = true;
    }
    // The kept dimensions, in order; with keep_dims the size-1 dimensions
    // change nothing in the row-major layout.
    std::vector<int64_t> kept;
    int64_t count = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (reduced[d]) {
        count *= shape[d];
      } else {
        kept.push_back(shape[d]);
      }
    }
    std::vector<double> y(numelOf(kept), kind == "max" ? -INFINITY : 0.0);
    for (int64_t i = 0; i < int64_t(in[0].size()); ++i) {
      std::vector<int64_t> index = unflatten(i, shape);
      int64_t out = 0;
      for (size_t d = 0; d < shape.size(); ++d) {
        if (!reduced[d]) {
          out = out * shape[d] + index[d];
        }
      }
      if (kind == "max") {
        y[out] = std::max(y[out], in[0][i]);
      } else {
        y[out] += in[0][i];
      }
    }
    if (kind == "mean") {
      for (double &v : y) {
        v /= double(count);
      }
    }
    return diff::Values{y};
  };
  sweepBatchSmall(c);
  return c;
}

} // namespace

TEST(DifferentialElementwise, ReduceSumLastAxis) {
  // Fails: the gradient's reshape that reinserts the reduced axis gets -1
  // for both dynamic kept sizes ("at most one size may be -1").
  diff::run(reduceCase("sum -1", "sum", {-1}, false, {"B", "T"}));
}

TEST(DifferentialElementwise, ReduceSumLastAxisStaticBatch) {
  // ReduceSumLastAxis with one dynamic kept size only, which differentiates.
  Case c = reduceCase("sum -1 static B", "sum", {-1}, false, {"B", "T"});
  c.alwaysStatic = {"B"};
  diff::run(c);
}

TEST(DifferentialElementwise, ReduceSumInnerAxes) {
  diff::run(reduceCase("sum 1,2", "sum", {1, 2}, false, {"B"}));
}

TEST(DifferentialElementwise, ReduceSumFirstAxisKeepDims) {
  diff::run(reduceCase("sum 0 keep", "sum", {0}, true, {"1", "T", "D"}));
}

TEST(DifferentialElementwise, ReduceSumAllAxes) {
  diff::run(reduceCase("sum all", "sum", {0, 1, 2}, false, {}));
}

// kiln-autodiff refuses a mean over a dynamic dimension (its count is a
// run-time value), so the reduced symbols stay static; they are still swept,
// one dynamic compilation per size.

TEST(DifferentialElementwise, ReduceMeanLastAxisKeepDims) {
  // The shape a layer norm takes its mean in.
  Case c = reduceCase("mean -1 keep", "mean", {-1}, true, {"B", "T", "1"});
  c.alwaysStatic = {"D"};
  c.sweep["T"] = {1, 7, 16, 17, 33};
  diff::run(c);
}

TEST(DifferentialElementwise, ReduceMeanInnerAxesKeepDims) {
  Case c = reduceCase("mean 1,2 keep", "mean", {1, 2}, true, {"B", "1", "1"});
  c.alwaysStatic = {"T", "D"};
  c.sweep["T"] = {1, 16, 33};
  diff::run(c);
}

TEST(DifferentialElementwise, ReduceMeanInnerAxes) {
  Case c = reduceCase("mean 1,2", "mean", {1, 2}, false, {"B"});
  c.alwaysStatic = {"T", "D"};
  c.sweep["T"] = {1, 16, 33};
  diff::run(c);
}

TEST(DifferentialElementwise, ReduceMeanMiddleAxis) {
  // Fails like ReduceSumLastAxis: B and D are both dynamic in the reshape.
  Case c = reduceCase("mean 1", "mean", {1}, false, {"B", "D"});
  c.alwaysStatic = {"T"};
  diff::run(c);
}

TEST(DifferentialElementwise, ReduceMeanMiddleAxisStaticBatch) {
  // ReduceMeanMiddleAxis with D the only dynamic kept size.
  Case c = reduceCase("mean 1 static B", "mean", {1}, false, {"B", "D"});
  c.alwaysStatic = {"B", "T"};
  c.sweep["B"] = {1, 3};
  c.sweep["T"] = {1, 16, 33};
  diff::run(c);
}

TEST(DifferentialElementwise, ReduceMaxLastAxis) {
  diff::run(reduceCase("max -1", "max", {-1}, false, {"B", "T"}));
}

TEST(DifferentialElementwise, ReduceMaxOuterAxes) {
  diff::run(reduceCase("max 0,1", "max", {0, 1}, false, {"D"}));
}

TEST(DifferentialElementwise, ReduceMaxMiddleAxisKeepDims) {
  diff::run(reduceCase("max 1 keep", "max", {1}, true, {"B", "1", "D"}));
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

namespace {

/// A case whose result is a permutation of its operands' elements:
/// `gather(sizes)` gives, for each result element, (operand, flat index).
Case movementCase(const std::string &name, const std::string &op,
                  std::vector<std::vector<std::string>> operands,
                  std::vector<std::string> result,
                  std::function<std::pair<int64_t, int64_t>(
                      const std::vector<int64_t> &, const diff::Sizes &)>
                      source) {
  Case c;
  c.name = name;
  for (auto &dims : operands) {
    c.operands.push_back(tensorOperand(dims));
  }
  c.results = {result};
  c.op = op;
  c.reference = [=](const diff::Values &in, const diff::Sizes &s) {
    std::vector<int64_t> shape = diff::detail::shapeOf(result, s);
    std::vector<double> y(numelOf(shape));
    for (int64_t i = 0; i < int64_t(y.size()); ++i) {
      auto [operand, flat] = source(unflatten(i, shape), s);
      y[i] = in[operand][flat];
    }
    return diff::Values{y};
  };
  sweepBatchSmall(c);
  return c;
}

/// kiln.reshape: the row-major order is unchanged.
Case reshapeCase(const std::string &name, std::vector<std::string> from,
                 const std::string &shape, std::vector<std::string> to) {
  return movementCase(
      name, "kiln.reshape %a0 " + shape, {from}, to,
      [to](const std::vector<int64_t> &index, const diff::Sizes &s) {
        std::vector<int64_t> shape = diff::detail::shapeOf(to, s);
        int64_t flat = 0;
        for (size_t d = 0; d < shape.size(); ++d) {
          flat = flat * shape[d] + index[d];
        }
        return std::pair<int64_t, int64_t>(0, flat);
      });
}

/// kiln.transpose: result dimension i is input dimension permutation[i].
Case transposeCase(const std::string &name, std::vector<std::string> from,
                   std::vector<int64_t> permutation) {
  std::vector<std::string> to;
  std::string list;
  for (size_t i = 0; i < permutation.size(); ++i) {
    to.push_back(from[permutation[i]]);
    list += (i ? ", " : "") + std::to_string(permutation[i]);
  }
  return movementCase(
      name, "kiln.transpose %a0 [" + list + "]", {from}, to,
      [=](const std::vector<int64_t> &index, const diff::Sizes &s) {
        std::vector<int64_t> shape = diff::detail::shapeOf(from, s);
        std::vector<int64_t> strides = stridesOf(shape);
        int64_t flat = 0;
        for (size_t i = 0; i < permutation.size(); ++i) {
          flat += index[i] * strides[permutation[i]];
        }
        return std::pair<int64_t, int64_t>(0, flat);
      });
}

/// kiln.slice along `axis` with Python's meaning of start and end.
Case sliceCase(const std::string &name, std::vector<std::string> from,
               int64_t axis, int64_t start, std::optional<int64_t> end,
               std::vector<std::string> to) {
  std::string attrs = "axis = " + std::to_string(axis) +
                      " : i64, start = " + std::to_string(start) + " : i64";
  if (end) {
    attrs += ", end = " + std::to_string(*end) + " : i64";
  }
  return movementCase(name, "kiln.slice %a0 {" + attrs + "}", {from}, to,
                      [=](std::vector<int64_t> index, const diff::Sizes &s) {
                        std::vector<int64_t> shape =
                            diff::detail::shapeOf(from, s);
                        int64_t a = axisOf(axis, shape.size());
                        int64_t first = start < 0 ? start + shape[a] : start;
                        index[a] += first;
                        int64_t flat = 0;
                        for (size_t d = 0; d < shape.size(); ++d) {
                          flat = flat * shape[d] + index[d];
                        }
                        return std::pair<int64_t, int64_t>(0, flat);
                      });
}

/// kiln.concat of `inputs` along `axis`.
Case concatCase(const std::string &name,
                std::vector<std::vector<std::string>> inputs, int64_t axis,
                std::vector<std::string> to) {
  std::string list;
  for (size_t i = 0; i < inputs.size(); ++i) {
    list += (i ? ", %a" : "%a") + std::to_string(i);
  }
  return movementCase(
      name,
      "kiln.concat " + list + " {axis = " + std::to_string(axis) + " : i64}",
      inputs, to, [=](std::vector<int64_t> index, const diff::Sizes &s) {
        int64_t a = axisOf(axis, to.size());
        for (size_t k = 0;; ++k) {
          std::vector<int64_t> shape = diff::detail::shapeOf(inputs[k], s);
          if (index[a] < shape[a] || k + 1 == inputs.size()) {
            int64_t flat = 0;
            for (size_t d = 0; d < shape.size(); ++d) {
              flat = flat * shape[d] + index[d];
            }
            return std::pair<int64_t, int64_t>(int64_t(k), flat);
          }
          index[a] -= shape[a];
        }
      });
}

} // namespace

TEST(DifferentialElementwise, ReshapeSplitHeads) {
  // [B, T, 24] -> [B, T, 3, 8]: the head count and width are attributes.
  diff::run(reshapeCase("reshape split heads", {"B", "T", "24"}, "[0, 0, 3, 8]",
                        {"B", "T", "3", "8"}));
}

TEST(DifferentialElementwise, ReshapeMergeHeads) {
  diff::run(reshapeCase("reshape merge heads", {"B", "T", "4", "8"},
                        "[0, 0, -1]", {"B", "T", "32"}));
}

TEST(DifferentialElementwise, ReshapeInsertUnitAxis) {
  // The inner dimension carried through by 0 and by -1.
  diff::run(reshapeCase("reshape unit axis", {"B", "T", "D"}, "[0, 0, 1, -1]",
                        {"B", "T", "1", "D"}));
}

TEST(DifferentialElementwise, TransposeLastTwo) {
  diff::run(transposeCase("transpose 0,2,1", {"B", "T", "D"}, {0, 2, 1}));
}

TEST(DifferentialElementwise, TransposeHeads) {
  // [B, T, H, D] -> [B, H, T, D], as attention does.
  diff::run(
      transposeCase("transpose 0,2,1,3", {"B", "T", "3", "D"}, {0, 2, 1, 3}));
}

TEST(DifferentialElementwise, TransposeRotate) {
  diff::run(transposeCase("transpose 2,0,1", {"B", "T", "D"}, {2, 0, 1}));
}

TEST(DifferentialElementwise, SliceLastAxisFromStart) {
  // [1:6] of the last axis; D >= 7 so the slice is in bounds.
  Case c = sliceCase("slice [1:6]", {"B", "T", "D"}, -1, 1, 6, {"B", "T", "5"});
  c.sweep["D"] = {7, 15, 16, 17, 31, 32, 33, 65, 257};
  diff::run(c);
}

TEST(DifferentialElementwise, SliceLastAxisNegativeStart) {
  // The last five of the last axis, to the end.
  Case c = sliceCase("slice [-5:]", {"B", "T", "D"}, 2, -5, std::nullopt,
                     {"B", "T", "5"});
  c.sweep["D"] = {7, 15, 16, 17, 31, 32, 33, 65, 257};
  diff::run(c);
}

TEST(DifferentialElementwise, SliceNegativeBothEnds) {
  // [-6:-1] of the sequence axis.
  Case c =
      sliceCase("slice [-6:-1]", {"B", "T", "D"}, 1, -6, -1, {"B", "5", "D"});
  c.sweep["T"] = {7, 15, 16, 17, 31, 32, 33, 65, 257};
  diff::run(c);
}

TEST(DifferentialElementwise, SliceBothEndsOfStaticAxis) {
  // [3:-4] of a static axis of 40, counted from both ends.
  diff::run(
      sliceCase("slice [3:-4]", {"B", "40", "D"}, 1, 3, -4, {"B", "33", "D"}));
}

TEST(DifferentialElementwise, SliceLastPosition) {
  // [-1:] of the sequence axis: the last position of any length.
  diff::run(sliceCase("slice [-1:]", {"B", "T", "D"}, 1, -1, std::nullopt,
                      {"B", "1", "D"}));
}

TEST(DifferentialElementwise, ConcatLastAxis) {
  diff::run(concatCase("concat -1", {{"B", "T", "3"}, {"B", "T", "5"}}, -1,
                       {"B", "T", "8"}));
}

TEST(DifferentialElementwise, ConcatMiddleAxisThreeInputs) {
  diff::run(concatCase("concat 1",
                       {{"B", "2", "D"}, {"B", "1", "D"}, {"B", "5", "D"}}, 1,
                       {"B", "8", "D"}));
}
