//===- Bf16ProductsTest.cpp - Products in bf16 against double loops -------===//
//
// JitOptions::precision = "bf16" (kiln-bf16-products: the operands of matrix
// products rounded to bf16 as they are packed, f32 sums on vdpbf16ps)
// against naive products in double of the f32 inputs, with an error bound
// fixed from bf16's 8-bit significand before the code was written:
//
//   |got - ref| <= (2^-7 + 2^-16 + (K + 2) 2^-23) * sum_k |a_mk| |b_kn|
//
// (each operand rounded to nearest with relative error at most u = 2^-8, so
// a product at most 2u + u^2; f32 sums of K + 1 terms, each addition or
// pairwise dot rounding at most 2^-24, doubled for the dot's two steps).
// Where the host lacks AVX512-BF16 the same precision is a clear error.
//
//===----------------------------------------------------------------------===//

#include "Reference.h"

#include "compiler/Target/JIT/Jit.h"
#include "runtime/Error.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

using namespace kiln;

namespace {

/// Products of every layout kiln-bf16-products takes, all sizes dynamic:
/// a·b, a·bᵀ (a linear's weight), aᵀ·b (a weight gradient), each also
/// batched; and a linear layer with a bias on [batch, sequence] rows.
const char *kSource = R"(
  func.func @mm(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %0 = kiln.matmul %a, %b : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
    return %0 : tensor<?x?xf32>
  }
  func.func @mm_bt(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %0 = kiln.matmul %a, %b {transpose_rhs} : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
    return %0 : tensor<?x?xf32>
  }
  func.func @mm_at(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %0 = kiln.matmul %a, %b {transpose_lhs} : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
    return %0 : tensor<?x?xf32>
  }
  func.func @bmm(%a: tensor<?x?x?xf32>, %b: tensor<?x?x?xf32>) -> tensor<?x?x?xf32> {
    %0 = kiln.matmul %a, %b : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
    return %0 : tensor<?x?x?xf32>
  }
  func.func @bmm_bt(%a: tensor<?x?x?xf32>, %b: tensor<?x?x?xf32>) -> tensor<?x?x?xf32> {
    %0 = kiln.matmul %a, %b {transpose_rhs} : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
    return %0 : tensor<?x?x?xf32>
  }
  func.func @bmm_at(%a: tensor<?x?x?xf32>, %b: tensor<?x?x?xf32>) -> tensor<?x?x?xf32> {
    %0 = kiln.matmul %a, %b {transpose_lhs} : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
    return %0 : tensor<?x?x?xf32>
  }
  func.func @lin(%x: tensor<?x?x48xf32>, %w: tensor<33x48xf32>, %b: tensor<33xf32>) -> tensor<?x?x33xf32> {
    %0 = kiln.linear %x, %w, %b : (tensor<?x?x48xf32>, tensor<33x48xf32>, tensor<33xf32>) -> tensor<?x?x33xf32>
    return %0 : tensor<?x?x33xf32>
  })";

bool hostHasBf16() { return __builtin_cpu_supports("avx512bf16"); }

/// Whether code for this host takes AMX's kernels (the CPU has AMX; each
/// product still runs vdpbf16ps where Linux refuses the tile state).
bool hostHasAmx() {
  return precisionError("bf16") == "" && [] {
    JitOptions options;
    options.precision = "bf16";
    options.bf16Kernels = "amx";
    try {
      JitModule::compileSource("func.func @f() { return }", options);
    } catch (const Error &) {
      return false;
    }
    return true;
  }();
}

/// Element (i, j) of a row-major [rows, cols] tensor, or of its transpose.
float at(const Tensor &t, int64_t i, int64_t j, bool transposed) {
  int64_t cols = t.shape()[1];
  return transposed ? t.data<float>()[j * cols + i]
                    : t.data<float>()[i * cols + j];
}

/// Checks `got` [m, n] against sum_k a(i, k) b(k, j) (+ bias[j]) in double
/// with the bound above; returns the largest error relative to
/// sum_k |a| |b| (to tell bf16 arithmetic from f32).
double checkProduct(const Tensor &got, int64_t m, int64_t n, int64_t k,
                    const std::function<float(int64_t, int64_t)> &a,
                    const std::function<float(int64_t, int64_t)> &b,
                    const float *bias) {
  EXPECT_EQ(got.shape(), (std::vector<int64_t>{m, n}));
  const double bound = std::ldexp(1.0, -7) + std::ldexp(1.0, -16) +
                       double(k + 2) * std::ldexp(1.0, -23);
  double worst = 0;
  int failures = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = bias ? bias[j] : 0.0, magnitude = 0;
      for (int64_t l = 0; l < k; ++l) {
        sum += double(a(i, l)) * b(l, j);
        magnitude += std::fabs(double(a(i, l)) * b(l, j));
      }
      double error = std::fabs(double(got.data<float>()[i * n + j]) - sum);
      if (magnitude > 0) {
        worst = std::max(worst, error / magnitude);
      }
      if (!(error <= bound * magnitude) && failures++ < 5) {
        ADD_FAILURE() << "(" << i << ", " << j << ") of " << m << "x" << n
                      << "x" << k << ": got " << got.data<float>()[i * n + j]
                      << ", want " << sum << " (bound " << bound * magnitude
                      << ")";
      }
    }
  }
  return worst;
}

} // namespace

/// The products' kernels (JitOptions::bf16Kernels) each test runs: "dot"
/// (vdpbf16ps register tiles), "amx" (AMX's tiles: only where the host has
/// AMX) and "amx-emulated" (the AMX kernels' packing, blocks and edges,
/// each tile instruction computed by vdpbf16ps code: on any host with
/// AVX512-BF16). "auto" picks one of the first two.
class Bf16Products : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    if (!hostHasBf16()) {
      GTEST_SKIP() << "this CPU has no AVX512-BF16 (Bf16ProductsErrors."
                      "RefusedWhereTheTargetLacksAvx512Bf16 checks the error)";
    }
    if (GetParam() == "amx" && !hostHasAmx()) {
      GTEST_SKIP() << "this CPU has no AMX";
    }
  }
};

INSTANTIATE_TEST_SUITE_P(Kernels, Bf16Products,
                         ::testing::Values("dot", "amx", "amx-emulated"),
                         [](const auto &info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Every size from 0 across the register tiles (8 rows, 32 columns; AMX:
// 32 rows, two tiles of 16 columns) and the packing blocks (16 rows of a
// stored [k, m], 32 values of k), odd k (a last pair with one value), for
// the three layouts; a linear with its bias on 3-D rows (the deferred
// fill, rows collapsed).
TEST_P(Bf16Products, MatchDoubleLoopsWithinTheBf16Bound) {
  JitOptions options;
  options.precision = "bf16";
  options.bf16Kernels = GetParam();
  auto jit = JitModule::compileSource(kSource, options);
  const std::vector<int64_t> sizes = {0, 1, 5, 15, 16, 17, 33, 65};
  // Rows and columns also across AMX's blocks of 32 (31 and 32: a block
  // one short of whole and a whole one).
  const std::vector<int64_t> outSizes = {0, 1, 5, 15, 16, 17, 31, 32, 33, 65};
  uint32_t seed = 1;
  double worst = 0;
  // The three layouts of one m x n x k product against double loops.
  auto checkLayouts = [&](int64_t m, int64_t n, int64_t k) {
    Tensor a = ref::randomTensor({m, k}, seed++);
    Tensor b = ref::randomTensor({k, n}, seed++);
    Tensor bt = ref::randomTensor({n, k}, seed++);
    Tensor at_ = ref::randomTensor({k, m}, seed++);
    auto aRows = [&](int64_t i, int64_t l) { return at(a, i, l, false); };
    auto bRows = [&](int64_t l, int64_t j) { return at(b, l, j, false); };
    worst = std::max(worst, checkProduct(jit->call("mm", {a, b})[0], m, n, k,
                                         aRows, bRows, nullptr));
    checkProduct(
        jit->call("mm_bt", {a, bt})[0], m, n, k, aRows,
        [&](int64_t l, int64_t j) { return at(bt, l, j, true); }, nullptr);
    checkProduct(
        jit->call("mm_at", {at_, b})[0], m, n, k,
        [&](int64_t i, int64_t l) { return at(at_, i, l, true); }, bRows,
        nullptr);
  };
  for (int64_t m : outSizes) {
    for (int64_t n : outSizes) {
      for (int64_t k : sizes) {
        SCOPED_TRACE(fmt::format("m {} n {} k {}", m, n, k));
        checkLayouts(m, n, k);
        if (HasFailure()) {
          return;
        }
      }
    }
  }
  // Rounded to bf16 indeed: f32 products would stay within 2^-17 of the
  // double sums at these lengths.
  EXPECT_GT(worst, std::ldexp(1.0, -12));
  // Blocks of rows: a long k (4097 pairs, padded to 4112: 131,584 bytes of
  // packed a per tile of 8 rows) leaves room in half of an L2 of up to 2
  // MiB for at most 7 tiles, so 57 and 65 rows cross blocks (the last one
  // partial) on every CPU Kiln runs on; 32 columns fill one panel (stored
  // unmasked), 33 leave a last one of one column (masked).
  for (int64_t m : {57, 65}) {
    for (int64_t n : {32, 33}) {
      SCOPED_TRACE(fmt::format("blocks: m {} n {} k 8193", m, n));
      checkLayouts(m, n, 8193);
    }
  }
  // Batched: each batch its own product (batches of 0, 1 and 3; sizes
  // across the tiles).
  for (int64_t batches : {0, 1, 3}) {
    for (auto [m, n, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {1, 1, 1}, {17, 33, 15}, {9, 65, 33}}) {
      SCOPED_TRACE(fmt::format("batch {} m {} n {} k {}", batches, m, n, k));
      Tensor a = ref::randomTensor({batches, m, k}, seed++);
      Tensor b = ref::randomTensor({batches, k, n}, seed++);
      Tensor bt = ref::randomTensor({batches, n, k}, seed++);
      Tensor at_ = ref::randomTensor({batches, k, m}, seed++);
      Tensor got = jit->call("bmm", {a, b})[0];
      Tensor gotBt = jit->call("bmm_bt", {a, bt})[0];
      Tensor gotAt = jit->call("bmm_at", {at_, b})[0];
      ASSERT_EQ(got.shape(), (std::vector<int64_t>{batches, m, n}));
      for (int64_t i = 0; i < batches; ++i) {
        auto sliceOf = [&](const Tensor &t, int64_t rows, int64_t cols) {
          Tensor s = Tensor::empty({rows, cols}, DType::f32);
          std::copy_n(t.data<float>() + i * rows * cols, rows * cols,
                      s.data<float>());
          return s;
        };
        Tensor ai = sliceOf(a, m, k), bi = sliceOf(b, k, n),
               bti = sliceOf(bt, n, k), ati = sliceOf(at_, k, m);
        auto aRows = [&](int64_t r, int64_t l) { return at(ai, r, l, false); };
        auto bRows = [&](int64_t l, int64_t j) { return at(bi, l, j, false); };
        checkProduct(sliceOf(got, m, n), m, n, k, aRows, bRows, nullptr);
        checkProduct(
            sliceOf(gotBt, m, n), m, n, k, aRows,
            [&](int64_t l, int64_t j) { return at(bti, l, j, true); }, nullptr);
        checkProduct(
            sliceOf(gotAt, m, n), m, n, k,
            [&](int64_t r, int64_t l) { return at(ati, r, l, true); }, bRows,
            nullptr);
      }
    }
  }
  Tensor w = ref::randomTensor({33, 48}, 900),
         bias = ref::randomTensor({33}, 901);
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {2, 5}, {3, 7}, {2, 17}}) {
    Tensor x = ref::randomTensor({rows, cols, 48}, 902);
    Tensor got = jit->call("lin", {x, w, bias})[0];
    got = got.reshape({rows * cols, 33});
    checkProduct(
        got, rows * cols, 33, 48,
        [&](int64_t i, int64_t l) { return x.data<float>()[i * 48 + l]; },
        [&](int64_t l, int64_t j) { return at(w, l, j, true); },
        bias.data<float>());
  }
}

// bf16 is compiled only for a CPU with AVX512-BF16: on any other target, or
// under a name that is no precision, a kiln::Error says why before anything
// is compiled (with a GPU: test/Target/AOT/precision.mlir).
TEST(Bf16ProductsErrors, RefusedWhereTheTargetLacksAvx512Bf16) {
  auto message = [](const JitOptions &options) -> std::string {
    try {
      JitModule::compileSource(kSource, options);
    } catch (const Error &e) {
      return e.what();
    }
    return "";
  };
  JitOptions v4;
  v4.precision = "bf16";
  v4.cpu = "x86-64-v4";
  EXPECT_NE(message(v4).find("precision bf16 needs a CPU with AVX512-BF16"),
            std::string::npos)
      << message(v4);
  EXPECT_NE(message(v4).find("'x86-64-v4'"), std::string::npos);
  JitOptions host;
  host.precision = "bf16";
  if (!hostHasBf16()) {
    EXPECT_NE(message(host).find("AVX512-BF16"), std::string::npos)
        << message(host);
  }
  JitOptions other;
  other.precision = "fp16";
  EXPECT_NE(message(other).find("precision 'fp16' is not a CPU precision"),
            std::string::npos)
      << message(other);
  // The same check before anything is compiled (kiln::precisionError).
  EXPECT_NE(precisionError("bf16", "x86-64-v3").find("'x86-64-v3'"),
            std::string::npos);
  EXPECT_EQ(precisionError("bf16", "znver4"), "");
  EXPECT_EQ(precisionError("fp32", "x86-64-v3"), "");
  EXPECT_NE(precisionError("fp16").find("not a CPU precision"),
            std::string::npos);
  EXPECT_NE(precisionError("bf16", "pentium9"), "");
  EXPECT_EQ(precisionError("bf16").empty(), hostHasBf16());
  // Compiled for a CPU that has it on any host (not run).
  JitOptions zen4;
  zen4.precision = "bf16";
  zen4.cpu = "znver4";
  EXPECT_EQ(message(zen4), "");
  // The kernels: AMX's where the target has none, an unknown name, or any
  // but auto without the bf16 precision, are errors that say so.
  zen4.bf16Kernels = "amx";
  EXPECT_NE(message(zen4).find("bf16 kernels amx need a CPU with AMX"),
            std::string::npos)
      << message(zen4);
  EXPECT_NE(message(zen4).find("'znver4'"), std::string::npos);
  zen4.bf16Kernels = "tiles";
  EXPECT_NE(message(zen4).find("bf16 kernels 'tiles' are none"),
            std::string::npos)
      << message(zen4);
  JitOptions fp32;
  fp32.cpu = "znver4";
  fp32.bf16Kernels = "dot";
  EXPECT_NE(message(fp32).find("with precision 'fp32'"), std::string::npos)
      << message(fp32);
  // Compiled for Sapphire Rapids on any host (not run), as AMX's kernels
  // are by default there (test/AOT/bf16-amx.mlir checks the instructions).
  JitOptions spr;
  spr.precision = "bf16";
  spr.cpu = "sapphirerapids";
  EXPECT_EQ(message(spr), "");
  spr.bf16Kernels = "amx";
  EXPECT_EQ(message(spr), "");
}
