//===- GradientTest.cpp - kiln-autodiff against finite differences --------===//
//
// Small loss functions are differentiated by kiln-autodiff, compiled and run;
// every parameter gradient is compared with central finite differences of an
// independent double-precision implementation of the same loss.
//
//===----------------------------------------------------------------------===//

#include "Differential.h"

#include "../Models/DoubleReference.h"

#include "compiler/InitAll.h"
#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Target/JIT/Jit.h"
#include "runtime/Error.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

using namespace kiln;

namespace {

/// Differentiates @loss of `source` and compiles the module.
std::shared_ptr<JitModule> differentiate(const std::string &source) {
  auto jit = diff::detail::compile(source, /*differentiate=*/true, "host");
  EXPECT_TRUE(jit);
  return jit;
}

using Loss = std::function<double(const std::vector<std::vector<double>> &)>;

std::vector<double> toDouble(const Tensor &t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) {
    v.push_back(t.data<float>()[i]);
  }
  return v;
}

/// Compares the gradient of every tensor in `params` (indices into `args`)
/// with central differences of `loss` over double copies of `args`.
void expectGradientsMatch(const JitModule &jit, const std::vector<Arg> &args,
                          const std::vector<size_t> &params, const Loss &loss) {
  std::vector<Tensor> out = jit.call("loss_grad", args);
  ASSERT_EQ(out.size(), params.size() + 1);
  std::vector<std::vector<double>> values;
  for (const Arg &arg : args) {
    values.push_back(arg.isScalar ? std::vector<double>{}
                     : arg.tensor.dtype() == DType::f32
                         ? toDouble(arg.tensor)
                         : std::vector<double>{});
  }
  EXPECT_NEAR(out[0].data<float>()[0], loss(values),
              1e-4 * (1 + std::fabs(loss(values))));
  for (size_t k = 0; k < params.size(); ++k) {
    std::vector<double> &p = values[params[k]];
    const Tensor &g = out[k + 1];
    ASSERT_EQ(g.numel(), int64_t(p.size()));
    for (size_t i = 0; i < p.size(); ++i) {
      double saved = p[i], h = 1e-6 * std::max(1.0, std::fabs(saved));
      p[i] = saved + h;
      double up = loss(values);
      p[i] = saved - h;
      double down = loss(values);
      p[i] = saved;
      double fd = (up - down) / (2 * h);
      EXPECT_NEAR(g.data<float>()[i], fd, 1e-4 + 1e-3 * std::fabs(fd))
          << "parameter #" << k << " element " << i;
    }
  }
}

} // namespace

TEST(Gradients, AbsIsZeroAtZero) {
  // d|x|/dx = sign(x), and 0 at x == 0 (as PyTorch), at sizes across the
  // vector tiles; away from 0, DifferentialElementwise.Abs checks it against
  // finite differences.
  auto jit = differentiate(R"(
    func.func @loss(%x: tensor<?x?xf32> {kiln.kind = "param", kiln.name = "x"})
        -> tensor<f32> {
      %0 = kiln.abs %x : (tensor<?x?xf32>) -> tensor<?x?xf32>
      %1 = kiln.reduce sum %0 {axes = array<i64: 0, 1>} : (tensor<?x?xf32>) -> tensor<f32>
      return %1 : tensor<f32>
    })");
  ASSERT_TRUE(jit);
  for (int64_t n : {1, 15, 16, 17, 33, 65}) {
    Tensor x = ref::randomTensor({2, n}, 12, -2, 2);
    x.data<float>()[0] = 0.0f;
    x.data<float>()[x.numel() - 1] = -0.0f;
    std::vector<Tensor> out = jit->call("loss_grad", {x});
    ASSERT_EQ(out.size(), 2u);
    for (int64_t i = 0; i < x.numel(); ++i) {
      float v = x.data<float>()[i];
      float sign = v > 0 ? 1.0f : v < 0 ? -1.0f : 0.0f;
      EXPECT_EQ(out[1].data<float>()[i], sign) << "n " << n << " element " << i;
    }
  }
}

TEST(Gradients, LinearTanhLogSoftmaxSum) {
  auto jit = differentiate(R"(
    func.func @loss(%x: tensor<?x4xf32> {kiln.kind = "input"},
                    %w: tensor<3x4xf32> {kiln.kind = "param"},
                    %b: tensor<3xf32> {kiln.kind = "param"}) -> tensor<f32> {
      %0 = kiln.linear %x, %w, %b : (tensor<?x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<?x3xf32>
      %1 = kiln.tanh %0 : (tensor<?x3xf32>) -> tensor<?x3xf32>
      %2 = kiln.log_softmax %1 : (tensor<?x3xf32>) -> tensor<?x3xf32>
      %3 = kiln.reduce sum %2 {axes = array<i64: 0, 1>} : (tensor<?x3xf32>) -> tensor<f32>
      return %3 : tensor<f32>
    })");
  for (int64_t rows : {1, 5}) {
    Tensor x = ref::randomTensor({rows, 4}, 1),
           w = ref::randomTensor({3, 4}, 2), b = ref::randomTensor({3}, 3);
    expectGradientsMatch(*jit, {x, w, b}, {1, 2}, [&](const auto &v) {
      double total = 0;
      for (int64_t r = 0; r < rows; ++r) {
        double t[3], mx = -1e300, sum = 0;
        for (int o = 0; o < 3; ++o) {
          double acc = v[2][o];
          for (int i = 0; i < 4; ++i) {
            acc += v[0][r * 4 + i] * v[1][o * 4 + i];
          }
          t[o] = std::tanh(acc);
          mx = std::max(mx, t[o]);
        }
        for (double e : t) {
          sum += std::exp(e - mx);
        }
        for (double e : t) {
          total += e - mx - std::log(sum);
        }
      }
      return total;
    });
  }
}

// max over the rows and over the last axis (kept): the gradient goes to the
// maximum of each slice, shared equally between tied maxima.
TEST(Gradients, ReduceMax) {
  auto jit = differentiate(R"(
    func.func @loss(%x: tensor<?x4xf32> {kiln.kind = "input"},
                    %w: tensor<3x4xf32> {kiln.kind = "param"}) -> tensor<f32> {
      %0 = kiln.linear %x, %w : (tensor<?x4xf32>, tensor<3x4xf32>) -> tensor<?x3xf32>
      %1 = kiln.reduce max %0 {axes = array<i64: 0>} : (tensor<?x3xf32>) -> tensor<3xf32>
      %2 = kiln.reduce max %0 {axes = array<i64: 1>, keep_dims} : (tensor<?x3xf32>) -> tensor<?x1xf32>
      %3 = kiln.tanh %2 : (tensor<?x1xf32>) -> tensor<?x1xf32>
      %4 = kiln.reduce sum %1 {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
      %5 = kiln.reduce sum %3 {axes = array<i64: 0, 1>} : (tensor<?x1xf32>) -> tensor<f32>
      %6 = kiln.mul %4, %5 : (tensor<f32>, tensor<f32>) -> tensor<f32>
      return %6 : tensor<f32>
    })");
  for (int64_t rows : {1, 4}) {
    Tensor x = ref::randomTensor({rows, 4}, 7),
           w = ref::randomTensor({3, 4}, 8);
    expectGradientsMatch(*jit, {x, w}, {1}, [&](const auto &v) {
      std::vector<double> y(rows * 3);
      for (int64_t r = 0; r < rows; ++r) {
        for (int o = 0; o < 3; ++o) {
          double acc = 0;
          for (int i = 0; i < 4; ++i) {
            acc += v[0][r * 4 + i] * v[1][o * 4 + i];
          }
          y[r * 3 + o] = acc;
        }
      }
      double columns = 0, rowsTerm = 0;
      for (int o = 0; o < 3; ++o) {
        double m = -1e300;
        for (int64_t r = 0; r < rows; ++r) {
          m = std::max(m, y[r * 3 + o]);
        }
        columns += m;
      }
      for (int64_t r = 0; r < rows; ++r) {
        rowsTerm += std::tanh(std::max({y[r * 3], y[r * 3 + 1], y[r * 3 + 2]}));
      }
      return columns * rowsTerm;
    });
  }
  // Ties share: d max(x)/dx = 1/2 at each of two equal maxima (x is the
  // parameter here: w = 1 and an identity input).
  auto tied = differentiate(R"(
    func.func @loss(%x: tensor<4xf32> {kiln.kind = "param"}) -> tensor<f32> {
      %0 = kiln.reduce max %x {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      return %0 : tensor<f32>
    })");
  std::vector<Tensor> out = tied->call(
      "loss_grad", {Tensor::fromVector<float>({4}, {1.0f, 3.0f, -2.0f, 3.0f})});
  EXPECT_EQ(out[1].toVector<float>(),
            (std::vector<float>{0.0f, 0.5f, 0.0f, 0.5f}));
}

TEST(Gradients, BroadcastingArithmeticAndMean) {
  // loss = mean(exp((x·a - b) / c) + log(c)) with a, b, c broadcast.
  auto jit = differentiate(R"(
    func.func @loss(%x: tensor<2x3xf32>, %a: tensor<3xf32>, %b: tensor<2x1xf32>,
                    %c: tensor<3xf32>) -> tensor<f32> {
      %0 = kiln.mul %x, %a : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
      %1 = kiln.sub %0, %b : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
      %2 = kiln.div %1, %c : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
      %3 = kiln.exp %2 : (tensor<2x3xf32>) -> tensor<2x3xf32>
      %4 = kiln.log %c : (tensor<3xf32>) -> tensor<3xf32>
      %5 = kiln.add %3, %4 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
      %6 = kiln.scale %5 {factor = 0.5 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
      %7 = kiln.reduce mean %6 {axes = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
      return %7 : tensor<f32>
    })");
  Tensor x = ref::randomTensor({2, 3}, 4), a = ref::randomTensor({3}, 5),
         b = ref::randomTensor({2, 1}, 6),
         c = ref::randomTensor({3}, 7, 0.5, 2);
  // No parameter marks: every f32 argument is differentiated, x included.
  expectGradientsMatch(*jit, {x, a, b, c}, {0, 1, 2, 3}, [](const auto &v) {
    double total = 0;
    for (int r = 0; r < 2; ++r) {
      for (int j = 0; j < 3; ++j) {
        double e = std::exp((v[0][r * 3 + j] * v[1][j] - v[2][r]) / v[3][j]);
        total += 0.5 * (e + std::log(v[3][j]));
      }
    }
    return total / 6;
  });
}

TEST(Gradients, MatmulTransposesReshapeSoftmax) {
  // Every transpose combination of a batched matmul, a transpose and a
  // reshape, a softmax on the middle axis, weighted sums.
  auto jit = differentiate(R"(
    func.func @loss(%a: tensor<2x3x4xf32>, %b: tensor<2x5x4xf32>, %c: tensor<2x4x3xf32>,
                    %d: tensor<2x4x5xf32>, %wt: tensor<2x3x5xf32>) -> tensor<f32> {
      %0 = kiln.matmul %a, %b {transpose_rhs} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>) -> tensor<2x3x5xf32>
      %1 = kiln.matmul %c, %d {transpose_lhs} : (tensor<2x4x3xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
      %2 = kiln.matmul %c, %b {transpose_lhs, transpose_rhs} : (tensor<2x4x3xf32>, tensor<2x5x4xf32>) -> tensor<2x3x5xf32>
      %3 = kiln.add %0, %1 : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
      %4 = kiln.mul %3, %2 : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
      %5 = kiln.softmax %4 {axis = 1 : i64} : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
      %6 = kiln.transpose %5 [0, 2, 1] : (tensor<2x3x5xf32>) -> tensor<2x5x3xf32>
      %7 = kiln.reshape %6 [2, 15] : (tensor<2x5x3xf32>) -> tensor<2x15xf32>
      %8 = kiln.reshape %wt [2, 15] : (tensor<2x3x5xf32>) -> tensor<2x15xf32>
      %9 = kiln.transpose %8 [0, 1] : (tensor<2x15xf32>) -> tensor<2x15xf32>
      %10 = kiln.mul %7, %9 : (tensor<2x15xf32>, tensor<2x15xf32>) -> tensor<2x15xf32>
      %11 = kiln.reduce sum %10 {axes = array<i64: 0, 1>} : (tensor<2x15xf32>) -> tensor<f32>
      return %11 : tensor<f32>
    })");
  std::vector<Tensor> t = {
      ref::randomTensor({2, 3, 4}, 8), ref::randomTensor({2, 5, 4}, 9),
      ref::randomTensor({2, 4, 3}, 10), ref::randomTensor({2, 4, 5}, 11),
      ref::randomTensor({2, 3, 5}, 12)};
  expectGradientsMatch(
      *jit, {t[0], t[1], t[2], t[3], t[4]}, {0, 1, 2, 3, 4}, [](const auto &v) {
        const auto &a = v[0], &b = v[1], &c = v[2], &d = v[3], &w = v[4];
        double total = 0;
        for (int n = 0; n < 2; ++n) {
          double s[3][5];
          for (int i = 0; i < 3; ++i) {
            for (int j = 0; j < 5; ++j) {
              double m0 = 0, m1 = 0, m2 = 0;
              for (int k = 0; k < 4; ++k) {
                m0 += a[(n * 3 + i) * 4 + k] * b[(n * 5 + j) * 4 + k];
                m1 += c[(n * 4 + k) * 3 + i] * d[(n * 4 + k) * 5 + j];
                m2 += c[(n * 4 + k) * 3 + i] * b[(n * 5 + j) * 4 + k];
              }
              s[i][j] = (m0 + m1) * m2;
            }
          }
          for (int j = 0; j < 5; ++j) {
            double mx = -1e300, sum = 0;
            for (int i = 0; i < 3; ++i) {
              mx = std::max(mx, s[i][j]);
            }
            for (int i = 0; i < 3; ++i) {
              sum += std::exp(s[i][j] - mx);
            }
            for (int i = 0; i < 3; ++i) {
              // softmax[n, i, j] lands at [n, j, i] after the transpose, i.e.
              // at flat position j·3 + i of the reshaped row, weighted by the
              // reshaped w at that position (w's own layout is [n, 3, 5]).
              total += std::exp(s[i][j] - mx) / sum * w[n * 15 + j * 3 + i];
            }
          }
        }
        return total;
      });
}

TEST(Gradients, OpsWithoutAGradientAreNamed) {
  mlir::DialectRegistry registry;
  registerAllDialects(registry);
  registerAllPasses();
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"(
    func.func @loss(%g: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<f32> {
      %0 = kiln.activation_grad relu %g, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %1 = kiln.reduce sum %0 {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      return %1 : tensor<f32>
    })",
                                                        &context);
  std::string message;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    message = d.str();
    return mlir::success();
  });
  mlir::PassManager pm(&context);
  ASSERT_TRUE(mlir::succeeded(mlir::kiln::addPipeline(pm, "kiln-autodiff")));
  EXPECT_TRUE(mlir::failed(pm.run(*module)));
  EXPECT_EQ(message, "'kiln.activation_grad' op cannot be differentiated "
                     "yet: it has no gradient");
}

namespace {
double layerNormRef(const std::vector<double> &row, size_t offset, size_t d,
                    const std::vector<double> &g, const std::vector<double> &b,
                    double eps, bool stdEps, std::vector<double> &out) {
  double mean = 0, sq = 0;
  for (size_t i = 0; i < d; ++i) {
    mean += row[offset + i] / double(d);
  }
  for (size_t i = 0; i < d; ++i) {
    sq += (row[offset + i] - mean) * (row[offset + i] - mean);
  }
  double inv = stdEps ? 1.0 / (std::sqrt(sq / double(d - 1)) + eps)
                      : 1.0 / std::sqrt(sq / double(d) + eps);
  out.resize(d);
  for (size_t i = 0; i < d; ++i) {
    out[i] = (row[offset + i] - mean) * inv * g[i] + b[i];
  }
  return inv;
}
} // namespace

TEST(Gradients, EmbeddingLayerNormCrossEntropy) {
  // A tiny language model: embeddings with a padding row, LayerNorm, a
  // projection and cross-entropy with ignore_index and label smoothing.
  auto jit = differentiate(R"(
    func.func @loss(%ids: tensor<?x?xi64> {kiln.kind = "input"},
                    %t: tensor<?x?xi64> {kiln.kind = "input"},
                    %table: tensor<7x4xf32> {kiln.kind = "param"},
                    %g: tensor<4xf32> {kiln.kind = "param"},
                    %b: tensor<4xf32> {kiln.kind = "param"},
                    %w: tensor<5x4xf32> {kiln.kind = "param"},
                    %c: tensor<5xf32> {kiln.kind = "param"}) -> tensor<f32> {
      %0 = kiln.embedding %ids, %table {padding_idx = 0 : i64} : (tensor<?x?xi64>, tensor<7x4xf32>) -> tensor<?x?x4xf32>
      %1 = kiln.layernorm %0, %g, %b : (tensor<?x?x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
      %2 = kiln.linear %1, %w, %c : (tensor<?x?x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<?x?x5xf32>
      %3 = kiln.cross_entropy %2, %t {ignore_index = 4 : i64, label_smoothing = 0.1 : f64}
          : (tensor<?x?x5xf32>, tensor<?x?xi64>) -> tensor<f32>
      return %3 : tensor<f32>
    })");
  Tensor ids = Tensor::fromVector<int64_t>({2, 3}, {3, 0, 5, 1, 3, 6});
  Tensor targets = Tensor::fromVector<int64_t>({2, 3}, {1, 4, 2, 0, 3, 4});
  Tensor table = ref::randomTensor({7, 4}, 20),
         g = ref::randomTensor({4}, 21, 0.5, 1.5),
         b = ref::randomTensor({4}, 22), w = ref::randomTensor({5, 4}, 23),
         c = ref::randomTensor({5}, 24);
  std::vector<Arg> args = {ids, targets, table, g, b, w, c};
  expectGradientsMatch(*jit, args, {2, 3, 4, 5, 6}, [&](const auto &v) {
    double total = 0, count = 0;
    for (int p = 0; p < 6; ++p) {
      int64_t id = ids.data<int64_t>()[p], t = targets.data<int64_t>()[p];
      std::vector<double> h;
      layerNormRef(v[2], size_t(id) * 4, 4, v[3], v[4], 1e-5, false, h);
      double logits[5], mx = -1e300, sum = 0, mean = 0;
      for (int o = 0; o < 5; ++o) {
        logits[o] = v[6][o];
        for (int i = 0; i < 4; ++i) {
          logits[o] += h[i] * v[5][o * 4 + i];
        }
        mx = std::max(mx, logits[o]);
      }
      for (double l : logits) {
        sum += std::exp(l - mx);
      }
      double lse = mx + std::log(sum);
      for (double l : logits) {
        mean += (lse - l) / 5;
      }
      if (t != 4) {
        total += 0.9 * (lse - logits[t]) + 0.1 * mean;
        count += 1;
      }
    }
    return total / count;
  });
  // Seed 003's check: the padding row gets exactly zero gradient, the row of
  // the token at position 0 does not.
  std::vector<Tensor> out = jit->call("loss_grad", args);
  const float *dTable = out[1].data<float>();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(dTable[0 * 4 + i], 0.0f);
  }
  double row3 = 0;
  for (int i = 0; i < 4; ++i) {
    row3 += std::fabs(dTable[3 * 4 + i]);
  }
  EXPECT_GT(row3, 1e-6);
}

TEST(Gradients, FeedForwardEachActivationThenStdEpsNormAndNll) {
  for (const char *act : {"relu", "gelu", "gelu_tanh"}) {
    auto jit = differentiate(std::string(R"(
      func.func @loss(%x: tensor<?x3xf32> {kiln.kind = "input"},
                      %t: tensor<?xi64> {kiln.kind = "input"},
                      %w1: tensor<6x3xf32> {kiln.kind = "param"},
                      %w2: tensor<3x6xf32> {kiln.kind = "param"},
                      %b1: tensor<6xf32> {kiln.kind = "param"},
                      %b2: tensor<3xf32> {kiln.kind = "param"},
                      %g: tensor<3xf32> {kiln.kind = "param"},
                      %b: tensor<3xf32> {kiln.kind = "param"}) -> tensor<f32> {
        %0 = kiln.ffn )") + act +
                             R"( %x, %w1, %w2 biases(%b1, %b2)
            : (tensor<?x3xf32>, tensor<6x3xf32>, tensor<3x6xf32>, tensor<6xf32>, tensor<3xf32>) -> tensor<?x3xf32>
        %1 = kiln.layernorm %0, %g, %b {eps = 1.0e-3 : f64, mode = #kiln<norm_mode std_eps>}
            : (tensor<?x3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
        %2 = kiln.log_softmax %1 : (tensor<?x3xf32>) -> tensor<?x3xf32>
        %3 = kiln.nll_loss %2, %t {reduction = #kiln<loss_reduction sum>, label_smoothing = 0.2 : f64}
            : (tensor<?x3xf32>, tensor<?xi64>) -> tensor<f32>
        return %3 : tensor<f32>
      })");
    std::string name = act;
    Tensor x = ref::randomTensor({4, 3}, 30, -2, 2);
    Tensor t = Tensor::fromVector<int64_t>({4}, {0, 2, 1, 2});
    std::vector<Arg> args = {x,
                             t,
                             ref::randomTensor({6, 3}, 31),
                             ref::randomTensor({3, 6}, 32),
                             ref::randomTensor({6}, 33),
                             ref::randomTensor({3}, 34),
                             ref::randomTensor({3}, 35, 0.5, 1.5),
                             ref::randomTensor({3}, 36)};
    expectGradientsMatch(*jit, args, {2, 3, 4, 5, 6, 7}, [&](const auto &v) {
      double total = 0;
      for (int r = 0; r < 4; ++r) {
        std::vector<double> y(3);
        for (int o = 0; o < 3; ++o) {
          y[o] = v[5][o];
        }
        for (int k = 0; k < 6; ++k) {
          double h = v[4][k];
          for (int i = 0; i < 3; ++i) {
            h += v[0][r * 3 + i] * v[2][k * 3 + i];
          }
          double a = name == "relu" ? std::max(h, 0.0)
                                    : ref::gelu(h, name == "gelu_tanh");
          for (int o = 0; o < 3; ++o) {
            y[o] += a * v[3][o * 6 + k];
          }
        }
        std::vector<double> n;
        layerNormRef(y, 0, 3, v[6], v[7], 1e-3, true, n);
        double mx = std::max({n[0], n[1], n[2]}), sum = 0, mean = 0;
        for (double e : n) {
          sum += std::exp(e - mx);
        }
        double lse = mx + std::log(sum);
        for (double e : n) {
          mean += (e - lse) / 3;
        }
        total += -0.8 * (n[t.data<int64_t>()[r]] - lse) - 0.2 * mean;
      }
      return total;
    });
  }
}

TEST(Gradients, DropoutReusesItsMask) {
  auto jit = differentiate(R"(
    func.func @loss(%x: tensor<3x8xf32> {kiln.kind = "input"}, %s: i64,
                    %w: tensor<8xf32> {kiln.kind = "param"}) -> tensor<f32> {
      %0 = kiln.mul %x, %w : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
      %1 = kiln.dropout %0, %s {p = 0.5 : f64, stream = 2 : i64} : (tensor<3x8xf32>, i64) -> tensor<3x8xf32>
      %2 = kiln.tanh %1 : (tensor<3x8xf32>) -> tensor<3x8xf32>
      %3 = kiln.reduce sum %2 {axes = array<i64: 0, 1>} : (tensor<3x8xf32>) -> tensor<f32>
      return %3 : tensor<f32>
    })");
  Tensor x = ref::randomTensor({3, 8}, 40);
  int64_t seed = 77;
  expectGradientsMatch(
      *jit, {x, seed, ref::randomTensor({8}, 41)}, {2}, [&](const auto &v) {
        double total = 0;
        for (int i = 0; i < 24; ++i) {
          double keep = ref::dropoutScale(uint64_t(seed), 2, 0.5, uint64_t(i));
          total += std::tanh(v[0][i] * v[2][i % 8] * keep);
        }
        return total;
      });
}

TEST(Gradients, SinusoidalEncodingPassesTheGradient) {
  auto jit = differentiate(R"(
    func.func @loss(%x: tensor<2x3x4xf32> {kiln.kind = "input"},
                    %w: tensor<4xf32> {kiln.kind = "param"}) -> tensor<f32> {
      %0 = kiln.mul %x, %w : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
      %1 = kiln.pe sinusoidal %0 : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
      %2 = kiln.tanh %1 : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
      %3 = kiln.reduce sum %2 {axes = array<i64: 0, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<f32>
      return %3 : tensor<f32>
    })");
  Tensor x = ref::randomTensor({2, 3, 4}, 50);
  expectGradientsMatch(
      *jit, {x, ref::randomTensor({4}, 51)}, {1}, [](const auto &v) {
        double total = 0;
        for (int i = 0; i < 24; ++i) {
          int c = i % 4, pos = (i / 4) % 3;
          double div = std::exp((c / 2 * 2) * -(std::log(10000.0) / 4));
          double pe = c % 2 ? std::cos(pos * div) : std::sin(pos * div);
          total += std::tanh(v[0][i] * v[1][c] + pe);
        }
        return total;
      });
}

namespace {
using Vec = std::vector<double>;

/// Multi-head attention with projections, in double precision ([B, T,
/// width] row-major); `mask` [B, tk] (non-zero attends) or null.
Vec mhaD(const Vec &q_in, const Vec &kv_in, int64_t b, int64_t tq, int64_t tk,
         int64_t d, int64_t dkv, const Vec &wq, const Vec &wk, const Vec &wv,
         const Vec &wo, const Vec *bq, const Vec *bk, const Vec *bv,
         const Vec *bo, const Vec *mask, int64_t heads, bool causal) {
  Vec q = dref::linear(q_in, b * tq, d, wq, d, bq),
      k = dref::linear(kv_in, b * tk, dkv, wk, d, bk),
      v = dref::linear(kv_in, b * tk, dkv, wv, d, bv);
  Vec o = dref::attention(q, k, v, mask, b, tq, tk, d, heads, causal);
  return dref::linear(o, b * tq, d, wo, d, bo);
}
} // namespace

TEST(Gradients, MultiHeadAttentionSelfAndCross) {
  // Causal self-attention with a padding mask and biases feeding a
  // cross-attention (keys from another sequence of another width).
  auto jit = differentiate(R"(
    func.func @loss(%x: tensor<2x3x4xf32> {kiln.kind = "input"},
                    %m: tensor<2x3xi64> {kiln.kind = "input"},
                    %enc: tensor<2x5x6xf32> {kiln.kind = "input"},
                    %c: tensor<2x3x4xf32> {kiln.kind = "input"},
                    %wq: tensor<4x4xf32> {kiln.kind = "param"}, %wk: tensor<4x4xf32> {kiln.kind = "param"},
                    %wv: tensor<4x4xf32> {kiln.kind = "param"}, %wo: tensor<4x4xf32> {kiln.kind = "param"},
                    %bq: tensor<4xf32> {kiln.kind = "param"}, %bk: tensor<4xf32> {kiln.kind = "param"},
                    %bv: tensor<4xf32> {kiln.kind = "param"}, %bo: tensor<4xf32> {kiln.kind = "param"},
                    %xq: tensor<4x4xf32> {kiln.kind = "param"}, %xk: tensor<4x6xf32> {kiln.kind = "param"},
                    %xv: tensor<4x6xf32> {kiln.kind = "param"}, %xo: tensor<4x4xf32> {kiln.kind = "param"}) -> tensor<f32> {
      %0 = kiln.mha %x, %x weights(%wq, %wk, %wv, %wo) biases(%bq, %bk, %bv, %bo) mask %m
          {num_heads = 2 : i64, causal}
          : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>,
             tensor<4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x3xi64>)
          -> tensor<2x3x4xf32>
      %1 = kiln.mha %0, %enc weights(%xq, %xk, %xv, %xo) {num_heads = 2 : i64}
          : (tensor<2x3x4xf32>, tensor<2x5x6xf32>, tensor<4x4xf32>, tensor<4x6xf32>, tensor<4x6xf32>,
             tensor<4x4xf32>) -> tensor<2x3x4xf32>
      %2 = kiln.mul %1, %c : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
      %3 = kiln.reduce sum %2 {axes = array<i64: 0, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<f32>
      return %3 : tensor<f32>
    })");
  Tensor mask = Tensor::fromVector<int64_t>({2, 3}, {1, 1, 1, 1, 1, 0});
  std::vector<Arg> args = {ref::randomTensor({2, 3, 4}, 60), mask,
                           ref::randomTensor({2, 5, 6}, 61),
                           ref::randomTensor({2, 3, 4}, 62)};
  uint32_t seed = 63;
  for (auto shape : std::vector<std::vector<int64_t>>{{4, 4},
                                                      {4, 4},
                                                      {4, 4},
                                                      {4, 4},
                                                      {4},
                                                      {4},
                                                      {4},
                                                      {4},
                                                      {4, 4},
                                                      {4, 6},
                                                      {4, 6},
                                                      {4, 4}}) {
    args.push_back(ref::randomTensor(shape, seed++));
  }
  Vec m(mask.data<int64_t>(), mask.data<int64_t>() + mask.numel());
  expectGradientsMatch(
      *jit, args, {4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
      [&](const auto &v) {
        Vec h = mhaD(v[0], v[0], 2, 3, 3, 4, 4, v[4], v[5], v[6], v[7], &v[8],
                     &v[9], &v[10], &v[11], &m, 2, true);
        Vec y = mhaD(h, v[2], 2, 3, 5, 4, 6, v[12], v[13], v[14], v[15],
                     nullptr, nullptr, nullptr, nullptr, nullptr, 2, false);
        double total = 0;
        for (size_t i = 0; i < y.size(); ++i) {
          total += y[i] * v[3][i];
        }
        return total;
      });
}

TEST(Gradients, LearnedPositionsWithOffset) {
  auto jit = differentiate(R"(
    func.func @loss(%x: tensor<2x3x4xf32> {kiln.kind = "input"}, %off: i64,
                    %t: tensor<6x4xf32> {kiln.kind = "param"}) -> tensor<f32> {
      %0 = kiln.pe learned %x table %t offset %off : (tensor<2x3x4xf32>, tensor<6x4xf32>, i64) -> tensor<2x3x4xf32>
      %1 = kiln.tanh %0 : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
      %2 = kiln.reduce sum %1 {axes = array<i64: 0, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<f32>
      return %2 : tensor<f32>
    })");
  int64_t offset = 2;
  expectGradientsMatch(
      *jit,
      {ref::randomTensor({2, 3, 4}, 70), offset, ref::randomTensor({6, 4}, 71)},
      {2}, [&](const auto &v) {
        double total = 0;
        for (int i = 0; i < 24; ++i) {
          int c = i % 4, pos = (i / 4) % 3;
          total += std::tanh(v[0][i] + v[2][(pos + offset) * 4 + c]);
        }
        return total;
      });
}

TEST(Gradients, SliceAndConcat) {
  // A fused-QKV style split (slices from both ends) and a concatenation.
  auto jit = differentiate(R"(
    func.func @loss(%w: tensor<6x2xf32>, %c: tensor<3x2xf32>) -> tensor<f32> {
      %0 = kiln.slice %w {axis = 0 : i64, start = 0 : i64, end = 2 : i64} : (tensor<6x2xf32>) -> tensor<2x2xf32>
      %1 = kiln.slice %w {axis = 0 : i64, start = -2 : i64} : (tensor<6x2xf32>) -> tensor<2x2xf32>
      %2 = kiln.slice %w {axis = 0 : i64, start = 1 : i64, end = -4 : i64} : (tensor<6x2xf32>) -> tensor<1x2xf32>
      %3 = kiln.mul %0, %1 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
      %4 = kiln.concat %3, %2 {axis = 0 : i64} : (tensor<2x2xf32>, tensor<1x2xf32>) -> tensor<3x2xf32>
      %5 = kiln.tanh %4 : (tensor<3x2xf32>) -> tensor<3x2xf32>
      %6 = kiln.mul %5, %c : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
      %7 = kiln.reduce sum %6 {axes = array<i64: 0, 1>} : (tensor<3x2xf32>) -> tensor<f32>
      return %7 : tensor<f32>
    })");
  expectGradientsMatch(
      *jit, {ref::randomTensor({6, 2}, 80), ref::randomTensor({3, 2}, 81)},
      {0, 1}, [](const auto &v) {
        const auto &w = v[0], &c = v[1];
        double total = 0;
        for (int j = 0; j < 2; ++j) {
          for (int r = 0; r < 2; ++r) {
            total +=
                std::tanh(w[r * 2 + j] * w[(4 + r) * 2 + j]) * c[r * 2 + j];
          }
          total += std::tanh(w[1 * 2 + j]) * c[2 * 2 + j];
        }
        return total;
      });
}

// Empty pieces: a concatenation with a piece of length 0 (its empty slice
// had not verified) and a linear layer of width 0 (the weight gradient's
// reshape to [-1, 0] read the 0 as "keep this dimension" and returned a
// gradient of another shape). Their gradients are empty, of their shapes.
TEST(Gradients, EmptyPiecesAndZeroWidthLayers) {
  auto jit = differentiate(R"(
    func.func @loss(%a: tensor<2x0xf32>, %b: tensor<2x3xf32>, %w: tensor<0x3xf32>) -> tensor<f32> {
      %0 = kiln.concat %a, %b {axis = 1 : i64} : (tensor<2x0xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
      %1 = kiln.tanh %0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
      %2 = kiln.linear %1, %w : (tensor<2x3xf32>, tensor<0x3xf32>) -> tensor<2x0xf32>
      %3 = kiln.reduce sum %1 {axes = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
      %4 = kiln.reduce sum %2 {axes = array<i64: 0, 1>} : (tensor<2x0xf32>) -> tensor<f32>
      %5 = kiln.add %3, %4 : (tensor<f32>, tensor<f32>) -> tensor<f32>
      return %5 : tensor<f32>
    })");
  Tensor a = Tensor::zeros({2, 0}, DType::f32), b = ref::randomTensor({2, 3}, 90),
         w = Tensor::zeros({0, 3}, DType::f32);
  std::vector<Tensor> out = jit->call("loss_grad", {a, b, w});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(out[3].shape(), (std::vector<int64_t>{0, 3}));
  expectGradientsMatch(*jit, {a, b, w}, {0, 1, 2}, [](const auto &v) {
    double total = 0;
    for (double x : v[1]) {
      total += std::tanh(x);
    }
    return total;
  });
}
