//===- OpNumericsTest.cpp - Layers and losses, compiled, vs references ----===//
//
// Each test compiles a function of one op with dynamic batch/sequence sizes,
// runs it for several sizes through the same compiled code, and compares with
// the naive loops of Reference.h.
//
// This file: the layers (embedding, positional encoding, layer norm,
// feed-forward, linear and matmul) and the losses, then what every call
// shares (argument checks, IR dumps, buffers). Attention is in
// OpNumericsAttentionTest.cpp; elementwise, reduction and shape ops in
// OpNumericsElementwiseTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "OpNumerics.h"
#include "Differential.h"
#include "Reference.h"

#include "compiler/Target/JIT/Jit.h"
#include "runtime/Allocator.h"
#include "runtime/Sanitizer.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

using namespace kiln;
using namespace kiln::opnumerics;

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

// The Llama blocks accept empty batches and sequences: RMS norm, rotary
// embeddings at an offset, SiLU, grouped-query causal attention, and the
// training step's backward ops (through kiln-autodiff) return empty results
// of the right shapes, and the first real size after them is right.
TEST(OpNumerics, LlamaBlocksTakeEmptyBatchesAndSequences) {
  auto jit = JitModule::compileSource(R"(
    func.func @f(%x: tensor<?x?x8xf32>, %w: tensor<8xf32>, %k: tensor<?x?x4xf32>, %pos: i64)
        -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>) {
      %n = kiln.rms_norm %x, %w : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
      %r = kiln.rotary %n offset %pos {head_dim = 4 : i64} : (tensor<?x?x8xf32>, i64) -> tensor<?x?x8xf32>
      %s = kiln.silu %r : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
      %kr = kiln.rotary %k {head_dim = 4 : i64} : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
      %a = kiln.attention %s, %kr, %k {num_heads = 2 : i64, num_kv_heads = 1 : i64, causal}
          : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>) -> tensor<?x?x8xf32>
      return %s, %a : tensor<?x?x8xf32>, tensor<?x?x8xf32>
    }
    func.func @grad(%g: tensor<?x?x8xf32>, %x: tensor<?x?x8xf32>, %w: tensor<8xf32>)
        -> (tensor<?x?x8xf32>, tensor<8xf32>) {
      %dx, %dw = kiln.rms_norm_grad %g, %x, %w : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>)
          -> (tensor<?x?x8xf32>, tensor<8xf32>)
      return %dx, %dw : tensor<?x?x8xf32>, tensor<8xf32>
    })");
  Tensor w = ref::randomTensor({8}, 3);
  for (auto [b, t] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 5}, {2, 0}, {0, 0}, {1, 3}}) {
    Tensor x = ref::randomTensor({b, t, 8}, 4),
           k = ref::randomTensor({b, t, 4}, 5);
    std::vector<Tensor> out = jit->call("f", {x, w, k, int64_t(7)});
    EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{b, t, 8}));
    EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{b, t, 8}));
    std::vector<Tensor> grads = jit->call("grad", {x, x, w});
    EXPECT_EQ(grads[0].shape(), (std::vector<int64_t>{b, t, 8}));
    ASSERT_EQ(grads[1].shape(), (std::vector<int64_t>{8}));
    if (b * t == 0) {
      // No rows: the weight's gradient is a sum of nothing.
      EXPECT_EQ(grads[1].toVector<float>(), std::vector<float>(8, 0.0f));
    } else {
      // SiLU of the rotation of the normalized rows, in double.
      std::vector<float> xs = x.toVector<float>(), ws = w.toVector<float>();
      for (int64_t row = 0; row < b * t; ++row) {
        double sq = 0;
        for (int64_t i = 0; i < 8; ++i) {
          sq += double(xs[row * 8 + i]) * xs[row * 8 + i];
        }
        double inv = 1.0 / std::sqrt(sq / 8 + 1e-6);
        double pos = double(row % t + 7);
        for (int64_t i = 0; i < 8; ++i) {
          int64_t head = i / 4 * 4, j = i % 4, pair = j % 2;
          double angle = pos * std::pow(10000.0, -2.0 * pair / 4);
          auto n = [&](int64_t c) { return xs[row * 8 + c] * inv * ws[c]; };
          double v = j < 2 ? n(head + j) * std::cos(angle) -
                                 n(head + j + 2) * std::sin(angle)
                           : n(head + j) * std::cos(angle) +
                                 n(head + j - 2) * std::sin(angle);
          EXPECT_NEAR(out[0].data<float>()[row * 8 + i], v / (1 + std::exp(-v)),
                      2e-5);
        }
      }
    }
  }
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

namespace {
/// Compiles `source` for each x86-64 level and runs `check` on the module
/// where this host runs that level's code (elsewhere it is only compiled).
void forEachCpuLevel(const std::string &source,
                     const std::function<void(JitModule &)> &check) {
  for (const char *cpu : {"x86-64-v3", "x86-64-v4"}) {
    SCOPED_TRACE(cpu);
    JitOptions options;
    options.cpu = cpu;
    auto jit = JitModule::compileSource(source, options);
    if (diff::detail::hostRuns(cpu)) {
      check(*jit);
    }
  }
}
} // namespace

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
  forEachCpuLevel(source, [&](JitModule &jit) {
    for (auto [k, n] : shapes) {
      Tensor w = ref::randomTensor({n, k}, 70), bias = ref::randomTensor({n}, 71);
      for (auto [b, t] : rows) {
        SCOPED_TRACE(fmt::format("K {} N {} rows {}x{}", k, n, b, t));
        Tensor x = ref::randomTensor({b, t, k}, 72);
        ref::expectClose(jit.call(fmt::format("lin_{}_{}", k, n),
                                   {x, w, bias})[0],
                         ref::linear(x, w, &bias), atol, rtol);
      }
    }
    Tensor head = ref::randomTensor({65, 48}, 73);
    for (int64_t r : {0, 1, 3, 4, 5, 17}) {
      Tensor x = ref::randomTensor({r, 48}, 74);
      ref::expectClose(jit.call("head", {x, head})[0],
                       ref::linear(x, head, nullptr), atol, rtol);
    }
    Tensor x1 = ref::randomTensor({1, 1, 32}, 75),
           w1 = ref::randomTensor({17, 32}, 76);
    ref::expectClose(jit.call("one", {x1, w1})[0],
                     ref::linear(x1, w1, nullptr), atol, rtol);
    Tensor f1 = ref::randomTensor({80, 32}, 77), f2 = ref::randomTensor({32, 80}, 78);
    Tensor c1 = ref::randomTensor({80}, 79), c2 = ref::randomTensor({32}, 80);
    for (auto [b, t] : rows) {
      Tensor x = ref::randomTensor({b, t, 32}, 81);
      Tensor h = mapRef(ref::linear(x, f1, &c1),
                        [](double v) { return std::max(v, 0.0); });
      ref::expectClose(jit.call("ffn", {x, f1, f2, c1, c2})[0],
                       ref::linear(h, f2, &c2), atol, rtol);
    }
  });
}

// Weight gradients gᵀ·x (g [K, M] read transposed) whose rows of g leave the
// caches between the panels of x that read them (TileSelection.cpp): g is
// copied block by block, in at least 8 blocks of rows so that the threads
// take whole blocks. Compiled for named CPUs (32 KiB L1, 512 KiB L2): M 672
// with K 1030 (rows 2,688 bytes apart, in 32 of the L1's sets; on AVX-512
// 88-row blocks, the last of 56, K across k-blocks of 512; AVX2, whose
// k-blocks of 256 for a long reduction, TargetInfo::blockKLongReduction,
// fit in those sets, copies g into micro-panels of its tiles' 6 rows in 8
// blocks of 84 on all cores, TargetInfo::tileRowsAndPanelInL1), and a
// dynamic K with M 640 (rows in 8 sets: copied on both, 80-row blocks on
// AVX-512, 84 on AVX2 in panels, the last block of 52 rows ending in a
// panel of 4; K 513, 0, 1, 0, 513, 1030, 0 across k-blocks of
// 512 and 256: an empty reduction after a call that left its result in the
// buffer, whose zero fill the first k-block had done, had returned that
// result), N 65 across panels of 32; g read in place where a k-block of it
// fits in L2 (K 256, M 384; AVX2 copies it into panels, 8 blocks of 48
// rows) or its rows spread over every set (M 200, on AVX2 too: too few
// rows for 8 blocks). Against double loops.
TEST(OpNumerics, WeightGradientsCopyRowsThatLeaveTheCaches) {
  struct Shape {
    int64_t k, m, n;
  };
  const std::vector<Shape> shapes = {{1030, 672, 65}, {256, 384, 33},
                                     {1030, 200, 17}};
  std::string source;
  for (auto [k, m, n] : shapes) {
    source += fmt::format(R"(
      func.func @dw_{0}_{1}_{2}(%g: tensor<{0}x{1}xf32>, %x: tensor<{0}x{2}xf32>) -> tensor<{1}x{2}xf32> {{
        %0 = kiln.matmul %g, %x {{transpose_lhs}} : (tensor<{0}x{1}xf32>, tensor<{0}x{2}xf32>) -> tensor<{1}x{2}xf32>
        return %0 : tensor<{1}x{2}xf32>
      }})",
                          k, m, n);
  }
  source += R"(
    func.func @dw_dynamic(%g: tensor<?x640xf32>, %x: tensor<?x65xf32>) -> tensor<640x65xf32> {
      %0 = kiln.matmul %g, %x {transpose_lhs} : (tensor<?x640xf32>, tensor<?x65xf32>) -> tensor<640x65xf32>
      return %0 : tensor<640x65xf32>
    })";
  auto expected = [](const Tensor &g, const Tensor &x) {
    int64_t k = g.shape()[0], m = g.shape()[1], n = x.shape()[1];
    Tensor out = Tensor::empty({m, n}, DType::f32);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t l = 0; l < k; ++l) {
          acc += double(g.data<float>()[l * m + i]) *
                 x.data<float>()[l * n + j];
        }
        out.data<float>()[i * n + j] = float(acc);
      }
    }
    return out;
  };
  const double atol = 1e-4, rtol = 1e-4;
  forEachCpuLevel(source, [&](JitModule &jit) {
    for (auto [k, m, n] : shapes) {
      SCOPED_TRACE(fmt::format("K {} M {} N {}", k, m, n));
      Tensor g = ref::randomTensor({k, m}, 90);
      Tensor x = ref::randomTensor({k, n}, 91);
      ref::expectClose(
          jit.call(fmt::format("dw_{}_{}_{}", k, m, n), {g, x})[0],
          expected(g, x), atol, rtol);
    }
    for (int64_t k : {513, 0, 1, 0, 513, 1030, 0}) {
      SCOPED_TRACE(fmt::format("dynamic K {}", k));
      Tensor g = ref::randomTensor({k, 640}, 92);
      Tensor x = ref::randomTensor({k, 65}, 93);
      ref::expectClose(jit.call("dw_dynamic", {g, x})[0], expected(g, x), atol,
                       rtol);
    }
  });
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
  // No kiln op is left; the module names the CPU "host" resolved to.
  std::string linalg = read("linalg.mlir");
  EXPECT_EQ(linalg.find(" kiln."), std::string::npos);
  EXPECT_NE(linalg.find("module attributes {kiln.target = #kiln.target<cpu = "),
            std::string::npos);
  EXPECT_EQ(linalg.find("cpu = \"host\""), std::string::npos);
  EXPECT_NE(read("llvm.mlir").find("target_cpu = "), std::string::npos);
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
