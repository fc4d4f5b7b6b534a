//===- Reference.h - Naive reference implementations for tests ---*- C++
//-*-===//
//
// Independent, deliberately simple loops (double accumulation) that the
// compiled kernels are checked against. Nothing here shares code with the
// compiler.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_JIT_REFERENCE_H
#define KILN_TEST_UNIT_JIT_REFERENCE_H

#include "base/SplitMix64.h"
#include "runtime/Tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace kiln::ref {

/// Uniform random floats in [lo, hi) from a fixed seed.
inline Tensor randomTensor(std::vector<int64_t> shape, uint32_t seed,
                           float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t = Tensor::empty(std::move(shape), DType::f32);
  float *p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    p[i] = dist(gen);
  }
  return t;
}

/// Random integer ids in [0, bound).
inline Tensor randomIds(std::vector<int64_t> shape, int64_t bound,
                        uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int64_t> dist(0, bound - 1);
  Tensor t = Tensor::empty(std::move(shape), DType::i64);
  int64_t *p = t.data<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    p[i] = dist(gen);
  }
  return t;
}

/// Expects equal shapes and |a - b| <= atol + rtol·|b| everywhere.
inline void expectClose(const Tensor &actual, const Tensor &expected,
                        double atol = 1e-5, double rtol = 1e-4) {
  ASSERT_EQ(actual.shape(), expected.shape());
  const float *a = actual.data<float>();
  const float *b = expected.data<float>();
  int64_t bad = 0;
  for (int64_t i = 0; i < actual.numel(); ++i) {
    double diff = std::fabs(double(a[i]) - double(b[i]));
    if (!(diff <= atol + rtol * std::fabs(double(b[i])))) {
      if (++bad <= 5) {
        ADD_FAILURE() << "element " << i << ": got " << a[i] << ", expected "
                      << b[i];
      }
    }
  }
  EXPECT_EQ(bad, 0) << "of " << actual.numel() << " elements";
}

/// y = x·wᵀ + b over the last dimension.
inline Tensor linear(const Tensor &x, const Tensor &w, const Tensor *b) {
  int64_t in = x.shape().back(), out = w.shape()[0];
  std::vector<int64_t> shape = x.shape();
  shape.back() = out;
  Tensor y = Tensor::empty(shape, DType::f32);
  int64_t rows = x.numel() / in;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double acc = b ? b->data<float>()[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) {
        acc +=
            double(x.data<float>()[r * in + i]) * w.data<float>()[o * in + i];
      }
      y.data<float>()[r * out + o] = float(acc);
    }
  }
  return y;
}

inline Tensor layerNorm(const Tensor &x, const Tensor &g, const Tensor &b,
                        double eps, bool stdEps) {
  int64_t d = x.shape().back();
  Tensor y = Tensor::empty(x.shape(), DType::f32);
  for (int64_t r = 0; r < x.numel() / d; ++r) {
    const float *row = x.data<float>() + r * d;
    double mean = 0;
    for (int64_t i = 0; i < d; ++i) {
      mean += row[i];
    }
    mean /= d;
    double sq = 0;
    for (int64_t i = 0; i < d; ++i) {
      sq += (row[i] - mean) * (row[i] - mean);
    }
    double inv = stdEps ? 1.0 / (std::sqrt(sq / (d - 1)) + eps)
                        : 1.0 / std::sqrt(sq / d + eps);
    for (int64_t i = 0; i < d; ++i) {
      y.data<float>()[r * d + i] = float(
          (row[i] - mean) * inv * g.data<float>()[i] + b.data<float>()[i]);
    }
  }
  return y;
}

/// Multi-head attention with PyTorch-layout weights. mask: [B, Tk] (non-zero
/// = attend) or null; causal aligned at the end; masked scores = -1e9.
inline Tensor attention(const Tensor &q_in, const Tensor &kv_in,
                        const Tensor &wq, const Tensor &wk, const Tensor &wv,
                        const Tensor &wo, const Tensor *bq, const Tensor *bk,
                        const Tensor *bv, const Tensor *bo, const Tensor *mask,
                        int64_t heads, bool causal) {
  Tensor q = linear(q_in, wq, bq), k = linear(kv_in, wk, bk),
         v = linear(kv_in, wv, bv);
  int64_t B = q.shape()[0], Tq = q.shape()[1], Tk = k.shape()[1];
  int64_t D = q.shape()[2], dh = D / heads;
  Tensor o = Tensor::zeros({B, Tq, D}, DType::f32);
  std::vector<double> s(Tk);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < Tq; ++i) {
        double mx = -1e300;
        for (int64_t j = 0; j < Tk; ++j) {
          double acc = 0;
          for (int64_t c = 0; c < dh; ++c) {
            acc += double(q.data<float>()[(b * Tq + i) * D + h * dh + c]) *
                   k.data<float>()[(b * Tk + j) * D + h * dh + c];
          }
          acc /= std::sqrt(double(dh));
          bool keep = true;
          if (mask) {
            keep = mask->data<int64_t>()[b * Tk + j] != 0;
          }
          if (causal && j > i + (Tk - Tq)) {
            keep = false;
          }
          s[j] = keep ? acc : -1e9;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < Tk; ++j) {
          s[j] = std::exp(s[j] - mx);
          sum += s[j];
        }
        for (int64_t c = 0; c < dh; ++c) {
          double acc = 0;
          for (int64_t j = 0; j < Tk; ++j) {
            acc += s[j] / sum * v.data<float>()[(b * Tk + j) * D + h * dh + c];
          }
          o.data<float>()[(b * Tq + i) * D + h * dh + c] = float(acc);
        }
      }
    }
  }
  return linear(o, wo, bo);
}

inline double gelu(double x, bool tanhApprox) {
  if (tanhApprox) {
    return 0.5 * x *
           (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}

/// The documented dropout mask: keep iff the top bits of
/// mix(mix(seed + stream·G) ^ index) reach round(p·2^24); kept values scale
/// by 1/(1-p). mix is splitmix64 (base/SplitMix64.h, whose constants the
/// lowering reads too).
inline float dropoutScale(uint64_t seed, int64_t stream, double p,
                          uint64_t index) {
  namespace sm = kiln::splitmix64;
  uint64_t bits = sm::dropoutBits(seed, stream, index);
  bool keep = (bits >> (64 - sm::kDropoutBits)) >= sm::dropoutThreshold(p);
  return keep ? float(1.0 / (1.0 - p)) : 0.0f;
}

} // namespace kiln::ref

#endif // KILN_TEST_UNIT_JIT_REFERENCE_H
