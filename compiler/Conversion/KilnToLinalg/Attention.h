//===- Attention.h - Scaled dot-product attention on linalg -----*- C++ -*-===//
//
// `Attention`, which builds scaled dot-product attention per head for the
// kiln.mha, kiln.attention and kiln.attention_grad patterns. Internal to
// compiler/Conversion/KilnToLinalg: Attention.cpp holds the patterns and the
// algorithm on whole [B, H, Tq, Tk] score tensors, FlashAttention.cpp the
// block-by-block one (the `attention-block` option).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_CONVERSION_KILNTOLINALG_ATTENTION_H
#define KILN_COMPILER_CONVERSION_KILNTOLINALG_ATTENTION_H

#include "compiler/Conversion/KilnToLinalg/Emitter.h"

namespace mlir::kiln {

/// Value used for masked attention scores (the seed documents' masked_fill):
/// a fully masked row attends uniformly instead of producing NaN.
inline constexpr double kMaskedScore = -1e9;

/// Scaled dot-product attention on projected [B, T, D] inputs, shared by
/// kiln.mha, kiln.attention and kiln.attention_grad.
struct Attention {
  Emitter &e;
  int64_t heads, headDim;
  /// The key/value heads (grouped-query attention; `heads` otherwise):
  /// query head h reads key/value head h / (heads / kvHeads).
  int64_t kvHeads;
  bool causal;
  Value mask, seed;
  double dropout;
  int64_t stream;
  Value query, key; // [B, Tq, D] and [B, Tk, D]

  OpBuilder &b() { return e.b; }
  Location loc() { return e.loc; }

  /// [B, T, D] -> [B, T, H, dh]. An operand whose width is dynamic has the
  /// width of the others (the call checks it): cast to it first.
  Value split(Value x) { return split(x, heads); }
  /// [B, T, n·dh] -> [B, T, n, dh].
  Value split(Value x, int64_t n);
  /// Keys or values [B, T, Hkv·dh] -> [B, T, Hkv, dh].
  Value splitKv(Value x) { return split(x, kvHeads); }
  /// [B, T, H, dh] -> [B, T, D]
  Value merge(Value x);
  /// [B, T, n, dh] -> [B, n, dh, T] (rows of keys or values contiguous).
  Value headsMajor(Value xh, Value like);
  /// Key/value heads [B, T, Hkv, dh] repeated for their groups of query
  /// heads into [B, T, H, dh] (Hugging Face's repeat_kv; `xh` itself
  /// without groups).
  Value repeatKv(Value xh);
  /// The gradient of repeatKv: [B, T, H, dh] summed over each group into
  /// [B, T, Hkv, dh] (`xh` itself without groups).
  Value sumGroups(Value xh);
  RankedTensorType scoreType();
  SmallVector<OpFoldResult> scoreShape();
  /// Inside a generic: whether key j (loop `jDim`, plus `jOffset` if
  /// given) is visible from query i (loop `iDim`): the padding mask value
  /// `maskArg` (or null) is non-zero and, causal, j <= i + `shift`. Null
  /// when every score is visible.
  Value visibleAt(OpBuilder &nb, Location l, Value maskArg, int64_t iDim,
                  int64_t jDim, Value jOffset, Value shift);
  /// Inside a body: `v` times the score scale 1/sqrt(dh).
  Value scaled(OpBuilder &nb, Location l, Value v);
  /// Inside a body: the scores' gradient dS = P·(dP - D)·scale.
  Value scoreGrad(OpBuilder &nb, Location l, Value dProb, Value prob,
                  Value rowDot);
  /// Inside a body: `v` where `visible` is true (everywhere when it is
  /// null), `fill` elsewhere.
  static Value masked(OpBuilder &nb, Location l, Value v, Value visible,
                      double fill);
  /// Whether score (b, h, i, j) is visible, inside a 4-loop generic.
  Value keep(OpBuilder &nb, Location l, Value maskArg, Value shift);
  Value shift();
  /// Σ_d lhs[b, i, h, d]·rhsT[b, h, d, j] into [B, H, Tq, Tk].
  Value rowProducts(Value lhs, Value rhsT);
  /// The attention probabilities [B, H, Tq, Tk] (before dropout).
  Value probabilities(Value qh, Value kh);
  /// x · the dropout scale of each score position (x unchanged when p = 0).
  Value withDropout(Value x);
  /// Σ over the score dimension not kept of w[b, h, i, j]·xh[.., h, d], into
  /// [B, T, H, dh] shaped like `like` ([B, T, D]): `wDims` says where the
  /// loops (b, h, t, d, r) — t kept, r reduced — index the weights.
  Value headContraction(Value w, ArrayRef<int64_t> wDims, Value xh, Value like);
  /// Σ_j w[b, h, i, j]·xh[b, j, h, d] into [B, Tq, H, dh].
  Value weightedRows(Value w, Value xh);
  /// Σ_i w[b, h, i, j]·xh[b, i, h, d] into [B, Tk, H, dh] (the key/value
  /// side of the backward pass).
  Value weightedColumns(Value w, Value xh);
  /// The forward output [B, Tq, D].
  Value forward(Value value);

  /// Whether the GPU kernel ops take these heads (at most
  /// FlashAttentionOp::kMaxHeadDim wide).
  bool kernelTakes() const;
  /// The forward output [B, Tq, D] as kiln.flash_attention (a GPU kernel
  /// that kiln-gpu-kernels builds).
  Value kernelForward(Value value);
  /// The gradients (dQ, dK, dV) as kiln.flash_attention_grad, given the
  /// forward output `output`.
  SmallVector<Value> kernelBackward(Value grad, Value value, Value output);
  /// The forward output by the algorithm the options choose: the kernel op
  /// (`kernel`, where it takes the heads), block by block (`block` > 0), or
  /// on whole scores.
  Value forwardBy(Value value, int64_t block, bool kernel);
  /// The forward output [B, Tq, D], computed block by block as flash
  /// attention does (FlashAttention.cpp).
  Value fusedForward(Value value, int64_t block);
  /// The gradients (dQ, dK, dV) of `fusedForward`, block by block
  /// (FlashAttention.cpp), given the forward output `output`.
  SmallVector<Value> fusedBackward(Value grad, Value value, Value output,
                                   int64_t block);
};

} // namespace mlir::kiln

#endif // KILN_COMPILER_CONVERSION_KILNTOLINALG_ATTENTION_H
