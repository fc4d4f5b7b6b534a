//===- OpNumericsAttentionTest.cpp - Attention compiled against references ===//
//
// Each test compiles a function of one op with dynamic batch/sequence sizes,
// runs it for several sizes through the same compiled code, and compares with
// the naive loops of Reference.h.
//
// This file: multi-head attention (self and cross) and attention over a
// key/value cache written in place.
//
//===----------------------------------------------------------------------===//

#include "OpNumerics.h"
#include "Reference.h"

#include "compiler/Target/JIT/Jit.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>

using namespace kiln;
using namespace kiln::opnumerics;

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
    std::vector<Tensor> out = jit->call("step", {q, k, v, kc, vc, Arg(pos)});
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
  EXPECT_EQ(kc.toVector<float>(), std::vector<float>(kCapacity * kWidth, 0.0f));
}
