//===- SamplingTest.cpp - Greedy and temperature/top-k sampling -----------===//

#include "runtime/Sampling.h"

#include "test/Unit/Runtime/ExpectError.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace kiln;

TEST(Sampling, GreedyPicksTheLargestAndTheFirstOfTies) {
  Rng rng(1);
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(sampleToken(logits.data(), 4, {.temperature = 0.0}, rng), 1);
  // top-k 1 is greedy whatever the temperature.
  EXPECT_EQ(sampleToken(logits.data(), 4, {.temperature = 5.0, .topK = 1}, rng),
            1);
}

TEST(Sampling, FrequenciesFollowTheTemperedSoftmax) {
  std::vector<float> logits = {1.0f, 0.0f, -1.0f, 0.5f};
  for (double temperature : {1.0, 0.5, 2.0}) {
    // The expected probabilities, computed directly.
    std::vector<double> p(4);
    double z = 0;
    for (int i = 0; i < 4; ++i) {
      p[i] = std::exp(logits[i] / temperature);
      z += p[i];
    }
    Rng rng(7);
    std::vector<int> counts(4, 0);
    const int n = 40000;
    for (int i = 0; i < n; ++i) {
      ++counts[sampleToken(logits.data(), 4, {.temperature = temperature},
                           rng)];
    }
    for (int i = 0; i < 4; ++i) {
      double expected = p[i] / z;
      double sigma = std::sqrt(expected * (1 - expected) / n);
      EXPECT_NEAR(counts[i] / double(n), expected, 5 * sigma)
          << "token " << i << " at temperature " << temperature;
    }
  }
}

TEST(Sampling, TopKNeverLeavesTheTopK) {
  std::vector<float> logits = {3.0f, 2.9f, -5.0f, 2.8f, 0.0f};
  Rng rng(3);
  std::vector<int> counts(5, 0);
  for (int i = 0; i < 3000; ++i) {
    ++counts[sampleToken(logits.data(), 5, {.temperature = 10.0, .topK = 2},
                         rng)];
  }
  EXPECT_EQ(counts[2] + counts[3] + counts[4], 0);
  EXPECT_GT(counts[0], 1000);
  EXPECT_GT(counts[1], 1000);
}

TEST(Sampling, RefusesBadInput) {
  Rng rng(1);
  std::vector<float> logits = {0.0f, NAN};
  EXPECT_KILN_ERROR(sampleToken(logits.data(), 2, {}, rng),
                    "output for token 1 is NaN");
  EXPECT_KILN_ERROR(sampleToken(logits.data(), 0, {}, rng), "empty vocabulary");
  EXPECT_KILN_ERROR(sampleToken(logits.data(), 1, {.temperature = -1}, rng),
                    "temperature must be a finite number >= 0");
  EXPECT_KILN_ERROR(sampleToken(logits.data(), 1, {.topK = -2}, rng),
                    "top-k must be >= 0");
}
