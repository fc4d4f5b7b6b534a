//===- Sampling.cpp - Choosing the next token from a distribution ---------===//
//
// Implements greedy and temperature/top-k sampling.
//
//===----------------------------------------------------------------------===//

#include "runtime/Sampling.h"

#include "runtime/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

using namespace kiln;

void kiln::checkSampling(const SamplingOptions &options) {
  if (!std::isfinite(options.temperature) || options.temperature < 0) {
    throw Error(fmt::format("kiln: the sampling temperature must be a finite "
                            "number >= 0 (0: greedy), got {}",
                            options.temperature));
  }
  if (options.topK < 0) {
    throw Error(fmt::format("kiln: top-k must be >= 0 (0: no limit), got {}",
                            options.topK));
  }
}

int64_t kiln::sampleToken(const float *logits, int64_t vocab,
                          const SamplingOptions &options, Rng &rng) {
  checkSampling(options);
  if (vocab <= 0) {
    throw Error("kiln: cannot sample from an empty vocabulary");
  }
  for (int64_t i = 0; i < vocab; ++i) {
    if (std::isnan(logits[i])) {
      throw Error(
          fmt::format("kiln: the model's output for token {} is NaN", i));
    }
  }
  if (options.temperature == 0.0) {
    return std::max_element(logits, logits + vocab) - logits;
  }
  std::vector<int64_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  int64_t k = options.topK > 0 ? std::min(options.topK, vocab) : vocab;
  // The k largest, ties to the lower index, in decreasing order.
  std::partial_sort(
      order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
      });
  double top = logits[order[0]];
  std::vector<double> weights(k);
  double total = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    weights[i] =
        std::exp((double(logits[order[i]]) - top) / options.temperature);
    total += weights[i];
  }
  double u = rng.uniform() * total;
  for (int64_t i = 0; i < k; ++i) {
    u -= weights[i];
    if (u < 0) {
      return order[i];
    }
  }
  return order[k - 1];
}
