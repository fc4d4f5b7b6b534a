//===- NN.h - PyTorch-style modules of the model DSL -------------*- C++
//-*-===//
//
// Modules in the manner of torch.nn: constructing one declares its parameters
// in a graph (named "<name>.<child>...", the names of the PyTorch
// implementation of seed document 002, so that state dicts map one to one);
// calling it adds the ops. Calling a module twice reuses its parameters. A
// model written once as a function of a Graph builds every entry point
// ("forward", "loss") and both modes (training, evaluation).
//
// Errors name the caller's line: the constructor's for parameter clashes,
// the call's for shape errors.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_DSL_NN_H
#define KILN_COMPILER_DSL_NN_H

#include "compiler/DSL/Graph.h"
#include "compiler/DSL/Ops.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kiln::dsl::nn {

/// PyTorch's default initialization of nn.Linear (weight and bias):
/// U(−1/√in, 1/√in).
Init linearDefaultInit(int64_t inFeatures);

/// "a.b" from "a" and "b"; either may be empty.
std::string join(const std::string &prefix, const std::string &name);

//===----------------------------------------------------------------------===//
// Linear, Embedding, PositionalEncoding, LayerNorm
//===----------------------------------------------------------------------===//

struct LinearConfig {
  int64_t inFeatures = 0;
  int64_t outFeatures = 0;
  bool bias = true;
  /// Unset: PyTorch's default (linearDefaultInit).
  std::optional<Init> weightInit = std::nullopt;
  std::optional<Init> biasInit = std::nullopt;
};

/// torch.nn.Linear: "weight" [out, in], "bias" [out].
struct Linear {
  Linear(Graph &graph, const std::string &name, LinearConfig config,
         SourceLoc loc = SourceLoc::current());
  Var operator()(Var x, SourceLoc loc = SourceLoc::current()) const;

  LinearConfig config;
  Var weight, bias;
};

struct EmbeddingConfig {
  int64_t numEmbeddings = 0;
  int64_t dim = 0;
  /// A row that reads normally and receives no gradient.
  std::optional<int64_t> paddingIdx = std::nullopt;
  /// Multiply the result by √dim (seed 002's InputEmbeddings).
  bool scaleBySqrtDim = false;
  /// nn.Embedding's default N(0, 1).
  Init init = Init::normal(0.0, 1.0);
};

/// torch.nn.Embedding: "weight" [numEmbeddings, dim]; ids [...] -> [..., dim].
struct Embedding {
  Embedding(Graph &graph, const std::string &name, EmbeddingConfig config,
            SourceLoc loc = SourceLoc::current());
  Var operator()(Var ids, SourceLoc loc = SourceLoc::current()) const;

  EmbeddingConfig config;
  Var weight;
};

enum class PEKind { sinusoidal, learned };

struct PositionalEncodingConfig {
  PEKind kind = PEKind::sinusoidal;
  int64_t dim = 0;
  /// The learned table's length (learned only).
  int64_t maxLen = 0;
  /// Dropout after the addition (seed 002).
  double dropout = 0.0;
  /// Of the learned table.
  Init init = Init::normal(0.0, 1.0);
};

/// x + PE[offset : offset + T] for x [..., T, dim]: the fixed sin/cos
/// encoding (no parameters) or a learned table "weight" [maxLen, dim].
struct PositionalEncoding {
  PositionalEncoding(Graph &graph, const std::string &name,
                     PositionalEncodingConfig config,
                     SourceLoc loc = SourceLoc::current());
  Var operator()(Var x, Var offset = {},
                 SourceLoc loc = SourceLoc::current()) const;

  PositionalEncodingConfig config;
  Var table; // Learned only.
};

struct LayerNormConfig {
  int64_t dim = 0;
  double eps = 1e-5;
  NormMode mode = NormMode::standard;
};

/// Layer normalization over the last dimension. Parameters: "weight" and
/// "bias" (torch.nn.LayerNorm) in standard mode, "alpha" and "bias" (seed
/// 002's LayerNormalization) in stdEps mode; initialized to 1 and 0.
struct LayerNorm {
  LayerNorm(Graph &graph, const std::string &name, LayerNormConfig config,
            SourceLoc loc = SourceLoc::current());
  Var operator()(Var x, SourceLoc loc = SourceLoc::current()) const;

  LayerNormConfig config;
  Var gamma, beta;
};

struct RMSNormConfig {
  int64_t dim = 0;
  double eps = 1e-6;
};

/// RMS normalization over the last dimension (Hugging Face's LlamaRMSNorm,
/// torch.nn.RMSNorm): "weight" [dim], initialized to 1.
struct RMSNorm {
  RMSNorm(Graph &graph, const std::string &name, RMSNormConfig config,
          SourceLoc loc = SourceLoc::current());
  Var operator()(Var x, SourceLoc loc = SourceLoc::current()) const;

  RMSNormConfig config;
  Var weight;
};

//===----------------------------------------------------------------------===//
// Attention, feed-forward, residual
//===----------------------------------------------------------------------===//

/// Rotary position embeddings of attention's projected queries and keys.
struct RotaryConfig {
  double theta = 10000.0;
  RotaryStyle style = RotaryStyle::half;
};

struct MultiHeadAttentionConfig {
  int64_t dModel = 0;
  int64_t numHeads = 0;
  /// Width of the key/value input; 0 means dModel.
  int64_t kvDim = 0;
  /// Grouped-query attention: this many key/value heads (dividing numHeads;
  /// "w_k" and "w_v" then project to numKvHeads·dModel/numHeads); 0 for
  /// numHeads.
  int64_t numKvHeads = 0;
  /// Rotate the projected queries and keys by their positions (Llama's
  /// attention; heads of even width).
  std::optional<RotaryConfig> rotary = std::nullopt;
  bool bias = true;
  /// Dropout on the attention probabilities.
  double dropout = 0.0;
  std::optional<Init> weightInit = std::nullopt;
  std::optional<Init> biasInit = std::nullopt;
};

/// Which keys a query may see.
struct AttentionMask {
  /// [B, Tk] i1/i32/i64, non-zero = attend.
  Var keyPadding = {};
  bool causal = false;
  /// Causal only: an i64 scalar, the position of the first query among keys
  /// of static length (a cache of fixed capacity filled up to offset + Tq);
  /// see AttentionOptions::offset.
  Var offset = {};
};

/// Multi-head attention with PyTorch-layout projections "w_q", "w_k", "w_v",
/// "w_o" (each ".weight" [out, in] and, with biases, ".bias"): one kiln.mha,
/// or with grouped-query heads or rotary positions the projections, the
/// rotations and one kiln.attention.
struct MultiHeadAttention {
  MultiHeadAttention(Graph &graph, const std::string &name,
                     MultiHeadAttentionConfig config,
                     SourceLoc loc = SourceLoc::current());
  /// Self-attention: keyValue = query; cross-attention: the encoder output.
  Var operator()(Var query, Var keyValue, AttentionMask mask = {},
                 SourceLoc loc = SourceLoc::current()) const;

  /// For incremental decoding (evaluation mode): the projected keys and
  /// values of `x` [B, T, Dkv], to cache (with rotary positions, the keys
  /// rotated at positions offset + t: `offset` an i64 scalar or none for 0)
  /// ...
  Var keys(Var x, SourceLoc loc = SourceLoc::current()) const;
  Var keys(Var x, Var offset, SourceLoc loc = SourceLoc::current()) const;
  Var values(Var x, SourceLoc loc = SourceLoc::current()) const;
  /// ... and attention of `query` over already projected (cached) `keys` and
  /// `values` [B, Tk, D], equal to operator() over their inputs (with
  /// rotary positions, the queries are at mask.offset + t).
  Var attendProjected(Var query, Var keys, Var values, AttentionMask mask = {},
                      SourceLoc loc = SourceLoc::current()) const;

  MultiHeadAttentionConfig config;
  AttentionWeights weights;
};

struct FeedForwardConfig {
  int64_t dModel = 0;
  int64_t dFF = 0;
  Activation activation = Activation::relu;
  /// A gated block (SwiGLU with Activation::silu, Llama's MLP):
  /// down_proj(act(gate_proj(x)) · up_proj(x)) with Hugging Face's names
  /// "gate_proj", "up_proj" [dFF, dModel] and "down_proj" [dModel, dFF].
  bool gated = false;
  /// Between the activation and the second projection.
  double dropout = 0.0;
  bool bias = true;
  std::optional<Init> weightInit = std::nullopt;
  std::optional<Init> biasInit = std::nullopt;
};

/// linear_2(dropout(act(linear_1(x)))) as one kiln.ffn: "linear_1" [dFF,
/// dModel], "linear_2" [dModel, dFF] (seed 002's FeedForwardBlock); gated
/// (config.gated): see FeedForwardConfig.
struct FeedForward {
  FeedForward(Graph &graph, const std::string &name, FeedForwardConfig config,
              SourceLoc loc = SourceLoc::current());
  Var operator()(Var x, SourceLoc loc = SourceLoc::current()) const;

  FeedForwardConfig config;
  /// Ungated: w1, w2 (and biases). Gated: w1 = gate_proj, w2 = down_proj.
  FeedForwardWeights weights;
  /// Gated only: up_proj's weight and bias.
  Var up{}, upBias{};
};

/// Where a residual block normalizes.
enum class NormPlacement {
  /// x + dropout(sublayer(norm(x))): seed 002, GPT-2.
  pre,
  /// norm(x + dropout(sublayer(x))): "Attention is all you need" and the
  /// BENCHMARKS.md encoder-decoder.
  post,
};

struct ResidualConfig {
  LayerNormConfig norm = {};
  double dropout = 0.0;
  NormPlacement placement = NormPlacement::pre;
};

/// Seed 002's ResidualConnection around a sublayer, with its "norm".
struct ResidualConnection {
  ResidualConnection(Graph &graph, const std::string &name,
                     ResidualConfig config,
                     SourceLoc loc = SourceLoc::current());
  Var operator()(Var x, const std::function<Var(Var)> &sublayer,
                 SourceLoc loc = SourceLoc::current()) const;

  ResidualConfig config;
  LayerNorm norm;
};

//===----------------------------------------------------------------------===//
// Encoder, decoder, transformer
//===----------------------------------------------------------------------===//

/// The shape of one encoder or decoder layer.
struct BlockConfig {
  int64_t dModel = 512;
  int64_t numHeads = 8;
  int64_t dFF = 2048;
  /// Attention, feed-forward and residual dropout.
  double dropout = 0.1;
  Activation activation = Activation::relu;
  NormPlacement placement = NormPlacement::pre;
  NormMode normMode = NormMode::standard;
  double eps = 1e-5;
  bool attentionBias = true;
  bool feedForwardBias = true;
  /// Every 2-D weight; unset: PyTorch's defaults.
  std::optional<Init> weightInit = std::nullopt;
};

/// Self-attention then feed-forward, each in a ResidualConnection:
/// "self_attention_block", "feed_forward_block", "residual_connections.{0,1}".
struct EncoderBlock {
  EncoderBlock(Graph &graph, const std::string &name, const BlockConfig &config,
               SourceLoc loc = SourceLoc::current());
  /// `srcMask`: optional [B, S] key-padding mask.
  Var operator()(Var x, Var srcMask = {},
                 SourceLoc loc = SourceLoc::current()) const;

  BlockConfig config;
  MultiHeadAttention selfAttention;
  FeedForward feedForward;
  std::vector<ResidualConnection> residuals;
};

/// "layers.{i}" and, for pre-norm blocks, the final "norm" (a post-norm stack
/// ends normalized already and has none).
struct Encoder {
  Encoder(Graph &graph, const std::string &name, const BlockConfig &config,
          int64_t numLayers, SourceLoc loc = SourceLoc::current());
  Var operator()(Var x, Var srcMask = {},
                 SourceLoc loc = SourceLoc::current()) const;

  std::vector<EncoderBlock> layers;
  std::optional<LayerNorm> norm;
};

/// Causal self-attention, cross-attention over the encoder output, then
/// feed-forward, each in a ResidualConnection: "self_attention_block",
/// "cross_attention_block", "feed_forward_block",
/// "residual_connections.{0,1,2}".
struct DecoderBlock {
  DecoderBlock(Graph &graph, const std::string &name, const BlockConfig &config,
               SourceLoc loc = SourceLoc::current());
  /// `srcMask` [B, S] masks padded encoder positions; `tgtMask` [B, T]
  /// optionally masks padded target keys on top of the causal mask.
  Var operator()(Var x, Var memory, Var srcMask = {}, Var tgtMask = {},
                 SourceLoc loc = SourceLoc::current()) const;

  /// Incremental decoding (evaluation mode): `x` [B, n, D] are the target
  /// positions pos .. pos + n - 1, `keyCache`/`valueCache` [B, capacity, D]
  /// (static capacity) hold the self-attention keys and values of the
  /// positions before them, `crossKey`/`crossValue` [B, S, D] the projected
  /// memory (crossAttention.keys/values). The new positions' keys and values
  /// are written into the caches at `pos` (updateSlice) and self-attention
  /// reads positions [0, pos + n) of them. Returns the output and the
  /// updated caches.
  struct Step {
    Var x, key, value;
  };
  Step step(Var x, Var keyCache, Var valueCache, Var pos, Var crossKey,
            Var crossValue, Var srcMask = {},
            SourceLoc loc = SourceLoc::current()) const;

  BlockConfig config;
  MultiHeadAttention selfAttention;
  MultiHeadAttention crossAttention;
  FeedForward feedForward;
  std::vector<ResidualConnection> residuals;
};

/// "layers.{i}" and, for pre-norm blocks, the final "norm".
struct Decoder {
  Decoder(Graph &graph, const std::string &name, const BlockConfig &config,
          int64_t numLayers, SourceLoc loc = SourceLoc::current());
  Var operator()(Var x, Var memory, Var srcMask = {}, Var tgtMask = {},
                 SourceLoc loc = SourceLoc::current()) const;

  std::vector<DecoderBlock> layers;
  std::optional<LayerNorm> norm;
};

struct ProjectionConfig {
  int64_t dModel = 0;
  int64_t vocabSize = 0;
  bool bias = true;
  /// Return log_softmax(logits) (seed 002's ProjectionLayer) or the logits.
  bool logSoftmax = true;
  std::optional<Init> weightInit = std::nullopt;
};

/// Seed 002's ProjectionLayer: "proj" Linear(dModel, vocabSize).
struct ProjectionLayer {
  ProjectionLayer(Graph &graph, const std::string &name,
                  ProjectionConfig config,
                  SourceLoc loc = SourceLoc::current());
  Var operator()(Var x, SourceLoc loc = SourceLoc::current()) const;

  ProjectionConfig config;
  Linear proj;
};

struct TransformerConfig {
  int64_t srcVocab = 0;
  int64_t tgtVocab = 0;
  int64_t numEncoderLayers = 6;
  int64_t numDecoderLayers = 6;
  BlockConfig block = {};
  PEKind positional = PEKind::sinusoidal;
  /// Learned positional encodings only.
  int64_t maxLen = 0;
  /// Embeddings times √dModel.
  bool scaleEmbeddings = true;
  /// One table "src_embed.embedding.weight" for source and target (needs
  /// srcVocab == tgtVocab).
  bool shareEmbeddings = false;
  /// Logits = y·tableᵀ with the target embedding table, no bias, instead of
  /// a "projection_layer".
  bool tiedProjection = false;
  /// project() returns log-probabilities (seed 002) rather than logits.
  bool logSoftmax = true;
  /// Xavier-uniform on every 2-D weight, embeddings included (seed 002's
  /// build_transformer); biases keep PyTorch's default.
  bool xavierInit = true;
  /// The forward and loss graphs (models::addEncDecForward/addEncDecLoss)
  /// take a "tgt_mask" input [B, T] (i1, true at real tokens) besides
  /// "src_mask": decoder self-attention then ignores padded target
  /// positions as well as later ones, as seed 002's decode(..., tgt_mask).
  bool targetMask = false;
};

/// Seed 002's Transformer (build_transformer): "src_embed", "tgt_embed",
/// "src_pos", "tgt_pos", "encoder", "decoder", "projection_layer".
struct Transformer {
  Transformer(Graph &graph, const std::string &name, TransformerConfig config,
              SourceLoc loc = SourceLoc::current());

  /// Source ids [B, S] (and an optional [B, S] mask) -> memory [B, S, D].
  Var encode(Var src, Var srcMask = {},
             SourceLoc loc = SourceLoc::current()) const;
  /// Target ids [B, T] -> decoder states [B, T, D] (causal).
  Var decode(Var memory, Var srcMask, Var tgt, Var tgtMask = {},
             SourceLoc loc = SourceLoc::current()) const;
  /// The embedded and position-encoded target ids [B, n] at positions
  /// offset.. (offset: an i64 scalar Var, or none for 0).
  Var embedTarget(Var tgt, Var offset = {},
                  SourceLoc loc = SourceLoc::current()) const;
  /// Decoder states -> [B, T, tgtVocab] logits or log-probabilities.
  Var project(Var y, SourceLoc loc = SourceLoc::current()) const;

  TransformerConfig config;
  Embedding srcEmbed;
  std::optional<Embedding> tgtEmbed; // Unset when shared.
  PositionalEncoding srcPos, tgtPos;
  Encoder encoder;
  Decoder decoder;
  std::optional<ProjectionLayer> projection; // Unset when tied.
};

} // namespace kiln::dsl::nn

#endif // KILN_COMPILER_DSL_NN_H
