//===- Models.h - The reference models, written in the DSL -------*- C++
//-*-===//
//
// Ready-made builders for the models of docs/BENCHMARKS.md and the seed
// documents: the GPT-2 style decoder (gpt-tiny, gpt-small), the Llama
// architecture's decoder, BERT's embeddings
// (seed 003) and the encoder-decoder Transformer ("Attention is all you
// need", post-LN, as benchmarked; seed 002's pre-LN variant as a preset).
// Every entry point takes dynamic batch and sequence sizes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_DSL_MODELS_H
#define KILN_COMPILER_DSL_MODELS_H

#include "compiler/DSL/NN.h"
#include "runtime/Generate.h"
#include "runtime/StateDict.h"

namespace kiln::dsl::models {

//===----------------------------------------------------------------------===//
// GPT-2 style decoder
//===----------------------------------------------------------------------===//

struct GptConfig {
  int64_t vocabSize = 0;
  int64_t dModel = 0;
  int64_t numHeads = 0;
  int64_t numLayers = 0;
  int64_t dFF = 0;
  /// The learned position table's length (the longest sequence).
  int64_t maxSeqLen = 0;
  double layerNormEps = 1e-5;
  /// The feed-forward activation (BENCHMARKS.md: exact, erf GELU).
  Activation activation = Activation::gelu;
  /// Embedding, attention and residual dropout (nanoGPT's places); the
  /// benchmarks use none.
  double dropout = 0.0;
  /// N(0, initStd) for Linear weights and both embeddings.
  double initStd = 0.02;
  /// The dtype of the activations between the embeddings and the logits:
  /// f32, or bf16 (half the bytes; every op still computes in f32). The
  /// parameters stay f32 (the ops with weights cast them), the logits and
  /// the loss are f32. Decoding graphs (addGptDecode) keep f32.
  DType activations = DType::f32;
};

/// gpt-tiny: V 65, d 128, H 4, L 4, d_ff 512, T 128 (818,048 parameters).
GptConfig gptTiny();
/// gpt-small: V 4096, d 384, H 6, L 6, d_ff 1536, T 256 (12,318,720).
GptConfig gptSmall();
/// GPT-2's smallest model (124M): V 50257, d 768, H 12, L 12, d_ff 3072,
/// T 1024, GELU's tanh form (124,439,808 parameters).
GptConfig gpt2();

/// One pre-LN block "h.{i}": x += c_proj(causalMHA(ln_1(x))) with the fused
/// QKV projection "attn.c_attn" [3d, d] sliced into q|k|v; x +=
/// mlp.c_proj(GELU(mlp.c_fc(ln_2(x)))) as one kiln.ffn.
struct GptBlock {
  GptBlock(Graph &graph, const std::string &name, const GptConfig &config,
           SourceLoc loc = SourceLoc::current());
  Var operator()(Var x, SourceLoc loc = SourceLoc::current()) const;

  /// The block for incremental decoding (evaluation mode): `x` [B, n, d] are
  /// positions pos .. pos + n - 1, `keyCache`/`valueCache` [B, maxSeqLen, d]
  /// hold the projected keys and values of the positions before them. The
  /// new positions' keys and values are written into the caches at `pos`
  /// (updateSlice), and attention reads positions [0, pos + n) of them.
  /// Returns the block's output and the updated caches.
  struct Step {
    Var x, key, value;
  };
  Step step(Var x, Var keyCache, Var valueCache, Var pos,
            SourceLoc loc = SourceLoc::current()) const;

  GptConfig config;
  nn::LayerNorm ln1;
  nn::Linear qkv, proj;
  nn::LayerNorm ln2;
  nn::Linear fc, fcProj;
};

/// The decoder (nanoGPT's names without "transformer."): "wte", "wpe",
/// "h.{i}", "ln_f"; logits = ln_f(x)·wteᵀ (tied head, no bias).
struct Gpt {
  Gpt(Graph &graph, const GptConfig &config,
      SourceLoc loc = SourceLoc::current());
  /// Token ids [B, T] (i32/i64) -> logits [B, T, V].
  Var operator()(Var idx, SourceLoc loc = SourceLoc::current()) const;

  GptConfig config;
  nn::Embedding wte;
  nn::PositionalEncoding wpe;
  std::vector<GptBlock> h;
  nn::LayerNorm lnF;
};

/// Adds graph `name`: input "idx" [?, ?] i64 -> logits [?, ?, V].
Graph &addGptForward(Module &module, const GptConfig &config,
                     GraphOptions options = {}, std::string name = "forward",
                     SourceLoc loc = SourceLoc::current());
/// Adds graph `name` for decoding with a key/value cache: inputs "idx" [?, ?]
/// i64 (the next positions), "pos" (i64 scalar: how many positions precede
/// them) and per layer i "past.{i}.key", "past.{i}.value" [?, maxSeqLen, d]
/// (caches of fixed capacity whose positions [0, pos) are filled; zeros at
/// the start) -> the logits of the last position [?, V], then per layer the
/// caches with the new positions written at pos (key 0, value 0, key 1,
/// ...): these outputs replace their inputs in place (kiln.updates), so CPU
/// code writes the new keys and values into the caller's tensors and
/// copies nothing else. Only the new positions are computed; attention
/// reads the cached positions [0, pos + n). The call checks pos + n <=
/// maxSeqLen.
Graph &addGptDecode(Module &module, const GptConfig &config,
                    std::string name = "decode",
                    SourceLoc loc = SourceLoc::current());
/// Adds graph `name`: inputs "idx", "targets" [?, ?] i64 -> the mean
/// cross-entropy over all positions (rank 0).
Graph &addGptLoss(Module &module, const GptConfig &config,
                  GraphOptions options = {}, std::string name = "loss",
                  SourceLoc loc = SourceLoc::current());

//===----------------------------------------------------------------------===//
// Llama-architecture decoder
//===----------------------------------------------------------------------===//

/// The Llama family's decoder (Llama 2 and 3, Mistral without sliding
/// windows, SmolLM, TinyLlama): pre-RMSNorm blocks, rotary positions,
/// grouped-query attention, a SwiGLU feed-forward block, no biases.
struct LlamaConfig {
  int64_t vocabSize = 0;
  /// hidden_size.
  int64_t dModel = 0;
  int64_t numLayers = 0;
  int64_t numHeads = 0;
  /// num_key_value_heads (dividing numHeads); 0 for numHeads.
  int64_t numKvHeads = 0;
  /// intermediate_size.
  int64_t dFF = 0;
  /// max_position_embeddings: the decode caches' capacity.
  int64_t maxSeqLen = 0;
  double rmsNormEps = 1e-6;
  double ropeTheta = 10000.0;
  /// tie_word_embeddings: logits = norm(x)·embed_tokensᵀ, no "lm_head".
  bool tiedHead = false;
  /// N(0, initStd) for every 2-D weight (Hugging Face's initializer_range).
  double initStd = 0.02;

  int64_t kvHeads() const { return numKvHeads > 0 ? numKvHeads : numHeads; }
  int64_t headDim() const { return numHeads > 0 ? dModel / numHeads : 0; }
  /// The width of the keys and values (and of each decode cache).
  int64_t kvDim() const { return kvHeads() * headDim(); }
};

/// A small configuration for tests and the example: V 65, d 64, 2 layers,
/// 4 query heads over 2 key/value heads of 16, d_ff 176, T 128.
LlamaConfig llamaTiny();
/// gpt-small's sizes as a Llama (kiln-bench's llama-small): V 4096, d 384,
/// 6 layers, 6 query heads over 2 key/value heads of 64, d_ff 1024, T 256.
LlamaConfig llamaSmall();

/// One block "model.layers.{i}" with Hugging Face's names:
/// x += o_proj(attention(rope(q_proj(h)), rope(k_proj(h)), v_proj(h))),
/// h = input_layernorm(x); x += mlp(post_attention_layernorm(x)) with
/// mlp.{gate,up,down}_proj (SwiGLU).
struct LlamaBlock {
  LlamaBlock(Graph &graph, const std::string &name, const LlamaConfig &config,
             SourceLoc loc = SourceLoc::current());
  Var operator()(Var x, SourceLoc loc = SourceLoc::current()) const;

  /// Incremental decoding, as GptBlock::step: `x` [B, n, d] are positions
  /// pos .. pos + n - 1; the caches [B, maxSeqLen, kvDim] hold the rotated
  /// keys and the values of the positions before them.
  GptBlock::Step step(Var x, Var keyCache, Var valueCache, Var pos,
                      SourceLoc loc = SourceLoc::current()) const;

  LlamaConfig config;
  nn::RMSNorm inputNorm;
  nn::Linear q, k, v, o;
  nn::RMSNorm postNorm;
  nn::FeedForward mlp;

private:
  Var attend(Var h, Var keys, Var values, Var pos, const SourceLoc &loc) const;
};

/// The decoder: "model.embed_tokens", "model.layers.{i}", "model.norm",
/// "lm_head" (absent with a tied head).
struct Llama {
  Llama(Graph &graph, const LlamaConfig &config,
        SourceLoc loc = SourceLoc::current());
  /// Token ids [B, T] (i32/i64) -> logits [B, T, V].
  Var operator()(Var idx, SourceLoc loc = SourceLoc::current()) const;
  /// The logits of hidden states [..., d].
  Var head(Var x, SourceLoc loc = SourceLoc::current()) const;

  LlamaConfig config;
  nn::Embedding embed;
  std::vector<LlamaBlock> layers;
  nn::RMSNorm norm;
  std::optional<nn::Linear> lmHead;
};

/// As addGptForward: input "idx" [?, ?] i64 -> logits [?, ?, V].
Graph &addLlamaForward(Module &module, const LlamaConfig &config,
                       GraphOptions options = {}, std::string name = "forward",
                       SourceLoc loc = SourceLoc::current());
/// As addGptLoss: inputs "idx", "targets" -> the mean cross-entropy.
Graph &addLlamaLoss(Module &module, const LlamaConfig &config,
                    GraphOptions options = {}, std::string name = "loss",
                    SourceLoc loc = SourceLoc::current());
/// As addGptDecode, with caches "past.{i}.key"/"past.{i}.value"
/// [?, maxSeqLen, kvDim] that hold only the key/value heads (the keys
/// rotated at their positions).
Graph &addLlamaDecode(Module &module, const LlamaConfig &config,
                      std::string name = "decode",
                      SourceLoc loc = SourceLoc::current());

/// Reads a Hugging Face Llama checkpoint's config.json (untrusted: a regular
/// file of at most 1 MiB, no duplicate keys) into a LlamaConfig: vocab_size,
/// hidden_size, num_hidden_layers, num_attention_heads, intermediate_size
/// (required), num_key_value_heads, max_position_embeddings (default 2048),
/// rms_norm_eps, rope_theta, tie_word_embeddings, initializer_range,
/// head_dim (must be hidden_size / num_attention_heads), and transformers
/// 5's rope_parameters (the default rotation's rope_theta). What Kiln does
/// not implement is refused by name before anything else happens
/// (model_type other than "llama", hidden_act other than "silu"/"swish",
/// rope_scaling, rope_parameters of another rope_type, attention_bias or
/// mlp_bias true, pretraining_tp other than 1, a non-zero
/// attention_dropout), as are missing or mistyped fields, sizes that do not
/// fit the architecture or pass bounds far beyond any published model
/// (4,096 layers and heads, widths of 2^17, feed-forward blocks of 2^20,
/// vocabularies of 2^24) and a rope_theta below 1; each problem names the
/// file. `notes`, when
/// given, receives one line per field Kiln ignores that is not known to be
/// harmless, and a note when the checkpoint's weights are stored as
/// bfloat16 or float16 (they are widened to f32 on load).
LlamaConfig readLlamaConfig(const std::string &path,
                            std::vector<std::string> *notes = nullptr);

/// Writes `config` as a Hugging Face config.json (LlamaForCausalLM, float32
/// weights) at `path`, atomically (saveFileAtomically): readLlamaConfig
/// reads it back to `config` (initStd as initializer_range).
void saveLlamaConfig(const std::string &path, const LlamaConfig &config);

/// How a Hugging Face Llama state dict (model.safetensors, or a sharded
/// checkpoint's model.safetensors.index.json) becomes the parameters of the
/// Llama model built from `config`: the names are the same; the rotary
/// inv_freq buffers older checkpoints store are ignored, and with a tied
/// head so is an "lm_head.weight" the file may hold. With loadParameters:
///   loadParameters(dir + "/model.safetensors", model.parameters(),
///                  llamaStateDictMapping(config));
StateDictMapping llamaStateDictMapping(const LlamaConfig &config);

//===----------------------------------------------------------------------===//
// BERT embeddings (seed 003)
//===----------------------------------------------------------------------===//

struct BertEmbeddingsConfig {
  int64_t vocabSize = 30522;
  int64_t hiddenSize = 768;
  int64_t maxPositionEmbeddings = 512;
  int64_t typeVocabSize = 2;
  /// The [PAD] id: its word embedding gets no gradient.
  int64_t padTokenId = 0;
  double layerNormEps = 1e-12;
  double hiddenDropout = 0.1;
  /// N(0, initStd) for the three tables (Hugging Face's initialization).
  double initStd = 0.02;
};

/// The settings of seed 003's notebook: vocab 120, hidden 16, 50
/// positions, 2 token types, no dropout.
BertEmbeddingsConfig bertSeedEmbeddings();

/// LayerNorm(word[ids] + position[0:T] + token_type[types]) then dropout,
/// with seed 003's names "word_embeddings", "position_embeddings",
/// "token_type_embeddings", "LayerNorm".
struct BertEmbeddings {
  BertEmbeddings(Graph &graph, const std::string &name,
                 const BertEmbeddingsConfig &config,
                 SourceLoc loc = SourceLoc::current());
  /// ids [B, T] (i32/i64); without token types every token is type 0.
  Var operator()(Var inputIds, Var tokenTypeIds = {},
                 SourceLoc loc = SourceLoc::current()) const;

  BertEmbeddingsConfig config;
  nn::Embedding wordEmbeddings;
  nn::PositionalEncoding positionEmbeddings;
  nn::Embedding tokenTypeEmbeddings;
  nn::LayerNorm layerNorm;
};

/// Adds graph `name`: inputs "input_ids", "token_type_ids" [?, ?] i64 ->
/// [?, ?, hidden].
Graph &addBertEmbeddingsForward(Module &module,
                                const BertEmbeddingsConfig &config,
                                GraphOptions options = {},
                                std::string name = "forward",
                                SourceLoc loc = SourceLoc::current());

//===----------------------------------------------------------------------===//
// Encoder-decoder Transformer
//===----------------------------------------------------------------------===//

/// BENCHMARKS.md's "Attention is all you need" base model: post-LN, V 8000,
/// d 512, H 8, d_ff 2048, 6 + 6 layers, ReLU, one shared embedding scaled by
/// √d plus sinusoidal PE, logits = y·embᵀ, xavier-uniform 2-D weights, no
/// dropout (48,234,496 parameters).
nn::TransformerConfig encdecBase();
/// The same architecture, small enough for tests: V 97, d 32, H 4,
/// d_ff 64, 2 + 2 layers.
nn::TransformerConfig encdecTiny();
/// Seed 002's build_transformer: pre-LN with its std_eps LayerNormalization
/// (eps 1e-6) and final norms, separate source and target embeddings,
/// attention without biases, dropout 0.1, a ProjectionLayer with
/// log_softmax.
nn::TransformerConfig seed002Transformer(int64_t srcVocab, int64_t tgtVocab);

/// Adds graph `name`: inputs "src" [?, ?] i64, "tgt" [?, ?] i64 and
/// "src_mask" [?, ?] i1 (non-zero = a real token) -> [?, ?, tgtVocab]
/// logits (log-probabilities when config.logSoftmax). Target padding needs
/// no mask: with the causal mask a real token never sees a later pad.
Graph &addEncDecForward(Module &module, const nn::TransformerConfig &config,
                        GraphOptions options = {}, std::string name = "forward",
                        SourceLoc loc = SourceLoc::current());
/// Adds graph `name`: the forward inputs plus "targets" [?, ?] i64 -> the mean
/// cross-entropy (NLL of the log-probabilities when config.logSoftmax), with
/// `loss`'s ignore_index (padding) and label smoothing.
Graph &addEncDecLoss(Module &module, const nn::TransformerConfig &config,
                     GraphOptions options = {}, std::string name = "loss",
                     LossOptions loss = {},
                     SourceLoc loc = SourceLoc::current());

/// Cached decoding, graph 1 of 2: inputs "src" [?, ?] i64 and "src_mask"
/// [?, ?] i1 -> per decoder layer i the projected cross-attention keys and
/// values of the encoder output [?, S, d] (key 0, value 0, key 1, ...),
/// computed once per source sentence.
Graph &addEncDecEncode(Module &module, const nn::TransformerConfig &config,
                       std::string name = "encode",
                       SourceLoc loc = SourceLoc::current());
/// Graph 2 of 2: inputs "tgt" [?, ?] i64 (the next target positions), "pos"
/// (i64: how many precede them), "src_mask", and per layer i
/// "cross.{i}.key"/"cross.{i}.value" (from encode) and
/// "past.{i}.key"/"past.{i}.value" [?, maxLength, d] (caches of fixed
/// capacity whose positions [0, pos) are filled; zeros at the start) -> the
/// output (logits or log-probabilities) of the last position [?, tgtVocab],
/// then per layer the caches with the new positions written at pos (key 0,
/// value 0, key 1, ...): these outputs replace their inputs in place
/// (kiln.updates), as addGptDecode's. Only the new positions are computed;
/// self-attention reads the cached positions [0, pos + n). The call checks
/// pos + n <= maxLength. `maxLength` (the longest output) must be positive,
/// and at most config.maxLen with learned positional encodings.
Graph &addEncDecDecode(Module &module, const nn::TransformerConfig &config,
                       int64_t maxLength, std::string name = "decode",
                       SourceLoc loc = SourceLoc::current());

/// The sizes generateGpt and translateGreedy (runtime/Generate.h) need.
inline GptShape decodeShape(const GptConfig &c) {
  return {c.vocabSize, c.maxSeqLen, c.numLayers, c.dModel};
}
/// The caches of addLlamaDecode are kvDim wide (GptShape::dModel is the
/// width of each cache).
inline GptShape decodeShape(const LlamaConfig &c) {
  return {c.vocabSize, c.maxSeqLen, c.numLayers, c.kvDim()};
}
/// `maxLength`: the capacity addEncDecDecode was given.
inline EncDecShape decodeShape(const nn::TransformerConfig &c,
                               int64_t maxLength) {
  return {c.tgtVocab, c.numDecoderLayers, c.block.dModel, maxLength};
}

} // namespace kiln::dsl::models

#endif // KILN_COMPILER_DSL_MODELS_H
