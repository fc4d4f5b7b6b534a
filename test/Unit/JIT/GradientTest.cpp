//===- GradientTest.cpp - kiln-autodiff against finite differences --------===//
//
// Small loss functions are differentiated by kiln-autodiff, compiled and run;
// every parameter gradient is compared with central finite differences of an
// independent double-precision implementation of the same loss.
//
//===----------------------------------------------------------------------===//

#include "Reference.h"

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
  mlir::DialectRegistry registry;
  registerAllDialects(registry);
  registerAllPasses();
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
  EXPECT_TRUE(module);
  mlir::PassManager pm(&context);
  EXPECT_TRUE(mlir::succeeded(mlir::kiln::addPipeline(
      pm, "kiln-autodiff{function=loss},canonicalize")));
  EXPECT_TRUE(mlir::succeeded(pm.run(*module)));
  return JitModule::compile(*module);
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
    func.func @loss(%x: tensor<4xf32>) -> tensor<f32> {
      %0 = kiln.reduce max %x {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      return %0 : tensor<f32>
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
  EXPECT_EQ(message, "'kiln.reduce' op cannot be differentiated yet: the "
                     "gradient of max is not implemented");
}
