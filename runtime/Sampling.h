//===- Sampling.h - Choosing the next token from a distribution -*- C++ -*-===//
//
// Greedy choice and temperature/top-k sampling over one row of logits (or
// log-probabilities: the choice only depends on differences).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SAMPLING_H
#define KILN_RUNTIME_SAMPLING_H

#include "runtime/Init.h"

#include <cstdint>
#include <string>

namespace kiln {

struct SamplingOptions {
  /// Softmax temperature; 0 picks the most likely token (greedy).
  double temperature = 1.0;
  /// Sample among the k most likely tokens only (0: all of them).
  int64_t topK = 0;
};

/// Checks the options; throws kiln::Error naming the bad one.
void checkSampling(const SamplingOptions &options);

/// The index chosen from `logits[0, vocab)`. Greedy ties go to the lowest
/// index; sampling draws one uniform number from `rng`. Throws kiln::Error
/// when a logit is NaN or the row is empty.
int64_t sampleToken(const float *logits, int64_t vocab,
                    const SamplingOptions &options, Rng &rng);

} // namespace kiln

#endif // KILN_RUNTIME_SAMPLING_H
