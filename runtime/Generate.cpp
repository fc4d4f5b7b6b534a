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
      : layers(layers) {
    for (int64_t i = 0; i < layers; ++i) {
      for (const char *kind : {"key", "value"}) {
        tensors.insert_or_assign(
            fmt::format("past.{}.{}", i, kind),
            Tensor::zeros({batch, length, dim}, DType::f32));
      }
    }
  }
  /// Takes the new caches from a decode graph's results 1..2L (on the CPU,
  /// caches written in place come back as the same tensors).
  void update(const std::vector<Tensor> &results) {
    if (int64_t(results.size()) != 1 + 2 * layers) {
      throw Error(fmt::format("kiln: the decode graph returned {} results, "
                              "expected {} (the output and a key and a value "
                              "per layer)",
                              results.size(), 1 + 2 * layers));
    }
    for (int64_t i = 0; i < layers; ++i) {
      tensors.insert_or_assign(fmt::format("past.{}.key", i),
                               results[1 + 2 * i]);
      tensors.insert_or_assign(fmt::format("past.{}.value", i),
                               results[2 + 2 * i]);
    }
  }
  int64_t layers;
  std::map<std::string, Arg> tensors;
};
} // namespace

std::vector<int64_t> generateGpt(const GraphRunner &run, const GptShape &config,
                                 const std::vector<int64_t> &prompt,
                                 int64_t count, const SamplingOptions &sampling,
                                 Rng &rng,
                                 const std::function<void(int64_t)> &onToken,
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
  if (prompt.empty()) {
    throw Error("kiln: generation needs a prompt of at least one token");
  }
  if (count < 0) {
    throw Error(fmt::format("kiln: cannot generate {} tokens", count));
  }
  for (int64_t id : prompt) {
    if (id < 0 || id >= config.vocabSize) {
      throw Error(fmt::format("kiln: prompt token {} is outside the "
                              "vocabulary [0, {})",
                              id, config.vocabSize));
    }
  }
  int64_t window = config.maxSeqLen;
  std::vector<int64_t> context = prompt, generated;
  // Caches of fixed capacity, written in place at each call's position
  // (addGptDecode): allocated once.
  Cache cache(config.numLayers, 1, config.dModel, window);
  // Positions [0, cached) are in the cache; `pending` are not yet.
  int64_t cached = 0;
  std::vector<int64_t> pending = context;
  if (int64_t(pending.size()) > window) {
    pending.erase(pending.begin(), pending.end() - window);
  }
  for (int64_t n = 0; n < count; ++n) {
    if (cached + int64_t(pending.size()) > window) {
      // Restart from the most recent half window (the positions after it
      // are never read).
      cached = 0;
      pending.assign(context.end() - window / 2 - 1, context.end());
    }
    std::map<std::string, Arg> inputs = cache.tensors;
    inputs.emplace("idx", Tensor::fromVector<int64_t>(
                              {1, int64_t(pending.size())}, pending));
    inputs.emplace("pos", Arg(cached));
    std::vector<Tensor> out = run(graph, inputs);
    cache.update(out);
    cached += int64_t(pending.size());
    int64_t token =
        sampleToken(out[0].data<float>(), config.vocabSize, sampling, rng);
    context.push_back(token);
    generated.push_back(token);
    pending = {token};
    if (onToken) {
      onToken(token);
    }
  }
  return generated;
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
    cache.update(out);
    const float *rows = out[0].data<float>();
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
