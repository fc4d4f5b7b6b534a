//===- GenerateTest.cpp - Cached decoding against full recomputation ------===//
//
// The decode graphs (keys and values of earlier positions from a cache) must
// give the logits that the forward graph computes over the whole prefix, and
// the generation loops must choose what a naive loop over the forward graph
// chooses.
//
//===----------------------------------------------------------------------===//

#include "../JIT/Reference.h"

#include "compiler/DSL/DSL.h"
#include "compiler/DSL/Models.h"
#include "compiler/Target/JIT/CompiledModel.h"
#include "runtime/Error.h"
#include "runtime/Generate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

using namespace kiln;

namespace {

dsl::models::GptConfig tinyGpt() {
  dsl::models::GptConfig config;
  config.vocabSize = 11;
  config.dModel = 16;
  config.numHeads = 2;
  config.numLayers = 2;
  config.dFF = 32;
  config.maxSeqLen = 8;
  config.initStd = 0.3; // far from uniform, so that choices are distinct
  return config;
}

/// Position `t` of outputs [B, T, V] as [B, V].
Tensor positionOf(const Tensor &out, int64_t t) {
  int64_t b = out.shape()[0], len = out.shape()[1], v = out.shape()[2];
  std::vector<float> rows;
  for (int64_t r = 0; r < b; ++r) {
    const float *p = out.data<float>() + (r * len + t) * v;
    rows.insert(rows.end(), p, p + v);
  }
  return Tensor::fromVector<float>({b, v}, rows);
}

GraphRunner runner(const CompiledModel &model) {
  return [&model](const std::string &graph,
                  const std::map<std::string, Arg> &inputs) {
    return model.run(graph, inputs);
  };
}

/// Each cache [B, capacity, d] is the decode graph's result 1 + c (the
/// caller's tensor, written in place), holds the positions before `pos`
/// (the last of them non-zero) and zeros from `pos` on.
void expectWrittenInPlaceUpTo(const std::vector<Tensor> &out,
                              const std::vector<Tensor> &caches, int64_t pos) {
  for (size_t c = 0; c < caches.size(); ++c) {
    EXPECT_EQ(out[1 + c].raw(), caches[c].raw());
    int64_t batch = caches[c].shape()[0], capacity = caches[c].shape()[1],
            d = caches[c].shape()[2];
    const float *cache = caches[c].data<float>();
    for (int64_t r = 0; r < batch; ++r) {
      EXPECT_NE(cache[(r * capacity + pos - 1) * d], 0.0f);
      for (int64_t j = pos * d; j < capacity * d; ++j) {
        ASSERT_EQ(cache[r * capacity * d + j], 0.0f)
            << "cache " << c << " row " << r << " element " << j;
      }
    }
  }
}

/// The decode call with `inputs` (positions past the caches' capacity) is
/// refused before anything is written.
void expectRefusedWithCachesUnchanged(const CompiledModel &model,
                                      const std::map<std::string, Arg> &inputs,
                                      const std::vector<Tensor> &caches) {
  std::vector<std::vector<float>> before;
  for (const Tensor &c : caches) {
    before.push_back(c.toVector<float>());
  }
  EXPECT_THROW(model.run("decode", inputs), Error);
  for (size_t c = 0; c < caches.size(); ++c) {
    EXPECT_EQ(caches[c].toVector<float>(), before[c]);
  }
}

/// The naive generation loop: each sequence's whole window through the
/// forward graph per token, one sequence after the other at each position,
/// drawing from `rng` in that order; when the windows pass maxSeqLen they
/// restart together from their last maxSeqLen / 2 + 1 tokens.
std::vector<std::vector<int64_t>>
naiveSampling(const CompiledModel &model, const dsl::models::GptConfig &config,
              const std::vector<std::vector<int64_t>> &prompts, int64_t count,
              const SamplingOptions &sampling, Rng &rng) {
  std::vector<std::vector<int64_t>> contexts = prompts,
                                    generated(prompts.size());
  size_t start = 0;
  for (int64_t n = 0; n < count; ++n) {
    if (contexts[0].size() - start > size_t(config.maxSeqLen)) {
      start = contexts[0].size() - config.maxSeqLen / 2 - 1;
    }
    for (size_t b = 0; b < prompts.size(); ++b) {
      std::vector<int64_t> window(contexts[b].begin() + start,
                                  contexts[b].end());
      Tensor logits = model.run(
          "forward", {{"idx", Tensor::fromVector<int64_t>(
                                  {1, int64_t(window.size())}, window)}})[0];
      Tensor last = positionOf(logits, int64_t(window.size()) - 1);
      int64_t token =
          sampleToken(last.data<float>(), config.vocabSize, sampling, rng);
      contexts[b].push_back(token);
      generated[b].push_back(token);
    }
  }
  return generated;
}

/// tinyGpt's forward and decode graphs, compiled.
std::unique_ptr<CompiledModel> gptDecoding(uint64_t seed) {
  dsl::Module module;
  dsl::models::addGptForward(module, tinyGpt());
  dsl::models::addGptDecode(module, tinyGpt());
  return std::make_unique<CompiledModel>(module, seed);
}

/// encdecTiny's forward, encode and decode graphs (caches of `capacity`
/// positions), compiled.
std::unique_ptr<CompiledModel> encdecDecoding(int64_t capacity, uint64_t seed) {
  dsl::nn::TransformerConfig config = dsl::models::encdecTiny();
  dsl::Module module;
  dsl::models::addEncDecForward(module, config);
  dsl::models::addEncDecEncode(module, config);
  dsl::models::addEncDecDecode(module, config, capacity);
  return std::make_unique<CompiledModel>(module, seed);
}

} // namespace

TEST(Generate, GptDecodeMatchesTheForwardPass) {
  dsl::models::GptConfig config = tinyGpt();
  std::unique_ptr<CompiledModel> compiled = gptDecoding(3);
  CompiledModel &model = *compiled;

  Tensor ids = ref::randomIds({1, 8}, config.vocabSize, 5);
  std::vector<int64_t> seq = ids.toVector<int64_t>();
  Tensor full = model.run("forward", {{"idx", ids}})[0];

  // Caches of fixed capacity (maxSeqLen 8 positions), written in place. A
  // prompt of 3 positions at once, then one position at a time, to the
  // last position the caches hold.
  ASSERT_EQ(config.maxSeqLen, 8);
  std::map<std::string, Arg> inputs;
  std::vector<Tensor> caches;
  for (int64_t i = 0; i < config.numLayers; ++i) {
    for (const char *kind : {"key", "value"}) {
      caches.push_back(
          Tensor::zeros({1, config.maxSeqLen, config.dModel}, DType::f32));
      inputs.emplace("past." + std::to_string(i) + "." + kind,
                     caches.back());
    }
  }
  int64_t pos = 0;
  for (int64_t n : {3, 1, 1, 1, 1, 1}) {
    std::vector<int64_t> chunk(seq.begin() + pos, seq.begin() + pos + n);
    inputs.insert_or_assign("idx", Tensor::fromVector<int64_t>({1, n}, chunk));
    inputs.insert_or_assign("pos", Arg(pos));
    std::vector<Tensor> out = model.run("decode", inputs);
    ASSERT_EQ(out.size(), size_t(1 + 2 * config.numLayers));
    pos += n;
    ref::expectClose(out[0], positionOf(full, pos - 1), 1e-5, 1e-4);
    expectWrittenInPlaceUpTo(out, caches, pos);
  }
  // Past the caches' capacity: refused before anything is written.
  inputs.insert_or_assign("idx", Tensor::fromVector<int64_t>({1, 2}, {1, 2}));
  inputs.insert_or_assign("pos", Arg(int64_t(7)));
  expectRefusedWithCachesUnchanged(model, inputs, caches);
}

// The Llama decoder's caches hold only the key/value heads (2 of 4 query
// heads), the keys rotated at their positions; decoding position by position
// gives the forward pass's logits, with a prompt and with a tied head.
TEST(Generate, LlamaDecodeMatchesTheForwardPass) {
  for (bool tied : {false, true}) {
    dsl::models::LlamaConfig config;
    config.vocabSize = 11;
    config.dModel = 16;
    config.numHeads = 4;
    config.numKvHeads = 2;
    config.numLayers = 2;
    config.dFF = 24;
    config.maxSeqLen = 8;
    config.initStd = 0.3;
    config.tiedHead = tied;
    dsl::Module module;
    dsl::models::addLlamaForward(module, config);
    dsl::models::addLlamaDecode(module, config);
    CompiledModel model(module, 5);
    ASSERT_EQ(model.parameters().contains("lm_head.weight"), !tied);

    Tensor ids = ref::randomIds({2, 8}, config.vocabSize, 7);
    std::vector<int64_t> seq = ids.toVector<int64_t>();
    Tensor full = model.run("forward", {{"idx", ids}})[0];
    std::map<std::string, Arg> inputs;
    std::vector<Tensor> caches;
    for (int64_t i = 0; i < config.numLayers; ++i) {
      for (const char *kind : {"key", "value"}) {
        caches.push_back(
            Tensor::zeros({2, config.maxSeqLen, config.kvDim()}, DType::f32));
        inputs.emplace("past." + std::to_string(i) + "." + kind, caches.back());
      }
    }
    int64_t pos = 0;
    for (int64_t n : {3, 1, 1, 1, 1, 1}) {
      std::vector<int64_t> chunk;
      for (int64_t r = 0; r < 2; ++r) {
        chunk.insert(chunk.end(), seq.begin() + r * 8 + pos,
                     seq.begin() + r * 8 + pos + n);
      }
      inputs.insert_or_assign("idx",
                              Tensor::fromVector<int64_t>({2, n}, chunk));
      inputs.insert_or_assign("pos", Arg(pos));
      std::vector<Tensor> out = model.run("decode", inputs);
      ASSERT_EQ(out.size(), size_t(1 + 2 * config.numLayers));
      pos += n;
      ref::expectClose(out[0], positionOf(full, pos - 1), 1e-5, 1e-4);
      expectWrittenInPlaceUpTo(out, caches, pos);
    }
    inputs.insert_or_assign("idx", Tensor::fromVector<int64_t>({2, 1}, {1, 2}));
    inputs.insert_or_assign("pos", Arg(int64_t(8)));
    expectRefusedWithCachesUnchanged(model, inputs, caches);
  }
}

TEST(Generate, GptSamplingMatchesANaiveLoop) {
  dsl::models::GptConfig config = tinyGpt();
  std::unique_ptr<CompiledModel> compiled = gptDecoding(4);
  CompiledModel &model = *compiled;

  std::vector<int64_t> prompt = {1, 7, 2};
  SamplingOptions sampling{.temperature = 1.0, .topK = 5};
  Rng rng(1);
  std::vector<int64_t> streamed;
  std::vector<int64_t> got = generateGpt(
      runner(model), dsl::models::decodeShape(config), prompt, 14, sampling,
      rng, [&](int64_t token) { streamed.push_back(token); });
  EXPECT_EQ(got, streamed);

  // The naive loop: the whole context through the forward graph per token;
  // when the context passes maxSeqLen (8) it restarts from the last 5. The
  // same draws from a generator in the same state.
  Rng naive(1);
  std::vector<int64_t> expected =
      naiveSampling(model, config, {prompt}, 14, sampling, naive).front();
  EXPECT_EQ(got, expected);
  // Several distinct tokens: the test would notice a constant output.
  std::sort(expected.begin(), expected.end());
  EXPECT_GT(std::unique(expected.begin(), expected.end()) - expected.begin(),
            2);

  EXPECT_THROW(generateGpt(runner(model), dsl::models::decodeShape(config), {},
                           3, {}, rng),
               Error);
  EXPECT_THROW(generateGpt(runner(model), dsl::models::decodeShape(config),
                           {11}, 3, {}, rng),
               Error);
  EXPECT_THROW(generateGpt(runner(model), dsl::models::decodeShape(config), {1},
                           3, {.temperature = -1}, rng),
               Error);
}

TEST(Generate, GptBatchSamplesEachSequenceAsANaiveLoop) {
  dsl::models::GptConfig config = tinyGpt();
  std::unique_ptr<CompiledModel> compiled = gptDecoding(5);
  CompiledModel &model = *compiled;

  // Three prompts of one length; 9 tokens each pass maxSeqLen (8), so the
  // window restarts once for all of them.
  std::vector<std::vector<int64_t>> prompts = {
      {1, 7, 2}, {3, 3, 9}, {10, 0, 4}};
  SamplingOptions sampling{.temperature = 1.0, .topK = 5};
  constexpr int64_t kCount = 9;
  int64_t calls = 0;
  GraphRunner counting = [&](const std::string &graph,
                             const std::map<std::string, Arg> &inputs) {
    ++calls;
    EXPECT_EQ(inputs.at("idx").tensor.shape()[0], 3);
    return model.run(graph, inputs);
  };
  Rng rng(2);
  std::vector<std::vector<int64_t>> streamed(prompts.size());
  std::vector<std::vector<int64_t>> got = generateGptBatch(
      counting, dsl::models::decodeShape(config), prompts, kCount, sampling,
      rng, [&](const std::vector<int64_t> &tokens) {
        ASSERT_EQ(tokens.size(), prompts.size());
        for (size_t b = 0; b < tokens.size(); ++b) {
          streamed[b].push_back(tokens[b]);
        }
      });
  EXPECT_EQ(calls, kCount); // one call per position for the whole batch
  EXPECT_EQ(got, streamed);

  // The naive loop (the windows restart together from the last 5), the
  // same draws from a generator in the same state.
  Rng naive(2);
  std::vector<std::vector<int64_t>> expected =
      naiveSampling(model, config, prompts, kCount, sampling, naive);
  EXPECT_EQ(got, expected);
  EXPECT_NE(got[0], got[1]); // the rows are not one sequence repeated

  // Refused before any call: no prompt, prompts of different lengths, an
  // empty prompt, a token outside the vocabulary.
  calls = 0;
  GptShape shape = dsl::models::decodeShape(config);
  for (const std::vector<std::vector<int64_t>> &bad :
       std::vector<std::vector<std::vector<int64_t>>>{
           {}, {{1, 2}, {3}}, {{}, {}}, {{1, 2}, {3, 11}}}) {
    EXPECT_THROW(generateGptBatch(counting, shape, bad, 2, sampling, rng),
                 Error);
  }
  EXPECT_EQ(calls, 0);
  // A graph whose output is not [batch, vocabulary]: refused, not read.
  GraphRunner oneRow = [&](const std::string &graph,
                           const std::map<std::string, Arg> &inputs) {
    std::vector<Tensor> out = model.run(graph, inputs);
    out[0] = Tensor::zeros({1, config.vocabSize}, DType::f32);
    return out;
  };
  EXPECT_THROW(generateGptBatch(oneRow, shape, prompts, 1, sampling, rng),
               Error);
}

TEST(Generate, EncDecDecodeMatchesTheForwardPass) {
  dsl::nn::TransformerConfig config = dsl::models::encdecTiny();
  constexpr int64_t kCapacity = 7;
  std::unique_ptr<CompiledModel> compiled = encdecDecoding(kCapacity, 8);
  CompiledModel &model = *compiled;

  int64_t b = 2, s = 5, d = config.block.dModel;
  Tensor src = ref::randomIds({b, s}, config.srcVocab, 9);
  Tensor tgt = ref::randomIds({b, kCapacity}, config.tgtVocab, 10);
  Tensor mask = Tensor::zeros({b, s}, DType::i1);
  for (int64_t i = 0; i < b * s; ++i) {
    mask.data<bool>()[i] = i / s == 0 || i % s < 3; // row 1 has 2 pads
  }
  Tensor full =
      model.run("forward", {{"src", src}, {"tgt", tgt}, {"src_mask", mask}})[0];
  std::vector<Tensor> cross =
      model.run("encode", {{"src", src}, {"src_mask", mask}});
  ASSERT_EQ(cross.size(), size_t(2 * config.numDecoderLayers));

  // Caches of capacity 7, written in place: a prefix of 3 positions at
  // once, then one at a time to the last position they hold.
  std::map<std::string, Arg> inputs = {{"src_mask", mask}};
  std::vector<Tensor> caches;
  for (int64_t i = 0; i < config.numDecoderLayers; ++i) {
    std::string layer = std::to_string(i);
    inputs.emplace("cross." + layer + ".key", cross[2 * i]);
    inputs.emplace("cross." + layer + ".value", cross[2 * i + 1]);
    for (const char *kind : {"key", "value"}) {
      caches.push_back(Tensor::zeros({b, kCapacity, d}, DType::f32));
      inputs.emplace("past." + layer + "." + kind, caches.back());
    }
  }
  std::vector<int64_t> ids = tgt.toVector<int64_t>();
  int64_t pos = 0;
  for (int64_t n : {3, 1, 1, 1, 1}) {
    std::vector<int64_t> chunk;
    for (int64_t r = 0; r < b; ++r) {
      chunk.insert(chunk.end(), ids.begin() + r * kCapacity + pos,
                   ids.begin() + r * kCapacity + pos + n);
    }
    inputs.insert_or_assign("tgt", Tensor::fromVector<int64_t>({b, n}, chunk));
    inputs.insert_or_assign("pos", Arg(pos));
    std::vector<Tensor> out = model.run("decode", inputs);
    ASSERT_EQ(out.size(), size_t(1 + 2 * config.numDecoderLayers));
    pos += n;
    ref::expectClose(out[0], positionOf(full, pos - 1), 1e-5, 1e-4);
    expectWrittenInPlaceUpTo(out, caches, pos);
  }
  // Past the caches' capacity: refused before anything is written.
  inputs.insert_or_assign("tgt",
                          Tensor::fromVector<int64_t>({b, 2}, {1, 2, 3, 4}));
  inputs.insert_or_assign("pos", Arg(int64_t(6)));
  expectRefusedWithCachesUnchanged(model, inputs, caches);

  // A capacity the graph cannot have.
  dsl::Module bad;
  EXPECT_THROW(dsl::models::addEncDecDecode(bad, config, 0), Error);
  dsl::nn::TransformerConfig learned = config;
  learned.positional = dsl::nn::PEKind::learned;
  learned.maxLen = 6;
  EXPECT_THROW(dsl::models::addEncDecDecode(bad, learned, 7), Error);
}

TEST(Generate, EncDecDecodeAndGreedyTranslationMatchTheForwardPass) {
  dsl::nn::TransformerConfig config = dsl::models::encdecTiny();
  constexpr int64_t kCapacity = 8;
  std::unique_ptr<CompiledModel> compiled = encdecDecoding(kCapacity, 6);
  CompiledModel &model = *compiled;
  // Larger weights than the default init so that choices differ by row.
  for (const Parameter &p : model.parameters()) {
    Tensor t = p.tensor;
    float *d = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      d[i] *= 3.0f;
    }
  }

  int64_t b = 2, s = 5, bos = 1, eos = 2, maxLength = 6;
  Tensor src = ref::randomIds({b, s}, config.srcVocab, 7);
  Tensor mask = Tensor::zeros({b, s}, DType::i1);
  for (int64_t i = 0; i < b * s; ++i) {
    mask.data<bool>()[i] = i / s == 0 || i % s < 3; // row 1 has 2 pads
  }
  // The runner sees the caches allocated once: the same tensors each call.
  std::vector<const void *> cachesSeen;
  int64_t calls = 0;
  GraphRunner watch = [&](const std::string &graph,
                          const std::map<std::string, Arg> &inputs) {
    if (graph == "decode") {
      ++calls;
      const Tensor &key = inputs.at("past.1.key").tensor;
      EXPECT_EQ(key.shape(),
                (std::vector<int64_t>{b, kCapacity, config.block.dModel}));
      cachesSeen.push_back(key.raw());
    }
    return model.run(graph, inputs);
  };
  std::vector<std::vector<int64_t>> got =
      translateGreedy(watch, dsl::models::decodeShape(config, kCapacity), src,
                      mask, bos, eos, maxLength);
  EXPECT_GE(calls, 1);
  for (const void *seen : cachesSeen) {
    EXPECT_EQ(seen, cachesSeen.front());
  }

  // Naive greedy: the forward graph over the whole target prefix per step.
  for (int64_t r = 0; r < b; ++r) {
    std::vector<int64_t> ids(src.data<int64_t>() + r * s,
                             src.data<int64_t>() + (r + 1) * s);
    Tensor m = Tensor::zeros({1, s}, DType::i1);
    for (int64_t j = 0; j < s; ++j) {
      m.data<bool>()[j] = mask.data<bool>()[r * s + j];
    }
    std::vector<int64_t> tgt = {bos}, expected;
    for (int64_t n = 0; n < maxLength; ++n) {
      Tensor out = model.run(
          "forward",
          {{"src", Tensor::fromVector<int64_t>({1, s}, ids)},
           {"tgt", Tensor::fromVector<int64_t>({1, int64_t(tgt.size())}, tgt)},
           {"src_mask", m}})[0];
      Tensor last = positionOf(out, int64_t(tgt.size()) - 1);
      const float *p = last.data<float>();
      int64_t token = std::max_element(p, p + config.tgtVocab) - p;
      if (token == eos) {
        break;
      }
      expected.push_back(token);
      tgt.push_back(token);
    }
    EXPECT_EQ(got[r], expected) << "sentence " << r;
  }
  EXPECT_THROW(translateGreedy(runner(model),
                               dsl::models::decodeShape(config, kCapacity), src,
                               mask, bos, config.tgtVocab, maxLength),
               Error);
  // An output longer than the caches hold: refused before any call.
  calls = 0;
  EXPECT_THROW(translateGreedy(watch,
                               dsl::models::decodeShape(config, kCapacity), src,
                               mask, bos, eos, kCapacity + 1),
               Error);
  EXPECT_EQ(calls, 0);
}
