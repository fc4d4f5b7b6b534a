//===- InitTest.cpp - Tests of Rng and the initializers -------------------===//

#include "runtime/Init.h"
#include "runtime/Tensor.h"

#include "test/Unit/Runtime/ExpectError.h"
#include "test/Unit/Runtime/NearestBF16.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

using namespace kiln;

namespace {

/// Mean and (population) standard deviation.
struct Moments {
  double mean;
  double std;
};

Moments moments(const std::vector<double> &values) {
  double sum = 0;
  for (double value : values) {
    sum += value;
  }
  double mean = sum / values.size();
  double squares = 0;
  for (double value : values) {
    squares += (value - mean) * (value - mean);
  }
  return {mean, std::sqrt(squares / values.size())};
}

Moments moments(const Tensor &tensor) {
  std::vector<float> values = tensor.toVector<float>();
  return moments(std::vector<double>(values.begin(), values.end()));
}

constexpr int kSamples = 100000;

//===----------------------------------------------------------------------===//
// Rng
//===----------------------------------------------------------------------===//

TEST(RngTest, IsSplitMix64) {
  // The reference splitmix64 (Vigna) from state 0: the same on every
  // platform.
  Rng rng(0);
  EXPECT_EQ(rng.next(), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(rng.next(), 0x6E789E6AA1B965F4ULL);
  EXPECT_EQ(rng.next(), 0x06C45D188009454FULL);
}

TEST(RngTest, SameSeedSameSequenceDifferentSeedsDiffer) {
  Rng a(42), b(42), c(43);
  int differences = 0;
  for (int i = 0; i < 1000; ++i) {
    uint64_t x = a.next();
    EXPECT_EQ(x, b.next());
    differences += x != c.next();
  }
  EXPECT_EQ(differences, 1000);
  Rng d(7), e(7);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(d.normal(), e.normal());
    EXPECT_EQ(d.uniform(), e.uniform());
  }
}

TEST(RngTest, StateCapturesEverything) {
  Rng rng(5);
  rng.normal();
  uint64_t saved = rng.state();
  std::vector<double> first = {rng.normal(), rng.uniform(), rng.normal()};
  rng.setState(saved);
  std::vector<double> again = {rng.normal(), rng.uniform(), rng.normal()};
  EXPECT_EQ(first, again);
}

TEST(RngTest, UniformStatistics) {
  Rng rng(1);
  std::vector<double> values;
  for (int i = 0; i < kSamples; ++i) {
    double value = rng.uniform();
    ASSERT_GE(value, 0.0);
    ASSERT_LT(value, 1.0);
    values.push_back(value);
  }
  Moments m = moments(values);
  EXPECT_NEAR(m.mean, 0.5, 0.004);
  EXPECT_NEAR(m.std, std::sqrt(1.0 / 12.0), 0.003);
  // Each tenth of [0, 1) holds a tenth of the values.
  std::vector<int> buckets(10);
  for (double value : values) {
    ++buckets[static_cast<int>(value * 10)];
  }
  for (int count : buckets) {
    EXPECT_NEAR(count, kSamples / 10, 500);
  }
}

TEST(RngTest, NormalStatistics) {
  Rng rng(2);
  std::vector<double> values;
  int withinOne = 0;
  for (int i = 0; i < kSamples; ++i) {
    double value = rng.normal();
    ASSERT_TRUE(std::isfinite(value));
    withinOne += std::fabs(value) < 1.0;
    values.push_back(value);
  }
  Moments m = moments(values);
  EXPECT_NEAR(m.mean, 0.0, 0.015);
  EXPECT_NEAR(m.std, 1.0, 0.01);
  // A normal, not just any distribution with these moments: 68.27% within
  // one standard deviation.
  EXPECT_NEAR(static_cast<double>(withinOne) / kSamples, 0.6827, 0.006);
}

//===----------------------------------------------------------------------===//
// Initializers
//===----------------------------------------------------------------------===//

TEST(InitTest, Describe) {
  EXPECT_EQ(Init::zeros().describe(), "zeros");
  EXPECT_EQ(Init::ones().describe(), "ones");
  EXPECT_EQ(Init::constant(0.5).describe(), "constant(value=0.5)");
  EXPECT_EQ(Init::normal(0, 0.02).describe(), "normal(mean=0, std=0.02)");
  EXPECT_EQ(Init::truncatedNormal().describe(),
            "truncatedNormal(mean=0, std=0.02, range=mean±2·std)");
  EXPECT_EQ(Init::uniform(-1, 1).describe(), "uniform(low=-1, high=1)");
  EXPECT_EQ(Init::xavierUniform().describe(), "xavierUniform(gain=1)");
  EXPECT_EQ(Init::xavierNormal(2).describe(), "xavierNormal(gain=2)");
}

TEST(InitTest, Constants) {
  Rng rng(0);
  Tensor tensor = Tensor::empty({3, 2}, DType::f32);
  initialize(tensor, Init::ones(), rng);
  EXPECT_EQ(tensor.toVector<float>(), std::vector<float>(6, 1.0f));
  initialize(tensor, Init::constant(-0.5), rng);
  EXPECT_EQ(tensor.toVector<float>(), std::vector<float>(6, -0.5f));
  initialize(tensor, Init::zeros(), rng);
  EXPECT_EQ(tensor.toVector<float>(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(rng.state(), Rng(0).state()) << "constants draw nothing";

  Tensor ids = Tensor::empty({4}, DType::i64);
  initialize(ids, Init::constant(7), rng);
  EXPECT_EQ(ids.toVector<int64_t>(), std::vector<int64_t>(4, 7));
  Tensor mask = Tensor::empty({2}, DType::i1);
  initialize(mask, Init::ones(), rng);
  EXPECT_EQ(mask.toVector<bool>(), std::vector<bool>(2, true));
  EXPECT_KILN_ERROR(initialize(ids, Init::constant(0.5), rng),
                    "constant(value=0.5) cannot fill a tensor of dtype i64");
  EXPECT_KILN_ERROR(initialize(ids, Init::normal(0, 1), rng),
                    "needs a tensor of dtype f32, got i64");
}

TEST(InitTest, RefusesBadParameters) {
  Rng rng(0);
  Tensor tensor = Tensor::empty({4}, DType::f32);
  EXPECT_KILN_ERROR(initialize(tensor, Init::normal(0, -1), rng),
                    "negative standard deviation");
  EXPECT_KILN_ERROR(initialize(tensor, Init::uniform(1, 0), rng), "low > high");
  EXPECT_KILN_ERROR(initialize(tensor, Init::constant(NAN), rng), "non-finite");
  EXPECT_KILN_ERROR(initialize(tensor, Init::constant(1e40), rng),
                    "constant(value=1e+40) is out of the range of f32");
  Tensor undefined;
  EXPECT_KILN_ERROR(initialize(undefined, Init::zeros(), rng), "undefined");
}

TEST(InitTest, NormalAndUniform) {
  Rng rng(3);
  Tensor tensor = Tensor::empty({kSamples}, DType::f32);
  initialize(tensor, Init::normal(1.5, 0.2), rng);
  Moments m = moments(tensor);
  EXPECT_NEAR(m.mean, 1.5, 0.003);
  EXPECT_NEAR(m.std, 0.2, 0.002);

  initialize(tensor, Init::uniform(-3, 1), rng);
  std::vector<float> values = tensor.toVector<float>();
  auto [low, high] = std::minmax_element(values.begin(), values.end());
  EXPECT_GE(*low, -3.0f);
  EXPECT_LE(*high, 1.0f);
  EXPECT_LT(*low, -2.99f);
  EXPECT_GT(*high, 0.99f);
  m = moments(tensor);
  EXPECT_NEAR(m.mean, -1.0, 0.02);
  EXPECT_NEAR(m.std, 4.0 / std::sqrt(12.0), 0.01);
}

TEST(InitTest, InitializationIsReproducible) {
  Rng a(11), b(11);
  Tensor x = Tensor::empty({64, 32}, DType::f32);
  Tensor y = Tensor::empty({64, 32}, DType::f32);
  initialize(x, Init::xavierNormal(), a);
  initialize(y, Init::xavierNormal(), b);
  EXPECT_EQ(x.toVector<float>(), y.toVector<float>());
  initialize(y, Init::xavierNormal(), b);
  EXPECT_NE(x.toVector<float>(), y.toVector<float>());
}

// A bf16 tensor takes the same draws as an f32 one, rounded to bf16 (the
// test's own nearest-bf16 reference); constants too.
TEST(InitTest, Bf16TensorsTakeTheF32DrawsRounded) {
  Rng a(5), b(5);
  Tensor x = Tensor::empty({17, 33}, DType::f32);
  Tensor h = Tensor::empty({17, 33}, DType::bf16);
  initialize(x, Init::xavierUniform(), a);
  initialize(h, Init::xavierUniform(), b);
  std::vector<float> f = x.toVector<float>();
  std::vector<BFloat16> r = h.toVector<BFloat16>();
  for (size_t i = 0; i < f.size(); ++i) {
    EXPECT_EQ(r[i].toFloat(), kiln::test::nearestBF16(f[i])) << i;
  }
  initialize(h, Init::constant(0.1), a);
  EXPECT_EQ(h.toVector<BFloat16>()[5].toFloat(), kiln::test::nearestBF16(0.1f));
}

TEST(InitTest, TruncatedNormal) {
  Rng rng(4);
  const double mean = 0.5, std = 0.02;
  Tensor tensor = Tensor::empty({kSamples}, DType::f32);
  initialize(tensor, Init::truncatedNormal(std, mean), rng);
  float low = static_cast<float>(mean - 2 * std);
  float high = static_cast<float>(mean + 2 * std);
  int nearBound = 0;
  for (float value : tensor.toVector<float>()) {
    ASSERT_GE(value, low);
    ASSERT_LE(value, high);
    nearBound += std::fabs(value - mean) > 1.9 * std;
  }
  // The tails are cut, not piled up at the bounds: 1.25% of a normal
  // truncated at 2 std lies between 1.9 and 2 std.
  EXPECT_GT(nearBound, 1000);
  EXPECT_LT(nearBound, 1500);
  Moments m = moments(tensor);
  EXPECT_NEAR(m.mean, mean, 0.0003);
  // The standard deviation of N(0, 1) truncated to [-2, 2] is 0.8796.
  EXPECT_NEAR(m.std, 0.8796 * std, 0.01 * 0.8796 * std);
}

TEST(InitTest, XavierUniformBoundsFromFans) {
  Rng rng(5);
  // [out, in] = [256, 512]: bound = sqrt(6 / (512 + 256)).
  Tensor weight = Tensor::empty({256, 512}, DType::f32);
  initialize(weight, Init::xavierUniform(), rng);
  double bound = std::sqrt(6.0 / (512 + 256));
  std::vector<float> values = weight.toVector<float>();
  auto [low, high] = std::minmax_element(values.begin(), values.end());
  EXPECT_GE(*low, -bound);
  EXPECT_LE(*high, bound);
  EXPECT_LT(*low, -0.999 * bound);
  EXPECT_GT(*high, 0.999 * bound);
  Moments m = moments(weight);
  EXPECT_NEAR(m.mean, 0.0, 0.002);
  EXPECT_NEAR(m.std, bound / std::sqrt(3.0), 0.005 * bound);

  // [out, in, kh, kw] = [16, 8, 5, 5]: fan_in = 8·25, fan_out = 16·25,
  // bound = gain·sqrt(6 / 600) = gain·0.1.
  Tensor conv = Tensor::empty({16, 8, 5, 5}, DType::f32);
  initialize(conv, Init::xavierUniform(2.0), rng);
  values = conv.toVector<float>();
  auto [convLow, convHigh] = std::minmax_element(values.begin(), values.end());
  EXPECT_GE(*convLow, -0.2f);
  EXPECT_LE(*convHigh, 0.2f);
  EXPECT_GT(std::max(-*convLow, *convHigh), 0.199f);
}

TEST(InitTest, XavierNormalStd) {
  Rng rng(6);
  // [out, in] = [384, 128]: std = sqrt(2 / (128 + 384)) = 0.0625.
  Tensor weight = Tensor::empty({384, 128}, DType::f32);
  initialize(weight, Init::xavierNormal(), rng);
  Moments m = moments(weight);
  EXPECT_NEAR(m.mean, 0.0, 0.001);
  EXPECT_NEAR(m.std, 0.0625, 0.0625 * 0.01);
}

TEST(InitTest, XavierNeedsRankTwo) {
  Rng rng(0);
  Tensor bias = Tensor::empty({16}, DType::f32);
  EXPECT_KILN_ERROR(initialize(bias, Init::xavierUniform(), rng),
                    "xavierUniform(gain=1) needs a tensor of rank >= 2 to "
                    "compute fan_in and fan_out, got shape [16]");
  Tensor scalar = Tensor::empty({}, DType::f32);
  EXPECT_KILN_ERROR(initialize(scalar, Init::xavierNormal(), rng),
                    "got shape []");
  Tensor empty = Tensor::empty({0, 4}, DType::f32);
  initialize(empty, Init::xavierUniform(), rng);
  EXPECT_EQ(empty.numel(), 0);
}

} // namespace
