//===- Generate.cpp - Text generation with cached decoding ----------------===//
//
// Implements generateGpt and translateGreedy.
//
//===----------------------------------------------------------------------===//

#include "runtime/Generate.h"

#include "runtime/Error.h"

#include <fmt/format.h>

namespace kiln {

namespace {
/// The per-layer key/value caches of a decoder, by input name, of `length`
/// positions each (the capacity the graph writes in place).
struct Cache {
  Cache(int64_t layers, int64_t batch, int64_t dim, int64_t length)
      : layers(layers), batch(batch) {
    for (int64_t i = 0; i < layers; ++i) {
      for (const char *kind : {"key", "value"}) {
        tensors.insert_or_assign(
            fmt::format("past.{}.{}", i, kind),
            Tensor::zeros({batch, length, dim}, DType::f32));
      }
    }
  }
  /// Checks a decode graph's results (the last position's [batch, vocab]
  /// output, then a key and a value per layer) and takes the new caches
  /// from results 1..2L (on the CPU, caches written in place come back as
  /// the same tensors). Returns the output's rows.
  const float *update(const std::vector<Tensor> &results, int64_t vocab) {
    if (int64_t(results.size()) != 1 + 2 * layers) {
      throw Error(fmt::format("kiln: the decode graph returned {} results, "
                              "expected {} (the output and a key and a value "
                              "per layer)",
                              results.size(), 1 + 2 * layers));
    }
    if (results[0].shape() != std::vector<int64_t>{batch, vocab}) {
      throw Error(fmt::format("kiln: the decode graph returned an output {}, "
                              "expected [{}, {}]",
                              formatShape(results[0].shape()), batch, vocab));
    }
    for (int64_t i = 0; i < layers; ++i) {
      tensors.insert_or_assign(fmt::format("past.{}.key", i),
                               results[1 + 2 * i]);
      tensors.insert_or_assign(fmt::format("past.{}.value", i),
                               results[2 + 2 * i]);
    }
    return results[0].data<float>();
  }
  int64_t layers, batch;
  std::map<std::string, Arg> tensors;
};
} // namespace

std::vector<std::vector<int64_t>> generateGptBatch(
    const GraphRunner &run, const GptShape &config,
    const std::vector<std::vector<int64_t>> &prompts, int64_t count,
    const SamplingOptions &sampling, Rng &rng,
    const std::function<void(const std::vector<int64_t> &)> &onStep,
    const std::string &graph) {
  checkSampling(sampling);
  if (config.vocabSize < 1 || config.maxSeqLen < 1 || config.numLayers < 1 ||
      config.dModel < 1) {
    throw Error(fmt::format("kiln: generation needs a GPT of positive sizes, "
                            "got vocabulary {}, {} positions, {} layers, "
                            "width {}",
                            config.vocabSize, config.maxSeqLen,
                            config.numLayers, config.dModel));
  }
  if (prompts.empty()) {
    throw Error("kiln: generation needs at least one prompt");
  }
  for (const std::vector<int64_t> &prompt : prompts) {
    if (prompt.empty()) {
      throw Error("kiln: generation needs a prompt of at least one token");
    }
    if (prompt.size() != prompts.front().size()) {
      throw Error(fmt::format("kiln: prompts generated together must have "
                              "one length, got {} and {} tokens",
                              prompts.front().size(), prompt.size()));
    }
    for (int64_t id : prompt) {
      if (id < 0 || id >= config.vocabSize) {
        throw Error(fmt::format("kiln: prompt token {} is outside the "
                                "vocabulary [0, {})",
                                id, config.vocabSize));
      }
    }
  }
  if (count < 0) {
    throw Error(fmt::format("kiln: cannot generate {} tokens", count));
  }
  int64_t batch = int64_t(prompts.size());
  int64_t window = config.maxSeqLen;
  std::vector<std::vector<int64_t>> contexts = prompts, generated(batch);
  // Caches of fixed capacity, written in place at each call's position
  // (addGptDecode): allocated once.
  Cache cache(config.numLayers, batch, config.dModel, window);
  // Positions [0, cached) are in the cache; the last `pending` positions of
  // each context are not yet.
  int64_t cached = 0;
  int64_t pending = std::min<int64_t>(int64_t(prompts.front().size()), window);
  std::vector<int64_t> ids, tokens(batch);
  for (int64_t n = 0; n < count; ++n) {
    if (cached + pending > window) {
      // Restart from the most recent half window (the positions after it
      // are never read).
      cached = 0;
      pending = window / 2 + 1;
    }
    ids.clear();
    for (const std::vector<int64_t> &context : contexts) {
      ids.insert(ids.end(), context.end() - pending, context.end());
    }
    std::map<std::string, Arg> inputs = cache.tensors;
    inputs.emplace("idx", Tensor::fromVector<int64_t>({batch, pending}, ids));
    inputs.emplace("pos", Arg(cached));
    std::vector<Tensor> out = run(graph, inputs);
    const float *logits = cache.update(out, config.vocabSize);
    cached += pending;
    for (int64_t b = 0; b < batch; ++b) {
      tokens[b] = sampleToken(logits + b * config.vocabSize, config.vocabSize,
                              sampling, rng);
      contexts[b].push_back(tokens[b]);
      generated[b].push_back(tokens[b]);
    }
    pending = 1;
    if (onStep) {
      onStep(tokens);
    }
  }
  return generated;
}

std::vector<int64_t> generateGpt(const GraphRunner &run, const GptShape &config,
                                 const std::vector<int64_t> &prompt,
                                 int64_t count, const SamplingOptions &sampling,
                                 Rng &rng,
                                 const std::function<void(int64_t)> &onToken,
                                 const std::string &graph) {
  std::function<void(const std::vector<int64_t> &)> onStep;
  if (onToken) {
    onStep = [&](const std::vector<int64_t> &tokens) { onToken(tokens[0]); };
  }
  return generateGptBatch(run, config, {prompt}, count, sampling, rng, onStep,
                          graph)
      .front();
}

std::vector<std::vector<int64_t>>
translateGreedy(const GraphRunner &run, const EncDecShape &config,
                const Tensor &src, const Tensor &srcMask, int64_t bos,
                int64_t eos, int64_t maxLength) {
  if (src.rank() != 2 || src.dtype() != DType::i64) {
    throw Error("kiln: translateGreedy needs source ids [B, S] of i64, got " +
                formatShape(src.shape()));
  }
  if (maxLength <= 0 || maxLength > config.maxLength) {
    throw Error(fmt::format("kiln: the output length limit must be in [1, "
                            "{}] (the decode graph's cache capacity), got {}",
                            config.maxLength, maxLength));
  }
  if (config.tgtVocab < 1 || config.numDecoderLayers < 1 || config.dModel < 1) {
    throw Error(fmt::format("kiln: translation needs an encoder-decoder of "
                            "positive sizes, got target vocabulary {}, {} "
                            "decoder layers, width {}",
                            config.tgtVocab, config.numDecoderLayers,
                            config.dModel));
  }
  for (int64_t id : {bos, eos}) {
    if (id < 0 || id >= config.tgtVocab) {
      throw Error(fmt::format("kiln: bos/eos id {} is outside the target "
                              "vocabulary [0, {})",
                              id, config.tgtVocab));
    }
  }
  int64_t batch = src.shape()[0];
  int64_t layers = config.numDecoderLayers;
  std::vector<Tensor> cross =
      run("encode", {{"src", src}, {"src_mask", srcMask}});
  if (int64_t(cross.size()) != 2 * layers) {
    throw Error(fmt::format("kiln: the encode graph returned {} results, "
                            "expected {}",
                            cross.size(), 2 * layers));
  }
  // Caches of fixed capacity, written in place at each call's position:
  // allocated once.
  Cache cache(layers, batch, config.dModel, config.maxLength);
  std::vector<std::vector<int64_t>> outputs(batch);
  std::vector<bool> done(batch, false);
  std::vector<int64_t> last(batch, bos);
  for (int64_t pos = 0; pos < maxLength; ++pos) {
    std::map<std::string, Arg> inputs = cache.tensors;
    for (int64_t i = 0; i < layers; ++i) {
      inputs.emplace(fmt::format("cross.{}.key", i), cross[2 * i]);
      inputs.emplace(fmt::format("cross.{}.value", i), cross[2 * i + 1]);
    }
    inputs.emplace("tgt", Tensor::fromVector<int64_t>({batch, 1}, last));
    inputs.emplace("pos", Arg(pos));
    inputs.emplace("src_mask", srcMask);
    std::vector<Tensor> out = run("decode", inputs);
    const float *rows = cache.update(out, config.tgtVocab);
    bool all = true;
    Rng unused(0);
    for (int64_t b = 0; b < batch; ++b) {
      int64_t token = sampleToken(rows + b * config.tgtVocab, config.tgtVocab,
                                  {.temperature = 0.0}, unused);
      last[b] = token;
      if (!done[b]) {
        if (token == eos) {
          done[b] = true;
        } else {
          outputs[b].push_back(token);
        }
      }
      all = all && done[b];
    }
    if (all) {
      break;
    }
  }
  return outputs;
}

} // namespace kiln
