//===- NN.cpp - PyTorch-style modules of the model DSL --------------------===//
//
// Every module declares its parameters in its constructor and only adds ops
// when called; errors are reported at the caller's line (the `loc` passed
// down to every DSL call).
//
//===----------------------------------------------------------------------===//

#include "compiler/DSL/NN.h"
#include "compiler/DSL/Internal.h"

#include <fmt/format.h>

#include <cmath>

namespace kiln::dsl::nn {

using detail::fail;

Init linearDefaultInit(int64_t inFeatures) {
  double bound = inFeatures > 0 ? 1.0 / std::sqrt(double(inFeatures)) : 0.0;
  return Init::uniform(-bound, bound);
}

std::string join(const std::string &prefix, const std::string &name) {
  if (prefix.empty()) {
    return name;
  }
  if (name.empty()) {
    return prefix;
  }
  return prefix + "." + name;
}

/// Checks that a size of a module configuration is positive.
static void checkPositive(int64_t value, const char *module, const char *field,
                          const SourceLoc &loc) {
  if (value <= 0) {
    fail(loc, std::string(module) + ": expects '" + field +
                  "' to be positive, got " + std::to_string(value));
  }
}

//===----------------------------------------------------------------------===//
// Linear, Embedding, PositionalEncoding, LayerNorm
//===----------------------------------------------------------------------===//

Linear::Linear(Graph &graph, const std::string &name, LinearConfig config,
               SourceLoc loc)
    : config(config) {
  checkPositive(config.inFeatures, "Linear", "inFeatures", loc);
  checkPositive(config.outFeatures, "Linear", "outFeatures", loc);
  Init init = linearDefaultInit(config.inFeatures);
  weight =
      graph.param(join(name, "weight"), {config.outFeatures, config.inFeatures},
                  config.weightInit.value_or(init), loc);
  if (config.bias) {
    bias = graph.param(join(name, "bias"), {config.outFeatures},
                       config.biasInit.value_or(init), loc);
  }
}

Var Linear::operator()(Var x, SourceLoc loc) const {
  return linear(x, weight, bias, loc);
}

Embedding::Embedding(Graph &graph, const std::string &name,
                     EmbeddingConfig config, SourceLoc loc)
    : config(config) {
  checkPositive(config.numEmbeddings, "Embedding", "numEmbeddings", loc);
  checkPositive(config.dim, "Embedding", "dim", loc);
  weight = graph.param(join(name, "weight"), {config.numEmbeddings, config.dim},
                       config.init, loc);
}

Var Embedding::operator()(Var ids, SourceLoc loc) const {
  Var x = embedding(ids, weight, config.paddingIdx, loc);
  if (config.scaleBySqrtDim) {
    x = scale(x, std::sqrt(double(config.dim)), loc);
  }
  return x;
}

PositionalEncoding::PositionalEncoding(Graph &graph, const std::string &name,
                                       PositionalEncodingConfig config,
                                       SourceLoc loc)
    : config(config) {
  checkPositive(config.dim, "PositionalEncoding", "dim", loc);
  if (config.kind == PEKind::learned) {
    checkPositive(config.maxLen, "PositionalEncoding", "maxLen", loc);
    table = graph.param(join(name, "weight"), {config.maxLen, config.dim},
                        config.init, loc);
  }
}

Var PositionalEncoding::operator()(Var x, Var offset, SourceLoc loc) const {
  if (x && x.isTensor() && x.rank() >= 1 && x.dim(-1) != kDynamic &&
      x.dim(-1) != config.dim) {
    fail(loc, "PositionalEncoding: expects inputs of width " +
                  std::to_string(config.dim) + ", got " + x.typeString());
  }
  Var y = config.kind == PEKind::learned
              ? learnedPositionalEncoding(x, table, offset, loc)
              : sinusoidalPositionalEncoding(x, offset, loc);
  return dropout(y, config.dropout, loc);
}

LayerNorm::LayerNorm(Graph &graph, const std::string &name,
                     LayerNormConfig config, SourceLoc loc)
    : config(config) {
  checkPositive(config.dim, "LayerNorm", "dim", loc);
  const char *scaleName = config.mode == NormMode::stdEps ? "alpha" : "weight";
  gamma = graph.param(join(name, scaleName), {config.dim}, Init::ones(), loc);
  beta = graph.param(join(name, "bias"), {config.dim}, Init::zeros(), loc);
}

Var LayerNorm::operator()(Var x, SourceLoc loc) const {
  return layerNorm(x, gamma, beta, {config.eps, config.mode}, loc);
}

/// `act` of x, one kiln op.
static Var activate(Var x, Activation act, const SourceLoc &loc) {
  switch (act) {
  case Activation::relu:
    return relu(x, loc);
  case Activation::silu:
    return silu(x, loc);
  case Activation::gelu:
  case Activation::geluTanh:
    break;
  }
  return gelu(x, act == Activation::geluTanh, loc);
}

RMSNorm::RMSNorm(Graph &graph, const std::string &name, RMSNormConfig config,
                 SourceLoc loc)
    : config(config) {
  checkPositive(config.dim, "RMSNorm", "dim", loc);
  weight = graph.param(join(name, "weight"), {config.dim}, Init::ones(), loc);
}

Var RMSNorm::operator()(Var x, SourceLoc loc) const {
  return rmsNorm(x, weight, config.eps, loc);
}

//===----------------------------------------------------------------------===//
// Attention, feed-forward, residual
//===----------------------------------------------------------------------===//

MultiHeadAttention::MultiHeadAttention(Graph &graph, const std::string &name,
                                       MultiHeadAttentionConfig config,
                                       SourceLoc loc)
    : config(config) {
  checkPositive(config.dModel, "MultiHeadAttention", "dModel", loc);
  int64_t d = config.dModel;
  int64_t kv = config.kvDim > 0 ? config.kvDim : d;
  // The key/value projections' width: fewer heads with grouped queries.
  int64_t kvOut = d;
  if (config.numKvHeads != 0 || config.rotary) {
    checkPositive(config.numHeads, "MultiHeadAttention", "numHeads", loc);
    int64_t heads = config.numHeads, kvHeads = config.numKvHeads;
    if (d % heads != 0 || kvHeads < 0 ||
        (kvHeads > 0 && heads % kvHeads != 0)) {
      detail::fail(loc, fmt::format("MultiHeadAttention: 'numHeads' ({}) must "
                                    "divide 'dModel' ({}) and 'numKvHeads' "
                                    "({}) 'numHeads'",
                                    heads, d, kvHeads));
    }
    if (config.rotary && (d / heads) % 2 != 0) {
      detail::fail(loc, fmt::format("MultiHeadAttention: rotary positions "
                                    "need heads of even width, got {}",
                                    d / heads));
    }
    kvOut = d / heads * (kvHeads > 0 ? kvHeads : heads);
  }
  auto declare = [&](const char *proj, int64_t in, int64_t out, Var &w,
                     Var &b) {
    LinearConfig linear{in, out, config.bias, config.weightInit,
                        config.biasInit};
    Linear layer(graph, join(name, proj), linear, loc);
    w = layer.weight;
    b = layer.bias;
  };
  declare("w_q", d, d, weights.wq, weights.bq);
  declare("w_k", kv, kvOut, weights.wk, weights.bk);
  declare("w_v", kv, kvOut, weights.wv, weights.bv);
  declare("w_o", d, d, weights.wo, weights.bo);
}

/// The rotation of projected heads `x` at positions offset + t, or `x`
/// itself without rotary positions.
static Var rotated(const MultiHeadAttentionConfig &config, Var x, Var offset,
                   const SourceLoc &loc) {
  if (!config.rotary) {
    return x;
  }
  return rotary(x,
                {.headDim = config.dModel / config.numHeads,
                 .theta = config.rotary->theta,
                 .style = config.rotary->style,
                 .offset = offset},
                loc);
}

Var MultiHeadAttention::operator()(Var query, Var keyValue, AttentionMask mask,
                                   SourceLoc loc) const {
  AttentionOptions options;
  options.numHeads = config.numHeads;
  options.causal = mask.causal;
  options.keyPaddingMask = mask.keyPadding;
  options.dropout = config.dropout;
  if (config.numKvHeads == 0 && !config.rotary) {
    return multiHeadAttention(query, keyValue, weights, options, loc);
  }
  options.numKvHeads = config.numKvHeads;
  Var q = rotated(config, linear(query, weights.wq, weights.bq, loc), {}, loc);
  Var context = attention(q, keys(keyValue, {}, loc), values(keyValue, loc),
                          options, loc);
  return linear(context, weights.wo, weights.bo, loc);
}

Var MultiHeadAttention::keys(Var x, SourceLoc loc) const {
  return keys(x, {}, loc);
}

Var MultiHeadAttention::keys(Var x, Var offset, SourceLoc loc) const {
  return rotated(config, linear(x, weights.wk, weights.bk, loc), offset, loc);
}

Var MultiHeadAttention::values(Var x, SourceLoc loc) const {
  return linear(x, weights.wv, weights.bv, loc);
}

Var MultiHeadAttention::attendProjected(Var query, Var keys, Var values,
                                        AttentionMask mask,
                                        SourceLoc loc) const {
  AttentionOptions options;
  options.numHeads = config.numHeads;
  options.causal = mask.causal;
  options.keyPaddingMask = mask.keyPadding;
  options.offset = mask.offset;
  options.numKvHeads = config.numKvHeads;
  Var q = rotated(config, linear(query, weights.wq, weights.bq, loc),
                  mask.offset, loc);
  return linear(attention(q, keys, values, options, loc), weights.wo,
                weights.bo, loc);
}

FeedForward::FeedForward(Graph &graph, const std::string &name,
                         FeedForwardConfig config, SourceLoc loc)
    : config(config) {
  checkPositive(config.dModel, "FeedForward", "dModel", loc);
  checkPositive(config.dFF, "FeedForward", "dFF", loc);
  if (config.gated) {
    LinearConfig in{config.dModel, config.dFF, config.bias, config.weightInit,
                    config.biasInit};
    Linear gate(graph, join(name, "gate_proj"), in, loc);
    Linear upProj(graph, join(name, "up_proj"), in, loc);
    Linear down(graph, join(name, "down_proj"),
                {config.dFF, config.dModel, config.bias, config.weightInit,
                 config.biasInit},
                loc);
    weights = {gate.weight, down.weight, gate.bias, down.bias};
    up = upProj.weight;
    upBias = upProj.bias;
    return;
  }
  Linear first(graph, join(name, "linear_1"),
               {config.dModel, config.dFF, config.bias, config.weightInit,
                config.biasInit},
               loc);
  Linear second(graph, join(name, "linear_2"),
                {config.dFF, config.dModel, config.bias, config.weightInit,
                 config.biasInit},
                loc);
  weights = {first.weight, second.weight, first.bias, second.bias};
}

Var FeedForward::operator()(Var x, SourceLoc loc) const {
  if (config.gated) {
    Var gate = linear(x, weights.w1, weights.b1, loc);
    Var activated = activate(gate, config.activation, loc);
    Var hidden = mul(activated, linear(x, up, upBias, loc), loc);
    return linear(dropout(hidden, config.dropout, loc), weights.w2, weights.b2,
                  loc);
  }
  return feedForward(x, weights, {config.activation, config.dropout}, loc);
}

ResidualConnection::ResidualConnection(Graph &graph, const std::string &name,
                                       ResidualConfig config, SourceLoc loc)
    : config(config), norm(graph, join(name, "norm"), config.norm, loc) {}

Var ResidualConnection::operator()(Var x,
                                   const std::function<Var(Var)> &sublayer,
                                   SourceLoc loc) const {
  if (config.placement == NormPlacement::pre) {
    return add(x, dropout(sublayer(norm(x, loc)), config.dropout, loc), loc);
  }
  return norm(add(x, dropout(sublayer(x), config.dropout, loc), loc), loc);
}

//===----------------------------------------------------------------------===//
// Encoder, decoder, transformer
//===----------------------------------------------------------------------===//

static MultiHeadAttentionConfig attentionConfig(const BlockConfig &config) {
  return {.dModel = config.dModel,
          .numHeads = config.numHeads,
          .bias = config.attentionBias,
          .dropout = config.dropout,
          .weightInit = config.weightInit};
}

static FeedForwardConfig feedForwardConfig(const BlockConfig &config) {
  return {.dModel = config.dModel,
          .dFF = config.dFF,
          .activation = config.activation,
          .dropout = config.dropout,
          .bias = config.feedForwardBias,
          .weightInit = config.weightInit};
}

static std::vector<ResidualConnection>
makeResiduals(Graph &graph, const std::string &name, const BlockConfig &config,
              int count, const SourceLoc &loc) {
  std::vector<ResidualConnection> all;
  ResidualConfig residual{.norm = {config.dModel, config.eps, config.normMode},
                          .dropout = config.dropout,
                          .placement = config.placement};
  for (int i = 0; i < count; ++i) {
    all.emplace_back(graph,
                     join(name, "residual_connections." + std::to_string(i)),
                     residual, loc);
  }
  return all;
}

EncoderBlock::EncoderBlock(Graph &graph, const std::string &name,
                           const BlockConfig &config, SourceLoc loc)
    : config(config), selfAttention(graph, join(name, "self_attention_block"),
                                    attentionConfig(config), loc),
      feedForward(graph, join(name, "feed_forward_block"),
                  feedForwardConfig(config), loc),
      residuals(makeResiduals(graph, name, config, 2, loc)) {}

Var EncoderBlock::operator()(Var x, Var srcMask, SourceLoc loc) const {
  x = residuals[0](
      x, [&](Var h) { return selfAttention(h, h, {srcMask, false}, loc); },
      loc);
  return residuals[1](x, [&](Var h) { return feedForward(h, loc); }, loc);
}

/// The final norm of a pre-norm stack.
static std::optional<LayerNorm> finalNorm(Graph &graph, const std::string &name,
                                          const BlockConfig &config,
                                          const SourceLoc &loc) {
  if (config.placement != NormPlacement::pre) {
    return std::nullopt;
  }
  return LayerNorm(graph, join(name, "norm"),
                   {config.dModel, config.eps, config.normMode}, loc);
}

Encoder::Encoder(Graph &graph, const std::string &name,
                 const BlockConfig &config, int64_t numLayers, SourceLoc loc) {
  checkPositive(numLayers, "Encoder", "numLayers", loc);
  for (int64_t i = 0; i < numLayers; ++i) {
    layers.emplace_back(graph, join(name, "layers." + std::to_string(i)),
                        config, loc);
  }
  norm = finalNorm(graph, name, config, loc);
}

Var Encoder::operator()(Var x, Var srcMask, SourceLoc loc) const {
  for (const EncoderBlock &layer : layers) {
    x = layer(x, srcMask, loc);
  }
  return norm ? (*norm)(x, loc) : x;
}

DecoderBlock::DecoderBlock(Graph &graph, const std::string &name,
                           const BlockConfig &config, SourceLoc loc)
    : config(config), selfAttention(graph, join(name, "self_attention_block"),
                                    attentionConfig(config), loc),
      crossAttention(graph, join(name, "cross_attention_block"),
                     attentionConfig(config), loc),
      feedForward(graph, join(name, "feed_forward_block"),
                  feedForwardConfig(config), loc),
      residuals(makeResiduals(graph, name, config, 3, loc)) {}

Var DecoderBlock::operator()(Var x, Var memory, Var srcMask, Var tgtMask,
                             SourceLoc loc) const {
  x = residuals[0](
      x, [&](Var h) { return selfAttention(h, h, {tgtMask, true}, loc); }, loc);
  x = residuals[1](
      x,
      [&](Var h) { return crossAttention(h, memory, {srcMask, false}, loc); },
      loc);
  return residuals[2](x, [&](Var h) { return feedForward(h, loc); }, loc);
}

DecoderBlock::Step DecoderBlock::step(Var x, Var keyCache, Var valueCache,
                                      Var pos, Var crossKey, Var crossValue,
                                      Var srcMask, SourceLoc loc) const {
  Var key, value;
  x = residuals[0](
      x,
      [&](Var h) {
        key =
            updateSlice(keyCache, selfAttention.keys(h, pos, loc), pos, 1, loc);
        value =
            updateSlice(valueCache, selfAttention.values(h, loc), pos, 1, loc);
        return selfAttention.attendProjected(h, key, value, {{}, true, pos},
                                             loc);
      },
      loc);
  x = residuals[1](
      x,
      [&](Var h) {
        return crossAttention.attendProjected(h, crossKey, crossValue,
                                              {srcMask, false}, loc);
      },
      loc);
  return {residuals[2](
              x, [&](Var h) { return feedForward(h, loc); }, loc),
          key, value};
}

Decoder::Decoder(Graph &graph, const std::string &name,
                 const BlockConfig &config, int64_t numLayers, SourceLoc loc) {
  checkPositive(numLayers, "Decoder", "numLayers", loc);
  for (int64_t i = 0; i < numLayers; ++i) {
    layers.emplace_back(graph, join(name, "layers." + std::to_string(i)),
                        config, loc);
  }
  norm = finalNorm(graph, name, config, loc);
}

Var Decoder::operator()(Var x, Var memory, Var srcMask, Var tgtMask,
                        SourceLoc loc) const {
  for (const DecoderBlock &layer : layers) {
    x = layer(x, memory, srcMask, tgtMask, loc);
  }
  return norm ? (*norm)(x, loc) : x;
}

ProjectionLayer::ProjectionLayer(Graph &graph, const std::string &name,
                                 ProjectionConfig config, SourceLoc loc)
    : config(config), proj(graph, join(name, "proj"),
                           {config.dModel, config.vocabSize, config.bias,
                            config.weightInit, std::nullopt},
                           loc) {}

Var ProjectionLayer::operator()(Var x, SourceLoc loc) const {
  Var logits = proj(x, loc);
  return config.logSoftmax ? logSoftmax(logits, -1, loc) : logits;
}

/// The block configuration with seed 002's xavier initialization applied.
static BlockConfig blockConfig(const TransformerConfig &config) {
  BlockConfig block = config.block;
  if (config.xavierInit) {
    block.weightInit = Init::xavierUniform();
  }
  return block;
}

static EmbeddingConfig embeddingConfig(const TransformerConfig &config,
                                       int64_t vocab) {
  EmbeddingConfig embedding;
  embedding.numEmbeddings = vocab;
  embedding.dim = config.block.dModel;
  embedding.scaleBySqrtDim = config.scaleEmbeddings;
  if (config.xavierInit) {
    embedding.init = Init::xavierUniform();
  }
  return embedding;
}

static PositionalEncodingConfig peConfig(const TransformerConfig &config) {
  PositionalEncodingConfig pe;
  pe.kind = config.positional;
  pe.dim = config.block.dModel;
  pe.maxLen = config.maxLen;
  pe.dropout = config.block.dropout;
  if (config.xavierInit) {
    pe.init = Init::xavierUniform();
  }
  return pe;
}

/// Checks the options that only make sense together, before any parameter
/// is declared.
static const TransformerConfig &checked(const TransformerConfig &config,
                                        const SourceLoc &loc) {
  if (config.shareEmbeddings && config.srcVocab != config.tgtVocab) {
    fail(loc, "Transformer: shared embeddings need srcVocab (" +
                  std::to_string(config.srcVocab) + ") == tgtVocab (" +
                  std::to_string(config.tgtVocab) + ")");
  }
  return config;
}

static std::optional<Embedding> targetEmbedding(Graph &graph,
                                                const std::string &name,
                                                const TransformerConfig &config,
                                                const SourceLoc &loc) {
  if (config.shareEmbeddings) {
    return std::nullopt;
  }
  return Embedding(graph, join(name, "tgt_embed.embedding"),
                   embeddingConfig(config, config.tgtVocab), loc);
}

static std::optional<ProjectionLayer>
projectionLayer(Graph &graph, const std::string &name,
                const TransformerConfig &config, const SourceLoc &loc) {
  if (config.tiedProjection) {
    return std::nullopt;
  }
  ProjectionConfig projection;
  projection.dModel = config.block.dModel;
  projection.vocabSize = config.tgtVocab;
  projection.logSoftmax = config.logSoftmax;
  if (config.xavierInit) {
    projection.weightInit = Init::xavierUniform();
  }
  return ProjectionLayer(graph, join(name, "projection_layer"), projection,
                         loc);
}

Transformer::Transformer(Graph &graph, const std::string &name,
                         TransformerConfig config, SourceLoc loc)
    : config(checked(config, loc)),
      srcEmbed(graph, join(name, "src_embed.embedding"),
               embeddingConfig(config, config.srcVocab), loc),
      tgtEmbed(targetEmbedding(graph, name, config, loc)),
      srcPos(graph, join(name, "src_pos"), peConfig(config), loc),
      tgtPos(graph, join(name, "tgt_pos"), peConfig(config), loc),
      encoder(graph, join(name, "encoder"), blockConfig(config),
              config.numEncoderLayers, loc),
      decoder(graph, join(name, "decoder"), blockConfig(config),
              config.numDecoderLayers, loc),
      projection(projectionLayer(graph, name, config, loc)) {}

Var Transformer::encode(Var src, Var srcMask, SourceLoc loc) const {
  return encoder(srcPos(srcEmbed(src, loc), {}, loc), srcMask, loc);
}

Var Transformer::embedTarget(Var tgt, Var offset, SourceLoc loc) const {
  const Embedding &embed = tgtEmbed ? *tgtEmbed : srcEmbed;
  return tgtPos(embed(tgt, loc), offset, loc);
}

Var Transformer::decode(Var memory, Var srcMask, Var tgt, Var tgtMask,
                        SourceLoc loc) const {
  return decoder(embedTarget(tgt, {}, loc), memory, srcMask, tgtMask, loc);
}

Var Transformer::project(Var y, SourceLoc loc) const {
  if (projection) {
    return (*projection)(y, loc);
  }
  const Embedding &embed = tgtEmbed ? *tgtEmbed : srcEmbed;
  Var logits = linear(y, embed.weight, {}, loc);
  return config.logSoftmax ? logSoftmax(logits, -1, loc) : logits;
}

} // namespace kiln::dsl::nn
