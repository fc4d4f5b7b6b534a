//===- OptimizerTest.cpp - Compiled optimizer updates vs PyTorch's rules --===//
//
// Several steps of kiln.adam_update (Adam and AdamW), kiln.sgd_update and
// kiln.global_norm_scale, compiled and run, against the update rules of
// torch.optim written out in double precision.
//
//===----------------------------------------------------------------------===//

#include "Reference.h"

#include "compiler/Target/JIT/Jit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace kiln;

namespace {
std::vector<double> values(const Tensor &t) {
  return std::vector<double>(t.data<float>(), t.data<float>() + t.numel());
}
void expectNear(const Tensor &actual, const std::vector<double> &expected,
                double tolerance) {
  ASSERT_EQ(actual.numel(), int64_t(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(actual.data<float>()[i], expected[i],
                tolerance * (1 + std::fabs(expected[i])))
        << "element " << i;
  }
}
} // namespace

TEST(Optimizers, AdamAndAdamWFollowTorch) {
  for (bool decoupled : {true, false}) {
    auto jit = JitModule::compileSource(std::string(R"(
      func.func @f(%p: tensor<3x4xf32>, %g: tensor<3x4xf32>, %m: tensor<3x4xf32>,
                   %v: tensor<3x4xf32>, %lr: tensor<f32>, %t: i64)
          -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
        %0:3 = kiln.adam_update %p, %g, %m, %v, %lr, %t
            {beta1 = 0.8 : f64, beta2 = 0.95 : f64, eps = 1.0e-6 : f64, weight_decay = 0.1 : f64)") +
                                        (decoupled ? ", decoupled" : "") + R"(}
            : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<f32>, i64)
            -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>)
        return %0#0, %0#1, %0#2 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
      })");
    Tensor p = ref::randomTensor({3, 4}, 1),
           m = Tensor::zeros({3, 4}, DType::f32),
           v = Tensor::zeros({3, 4}, DType::f32);
    std::vector<double> rp = values(p), rm(12, 0.0), rv(12, 0.0);
    double lrs[] = {0.1, 0.05, 0.02};
    for (int64_t step = 1; step <= 3; ++step) {
      Tensor g = ref::randomTensor({3, 4}, 10 + uint32_t(step));
      Tensor lr = Tensor::full({}, float(lrs[step - 1]));
      std::vector<Tensor> out = jit->call("f", {p, g, m, v, lr, step});
      // torch.optim.Adam(W) step.
      double l = lrs[step - 1];
      for (int i = 0; i < 12; ++i) {
        double grad = g.data<float>()[i];
        if (decoupled) {
          rp[i] -= l * 0.1 * rp[i];
        } else {
          grad += 0.1 * rp[i];
        }
        rm[i] = 0.8 * rm[i] + 0.2 * grad;
        rv[i] = 0.95 * rv[i] + 0.05 * grad * grad;
        double mHat = rm[i] / (1 - std::pow(0.8, double(step)));
        double vHat = rv[i] / (1 - std::pow(0.95, double(step)));
        rp[i] -= l * mHat / (std::sqrt(vHat) + 1e-6);
      }
      expectNear(out[0], rp, 1e-5);
      expectNear(out[1], rm, 1e-5);
      expectNear(out[2], rv, 1e-5);
      p = out[0];
      m = out[1];
      v = out[2];
    }
  }
}

TEST(Optimizers, SgdWithMomentumAndWeightDecay) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%p: tensor<5xf32>, %g: tensor<5xf32>, %b: tensor<5xf32>, %lr: tensor<f32>)
        -> (tensor<5xf32>, tensor<5xf32>) {
      %0:2 = kiln.sgd_update %p, %g, %b, %lr {momentum = 0.9 : f64, weight_decay = 0.01 : f64}
          : (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<f32>) -> (tensor<5xf32>, tensor<5xf32>)
      return %0#0, %0#1 : tensor<5xf32>, tensor<5xf32>
    })");
  Tensor p = ref::randomTensor({5}, 2), buf = Tensor::zeros({5}, DType::f32);
  std::vector<double> rp = values(p), rb;
  for (int step = 1; step <= 3; ++step) {
    Tensor g = ref::randomTensor({5}, 20 + uint32_t(step));
    std::vector<Tensor> out =
        jit->call("f", {p, g, buf, Tensor::full({}, 0.1f)});
    // torch.optim.SGD: d_p = g + wd·p; buf = d_p (first step) or
    // momentum·buf + d_p; p -= lr·buf.
    for (int i = 0; i < 5; ++i) {
      double dp = g.data<float>()[i] + 0.01 * rp[i];
      if (step == 1) {
        rb.push_back(dp);
      } else {
        rb[i] = 0.9 * rb[i] + dp;
      }
      rp[i] -= 0.1 * rb[i];
    }
    expectNear(out[0], rp, 1e-5);
    expectNear(out[1], rb, 1e-5);
    p = out[0];
    buf = out[1];
  }
}

TEST(Optimizers, GlobalNormClipping) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%a: tensor<2x3xf32>, %b: tensor<4xf32>) -> tensor<f32> {
      %0 = kiln.global_norm_scale %a, %b {max_norm = 0.5 : f64} : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<f32>
      return %0 : tensor<f32>
    })");
  for (float magnitude : {0.01f, 3.0f}) {
    Tensor a = ref::randomTensor({2, 3}, 3, -magnitude, magnitude),
           b = ref::randomTensor({4}, 4, -magnitude, magnitude);
    double sq = 0;
    for (double x : values(a)) {
      sq += x * x;
    }
    for (double x : values(b)) {
      sq += x * x;
    }
    double expected = std::min(1.0, 0.5 / (std::sqrt(sq) + 1e-6));
    EXPECT_NEAR(jit->call("f", {a, b})[0].data<float>()[0], expected, 1e-6);
  }
}

// `if_finite %guard`: the update applies when the guard is finite and leaves
// every element as it was (bit for bit) when it is inf, -inf or NaN, at
// sizes that cross the vector tiles (full vectors and remainders).
TEST(Optimizers, AGuardThatIsNotFiniteLeavesTheStateAsItWas) {
  auto jit = JitModule::compileSource(R"(
    func.func @adam(%p: tensor<?x?xf32>, %g: tensor<?x?xf32>, %m: tensor<?x?xf32>,
                    %v: tensor<?x?xf32>, %lr: tensor<f32>, %t: i64, %guard: tensor<f32>)
        -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
      %0:3 = kiln.adam_update %p, %g, %m, %v, %lr, %t if_finite %guard {decoupled}
          : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<f32>, i64, tensor<f32>)
          -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>)
      return %0#0, %0#1, %0#2 : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>
    }
    func.func @sgd(%p: tensor<?x?xf32>, %g: tensor<?x?xf32>, %b: tensor<?x?xf32>,
                   %lr: tensor<f32>, %guard: tensor<f32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
      %0:2 = kiln.sgd_update %p, %g, %b, %lr if_finite %guard {momentum = 0.5 : f64}
          : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<f32>, tensor<f32>)
          -> (tensor<?x?xf32>, tensor<?x?xf32>)
      return %0#0, %0#1 : tensor<?x?xf32>, tensor<?x?xf32>
    })");
  const float inf = std::numeric_limits<float>::infinity();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1},
                            {3, 15},
                            {2, 17},
                            {5, 33},
                            {1, 65}}) {
    Tensor p = ref::randomTensor({rows, cols}, 1),
           g = ref::randomTensor({rows, cols}, 2),
           m = ref::randomTensor({rows, cols}, 3),
           v = ref::randomTensor({rows, cols}, 4, 0.0f, 1.0f);
    Tensor lr = Tensor::full({}, 0.1f);
    for (float guard : {2.5f, -1e30f, inf, -inf, std::nanf("")}) {
      bool finite = std::isfinite(guard);
      std::string what = std::to_string(rows) + "x" + std::to_string(cols) +
                         " guard " + std::to_string(guard);
      std::vector<Tensor> adam = jit->call(
          "adam", {p, g, m, v, lr, int64_t(3), Tensor::full({}, guard)});
      std::vector<Tensor> sgd =
          jit->call("sgd", {p, g, m, lr, Tensor::full({}, guard)});
      for (int64_t i = 0; i < p.numel(); ++i) {
        double pi = p.data<float>()[i], gi = g.data<float>()[i],
               mi = m.data<float>()[i], vi = v.data<float>()[i];
        // AdamW (weight decay 0) at step 3, and SGD with momentum 0.5.
        double m1 = 0.9 * mi + 0.1 * gi, v1 = 0.999 * vi + 0.001 * gi * gi;
        double adamP =
            pi - 0.1 * (m1 / (1 - std::pow(0.9, 3))) /
                     (std::sqrt(v1 / (1 - std::pow(0.999, 3))) + 1e-8);
        double buf = 0.5 * mi + gi, sgdP = pi - 0.1 * buf;
        if (finite) {
          EXPECT_NEAR(adam[0].data<float>()[i], adamP, 1e-5) << what;
          EXPECT_NEAR(adam[1].data<float>()[i], m1, 1e-6) << what;
          EXPECT_NEAR(adam[2].data<float>()[i], v1, 1e-6) << what;
          EXPECT_NEAR(sgd[0].data<float>()[i], sgdP, 1e-6) << what;
          EXPECT_NEAR(sgd[1].data<float>()[i], buf, 1e-6) << what;
        } else {
          EXPECT_EQ(adam[0].data<float>()[i], p.data<float>()[i]) << what;
          EXPECT_EQ(adam[1].data<float>()[i], m.data<float>()[i]) << what;
          EXPECT_EQ(adam[2].data<float>()[i], v.data<float>()[i]) << what;
          EXPECT_EQ(sgd[0].data<float>()[i], p.data<float>()[i]) << what;
          EXPECT_EQ(sgd[1].data<float>()[i], m.data<float>()[i]) << what;
        }
      }
    }
  }
}
