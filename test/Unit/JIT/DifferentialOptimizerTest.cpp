//===- DifferentialOptimizerTest.cpp - Optimizer updates at every size ----===//
//
// The optimizer ops through Differential.h (forward only: they have no
// gradient): Adam and AdamW, SGD with and without momentum, and the global
// norm clipping factor, against torch.optim's rules written out in double,
// at sizes that cross every tile and vector boundary.
//
//===----------------------------------------------------------------------===//

#include "Differential.h"

using namespace kiln;
using diff::Case;
using diff::Operand;

namespace {

Operand tensor(std::vector<std::string> dims, float lo = -1.0f,
               float hi = 1.0f) {
  Operand o;
  o.dims = std::move(dims);
  o.kind = Operand::Input;
  o.lo = lo;
  o.hi = hi;
  return o;
}

Operand learningRate() { return tensor({}, 1e-3f, 1e-2f); }

Case adamCase(bool decoupled, int64_t step) {
  const double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, decay = 0.01;
  Case c;
  c.name = decoupled ? "adamw" : "adam";
  Operand stepOperand;
  stepOperand.kind = Operand::Scalar;
  stepOperand.scalar = step;
  // param, grad, m, v (v >= 0), lr, step
  c.operands = {tensor({"R", "C"}), tensor({"R", "C"}),
                tensor({"R", "C"}), tensor({"R", "C"}, 0.0f, 1.0f),
                learningRate(),     stepOperand};
  c.results = {{"R", "C"}, {"R", "C"}, {"R", "C"}};
  c.op = std::string("kiln.adam_update %a0, %a1, %a2, %a3, %a4, %a5 {") +
         (decoupled ? "decoupled, " : "") + "weight_decay = 0.01 : f64}";
  c.reference = [=](const diff::Values &in, const diff::Sizes &) {
    const std::vector<double> &p = in[0], &g = in[1], &m = in[2], &v = in[3];
    double lr = in[4][0], t = in[5][0];
    diff::Values out(3, std::vector<double>(p.size()));
    for (size_t i = 0; i < p.size(); ++i) {
      double param = p[i], grad = g[i];
      if (decoupled) {
        param -= lr * decay * param;
      } else {
        grad += decay * param;
      }
      double m1 = beta1 * m[i] + (1 - beta1) * grad;
      double v1 = beta2 * v[i] + (1 - beta2) * grad * grad;
      double mhat = m1 / (1 - std::pow(beta1, t));
      double vhat = v1 / (1 - std::pow(beta2, t));
      out[0][i] = param - lr * mhat / (std::sqrt(vhat) + eps);
      out[1][i] = m1;
      out[2][i] = v1;
    }
    return out;
  };
  c.differentiable = false;
  c.atol = 1e-5;
  c.rtol = 1e-5;
  return c;
}

Case sgdCase(double momentum, double decay) {
  Case c;
  c.name = "sgd momentum " + std::to_string(momentum);
  c.operands = {tensor({"R", "C"}), tensor({"R", "C"}), tensor({"R", "C"}),
                learningRate()};
  c.results = {{"R", "C"}, {"R", "C"}};
  c.op = "kiln.sgd_update %a0, %a1, %a2, %a3 {momentum = " +
         std::to_string(momentum) +
         " : f64, weight_decay = " + std::to_string(decay) + " : f64}";
  c.reference = [=](const diff::Values &in, const diff::Sizes &) {
    const std::vector<double> &p = in[0], &g = in[1], &buf = in[2];
    double lr = in[3][0];
    diff::Values out(2, std::vector<double>(p.size()));
    for (size_t i = 0; i < p.size(); ++i) {
      double grad = g[i] + decay * p[i];
      double b = momentum * buf[i] + grad; // the op's documented buffer
      out[0][i] = p[i] - lr * (momentum != 0 ? b : grad);
      out[1][i] = b;
    }
    return out;
  };
  c.differentiable = false;
  c.atol = 1e-5;
  c.rtol = 1e-5;
  return c;
}

} // namespace

TEST(DifferentialOptimizer, AdamWStep3) { diff::run(adamCase(true, 3)); }

TEST(DifferentialOptimizer, AdamStep1) { diff::run(adamCase(false, 1)); }

TEST(DifferentialOptimizer, SgdMomentumWeightDecay) {
  diff::run(sgdCase(0.9, 0.1));
}

TEST(DifferentialOptimizer, SgdPlain) { diff::run(sgdCase(0.0, 0.0)); }

// min(1, max_norm / (||(a, b)|| + 1e-6)) over a [R, C] and a [C] gradient:
// below 1 for the large sizes, exactly 1 for the smallest.
TEST(DifferentialOptimizer, GlobalNormScale) {
  Case c;
  c.name = "global_norm_scale";
  c.operands = {tensor({"R", "C"}), tensor({"C"})};
  c.results = {{}};
  c.op = "kiln.global_norm_scale %a0, %a1 {max_norm = 1.5 : f64}";
  c.reference = [](const diff::Values &in, const diff::Sizes &) {
    double sq = 0;
    for (const std::vector<double> &g : in) {
      for (double e : g) {
        sq += e * e;
      }
    }
    return diff::Values{{std::min(1.0, 1.5 / (std::sqrt(sq) + 1e-6))}};
  };
  c.differentiable = false;
  c.atol = 1e-6;
  c.rtol = 1e-5;
  diff::run(c);
}
