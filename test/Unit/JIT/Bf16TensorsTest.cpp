//===- Bf16TensorsTest.cpp - bf16 tensors through kiln ops ----------------===//
//
// Functions on bf16 tensors (kiln-widen-bf16: each op computed in f32
// between casts) against naive loops in double on the same bf16 inputs,
// with bounds fixed from bf16's 8-bit significand before the code was
// written: every op rounds its result once, so
//
//   |got - ref| <= 2^-8 |ref| + a
//
// where 2^-8 is half a bf16 ulp relative to the value, and `a` bounds the
// f32 arithmetic before the rounding (per op below: 2^-20 of the operands'
// magnitude for exact arithmetic, 1e-5 where a math approximation or a
// reduction of normalized values runs, (K + 2) 2^-23 sum |a||b| for
// products of K terms). Casts and the ops that only move elements must be
// exact: f32 to bf16 bit for bit the nearest bf16 (ties to even; the
// test's own reference, compared in double) on both conversion paths
// (vcvtneps2bf16 with AVX512-BF16, integer arithmetic on x86-64-v3).
//
//===----------------------------------------------------------------------===//

#include "Reference.h"

#include "compiler/DSL/DSL.h"
#include "compiler/Target/JIT/Jit.h"
#include "runtime/Error.h"
#include "test/Unit/Runtime/NearestBF16.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

using namespace kiln;

namespace {

bool hostHasBf16() { return __builtin_cpu_supports("avx512bf16"); }

/// The CPUs each test compiles for: the host's (vcvtneps2bf16 where it has
/// AVX512-BF16) and x86-64-v3 (no AVX512: the integer conversions).
std::vector<std::string> cpus() { return {"host", "x86-64-v3"}; }

std::shared_ptr<JitModule> compile(const std::string &source,
                                   const std::string &cpu,
                                   const std::string &precision = "fp32") {
  JitOptions options;
  options.cpu = cpu;
  options.precision = precision;
  return JitModule::compileSource(source, options);
}

/// Random values rounded to bf16, as a bf16 tensor.
Tensor randomBf16(std::vector<int64_t> shape, uint32_t seed, float lo = -1.0f,
                  float hi = 1.0f) {
  return ref::randomTensor(std::move(shape), seed, lo, hi).to(DType::bf16);
}

/// The values of a bf16 tensor, exactly, as doubles.
std::vector<double> values(const Tensor &t) {
  std::vector<double> out;
  for (BFloat16 v : t.toVector<BFloat16>()) {
    out.push_back(v.toFloat());
  }
  return out;
}

/// Expects `got` (bf16) within 2^-8 |ref| + absolute[i] of `ref` at every
/// element; `what` names the case.
void expectRounded(const Tensor &got, const std::vector<int64_t> &shape,
                   const std::vector<double> &ref,
                   const std::function<double(size_t)> &absolute) {
  ASSERT_EQ(got.dtype(), DType::bf16);
  ASSERT_EQ(got.shape(), shape);
  std::vector<double> g = values(got);
  ASSERT_EQ(g.size(), ref.size());
  int failures = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    double bound = std::ldexp(std::fabs(ref[i]), -8) + absolute(i);
    if (!(std::fabs(g[i] - ref[i]) <= bound) && failures++ < 5) {
      ADD_FAILURE() << "element " << i << ": got " << g[i] << ", want "
                    << ref[i] << " (bound " << bound << ")";
    }
  }
}

const char *kElementwise = R"(
  func.func @add(%a: tensor<?x?xbf16>, %b: tensor<?xbf16>) -> tensor<?x?xbf16> {
    %0 = kiln.add %a, %b : (tensor<?x?xbf16>, tensor<?xbf16>) -> tensor<?x?xbf16>
    return %0 : tensor<?x?xbf16>
  }
  func.func @chain(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
    %0 = kiln.mul %a, %b : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
    %1 = kiln.gelu %0 : (tensor<?x?xbf16>) -> tensor<?x?xbf16>
    %2 = kiln.scale %1 {factor = 3.0 : f64} : (tensor<?x?xbf16>) -> tensor<?x?xbf16>
    return %2 : tensor<?x?xbf16>
  }
  func.func @to_bf16(%x: tensor<?xf32>) -> tensor<?xbf16> {
    %0 = kiln.cast %x : (tensor<?xf32>) -> tensor<?xbf16>
    return %0 : tensor<?xbf16>
  }
  func.func @to_f32(%x: tensor<?xbf16>) -> tensor<?xf32> {
    %0 = kiln.cast %x : (tensor<?xbf16>) -> tensor<?xf32>
    return %0 : tensor<?xf32>
  }
  func.func @moves(%x: tensor<?x?xbf16>) -> (tensor<?x?xbf16>, tensor<?x?xbf16>) {
    %t = kiln.transpose %x [1, 0] : (tensor<?x?xbf16>) -> tensor<?x?xbf16>
    %c = kiln.concat %x, %x {axis = 1 : i64} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
    return %t, %c : tensor<?x?xbf16>, tensor<?x?xbf16>
  })";

// Sizes across the vector width (8 and 16 lanes) and the tiles, and 0.
const std::vector<int64_t> kSizes = {0, 1, 15, 16, 17, 33, 65};

} // namespace

// f32 -> bf16 bit for bit as round-to-nearest-even on both conversion
// paths: ties to even both ways, the largest f32 to infinity, infinities,
// NaNs stay NaNs, signed zeros, and every length across the vector tails.
// bf16 -> f32 exact.
TEST(Bf16Tensors, CastsRoundToNearestEvenOnEveryPath) {
  const float tieDown = 1.0f + std::ldexp(1.0f, -8); // 1 + half an ulp
  const float tieUp = 1.0f + 3 * std::ldexp(1.0f, -8);
  std::vector<float> special = {0.0f,
                                -0.0f,
                                1.0f,
                                tieDown,
                                -tieDown,
                                tieUp,
                                1.0f + std::ldexp(1.0f, -8) +
                                    std::ldexp(1.0f, -20),
                                std::numeric_limits<float>::max(),
                                -std::numeric_limits<float>::max(),
                                std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::quiet_NaN(),
                                1e-30f,
                                -3.0e38f,
                                65504.0f,
                                0.1f};
  for (const std::string &cpu : cpus()) {
    SCOPED_TRACE(cpu);
    auto jit = compile(kElementwise, cpu);
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(16), int64_t(17),
                      int64_t(33), int64_t(65), int64_t(1000)}) {
      SCOPED_TRACE(fmt::format("n {}", n));
      std::vector<float> in =
          ref::randomTensor({n}, uint32_t(n) + 7, -1e3f, 1e3f)
              .toVector<float>();
      for (size_t i = 0; i < in.size() && i < special.size(); ++i) {
        in[i] = special[i];
      }
      Tensor x = Tensor::fromVector<float>({n}, in);
      Tensor got = jit->call("to_bf16", {x})[0];
      ASSERT_EQ(got.dtype(), DType::bf16);
      std::vector<BFloat16> bits = got.toVector<BFloat16>();
      // Half a bf16 ulp above its largest value: from there on, infinity.
      const float overflow = std::bit_cast<float>(uint32_t(0x7F7F8000));
      for (int64_t i = 0; i < n; ++i) {
        float got = bits[i].toFloat();
        if (std::isnan(in[i])) {
          EXPECT_TRUE(std::isnan(got)) << i;
        } else if (std::fabs(in[i]) >= overflow) {
          EXPECT_EQ(got, std::copysign(INFINITY, in[i])) << i;
        } else {
          EXPECT_EQ(std::bit_cast<uint32_t>(got),
                    std::bit_cast<uint32_t>(kiln::test::nearestBF16(in[i])))
              << "element " << i << " = " << in[i];
        }
      }
      Tensor back = jit->call("to_f32", {got})[0];
      ASSERT_EQ(back.dtype(), DType::f32);
      std::vector<float> wide = back.toVector<float>();
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(std::bit_cast<uint32_t>(wide[i]),
                  std::bit_cast<uint32_t>(bits[i].toFloat()))
            << i;
      }
    }
  }
}

// Broadcasting add and a fused chain mul -> gelu -> scale: one rounding
// per op (the chain rounds three times: the bound is applied per step on
// a reference that rounds the same way).
TEST(Bf16Tensors, ElementwiseOpsRoundTheirF32Result) {
  for (const std::string &cpu : cpus()) {
    SCOPED_TRACE(cpu);
    auto jit = compile(kElementwise, cpu);
    uint32_t seed = 11;
    for (int64_t m : kSizes) {
      for (int64_t n : kSizes) {
        SCOPED_TRACE(fmt::format("m {} n {}", m, n));
        Tensor a = randomBf16({m, n}, seed++, -4, 4);
        Tensor b = randomBf16({n}, seed++, -4, 4);
        Tensor c = randomBf16({m, n}, seed++, -2, 2);
        std::vector<double> va = values(a), vb = values(b), vc = values(c);
        std::vector<double> sum(va.size());
        for (size_t i = 0; i < va.size(); ++i) {
          sum[i] = va[i] + vb[i % size_t(std::max<int64_t>(n, 1))];
        }
        // An exact sum of two bf16 values, rounded once: no f32 error.
        expectRounded(jit->call("add", {a, b})[0], {m, n}, sum,
                      [](size_t) { return 0.0; });
        // mul (exact in f32, rounded), gelu of that (approximated to 1e-5,
        // rounded), times 3 (exact, rounded): each step's reference is
        // the previous step's bf16 result, as the code computes it.
        std::vector<double> product(va.size()), activated(va.size());
        for (size_t i = 0; i < va.size(); ++i) {
          product[i] = BFloat16::round(float(va[i] * vc[i])).toFloat();
          activated[i] =
              BFloat16::round(float(ref::gelu(product[i], false))).toFloat();
        }
        std::vector<double> scaled(va.size());
        for (size_t i = 0; i < va.size(); ++i) {
          scaled[i] = 3.0 * activated[i];
        }
        Tensor got = jit->call("chain", {a, c})[0];
        // The reference's own roundings may land one ulp away where the
        // code's gelu differs by 1e-5 at a tie: allow that ulp through a
        // and the 1e-5 of the approximation times the scale.
        expectRounded(got, {m, n}, scaled, [&](size_t i) {
          return 3e-5 + std::ldexp(std::fabs(scaled[i]), -7);
        });
      }
    }
  }
}

// Transpose and concat move bf16 elements: bit for bit.
TEST(Bf16Tensors, MovesAreExact) {
  auto jit = compile(kElementwise, "host");
  uint32_t seed = 3;
  for (int64_t m : kSizes) {
    for (int64_t n : kSizes) {
      SCOPED_TRACE(fmt::format("m {} n {}", m, n));
      Tensor x = randomBf16({m, n}, seed++);
      std::vector<Tensor> out = jit->call("moves", {x});
      std::vector<BFloat16> in = x.toVector<BFloat16>();
      std::vector<BFloat16> t = out[0].toVector<BFloat16>();
      std::vector<BFloat16> c = out[1].toVector<BFloat16>();
      ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{n, m}));
      ASSERT_EQ(out[1].shape(), (std::vector<int64_t>{m, 2 * n}));
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          EXPECT_EQ(t[j * m + i], in[i * n + j]);
          EXPECT_EQ(c[i * 2 * n + j], in[i * n + j]);
          EXPECT_EQ(c[i * 2 * n + n + j], in[i * n + j]);
        }
      }
    }
  }
}

namespace {
const char *kLayers = R"(
  func.func @linear(%x: tensor<?x?xbf16>, %w: tensor<?x?xbf16>, %b: tensor<?xbf16>) -> tensor<?x?xbf16> {
    %0 = kiln.linear %x, %w, %b : (tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?xbf16>) -> tensor<?x?xbf16>
    return %0 : tensor<?x?xbf16>
  }
  func.func @layernorm(%x: tensor<?x?xbf16>, %g: tensor<?xbf16>, %b: tensor<?xbf16>) -> tensor<?x?xbf16> {
    %0 = kiln.layernorm %x, %g, %b {eps = 1.0e-5 : f64} : (tensor<?x?xbf16>, tensor<?xbf16>, tensor<?xbf16>) -> tensor<?x?xbf16>
    return %0 : tensor<?x?xbf16>
  }
  func.func @softmax(%x: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
    %0 = kiln.softmax %x {axis = -1 : i64} : (tensor<?x?xbf16>) -> tensor<?x?xbf16>
    return %0 : tensor<?x?xbf16>
  }
  func.func @embedding(%ids: tensor<?xi64>, %table: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
    %0 = kiln.embedding %ids, %table : (tensor<?xi64>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
    return %0 : tensor<?x?xbf16>
  })";
} // namespace

// Linear (f32 sums of bf16 products: exact products), layer norm and
// softmax (statistics in f32) and embedding (a gather: exact), at sizes
// across the product tiles (8 x 32 registers, 16-value packing) and 0.
TEST(Bf16Tensors, LayersComputeInF32AndRoundOnce) {
  for (const std::string &cpu : cpus()) {
    for (const char *precision : {"fp32", "bf16"}) {
      if (std::string(precision) == "bf16" &&
          (cpu != "host" || !hostHasBf16())) {
        continue;
      }
      SCOPED_TRACE(fmt::format("{} {}", cpu, precision));
      auto jit = compile(kLayers, cpu, precision);
      uint32_t seed = 101;
      for (int64_t m : kSizes) {
        for (int64_t k : {int64_t(1), int64_t(16), int64_t(17), int64_t(65)}) {
          for (int64_t n : {int64_t(0), int64_t(1), int64_t(33)}) {
            SCOPED_TRACE(fmt::format("m {} k {} n {}", m, k, n));
            Tensor x = randomBf16({m, k}, seed++);
            Tensor w = randomBf16({n, k}, seed++);
            Tensor b = randomBf16({n}, seed++);
            std::vector<double> vx = values(x), vw = values(w), vb = values(b);
            std::vector<double> ref(size_t(m * n)), magnitude(ref.size());
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < n; ++j) {
                double s = vb[j], mag = std::fabs(vb[j]);
                for (int64_t l = 0; l < k; ++l) {
                  s += vx[i * k + l] * vw[j * k + l];
                  mag += std::fabs(vx[i * k + l] * vw[j * k + l]);
                }
                ref[i * n + j] = s;
                magnitude[i * n + j] = mag;
              }
            }
            // Operands already bf16: the bf16 products' rounding of them
            // is exact, so both precisions have the f32 sums' bound.
            expectRounded(
                jit->call("linear", {x, w, b})[0], {m, n}, ref, [&](size_t i) {
                  return double(k + 2) * std::ldexp(1.0, -23) * magnitude[i];
                });
          }
          SCOPED_TRACE(fmt::format("m {} d {}", m, k));
          Tensor x = randomBf16({m, k}, seed++, -3, 3);
          Tensor g = randomBf16({k}, seed++, 0.5, 1.5);
          Tensor b = randomBf16({k}, seed++);
          std::vector<double> vx = values(x), vg = values(g), vb = values(b);
          std::vector<double> norm(vx.size()), soft(vx.size());
          for (int64_t i = 0; i < m; ++i) {
            double mean = 0, sq = 0, mx = -1e300, sum = 0;
            for (int64_t l = 0; l < k; ++l) {
              mean += vx[i * k + l] / double(k);
              mx = std::max(mx, vx[i * k + l]);
            }
            for (int64_t l = 0; l < k; ++l) {
              sq += (vx[i * k + l] - mean) * (vx[i * k + l] - mean);
              sum += std::exp(vx[i * k + l] - mx);
            }
            double inv = 1 / std::sqrt(sq / double(k) + 1e-5);
            for (int64_t l = 0; l < k; ++l) {
              norm[i * k + l] = (vx[i * k + l] - mean) * inv * vg[l] + vb[l];
              soft[i * k + l] = std::exp(vx[i * k + l] - mx) / sum;
            }
          }
          expectRounded(jit->call("layernorm", {x, g, b})[0], {m, k}, norm,
                        [](size_t) { return 1e-5; });
          expectRounded(jit->call("softmax", {x})[0], {m, k}, soft,
                        [](size_t) { return 1e-6; });
          Tensor table = randomBf16({17, k}, seed++);
          Tensor ids = ref::randomIds({m}, 17, seed++);
          Tensor rows = jit->call("embedding", {ids, table})[0];
          ASSERT_EQ(rows.dtype(), DType::bf16);
          ASSERT_EQ(rows.shape(), (std::vector<int64_t>{m, k}));
          std::vector<BFloat16> got = rows.toVector<BFloat16>();
          std::vector<BFloat16> t = table.toVector<BFloat16>();
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t l = 0; l < k; ++l) {
              EXPECT_EQ(got[i * k + l], t[ids.data<int64_t>()[i] * k + l]);
            }
          }
        }
      }
    }
  }
}

namespace {
/// A loss over bf16 activations of f32 parameters (fp32 masters cast to
/// bf16 where they are used), the loss itself in f32.
const char *kLoss = R"(
  func.func @loss(%x: tensor<?x?xf32>, %w: tensor<?x?xf32>) -> tensor<f32> {
    %xb = kiln.cast %x : (tensor<?x?xf32>) -> tensor<?x?xbf16>
    %wb = kiln.cast %w : (tensor<?x?xf32>) -> tensor<?x?xbf16>
    %h = kiln.linear %xb, %wb : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
    %g = kiln.gelu %h : (tensor<?x?xbf16>) -> tensor<?x?xbf16>
    %f = kiln.cast %g : (tensor<?x?xbf16>) -> tensor<?x?xf32>
    %l = kiln.reduce sum %f {axes = array<i64: 0, 1>} : (tensor<?x?xf32>) -> tensor<f32>
    return %l : tensor<f32>
  })";

/// d gelu(h) / dh in double.
double geluDerivative(double h) {
  double cdf = 0.5 * (1 + std::erf(h / std::sqrt(2.0)));
  double pdf = std::exp(-0.5 * h * h) / std::sqrt(2 * M_PI);
  return cdf + h * pdf;
}
} // namespace

// Gradients through bf16 activations: the casts' gradients cast back, the
// ops' gradients are bf16 tensors computed in f32. Against the double
// gradient of the same function on the rounded inputs, each term of a
// weight gradient dW[j][l] = sum_i gelu'(h_ij) x_il carries the roundings
// of gelu' and of the product's output (a few 2^-8 of the term) and of h
// (2^-8 |h| moves gelu' by at most 0.8 times that): the bound, fixed before
// the code, is sum_i (2^-5 |gelu'(h_ij)| + 2^-8 |h_ij|) |x_il| + 2^-8 |ref|,
// and the same for dx.
TEST(Bf16Tensors, GradientsFlowThroughBf16Activations) {
  auto jit = JitModule::compileSource(kLoss, [] {
    JitOptions options;
    options.prePipeline = "kiln-autodiff{function=loss},canonicalize";
    return options;
  }());
  uint32_t seed = 500;
  for (int64_t m : {int64_t(1), int64_t(17), int64_t(33)}) {
    for (int64_t k : {int64_t(1), int64_t(16), int64_t(65)}) {
      for (int64_t n : {int64_t(1), int64_t(15), int64_t(33)}) {
        SCOPED_TRACE(fmt::format("m {} k {} n {}", m, k, n));
        Tensor x = ref::randomTensor({m, k}, seed++);
        Tensor w = ref::randomTensor({n, k}, seed++);
        std::vector<Tensor> out = jit->call("loss_grad", {x, w});
        ASSERT_EQ(out.size(), 3u);
        std::vector<double> xb = values(x.to(DType::bf16));
        std::vector<double> wb = values(w.to(DType::bf16));
        std::vector<double> dh(size_t(m * n)), hs(dh.size());
        double loss = 0, lossMagnitude = 0;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double h = 0;
            for (int64_t l = 0; l < k; ++l) {
              h += xb[i * k + l] * wb[j * k + l];
            }
            loss += ref::gelu(h, false);
            lossMagnitude += std::fabs(ref::gelu(h, false));
            dh[i * n + j] = geluDerivative(h);
            hs[i * n + j] = h;
          }
        }
        // The loss sums bf16 values of gelu(h): each within 2^-7 of its
        // own magnitude (h rounded, then gelu rounded).
        EXPECT_NEAR(out[0].data<float>()[0], loss,
                    std::ldexp(lossMagnitude, -6) + 1e-6);
        ASSERT_EQ(out[2].dtype(), DType::f32);
        ASSERT_EQ(out[2].shape(), (std::vector<int64_t>{n, k}));
        const float *dw = out[2].data<float>();
        for (int64_t j = 0; j < n; ++j) {
          for (int64_t l = 0; l < k; ++l) {
            double ref = 0, magnitude = 0;
            for (int64_t i = 0; i < m; ++i) {
              ref += dh[i * n + j] * xb[i * k + l];
              magnitude += (std::ldexp(std::fabs(dh[i * n + j]), -5) +
                            std::ldexp(std::fabs(hs[i * n + j]), -8)) *
                           std::fabs(xb[i * k + l]);
            }
            EXPECT_NEAR(dw[j * k + l], ref,
                        magnitude + std::ldexp(std::fabs(ref), -8))
                << "dW[" << j << "][" << l << "]";
          }
        }
        const float *dx = out[1].data<float>();
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t l = 0; l < k; ++l) {
            double ref = 0, magnitude = 0;
            for (int64_t j = 0; j < n; ++j) {
              ref += dh[i * n + j] * wb[j * k + l];
              magnitude += (std::ldexp(std::fabs(dh[i * n + j]), -5) +
                            std::ldexp(std::fabs(hs[i * n + j]), -8)) *
                           std::fabs(wb[j * k + l]);
            }
            EXPECT_NEAR(dx[i * k + l], ref,
                        magnitude + std::ldexp(std::fabs(ref), -8))
                << "dx[" << i << "][" << l << "]";
          }
        }
      }
    }
  }
}

// The function boundary takes and returns bf16 tensors, and checks them:
// an f32 tensor where a bf16 one belongs is refused before any code runs.
TEST(Bf16Tensors, ArgumentsAreCheckedByDtype) {
  auto jit = compile(kElementwise, "host");
  Tensor wrong = ref::randomTensor({4}, 1);
  try {
    jit->call("to_f32", {wrong});
    FAIL() << "an f32 tensor passed for a bf16 argument";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("must have dtype bf16, got f32"),
              std::string::npos)
        << e.what();
  }
}

namespace {
const char *kRoundedOperands = R"(
  func.func @from_f32(%x: tensor<?x?xf32>, %w: tensor<?x?xf32>) -> tensor<?x?xbf16> {
    %xb = kiln.cast %x : (tensor<?x?xf32>) -> tensor<?x?xbf16>
    %wb = kiln.cast %w : (tensor<?x?xf32>) -> tensor<?x?xbf16>
    %0 = kiln.linear %xb, %wb : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
    return %0 : tensor<?x?xbf16>
  }
  func.func @from_bf16(%x: tensor<?x?xbf16>, %w: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
    %0 = kiln.linear %x, %w : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
    return %0 : tensor<?x?xbf16>
  })";
} // namespace

// With the bf16 precision a product reads the f32 values its bf16 operands
// were rounded from (kiln-widen-bf16{rounding-products}) and rounds them
// while packing: bit for bit what it computes from the rounded values
// passed in as bf16, at sizes across the tiles.
TEST(Bf16Tensors, ProductsRoundTheirF32SourcesExactly) {
  if (!hostHasBf16()) {
    GTEST_SKIP() << "this CPU has no AVX512-BF16";
  }
  auto jit = compile(kRoundedOperands, "host", "bf16");
  uint32_t seed = 900;
  for (int64_t m : {int64_t(1), int64_t(17), int64_t(65)}) {
    for (int64_t k : {int64_t(15), int64_t(33)}) {
      for (int64_t n : {int64_t(16), int64_t(33)}) {
        SCOPED_TRACE(fmt::format("m {} k {} n {}", m, k, n));
        Tensor x = ref::randomTensor({m, k}, seed++);
        Tensor w = ref::randomTensor({n, k}, seed++);
        std::vector<BFloat16> a = jit->call("from_f32", {x, w})[0]
                                      .toVector<BFloat16>();
        std::vector<BFloat16> b =
            jit->call("from_bf16", {x.to(DType::bf16), w.to(DType::bf16)})[0]
                .toVector<BFloat16>();
        EXPECT_EQ(a, b);
      }
    }
  }
}
