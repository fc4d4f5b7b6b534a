//===- Emitter.h - Helpers for lowering kiln to linalg ----------*- C++ -*-===//
//
// What every kiln-to-linalg pattern shares: `KilnPattern`, the base of the
// patterns, and `Emitter`, which builds linalg on tensors at one location.
// Internal to compiler/Conversion/KilnToLinalg; the public entry point is
// KilnToLinalg.h.
//
// Writing a lowering
// ------------------
// A lowering is a function that builds the replacement of one op with an
// `Emitter` (at the op's location) and returns the values that replace the
// op's results; `Lowering<XOp, lowerX>` makes it a pattern (a pattern with
// state or a template derives from `KilnPattern<Op>` and overrides `lower`).
// Operands come from the adaptor (already converted); the result type from
// `resultType(op)`. Every size is read from the operands (`sizes`, `size`,
// `sizeValue`), so a dynamic size stays dynamic. Most lowerings are one or a
// few calls:
//
//   SmallVector<Value> lowerRelu(ReluOp op, ReluOp::Adaptor adaptor,
//                                Emitter &e) {
//     Value x = adaptor.getInput();
//     return {e.elementwise(resultType(op), e.sizes(x), x,
//                           [](OpBuilder &b, Location loc, ValueRange args) {
//                             return relu(b, loc, args[0]);
//                           })};
//   }
//   ...
//   patterns.add<Lowering<ReluOp, lowerRelu>>(patterns.getContext());
//
// - `elementwise` is one parallel loop over the result (with broadcasting);
// - `reduce` (`sum`, `max`) folds one axis, `sumAll` every one; `generic`
//   is the general case: the indexing maps come from `identity`, `select`,
//   `dropping` and `scalarMap`, the iterators from `parallel` / `reducing`;
// - a body is a `BodyFn` that gets the block arguments (inputs, then the
//   output) and returns the value to yield; it builds with the builder and
//   location it is given, never with the emitter's own;
// - `linear`, `softmax`, `logSumExp` and `dropoutScale` are the larger pieces
//   several lowerings share.
//
// A lowering always succeeds on verifier-valid IR. An op that may not lower
// (ConstantPattern: non-dense values), or whose lowering needs the rewriter
// itself (LinearPattern: a remapped operand of another op), is a plain
// OpConversionPattern that reports a match failure instead of crashing.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_CONVERSION_KILNTOLINALG_EMITTER_H
#define KILN_COMPILER_CONVERSION_KILNTOLINALG_EMITTER_H

#include "dialects/Kiln/IR/KilnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cmath>
#include <optional>

namespace mlir::kiln {

using utils::IteratorType;

/// The body of a linalg.generic: gets the block arguments (one per input,
/// then one per output) and returns the value to yield.
using BodyFn =
    function_ref<Value(OpBuilder &, Location, ValueRange /*block args*/)>;

/// The body of a contraction: acc + a·b (block arguments a, b, acc).
Value mulAdd(OpBuilder &b, Location loc, ValueRange args);

/// max(x, 0) as a scalar arith op.
Value relu(OpBuilder &b, Location loc, Value x);

/// GELU of `x`, exact (erf) or tanh-approximated, as scalar arith/math ops.
Value gelu(OpBuilder &b, Location loc, Value x, bool tanhApprox);

/// x·sigmoid(x) = x / (1 + exp(-x)) as scalar arith/math ops.
Value silu(OpBuilder &b, Location loc, Value x);

/// The feed-forward activation `act` of `x` (relu, gelu, silu above).
Value activation(OpBuilder &b, Location loc, Activation act, Value x);

/// An axis attribute (I64Attr getters return uint64_t) mapped into [0, rank);
/// the verifier has checked the range.
int64_t normalizedAxis(uint64_t axis, int64_t rank);

//===----------------------------------------------------------------------===//
// Emitter
//===----------------------------------------------------------------------===//

/// Builds linalg (plus tensor/arith/math) on tensors with `b` at `loc`. All
/// values are f32 tensors unless said otherwise.
struct Emitter {
  OpBuilder &b;
  Location loc;

  //===--- Constants and types --------------------------------------------===//

  Type f32() { return b.getF32Type(); }
  /// An f32 constant.
  Value f32c(double v) { return f32c(b, loc, v); }
  /// An f32 constant built with `nb` at `nl` (inside a body).
  static Value f32c(OpBuilder &nb, Location nl, double v) {
    return arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(float(v)));
  }
  /// An index constant.
  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  /// An index value as an f32 (inside a body).
  static Value indexToF32(OpBuilder &nb, Location nl, Value index);

  static RankedTensorType type(Value v) {
    return cast<RankedTensorType>(v.getType());
  }

  //===--- Sizes ----------------------------------------------------------===//

  /// The sizes of `t`: attributes where static, tensor.dim where dynamic.
  SmallVector<OpFoldResult> sizes(Value t) {
    return tensor::getMixedSizes(b, loc, t);
  }
  OpFoldResult size(Value t, int64_t dim) {
    return tensor::getMixedSize(b, loc, t, dim);
  }
  /// The size of dimension `dim` of `t` as an index value.
  Value sizeValue(Value t, int64_t dim) {
    return getValueOrCreateConstantIndexOp(b, loc, size(t, dim));
  }
  /// The size of dimension `dim` of `t` as an f32.
  Value sizeAsFloat(Value t, int64_t dim);
  /// The sizes of every dimension of `t` as index values.
  SmallVector<Value> sizeValues(Value t);
  /// An index value from an optional integer offset operand (0 when null).
  Value offsetIndex(Value offset);

  //===--- Tensors --------------------------------------------------------===//

  /// An uninitialized tensor (tensor.empty).
  Value empty(ArrayRef<OpFoldResult> shape, Type elem) {
    return tensor::EmptyOp::create(b, loc, shape, elem);
  }
  /// An f32 tensor filled with `value`.
  Value filled(ArrayRef<OpFoldResult> shape, double value);
  /// `value` cast (tensor.cast) to `type` when its type differs.
  Value castTo(Value value, Type type);

  //===--- Indexing maps and iterators ------------------------------------===//

  /// The identity map over `rank` loops.
  AffineMap identity(int64_t rank) {
    return AffineMap::getMultiDimIdentityMap(rank, b.getContext());
  }
  /// A map over `rank` loops selecting `dims`.
  AffineMap select(int64_t rank, ArrayRef<int64_t> dims);
  /// A map over `rank` loops that drops loop `drop`.
  AffineMap dropping(int64_t rank, int64_t drop);
  /// The map over `rank` loops to a rank-0 tensor.
  AffineMap scalarMap(int64_t rank) {
    return AffineMap::get(rank, 0, {}, b.getContext());
  }
  /// `rank` parallel iterators.
  static SmallVector<IteratorType> parallel(int64_t rank) {
    return SmallVector<IteratorType>(rank, IteratorType::parallel);
  }
  /// `rank` parallel iterators but for loop `axis`, a reduction.
  static SmallVector<IteratorType> reducing(int64_t rank, int64_t axis);

  //===--- Loops ----------------------------------------------------------===//

  /// A linalg.generic with one result; `body` returns the value it yields.
  Value generic(TypeRange results, ValueRange inputs, ValueRange outputs,
                ArrayRef<AffineMap> maps, ArrayRef<IteratorType> iterators,
                BodyFn body);

  /// An elementwise op over `shape` (dims of `resultType`), with NumPy
  /// broadcasting of inputs of lower rank or with static unit dims.
  Value elementwise(RankedTensorType resultType, ArrayRef<OpFoldResult> shape,
                    ValueRange inputs, BodyFn body);

  /// The result sizes of a broadcasting elementwise op.
  SmallVector<OpFoldResult> broadcastShape(RankedTensorType resultType,
                                           ValueRange inputs);

  /// Collapses the broadcast (unit) dims of `input` away and returns it with
  /// its indexing map into the loops of `resultType`.
  std::pair<Value, AffineMap> broadcastOperand(Value input,
                                               RankedTensorType resultType);

  /// The reassociation that collapses away the dims not `kept` (or expands
  /// them back): each joins the next kept dim, trailing ones the last.
  static SmallVector<ReassociationIndices> collapseGroups(ArrayRef<bool> kept);

  /// Reduces `input` along `axis` with `combine`, starting from `init`.
  Value
  reduce(Value input, int64_t axis, double init,
         function_ref<Value(OpBuilder &, Location, Value, Value)> combine);
  /// The sum of `input` along `axis`.
  Value sum(Value input, int64_t axis);
  /// The maximum of `input` along `axis`.
  Value max(Value input, int64_t axis);

  /// Maps `rows` (of sizes `shape`) elementwise with `f` into a new tensor.
  Value mapRows(Value rows, ArrayRef<OpFoldResult> shape,
                function_ref<Value(OpBuilder &, Location, Value)> f);

  /// The rank-0 sum of every element of `input` (of `f` of each element when
  /// given).
  Value sumAll(Value input,
               function_ref<Value(OpBuilder &, Location, Value)> f = nullptr,
               Value init = Value());
  /// lhs / rhs of two rank-0 tensors.
  Value divideScalars(Value lhs, Value rhs);

  //===--- Larger pieces --------------------------------------------------===//

  /// How many positions of `targets` a mean loss divides by, as a rank-0
  /// f32 tensor: all of them (the product of the sizes, computed exactly in
  /// integers), or those whose target is not `ignore` (a sum of the mask).
  /// Never a reduction of a constant: a body that ignores the reduced
  /// elements is what vectorizers get wrong.
  Value keptCount(Value targets, std::optional<int64_t> ignore);

  /// Whether the integer `value` equals `index` (inside a body).
  static Value isIndex(OpBuilder &nb, Location nl, Value value, int64_t index);

  /// Clamps an integer index value (any integer type) into [0, bound) and
  /// returns it as an index.
  static Value clampIndex(OpBuilder &nb, Location nl, Value value, Value bound);

  /// x·wᵀ (+ bias) over the last dimension: x [..., K], w [N, K]; or, with
  /// `storedKN`, x·w for w [K, N] (a linear of a transposed weight, as the
  /// input gradient of a linear is: no transpose of the weight first). One
  /// contraction over all leading dims (no reshapes: memref expand_shape of
  /// several dynamic dims is not supported by upstream strided-metadata
  /// expansion).
  Value linear(Value x, Value w, Value bias, RankedTensorType resultType,
               bool storedKN = false);

  /// The dropout keep-decision of an element: a pure function of (seed,
  /// stream, linear index), returned as the scale to multiply by (0 or
  /// 1/(1-p)). The linear index is row-major over the loops 0, 1, ... of
  /// sizes `loopSizes`.
  static Value dropoutScale(OpBuilder &nb, Location nl, Value seed,
                            int64_t stream, double p,
                            ArrayRef<Value> loopSizes);
  /// The same decision for the element at `linear` (an index value).
  static Value dropoutScaleAt(OpBuilder &nb, Location nl, Value seed,
                              int64_t stream, double p, Value linear);

  /// Per row of `x` along `axis`: the maximum and the sum of exp(x - max).
  std::pair<Value, Value> maxAndExpSum(Value x, int64_t axis);
  /// Per row of `x` along `axis`: log Σ exp(x), computed stably.
  Value logSumExp(Value x, int64_t axis);
  /// One softmax (or log-softmax) along `axis`.
  Value softmax(Value x, int64_t axis, bool log);

  /// Layer norm's statistics of the rows of `x` (along its last axis, of
  /// `width` elements as an f32).
  struct RowStats {
    Value mean;                     ///< the mean of each row
    Value squares;                  ///< the sum of squared deviations from it
    SmallVector<OpFoldResult> rows; ///< the sizes of both
  };
  RowStats rowStats(Value x, Value width);

  /// RMS norm's scale of each row of `x` (along its last axis):
  /// rsqrt(mean(x²) + eps), of the sizes `rows` of the row statistics.
  Value rmsScale(Value x, float eps, SmallVector<OpFoldResult> &rows);
};

/// Layer norm's scale of (x - mean) from a row's sum of squared deviations:
/// rsqrt(var + eps) with var = `squares` / `count`, or with `stdEps`
/// 1 / (sqrt(var) + eps) (`count` is then D - 1).
Value layerNormScale(OpBuilder &b, Location loc, Value squares, Value count,
                     float eps, bool stdEps);

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

/// The type of `op`'s (only) result.
template <typename Op>
RankedTensorType resultType(Op op) {
  return cast<RankedTensorType>(op.getResult().getType());
}

/// The base of the kiln-to-linalg patterns: `lower` builds the replacement
/// of one op with an Emitter at the op's location and returns the values
/// that replace its results, in order; each is cast (tensor.cast) to its
/// result's type where the two differ (a static size the verifier implies
/// but the lowering computed dynamically).
template <typename Op>
struct KilnPattern : OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;

  virtual SmallVector<Value> lower(Op op, typename Op::Adaptor adaptor,
                                   Emitter &e) const = 0;

  LogicalResult
  matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const final {
    Emitter e{rewriter, op.getLoc()};
    SmallVector<Value> values = lower(op, adaptor, e);
    for (auto [value, result] : llvm::zip_equal(values, op->getResults())) {
      value = e.castTo(value, result.getType());
    }
    rewriter.replaceOp(op, values);
    return success();
  }
};

/// A lowering written as a function: the pattern of most ops is
/// `Lowering<XOp, lowerX>`, with
///   SmallVector<Value> lowerX(XOp op, XOp::Adaptor adaptor, Emitter &e);
template <typename Op>
using LowerFn = SmallVector<Value> (*)(Op, typename Op::Adaptor, Emitter &);
template <typename Op, LowerFn<Op> Fn>
struct Lowering : KilnPattern<Op> {
  using KilnPattern<Op>::KilnPattern;
  SmallVector<Value> lower(Op op, typename Op::Adaptor adaptor,
                           Emitter &e) const override {
    return Fn(op, adaptor, e);
  }
};

/// The loops of a reduction of `x` over `axes`: which dimensions are
/// reduced, the iterator types, and the kept dimensions with their sizes.
struct ReductionLoops {
  ReductionLoops(Emitter &e, Value x, ArrayRef<int64_t> axes);
  SmallVector<bool> reduced;
  SmallVector<IteratorType> iterators;
  SmallVector<int64_t> keptDims;
  SmallVector<OpFoldResult> keptSizes;
};

//===----------------------------------------------------------------------===//
// Pattern families (one .cpp file each)
//===----------------------------------------------------------------------===//

/// Elementwise.cpp: add, sub, mul, div, relu, tanh, exp, log, abs, gelu,
/// scale.
void populateElementwisePatterns(RewritePatternSet &patterns);
/// Layers.cpp: embedding, positional_encoding, layer_norm, linear, matmul,
/// feed_forward, dropout.
void populateLayerPatterns(RewritePatternSet &patterns);
/// Attention.cpp: mha, attention, attention_grad (`attentionBlock` > 0: block
/// by block, in FlashAttention.cpp; `attentionKernel`: as the GPU kernel ops
/// kiln.flash_attention and kiln.flash_attention_grad).
void populateAttentionPatterns(RewritePatternSet &patterns,
                               int64_t attentionBlock, bool attentionKernel);
/// ReductionsAndShapes.cpp: softmax, log_softmax, reduce, reshape, transpose,
/// slice, concat, constant.
void populateReductionAndShapePatterns(RewritePatternSet &patterns);
/// Losses.cpp: cross_entropy, nll_loss.
void populateLossPatterns(RewritePatternSet &patterns);
/// Gradients.cpp: activation_grad, layer_norm_grad, loss_grad, embedding_grad,
/// positional_encoding_grad, reduce_max_grad.
void populateGradientPatterns(RewritePatternSet &patterns);
/// Optimizers.cpp: adam_update, sgd_update, global_norm_scale.
void populateOptimizerPatterns(RewritePatternSet &patterns);

} // namespace mlir::kiln

#endif // KILN_COMPILER_CONVERSION_KILNTOLINALG_EMITTER_H
