//===- PrecisionCheckTest.cpp - kiln::checkPrecision ----------------------===//
//
// The precision-checked compile: a graph in fp32 and bf16 compared value by
// value. A product whose operands bf16 cannot tell apart is reported as the
// first value over the budget, at its line, with the exact ops before it at
// error 0; a GPT's loss and gradients stay within the default budget; bad
// options are refused before anything is compiled.
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/JIT/PrecisionCheck.h"
#include "compiler/DSL/DSL.h"
#include "compiler/DSL/Models.h"
#include "runtime/Error.h"

#include <gtest/gtest.h>

#include <string>

using namespace kiln;

namespace {

bool hostHasBf16() { return __builtin_cpu_supports("avx512bf16"); }

/// The message of the kiln::Error `f` throws ("" if none).
template <typename F>
std::string errorOf(F f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

/// y = relu(x) · w: x's two columns are 1 + small offsets, w = [1, -1]ᵀ, so
/// y is their difference, ~2^-11, which bf16 (8 bits: 1 and 1 + 2^-7 are
/// neighbours) cannot represent in its operands; then z = y · 2.
struct Cancelling {
  dsl::Module module;
  int productLine = 0;
  Cancelling() {
    dsl::Graph &g = module.addGraph("f");
    dsl::Var x = g.input("x", {dsl::kDynamic, 2}, DType::f32);
    dsl::Var w = g.input("w", {2, 1}, DType::f32);
    dsl::Var h = dsl::relu(x);
    productLine = __LINE__ + 1;
    dsl::Var y = dsl::matmul(h, w);
    g.finish({dsl::scale(y, 2.0)});
  }
};

} // namespace

TEST(PrecisionCheck, FindsTheFirstProductThatLosesPrecision) {
  Cancelling c;
  const int64_t rows = 40;
  Tensor x = Tensor::empty({rows, 2}, DType::f32);
  for (int64_t i = 0; i < rows; ++i) {
    x.data<float>()[2 * i] = 1.0f + float(i % 7) * 0x1p-12f;
    x.data<float>()[2 * i + 1] = 1.0f + float(i % 5) * 0x1p-11f;
  }
  Tensor w = Tensor::empty({2, 1}, DType::f32);
  w.data<float>()[0] = 1.0f;
  w.data<float>()[1] = -1.0f;
  if (!hostHasBf16()) {
    EXPECT_NE(errorOf([&] {
                checkPrecision(c.module, "f", {{"x", x}, {"w", w}});
              }).find("AVX512-BF16"),
              std::string::npos);
    GTEST_SKIP() << "this CPU has no AVX512-BF16 (the refusal is checked)";
  }
  PrecisionReport report = checkPrecision(c.module, "f", {{"x", x}, {"w", w}});
  // relu, matmul, scale, then the output.
  ASSERT_EQ(report.values.size(), 4u) << report.str();
  EXPECT_EQ(report.values[0].relativeError, 0.0) << report.str();
  EXPECT_FALSE(report.values[0].overBudget);
  ASSERT_EQ(report.firstOverBudget, 1) << report.str();
  const ValueCheck &product = report.values[1];
  EXPECT_NE(product.value.find("#1:kiln.matmul@"), std::string::npos)
      << product.value;
  EXPECT_NE(product.value.find("PrecisionCheckTest.cpp:" +
                               std::to_string(c.productLine)),
            std::string::npos)
      << product.value;
  EXPECT_GT(product.relativeError, 0.5);
  EXPECT_EQ(product.shape, (std::vector<int64_t>{rows, 1}));
  EXPECT_TRUE(report.values[2].overBudget);
  EXPECT_EQ(report.values[3].value, "output result0");
  EXPECT_NE(report.str().find("<- first over budget"), std::string::npos);
  // A budget that allows the whole difference passes everything.
  PrecisionCheckOptions lenient;
  lenient.budget = 1.0;
  lenient.floor = 0;
  EXPECT_EQ(checkPrecision(c.module, "f", {{"x", x}, {"w", w}}, lenient)
                .firstOverBudget,
            -1);
}

TEST(PrecisionCheck, GptLossAndGradientsWithinTheDefaultBudget) {
  if (!hostHasBf16()) {
    GTEST_SKIP() << "this CPU has no AVX512-BF16";
  }
  dsl::models::GptConfig config;
  config.vocabSize = 40;
  config.dModel = 64;
  config.numHeads = 2;
  config.numLayers = 1;
  config.dFF = 128;
  config.maxSeqLen = 24;
  dsl::Module module;
  dsl::models::addGptLoss(module, config);
  Tensor idx = Tensor::empty({3, 24}, DType::i64),
         targets = Tensor::empty({3, 24}, DType::i64);
  for (int64_t i = 0; i < idx.numel(); ++i) {
    idx.data<int64_t>()[i] = (i * 7) % 40;
    targets.data<int64_t>()[i] = (i * 11 + 3) % 40;
  }
  PrecisionCheckOptions options;
  options.gradients = true;
  options.seed = 3;
  PrecisionReport report = checkPrecision(
      module, "loss", {{"idx", idx}, {"targets", targets}}, options);
  EXPECT_EQ(report.firstOverBudget, -1) << report.str();
  // Every parameter's gradient is there, and some value really is rounded.
  int gradients = 0;
  double worst = 0;
  for (const ValueCheck &v : report.values) {
    gradients += v.value.rfind("output grad.", 0) == 0;
    worst = std::max(worst, v.relativeError);
  }
  EXPECT_EQ(gradients, int(module.params().size()));
  EXPECT_GT(worst, 1e-4) << report.str();
}

TEST(PrecisionCheck, RefusesBadOptionsBeforeCompiling) {
  Cancelling c;
  Tensor x = Tensor::empty({1, 2}, DType::f32),
         w = Tensor::empty({2, 1}, DType::f32);
  auto check = [&](const std::string &graph,
                   const PrecisionCheckOptions &options) {
    return errorOf([&] {
      checkPrecision(c.module, graph, {{"x", x}, {"w", w}}, options);
    });
  };
  PrecisionCheckOptions zero;
  zero.budget = 0;
  EXPECT_NE(check("f", zero).find("the budget 0 is not in (0, 1]"),
            std::string::npos);
  PrecisionCheckOptions negative;
  negative.floor = -1;
  EXPECT_NE(check("f", negative).find("the floor -1"), std::string::npos);
  PrecisionCheckOptions fp32;
  fp32.precision = "fp32";
  EXPECT_NE(check("f", fp32).find("fp32 is the reference"), std::string::npos);
  EXPECT_NE(check("g", {}).find("no graph 'g'"), std::string::npos);
  PrecisionCheckOptions v3;
  v3.jit.cpu = "x86-64-v3";
  EXPECT_NE(check("f", v3).find("precision bf16 needs a CPU with AVX512-BF16"),
            std::string::npos);
  PrecisionCheckOptions fp16;
  fp16.precision = "fp16";
  EXPECT_NE(check("f", fp16).find("precision 'fp16' is not a CPU precision"),
            std::string::npos);
}
