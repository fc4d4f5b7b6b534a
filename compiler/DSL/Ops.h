//===- Ops.h - One DSL function per kiln op ----------------------*- C++
//-*-===//
//
// Free functions that add one kiln op each to the graph of their operands and
// return its result. Result shapes are inferred (dynamic sizes carry through);
// every op is verified as it is created, and a shape error throws kiln::Error
// "<file>:<line>:<col>: error: <verifier message>" naming the caller's line.
//
// Arithmetic operators (+ - * / between Vars, and with a number) cannot take
// a defaulted std::source_location parameter; instead their right-hand (or
// only) operand converts implicitly to Located<T>, whose constructor records
// the location of that operand expression: an error in `x + y` names the
// line and column of `y`.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_DSL_OPS_H
#define KILN_COMPILER_DSL_OPS_H

#include "compiler/DSL/Graph.h"

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace kiln::dsl {

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

/// The activation of a feed-forward block.
enum class Activation {
  relu,
  /// Exact GELU, x·Φ(x) (erf form).
  gelu,
  /// GELU's tanh approximation (GPT-2's).
  geluTanh,
  /// x·sigmoid(x) (SiLU, Swish).
  silu,
};

/// The layer normalization formula.
enum class NormMode {
  /// (x − mean) / sqrt(biased var + eps): torch.nn.LayerNorm.
  standard,
  /// (x − mean) / (unbiased std + eps): seed 002's LayerNormalization.
  stdEps,
};

enum class Reduction { sum, mean, max };

enum class LossReduction {
  /// Mean over the positions not ignored (PyTorch's default): a rank-0 loss.
  mean,
  sum,
  /// One loss per position.
  none,
};

/// How rotary embeddings pair the features of a head.
enum class RotaryStyle {
  /// Hugging Face Llama's rotate_half: feature i with i + headDim/2.
  half,
  /// The RoFormer paper's (GPT-J, Meta's Llama code): 2i with 2i + 1.
  interleaved,
};

struct RotaryOptions {
  /// The width of one head (even, dividing the input's last dimension).
  int64_t headDim = 0;
  /// The base of the angles: pair i of position p turns by
  /// p·theta^(-2i/headDim).
  double theta = 10000.0;
  RotaryStyle style = RotaryStyle::half;
  /// An optional i64 scalar: the position of the first element (cached
  /// decoding).
  Var offset = {};
};

struct LayerNormOptions {
  double eps = 1e-5;
  NormMode mode = NormMode::standard;
};

/// PyTorch-layout ([out, in]) projections of multi-head attention; the biases
/// are all four or none.
struct AttentionWeights {
  Var wq{}, wk{}, wv{}, wo{};
  Var bq{}, bk{}, bv{}, bo{};
};

struct AttentionOptions {
  int64_t numHeads = 0;
  /// attention() only: grouped-query attention with this many key/value heads
  /// (dividing numHeads; the key and value are [B, Tk, numKvHeads·D/numHeads]
  /// and query head h reads key/value head h / (numHeads/numKvHeads)); 0
  /// for numHeads.
  int64_t numKvHeads = 0;
  /// Query i sees key j only when j <= i + (Tk − Tq).
  bool causal = false;
  /// [B, Tk] of i1/i32/i64: non-zero = attend, zero = padding.
  Var keyPaddingMask = {};
  /// Attention-probability dropout (training graphs only).
  double dropout = 0.0;
  /// attention() only, causal only: an i64 scalar, the position of the first
  /// query among keys of static length (a key/value cache of fixed capacity
  /// filled up to offset + Tq): query i sees key j only when j <= offset + i.
  Var offset = {};
};

/// w1 [F, D], w2 [D, F]; the biases b1 [F], b2 [D] are both or none.
struct FeedForwardWeights {
  Var w1{}, w2{};
  Var b1{}, b2{};
};

struct FeedForwardOptions {
  Activation activation = Activation::relu;
  /// Dropout after the activation (training graphs only).
  double dropout = 0.0;
};

struct LossOptions {
  /// Targets equal to this class contribute nothing.
  std::optional<int64_t> ignoreIndex = std::nullopt;
  double labelSmoothing = 0.0;
  LossReduction reduction = LossReduction::mean;
};

//===----------------------------------------------------------------------===//
// Building blocks
//===----------------------------------------------------------------------===//

/// `table[ids]`: ids [...] (i32/i64) into table [V, D] gives [..., D].
/// `paddingIdx` names a row that receives no gradient.
Var embedding(Var ids, Var table,
              std::optional<int64_t> paddingIdx = std::nullopt,
              SourceLoc loc = SourceLoc::current());

/// `x + PE[offset : offset + T]` with the fixed sin/cos encoding; x is
/// [..., T, D]; `offset` an optional i64 scalar.
Var sinusoidalPositionalEncoding(Var x, Var offset = {},
                                 SourceLoc loc = SourceLoc::current());

/// `x + table[offset : offset + T]` with a learned table [max_len, D].
Var learnedPositionalEncoding(Var x, Var table, Var offset = {},
                              SourceLoc loc = SourceLoc::current());

/// Layer normalization over the last dimension with gamma, beta [D].
Var layerNorm(Var x, Var gamma, Var beta, LayerNormOptions options = {},
              SourceLoc loc = SourceLoc::current());

/// RMS normalization over the last dimension, `x·rsqrt(mean(x²) + eps)·weight`
/// with weight [D] (Hugging Face's LlamaRMSNorm, torch.nn.RMSNorm).
Var rmsNorm(Var x, Var weight, double eps = 1e-6,
            SourceLoc loc = SourceLoc::current());

/// Rotary position embedding of projected heads: x [..., T, D] with heads of
/// options.headDim side by side along D; position t is offset + t.
Var rotary(Var x, RotaryOptions options, SourceLoc loc = SourceLoc::current());

/// Multi-head attention of `query` [B, Tq, D] over `keyValue` [B, Tk, Dkv]
/// (the same Var for self-attention). In a training graph a non-zero
/// `options.dropout` uses the graph's seed and a fresh stream; in evaluation
/// it is dropped.
Var multiHeadAttention(Var query, Var keyValue, const AttentionWeights &weights,
                       const AttentionOptions &options,
                       SourceLoc loc = SourceLoc::current());

/// Scaled dot-product attention of projected `query` [B, Tq, D] over `key`
/// and `value` [B, Tk, D], split into options.numHeads heads (kiln.attention,
/// the core of multiHeadAttention without projections). With a causal mask
/// the queries are the last Tq of the Tk positions, so the keys and values
/// of earlier positions can be cached and passed in again (incremental
/// decoding).
Var attention(Var query, Var key, Var value, const AttentionOptions &options,
              SourceLoc loc = SourceLoc::current());

/// `dropout(act(x·w1ᵀ + b1))·w2ᵀ + b2` over the last dimension.
Var feedForward(Var x, const FeedForwardWeights &weights,
                FeedForwardOptions options = {},
                SourceLoc loc = SourceLoc::current());

//===----------------------------------------------------------------------===//
// Linear algebra and elementwise
//===----------------------------------------------------------------------===//

/// `x·weightᵀ + bias` over the last dimension: x [..., In], weight [Out, In],
/// optional bias [Out].
Var linear(Var x, Var weight, Var bias = {},
           SourceLoc loc = SourceLoc::current());

/// Batched matrix product of [..., M, K] and [..., K, N].
Var matmul(Var lhs, Var rhs, bool transposeLhs = false,
           bool transposeRhs = false, SourceLoc loc = SourceLoc::current());

/// Elementwise with NumPy broadcasting.
Var add(Var lhs, Var rhs, SourceLoc loc = SourceLoc::current());
Var sub(Var lhs, Var rhs, SourceLoc loc = SourceLoc::current());
Var mul(Var lhs, Var rhs, SourceLoc loc = SourceLoc::current());
Var div(Var lhs, Var rhs, SourceLoc loc = SourceLoc::current());

/// The elements of `x` (f32 or bf16) as `dtype` (f32 or bf16): rounded to
/// the nearest bf16 (ties to even), or widened exactly; `x` itself when it
/// has that dtype. Every kiln op takes one floating-point dtype for all its
/// tensors and computes bf16 in f32 (docs/precision.md). The ops with
/// weights (linear, layerNorm, rmsNorm, learnedPositionalEncoding's table,
/// multiHeadAttention, feedForward) cast f32 weights to the activations'
/// bf16 themselves, so f32 parameters (the master weights) serve bf16
/// activations; elsewhere (add, matmul, ...) mixing f32 and bf16 is an
/// error that asks for a cast.
Var cast(Var x, DType dtype, SourceLoc loc = SourceLoc::current());

/// Multiplies by a constant.
Var scale(Var x, double factor, SourceLoc loc = SourceLoc::current());

Var relu(Var x, SourceLoc loc = SourceLoc::current());
/// x·sigmoid(x).
Var silu(Var x, SourceLoc loc = SourceLoc::current());
/// silu(gate)·up (Llama's SwiGLU; one loop after lowering).
Var swiglu(Var gate, Var up, SourceLoc loc = SourceLoc::current());
Var gelu(Var x, bool approximateTanh = false,
         SourceLoc loc = SourceLoc::current());
Var tanh(Var x, SourceLoc loc = SourceLoc::current());
Var exp(Var x, SourceLoc loc = SourceLoc::current());
Var log(Var x, SourceLoc loc = SourceLoc::current());
/// |x| elementwise; its gradient is 0 at x == 0 (as PyTorch).
Var abs(Var x, SourceLoc loc = SourceLoc::current());

/// Inverted dropout with probability p in a training graph (seeded by the
/// graph's "seed" input, with a fresh stream per call); the identity, with
/// no op emitted, in an evaluation graph or for p = 0.
Var dropout(Var x, double p, SourceLoc loc = SourceLoc::current());

Var softmax(Var x, int64_t axis = -1, SourceLoc loc = SourceLoc::current());
Var logSoftmax(Var x, int64_t axis = -1, SourceLoc loc = SourceLoc::current());

/// Sum, mean or max over `axes` (negative from the end).
Var reduce(Var x, Reduction kind, std::vector<int64_t> axes,
           bool keepDims = false, SourceLoc loc = SourceLoc::current());

//===----------------------------------------------------------------------===//
// Shapes and constants
//===----------------------------------------------------------------------===//

/// Entries: a size, 0 to keep the input size at that index, or -1 (once) for
/// the size that keeps the element count.
Var reshape(Var x, std::vector<int64_t> shape,
            SourceLoc loc = SourceLoc::current());

/// Result dimension i is input dimension permutation[i].
Var transpose(Var x, std::vector<int64_t> permutation,
              SourceLoc loc = SourceLoc::current());

/// `x[start:end]` along `axis`, Python style (negative from the end, no end =
/// to the end).
Var slice(Var x, int64_t axis, int64_t start,
          std::optional<int64_t> end = std::nullopt,
          SourceLoc loc = SourceLoc::current());

/// Joins `inputs` (at least one) along `axis`.
Var concat(const std::vector<Var> &inputs, int64_t axis,
           SourceLoc loc = SourceLoc::current());

/// `dest` with `source` written at positions [offset, offset +
/// source.dim(axis)) along `axis` (kiln.update_slice): `offset` an i64
/// scalar, `dest` of static length along `axis` (a key/value cache of fixed
/// capacity; the call checks the positions lie within it). Written in place
/// when the graph's output replaces `dest` (Graph::finish's inPlace).
Var updateSlice(Var dest, Var source, Var offset, int64_t axis,
                SourceLoc loc = SourceLoc::current());

/// A dense f32 tensor of a static `shape`, given in row-major order.
Var constant(Graph &graph, Shape shape, std::vector<float> values,
             SourceLoc loc = SourceLoc::current());
/// A rank-0 f32 constant.
Var constant(Graph &graph, double value, SourceLoc loc = SourceLoc::current());

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

/// Cross-entropy of logits [..., C] against class ids [...] (i32/i64).
Var crossEntropy(Var logits, Var targets, LossOptions options = {},
                 SourceLoc loc = SourceLoc::current());

/// Negative log-likelihood of log-probabilities [..., C].
Var nllLoss(Var logProbs, Var targets, LossOptions options = {},
            SourceLoc loc = SourceLoc::current());

//===----------------------------------------------------------------------===//
// Operators
//===----------------------------------------------------------------------===//

/// A value with the source location of the expression it was converted from
/// (see the file comment).
template <typename T>
struct Located {
  Located(T value, SourceLoc loc = SourceLoc::current())
      : value(std::move(value)), loc(loc) {}
  T value;
  SourceLoc loc;
};

/// Broadcasting kiln.add / sub / mul / div.
Var operator+(const Var &lhs, Located<Var> rhs);
Var operator-(const Var &lhs, Located<Var> rhs);
Var operator*(const Var &lhs, Located<Var> rhs);
Var operator/(const Var &lhs, Located<Var> rhs);

/// With a number: `x * c`, `c * x`, `x / c` are kiln.scale; `x + c`, `x - c`,
/// `c - x`, `c / x` use a rank-0 kiln.constant.
Var operator+(const Var &lhs, Located<double> rhs);
Var operator-(const Var &lhs, Located<double> rhs);
Var operator*(const Var &lhs, Located<double> rhs);
Var operator/(const Var &lhs, Located<double> rhs);
Var operator+(double lhs, Located<Var> rhs);
Var operator-(double lhs, Located<Var> rhs);
Var operator*(double lhs, Located<Var> rhs);
Var operator/(double lhs, Located<Var> rhs);

/// kiln.scale by -1.
Var operator-(Located<Var> x);

Var &operator+=(Var &lhs, Located<Var> rhs);
Var &operator-=(Var &lhs, Located<Var> rhs);
Var &operator*=(Var &lhs, Located<Var> rhs);
Var &operator/=(Var &lhs, Located<Var> rhs);
Var &operator+=(Var &lhs, Located<double> rhs);
Var &operator-=(Var &lhs, Located<double> rhs);
Var &operator*=(Var &lhs, Located<double> rhs);
Var &operator/=(Var &lhs, Located<double> rhs);

} // namespace kiln::dsl

#endif // KILN_COMPILER_DSL_OPS_H
