//===- Models.cpp - The reference models, written in the DSL --------------===//
//
// GPT-2 style decoder, Llama-architecture decoder, BERT embeddings and the
// encoder-decoder Transformer, each as a module plus the entry points
// ("forward", "loss") a runtime compiles.
//
//===----------------------------------------------------------------------===//

#include "compiler/DSL/Models.h"
#include "compiler/DSL/Internal.h"

#include <cmath>

namespace kiln::dsl::models {

using nn::join;

//===----------------------------------------------------------------------===//
// GPT-2 style decoder
//===----------------------------------------------------------------------===//

GptConfig gptTiny() {
  GptConfig config;
  config.vocabSize = 65;
  config.dModel = 128;
  config.numHeads = 4;
  config.numLayers = 4;
  config.dFF = 512;
  config.maxSeqLen = 128;
  return config;
}

GptConfig gptSmall() {
  GptConfig config;
  config.vocabSize = 4096;
  config.dModel = 384;
  config.numHeads = 6;
  config.numLayers = 6;
  config.dFF = 1536;
  config.maxSeqLen = 256;
  return config;
}

GptConfig gpt2() {
  GptConfig config;
  config.vocabSize = 50257;
  config.dModel = 768;
  config.numHeads = 12;
  config.numLayers = 12;
  config.dFF = 3072;
  config.maxSeqLen = 1024;
  config.activation = Activation::geluTanh;
  return config;
}

static nn::LinearConfig gptLinear(const GptConfig &config, int64_t in,
                                  int64_t out) {
  return {in, out, /*bias=*/true, Init::normal(0.0, config.initStd),
          Init::zeros()};
}

static nn::LayerNormConfig gptNorm(const GptConfig &config) {
  return {config.dModel, config.layerNormEps, NormMode::standard};
}

GptBlock::GptBlock(Graph &graph, const std::string &name,
                   const GptConfig &config, SourceLoc loc)
    : config(config), ln1(graph, join(name, "ln_1"), gptNorm(config), loc),
      qkv(graph, join(name, "attn.c_attn"),
          gptLinear(config, config.dModel, 3 * config.dModel), loc),
      proj(graph, join(name, "attn.c_proj"),
           gptLinear(config, config.dModel, config.dModel), loc),
      ln2(graph, join(name, "ln_2"), gptNorm(config), loc),
      fc(graph, join(name, "mlp.c_fc"),
         gptLinear(config, config.dModel, config.dFF), loc),
      fcProj(graph, join(name, "mlp.c_proj"),
             gptLinear(config, config.dFF, config.dModel), loc) {}

/// The fused [3d, d] projection and its [3d] bias, split q | k | v.
static AttentionWeights gptAttentionWeights(const GptBlock &block,
                                            const SourceLoc &loc) {
  int64_t d = block.config.dModel;
  auto third = [&](const Var &fused, int64_t i) {
    return slice(fused, 0, i * d, (i + 1) * d, loc);
  };
  return {third(block.qkv.weight, 0), third(block.qkv.weight, 1),
          third(block.qkv.weight, 2), block.proj.weight,
          third(block.qkv.bias, 0),   third(block.qkv.bias, 1),
          third(block.qkv.bias, 2),   block.proj.bias};
}

GptBlock::Step GptBlock::step(Var x, Var keyCache, Var valueCache, Var pos,
                              SourceLoc loc) const {
  AttentionWeights w = gptAttentionWeights(*this, loc);
  Var h = ln1(x, loc);
  Var key = updateSlice(keyCache, linear(h, w.wk, w.bk, loc), pos, 1, loc);
  Var value =
      updateSlice(valueCache, linear(h, w.wv, w.bv, loc), pos, 1, loc);
  AttentionOptions options;
  options.numHeads = config.numHeads;
  options.causal = true;
  options.offset = pos;
  Var context = attention(linear(h, w.wq, w.bq, loc), key, value, options, loc);
  x = add(x, linear(context, w.wo, w.bo, loc), loc);
  Var m =
      feedForward(ln2(x, loc), {fc.weight, fcProj.weight, fc.bias, fcProj.bias},
                  {config.activation, 0.0}, loc);
  return {add(x, m, loc), key, value};
}

Var GptBlock::operator()(Var x, SourceLoc loc) const {
  AttentionWeights weights = gptAttentionWeights(*this, loc);
  AttentionOptions attention;
  attention.numHeads = config.numHeads;
  attention.causal = true;
  attention.dropout = config.dropout;
  Var h = ln1(x, loc);
  x = add(x,
          dropout(multiHeadAttention(h, h, weights, attention, loc),
                  config.dropout, loc),
          loc);
  Var m =
      feedForward(ln2(x, loc), {fc.weight, fcProj.weight, fc.bias, fcProj.bias},
                  {config.activation, 0.0}, loc);
  return add(x, dropout(m, config.dropout, loc), loc);
}

static nn::EmbeddingConfig gptEmbedding(const GptConfig &config) {
  nn::EmbeddingConfig embedding;
  embedding.numEmbeddings = config.vocabSize;
  embedding.dim = config.dModel;
  embedding.init = Init::normal(0.0, config.initStd);
  return embedding;
}

static nn::PositionalEncodingConfig gptPositions(const GptConfig &config) {
  nn::PositionalEncodingConfig pe;
  pe.kind = nn::PEKind::learned;
  pe.dim = config.dModel;
  pe.maxLen = config.maxSeqLen;
  pe.dropout = config.dropout;
  pe.init = Init::normal(0.0, config.initStd);
  return pe;
}

static std::vector<GptBlock> gptBlocks(Graph &graph, const GptConfig &config,
                                       const SourceLoc &loc) {
  std::vector<GptBlock> blocks;
  for (int64_t i = 0; i < config.numLayers; ++i) {
    blocks.emplace_back(graph, "h." + std::to_string(i), config, loc);
  }
  return blocks;
}

Gpt::Gpt(Graph &graph, const GptConfig &config, SourceLoc loc)
    : config(config), wte(graph, "wte", gptEmbedding(config), loc),
      wpe(graph, "wpe", gptPositions(config), loc),
      h(gptBlocks(graph, config, loc)),
      lnF(graph, "ln_f", gptNorm(config), loc) {}

Var Gpt::operator()(Var idx, SourceLoc loc) const {
  // x = wte[idx] + wpe[0:T] (then embedding dropout), in the activations'
  // dtype.
  Var x = cast(wpe(wte(idx, loc), {}, loc), config.activations, loc);
  for (const GptBlock &block : h) {
    x = block(x, loc);
  }
  return cast(linear(lnF(x, loc), wte.weight, {}, loc), DType::f32, loc);
}

Graph &addGptForward(Module &module, const GptConfig &config,
                     GraphOptions options, std::string name, SourceLoc loc) {
  Graph &graph = module.addGraph(std::move(name), options, loc);
  Var idx = graph.input("idx", {kDynamic, kDynamic}, DType::i64, loc);
  Gpt gpt(graph, config, loc);
  graph.finish({gpt(idx, loc)}, loc);
  return graph;
}

/// Finishes a decoder-only model's decode graph: the blocks' steps from
/// `x` at positions pos + t, each with its caches "past.{i}.key" and
/// "past.{i}.value" of `cache` shape, inputs whose outputs replace them in
/// place (key 0, value 0, key 1, ...), after the logits `head` gives the
/// last position ([B, dModel]).
template <typename Block>
static void finishDecode(Graph &graph, Var x, Var pos,
                         const std::vector<Block> &blocks, const Shape &cache,
                         int64_t dModel, const std::function<Var(Var)> &head,
                         const SourceLoc &loc) {
  std::vector<Var> outputs(1);
  std::vector<std::pair<size_t, Var>> inPlace;
  for (size_t i = 0; i < blocks.size(); ++i) {
    std::string past = "past." + std::to_string(i);
    Var key = graph.input(past + ".key", cache, DType::f32, loc);
    Var value = graph.input(past + ".value", cache, DType::f32, loc);
    GptBlock::Step s = blocks[i].step(x, key, value, pos, loc);
    x = s.x;
    inPlace.emplace_back(outputs.size(), key);
    outputs.push_back(s.key);
    inPlace.emplace_back(outputs.size(), value);
    outputs.push_back(s.value);
  }
  outputs[0] =
      head(reshape(slice(x, 1, -1, std::nullopt, loc), {0, dModel}, loc));
  graph.finish(outputs, inPlace, loc);
}

Graph &addGptDecode(Module &module, const GptConfig &config, std::string name,
                    SourceLoc loc) {
  Graph &graph = module.addGraph(std::move(name), {}, loc);
  Var idx = graph.input("idx", {kDynamic, kDynamic}, DType::i64, loc);
  Var pos = graph.scalarInput("pos", loc);
  Gpt gpt(graph, config, loc);
  finishDecode(
      graph, gpt.wpe(gpt.wte(idx, loc), pos, loc), pos, gpt.h,
      {kDynamic, config.maxSeqLen, config.dModel}, config.dModel,
      [&](Var last) {
        return linear(gpt.lnF(last, loc), gpt.wte.weight, {}, loc);
      },
      loc);
  return graph;
}

Graph &addGptLoss(Module &module, const GptConfig &config, GraphOptions options,
                  std::string name, SourceLoc loc) {
  Graph &graph = module.addGraph(std::move(name), options, loc);
  Var idx = graph.input("idx", {kDynamic, kDynamic}, DType::i64, loc);
  Var targets = graph.input("targets", {kDynamic, kDynamic}, DType::i64, loc);
  Gpt gpt(graph, config, loc);
  graph.finish({crossEntropy(gpt(idx, loc), targets, {}, loc)}, loc);
  return graph;
}

//===----------------------------------------------------------------------===//
// Llama-architecture decoder
//===----------------------------------------------------------------------===//

LlamaConfig llamaTiny() {
  LlamaConfig config;
  config.vocabSize = 65;
  config.dModel = 64;
  config.numLayers = 2;
  config.numHeads = 4;
  config.numKvHeads = 2;
  config.dFF = 176;
  config.maxSeqLen = 128;
  config.rmsNormEps = 1e-5;
  return config;
}

LlamaConfig llamaSmall() {
  LlamaConfig config;
  config.vocabSize = 4096;
  config.dModel = 384;
  config.numLayers = 6;
  config.numHeads = 6;
  config.numKvHeads = 2;
  config.dFF = 1024;
  config.maxSeqLen = 256;
  config.rmsNormEps = 1e-5;
  return config;
}

/// `c`, its sizes checked (before any parameter is declared).
static const LlamaConfig &checked(const LlamaConfig &c, const SourceLoc &loc) {
  auto positive = [&](int64_t v, const char *field) {
    if (v < 1) {
      detail::fail(loc, std::string("LlamaConfig: '") + field +
                            "' must be positive, got " + std::to_string(v));
    }
  };
  positive(c.vocabSize, "vocabSize");
  positive(c.dModel, "dModel");
  positive(c.numLayers, "numLayers");
  positive(c.numHeads, "numHeads");
  positive(c.dFF, "dFF");
  positive(c.maxSeqLen, "maxSeqLen");
  if (c.numKvHeads < 0) {
    detail::fail(loc, "LlamaConfig: 'numKvHeads' must be positive (or 0 for "
                      "numHeads), got " +
                          std::to_string(c.numKvHeads));
  }
  if (c.dModel % c.numHeads != 0 || c.headDim() % 2 != 0) {
    detail::fail(loc, "LlamaConfig: 'numHeads' (" + std::to_string(c.numHeads) +
                          ") must divide 'dModel' (" +
                          std::to_string(c.dModel) +
                          ") into heads of even width (rotary pairs)");
  }
  if (c.numHeads % c.kvHeads() != 0) {
    detail::fail(loc, "LlamaConfig: 'numKvHeads' (" +
                          std::to_string(c.kvHeads()) +
                          ") must divide 'numHeads' (" +
                          std::to_string(c.numHeads) + ")");
  }
  if (!(c.rmsNormEps >= 0.0) || !std::isfinite(c.rmsNormEps) ||
      !(c.ropeTheta > 0.0) || !std::isfinite(c.ropeTheta)) {
    detail::fail(loc, "LlamaConfig: 'rmsNormEps' must be finite and >= 0 and "
                      "'ropeTheta' finite and > 0");
  }
  return c;
}

static nn::LinearConfig llamaLinear(const LlamaConfig &config, int64_t in,
                                    int64_t out) {
  return {in, out, /*bias=*/false, Init::normal(0.0, config.initStd),
          std::nullopt};
}

static nn::FeedForwardConfig llamaMlp(const LlamaConfig &config) {
  nn::FeedForwardConfig mlp;
  mlp.dModel = config.dModel;
  mlp.dFF = config.dFF;
  mlp.activation = Activation::silu;
  mlp.gated = true;
  mlp.bias = false;
  mlp.weightInit = Init::normal(0.0, config.initStd);
  return mlp;
}

LlamaBlock::LlamaBlock(Graph &graph, const std::string &name,
                       const LlamaConfig &config, SourceLoc loc)
    : config(checked(config, loc)),
      inputNorm(graph, join(name, "input_layernorm"),
                {config.dModel, config.rmsNormEps}, loc),
      q(graph, join(name, "self_attn.q_proj"),
        llamaLinear(config, config.dModel, config.dModel), loc),
      k(graph, join(name, "self_attn.k_proj"),
        llamaLinear(config, config.dModel, config.kvDim()), loc),
      v(graph, join(name, "self_attn.v_proj"),
        llamaLinear(config, config.dModel, config.kvDim()), loc),
      o(graph, join(name, "self_attn.o_proj"),
        llamaLinear(config, config.dModel, config.dModel), loc),
      postNorm(graph, join(name, "post_attention_layernorm"),
               {config.dModel, config.rmsNormEps}, loc),
      mlp(graph, join(name, "mlp"), llamaMlp(config), loc) {}

/// Hugging Face's rotate_half convention at positions pos + t.
static RotaryOptions llamaRope(const LlamaConfig &config, Var pos) {
  RotaryOptions rope;
  rope.headDim = config.headDim();
  rope.theta = config.ropeTheta;
  rope.style = RotaryStyle::half;
  rope.offset = pos;
  return rope;
}

Var LlamaBlock::attend(Var h, Var keys, Var values, Var pos,
                       const SourceLoc &loc) const {
  AttentionOptions options;
  options.numHeads = config.numHeads;
  options.numKvHeads = config.kvHeads();
  options.causal = true;
  options.offset = pos;
  Var query = rotary(q(h, loc), llamaRope(config, pos), loc);
  return o(attention(query, keys, values, options, loc), loc);
}

Var LlamaBlock::operator()(Var x, SourceLoc loc) const {
  Var h = inputNorm(x, loc);
  Var keys = rotary(k(h, loc), llamaRope(config, {}), loc);
  x = add(x, attend(h, keys, v(h, loc), {}, loc), loc);
  return add(x, mlp(postNorm(x, loc), loc), loc);
}

GptBlock::Step LlamaBlock::step(Var x, Var keyCache, Var valueCache, Var pos,
                                SourceLoc loc) const {
  Var h = inputNorm(x, loc);
  Var key = updateSlice(
      keyCache, rotary(k(h, loc), llamaRope(config, pos), loc), pos, 1, loc);
  Var value = updateSlice(valueCache, v(h, loc), pos, 1, loc);
  x = add(x, attend(h, key, value, pos, loc), loc);
  return {add(x, mlp(postNorm(x, loc), loc), loc), key, value};
}

static std::vector<LlamaBlock>
llamaLayers(Graph &graph, const LlamaConfig &config, const SourceLoc &loc) {
  std::vector<LlamaBlock> layers;
  for (int64_t i = 0; i < config.numLayers; ++i) {
    layers.emplace_back(graph, "model.layers." + std::to_string(i), config,
                        loc);
  }
  return layers;
}

static nn::EmbeddingConfig llamaEmbedding(const LlamaConfig &config) {
  nn::EmbeddingConfig embedding;
  embedding.numEmbeddings = config.vocabSize;
  embedding.dim = config.dModel;
  embedding.init = Init::normal(0.0, config.initStd);
  return embedding;
}

static std::optional<nn::Linear>
llamaHead(Graph &graph, const LlamaConfig &config, const SourceLoc &loc) {
  if (config.tiedHead) {
    return std::nullopt;
  }
  return nn::Linear(graph, "lm_head",
                    llamaLinear(config, config.dModel, config.vocabSize), loc);
}

Llama::Llama(Graph &graph, const LlamaConfig &config, SourceLoc loc)
    : config(checked(config, loc)),
      embed(graph, "model.embed_tokens", llamaEmbedding(config), loc),
      layers(llamaLayers(graph, config, loc)),
      norm(graph, "model.norm", {config.dModel, config.rmsNormEps}, loc),
      lmHead(llamaHead(graph, config, loc)) {}

Var Llama::head(Var x, SourceLoc loc) const {
  Var h = norm(x, loc);
  return lmHead ? (*lmHead)(h, loc) : linear(h, embed.weight, {}, loc);
}

Var Llama::operator()(Var idx, SourceLoc loc) const {
  Var x = embed(idx, loc);
  for (const LlamaBlock &layer : layers) {
    x = layer(x, loc);
  }
  return head(x, loc);
}

Graph &addLlamaForward(Module &module, const LlamaConfig &config,
                       GraphOptions options, std::string name, SourceLoc loc) {
  Graph &graph = module.addGraph(std::move(name), options, loc);
  Var idx = graph.input("idx", {kDynamic, kDynamic}, DType::i64, loc);
  Llama llama(graph, config, loc);
  graph.finish({llama(idx, loc)}, loc);
  return graph;
}

Graph &addLlamaLoss(Module &module, const LlamaConfig &config,
                    GraphOptions options, std::string name, SourceLoc loc) {
  Graph &graph = module.addGraph(std::move(name), options, loc);
  Var idx = graph.input("idx", {kDynamic, kDynamic}, DType::i64, loc);
  Var targets = graph.input("targets", {kDynamic, kDynamic}, DType::i64, loc);
  Llama llama(graph, config, loc);
  graph.finish({crossEntropy(llama(idx, loc), targets, {}, loc)}, loc);
  return graph;
}

Graph &addLlamaDecode(Module &module, const LlamaConfig &config,
                      std::string name, SourceLoc loc) {
  Graph &graph = module.addGraph(std::move(name), {}, loc);
  Var idx = graph.input("idx", {kDynamic, kDynamic}, DType::i64, loc);
  Var pos = graph.scalarInput("pos", loc);
  Llama llama(graph, config, loc);
  finishDecode(
      graph, llama.embed(idx, loc), pos, llama.layers,
      {kDynamic, config.maxSeqLen, config.kvDim()}, config.dModel,
      [&](Var last) { return llama.head(last, loc); }, loc);
  return graph;
}

//===----------------------------------------------------------------------===//
// BERT embeddings
//===----------------------------------------------------------------------===//

BertEmbeddingsConfig bertSeedEmbeddings() {
  BertEmbeddingsConfig config;
  config.vocabSize = 120;
  config.hiddenSize = 16;
  config.maxPositionEmbeddings = 50;
  config.typeVocabSize = 2;
  config.hiddenDropout = 0.0;
  return config;
}

static nn::EmbeddingConfig bertTable(const BertEmbeddingsConfig &config,
                                     int64_t rows,
                                     std::optional<int64_t> paddingIdx) {
  nn::EmbeddingConfig embedding;
  embedding.numEmbeddings = rows;
  embedding.dim = config.hiddenSize;
  embedding.paddingIdx = paddingIdx;
  embedding.init = Init::normal(0.0, config.initStd);
  return embedding;
}

static nn::PositionalEncodingConfig
bertPositions(const BertEmbeddingsConfig &config) {
  nn::PositionalEncodingConfig pe;
  pe.kind = nn::PEKind::learned;
  pe.dim = config.hiddenSize;
  pe.maxLen = config.maxPositionEmbeddings;
  pe.init = Init::normal(0.0, config.initStd);
  return pe;
}

BertEmbeddings::BertEmbeddings(Graph &graph, const std::string &name,
                               const BertEmbeddingsConfig &config,
                               SourceLoc loc)
    : config(config),
      wordEmbeddings(graph, join(name, "word_embeddings"),
                     bertTable(config, config.vocabSize, config.padTokenId),
                     loc),
      positionEmbeddings(graph, join(name, "position_embeddings"),
                         bertPositions(config), loc),
      tokenTypeEmbeddings(graph, join(name, "token_type_embeddings"),
                          bertTable(config, config.typeVocabSize, std::nullopt),
                          loc),
      layerNorm(graph, join(name, "LayerNorm"),
                {config.hiddenSize, config.layerNormEps, NormMode::standard},
                loc) {}

Var BertEmbeddings::operator()(Var inputIds, Var tokenTypeIds,
                               SourceLoc loc) const {
  // Token types default to 0: row 0 of the table, broadcast over [B, T].
  Var types = tokenTypeIds ? tokenTypeEmbeddings(tokenTypeIds, loc)
                           : slice(tokenTypeEmbeddings.weight, 0, 0, 1, loc);
  Var x = add(wordEmbeddings(inputIds, loc), types, loc);
  x = positionEmbeddings(x, {}, loc);
  return dropout(layerNorm(x, loc), config.hiddenDropout, loc);
}

Graph &addBertEmbeddingsForward(Module &module,
                                const BertEmbeddingsConfig &config,
                                GraphOptions options, std::string name,
                                SourceLoc loc) {
  Graph &graph = module.addGraph(std::move(name), options, loc);
  Var ids = graph.input("input_ids", {kDynamic, kDynamic}, DType::i64, loc);
  Var types =
      graph.input("token_type_ids", {kDynamic, kDynamic}, DType::i64, loc);
  BertEmbeddings embeddings(graph, "", config, loc);
  graph.finish({embeddings(ids, types, loc)}, loc);
  return graph;
}

//===----------------------------------------------------------------------===//
// Encoder-decoder Transformer
//===----------------------------------------------------------------------===//

nn::TransformerConfig encdecBase() {
  nn::TransformerConfig config;
  config.srcVocab = 8000;
  config.tgtVocab = 8000;
  config.numEncoderLayers = 6;
  config.numDecoderLayers = 6;
  config.block.dModel = 512;
  config.block.numHeads = 8;
  config.block.dFF = 2048;
  config.block.dropout = 0.0;
  config.block.activation = Activation::relu;
  config.block.placement = nn::NormPlacement::post;
  config.block.normMode = NormMode::standard;
  config.block.eps = 1e-5;
  config.positional = nn::PEKind::sinusoidal;
  config.scaleEmbeddings = true;
  config.shareEmbeddings = true;
  config.tiedProjection = true;
  config.logSoftmax = false;
  config.xavierInit = true;
  return config;
}

nn::TransformerConfig encdecTiny() {
  nn::TransformerConfig config = encdecBase();
  config.srcVocab = 97;
  config.tgtVocab = 97;
  config.numEncoderLayers = 2;
  config.numDecoderLayers = 2;
  config.block.dModel = 32;
  config.block.numHeads = 4;
  config.block.dFF = 64;
  return config;
}

nn::TransformerConfig seed002Transformer(int64_t srcVocab, int64_t tgtVocab) {
  nn::TransformerConfig config;
  config.srcVocab = srcVocab;
  config.tgtVocab = tgtVocab;
  config.numEncoderLayers = 6;
  config.numDecoderLayers = 6;
  config.block.dModel = 512;
  config.block.numHeads = 8;
  config.block.dFF = 2048;
  config.block.dropout = 0.1;
  config.block.activation = Activation::relu;
  config.block.placement = nn::NormPlacement::pre;
  config.block.normMode = NormMode::stdEps;
  config.block.eps = 1e-6;
  config.block.attentionBias = false;
  config.positional = nn::PEKind::sinusoidal;
  config.scaleEmbeddings = true;
  config.shareEmbeddings = false;
  config.tiedProjection = false;
  config.logSoftmax = true;
  config.xavierInit = true;
  return config;
}

namespace {
/// The inputs shared by the forward and loss graphs.
struct EncDecInputs {
  Var src, tgt, srcMask, tgtMask;
};
} // namespace

static EncDecInputs encdecInputs(Graph &graph,
                                 const nn::TransformerConfig &config,
                                 const SourceLoc &loc) {
  Shape ids{kDynamic, kDynamic};
  EncDecInputs in{graph.input("src", ids, DType::i64, loc),
                  graph.input("tgt", ids, DType::i64, loc),
                  graph.input("src_mask", ids, DType::i1, loc),
                  {}};
  if (config.targetMask) {
    in.tgtMask = graph.input("tgt_mask", ids, DType::i1, loc);
  }
  return in;
}

static Var encdecOutput(Graph &graph, const nn::TransformerConfig &config,
                        const EncDecInputs &in, const SourceLoc &loc) {
  nn::Transformer model(graph, "", config, loc);
  Var memory = model.encode(in.src, in.srcMask, loc);
  return model.project(
      model.decode(memory, in.srcMask, in.tgt, in.tgtMask, loc), loc);
}

Graph &addEncDecForward(Module &module, const nn::TransformerConfig &config,
                        GraphOptions options, std::string name, SourceLoc loc) {
  Graph &graph = module.addGraph(std::move(name), options, loc);
  EncDecInputs in = encdecInputs(graph, config, loc);
  graph.finish({encdecOutput(graph, config, in, loc)}, loc);
  return graph;
}

Graph &addEncDecLoss(Module &module, const nn::TransformerConfig &config,
                     GraphOptions options, std::string name,
                     LossOptions lossOptions, SourceLoc loc) {
  Graph &graph = module.addGraph(std::move(name), options, loc);
  EncDecInputs in = encdecInputs(graph, config, loc);
  Var targets = graph.input("targets", {kDynamic, kDynamic}, DType::i64, loc);
  Var out = encdecOutput(graph, config, in, loc);
  Var loss = config.logSoftmax ? nllLoss(out, targets, lossOptions, loc)
                               : crossEntropy(out, targets, lossOptions, loc);
  graph.finish({loss}, loc);
  return graph;
}

Graph &addEncDecEncode(Module &module, const nn::TransformerConfig &config,
                       std::string name, SourceLoc loc) {
  Graph &graph = module.addGraph(std::move(name), {}, loc);
  Shape ids{kDynamic, kDynamic};
  Var src = graph.input("src", ids, DType::i64, loc);
  Var srcMask = graph.input("src_mask", ids, DType::i1, loc);
  nn::Transformer model(graph, "", config, loc);
  Var memory = model.encode(src, srcMask, loc);
  std::vector<Var> outputs;
  for (const nn::DecoderBlock &layer : model.decoder.layers) {
    outputs.push_back(layer.crossAttention.keys(memory, loc));
    outputs.push_back(layer.crossAttention.values(memory, loc));
  }
  graph.finish(outputs, loc);
  return graph;
}

Graph &addEncDecDecode(Module &module, const nn::TransformerConfig &config,
                       int64_t maxLength, std::string name, SourceLoc loc) {
  if (maxLength <= 0 ||
      (config.positional == nn::PEKind::learned && maxLength > config.maxLen)) {
    detail::fail(
        loc, "addEncDecDecode: the caches' capacity (maxLength) must be " +
                 std::string(config.positional == nn::PEKind::learned
                                 ? "in [1, " + std::to_string(config.maxLen) +
                                       "] (the learned position table)"
                                 : "positive") +
                 ", got " + std::to_string(maxLength));
  }
  Graph &graph = module.addGraph(std::move(name), {}, loc);
  Shape ids{kDynamic, kDynamic};
  Shape cache{kDynamic, maxLength, config.block.dModel};
  Var tgt = graph.input("tgt", ids, DType::i64, loc);
  Var pos = graph.scalarInput("pos", loc);
  Var srcMask = graph.input("src_mask", ids, DType::i1, loc);
  nn::Transformer model(graph, "", config, loc);
  Var y = model.embedTarget(tgt, pos, loc);
  std::vector<Var> outputs(1);
  std::vector<std::pair<size_t, Var>> inPlace;
  Shape cross{kDynamic, kDynamic, config.block.dModel};
  for (size_t i = 0; i < model.decoder.layers.size(); ++i) {
    auto in = [&](const std::string &kind, const std::string &what,
                  const Shape &shape) {
      return graph.input(kind + "." + std::to_string(i) + "." + what, shape,
                         DType::f32, loc);
    };
    Var crossKey = in("cross", "key", cross),
        crossValue = in("cross", "value", cross);
    Var key = in("past", "key", cache), value = in("past", "value", cache);
    nn::DecoderBlock::Step s = model.decoder.layers[i].step(
        y, key, value, pos, crossKey, crossValue, srcMask, loc);
    y = s.x;
    inPlace.emplace_back(outputs.size(), key);
    outputs.push_back(s.key);
    inPlace.emplace_back(outputs.size(), value);
    outputs.push_back(s.value);
  }
  if (model.decoder.norm) {
    y = (*model.decoder.norm)(y, loc);
  }
  Var last = reshape(slice(y, 1, -1, std::nullopt, loc),
                     {0, config.block.dModel}, loc);
  outputs[0] = model.project(last, loc);
  graph.finish(outputs, inPlace, loc);
  return graph;
}

} // namespace kiln::dsl::models
