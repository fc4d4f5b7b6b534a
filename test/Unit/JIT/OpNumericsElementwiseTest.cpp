//===- OpNumericsElementwiseTest.cpp - Elementwise and shape op numerics --===//
//
// Each test compiles a function of one op with dynamic batch/sequence sizes,
// runs it for several sizes through the same compiled code, and compares with
// the naive loops of Reference.h.
//
// This file: elementwise ops (broadcasting arithmetic, unary ops, scale,
// dropout), softmax and reductions, shape ops and constants.
//
//===----------------------------------------------------------------------===//

#include "OpNumerics.h"
#include "Reference.h"

#include "compiler/Target/JIT/Jit.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace kiln;
using namespace kiln::opnumerics;

TEST(OpNumerics, BroadcastingArithmetic) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%x: tensor<?x?x4xf32>, %v: tensor<4xf32>, %c: tensor<?x1x1xf32>)
        -> (tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>) {
      %0 = kiln.add %x, %v : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
      %1 = kiln.sub %v, %x : (tensor<4xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
      %2 = kiln.mul %x, %c : (tensor<?x?x4xf32>, tensor<?x1x1xf32>) -> tensor<?x?x4xf32>
      %3 = kiln.div %c, %x : (tensor<?x1x1xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
      return %0, %1, %2, %3 : tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>
    })");
  Tensor v = ref::randomTensor({4}, 70);
  for (auto [b, t] : kSizes) {
    Tensor x = ref::randomTensor({b, t, 4}, 71, 0.5, 2);
    Tensor c = ref::randomTensor({b, 1, 1}, 72);
    std::vector<Tensor> out = jit->call("f", {x, v, c});
    Tensor e0 = x.clone(), e1 = x.clone(), e2 = x.clone(), e3 = x.clone();
    for (int64_t i = 0; i < x.numel(); ++i) {
      float xv = x.data<float>()[i], vv = v.data<float>()[i % 4];
      float cv = c.data<float>()[i / (t * 4)];
      e0.data<float>()[i] = xv + vv;
      e1.data<float>()[i] = vv - xv;
      e2.data<float>()[i] = xv * cv;
      e3.data<float>()[i] = cv / xv;
    }
    ref::expectClose(out[0], e0);
    ref::expectClose(out[1], e1);
    ref::expectClose(out[2], e2);
    ref::expectClose(out[3], e3);
  }
}

TEST(OpNumerics, Abs) {
  // Sizes across the vector tiles (1, 15, 16, 17, 33, 65), dynamic and
  // static; exact zeros of both signs give +0.
  auto jit = JitModule::compileSource(R"(
    func.func @dyn(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
      %0 = kiln.abs %x : (tensor<?x?xf32>) -> tensor<?x?xf32>
      return %0 : tensor<?x?xf32>
    }
    func.func @fixed(%x: tensor<3x33xf32>) -> tensor<3x33xf32> {
      %0 = kiln.abs %x : (tensor<3x33xf32>) -> tensor<3x33xf32>
      return %0 : tensor<3x33xf32>
    })");
  auto check = [&](const char *name, Tensor x) {
    x.data<float>()[0] = -0.0f;
    x.data<float>()[x.numel() - 1] = 0.0f;
    std::vector<Tensor> out = jit->call(name, {x});
    ref::expectClose(out[0], mapRef(x, [](double v) { return std::fabs(v); }));
    EXPECT_FALSE(std::signbit(out[0].data<float>()[0]));
  };
  for (int64_t n : {1, 15, 16, 17, 33, 65}) {
    check("dyn", ref::randomTensor({2, n}, 81, -4, 4));
    check("dyn", ref::randomTensor({n, 3}, 82, -4, 4));
  }
  check("fixed", ref::randomTensor({3, 33}, 83, -4, 4));
}

TEST(OpNumerics, UnaryOpsAndScale) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%x: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>,
                                          tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
      %0 = kiln.relu %x : (tensor<?x?xf32>) -> tensor<?x?xf32>
      %1 = kiln.gelu %x : (tensor<?x?xf32>) -> tensor<?x?xf32>
      %2 = kiln.gelu %x {approximate_tanh} : (tensor<?x?xf32>) -> tensor<?x?xf32>
      %3 = kiln.tanh %x : (tensor<?x?xf32>) -> tensor<?x?xf32>
      %4 = kiln.exp %x : (tensor<?x?xf32>) -> tensor<?x?xf32>
      %a = kiln.exp %x : (tensor<?x?xf32>) -> tensor<?x?xf32>
      %5 = kiln.log %a : (tensor<?x?xf32>) -> tensor<?x?xf32>
      %6 = kiln.scale %x {factor = -2.5 : f64} : (tensor<?x?xf32>) -> tensor<?x?xf32>
      return %0, %1, %2, %3, %4, %5, %6 : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>,
          tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>
    })");
  for (auto [b, t] : kSizes) {
    Tensor x = ref::randomTensor({b, t * 3}, 80, -4, 4);
    std::vector<Tensor> out = jit->call("f", {x});
    ref::expectClose(out[0],
                     mapRef(x, [](double v) { return std::max(v, 0.0); }));
    ref::expectClose(out[1],
                     mapRef(x, [](double v) { return ref::gelu(v, false); }));
    ref::expectClose(out[2],
                     mapRef(x, [](double v) { return ref::gelu(v, true); }));
    ref::expectClose(out[3], mapRef(x, [](double v) { return std::tanh(v); }));
    ref::expectClose(out[4], mapRef(x, [](double v) { return std::exp(v); }));
    ref::expectClose(out[5], x, 2e-5);
    ref::expectClose(out[6], mapRef(x, [](double v) { return -2.5 * v; }));
  }
}

TEST(OpNumerics, DropoutFollowsTheDocumentedMask) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%x: tensor<?x?xf32>, %s: i64) -> tensor<?x?xf32> {
      %0 = kiln.dropout %x, %s {p = 0.25 : f64, stream = 3 : i64} : (tensor<?x?xf32>, i64) -> tensor<?x?xf32>
      return %0 : tensor<?x?xf32>
    })");
  Tensor x = Tensor::full({40, 50}, 1.0f);
  Tensor y = jit->call("f", {x, int64_t(1234)})[0];
  int64_t kept = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    float want = ref::dropoutScale(1234, 3, 0.25, uint64_t(i));
    ASSERT_FLOAT_EQ(y.data<float>()[i], want) << i;
    kept += want != 0;
  }
  EXPECT_NEAR(double(kept) / x.numel(), 0.75, 0.03);
  // Another seed gives another mask.
  Tensor z = jit->call("f", {x, int64_t(1235)})[0];
  EXPECT_NE(y.toVector<float>(), z.toVector<float>());
}

TEST(OpNumerics, SoftmaxAndLogSoftmaxOnAnyAxis) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%x: tensor<?x5x?xf32>) -> (tensor<?x5x?xf32>, tensor<?x5x?xf32>) {
      %0 = kiln.softmax %x {axis = 1 : i64} : (tensor<?x5x?xf32>) -> tensor<?x5x?xf32>
      %1 = kiln.log_softmax %x : (tensor<?x5x?xf32>) -> tensor<?x5x?xf32>
      return %0, %1 : tensor<?x5x?xf32>, tensor<?x5x?xf32>
    })");
  for (auto [b, t] : kSizes) {
    Tensor x = ref::randomTensor({b, 5, t}, 90, -10, 10);
    std::vector<Tensor> out = jit->call("f", {x});
    Tensor sm = x.clone(), lsm = x.clone();
    auto at = [&](const Tensor &v, int64_t i, int64_t j, int64_t k) -> float & {
      return v.data<float>()[(i * 5 + j) * t + k];
    };
    for (int64_t i = 0; i < b; ++i) {
      for (int64_t k = 0; k < t; ++k) {
        double sum = 0;
        for (int64_t j = 0; j < 5; ++j) {
          sum += std::exp(double(at(x, i, j, k)));
        }
        for (int64_t j = 0; j < 5; ++j) {
          at(sm, i, j, k) = float(std::exp(double(at(x, i, j, k))) / sum);
        }
      }
      for (int64_t j = 0; j < 5; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < t; ++k) {
          sum += std::exp(double(at(x, i, j, k)));
        }
        for (int64_t k = 0; k < t; ++k) {
          at(lsm, i, j, k) = float(double(at(x, i, j, k)) - std::log(sum));
        }
      }
    }
    ref::expectClose(out[0], sm);
    ref::expectClose(out[1], lsm);
  }
}

TEST(OpNumerics, Reductions) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%x: tensor<?x4x?xf32>) -> (tensor<?x4xf32>, tensor<?x1x1xf32>, tensor<?xf32>) {
      %0 = kiln.reduce sum %x {axes = array<i64: -1>} : (tensor<?x4x?xf32>) -> tensor<?x4xf32>
      %1 = kiln.reduce mean %x {axes = array<i64: 1, 2>, keep_dims} : (tensor<?x4x?xf32>) -> tensor<?x1x1xf32>
      %2 = kiln.reduce max %x {axes = array<i64: 0, 1>} : (tensor<?x4x?xf32>) -> tensor<?xf32>
      return %0, %1, %2 : tensor<?x4xf32>, tensor<?x1x1xf32>, tensor<?xf32>
    })");
  for (auto [b, t] : kSizes) {
    Tensor x = ref::randomTensor({b, 4, t}, 100);
    std::vector<Tensor> out = jit->call("f", {x});
    Tensor sum = Tensor::zeros({b, 4}, DType::f32);
    Tensor mean = Tensor::zeros({b, 1, 1}, DType::f32);
    Tensor max = Tensor::full({t}, -INFINITY);
    for (int64_t i = 0; i < b; ++i) {
      for (int64_t j = 0; j < 4; ++j) {
        for (int64_t k = 0; k < t; ++k) {
          float v = x.data<float>()[(i * 4 + j) * t + k];
          sum.data<float>()[i * 4 + j] += v;
          mean.data<float>()[i] += v / float(4 * t);
          max.data<float>()[k] = std::max(max.data<float>()[k], v);
        }
      }
    }
    ref::expectClose(out[0], sum);
    ref::expectClose(out[1], mean);
    ref::expectClose(out[2], max, 0, 0);
  }
}

TEST(OpNumerics, ShapeOps) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%x: tensor<?x?x6xf32>, %y: tensor<?x?x2xf32>)
        -> (tensor<?x?x2x3xf32>, tensor<?x2x?x3xf32>, tensor<?x?x2xf32>, tensor<?x1x6xf32>, tensor<?x?x8xf32>, tensor<?xf32>) {
      %0 = kiln.reshape %x [0, 0, 2, -1] : (tensor<?x?x6xf32>) -> tensor<?x?x2x3xf32>
      %1 = kiln.transpose %0 [0, 2, 1, 3] : (tensor<?x?x2x3xf32>) -> tensor<?x2x?x3xf32>
      %2 = kiln.slice %x {axis = 2 : i64, start = -4 : i64, end = -2 : i64} : (tensor<?x?x6xf32>) -> tensor<?x?x2xf32>
      %3 = kiln.slice %x {axis = 1 : i64, start = -1 : i64} : (tensor<?x?x6xf32>) -> tensor<?x1x6xf32>
      %4 = kiln.concat %x, %y {axis = 2 : i64} : (tensor<?x?x6xf32>, tensor<?x?x2xf32>) -> tensor<?x?x8xf32>
      %5 = kiln.reshape %x [-1] : (tensor<?x?x6xf32>) -> tensor<?xf32>
      return %0, %1, %2, %3, %4, %5 : tensor<?x?x2x3xf32>, tensor<?x2x?x3xf32>, tensor<?x?x2xf32>, tensor<?x1x6xf32>, tensor<?x?x8xf32>, tensor<?xf32>
    })");
  for (auto [b, t] : kSizes) {
    Tensor x = ref::randomTensor({b, t, 6}, 110);
    Tensor y = ref::randomTensor({b, t, 2}, 111);
    std::vector<Tensor> out = jit->call("f", {x, y});
    ref::expectClose(out[0], x.reshape({b, t, 2, 3}), 0, 0);
    ref::expectClose(out[5], x.reshape({b * t * 6}), 0, 0);
    Tensor tr = Tensor::empty({b, 2, t, 3}, DType::f32);
    Tensor sl = Tensor::empty({b, t, 2}, DType::f32);
    Tensor last = Tensor::empty({b, 1, 6}, DType::f32);
    Tensor cat = Tensor::empty({b, t, 8}, DType::f32);
    for (int64_t i = 0; i < b; ++i) {
      for (int64_t p = 0; p < t; ++p) {
        for (int64_t c = 0; c < 6; ++c) {
          float v = x.data<float>()[(i * t + p) * 6 + c];
          tr.data<float>()[((i * 2 + c / 3) * t + p) * 3 + c % 3] = v;
          if (c >= 2 && c < 4) {
            sl.data<float>()[(i * t + p) * 2 + c - 2] = v;
          }
          if (p == t - 1) {
            last.data<float>()[i * 6 + c] = v;
          }
          cat.data<float>()[(i * t + p) * 8 + c] = v;
        }
        for (int64_t c = 0; c < 2; ++c) {
          cat.data<float>()[(i * t + p) * 8 + 6 + c] =
              y.data<float>()[(i * t + p) * 2 + c];
        }
      }
    }
    ref::expectClose(out[1], tr, 0, 0);
    ref::expectClose(out[2], sl, 0, 0);
    ref::expectClose(out[3], last, 0, 0);
    ref::expectClose(out[4], cat, 0, 0);
  }
}

TEST(OpNumerics, ConstantIsReturnedAsACopy) {
  auto jit = JitModule::compileSource(R"(
    func.func @f() -> tensor<3xf32> {
      %0 = kiln.constant dense<[1.5, -2.0, 4.0]> : tensor<3xf32>
      return %0 : tensor<3xf32>
    })");
  std::vector<Tensor> out = jit->call("f", {});
  EXPECT_EQ(out[0].toVector<float>(), (std::vector<float>{1.5f, -2.0f, 4.0f}));
  out[0].data<float>()[0] = 9; // must not alias the module's global
  EXPECT_EQ(jit->call("f", {})[0].toVector<float>()[0], 1.5f);
}
