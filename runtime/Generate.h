//===- Generate.h - Text generation with cached decoding ---------*- C++
//-*-===//
//
// Drives the decoding graphs of the DSL models (addGptDecode; addEncDecEncode
// and addEncDecDecode): the keys and values of earlier positions are kept
// between calls, so each new token costs one position's computation.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_GENERATE_H
#define KILN_RUNTIME_GENERATE_H

#include "runtime/Function.h"
#include "runtime/Sampling.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kiln {

/// The sizes of a GPT that decoding needs (dsl::models::decodeShape gives
/// them for a DSL config).
struct GptShape {
  int64_t vocabSize = 0, maxSeqLen = 0, numLayers = 0, dModel = 0;
};

/// The sizes of an encoder-decoder that greedy translation needs; maxLength
/// is the capacity of the decode graph's caches (addEncDecDecode's).
struct EncDecShape {
  int64_t tgtVocab = 0, numDecoderLayers = 0, dModel = 0, maxLength = 0;
};

/// Runs a compiled graph by name on a model's parameters
/// (CompiledModel::run, Trainer::run, Executable::run with a store).
using GraphRunner = std::function<std::vector<Tensor>(
    const std::string &graph, const std::map<std::string, Arg> &inputs)>;

/// Continues `prompt` (at least one id) by `count` tokens with graph `graph`
/// (addGptDecode), sampling each from the last position's logits. When the
/// context would pass config.maxSeqLen the cache restarts from the last
/// maxSeqLen / 2 tokens. `onToken` sees each new token as it is chosen.
/// Returns the new tokens. Throws kiln::Error for bad arguments.
std::vector<int64_t>
generateGpt(const GraphRunner &run, const GptShape &config,
            const std::vector<int64_t> &prompt, int64_t count,
            const SamplingOptions &sampling, Rng &rng,
            const std::function<void(int64_t)> &onToken = {},
            const std::string &graph = "decode");

/// Continues several prompts of one length together: each call of `graph`
/// computes the next position of every sequence (the weights are read once
/// per position for the whole batch, not once per sequence), with caches
/// [B, maxSeqLen, d] allocated once. Sampling as generateGpt's, row by row
/// (the random draws of one position in the order of the prompts); the
/// window restarts for all sequences together. `onStep` sees each
/// position's B new tokens. Returns each sequence's new tokens. Throws
/// kiln::Error, before any call, for no prompt, prompts of different or
/// zero length, or a token outside the vocabulary.
std::vector<std::vector<int64_t>> generateGptBatch(
    const GraphRunner &run, const GptShape &config,
    const std::vector<std::vector<int64_t>> &prompts, int64_t count,
    const SamplingOptions &sampling, Rng &rng,
    const std::function<void(const std::vector<int64_t> &)> &onStep = {},
    const std::string &graph = "decode");

/// Greedy decoding of a batch of source sentences `src` [B, S] (i64) with
/// `srcMask` [B, S] (i1, non-zero = a real token) through graphs "encode"
/// and "decode" (addEncDecEncode/addEncDecDecode): each output starts after
/// `bos` and ends before the first `eos`, or after `maxLength` tokens (at
/// most config.maxLength). The caches are allocated once and written in
/// place, one position per token.
std::vector<std::vector<int64_t>>
translateGreedy(const GraphRunner &run, const EncDecShape &config,
                const Tensor &src, const Tensor &srcMask, int64_t bos,
                int64_t eos, int64_t maxLength);

} // namespace kiln

#endif // KILN_RUNTIME_GENERATE_H
