//===- OpNumericsTest.cpp - Every kiln op, compiled, against references ---===//
//
// Each test compiles a function of one op with dynamic batch/sequence sizes,
// runs it for several sizes through the same compiled code, and compares with
// the naive loops of Reference.h.
//
//===----------------------------------------------------------------------===//

#include "Differential.h"
#include "Reference.h"

#include "compiler/Target/JIT/Jit.h"
#include "runtime/Allocator.h"
#include "runtime/Error.h"
#include "runtime/Sanitizer.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <filesystem>
#include <fstream>
#include <functional>

using namespace kiln;

namespace {

const std::vector<std::pair<int64_t, int64_t>> kSizes = {
    {1, 1}, {2, 5}, {3, 7}};

/// Applies `f` to every element (a reference for unary ops).
Tensor mapRef(const Tensor &x, const std::function<double(double)> &f) {
  Tensor y = Tensor::empty(x.shape(), DType::f32);
  for (int64_t i = 0; i < x.numel(); ++i) {
    y.data<float>()[i] = float(f(x.data<float>()[i]));
  }
  return y;
}

std::string expectErrorMessage(const std::function<void()> &f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a kiln::Error";
  return "";
}

} // namespace

TEST(OpNumerics, EmbeddingWithPaddingIdxReadsEveryRow) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%ids: tensor<?x?xi64>, %t: tensor<11x5xf32>) -> tensor<?x?x5xf32> {
      %0 = kiln.embedding %ids, %t {padding_idx = 0 : i64}
          : (tensor<?x?xi64>, tensor<11x5xf32>) -> tensor<?x?x5xf32>
      return %0 : tensor<?x?x5xf32>
    })");
  Tensor table = ref::randomTensor({11, 5}, 1);
  for (auto [b, t] : kSizes) {
    Tensor ids = ref::randomIds({b, t}, 11, 2);
    ids.data<int64_t>()[0] = 0; // the padding row reads normally
    Tensor expected = Tensor::empty({b, t, 5}, DType::f32);
    for (int64_t i = 0; i < b * t; ++i) {
      for (int64_t d = 0; d < 5; ++d) {
        expected.data<float>()[i * 5 + d] =
            table.data<float>()[ids.data<int64_t>()[i] * 5 + d];
      }
    }
    ref::expectClose(jit->call("f", {ids, table})[0], expected, 0, 0);
  }
}

TEST(OpNumerics, EmbeddingRejectsOutOfRangeIds) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%ids: tensor<?xi32>, %t: tensor<4x2xf32>) -> tensor<?x2xf32> {
      %0 = kiln.embedding %ids, %t : (tensor<?xi32>, tensor<4x2xf32>) -> tensor<?x2xf32>
      return %0 : tensor<?x2xf32>
    })");
  Tensor ids = Tensor::fromVector<int32_t>({3}, {0, 4, 1});
  std::string message = expectErrorMessage(
      [&] { jit->call("f", {ids, ref::randomTensor({4, 2}, 3)}); });
  EXPECT_NE(message.find("holds 4 at flat index 1, outside [0, 4)"),
            std::string::npos)
      << message;
  ids.data<int32_t>()[1] = -1;
  message = expectErrorMessage(
      [&] { jit->call("f", {ids, ref::randomTensor({4, 2}, 3)}); });
  EXPECT_NE(message.find("holds -1"), std::string::npos) << message;
}

// The sanitizer's checks in compiled code call its runtime: without it in
// the process they are refused before anything is compiled (this test
// program is not linked with -fsanitize=address; the fuzz targets that are
// test the checks themselves, Fuzz.JITSanitizerChecks).
TEST(OpNumerics, AddressSanitizerChecksNeedTheSanitizersRuntime) {
  if (kAddressSanitizer) {
    GTEST_SKIP() << "this build has the sanitizer's runtime";
  }
  JitOptions options;
  options.addressSanitizer = true;
  std::string message = expectErrorMessage([&] {
    JitModule::compileSource(R"(
      func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
        return %x : tensor<4xf32>
      })",
                             options);
  });
  EXPECT_NE(message.find("needs AddressSanitizer's runtime"),
            std::string::npos)
      << message;
}

TEST(OpNumerics, SinusoidalEncodingMatchesTheSeedFormula) {
  // Odd width, and an offset for incremental decoding.
  auto jit = JitModule::compileSource(R"(
    func.func @f(%x: tensor<?x?x7xf32>, %off: i64) -> tensor<?x?x7xf32> {
      %0 = kiln.pe sinusoidal %x offset %off : (tensor<?x?x7xf32>, i64) -> tensor<?x?x7xf32>
      return %0 : tensor<?x?x7xf32>
    })");
  for (auto [b, t] : kSizes) {
    for (int64_t offset : {0, 3}) {
      Tensor x = Tensor::zeros({b, t, 7}, DType::f32);
      Tensor y = jit->call("f", {x, offset})[0];
      for (int64_t bi = 0; bi < b; ++bi) {
        for (int64_t p = 0; p < t; ++p) {
          for (int64_t i = 0; i < 7; ++i) {
            double div = std::exp((i / 2 * 2) * -(std::log(10000.0) / 7));
            double angle = double(p + offset) * div;
            double want = i % 2 ? std::cos(angle) : std::sin(angle);
            EXPECT_NEAR(y.data<float>()[(bi * t + p) * 7 + i], want, 2e-6);
          }
        }
      }
    }
  }
  // Position 0 is exactly [0, 1, 0, 1, ...].
  Tensor y =
      jit->call("f", {Tensor::zeros({1, 1, 7}, DType::f32), int64_t(0)})[0];
  EXPECT_EQ(y.toVector<float>(), (std::vector<float>{0, 1, 0, 1, 0, 1, 0}));
}

TEST(OpNumerics, LearnedEncodingAddsTableRowsAndChecksLength) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%x: tensor<?x?x3xf32>, %t: tensor<8x3xf32>, %off: i64) -> tensor<?x?x3xf32> {
      %0 = kiln.pe learned %x table %t offset %off
          : (tensor<?x?x3xf32>, tensor<8x3xf32>, i64) -> tensor<?x?x3xf32>
      return %0 : tensor<?x?x3xf32>
    })");
  Tensor table = ref::randomTensor({8, 3}, 4);
  for (auto [b, t] : kSizes) {
    Tensor x = ref::randomTensor({b, t, 3}, 5);
    Tensor expected = x.clone();
    for (int64_t i = 0; i < b * t; ++i) {
      for (int64_t d = 0; d < 3; ++d) {
        expected.data<float>()[i * 3 + d] +=
            table.data<float>()[(i % t + 1) * 3 + d];
      }
    }
    ref::expectClose(jit->call("f", {x, table, int64_t(1)})[0], expected);
  }
  std::string message = expectErrorMessage([&] {
    jit->call("f", {ref::randomTensor({1, 6, 3}, 6), table, int64_t(3)});
  });
  EXPECT_NE(message.find("positions [3, 9)"), std::string::npos) << message;
  EXPECT_NE(message.find("key/value cache of 8)"), std::string::npos) << message;
}

TEST(OpNumerics, LayerNormBothModes) {
  for (bool stdEps : {false, true}) {
    std::string mode = stdEps ? ", mode = #kiln<norm_mode std_eps>" : "";
    auto jit = JitModule::compileSource(R"(
      func.func @f(%x: tensor<?x?x9xf32>, %g: tensor<9xf32>, %b: tensor<9xf32>) -> tensor<?x?x9xf32> {
        %0 = kiln.layernorm %x, %g, %b {eps = 1.0e-3 : f64)" +
                                        mode + R"(}
            : (tensor<?x?x9xf32>, tensor<9xf32>, tensor<9xf32>) -> tensor<?x?x9xf32>
        return %0 : tensor<?x?x9xf32>
      })");
    Tensor g = ref::randomTensor({9}, 7), bias = ref::randomTensor({9}, 8);
    for (auto [b, t] : kSizes) {
      Tensor x = ref::randomTensor({b, t, 9}, 9, -3, 3);
      ref::expectClose(jit->call("f", {x, g, bias})[0],
                       ref::layerNorm(x, g, bias, 1e-3, stdEps));
    }
  }
}

TEST(OpNumerics, SelfAttentionWithCausalAndPaddingMasks) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%x: tensor<?x?x12xf32>, %wq: tensor<12x12xf32>, %wk: tensor<12x12xf32>,
                 %wv: tensor<12x12xf32>, %wo: tensor<12x12xf32>, %bq: tensor<12xf32>,
                 %bk: tensor<12xf32>, %bv: tensor<12xf32>, %bo: tensor<12xf32>,
                 %m: tensor<?x?xi64>) -> tensor<?x?x12xf32> {
      %0 = kiln.mha %x, %x weights(%wq, %wk, %wv, %wo) biases(%bq, %bk, %bv, %bo) mask %m
          {num_heads = 3 : i64, causal}
          : (tensor<?x?x12xf32>, tensor<?x?x12xf32>, tensor<12x12xf32>, tensor<12x12xf32>,
             tensor<12x12xf32>, tensor<12x12xf32>, tensor<12xf32>, tensor<12xf32>,
             tensor<12xf32>, tensor<12xf32>, tensor<?x?xi64>) -> tensor<?x?x12xf32>
      return %0 : tensor<?x?x12xf32>
    })");
  std::vector<Tensor> w;
  for (uint32_t s = 0; s < 4; ++s) {
    w.push_back(ref::randomTensor({12, 12}, 10 + s, -0.5, 0.5));
  }
  std::vector<Tensor> bias;
  for (uint32_t s = 0; s < 4; ++s) {
    bias.push_back(ref::randomTensor({12}, 20 + s));
  }
  for (auto [b, t] : kSizes) {
    Tensor x = ref::randomTensor({b, t, 12}, 30);
    Tensor mask = Tensor::full({b, t}, 0).reshape({b, t});
    mask = Tensor::zeros({b, t}, DType::i64);
    for (int64_t i = 0; i < b * t; ++i) {
      mask.data<int64_t>()[i] = (i % t) < t - (i / t) ? 1 : 0; // pad the tail
    }
    Tensor expected =
        ref::attention(x, x, w[0], w[1], w[2], w[3], &bias[0], &bias[1],
                       &bias[2], &bias[3], &mask, 3, true);
    ref::expectClose(jit->call("f", {x, w[0], w[1], w[2], w[3], bias[0],
                                     bias[1], bias[2], bias[3], mask})[0],
                     expected, 1e-5, 1e-4);
  }
}

TEST(OpNumerics, CrossAttentionWithOtherLengthAndWidth) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%q: tensor<?x?x8xf32>, %kv: tensor<?x?x6xf32>, %wq: tensor<8x8xf32>,
                 %wk: tensor<8x6xf32>, %wv: tensor<8x6xf32>, %wo: tensor<8x8xf32>) -> tensor<?x?x8xf32> {
      %0 = kiln.mha %q, %kv weights(%wq, %wk, %wv, %wo) {num_heads = 2 : i64}
          : (tensor<?x?x8xf32>, tensor<?x?x6xf32>, tensor<8x8xf32>, tensor<8x6xf32>,
             tensor<8x6xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
      return %0 : tensor<?x?x8xf32>
    })");
  Tensor wq = ref::randomTensor({8, 8}, 40), wk = ref::randomTensor({8, 6}, 41),
         wv = ref::randomTensor({8, 6}, 42), wo = ref::randomTensor({8, 8}, 43);
  for (auto [b, t] : kSizes) {
    Tensor q = ref::randomTensor({b, t, 8}, 44);
    Tensor kv = ref::randomTensor({b, t + 2, 6}, 45);
    ref::expectClose(jit->call("f", {q, kv, wq, wk, wv, wo})[0],
                     ref::attention(q, kv, wq, wk, wv, wo, nullptr, nullptr,
                                    nullptr, nullptr, nullptr, 2, false));
  }
  // Batch sizes that disagree are refused before the call.
  std::string message = expectErrorMessage([&] {
    jit->call("f", {ref::randomTensor({2, 3, 8}, 1),
                    ref::randomTensor({3, 3, 6}, 2), wq, wk, wv, wo});
  });
  EXPECT_NE(message.find("dimension 0 of argument #1"), std::string::npos)
      << message;
}

TEST(OpNumerics, FeedForwardEachActivation) {
  for (const char *act : {"relu", "gelu", "gelu_tanh"}) {
    auto jit = JitModule::compileSource(std::string(R"(
      func.func @f(%x: tensor<?x?x5xf32>, %w1: tensor<11x5xf32>, %w2: tensor<5x11xf32>,
                   %b1: tensor<11xf32>, %b2: tensor<5xf32>) -> tensor<?x?x5xf32> {
        %0 = kiln.ffn )") + act + R"( %x, %w1, %w2 biases(%b1, %b2)
            : (tensor<?x?x5xf32>, tensor<11x5xf32>, tensor<5x11xf32>, tensor<11xf32>, tensor<5xf32>)
            -> tensor<?x?x5xf32>
        return %0 : tensor<?x?x5xf32>
      })");
    Tensor w1 = ref::randomTensor({11, 5}, 50),
           w2 = ref::randomTensor({5, 11}, 51);
    Tensor b1 = ref::randomTensor({11}, 52), b2 = ref::randomTensor({5}, 53);
    std::string name = act;
    for (auto [b, t] : kSizes) {
      Tensor x = ref::randomTensor({b, t, 5}, 54, -2, 2);
      Tensor h = mapRef(ref::linear(x, w1, &b1), [&](double v) {
        return name == "relu" ? std::max(v, 0.0)
                              : ref::gelu(v, name == "gelu_tanh");
      });
      ref::expectClose(jit->call("f", {x, w1, w2, b1, b2})[0],
                       ref::linear(h, w2, &b2));
    }
  }
}

TEST(OpNumerics, LinearAndBatchedMatmulWithTransposes) {
  auto jit = JitModule::compileSource(R"(
    func.func @lin(%x: tensor<?x?x6xf32>, %w: tensor<4x6xf32>, %b: tensor<4xf32>) -> tensor<?x?x4xf32> {
      %0 = kiln.linear %x, %w, %b : (tensor<?x?x6xf32>, tensor<4x6xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
      return %0 : tensor<?x?x4xf32>
    }
    func.func @mm(%a: tensor<?x?x3xf32>, %b: tensor<?x?x3xf32>) -> tensor<?x?x?xf32> {
      %0 = kiln.matmul %a, %b {transpose_rhs} : (tensor<?x?x3xf32>, tensor<?x?x3xf32>) -> tensor<?x?x?xf32>
      return %0 : tensor<?x?x?xf32>
    }
    func.func @mmt(%a: tensor<?x3x?xf32>, %b: tensor<?x3x5xf32>) -> tensor<?x?x5xf32> {
      %0 = kiln.matmul %a, %b {transpose_lhs} : (tensor<?x3x?xf32>, tensor<?x3x5xf32>) -> tensor<?x?x5xf32>
      return %0 : tensor<?x?x5xf32>
    })");
  Tensor w = ref::randomTensor({4, 6}, 60), bias = ref::randomTensor({4}, 61);
  for (auto [b, t] : kSizes) {
    Tensor x = ref::randomTensor({b, t, 6}, 62);
    ref::expectClose(jit->call("lin", {x, w, bias})[0],
                     ref::linear(x, w, &bias));
    Tensor a = ref::randomTensor({b, t, 3}, 63),
           c = ref::randomTensor({b, t + 1, 3}, 64);
    Tensor expected = Tensor::empty({b, t, t + 1}, DType::f32);
    for (int64_t bi = 0; bi < b; ++bi) {
      for (int64_t i = 0; i < t; ++i) {
        for (int64_t j = 0; j <= t; ++j) {
          double acc = 0;
          for (int64_t k = 0; k < 3; ++k) {
            acc += double(a.data<float>()[(bi * t + i) * 3 + k]) *
                   c.data<float>()[(bi * (t + 1) + j) * 3 + k];
          }
          expected.data<float>()[(bi * t + i) * (t + 1) + j] = float(acc);
        }
      }
    }
    ref::expectClose(jit->call("mm", {a, c})[0], expected);
    Tensor at = ref::randomTensor({b, 3, t}, 65),
           bt = ref::randomTensor({b, 3, 5}, 66);
    Tensor expectedT = Tensor::empty({b, t, 5}, DType::f32);
    for (int64_t bi = 0; bi < b; ++bi) {
      for (int64_t i = 0; i < t; ++i) {
        for (int64_t j = 0; j < 5; ++j) {
          double acc = 0;
          for (int64_t k = 0; k < 3; ++k) {
            acc += double(at.data<float>()[(bi * 3 + k) * t + i]) *
                   bt.data<float>()[(bi * 3 + k) * 5 + j];
          }
          expectedT.data<float>()[(bi * t + i) * 5 + j] = float(acc);
        }
      }
    }
    ref::expectClose(jit->call("mmt", {at, bt})[0], expectedT);
  }
}

// Products of at most 4 rows with a weight stored [N, K] stream the weight
// (kiln-vector-matrix-products): K split into vectors of 16 (AVX-512) or 8
// (AVX2), so K = 24 is streamed by AVX2 code only and K = 20 by neither.
// Rows from 0 across the 4-row limit (5 and 9 take the blocked product),
// dynamic and static; widths that cross the vector (1, 15, 16, 17, 33, 65);
// with and without a bias (the deferred fill), a rank-2 input (the decoding
// head's), two products in a row (a feed-forward block); compiled for both
// CPU levels. Against a naive product in double.
TEST(OpNumerics, ProductsOfAFewRowsStreamTheirWeight) {
  struct Shape {
    int64_t k, n;
  };
  const std::vector<Shape> shapes = {{16, 1},  {16, 17}, {48, 15}, {48, 16},
                                     {48, 33}, {24, 65}, {20, 17}, {768, 65}};
  std::string source;
  for (auto [k, n] : shapes) {
    source += fmt::format(R"(
      func.func @lin_{0}_{1}(%x: tensor<?x?x{0}xf32>, %w: tensor<{1}x{0}xf32>, %b: tensor<{1}xf32>) -> tensor<?x?x{1}xf32> {{
        %0 = kiln.linear %x, %w, %b : (tensor<?x?x{0}xf32>, tensor<{1}x{0}xf32>, tensor<{1}xf32>) -> tensor<?x?x{1}xf32>
        return %0 : tensor<?x?x{1}xf32>
      }})",
                          k, n);
  }
  source += R"(
    func.func @head(%x: tensor<?x48xf32>, %w: tensor<65x48xf32>) -> tensor<?x65xf32> {
      %0 = kiln.linear %x, %w : (tensor<?x48xf32>, tensor<65x48xf32>) -> tensor<?x65xf32>
      return %0 : tensor<?x65xf32>
    }
    func.func @one(%x: tensor<1x1x32xf32>, %w: tensor<17x32xf32>) -> tensor<1x1x17xf32> {
      %0 = kiln.linear %x, %w : (tensor<1x1x32xf32>, tensor<17x32xf32>) -> tensor<1x1x17xf32>
      return %0 : tensor<1x1x17xf32>
    }
    func.func @ffn(%x: tensor<?x?x32xf32>, %w1: tensor<80x32xf32>, %w2: tensor<32x80xf32>,
                   %b1: tensor<80xf32>, %b2: tensor<32xf32>) -> tensor<?x?x32xf32> {
      %0 = kiln.ffn relu %x, %w1, %w2 biases(%b1, %b2)
          : (tensor<?x?x32xf32>, tensor<80x32xf32>, tensor<32x80xf32>, tensor<80xf32>, tensor<32xf32>)
          -> tensor<?x?x32xf32>
      return %0 : tensor<?x?x32xf32>
    })";
  const std::vector<std::pair<int64_t, int64_t>> rows = {
      {1, 0}, {0, 3}, {1, 1}, {1, 2}, {3, 1}, {2, 2}, {1, 4}, {1, 5}, {3, 3}};
  const double atol = 5e-5, rtol = 1e-4;
  for (const char *cpu : {"x86-64-v3", "x86-64-v4"}) {
    SCOPED_TRACE(cpu);
    JitOptions options;
    options.cpu = cpu;
    auto jit = JitModule::compileSource(source, options);
    if (!diff::detail::hostRuns(cpu)) {
      continue; // compiled, not run
    }
    for (auto [k, n] : shapes) {
      Tensor w = ref::randomTensor({n, k}, 70), bias = ref::randomTensor({n}, 71);
      for (auto [b, t] : rows) {
        SCOPED_TRACE(fmt::format("K {} N {} rows {}x{}", k, n, b, t));
        Tensor x = ref::randomTensor({b, t, k}, 72);
        ref::expectClose(jit->call(fmt::format("lin_{}_{}", k, n),
                                   {x, w, bias})[0],
                         ref::linear(x, w, &bias), atol, rtol);
      }
    }
    Tensor head = ref::randomTensor({65, 48}, 73);
    for (int64_t r : {0, 1, 3, 4, 5, 17}) {
      Tensor x = ref::randomTensor({r, 48}, 74);
      ref::expectClose(jit->call("head", {x, head})[0],
                       ref::linear(x, head, nullptr), atol, rtol);
    }
    Tensor x1 = ref::randomTensor({1, 1, 32}, 75),
           w1 = ref::randomTensor({17, 32}, 76);
    ref::expectClose(jit->call("one", {x1, w1})[0],
                     ref::linear(x1, w1, nullptr), atol, rtol);
    Tensor f1 = ref::randomTensor({80, 32}, 77), f2 = ref::randomTensor({32, 80}, 78);
    Tensor c1 = ref::randomTensor({80}, 79), c2 = ref::randomTensor({32}, 80);
    for (auto [b, t] : rows) {
      Tensor x = ref::randomTensor({b, t, 32}, 81);
      Tensor h = mapRef(ref::linear(x, f1, &c1),
                        [](double v) { return std::max(v, 0.0); });
      ref::expectClose(jit->call("ffn", {x, f1, f2, c1, c2})[0],
                       ref::linear(h, f2, &c2), atol, rtol);
    }
  }
}

// A decoding step over caches of fixed capacity (130 positions: three key
// blocks of 64): the new keys and values written in place at `pos`
// (kiln.update_slice, results that update their arguments), attention of
// the new positions over the cache's first pos + n positions (kiln.attention
// with offset). The cache holds NaN past pos + n: nothing there is read.
// Against a naive attention in double.
TEST(OpNumerics, AttentionOverACacheWrittenInPlace) {
  constexpr int64_t kCapacity = 130, kWidth = 8, kHeads = 2;
  auto jit = JitModule::compileSource(R"(
    func.func @step(%q: tensor<?x?x8xf32>, %k: tensor<?x?x8xf32>, %v: tensor<?x?x8xf32>,
                    %kc: tensor<?x130x8xf32>, %vc: tensor<?x130x8xf32>, %pos: i64)
        -> (tensor<?x?x8xf32>, tensor<?x130x8xf32> {kiln.updates = 3 : i64},
            tensor<?x130x8xf32> {kiln.updates = 4 : i64}) {
      %kc2 = kiln.update_slice %kc, %k, %pos {axis = 1 : i64}
          : (tensor<?x130x8xf32>, tensor<?x?x8xf32>, i64) -> tensor<?x130x8xf32>
      %vc2 = kiln.update_slice %vc, %v, %pos {axis = 1 : i64}
          : (tensor<?x130x8xf32>, tensor<?x?x8xf32>, i64) -> tensor<?x130x8xf32>
      %o = kiln.attention %q, %kc2, %vc2 offset %pos {num_heads = 2 : i64, causal}
          : (tensor<?x?x8xf32>, tensor<?x130x8xf32>, tensor<?x130x8xf32>, i64) -> tensor<?x?x8xf32>
      return %o, %kc2, %vc2 : tensor<?x?x8xf32>, tensor<?x130x8xf32>, tensor<?x130x8xf32>
    })");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto [b, pos, n] : std::vector<std::array<int64_t, 3>>{{1, 0, 1},
                                                              {1, 0, 17},
                                                              {2, 15, 1},
                                                              {1, 63, 1},
                                                              {1, 64, 1},
                                                              {2, 60, 5},
                                                              {1, 100, 30},
                                                              {1, 129, 1},
                                                              {1, 7, 0}}) {
    SCOPED_TRACE(fmt::format("batch {} pos {} n {}", b, pos, n));
    Tensor q = ref::randomTensor({b, n, kWidth}, 90),
           k = ref::randomTensor({b, n, kWidth}, 91),
           v = ref::randomTensor({b, n, kWidth}, 92);
    Tensor kc = ref::randomTensor({b, kCapacity, kWidth}, 93),
           vc = ref::randomTensor({b, kCapacity, kWidth}, 94);
    for (Tensor *c : {&kc, &vc}) {
      for (int64_t bi = 0; bi < b; ++bi) {
        float *row = c->data<float>() + bi * kCapacity * kWidth;
        std::fill(row + (pos + n) * kWidth, row + kCapacity * kWidth, nan);
      }
    }
    // The caches as the step must leave them: k and v at [pos, pos + n).
    Tensor keys = kc.clone(), values = vc.clone();
    for (int64_t bi = 0; bi < b; ++bi) {
      for (int64_t i = 0; i < n * kWidth; ++i) {
        keys.data<float>()[(bi * kCapacity + pos) * kWidth + i] =
            k.data<float>()[bi * n * kWidth + i];
        values.data<float>()[(bi * kCapacity + pos) * kWidth + i] =
            v.data<float>()[bi * n * kWidth + i];
      }
    }
    Tensor expected = Tensor::zeros({b, n, kWidth}, DType::f32);
    int64_t dh = kWidth / kHeads;
    for (int64_t bi = 0; bi < b; ++bi) {
      for (int64_t h = 0; h < kHeads; ++h) {
        for (int64_t i = 0; i < n; ++i) {
          const float *qi = q.data<float>() + (bi * n + i) * kWidth + h * dh;
          int64_t last = pos + i; // query i sees keys [0, pos + i]
          std::vector<double> score(last + 1);
          double top = -1e300, sum = 0;
          for (int64_t j = 0; j <= last; ++j) {
            const float *kj =
                keys.data<float>() + (bi * kCapacity + j) * kWidth + h * dh;
            double dot = 0;
            for (int64_t d = 0; d < dh; ++d) {
              dot += double(qi[d]) * kj[d];
            }
            score[j] = dot / std::sqrt(double(dh));
            top = std::max(top, score[j]);
          }
          for (double &sc : score) {
            sc = std::exp(sc - top);
            sum += sc;
          }
          for (int64_t d = 0; d < dh; ++d) {
            double acc = 0;
            for (int64_t j = 0; j <= last; ++j) {
              acc += score[j] / sum *
                     values.data<float>()[(bi * kCapacity + j) * kWidth +
                                          h * dh + d];
            }
            expected.data<float>()[(bi * n + i) * kWidth + h * dh + d] =
                float(acc);
          }
        }
      }
    }
    std::vector<Tensor> out =
        jit->call("step", {q, k, v, kc, vc, Arg(pos)});
    ASSERT_EQ(out.size(), 3u);
    ref::expectClose(out[0], expected);
    // Written in place, and only at [pos, pos + n): compared bit for bit
    // (NaN included).
    EXPECT_EQ(out[1].raw(), kc.raw());
    EXPECT_EQ(out[2].raw(), vc.raw());
    EXPECT_EQ(std::memcmp(kc.raw(), keys.raw(), keys.nbytes()), 0);
    EXPECT_EQ(std::memcmp(vc.raw(), values.raw(), values.nbytes()), 0);
  }
  // Positions past the capacity are refused before anything is written.
  Tensor kc = Tensor::zeros({1, kCapacity, kWidth}, DType::f32);
  Tensor one = ref::randomTensor({1, 2, kWidth}, 95);
  std::string message = expectErrorMessage([&] {
    jit->call("step", {one, one, one, kc, kc.clone(), Arg(int64_t(129))});
  });
  EXPECT_NE(message.find("exceed"), std::string::npos) << message;
  EXPECT_EQ(kc.toVector<float>(),
            std::vector<float>(kCapacity * kWidth, 0.0f));
}

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

namespace {
/// Per-position loss with label smoothing: lse - (1-s)x[t] - s·mean(x), with
/// lse = 0 for log-probabilities.
std::vector<double> lossRows(const Tensor &x, const Tensor &t, bool logits,
                             double s) {
  int64_t c = x.shape().back();
  std::vector<double> rows;
  for (int64_t r = 0; r < t.numel(); ++r) {
    const float *row = x.data<float>() + r * c;
    double lse = 0, mean = 0;
    if (logits) {
      double mx = *std::max_element(row, row + c);
      double sum = 0;
      for (int64_t k = 0; k < c; ++k) {
        sum += std::exp(row[k] - mx);
      }
      lse = mx + std::log(sum);
    }
    for (int64_t k = 0; k < c; ++k) {
      mean += (double(row[k]) - lse) / c;
    }
    int64_t target = t.data<int64_t>()[r];
    double nll = target >= 0 && target < c ? lse - row[target] : 0;
    rows.push_back((1 - s) * nll - s * mean);
  }
  return rows;
}
} // namespace

TEST(OpNumerics, LossesWithIgnoreIndexAndSmoothing) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%x: tensor<?x?x7xf32>, %t: tensor<?x?xi64>) -> (tensor<f32>, tensor<f32>, tensor<?x?xf32>) {
      %0 = kiln.cross_entropy %x, %t {ignore_index = 0 : i64, label_smoothing = 0.1 : f64}
          : (tensor<?x?x7xf32>, tensor<?x?xi64>) -> tensor<f32>
      %1 = kiln.cross_entropy %x, %t {reduction = #kiln<loss_reduction sum>}
          : (tensor<?x?x7xf32>, tensor<?x?xi64>) -> tensor<f32>
      %lp = kiln.log_softmax %x : (tensor<?x?x7xf32>) -> tensor<?x?x7xf32>
      %2 = kiln.nll_loss %lp, %t {reduction = #kiln<loss_reduction none>, label_smoothing = 0.2 : f64}
          : (tensor<?x?x7xf32>, tensor<?x?xi64>) -> tensor<?x?xf32>
      return %0, %1, %2 : tensor<f32>, tensor<f32>, tensor<?x?xf32>
    })");
  for (auto [b, t] : kSizes) {
    Tensor x = ref::randomTensor({b, t, 7}, 120, -3, 3);
    Tensor targets = ref::randomIds({b, t}, 7, 121);
    targets.data<int64_t>()[b * t - 1] = 0; // ignored by the first loss
    std::vector<Tensor> out = jit->call("f", {x, targets});
    std::vector<double> smooth = lossRows(x, targets, true, 0.1);
    std::vector<double> plain = lossRows(x, targets, true, 0.0);
    double sum = 0, kept = 0, total = 0;
    for (int64_t r = 0; r < b * t; ++r) {
      if (targets.data<int64_t>()[r] != 0) {
        sum += smooth[r];
        kept += 1;
      }
      total += plain[r];
    }
    if (kept > 0) {
      EXPECT_NEAR(out[0].data<float>()[0], sum / kept, 1e-5) << b << "x" << t;
    } else {
      // Every position ignored: 0/0, as PyTorch.
      EXPECT_TRUE(std::isnan(out[0].data<float>()[0]));
    }
    EXPECT_NEAR(out[1].data<float>()[0], total, 1e-4);
    std::vector<double> none = lossRows(x, targets, true, 0.2);
    Tensor expected = Tensor::empty({b, t}, DType::f32);
    for (int64_t r = 0; r < b * t; ++r) {
      expected.data<float>()[r] = float(none[r]);
    }
    ref::expectClose(out[2], expected);
  }
  // Targets outside the classes are refused; the ignored id is allowed.
  Tensor bad = Tensor::fromVector<int64_t>({1, 2}, {1, 7});
  std::string message = expectErrorMessage(
      [&] { jit->call("f", {ref::randomTensor({1, 2, 7}, 1), bad}); });
  EXPECT_NE(message.find("outside [0, 7)"), std::string::npos) << message;
}

TEST(OpNumerics, CallChecksArgumentsBeforeRunning) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%a: tensor<?x4xf32>, %b: tensor<?x4xf32>) -> tensor<?x4xf32> {
      %0 = kiln.add %a, %b : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
      return %0 : tensor<?x4xf32>
    })");
  Tensor a = ref::randomTensor({3, 4}, 1);
  EXPECT_NE(expectErrorMessage([&] {
              jit->call("f", {a});
            }).find("takes 2 arguments, got 1"),
            std::string::npos);
  EXPECT_NE(expectErrorMessage([&] {
              jit->call("f", {a, ref::randomTensor({3, 5}, 2)});
            }).find("must have shape [?, 4]"),
            std::string::npos);
  EXPECT_NE(expectErrorMessage(
                [&] { jit->call("f", {a, ref::randomTensor({2, 4}, 2)}); })
                .find("dimension 0 of argument #1 'arg1' of 'f' is 2 but must "
                      "equal dimension of argument #0 'arg0' of 'f' (3)"),
            std::string::npos);
  EXPECT_NE(expectErrorMessage([&] {
              jit->call("f", {a, Tensor::zeros({3, 4}, DType::i64)});
            }).find("must have dtype f32, got i64"),
            std::string::npos);
  EXPECT_NE(expectErrorMessage([&] {
              jit->call("g", {a, a});
            }).find("no function 'g'"),
            std::string::npos);
  // Inputs are never written to.
  Tensor before = a.clone();
  jit->call("f", {a, a});
  EXPECT_EQ(a.toVector<float>(), before.toVector<float>());
}

TEST(Jit, DumpsTheIROfEveryStage) {
  // The directory is made when missing, parents included.
  std::string dir = ::testing::TempDir() + "kiln-dump-" +
                    std::to_string(::getpid()) + "/stages";
  JitOptions options;
  options.dumpDirectory = dir;
  options.dumpStem = "relu";
  auto jit = JitModule::compileSource(R"(
    func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {
      %0 = kiln.relu %x : (tensor<?xf32>) -> tensor<?xf32>
      return %0 : tensor<?xf32>
    })",
                                      options);
  auto read = [&](const std::string &suffix) {
    std::ifstream in(dir + "/relu." + suffix);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_NE(read("kiln.mlir").find("kiln.relu"), std::string::npos);
  EXPECT_NE(read("linalg.mlir").find("linalg.generic"), std::string::npos);
  EXPECT_EQ(read("linalg.mlir").find("kiln."), std::string::npos);
  EXPECT_NE(read("llvm.mlir").find("llvm.func @f"), std::string::npos);
  EXPECT_NE(read("ll").find("define"), std::string::npos);
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
  // Where a file stands in the way, the error says so.
  std::string blocked = ::testing::TempDir() + "kiln-dump-file-" +
                        std::to_string(::getpid());
  std::ofstream(blocked) << "not a directory";
  options.dumpDirectory = blocked + "/stages";
  std::string message = expectErrorMessage([&] {
    JitModule::compileSource("func.func @f() { return }", options);
  });
  std::filesystem::remove(blocked);
  EXPECT_NE(message.find("cannot create the IR dump directory '" + blocked +
                         "/stages'"),
            std::string::npos)
      << message;
}

namespace {
// Compiled code takes its buffers from runtime/Allocator.h: a second call
// of a function with large temporaries and results reuses the blocks of the
// first instead of asking the system for fresh memory.
// A chain of eight products [256, 1024] x [1024, 1024] (1 MiB results
// that no product can write over its own input): each result dies after
// the next product. Freed at the end of the function (MLIR's deallocation),
// all eight were live at once; kiln-deallocate-after-last-use frees each
// after its last use, and the arena planned from the first call holds two
// of them beside the transposed weight and serves every later call.
TEST(OpNumerics, CompiledCodeFreesEarlyAndReplaysItsPlan) {
  if (kAddressSanitizer) {
    GTEST_SKIP() << "no cache and no plans under AddressSanitizer";
  }
  std::string body;
  std::string prev = "%x";
  for (int i = 0; i < 8; ++i) {
    body += fmt::format("      %y{0} = kiln.linear {1}, %w : "
                        "(tensor<?x1024xf32>, tensor<1024x1024xf32>) -> "
                        "tensor<?x1024xf32>\n",
                        i, prev);
    prev = fmt::format("%y{}", i);
  }
  auto module = JitModule::compileSource(
      "    func.func @f(%x: tensor<?x1024xf32>, %w: tensor<1024x1024xf32>) "
      "-> tensor<?x1024xf32> {\n" +
      body + "      return " + prev + " : tensor<?x1024xf32>\n    }");
  Tensor x = Tensor::full({256, 1024}, 0.5f);
  Tensor w = Tensor::full({1024, 1024}, 0.001f);
  size_t mib = 1 << 20;
  // y_i = 0.5 · 1.024^(i+1) in every element.
  float expected = 0.5f * std::pow(1.024f, 8.0f);
  memory::trim();
  Tensor first = module->function("f").call({x, w})[0];
  EXPECT_NEAR(first.data<float>()[0], expected, 1e-4);
  // The recording call: the transposed weights (4 MiB, at most two at
  // once) and at most three results live at once, never all eight.
  EXPECT_LE(memory::stats().peakLiveBytes, 11 * mib);
  size_t arena = memory::stats().arenaBytes;
  EXPECT_GT(arena, 0u);
  EXPECT_LE(arena, 11 * mib);
  auto lastElement = [&] {
    Tensor y = module->function("f").call({x, w})[0];
    return y.data<float>()[y.numel() - 1]; // y's block goes back to the cache
  };
  EXPECT_NEAR(lastElement(), expected, 1e-4);
  memory::Stats before = memory::stats();
  EXPECT_NEAR(lastElement(), expected, 1e-4);
  memory::Stats after = memory::stats();
  EXPECT_EQ(after.fresh, before.fresh); // the result reuses a cached block
  EXPECT_EQ(after.arenaBytes, arena);
  memory::trim();
}

TEST(OpNumerics, CompiledCodeReusesBuffersAcrossCalls) {
  if (kAddressSanitizer) {
    GTEST_SKIP() << "no cache and no plans under AddressSanitizer";
  }
  auto module = JitModule::compileSource(R"(
    func.func @f(%x: tensor<?x512xf32>, %w: tensor<512x512xf32>) -> tensor<?x512xf32> {
      %h = kiln.linear %x, %w : (tensor<?x512xf32>, tensor<512x512xf32>) -> tensor<?x512xf32>
      %y = kiln.gelu %h : (tensor<?x512xf32>) -> tensor<?x512xf32>
      return %y : tensor<?x512xf32>
    })");
  Tensor x = Tensor::full({300, 512}, 0.01f);
  Tensor w = Tensor::full({512, 512}, 0.02f);
  memory::trim();
  float first = module->function("f").call({x, w})[0].data<float>()[0];
  memory::Stats before = memory::stats();
  EXPECT_GT(before.cachedBytes, 0u); // the temporaries and the result
  float second = module->function("f").call({x, w})[0].data<float>()[0];
  memory::Stats after = memory::stats();
  EXPECT_GT(after.reused, before.reused);
  EXPECT_EQ(after.fresh, before.fresh);
  EXPECT_EQ(first, second);
  memory::trim();
}
} // namespace
