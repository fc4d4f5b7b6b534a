//===- KilnToLinalg.cpp - Lower kiln ops to linalg on tensors -------------===//
//
// Every kiln op becomes linalg.generic ops (plus tensor/arith/math) on
// tensors whose dynamic sizes stay dynamic. Big ops (attention, layer norm,
// losses) become a handful of fused loops rather than one loop per formula
// term. Indices read from data (token ids, targets, positions) are clamped
// into range, so no input can make compiled code read out of bounds; the
// runtime reports such inputs as errors before calling.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/KilnToLinalg/KilnToLinalg.h"

#include "dialects/Kiln/IR/KilnOps.h"
#include "runtime/SplitMix64.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cmath>
#include <limits>

namespace mlir::kiln {
#define GEN_PASS_DEF_CONVERTKILNTOLINALGPASS
#include "compiler/Conversion/KilnToLinalg/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

using utils::IteratorType;

namespace {

/// Value used for masked attention scores (the seed documents' masked_fill):
/// a fully masked row attends uniformly instead of producing NaN.
constexpr double kMaskedScore = -1e9;

//===----------------------------------------------------------------------===//
// Emitter: shared helpers for building linalg on tensors
//===----------------------------------------------------------------------===//

/// The body of a contraction: acc + a·b.
static Value mulAdd(OpBuilder &b, Location loc, ValueRange args) {
  Value product = arith::MulFOp::create(b, loc, args[0], args[1]);
  return arith::AddFOp::create(b, loc, args[2], product);
}

using BodyFn =
    function_ref<Value(OpBuilder &, Location, ValueRange /*block args*/)>;

struct Emitter {
  OpBuilder &b;
  Location loc;

  Type f32() { return b.getF32Type(); }
  Value f32c(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }

  static RankedTensorType type(Value v) {
    return cast<RankedTensorType>(v.getType());
  }

  SmallVector<OpFoldResult> sizes(Value t) {
    return tensor::getMixedSizes(b, loc, t);
  }
  OpFoldResult size(Value t, int64_t dim) {
    return tensor::getMixedSize(b, loc, t, dim);
  }
  Value sizeValue(Value t, int64_t dim) {
    return getValueOrCreateConstantIndexOp(b, loc, size(t, dim));
  }

  Value empty(ArrayRef<OpFoldResult> shape, Type elem) {
    return tensor::EmptyOp::create(b, loc, shape, elem);
  }
  Value filled(ArrayRef<OpFoldResult> shape, double value) {
    Value init = empty(shape, f32());
    return linalg::FillOp::create(b, loc, ValueRange{f32c(value)},
                                  ValueRange{init})
        .getResult(0);
  }

  /// The identity map over `rank` loops.
  AffineMap identity(int64_t rank) {
    return AffineMap::getMultiDimIdentityMap(rank, b.getContext());
  }
  /// A map over `rank` loops selecting `dims`.
  AffineMap select(int64_t rank, ArrayRef<int64_t> dims) {
    SmallVector<AffineExpr> exprs;
    for (int64_t d : dims) {
      exprs.push_back(b.getAffineDimExpr(d));
    }
    return AffineMap::get(rank, 0, exprs, b.getContext());
  }
  /// A map over `rank` loops that drops loop `drop`.
  AffineMap dropping(int64_t rank, int64_t drop) {
    SmallVector<int64_t> dims;
    for (int64_t d = 0; d < rank; ++d) {
      if (d != drop) {
        dims.push_back(d);
      }
    }
    return select(rank, dims);
  }

  Value generic(TypeRange results, ValueRange inputs, ValueRange outputs,
                ArrayRef<AffineMap> maps, ArrayRef<IteratorType> iterators,
                BodyFn body) {
    auto op = linalg::GenericOp::create(
        b, loc, results, inputs, outputs, maps, iterators,
        [&](OpBuilder &nb, Location nl, ValueRange args) {
          Value result = body(nb, nl, args);
          linalg::YieldOp::create(nb, nl, result);
        });
    return op.getResult(0);
  }

  /// An elementwise op over `shape` (dims of `resultType`), with NumPy
  /// broadcasting of inputs of lower rank or with static unit dims.
  Value elementwise(RankedTensorType resultType, ArrayRef<OpFoldResult> shape,
                    ValueRange inputs, BodyFn body) {
    int64_t rank = resultType.getRank();
    SmallVector<Value> operands;
    SmallVector<AffineMap> maps;
    for (Value input : inputs) {
      auto [operand, map] = broadcastOperand(input, resultType);
      operands.push_back(operand);
      maps.push_back(map);
    }
    maps.push_back(identity(rank));
    Value init = empty(shape, resultType.getElementType());
    SmallVector<IteratorType> iterators(rank, IteratorType::parallel);
    return generic(resultType, operands, init, maps, iterators, body);
  }

  /// The result sizes of a broadcasting elementwise op.
  SmallVector<OpFoldResult> broadcastShape(RankedTensorType resultType,
                                           ValueRange inputs) {
    int64_t rank = resultType.getRank();
    SmallVector<OpFoldResult> shape;
    for (int64_t d = 0; d < rank; ++d) {
      if (!resultType.isDynamicDim(d)) {
        shape.push_back(b.getIndexAttr(resultType.getDimSize(d)));
        continue;
      }
      // A dynamic result size comes from an input whose aligned size is
      // dynamic (dynamic sizes broadcast only when they are statically 1).
      for (Value input : inputs) {
        auto t = type(input);
        int64_t k = d - (rank - t.getRank());
        if (k >= 0 && t.isDynamicDim(k)) {
          shape.push_back(size(input, k));
          break;
        }
      }
    }
    return shape;
  }

  /// Collapses the broadcast (unit) dims of `input` away and returns it with
  /// its indexing map into the loops of `resultType`.
  std::pair<Value, AffineMap> broadcastOperand(Value input,
                                               RankedTensorType resultType) {
    auto t = type(input);
    int64_t rank = resultType.getRank();
    int64_t offset = rank - t.getRank();
    SmallVector<int64_t> kept;
    for (int64_t k = 0; k < t.getRank(); ++k) {
      bool unit = t.getDimSize(k) == 1;
      if (!unit || resultType.getDimSize(offset + k) == 1) {
        kept.push_back(k);
      }
    }
    SmallVector<int64_t> loops;
    for (int64_t k : kept) {
      loops.push_back(offset + k);
    }
    if (static_cast<int64_t>(kept.size()) == t.getRank()) {
      return {input, select(rank, loops)};
    }
    // Group every dropped unit dim with the next kept dim (or the last).
    SmallVector<ReassociationIndices> groups;
    ReassociationIndices group;
    for (int64_t k = 0; k < t.getRank(); ++k) {
      group.push_back(k);
      if (llvm::is_contained(kept, k)) {
        groups.push_back(group);
        group.clear();
      }
    }
    if (!group.empty() && !groups.empty()) {
      groups.back().append(group.begin(), group.end());
    }
    Value collapsed = tensor::CollapseShapeOp::create(b, loc, input, groups);
    return {collapsed, select(rank, loops)};
  }

  /// Reduces `input` along `axis` with `combine`, starting from `init`.
  Value
  reduce(Value input, int64_t axis, double init,
         function_ref<Value(OpBuilder &, Location, Value, Value)> combine) {
    auto t = type(input);
    int64_t rank = t.getRank();
    SmallVector<OpFoldResult> shape = sizes(input);
    shape.erase(shape.begin() + axis);
    Value acc = filled(shape, init);
    SmallVector<IteratorType> iterators(rank, IteratorType::parallel);
    iterators[axis] = IteratorType::reduction;
    return generic(acc.getType(), input, acc,
                   {identity(rank), dropping(rank, axis)}, iterators,
                   [&](OpBuilder &nb, Location nl, ValueRange args) {
                     return combine(nb, nl, args[0], args[1]);
                   });
  }

  /// The size of dimension `dim` of `t` as an f32.
  Value sizeAsFloat(Value t, int64_t dim) {
    Value i64 =
        arith::IndexCastOp::create(b, loc, b.getI64Type(), sizeValue(t, dim));
    return arith::SIToFPOp::create(b, loc, f32(), i64);
  }

  /// How many positions of `targets` a mean loss divides by, as a rank-0
  /// f32 tensor: all of them (the product of the sizes, computed exactly in
  /// integers), or those whose target is not `ignore` (a sum of the mask).
  /// Never a reduction of a constant: a body that ignores the reduced
  /// elements is what vectorizers get wrong.
  Value keptCount(Value targets, std::optional<int64_t> ignore) {
    int64_t rank = type(targets).getRank();
    if (!ignore) {
      Value count = index(1);
      for (int64_t d = 0; d < rank; ++d) {
        count = arith::MulIOp::create(b, loc, count, sizeValue(targets, d));
      }
      Value i64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), count);
      Value f = arith::SIToFPOp::create(b, loc, f32(), i64);
      return linalg::FillOp::create(b, loc, ValueRange{f},
                                    ValueRange{empty({}, f32())})
          .getResult(0);
    }
    SmallVector<IteratorType> all(rank, IteratorType::reduction);
    int64_t ignored = *ignore;
    return generic(
        RankedTensorType::get({}, f32()), targets, filled({}, 0.0),
        {identity(rank), AffineMap::get(rank, 0, {}, b.getContext())}, all,
        [&](OpBuilder &nb, Location nl, ValueRange a) {
          Value id = arith::ConstantOp::create(
              nb, nl, nb.getIntegerAttr(a[0].getType(), ignored));
          Value skip =
              arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::eq, a[0], id);
          Value one = arith::SelectOp::create(
              nb, nl, skip,
              arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(0.0f)),
              arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(1.0f)));
          return arith::AddFOp::create(nb, nl, one, a[1]);
        });
  }

  /// Clamps an integer index value (any integer type) into [0, bound) and
  /// returns it as an index.
  static Value clampIndex(OpBuilder &nb, Location nl, Value value,
                          Value bound) {
    Value idx =
        value.getType().isIndex()
            ? value
            : arith::IndexCastOp::create(nb, nl, nb.getIndexType(), value);
    Value zero = arith::ConstantIndexOp::create(nb, nl, 0);
    Value one = arith::ConstantIndexOp::create(nb, nl, 1);
    Value last = arith::SubIOp::create(nb, nl, bound, one);
    Value low = arith::MaxSIOp::create(nb, nl, idx, zero);
    return arith::MinSIOp::create(nb, nl, low, last);
  }

  /// x·wᵀ (+ bias) over the last dimension: x [..., K], w [N, K]; or, with
  /// `storedKN`, x·w for w [K, N] (a linear of a transposed weight, as the
  /// input gradient of a linear is: no transpose of the weight first). One
  /// contraction over all leading dims (no reshapes: memref expand_shape of
  /// several dynamic dims is not supported by upstream strided-metadata
  /// expansion).
  Value linear(Value x, Value w, Value bias, RankedTensorType resultType,
               bool storedKN = false) {
    int64_t rank = type(x).getRank();
    // Loops: leading dims..., n, k.
    int64_t loops = rank + 1;
    int64_t n = rank - 1, k = rank;
    SmallVector<int64_t> xDims, outDims;
    for (int64_t d = 0; d + 1 < rank; ++d) {
      xDims.push_back(d);
      outDims.push_back(d);
    }
    xDims.push_back(k);
    outDims.push_back(n);
    SmallVector<OpFoldResult> shape = sizes(x);
    shape.back() = size(w, storedKN ? 1 : 0);
    Value acc;
    if (bias) {
      acc = generic(
          resultType, bias, empty(shape, f32()),
          {select(rank, {rank - 1}), identity(rank)},
          SmallVector<IteratorType>(rank, IteratorType::parallel),
          [](OpBuilder &, Location, ValueRange args) { return args[0]; });
    } else {
      acc = filled(shape, 0.0);
    }
    SmallVector<IteratorType> iterators(loops, IteratorType::parallel);
    iterators[k] = IteratorType::reduction;
    if (storedKN) {
      return generic(
          resultType, ValueRange{x, w}, acc,
          {select(loops, xDims), select(loops, {k, n}), select(loops, outDims)},
          iterators, mulAdd);
    }
    // A static weight is read as it is, [N, K]: CPU code generation copies
    // it transposed, block by block, into the contiguous [kc, nc] blocks its
    // register tiles read (kiln-tile-and-vectorize). Otherwise it is
    // transposed to [K, N] here (once per call, K·N copies against M·N·K
    // multiply-adds), so that a row of N outputs reads contiguous weights.
    if (type(w).hasStaticShape() && rank >= 2) {
      return generic(
          resultType, ValueRange{x, w}, acc,
          {select(loops, xDims), select(loops, {n, k}), select(loops, outDims)},
          iterators, mulAdd);
    }
    SmallVector<OpFoldResult> wtShape = {size(w, 1), size(w, 0)};
    Value wt = linalg::TransposeOp::create(b, loc, w, empty(wtShape, f32()),
                                           ArrayRef<int64_t>{1, 0})
                   .getResult()[0];
    return generic(
        resultType, ValueRange{x, wt}, acc,
        {select(loops, xDims), select(loops, {k, n}), select(loops, outDims)},
        iterators, mulAdd);
  }

  /// The dropout keep-decision of an element: a pure function of (seed,
  /// stream, linear index), returned as the scale to multiply by (0 or
  /// 1/(1-p)). The linear index is over `dims` (loop ids), row-major.
  static Value dropoutScale(OpBuilder &nb, Location nl, Value seed,
                            int64_t stream, double p,
                            ArrayRef<int64_t> loopDims,
                            ArrayRef<Value> loopSizes);
  /// The same decision for the element at `linear` (an index value).
  static Value dropoutScaleAt(OpBuilder &nb, Location nl, Value seed,
                              int64_t stream, double p, Value linear);

  /// One softmax (or log-softmax) along `axis`.
  Value softmax(Value x, int64_t axis, bool log);
};

/// splitmix64's `mix` (runtime/SplitMix64.h) on i64 values.
static Value mix64(OpBuilder &b, Location loc, Value z) {
  namespace sm = ::kiln::splitmix64;
  auto c = [&](uint64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(int64_t(v)));
  };
  auto xorShiftRight = [&](Value v, unsigned shift) -> Value {
    Value shifted = arith::ShRUIOp::create(b, loc, v, c(shift));
    return arith::XOrIOp::create(b, loc, v, shifted);
  };
  z = arith::AddIOp::create(b, loc, z, c(sm::kIncrement));
  z = arith::MulIOp::create(b, loc, xorShiftRight(z, sm::kShift1),
                            c(sm::kMultiplier1));
  z = arith::MulIOp::create(b, loc, xorShiftRight(z, sm::kShift2),
                            c(sm::kMultiplier2));
  return xorShiftRight(z, sm::kShift3);
}

Value Emitter::dropoutScale(OpBuilder &nb, Location nl, Value seed,
                            int64_t stream, double p,
                            ArrayRef<int64_t> loopDims,
                            ArrayRef<Value> loopSizes) {
  // Linear index, row-major over the given loops.
  Value linear = arith::ConstantIndexOp::create(nb, nl, 0);
  for (auto [dim, size] : llvm::zip(loopDims, loopSizes)) {
    Value i = linalg::IndexOp::create(nb, nl, dim);
    linear = arith::AddIOp::create(
        nb, nl, arith::MulIOp::create(nb, nl, linear, size), i);
  }
  return dropoutScaleAt(nb, nl, seed, stream, p, linear);
}

Value Emitter::dropoutScaleAt(OpBuilder &nb, Location nl, Value seed,
                              int64_t stream, double p, Value linear) {
  Value index64 = arith::IndexCastOp::create(nb, nl, nb.getI64Type(), linear);
  // key = mix(seed + stream·kIncrement), bits = mix(key ^ index), as
  // ::kiln::splitmix64::dropoutBits computes them.
  namespace sm = ::kiln::splitmix64;
  Value streamConst = arith::ConstantOp::create(
      nb, nl, nb.getI64IntegerAttr(int64_t(uint64_t(stream) * sm::kIncrement)));
  Value key = mix64(nb, nl, arith::AddIOp::create(nb, nl, seed, streamConst));
  Value bits = mix64(nb, nl, arith::XOrIOp::create(nb, nl, key, index64));
  // The top bits as a uniform integer in [0, 2^kDropoutBits).
  Value top = arith::ShRUIOp::create(
      nb, nl, bits,
      arith::ConstantOp::create(nb, nl,
                                nb.getI64IntegerAttr(64 - sm::kDropoutBits)));
  Value threshold = arith::ConstantOp::create(
      nb, nl, nb.getI64IntegerAttr(int64_t(sm::dropoutThreshold(p))));
  Value keep =
      arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::uge, top, threshold);
  Value scale = arith::ConstantOp::create(
      nb, nl, nb.getF32FloatAttr(float(1.0 / (1.0 - p))));
  Value zero = arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(0.0f));
  return arith::SelectOp::create(nb, nl, keep, scale, zero);
}

Value Emitter::softmax(Value x, int64_t axis, bool log) {
  auto t = type(x);
  int64_t rank = t.getRank();
  Value max = reduce(x, axis, -INFINITY,
                     [](OpBuilder &nb, Location nl, Value v, Value acc) {
                       return arith::MaximumFOp::create(nb, nl, v, acc);
                     });
  SmallVector<OpFoldResult> reducedShape = sizes(max);
  Value sum0 = filled(reducedShape, 0.0);
  SmallVector<IteratorType> iterators(rank, IteratorType::parallel);
  iterators[axis] = IteratorType::reduction;
  AffineMap reduced = dropping(rank, axis);
  Value sum = generic(sum0.getType(), ValueRange{x, max}, sum0,
                      {identity(rank), reduced, reduced}, iterators,
                      [](OpBuilder &nb, Location nl, ValueRange args) {
                        Value d =
                            arith::SubFOp::create(nb, nl, args[0], args[1]);
                        Value e = math::ExpOp::create(nb, nl, d);
                        return arith::AddFOp::create(nb, nl, e, args[2]);
                      });
  SmallVector<IteratorType> parallel(rank, IteratorType::parallel);
  return generic(t, ValueRange{x, max, sum}, empty(sizes(x), f32()),
                 {identity(rank), reduced, reduced, identity(rank)}, parallel,
                 [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
                   Value d = arith::SubFOp::create(nb, nl, args[0], args[1]);
                   if (log) {
                     Value l = math::LogOp::create(nb, nl, args[2]);
                     return arith::SubFOp::create(nb, nl, d, l);
                   }
                   Value e = math::ExpOp::create(nb, nl, d);
                   return arith::DivFOp::create(nb, nl, e, args[2]);
                 });
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

/// An axis attribute (I64Attr getters return uint64_t) mapped into [0, rank);
/// the verifier has checked the range.
static int64_t normalizedAxis(uint64_t axis, int64_t rank) {
  auto signedAxis = static_cast<int64_t>(axis);
  return signedAxis < 0 ? signedAxis + rank : signedAxis;
}

template <typename Op>
struct KilnPattern : OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  using OpAdaptor = typename Op::Adaptor;

  RankedTensorType resultType(Op op) const {
    return cast<RankedTensorType>(op.getResult().getType());
  }
};

/// Elementwise arithmetic on one or two broadcast operands.
template <typename Op>
struct ElementwisePattern : KilnPattern<Op> {
  using KilnPattern<Op>::KilnPattern;
  using OpAdaptor = typename Op::Adaptor;

  LogicalResult
  matchAndRewrite(Op op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    auto type = this->resultType(op);
    ValueRange inputs = adaptor.getOperands();
    SmallVector<Value> tensors;
    for (Value v : inputs) {
      if (isa<RankedTensorType>(v.getType())) {
        tensors.push_back(v);
      }
    }
    Value result =
        e.elementwise(type, e.broadcastShape(type, tensors), tensors,
                      [&](OpBuilder &b, Location loc, ValueRange args) {
                        return body(op, b, loc, args);
                      });
    rewriter.replaceOp(op, result);
    return success();
  }

  static Value body(Op op, OpBuilder &b, Location loc, ValueRange args);
};

template <>
Value ElementwisePattern<AddOp>::body(AddOp, OpBuilder &b, Location loc,
                                      ValueRange args) {
  return arith::AddFOp::create(b, loc, args[0], args[1]);
}
template <>
Value ElementwisePattern<SubOp>::body(SubOp, OpBuilder &b, Location loc,
                                      ValueRange args) {
  return arith::SubFOp::create(b, loc, args[0], args[1]);
}
template <>
Value ElementwisePattern<MulOp>::body(MulOp, OpBuilder &b, Location loc,
                                      ValueRange args) {
  return arith::MulFOp::create(b, loc, args[0], args[1]);
}
template <>
Value ElementwisePattern<DivOp>::body(DivOp, OpBuilder &b, Location loc,
                                      ValueRange args) {
  return arith::DivFOp::create(b, loc, args[0], args[1]);
}
template <>
Value ElementwisePattern<ReluOp>::body(ReluOp, OpBuilder &b, Location loc,
                                       ValueRange args) {
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  return arith::MaximumFOp::create(b, loc, args[0], zero);
}
template <>
Value ElementwisePattern<TanhOp>::body(TanhOp, OpBuilder &b, Location loc,
                                       ValueRange args) {
  return math::TanhOp::create(b, loc, args[0]);
}
template <>
Value ElementwisePattern<ExpOp>::body(ExpOp, OpBuilder &b, Location loc,
                                      ValueRange args) {
  return math::ExpOp::create(b, loc, args[0]);
}
template <>
Value ElementwisePattern<LogOp>::body(LogOp, OpBuilder &b, Location loc,
                                      ValueRange args) {
  return math::LogOp::create(b, loc, args[0]);
}
template <>
Value ElementwisePattern<ScaleOp>::body(ScaleOp op, OpBuilder &b, Location loc,
                                        ValueRange args) {
  Value factor = arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(float(op.getFactor().convertToDouble())));
  return arith::MulFOp::create(b, loc, args[0], factor);
}

/// GELU, exact (erf) or tanh-approximated.
static Value gelu(OpBuilder &b, Location loc, Value x, bool tanhApprox) {
  auto c = [&](double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(float(v)));
  };
  Value inner;
  if (tanhApprox) {
    // tanh(sqrt(2/pi) * (x + 0.044715 x^3))
    Value x3 =
        arith::MulFOp::create(b, loc, x, arith::MulFOp::create(b, loc, x, x));
    Value poly = arith::AddFOp::create(
        b, loc, x, arith::MulFOp::create(b, loc, c(0.044715), x3));
    inner = math::TanhOp::create(
        b, loc, arith::MulFOp::create(b, loc, c(std::sqrt(2.0 / M_PI)), poly));
  } else {
    inner = math::ErfOp::create(b, loc,
                                arith::MulFOp::create(b, loc, x, c(M_SQRT1_2)));
  }
  Value onePlus = arith::AddFOp::create(b, loc, c(1.0), inner);
  return arith::MulFOp::create(b, loc, arith::MulFOp::create(b, loc, c(0.5), x),
                               onePlus);
}

template <>
Value ElementwisePattern<GeluOp>::body(GeluOp op, OpBuilder &b, Location loc,
                                       ValueRange args) {
  return gelu(b, loc, args[0], op.getApproximateTanh());
}

struct DropoutPattern : KilnPattern<DropoutOp> {
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(DropoutOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    auto type = resultType(op);
    int64_t rank = type.getRank();
    SmallVector<int64_t> dims;
    SmallVector<Value> sizes;
    for (int64_t d = 0; d < rank; ++d) {
      dims.push_back(d);
      sizes.push_back(e.sizeValue(adaptor.getInput(), d));
    }
    double p = op.getP().convertToDouble();
    Value seed = adaptor.getSeed();
    int64_t stream = op.getStream();
    Value result =
        e.elementwise(type, e.sizes(adaptor.getInput()), adaptor.getInput(),
                      [&](OpBuilder &b, Location loc, ValueRange args) {
                        Value scale = Emitter::dropoutScale(
                            b, loc, seed, stream, p, dims, sizes);
                        return arith::MulFOp::create(b, loc, args[0], scale);
                      });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct EmbeddingPattern : KilnPattern<EmbeddingOp> {
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(EmbeddingOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    auto type = resultType(op);
    int64_t rank = type.getRank();
    Value ids = adaptor.getIds();
    Value table = adaptor.getTable();
    SmallVector<OpFoldResult> shape = e.sizes(ids);
    shape.push_back(e.size(table, 1));
    Value vocab = e.sizeValue(table, 0);
    SmallVector<IteratorType> iterators(rank, IteratorType::parallel);
    Value result = e.generic(
        type, ids, e.empty(shape, e.f32()),
        {e.dropping(rank, rank - 1), e.identity(rank)}, iterators,
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          Value row = Emitter::clampIndex(b, loc, args[0], vocab);
          Value col = linalg::IndexOp::create(b, loc, rank - 1);
          return tensor::ExtractOp::create(b, loc, table, ValueRange{row, col});
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct PositionalEncodingPattern : KilnPattern<PositionalEncodingOp> {
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(PositionalEncodingOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    auto type = resultType(op);
    int64_t rank = type.getRank();
    Value input = adaptor.getInput();
    Value offset;
    if (adaptor.getOffset()) {
      offset = arith::IndexCastOp::create(
          rewriter, op.getLoc(), rewriter.getIndexType(), adaptor.getOffset());
    } else {
      offset = e.index(0);
    }
    bool learned = op.getKind() == PEKind::learned;
    Value table = adaptor.getTable();
    Value maxLen = learned ? e.sizeValue(table, 0) : Value();
    Value width = e.sizeAsFloat(input, rank - 1);
    Value result = e.elementwise(
        type, e.sizes(input), input,
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          Value t = linalg::IndexOp::create(b, loc, rank - 2);
          Value i = linalg::IndexOp::create(b, loc, rank - 1);
          Value pos = arith::AddIOp::create(b, loc, t, offset);
          if (learned) {
            Value row = Emitter::clampIndex(b, loc, pos, maxLen);
            Value pe =
                tensor::ExtractOp::create(b, loc, table, ValueRange{row, i});
            return arith::AddFOp::create(b, loc, args[0], pe);
          }
          // div = exp(2·floor(i/2) · (-ln(10000) / D)), as torch computes it.
          auto c = [&](double v) {
            return arith::ConstantOp::create(b, loc,
                                             b.getF32FloatAttr(float(v)));
          };
          auto toFloat = [&](Value index) -> Value {
            Value i64 =
                arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
            return arith::SIToFPOp::create(b, loc, b.getF32Type(), i64);
          };
          Value two = arith::ConstantIndexOp::create(b, loc, 2);
          Value pair = arith::MulIOp::create(
              b, loc, arith::DivUIOp::create(b, loc, i, two), two);
          Value rate =
              arith::DivFOp::create(b, loc, c(-std::log(10000.0)), width);
          Value div = math::ExpOp::create(
              b, loc, arith::MulFOp::create(b, loc, toFloat(pair), rate));
          Value angle = arith::MulFOp::create(b, loc, toFloat(pos), div);
          Value odd =
              arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                    arith::RemUIOp::create(b, loc, i, two),
                                    arith::ConstantIndexOp::create(b, loc, 0));
          Value pe = arith::SelectOp::create(
              b, loc, odd, math::CosOp::create(b, loc, angle),
              math::SinOp::create(b, loc, angle));
          return arith::AddFOp::create(b, loc, args[0], pe);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct LayerNormPattern : KilnPattern<LayerNormOp> {
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(LayerNormOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    auto type = resultType(op);
    int64_t rank = type.getRank();
    int64_t axis = rank - 1;
    Value x = adaptor.getInput();
    bool stdEps = op.getMode() == NormMode::std_eps;
    Value width = e.sizeAsFloat(x, axis);
    auto add = [](OpBuilder &b, Location loc, Value v, Value acc) -> Value {
      return arith::AddFOp::create(b, loc, v, acc);
    };
    Value sum = e.reduce(x, axis, 0.0, add);
    SmallVector<OpFoldResult> rows = e.sizes(sum);
    AffineMap reduced = e.dropping(rank, axis);
    int64_t rowRank = rank - 1;
    SmallVector<IteratorType> rowIterators(rowRank, IteratorType::parallel);
    Value mean =
        e.generic(sum.getType(), sum, e.empty(rows, e.f32()),
                  {e.identity(rowRank), e.identity(rowRank)}, rowIterators,
                  [&](OpBuilder &b, Location loc, ValueRange args) {
                    return arith::DivFOp::create(b, loc, args[0], width);
                  });
    SmallVector<IteratorType> iterators(rank, IteratorType::parallel);
    iterators[axis] = IteratorType::reduction;
    Value sq0 = e.filled(rows, 0.0);
    Value sq = e.generic(sq0.getType(), ValueRange{x, mean}, sq0,
                         {e.identity(rank), reduced, reduced}, iterators,
                         [](OpBuilder &b, Location loc, ValueRange args) {
                           Value d =
                               arith::SubFOp::create(b, loc, args[0], args[1]);
                           Value d2 = arith::MulFOp::create(b, loc, d, d);
                           return arith::AddFOp::create(b, loc, d2, args[2]);
                         });
    // Per row: the factor that multiplies (x - mean).
    float eps = float(op.getEps().convertToDouble());
    Value count = width;
    if (stdEps) {
      count = arith::SubFOp::create(rewriter, op.getLoc(), width, e.f32c(1.0));
    }
    Value inv = e.generic(
        sq.getType(), sq, e.empty(rows, e.f32()),
        {e.identity(rowRank), e.identity(rowRank)}, rowIterators,
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          Value var = arith::DivFOp::create(b, loc, args[0], count);
          Value epsC =
              arith::ConstantOp::create(b, loc, b.getF32FloatAttr(eps));
          Value one =
              arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f));
          if (stdEps) {
            Value sd = math::SqrtOp::create(b, loc, var);
            return arith::DivFOp::create(
                b, loc, one, arith::AddFOp::create(b, loc, sd, epsC));
          }
          return math::RsqrtOp::create(
              b, loc, arith::AddFOp::create(b, loc, var, epsC));
        });
    AffineMap feature = e.select(rank, {axis});
    SmallVector<IteratorType> parallel(rank, IteratorType::parallel);
    Value result = e.generic(
        type, ValueRange{x, mean, inv, adaptor.getGamma(), adaptor.getBeta()},
        e.empty(e.sizes(x), e.f32()),
        {e.identity(rank), reduced, reduced, feature, feature,
         e.identity(rank)},
        parallel, [](OpBuilder &b, Location loc, ValueRange args) {
          Value centered = arith::SubFOp::create(b, loc, args[0], args[1]);
          Value norm = arith::MulFOp::create(b, loc, centered, args[2]);
          Value scaled = arith::MulFOp::create(b, loc, norm, args[3]);
          return arith::AddFOp::create(b, loc, scaled, args[4]);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct LinearPattern : KilnPattern<LinearOp> {
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(LinearOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    // The weight a 2-D transpose makes (dx = g·W of a linear's gradient) is
    // read where it was, [K, N]: the transpose, left unused, goes away.
    auto transpose = op.getWeight().getDefiningOp<TransposeOp>();
    if (transpose && transpose.getPermutation() == ArrayRef<int64_t>{1, 0}) {
      rewriter.replaceOp(
          op, e.linear(adaptor.getInput(),
                       rewriter.getRemappedValue(transpose.getInput()),
                       adaptor.getBias(), resultType(op), /*storedKN=*/true));
      return success();
    }
    rewriter.replaceOp(op, e.linear(adaptor.getInput(), adaptor.getWeight(),
                                    adaptor.getBias(), resultType(op)));
    return success();
  }
};

struct MatmulPattern : KilnPattern<MatmulOp> {
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(MatmulOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    auto type = resultType(op);
    int64_t rank = type.getRank();
    int64_t batch = rank - 2;
    // Loops: batch..., m, n, k.
    int64_t loops = rank + 1;
    int64_t m = batch, n = batch + 1, k = batch + 2;
    SmallVector<int64_t> lhsDims, rhsDims, outDims;
    for (int64_t d = 0; d < batch; ++d) {
      lhsDims.push_back(d);
      rhsDims.push_back(d);
      outDims.push_back(d);
    }
    lhsDims.append(op.getTransposeLhs() ? SmallVector<int64_t>{k, m}
                                        : SmallVector<int64_t>{m, k});
    // B stored [.., N, K] is read as it is stored, (n, k), as kiln.linear
    // reads its weight: on the CPU, kiln-tile-and-vectorize copies it
    // transposed block by block (batch by batch) while the block is in
    // cache, instead of a transpose of all of B first.
    rhsDims.append(op.getTransposeRhs() ? SmallVector<int64_t>{n, k}
                                        : SmallVector<int64_t>{k, n});
    outDims.append({m, n});
    Value lhs = adaptor.getLhs(), rhs = adaptor.getRhs();
    SmallVector<OpFoldResult> shape;
    for (int64_t d = 0; d < batch; ++d) {
      shape.push_back(e.size(lhs, d));
    }
    shape.push_back(e.size(lhs, op.getTransposeLhs() ? rank - 1 : rank - 2));
    shape.push_back(e.size(rhs, op.getTransposeRhs() ? rank - 2 : rank - 1));
    SmallVector<IteratorType> iterators(loops, IteratorType::parallel);
    iterators[k] = IteratorType::reduction;
    Value result =
        e.generic(type, ValueRange{lhs, rhs}, e.filled(shape, 0.0),
                  {e.select(loops, lhsDims), e.select(loops, rhsDims),
                   e.select(loops, outDims)},
                  iterators, mulAdd);
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// softmax and log_softmax, one pattern for both.
template <typename Op, bool Log>
struct SoftmaxLikePattern : KilnPattern<Op> {
  using KilnPattern<Op>::KilnPattern;
  using OpAdaptor = typename Op::Adaptor;
  LogicalResult
  matchAndRewrite(Op op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    int64_t axis = normalizedAxis(op.getAxis(), this->resultType(op).getRank());
    rewriter.replaceOp(op, e.softmax(adaptor.getInput(), axis, Log));
    return success();
  }
};
using SoftmaxPattern = SoftmaxLikePattern<SoftmaxOp, false>;
using LogSoftmaxPattern = SoftmaxLikePattern<LogSoftmaxOp, true>;

/// The loops of a reduction of `x` over `axes`: which dimensions are
/// reduced, the iterator types, and the kept dimensions with their sizes.
struct ReductionLoops {
  ReductionLoops(Emitter &e, Value x, ArrayRef<int64_t> axes) {
    int64_t rank = Emitter::type(x).getRank();
    reduced.assign(rank, false);
    for (int64_t axis : axes) {
      reduced[axis < 0 ? axis + rank : axis] = true;
    }
    for (int64_t d = 0; d < rank; ++d) {
      iterators.push_back(reduced[d] ? IteratorType::reduction
                                     : IteratorType::parallel);
      if (!reduced[d]) {
        keptSizes.push_back(e.size(x, d));
        keptDims.push_back(d);
      }
    }
  }
  SmallVector<bool> reduced;
  SmallVector<IteratorType> iterators;
  SmallVector<int64_t> keptDims;
  SmallVector<OpFoldResult> keptSizes;
};

struct ReducePattern : KilnPattern<ReduceOp> {
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(ReduceOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    Value x = adaptor.getInput();
    int64_t rank = Emitter::type(x).getRank();
    ReductionLoops loops(e, x, op.getAxes());
    ArrayRef<bool> reduced = loops.reduced;
    ArrayRef<OpFoldResult> shape = loops.keptSizes;
    ArrayRef<int64_t> keptDims = loops.keptDims;
    ArrayRef<IteratorType> iterators = loops.iterators;
    bool isMax = op.getKind() == ReduceKind::max;
    Value acc = e.filled(shape, isMax ? -INFINITY : 0.0);
    Value result = e.generic(
        acc.getType(), x, acc, {e.identity(rank), e.select(rank, keptDims)},
        iterators, [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          if (isMax) {
            return arith::MaximumFOp::create(b, loc, args[0], args[1]);
          }
          return arith::AddFOp::create(b, loc, args[0], args[1]);
        });
    if (op.getKind() == ReduceKind::mean) {
      Value count = e.f32c(1.0);
      for (int64_t d = 0; d < rank; ++d) {
        if (reduced[d]) {
          count = arith::MulFOp::create(rewriter, op.getLoc(), count,
                                        e.sizeAsFloat(x, d));
        }
      }
      auto compact = cast<RankedTensorType>(result.getType());
      result =
          e.elementwise(compact, shape, result,
                        [&](OpBuilder &b, Location loc, ValueRange args) {
                          return arith::DivFOp::create(b, loc, args[0], count);
                        });
    }
    if (op.getKeepDims()) {
      SmallVector<ReassociationIndices> groups;
      SmallVector<OpFoldResult> outShape;
      ReassociationIndices group;
      for (int64_t d = 0; d < rank; ++d) {
        group.push_back(d);
        outShape.push_back(reduced[d] ? rewriter.getIndexAttr(1)
                                      : e.size(x, d));
        if (!reduced[d]) {
          groups.push_back(group);
          group.clear();
        }
      }
      if (!group.empty() && !groups.empty()) {
        groups.back().append(group.begin(), group.end());
      }
      result = tensor::ExpandShapeOp::create(
          rewriter, op.getLoc(), resultType(op), result, groups, outShape);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// dx = g · [x == max] / count(x == max) over each reduced slice, the maxima
/// and counts recomputed in two reductions.
struct ReduceMaxGradPattern : KilnPattern<ReduceMaxGradOp> {
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(ReduceMaxGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    Value x = adaptor.getInput();
    int64_t rank = Emitter::type(x).getRank();
    ReductionLoops loops(e, x, op.getAxes());
    ArrayRef<OpFoldResult> compact = loops.keptSizes;
    ArrayRef<IteratorType> iterators = loops.iterators;
    // grad is indexed by the kept dimensions (and 0 for kept reduced ones).
    SmallVector<AffineExpr> gradExprs;
    for (int64_t d = 0; d < rank; ++d) {
      if (!loops.reduced[d]) {
        gradExprs.push_back(rewriter.getAffineDimExpr(d));
      } else if (op.getKeepDims()) {
        gradExprs.push_back(rewriter.getAffineConstantExpr(0));
      }
    }
    AffineMap all = e.identity(rank), kept = e.select(rank, loops.keptDims);
    AffineMap gradMap =
        AffineMap::get(rank, 0, gradExprs, rewriter.getContext());
    Value lowest = e.filled(compact, -INFINITY);
    Value max =
        e.generic(lowest.getType(), x, lowest, {all, kept}, iterators,
                  [](OpBuilder &b, Location loc, ValueRange args) -> Value {
                    return arith::MaximumFOp::create(b, loc, args[0], args[1]);
                  });
    auto isMax = [](OpBuilder &b, Location loc, Value v, Value m) {
      return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, v, m);
    };
    Value count = e.generic(
        max.getType(), ValueRange{x, max}, e.filled(compact, 0.0),
        {all, kept, kept}, iterators,
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          Value one = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1));
          Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
          Value add = arith::SelectOp::create(
              b, loc, isMax(b, loc, args[0], args[1]), one, zero);
          return arith::AddFOp::create(b, loc, args[2], add);
        });
    SmallVector<IteratorType> parallel(rank, IteratorType::parallel);
    Value dx = e.generic(
        resultType(op), ValueRange{x, max, count, adaptor.getGrad()},
        e.empty(e.sizes(x), e.f32()), {all, kept, kept, gradMap, all}, parallel,
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
          Value share = arith::DivFOp::create(b, loc, args[3], args[2]);
          return arith::SelectOp::create(
              b, loc, isMax(b, loc, args[0], args[1]), share, zero);
        });
    rewriter.replaceOp(op, dx);
    return success();
  }
};

struct ReshapePattern : KilnPattern<ReshapeOp> {
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(ReshapeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
    auto type = resultType(op);
    int64_t inRank = Emitter::type(x).getRank();
    // numel of the input, and the product of the non-inferred sizes.
    Value numel = e.index(1);
    for (int64_t d = 0; d < inRank; ++d) {
      numel = arith::MulIOp::create(rewriter, loc, numel, e.sizeValue(x, d));
    }
    SmallVector<Value> sizes;
    std::optional<size_t> inferred;
    Value known = e.index(1);
    for (auto [i, entry] : llvm::enumerate(op.getShape())) {
      Value size;
      if (entry == -1) {
        inferred = i;
        sizes.push_back(Value());
        continue;
      }
      size = entry == 0 ? e.sizeValue(x, i) : e.index(entry);
      known = arith::MulIOp::create(rewriter, loc, known, size);
      sizes.push_back(size);
    }
    if (inferred) {
      sizes[*inferred] = arith::DivUIOp::create(rewriter, loc, numel, known);
    }
    SmallVector<Value> asI64;
    for (Value s : sizes) {
      asI64.push_back(
          arith::IndexCastOp::create(rewriter, loc, rewriter.getI64Type(), s));
    }
    Value shape = tensor::FromElementsOp::create(rewriter, loc, asI64);
    Value result = tensor::ReshapeOp::create(rewriter, loc, type, x, shape);
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct TransposePattern : KilnPattern<TransposeOp> {
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(TransposeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    Value x = adaptor.getInput();
    SmallVector<OpFoldResult> shape;
    for (int64_t p : op.getPermutation()) {
      shape.push_back(e.size(x, p));
    }
    Value init = e.empty(shape, e.f32());
    auto transposed = linalg::TransposeOp::create(rewriter, op.getLoc(), x,
                                                  init, op.getPermutation());
    rewriter.replaceOp(op, transposed.getResult());
    return success();
  }
};

struct SlicePattern : KilnPattern<SliceOp> {
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(SliceOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
    auto type = resultType(op);
    int64_t rank = type.getRank();
    int64_t axis = normalizedAxis(op.getAxis(), rank);
    Value dim = e.sizeValue(x, axis);
    auto bound = [&](int64_t v) -> Value {
      return v < 0 ? arith::AddIOp::create(rewriter, loc, dim, e.index(v))
                         .getResult()
                   : e.index(v);
    };
    // Clamp into [0, dim] so that no run-time size reads out of bounds.
    auto clamp = [&](Value v) -> Value {
      Value low = arith::MaxSIOp::create(rewriter, loc, v, e.index(0));
      return arith::MinSIOp::create(rewriter, loc, low, dim);
    };
    Value start = clamp(bound(op.getStart()));
    OpFoldResult length;
    if (!type.isDynamicDim(axis)) {
      length = rewriter.getIndexAttr(type.getDimSize(axis));
    } else {
      Value end = op.getEnd() ? clamp(bound(*op.getEnd())) : dim;
      Value diff = arith::SubIOp::create(rewriter, loc, end, start);
      length =
          arith::MaxSIOp::create(rewriter, loc, diff, e.index(0)).getResult();
    }
    SmallVector<OpFoldResult> offsets(rank, rewriter.getIndexAttr(0));
    SmallVector<OpFoldResult> sizes = e.sizes(x);
    SmallVector<OpFoldResult> strides(rank, rewriter.getIndexAttr(1));
    offsets[axis] = start;
    sizes[axis] = length;
    Value result = tensor::ExtractSliceOp::create(rewriter, loc, type, x,
                                                  offsets, sizes, strides);
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct ConcatPattern : KilnPattern<ConcatOp> {
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(ConcatOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    Location loc = op.getLoc();
    auto type = resultType(op);
    int64_t rank = type.getRank();
    int64_t axis = normalizedAxis(op.getAxis(), rank);
    ValueRange inputs = adaptor.getInputs();
    SmallVector<OpFoldResult> shape = e.sizes(inputs.front());
    Value total = e.index(0);
    for (Value input : inputs) {
      total =
          arith::AddIOp::create(rewriter, loc, total, e.sizeValue(input, axis));
    }
    shape[axis] = total;
    Value result = e.empty(shape, e.f32());
    Value offset = e.index(0);
    // A result with no elements is complete as it is, and a piece with none
    // adds nothing: an insert_slice of either at the end of a dimension of
    // static size would be out of bounds (offset == size) to its verifier.
    bool empty = llvm::is_contained(type.getShape(), 0);
    for (Value input : empty ? ValueRange() : inputs) {
      if (cast<RankedTensorType>(input.getType()).getDimSize(axis) == 0) {
        continue;
      }
      SmallVector<OpFoldResult> offsets(rank, rewriter.getIndexAttr(0));
      SmallVector<OpFoldResult> strides(rank, rewriter.getIndexAttr(1));
      offsets[axis] = offset;
      result = tensor::InsertSliceOp::create(rewriter, loc, input, result,
                                             offsets, e.sizes(input), strides);
      offset = arith::AddIOp::create(rewriter, loc, offset,
                                     e.sizeValue(input, axis));
    }
    if (result.getType() != type) {
      result = tensor::CastOp::create(rewriter, loc, type, result);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Splat constants of more elements than this lower to fills.
constexpr int64_t kMaxSplatConstant = 4096;

struct ConstantPattern : KilnPattern<ConstantOp> {
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(ConstantOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto value = dyn_cast<DenseElementsAttr>(op.getValue());
    if (!value) {
      return rewriter.notifyMatchFailure(op, "only dense constants lower");
    }
    // A large splat is a fill: as a constant it would become an array of
    // every element in the object (4e9 elements: 16 GB at compile time).
    auto type = cast<RankedTensorType>(value.getType());
    if (value.isSplat() && type.getNumElements() > kMaxSplatConstant) {
      Location loc = op.getLoc();
      Value scalar = arith::ConstantOp::create(
          rewriter, loc, value.getSplatValue<TypedAttr>());
      Value empty = tensor::EmptyOp::create(rewriter, loc, type.getShape(),
                                            type.getElementType());
      rewriter.replaceOp(
          op,
          linalg::FillOp::create(rewriter, loc, scalar, empty).getResult(0));
      return success();
    }
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, value);
    return success();
  }
};

/// Scaled dot-product attention on projected [B, T, D] inputs, shared by
/// kiln.mha, kiln.attention and kiln.attention_grad.
struct Attention {
  Emitter &e;
  int64_t heads, headDim;
  bool causal;
  Value mask, seed;
  double dropout;
  int64_t stream;
  Value query, key; // [B, Tq, D] and [B, Tk, D]

  OpBuilder &b() { return e.b; }
  Location loc() { return e.loc; }

  /// [B, T, D] -> [B, T, H, dh]
  Value split(Value x) {
    auto t = Emitter::type(x);
    auto splitType = RankedTensorType::get(
        {t.getDimSize(0), t.getDimSize(1), heads, headDim}, e.f32());
    SmallVector<OpFoldResult> shape = {e.size(x, 0), e.size(x, 1),
                                       b().getIndexAttr(heads),
                                       b().getIndexAttr(headDim)};
    return tensor::ExpandShapeOp::create(
        b(), loc(), splitType, x,
        ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3}}, shape);
  }
  /// [B, T, H, dh] -> [B, T, D]
  Value merge(Value x) {
    return tensor::CollapseShapeOp::create(
        b(), loc(), x, ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3}});
  }
  /// [B, T, H, dh] -> [B, H, dh, T] (rows of keys or values contiguous).
  Value headsMajor(Value xh, Value like) {
    SmallVector<OpFoldResult> shape = {e.size(like, 0), b().getIndexAttr(heads),
                                       b().getIndexAttr(headDim),
                                       e.size(like, 1)};
    return linalg::TransposeOp::create(b(), loc(), xh, e.empty(shape, e.f32()),
                                       ArrayRef<int64_t>{0, 2, 3, 1})
        .getResult()[0];
  }
  RankedTensorType scoreType() {
    auto q = Emitter::type(query), k = Emitter::type(key);
    return RankedTensorType::get(
        {q.getDimSize(0), heads, q.getDimSize(1), k.getDimSize(1)}, e.f32());
  }
  SmallVector<OpFoldResult> scoreShape() {
    return {e.size(query, 0), b().getIndexAttr(heads), e.size(query, 1),
            e.size(key, 1)};
  }
  /// Inside a generic: whether key j (loop `jDim`, plus `jOffset` if
  /// given) is visible from query i (loop `iDim`): the padding mask value
  /// `maskArg` (or null) is non-zero and, causal, j <= i + `shift`. Null
  /// when every score is visible.
  Value visibleAt(OpBuilder &nb, Location l, Value maskArg, int64_t iDim,
                  int64_t jDim, Value jOffset, Value shift) {
    Value visible;
    if (maskArg) {
      Value zero = arith::ConstantOp::create(
          nb, l, nb.getIntegerAttr(maskArg.getType(), 0));
      visible =
          arith::CmpIOp::create(nb, l, arith::CmpIPredicate::ne, maskArg, zero);
    }
    if (causal) {
      Value i = linalg::IndexOp::create(nb, l, iDim);
      Value j = linalg::IndexOp::create(nb, l, jDim);
      if (jOffset) {
        j = arith::AddIOp::create(nb, l, j, jOffset);
      }
      Value limit = arith::AddIOp::create(nb, l, i, shift);
      Value c =
          arith::CmpIOp::create(nb, l, arith::CmpIPredicate::sle, j, limit);
      visible =
          visible ? arith::AndIOp::create(nb, l, visible, c).getResult() : c;
    }
    return visible;
  }
  /// Whether score (b, h, i, j) is visible, inside a 4-loop generic.
  Value keep(OpBuilder &nb, Location l, Value maskArg, Value shift) {
    return visibleAt(nb, l, maskArg, 2, 3, Value(), shift);
  }
  Value shift() {
    return arith::SubIOp::create(b(), loc(), e.sizeValue(key, 1),
                                 e.sizeValue(query, 1));
  }
  /// Σ_d lhs[b, i, h, d]·rhsT[b, h, d, j] into [B, H, Tq, Tk].
  Value rowProducts(Value lhs, Value rhsT) {
    return e.generic(
        scoreType(), ValueRange{lhs, rhsT}, e.filled(scoreShape(), 0.0),
        {e.select(5, {0, 2, 1, 4}), e.select(5, {0, 1, 4, 3}),
         e.select(5, {0, 1, 2, 3})},
        {IteratorType::parallel, IteratorType::parallel, IteratorType::parallel,
         IteratorType::parallel, IteratorType::reduction},
        mulAdd);
  }
  /// The attention probabilities [B, H, Tq, Tk] (before dropout).
  Value probabilities(Value qh, Value kh) {
    Value raw = rowProducts(qh, headsMajor(kh, key));
    float scale = float(1.0 / std::sqrt(double(headDim)));
    SmallVector<Value> inputs = {raw};
    SmallVector<AffineMap> maps = {e.identity(4)};
    if (mask) {
      inputs.push_back(mask);
      maps.push_back(e.select(4, {0, 3}));
    }
    maps.push_back(e.identity(4));
    Value sh = shift();
    Value scores = e.generic(
        scoreType(), inputs, e.empty(scoreShape(), e.f32()), maps,
        SmallVector<IteratorType>(4, IteratorType::parallel),
        [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
          Value s = arith::MulFOp::create(
              nb, l, args[0],
              arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(scale)));
          Value visible = keep(nb, l, mask ? args[1] : Value(), sh);
          if (!visible) {
            return s;
          }
          Value masked = arith::ConstantOp::create(
              nb, l, nb.getF32FloatAttr(float(kMaskedScore)));
          return arith::SelectOp::create(nb, l, visible, s, masked);
        });
    return e.softmax(scores, 3, /*log=*/false);
  }
  /// x · the dropout scale of each score position (x unchanged when p = 0).
  Value withDropout(Value x) {
    if (dropout <= 0.0) {
      return x;
    }
    SmallVector<Value> sizes = {e.sizeValue(query, 0), e.index(heads),
                                e.sizeValue(query, 1), e.sizeValue(key, 1)};
    Value s = seed;
    int64_t st = stream;
    double p = dropout;
    return e.elementwise(scoreType(), scoreShape(), x,
                         [&](OpBuilder &nb, Location l, ValueRange args) {
                           Value scale = Emitter::dropoutScale(
                               nb, l, s, st, p, {0, 1, 2, 3}, sizes);
                           return arith::MulFOp::create(nb, l, args[0], scale);
                         });
  }
  /// Σ over the score dimension not kept of w[b, h, i, j]·xh[.., h, d], into
  /// [B, T, H, dh] shaped like `like` ([B, T, D]): `wDims` says where the
  /// loops (b, h, t, d, r) — t kept, r reduced — index the weights.
  Value headContraction(Value w, ArrayRef<int64_t> wDims, Value xh,
                        Value like) {
    SmallVector<OpFoldResult> shape = {e.size(like, 0), e.size(like, 1),
                                       b().getIndexAttr(heads),
                                       b().getIndexAttr(headDim)};
    auto t = Emitter::type(like);
    auto type = RankedTensorType::get(
        {t.getDimSize(0), t.getDimSize(1), heads, headDim}, e.f32());
    return e.generic(type, ValueRange{w, xh}, e.filled(shape, 0.0),
                     {e.select(5, wDims), e.select(5, {0, 4, 1, 3}),
                      e.select(5, {0, 2, 1, 3})},
                     {IteratorType::parallel, IteratorType::parallel,
                      IteratorType::parallel, IteratorType::parallel,
                      IteratorType::reduction},
                     mulAdd);
  }
  /// Σ_j w[b, h, i, j]·xh[b, j, h, d] into [B, Tq, H, dh].
  Value weightedRows(Value w, Value xh) {
    return headContraction(w, {0, 1, 2, 4}, xh, query);
  }
  /// Σ_i w[b, h, i, j]·xh[b, i, h, d] into [B, Tk, H, dh] (the key/value
  /// side of the backward pass).
  Value weightedColumns(Value w, Value xh) {
    return headContraction(w, {0, 1, 4, 2}, xh, key);
  }
  /// The forward output [B, Tq, D].
  Value forward(Value value) {
    Value qh = split(query), kh = split(key), vh = split(value);
    Value probs = withDropout(probabilities(qh, kh));
    return merge(weightedRows(probs, vh));
  }

  /// The forward output [B, Tq, D], computed as flash attention does: one
  /// parallel iteration per (batch, head, block of `block` query rows)
  /// runs over blocks of `block` keys with an online softmax (a running row
  /// maximum m and sum l; the accumulated output and l are rescaled by
  /// exp(m_old - m_new) when the maximum grows), and divides by l at the
  /// end. Causal: keys past the block's last visible one are not visited
  /// (their weights would be exp(-1e9 - m) = 0), unless a row of the block
  /// sees no key at all, which attends uniformly to every key as in
  /// `forward`. Dropout scales the weights after l is summed, as it scales
  /// the normalized probabilities there.
  Value fusedForward(Value value, int64_t block) {
    OpBuilder &rb = b();
    Location l = loc();
    Flash f = flash(block);
    Value vh = split(value);
    auto forall = scf::ForallOp::create(
        rb, l,
        ArrayRef<OpFoldResult>{f.batch, rb.getIndexAttr(heads),
                               ceilDiv(f.tq, block)},
        ValueRange{e.empty(headShape(query), e.f32())}, std::nullopt);
    OpBuilder::InsertionGuard guard(rb);
    rb.setInsertionPoint(forall.getTerminator());
    QueryBlock qb =
        queryBlock(f, forall.getInductionVar(0), forall.getInductionVar(1),
                   mulIndex(forall.getInductionVar(2), block));
    Value qBlock = headRows(f.qh, qb, qb.q0, qb.rows);
    // The output accumulates in its place in the result (a fresh block
    // would be copied there at the end).
    Value outSlice =
        headRows(forall.getRegionIterArgs()[0], qb, qb.q0, qb.rows);
    Value acc0 = linalg::FillOp::create(rb, l, ValueRange{e.f32c(0.0)},
                                        ValueRange{outSlice})
                     .getResult(0);
    auto loop = keyLoop(
        f, qb,
        {e.filled(qb.rowShape, -INFINITY), e.filled(qb.rowShape, 0.0), acc0});
    {
      OpBuilder::InsertionGuard inner(rb);
      rb.setInsertionPointToStart(loop.getBody());
      KeyBlock kb = keyBlock(f, qb, loop.getInductionVar());
      Value m = loop.getRegionIterArgs()[0];
      Value sum = loop.getRegionIterArgs()[1];
      Value acc = loop.getRegionIterArgs()[2];
      Value scores = blockScores(f, qb, kb, qBlock);
      Online o = onlineStep(qb, kb, scores, m, sum);
      Value weights = withBlockDropout(f, qb, kb, o.weights);
      // acc_new = acc·alpha + weights·V.
      Value scaledAcc = e.generic(
          rowsType(headDim), o.alpha, acc, {e.select(2, {0}), e.identity(2)},
          {IteratorType::parallel, IteratorType::parallel},
          [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
            return arith::MulFOp::create(nb, nl, args[1], args[0]);
          });
      Value accNew = blockProduct(
          weights, {0, 2}, headRows(vh, qb, kb.k0, kb.cols), {2, 1}, scaledAcc);
      scf::YieldOp::create(rb, l,
                           ValueRange{finishMax(o.rowMax, m), o.sum, accNew});
    }
    // The block's output: acc / l, in place.
    Value outBlock =
        e.generic(rowsType(headDim), loop.getResult(1), loop.getResult(2),
                  {e.select(2, {0}), e.identity(2)},
                  {IteratorType::parallel, IteratorType::parallel},
                  [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
                    return arith::DivFOp::create(nb, nl, args[1], args[0]);
                  });
    rb.setInsertionPointToStart(forall.getTerminator().getBody());
    insertHeadRows(outBlock, forall.getRegionIterArgs()[0], qb, qb.q0, qb.rows);
    rb.setInsertionPointAfter(forall);
    return merge(forall.getResult(0));
  }

  /// The gradients (dQ, dK, dV) of `fusedForward`, block by block as
  /// flash attention's backward pass computes them: one parallel iteration
  /// per (batch, head) (dK and dV sum over the query blocks) runs over
  /// blocks of `block` query rows; for each, a first pass over the key
  /// blocks recomputes the row maxima m and sums l, and a second recomputes
  /// the probabilities P = exp(s - m)/l block by block and adds
  ///   dP = dropout(dO·Vᵀ), dS = P·(dP - D)·scale (0 where masked),
  ///   dQ += dS·K, dK += dSᵀ·Q, dV += dropout(P)ᵀ·dO,
  /// where D = Σ_j dP·P of a row is dO·O, from the forward output `output`.
  /// The key blocks visited are those of `fusedForward`.
  SmallVector<Value> fusedBackward(Value grad, Value value, Value output,
                                   int64_t block) {
    OpBuilder &rb = b();
    Location l = loc();
    Flash f = flash(block);
    Value kh = split(key), vh = split(value), gh = split(grad),
          oh = split(output);
    auto forall = scf::ForallOp::create(
        rb, l, ArrayRef<OpFoldResult>{f.batch, rb.getIndexAttr(heads)},
        ValueRange{e.empty(headShape(query), e.f32()),
                   e.empty(headShape(key), e.f32()),
                   e.empty(headShape(key), e.f32())},
        std::nullopt);
    OpBuilder::InsertionGuard guard(rb);
    rb.setInsertionPoint(forall.getTerminator());
    Value bi = forall.getInductionVar(0), h = forall.getInductionVar(1);
    QueryBlock whole{bi, h, f.zero, f.tq, f.tk, f.shift, {}};
    auto zeroed = [&](Value out, Value rows) {
      return linalg::FillOp::create(
                 rb, l, ValueRange{e.f32c(0.0)},
                 ValueRange{headRows(out, whole, f.zero, rows)})
          .getResult(0);
    };
    auto outs = forall.getRegionIterArgs();
    auto queryLoop = scf::ForOp::create(
        rb, l, f.zero, ceilDiv(f.tq, block), e.index(1),
        ValueRange{zeroed(outs[0], f.tq), zeroed(outs[1], f.tk),
                   zeroed(outs[2], f.tk)});
    {
      OpBuilder::InsertionGuard inQuery(rb);
      rb.setInsertionPointToStart(queryLoop.getBody());
      QueryBlock qb =
          queryBlock(f, bi, h, mulIndex(queryLoop.getInductionVar(), block));
      Value dqAll = queryLoop.getRegionIterArgs()[0];
      Value dkAll = queryLoop.getRegionIterArgs()[1];
      Value dvAll = queryLoop.getRegionIterArgs()[2];
      Value qBlock = headRows(f.qh, qb, qb.q0, qb.rows);
      Value gBlock = headRows(gh, qb, qb.q0, qb.rows);
      // Pass 1: the row maxima and sums.
      auto stats = keyLoop(
          f, qb,
          {e.filled(qb.rowShape, -INFINITY), e.filled(qb.rowShape, 0.0)});
      {
        OpBuilder::InsertionGuard inStats(rb);
        rb.setInsertionPointToStart(stats.getBody());
        KeyBlock kb = keyBlock(f, qb, stats.getInductionVar());
        Value m = stats.getRegionIterArgs()[0];
        Value sum = stats.getRegionIterArgs()[1];
        Online o = onlineStep(qb, kb, blockScores(f, qb, kb, qBlock), m, sum);
        scf::YieldOp::create(rb, l, ValueRange{finishMax(o.rowMax, m), o.sum});
      }
      Value m = stats.getResult(0), sum = stats.getResult(1);
      // D = Σ_d dO·O per row.
      Value rowDot = e.generic(
          rowsType(), ValueRange{gBlock, headRows(oh, qb, qb.q0, qb.rows)},
          e.filled(qb.rowShape, 0.0),
          {e.identity(2), e.identity(2), e.select(2, {0})},
          {IteratorType::parallel, IteratorType::reduction}, mulAdd);
      // Pass 2: the gradients.
      Value dq0 = extractRows(dqAll, qb.q0, qb.rows);
      auto grads = keyLoop(f, qb, {dq0, dkAll, dvAll});
      {
        OpBuilder::InsertionGuard inGrads(rb);
        rb.setInsertionPointToStart(grads.getBody());
        KeyBlock kb = keyBlock(f, qb, grads.getInductionVar());
        Value dq = grads.getRegionIterArgs()[0];
        Value dk = grads.getRegionIterArgs()[1];
        Value dv = grads.getRegionIterArgs()[2];
        Value scores = blockScores(f, qb, kb, qBlock);
        Value kBlock = headRows(kh, qb, kb.k0, kb.cols);
        Value vBlock = headRows(vh, qb, kb.k0, kb.cols);
        Value probs = e.generic(
            blockType(), ValueRange{scores, m, sum},
            e.empty(kb.scoreShape, e.f32()),
            {e.identity(2), e.select(2, {0}), e.select(2, {0}), e.identity(2)},
            {IteratorType::parallel, IteratorType::parallel},
            [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
              Value w = math::ExpOp::create(
                  nb, nl, arith::SubFOp::create(nb, nl, args[0], args[1]));
              return arith::DivFOp::create(nb, nl, w, args[2]);
            });
        Value dProbs =
            withBlockDropout(f, qb, kb,
                             blockProduct(gBlock, {0, 2}, vBlock, {1, 2},
                                          e.filled(kb.scoreShape, 0.0)));
        Value dropped = withBlockDropout(f, qb, kb, probs);
        float scale = float(1.0 / std::sqrt(double(headDim)));
        SmallVector<Value> inputs = {dProbs, probs, rowDot};
        SmallVector<AffineMap> maps = {e.identity(2), e.identity(2),
                                       e.select(2, {0})};
        Value maskBlock = blockMask(f, qb, kb);
        if (maskBlock) {
          inputs.push_back(maskBlock);
          maps.push_back(e.select(2, {1}));
        }
        maps.push_back(e.identity(2));
        Value dScores = e.generic(
            blockType(), inputs, e.empty(kb.scoreShape, e.f32()), maps,
            {IteratorType::parallel, IteratorType::parallel},
            [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
              Value d = arith::MulFOp::create(
                  nb, nl, args[1],
                  arith::SubFOp::create(nb, nl, args[0], args[2]));
              d = arith::MulFOp::create(
                  nb, nl, d,
                  arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(scale)));
              Value visible =
                  blockVisible(nb, nl, qb, kb, maskBlock ? args[3] : Value());
              if (!visible) {
                return d;
              }
              Value zero =
                  arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(0.0f));
              return arith::SelectOp::create(nb, nl, visible, d, zero);
            });
        Value dqNew = blockProduct(dScores, {0, 2}, kBlock, {2, 1}, dq);
        // dK and dV rows k0..k0+cols: Σ_i over the block's query rows.
        Value dkRows = extractRows(dk, kb.k0, kb.cols);
        Value dkNew =
            insertRows(blockProduct(dScores, {2, 0}, qBlock, {2, 1}, dkRows),
                       dk, kb.k0, kb.cols);
        Value dvRows = extractRows(dv, kb.k0, kb.cols);
        Value dvNew =
            insertRows(blockProduct(dropped, {2, 0}, gBlock, {2, 1}, dvRows),
                       dv, kb.k0, kb.cols);
        scf::YieldOp::create(rb, l, ValueRange{dqNew, dkNew, dvNew});
      }
      scf::YieldOp::create(
          rb, l,
          ValueRange{insertRows(grads.getResult(0), dqAll, qb.q0, qb.rows),
                     grads.getResult(1), grads.getResult(2)});
    }
    rb.setInsertionPointToStart(forall.getTerminator().getBody());
    SmallVector<Value> lengths = {f.tq, f.tk, f.tk};
    for (int i = 0; i < 3; ++i) {
      insertHeadRows(queryLoop.getResult(i), outs[i], whole, f.zero,
                     lengths[i]);
    }
    rb.setInsertionPointAfter(forall);
    return {merge(forall.getResult(0)), merge(forall.getResult(1)),
            merge(forall.getResult(2))};
  }

  // Pieces of the flash-attention loops.

  Value addIndex(Value x, Value y) {
    return arith::AddIOp::create(b(), loc(), x, y);
  }
  Value subIndex(Value x, Value y) {
    return arith::SubIOp::create(b(), loc(), x, y);
  }
  Value mulIndex(Value x, int64_t c) {
    return arith::MulIOp::create(b(), loc(), x, e.index(c));
  }
  Value minIndex(Value x, Value y) {
    return arith::MinSIOp::create(b(), loc(), x, y);
  }
  Value ceilDiv(Value x, int64_t c) {
    return arith::CeilDivSIOp::create(b(), loc(), x, e.index(c));
  }
  /// [rows, inner] with dynamic rows ([rows] when inner is 0).
  RankedTensorType rowsType(int64_t inner = 0) {
    if (inner == 0) {
      return RankedTensorType::get({ShapedType::kDynamic}, e.f32());
    }
    return RankedTensorType::get({ShapedType::kDynamic, inner}, e.f32());
  }
  RankedTensorType blockType() {
    return RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                                 e.f32());
  }
  /// [B, T, H, dh] of `like` ([B, T, D]).
  SmallVector<OpFoldResult> headShape(Value like) {
    return {e.size(like, 0), e.size(like, 1), b().getIndexAttr(heads),
            b().getIndexAttr(headDim)};
  }

  /// What every block of one attention shares.
  struct Flash {
    int64_t block;
    Value qh, kt;        ///< [B, Tq, H, dh], [B, H, dh, Tk]
    Value batch, tq, tk; ///< sizes
    Value shift, first;  ///< Tk - Tq; first kept key per batch row or null
    Value mask;          ///< i8 [B, Tk] or null
    Value zero;
  };
  Flash flash(int64_t block) {
    Flash f;
    f.block = block;
    f.qh = split(query);
    f.kt = headsMajor(split(key), key);
    f.batch = e.sizeValue(query, 0);
    f.tq = e.sizeValue(query, 1);
    f.tk = e.sizeValue(key, 1);
    f.shift = shift();
    f.first = causal && mask ? firstKeys() : Value();
    f.mask = mask;
    f.zero = e.index(0);
    return f;
  }
  /// Query rows q0..q0+rows of head h of batch row b, and the keys they
  /// visit: all, or (causal) up to the block's last visible one unless a
  /// row sees no key at all.
  struct QueryBlock {
    Value b, h, q0, rows, kEnd;
    Value rowShift; ///< q0 + Tk - Tq: query q0 + i sees keys <= i + rowShift
    SmallVector<OpFoldResult> rowShape;
  };
  QueryBlock queryBlock(const Flash &f, Value bi, Value h, Value q0) {
    QueryBlock qb{bi,   h,
                  q0,   minIndex(e.index(f.block), subIndex(f.tq, q0)),
                  f.tk, addIndex(q0, f.shift),
                  {}};
    qb.rowShape = {qb.rows};
    if (causal) {
      Value limit = minIndex(addIndex(addIndex(q0, qb.rows), f.shift), f.tk);
      Value firstKey = f.zero;
      if (f.first) {
        Value v =
            tensor::ExtractOp::create(b(), loc(), f.first, ValueRange{bi});
        firstKey =
            arith::IndexCastOp::create(b(), loc(), b().getIndexType(), v);
      }
      Value seesOne =
          arith::CmpIOp::create(b(), loc(), arith::CmpIPredicate::sge,
                                addIndex(q0, f.shift), firstKey);
      qb.kEnd = arith::SelectOp::create(b(), loc(), seesOne, limit, f.tk);
    }
    return qb;
  }
  /// The loop over the key blocks a query block visits, carrying `state`.
  scf::ForOp keyLoop(const Flash &f, const QueryBlock &qb,
                     ArrayRef<Value> state) {
    return scf::ForOp::create(b(), loc(), f.zero, ceilDiv(qb.kEnd, f.block),
                              e.index(1), state);
  }
  /// Keys k0..k0+cols of a query block's key loop at iteration `iv`.
  struct KeyBlock {
    Value k0, cols;
    SmallVector<OpFoldResult> scoreShape;
  };
  KeyBlock keyBlock(const Flash &f, const QueryBlock &qb, Value iv) {
    KeyBlock kb;
    kb.k0 = mulIndex(iv, f.block);
    kb.cols = minIndex(e.index(f.block), subIndex(qb.kEnd, kb.k0));
    kb.scoreShape = {qb.rows, kb.cols};
    return kb;
  }
  /// Rows t0..t0+rows of head qb.h, batch row qb.b of x [B, T, H, dh].
  Value headRows(Value x, const QueryBlock &qb, Value t0, Value rows) {
    OpFoldResult one = b().getIndexAttr(1);
    SmallVector<OpFoldResult> offsets = {qb.b, t0, qb.h, b().getIndexAttr(0)};
    SmallVector<OpFoldResult> sizes = {one, rows, one,
                                       b().getIndexAttr(headDim)};
    return tensor::ExtractSliceOp::create(b(), loc(), rowsType(headDim), x,
                                          offsets, sizes,
                                          SmallVector<OpFoldResult>(4, one));
  }
  void insertHeadRows(Value rows, Value into, const QueryBlock &qb, Value t0,
                      Value count) {
    OpFoldResult one = b().getIndexAttr(1);
    SmallVector<OpFoldResult> offsets = {qb.b, t0, qb.h, b().getIndexAttr(0)};
    SmallVector<OpFoldResult> sizes = {one, count, one,
                                       b().getIndexAttr(headDim)};
    tensor::ParallelInsertSliceOp::create(b(), loc(), rows, into, offsets,
                                          sizes,
                                          SmallVector<OpFoldResult>(4, one));
  }
  /// Rows r0..r0+rows of x [T, dh], and back.
  Value extractRows(Value x, Value r0, Value rows) {
    OpFoldResult one = b().getIndexAttr(1);
    SmallVector<OpFoldResult> offsets = {r0, b().getIndexAttr(0)};
    SmallVector<OpFoldResult> sizes = {rows, b().getIndexAttr(headDim)};
    return tensor::ExtractSliceOp::create(b(), loc(), rowsType(headDim), x,
                                          offsets, sizes,
                                          SmallVector<OpFoldResult>(2, one));
  }
  Value insertRows(Value rows, Value into, Value r0, Value count) {
    OpFoldResult one = b().getIndexAttr(1);
    SmallVector<OpFoldResult> offsets = {r0, b().getIndexAttr(0)};
    SmallVector<OpFoldResult> sizes = {count, b().getIndexAttr(headDim)};
    return tensor::InsertSliceOp::create(b(), loc(), rows, into, offsets, sizes,
                                         SmallVector<OpFoldResult>(2, one));
  }
  /// acc + Σ_r lhs·rhs over loops (p0, p1, r): `lhsDims`/`rhsDims` say which
  /// loops index each operand; acc is indexed by (p0, p1).
  Value blockProduct(Value lhs, ArrayRef<int64_t> lhsDims, Value rhs,
                     ArrayRef<int64_t> rhsDims, Value acc) {
    return e.generic(
        acc.getType(), ValueRange{lhs, rhs}, acc,
        {e.select(3, lhsDims), e.select(3, rhsDims), e.select(3, {0, 1})},
        {IteratorType::parallel, IteratorType::parallel,
         IteratorType::reduction},
        mulAdd);
  }
  /// The key block's padding mask [cols] (i8), or null.
  Value blockMask(const Flash &f, const QueryBlock &qb, const KeyBlock &kb) {
    if (!f.mask) {
      return Value();
    }
    OpFoldResult one = b().getIndexAttr(1);
    SmallVector<OpFoldResult> offsets = {qb.b, kb.k0};
    SmallVector<OpFoldResult> sizes = {one, kb.cols};
    return tensor::ExtractSliceOp::create(
        b(), loc(),
        RankedTensorType::get({ShapedType::kDynamic},
                              Emitter::type(f.mask).getElementType()),
        f.mask, offsets, sizes, SmallVector<OpFoldResult>(2, one));
  }
  /// Inside a [rows, cols] generic of a block: whether key k0 + j is
  /// visible from query q0 + i (null when every score is).
  Value blockVisible(OpBuilder &nb, Location nl, const QueryBlock &qb,
                     const KeyBlock &kb, Value maskArg) {
    return visibleAt(nb, nl, maskArg, 0, 1, kb.k0, qb.rowShift);
  }
  /// The scaled, masked scores [rows, cols] of a query block against a key
  /// block (Q rows times the transposed key block).
  Value blockScores(const Flash &f, const QueryBlock &qb, const KeyBlock &kb,
                    Value qBlock) {
    OpBuilder &rb = b();
    OpFoldResult one = rb.getIndexAttr(1);
    SmallVector<OpFoldResult> offsets = {qb.b, qb.h, rb.getIndexAttr(0), kb.k0};
    SmallVector<OpFoldResult> sizes = {one, one, rb.getIndexAttr(headDim),
                                       kb.cols};
    Value ktBlock = tensor::ExtractSliceOp::create(
        rb, loc(),
        RankedTensorType::get({headDim, ShapedType::kDynamic}, e.f32()), f.kt,
        offsets, sizes, SmallVector<OpFoldResult>(4, one));
    Value raw = blockProduct(qBlock, {0, 2}, ktBlock, {2, 1},
                             e.filled(kb.scoreShape, 0.0));
    SmallVector<Value> inputs = {raw};
    SmallVector<AffineMap> maps = {e.identity(2)};
    Value maskBlock = blockMask(f, qb, kb);
    if (maskBlock) {
      inputs.push_back(maskBlock);
      maps.push_back(e.select(2, {1}));
    }
    maps.push_back(e.identity(2));
    float scale = float(1.0 / std::sqrt(double(headDim)));
    return e.generic(
        blockType(), inputs, e.empty(kb.scoreShape, e.f32()), maps,
        {IteratorType::parallel, IteratorType::parallel},
        [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
          Value s = arith::MulFOp::create(
              nb, nl, args[0],
              arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(scale)));
          Value visible =
              blockVisible(nb, nl, qb, kb, maskBlock ? args[1] : Value());
          if (!visible) {
            return s;
          }
          Value masked = arith::ConstantOp::create(
              nb, nl, nb.getF32FloatAttr(float(kMaskedScore)));
          return arith::SelectOp::create(nb, nl, visible, s, masked);
        });
  }
  /// One step of the online softmax over a block of scores.
  struct Online {
    Value rowMax;  ///< the block's row maxima
    Value alpha;   ///< exp(m - m_new), the rescale of the old state
    Value weights; ///< exp(s - m_new)
    Value sum;     ///< l·alpha + Σ weights, in l's place
  };
  /// The loop's state is updated in place (bufferization wants each yielded
  /// value in its iter_arg's buffer): m becomes max(m, row maxima) last
  /// (finishMax), after every read of the old m.
  Online onlineStep(const QueryBlock &qb, const KeyBlock &kb, Value scores,
                    Value m, Value sum) {
    Online o;
    // (From the lowest float, not -inf: the -inf fill of the initial m would
    // be merged with this one by CSE, and m then copied each iteration.)
    o.rowMax = e.reduce(scores, 1, std::numeric_limits<float>::lowest(),
                        [](OpBuilder &nb, Location nl, Value v, Value a) {
                          return arith::MaximumFOp::create(nb, nl, v, a);
                        });
    Value mNew = e.generic(
        rowsType(), ValueRange{m, o.rowMax}, e.empty(qb.rowShape, e.f32()),
        {e.identity(1), e.identity(1), e.identity(1)}, {IteratorType::parallel},
        [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
          return arith::MaximumFOp::create(nb, nl, args[0], args[1]);
        });
    o.alpha = e.generic(
        rowsType(), ValueRange{m, mNew}, e.empty(qb.rowShape, e.f32()),
        {e.identity(1), e.identity(1), e.identity(1)}, {IteratorType::parallel},
        [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
          return math::ExpOp::create(
              nb, nl, arith::SubFOp::create(nb, nl, args[0], args[1]));
        });
    o.weights = e.generic(
        blockType(), ValueRange{scores, mNew}, e.empty(kb.scoreShape, e.f32()),
        {e.identity(2), e.select(2, {0}), e.identity(2)},
        {IteratorType::parallel, IteratorType::parallel},
        [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
          return math::ExpOp::create(
              nb, nl, arith::SubFOp::create(nb, nl, args[0], args[1]));
        });
    Value scaledSum =
        e.generic(rowsType(), o.alpha, sum, {e.identity(1), e.identity(1)},
                  {IteratorType::parallel},
                  [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
                    return arith::MulFOp::create(nb, nl, args[1], args[0]);
                  });
    o.sum = e.generic(rowsType(), o.weights, scaledSum,
                      {e.identity(2), e.select(2, {0})},
                      {IteratorType::parallel, IteratorType::reduction},
                      [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
                        return arith::AddFOp::create(nb, nl, args[0], args[1]);
                      });
    return o;
  }
  Value finishMax(Value rowMax, Value m) {
    return e.generic(rowsType(), rowMax, m, {e.identity(1), e.identity(1)},
                     {IteratorType::parallel},
                     [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
                       return arith::MaximumFOp::create(nb, nl, args[0],
                                                        args[1]);
                     });
  }
  /// x [rows, cols] times the dropout scale of each element's place
  /// (b, h, q0 + i, k0 + j) in [B, H, Tq, Tk] (x unchanged when p = 0).
  Value withBlockDropout(const Flash &f, const QueryBlock &qb,
                         const KeyBlock &kb, Value x) {
    if (dropout <= 0.0) {
      return x;
    }
    Value rowBase = addIndex(mulIndex(qb.b, heads), qb.h);
    return e.generic(
        blockType(), x, e.empty(kb.scoreShape, e.f32()),
        {e.identity(2), e.identity(2)},
        {IteratorType::parallel, IteratorType::parallel},
        [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
          Value i = arith::AddIOp::create(
              nb, nl, linalg::IndexOp::create(nb, nl, 0), qb.q0);
          Value j = arith::AddIOp::create(
              nb, nl, linalg::IndexOp::create(nb, nl, 1), kb.k0);
          Value row = arith::AddIOp::create(
              nb, nl, arith::MulIOp::create(nb, nl, rowBase, f.tq), i);
          Value linear = arith::AddIOp::create(
              nb, nl, arith::MulIOp::create(nb, nl, row, f.tk), j);
          Value scale =
              Emitter::dropoutScaleAt(nb, nl, seed, stream, dropout, linear);
          return arith::MulFOp::create(nb, nl, args[0], scale);
        });
  }

  /// Per batch row, the first key the padding mask keeps (Tk if none), as
  /// i64 [B]: a causal row before it sees no key at all.
  Value firstKeys() {
    Value tk = e.sizeValue(key, 1);
    Value tk64 = arith::IndexCastOp::create(b(), loc(), b().getI64Type(), tk);
    SmallVector<OpFoldResult> shape = {e.size(mask, 0)};
    Value init =
        linalg::FillOp::create(b(), loc(), ValueRange{tk64},
                               ValueRange{e.empty(shape, b().getI64Type())})
            .getResult(0);
    return e.generic(
        init.getType(), mask, init, {e.identity(2), e.select(2, {0})},
        {IteratorType::parallel, IteratorType::reduction},
        [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
          Value zero = arith::ConstantOp::create(
              nb, l, nb.getIntegerAttr(args[0].getType(), 0));
          Value kept = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::ne,
                                             args[0], zero);
          Value j = arith::IndexCastOp::create(
              nb, l, nb.getI64Type(), linalg::IndexOp::create(nb, l, 1));
          Value candidate = arith::SelectOp::create(nb, l, kept, j, args[1]);
          return arith::MinSIOp::create(nb, l, candidate, args[1]);
        });
  }
};

template <typename Op>
static Attention attentionFor(Emitter &e, Op op, Value query, Value key,
                              Value mask, Value seed) {
  // An i1 mask is widened to i8 once ([B, Tk] elements), so that the
  // [B, H, Tq, Tk] score kernels read bytes and stay vectorized: vectors of
  // i1 are bit-packed in memory, buffers of i1 hold a byte per element, and
  // kiln-tile-and-vectorize leaves ops on i1 buffers scalar.
  if (mask && Emitter::type(mask).getElementType().isInteger(1)) {
    auto maskType = Emitter::type(mask);
    mask = e.elementwise(
        RankedTensorType::get(maskType.getShape(), e.b.getI8Type()),
        e.sizes(mask), mask, [](OpBuilder &nb, Location l, ValueRange a) {
          return arith::ExtUIOp::create(nb, l, nb.getI8Type(), a[0]);
        });
  }
  int64_t dim = Emitter::type(query).getDimSize(2);
  int64_t heads = int64_t(op.getNumHeads());
  return Attention{e,
                   heads,
                   dim / heads,
                   op.getCausal(),
                   mask,
                   seed,
                   op.getDropout().convertToDouble(),
                   int64_t(op.getStream()),
                   query,
                   key};
}

/// Multi-head attention: the q/k/v projections, the attention core (scores
/// with scale and masks, softmax, dropout, the weighted sum of values), and
/// the output projection.
struct MultiHeadAttentionPattern : KilnPattern<MultiHeadAttentionOp> {
  MultiHeadAttentionPattern(MLIRContext *context, int64_t block)
      : KilnPattern(context), block(block) {}
  int64_t block; ///< > 0: Attention::fusedForward over blocks this large
  LogicalResult
  matchAndRewrite(MultiHeadAttentionOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    auto type = resultType(op);
    int64_t dim = type.getDimSize(2);
    Value query = adaptor.getQuery(), kv = adaptor.getKeyValue();
    auto projType = [&](Value x) {
      auto t = Emitter::type(x);
      return RankedTensorType::get({t.getDimSize(0), t.getDimSize(1), dim},
                                   e.f32());
    };
    // The weights and biases with the sizes the verifier implies (dim is
    // static; the input contract checks dynamic ones before a call), so
    // that every projection has the result type it claims.
    int64_t kvDim = Emitter::type(kv).getDimSize(2);
    auto sized = [&](Value x, ArrayRef<int64_t> shape) -> Value {
      if (!x) {
        return x;
      }
      auto want = RankedTensorType::get(shape, e.f32());
      return Emitter::type(x) == want
                 ? x
                 : tensor::CastOp::create(rewriter, op.getLoc(), want, x)
                       .getResult();
    };
    Value wq = sized(adaptor.getWq(), {dim, dim});
    Value wk = sized(adaptor.getWk(), {dim, kvDim});
    Value wv = sized(adaptor.getWv(), {dim, kvDim});
    Value wo = sized(adaptor.getWo(), {dim, dim});
    Value q =
        e.linear(query, wq, sized(adaptor.getBq(), {dim}), projType(query));
    Value k = e.linear(kv, wk, sized(adaptor.getBk(), {dim}), projType(kv));
    Value v = e.linear(kv, wv, sized(adaptor.getBv(), {dim}), projType(kv));
    Attention attention = attentionFor(e, op, q, k, adaptor.getKeyPaddingMask(),
                                       adaptor.getSeed());
    Value merged =
        block > 0 ? attention.fusedForward(v, block) : attention.forward(v);
    rewriter.replaceOp(
        op, e.linear(merged, wo, sized(adaptor.getBo(), {dim}), type));
    return success();
  }
};

struct AttentionPattern : KilnPattern<AttentionOp> {
  AttentionPattern(MLIRContext *context, int64_t block)
      : KilnPattern(context), block(block) {}
  int64_t block; ///< > 0: Attention::fusedForward over blocks this large
  LogicalResult
  matchAndRewrite(AttentionOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    Attention attention =
        attentionFor(e, op, adaptor.getQuery(), adaptor.getKey(),
                     adaptor.getKeyPaddingMask(), adaptor.getSeed());
    Value out = block > 0 ? attention.fusedForward(adaptor.getValue(), block)
                          : attention.forward(adaptor.getValue());
    if (out.getType() != resultType(op)) {
      out = tensor::CastOp::create(rewriter, op.getLoc(), resultType(op), out);
    }
    rewriter.replaceOp(op, out);
    return success();
  }
};

/// The attention backward pass, probabilities recomputed:
///   dP = dropout(dO·Vᵀ), dS = P·(dP - Σ_j dP·P)·scale·visible,
///   dQ = dS·K, dK = dSᵀ·Q, dV = dropout(P)ᵀ·dO.
struct AttentionGradPattern : KilnPattern<AttentionGradOp> {
  AttentionGradPattern(MLIRContext *context, int64_t block)
      : KilnPattern(context), block(block) {}
  int64_t block; ///< > 0: Attention::fusedBackward (given the output)

  LogicalResult
  matchAndRewrite(AttentionGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    Value mask = adaptor.getKeyPaddingMask();
    Attention a = attentionFor(e, op, adaptor.getQuery(), adaptor.getKey(),
                               mask, adaptor.getSeed());
    if (block > 0 && adaptor.getOutput()) {
      SmallVector<Value> results = a.fusedBackward(
          adaptor.getGrad(), adaptor.getValue(), adaptor.getOutput(), block);
      replaceWithResults(rewriter, op, results);
      return success();
    }
    Value qh = a.split(adaptor.getQuery()), kh = a.split(adaptor.getKey()),
          vh = a.split(adaptor.getValue()), gh = a.split(adaptor.getGrad());
    Value probs = a.probabilities(qh, kh);
    Value dropped = a.withDropout(probs);
    Value dProbs = a.withDropout(a.rowProducts(gh, a.headsMajor(vh, a.key)));
    // Σ_j dP·P per row.
    Value rowDot = e.generic(
        RankedTensorType::get(a.scoreType().getShape().drop_back(), e.f32()),
        ValueRange{dProbs, probs},
        e.filled(ArrayRef(a.scoreShape()).drop_back(), 0.0),
        {e.identity(4), e.identity(4), e.dropping(4, 3)},
        {IteratorType::parallel, IteratorType::parallel, IteratorType::parallel,
         IteratorType::reduction},
        mulAdd);
    float scale = float(1.0 / std::sqrt(double(a.headDim)));
    SmallVector<Value> inputs = {dProbs, probs, rowDot};
    SmallVector<AffineMap> maps = {e.identity(4), e.identity(4),
                                   e.dropping(4, 3)};
    if (mask) {
      inputs.push_back(mask);
      maps.push_back(e.select(4, {0, 3}));
    }
    maps.push_back(e.identity(4));
    Value sh = a.shift();
    Value dScores = e.generic(
        a.scoreType(), inputs, e.empty(a.scoreShape(), e.f32()), maps,
        SmallVector<IteratorType>(4, IteratorType::parallel),
        [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
          Value d = arith::MulFOp::create(
              nb, l, args[1], arith::SubFOp::create(nb, l, args[0], args[2]));
          d = arith::MulFOp::create(
              nb, l, d,
              arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(scale)));
          Value visible = a.keep(nb, l, mask ? args[3] : Value(), sh);
          if (!visible) {
            return d;
          }
          Value zero =
              arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(0.0f));
          return arith::SelectOp::create(nb, l, visible, d, zero);
        });
    Value dq = a.merge(a.weightedRows(dScores, kh));
    Value dk = a.merge(a.weightedColumns(dScores, qh));
    Value dv = a.merge(a.weightedColumns(dropped, gh));
    replaceWithResults(rewriter, op, {dq, dk, dv});
    return success();
  }

  /// Replaces `op` by `values`, cast to its result types where needed.
  static void replaceWithResults(ConversionPatternRewriter &rewriter,
                                 AttentionGradOp op,
                                 SmallVector<Value> values) {
    for (auto [value, result] : llvm::zip(values, op.getResults())) {
      if (value.getType() != result.getType()) {
        value = tensor::CastOp::create(rewriter, op.getLoc(), result.getType(),
                                       value);
      }
    }
    rewriter.replaceOp(op, values);
  }
};

struct FeedForwardPattern : KilnPattern<FeedForwardOp> {
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(FeedForwardOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    auto type = resultType(op);
    Value x = adaptor.getInput();
    auto w1 = Emitter::type(adaptor.getW1());
    SmallVector<int64_t> hiddenShape(type.getShape());
    hiddenShape.back() = w1.getDimSize(0);
    auto hiddenType = RankedTensorType::get(hiddenShape, e.f32());
    Value hidden = e.linear(x, adaptor.getW1(), adaptor.getB1(), hiddenType);
    Activation act = op.getActivation();
    double p = op.getDropout().convertToDouble();
    int64_t rank = hiddenType.getRank();
    SmallVector<int64_t> dims;
    SmallVector<Value> sizes;
    for (int64_t d = 0; d < rank; ++d) {
      dims.push_back(d);
      sizes.push_back(e.sizeValue(hidden, d));
    }
    Value seed = adaptor.getSeed();
    int64_t stream = op.getStream();
    Value activated = e.elementwise(
        hiddenType, e.sizes(hidden), hidden,
        [&](OpBuilder &b, Location l, ValueRange args) -> Value {
          Value h;
          if (act == Activation::relu) {
            Value zero =
                arith::ConstantOp::create(b, l, b.getF32FloatAttr(0.0f));
            h = arith::MaximumFOp::create(b, l, args[0], zero);
          } else {
            h = gelu(b, l, args[0], act == Activation::gelu_tanh);
          }
          if (p > 0.0) {
            Value s = Emitter::dropoutScale(b, l, seed, stream, p, dims, sizes);
            h = arith::MulFOp::create(b, l, h, s);
          }
          return h;
        });
    rewriter.replaceOp(
        op, e.linear(activated, adaptor.getW2(), adaptor.getB2(), type));
    return success();
  }
};

/// Cross-entropy over logits and NLL over log-probabilities.
template <typename Op>
struct LossPattern : KilnPattern<Op> {
  using KilnPattern<Op>::KilnPattern;
  using OpAdaptor = typename Op::Adaptor;
  static constexpr bool fromLogits = std::is_same_v<Op, CrossEntropyOp>;

  LogicalResult
  matchAndRewrite(Op op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
    Value targets = adaptor.getTargets();
    auto xType = Emitter::type(x);
    int64_t rank = xType.getRank();
    int64_t axis = rank - 1;
    int64_t rowRank = rank - 1;
    double smoothing = op.getLabelSmoothing().convertToDouble();
    std::optional<int64_t> ignore = op.getIgnoreIndex();
    Value classes = e.sizeValue(x, axis);
    Value classesF = e.sizeAsFloat(x, axis);
    auto add = [](OpBuilder &b, Location l, Value v, Value acc) -> Value {
      return arith::AddFOp::create(b, l, v, acc);
    };
    // Per row: lse (cross-entropy only) and the mean over classes.
    Value lse;
    if (fromLogits) {
      Value max = e.reduce(x, axis, -INFINITY,
                           [](OpBuilder &b, Location l, Value v, Value acc) {
                             return arith::MaximumFOp::create(b, l, v, acc);
                           });
      AffineMap reduced = e.dropping(rank, axis);
      SmallVector<IteratorType> iterators(rank, IteratorType::parallel);
      iterators[axis] = IteratorType::reduction;
      Value sum0 = e.filled(e.sizes(max), 0.0);
      Value sum = e.generic(sum0.getType(), ValueRange{x, max}, sum0,
                            {e.identity(rank), reduced, reduced}, iterators,
                            [](OpBuilder &b, Location l, ValueRange args) {
                              Value d =
                                  arith::SubFOp::create(b, l, args[0], args[1]);
                              Value ex = math::ExpOp::create(b, l, d);
                              return arith::AddFOp::create(b, l, ex, args[2]);
                            });
      SmallVector<IteratorType> rowPar(rowRank, IteratorType::parallel);
      lse = e.generic(
          sum.getType(), ValueRange{max, sum}, e.empty(e.sizes(max), e.f32()),
          {e.identity(rowRank), e.identity(rowRank), e.identity(rowRank)},
          rowPar, [](OpBuilder &b, Location l, ValueRange args) {
            Value lg = math::LogOp::create(b, l, args[1]);
            return arith::AddFOp::create(b, l, args[0], lg);
          });
    }
    Value classSum = smoothing > 0.0 ? e.reduce(x, axis, 0.0, add) : Value();
    // Per position: the loss (0 where the target is ignored).
    auto rowType =
        RankedTensorType::get(Emitter::type(targets).getShape(), e.f32());
    SmallVector<OpFoldResult> rowShape = e.sizes(targets);
    SmallVector<Value> inputs = {targets};
    if (lse) {
      inputs.push_back(lse);
    }
    if (classSum) {
      inputs.push_back(classSum);
    }
    SmallVector<AffineMap> maps(inputs.size() + 1, e.identity(rowRank));
    SmallVector<IteratorType> rowPar(rowRank, IteratorType::parallel);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{rowType}, inputs,
        ValueRange{e.empty(rowShape, e.f32())}, maps, rowPar,
        [&](OpBuilder &b, Location l, ValueRange args) {
          auto c = [&](double v) {
            return arith::ConstantOp::create(b, l, b.getF32FloatAttr(float(v)));
          };
          Value target = args[0];
          SmallVector<Value> indices;
          for (int64_t d = 0; d < rowRank; ++d) {
            indices.push_back(linalg::IndexOp::create(b, l, d));
          }
          indices.push_back(Emitter::clampIndex(b, l, target, classes));
          Value picked = tensor::ExtractOp::create(b, l, x, indices);
          // loss = lse - (1-s)·x[t] - s·mean(x)   (lse = 0 for log-probs)
          Value loss =
              arith::MulFOp::create(b, l, c(-(1.0 - smoothing)), picked);
          size_t next = 1;
          if (lse) {
            loss = arith::AddFOp::create(b, l, loss, args[next++]);
          }
          if (classSum) {
            Value mean = arith::DivFOp::create(b, l, args[next++], classesF);
            loss = arith::SubFOp::create(
                b, l, loss, arith::MulFOp::create(b, l, c(smoothing), mean));
          }
          if (ignore) {
            Value ignored = arith::CmpIOp::create(
                b, l, arith::CmpIPredicate::eq, target,
                arith::ConstantOp::create(
                    b, l, b.getIntegerAttr(target.getType(), *ignore)));
            loss = arith::SelectOp::create(b, l, ignored, c(0.0), loss);
          }
          linalg::YieldOp::create(b, l, ValueRange{loss});
        });
    Value losses = generic.getResult(0);
    LossReduction reduction = op.getReduction();
    if (reduction == LossReduction::none) {
      rewriter.replaceOp(op, losses);
      return success();
    }
    // Sum of losses over every position, divided by the kept count for the
    // mean.
    auto scalarType = RankedTensorType::get({}, e.f32());
    SmallVector<IteratorType> all(rowRank, IteratorType::reduction);
    AffineMap toScalar = AffineMap::get(rowRank, 0, {}, rewriter.getContext());
    Value sum = e.generic(
        scalarType, losses, e.filled({}, 0.0), {e.identity(rowRank), toScalar},
        all, [](OpBuilder &b, Location l, ValueRange args) {
          return arith::AddFOp::create(b, l, args[0], args[1]);
        });
    if (reduction == LossReduction::mean) {
      Value count = e.keptCount(targets, ignore);
      AffineMap scalar = AffineMap::get(0, 0, {}, rewriter.getContext());
      sum = e.generic(scalarType, ValueRange{sum, count}, e.empty({}, e.f32()),
                      {scalar, scalar, scalar}, {},
                      [](OpBuilder &b, Location l, ValueRange args) {
                        return arith::DivFOp::create(b, l, args[0], args[1]);
                      });
    }
    rewriter.replaceOp(op, sum);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//

/// d act(x) / dx · g for the three activations.
static Value activationGrad(OpBuilder &b, Location loc, Activation act, Value g,
                            Value x) {
  auto c = [&](double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(float(v)));
  };
  if (act == Activation::relu) {
    Value positive =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, c(0.0));
    return arith::SelectOp::create(b, loc, positive, g, c(0.0));
  }
  Value d;
  if (act == Activation::gelu) {
    // Φ(x) + x·φ(x)
    Value cdf = arith::MulFOp::create(
        b, loc, c(0.5),
        arith::AddFOp::create(
            b, loc, c(1.0),
            math::ErfOp::create(
                b, loc, arith::MulFOp::create(b, loc, x, c(M_SQRT1_2)))));
    Value x2 = arith::MulFOp::create(b, loc, x, x);
    Value pdf = arith::MulFOp::create(
        b, loc, c(1.0 / std::sqrt(2.0 * M_PI)),
        math::ExpOp::create(b, loc,
                            arith::MulFOp::create(b, loc, c(-0.5), x2)));
    d = arith::AddFOp::create(b, loc, cdf,
                              arith::MulFOp::create(b, loc, x, pdf));
  } else {
    // 0.5(1 + t) + 0.5·x·(1 - t²)·k·(1 + 3a·x²), t = tanh(k(x + a·x³))
    double k = std::sqrt(2.0 / M_PI), a = 0.044715;
    Value x2 = arith::MulFOp::create(b, loc, x, x);
    Value inner = arith::MulFOp::create(
        b, loc, c(k),
        arith::AddFOp::create(
            b, loc, x,
            arith::MulFOp::create(b, loc, c(a),
                                  arith::MulFOp::create(b, loc, x2, x))));
    Value t = math::TanhOp::create(b, loc, inner);
    Value left = arith::MulFOp::create(
        b, loc, c(0.5), arith::AddFOp::create(b, loc, c(1.0), t));
    Value sech2 = arith::SubFOp::create(b, loc, c(1.0),
                                        arith::MulFOp::create(b, loc, t, t));
    Value slope = arith::MulFOp::create(
        b, loc, c(k),
        arith::AddFOp::create(b, loc, c(1.0),
                              arith::MulFOp::create(b, loc, c(3 * a), x2)));
    Value right =
        arith::MulFOp::create(b, loc, arith::MulFOp::create(b, loc, c(0.5), x),
                              arith::MulFOp::create(b, loc, sech2, slope));
    d = arith::AddFOp::create(b, loc, left, right);
  }
  return arith::MulFOp::create(b, loc, g, d);
}

struct ActivationGradPattern : KilnPattern<ActivationGradOp> {
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(ActivationGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    Activation act = op.getActivation();
    Value result =
        e.elementwise(resultType(op), e.sizes(adaptor.getGrad()),
                      ValueRange{adaptor.getGrad(), adaptor.getInput()},
                      [&](OpBuilder &b, Location loc, ValueRange args) {
                        return activationGrad(b, loc, act, args[0], args[1]);
                      });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Sums a [..., D] tensor over every leading dimension into [D].
static Value sumRows(Emitter &e, Value x) {
  auto t = Emitter::type(x);
  int64_t rank = t.getRank();
  SmallVector<IteratorType> iterators(rank, IteratorType::reduction);
  iterators.back() = IteratorType::parallel;
  Value acc = e.filled({e.size(x, rank - 1)}, 0.0);
  return e.generic(acc.getType(), x, acc,
                   {e.identity(rank), e.select(rank, {rank - 1})}, iterators,
                   [](OpBuilder &b, Location l, ValueRange args) {
                     return arith::AddFOp::create(b, l, args[0], args[1]);
                   });
}

struct LayerNormGradPattern : KilnPattern<LayerNormGradOp> {
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(LayerNormGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    Value g = adaptor.getGrad(), x = adaptor.getInput(),
          gamma = adaptor.getGamma();
    auto xType = Emitter::type(x);
    int64_t rank = xType.getRank(), axis = rank - 1;
    bool stdEps = op.getMode() == NormMode::std_eps;
    float eps = float(op.getEps().convertToDouble());
    Value width = e.sizeAsFloat(x, axis);
    auto add = [](OpBuilder &b, Location l, Value v, Value acc) -> Value {
      return arith::AddFOp::create(b, l, v, acc);
    };
    // Row statistics: mean, then the sum of squared deviations.
    Value sum = e.reduce(x, axis, 0.0, add);
    SmallVector<OpFoldResult> rows = e.sizes(sum);
    int64_t rowRank = rank - 1;
    SmallVector<IteratorType> rowPar(rowRank, IteratorType::parallel);
    AffineMap rowMap = e.identity(rowRank);
    Value mean =
        e.generic(sum.getType(), sum, e.empty(rows, e.f32()), {rowMap, rowMap},
                  rowPar, [&](OpBuilder &b, Location l, ValueRange args) {
                    return arith::DivFOp::create(b, l, args[0], width);
                  });
    AffineMap reduced = e.dropping(rank, axis);
    AffineMap feature = e.select(rank, {axis});
    SmallVector<IteratorType> red(rank, IteratorType::parallel);
    red[axis] = IteratorType::reduction;
    Value sq =
        e.generic(sum.getType(), ValueRange{x, mean}, e.filled(rows, 0.0),
                  {e.identity(rank), reduced, reduced}, red,
                  [](OpBuilder &b, Location l, ValueRange args) {
                    Value d = arith::SubFOp::create(b, l, args[0], args[1]);
                    return arith::AddFOp::create(
                        b, l, arith::MulFOp::create(b, l, d, d), args[2]);
                  });
    // Per row: s = 1/(σ+eps) or rsqrt(var+eps), and for std_eps the factor
    // k = s²/((D-1)σ) of the σ term.
    Value count = stdEps ? arith::SubFOp::create(rewriter, op.getLoc(), width,
                                                 e.f32c(1.0))
                               .getResult()
                         : width;
    auto rowOp = [&](function_ref<Value(OpBuilder &, Location, Value)> f) {
      return e.generic(sum.getType(), sq, e.empty(rows, e.f32()),
                       {rowMap, rowMap}, rowPar,
                       [&](OpBuilder &b, Location l, ValueRange args) {
                         return f(b, l, args[0]);
                       });
    };
    auto cst = [&](OpBuilder &b, Location l, double v) -> Value {
      return arith::ConstantOp::create(b, l, b.getF32FloatAttr(float(v)));
    };
    Value inv = rowOp([&](OpBuilder &b, Location l, Value s2) -> Value {
      Value var = arith::DivFOp::create(b, l, s2, count);
      if (stdEps) {
        Value sd = math::SqrtOp::create(b, l, var);
        return arith::DivFOp::create(
            b, l, cst(b, l, 1.0),
            arith::AddFOp::create(b, l, sd, cst(b, l, eps)));
      }
      return math::RsqrtOp::create(
          b, l, arith::AddFOp::create(b, l, var, cst(b, l, eps)));
    });
    Value sigmaTerm = rowOp([&](OpBuilder &b, Location l, Value s2) -> Value {
      if (!stdEps) {
        return cst(b, l, 0.0);
      }
      Value sd =
          math::SqrtOp::create(b, l, arith::DivFOp::create(b, l, s2, count));
      Value s = arith::DivFOp::create(
          b, l, cst(b, l, 1.0),
          arith::AddFOp::create(b, l, sd, cst(b, l, eps)));
      // s² / ((D-1)·σ)
      return arith::DivFOp::create(b, l, arith::MulFOp::create(b, l, s, s),
                                   arith::MulFOp::create(b, l, count, sd));
    });
    // Row sums of dxhat = g·gamma and of dxhat·(x - mean).
    auto rowSum = [&](bool timesCentered) {
      return e.generic(
          sum.getType(), ValueRange{g, x, mean, gamma}, e.filled(rows, 0.0),
          {e.identity(rank), e.identity(rank), reduced, feature, reduced}, red,
          [&](OpBuilder &b, Location l, ValueRange args) {
            Value dxhat = arith::MulFOp::create(b, l, args[0], args[3]);
            if (timesCentered) {
              Value c = arith::SubFOp::create(b, l, args[1], args[2]);
              dxhat = arith::MulFOp::create(b, l, dxhat, c);
            }
            return arith::AddFOp::create(b, l, dxhat, args[4]);
          });
    };
    Value sumDxhat = rowSum(false);
    Value sumDxhatC = rowSum(true);
    SmallVector<IteratorType> par(rank, IteratorType::parallel);
    Value dx = e.generic(
        xType,
        ValueRange{g, x, mean, gamma, inv, sigmaTerm, sumDxhat, sumDxhatC},
        e.empty(e.sizes(x), e.f32()),
        {e.identity(rank), e.identity(rank), reduced, feature, reduced, reduced,
         reduced, reduced, e.identity(rank)},
        par, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          // standard: s·(dxhat - mean(dxhat) - xhat·mean(dxhat·xhat))
          // std_eps: s·(dxhat - mean(dxhat)) - c·Σ(dxhat·c)·s²/((D-1)σ)
          Value dxhat = arith::MulFOp::create(b, l, a[0], a[3]);
          Value c = arith::SubFOp::create(b, l, a[1], a[2]);
          Value meanDxhat = arith::DivFOp::create(b, l, a[6], width);
          Value centered = arith::SubFOp::create(b, l, dxhat, meanDxhat);
          if (stdEps) {
            Value first = arith::MulFOp::create(b, l, a[4], centered);
            Value second = arith::MulFOp::create(
                b, l, c, arith::MulFOp::create(b, l, a[7], a[5]));
            return arith::SubFOp::create(b, l, first, second);
          }
          Value xhat = arith::MulFOp::create(b, l, c, a[4]);
          // mean(dxhat·xhat) = s·Σ(dxhat·c)/D
          Value meanDxhatXhat = arith::DivFOp::create(
              b, l, arith::MulFOp::create(b, l, a[7], a[4]), width);
          Value inner = arith::SubFOp::create(
              b, l, centered, arith::MulFOp::create(b, l, xhat, meanDxhatXhat));
          return arith::MulFOp::create(b, l, a[4], inner);
        });
    // dgamma = Σ_rows g·xhat, dbeta = Σ_rows g.
    Value gXhat = e.generic(
        xType, ValueRange{g, x, mean, inv}, e.empty(e.sizes(x), e.f32()),
        {e.identity(rank), e.identity(rank), reduced, reduced,
         e.identity(rank)},
        par, [](OpBuilder &b, Location l, ValueRange a) {
          Value c = arith::SubFOp::create(b, l, a[1], a[2]);
          return arith::MulFOp::create(b, l, a[0],
                                       arith::MulFOp::create(b, l, c, a[3]));
        });
    rewriter.replaceOp(op, {dx, sumRows(e, gXhat), sumRows(e, g)});
    return success();
  }
};

struct LossGradPattern : KilnPattern<LossGradOp> {
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(LossGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    Value x = adaptor.getInput(), targets = adaptor.getTargets(),
          lossGrad = adaptor.getLossGrad();
    auto xType = Emitter::type(x);
    int64_t rank = xType.getRank(), axis = rank - 1, rowRank = rank - 1;
    bool fromLogits = op.getFromLogits();
    double smoothing = op.getLabelSmoothing().convertToDouble();
    std::optional<int64_t> ignore = op.getIgnoreIndex();
    LossReduction reduction = op.getReduction();
    Value classesF = e.sizeAsFloat(x, axis);
    AffineMap reduced = e.dropping(rank, axis);
    // Per row: log-sum-exp of the logits.
    Value lse;
    if (fromLogits) {
      Value max = e.reduce(x, axis, -INFINITY,
                           [](OpBuilder &b, Location l, Value v, Value acc) {
                             return arith::MaximumFOp::create(b, l, v, acc);
                           });
      SmallVector<IteratorType> red(rank, IteratorType::parallel);
      red[axis] = IteratorType::reduction;
      Value sum = e.generic(max.getType(), ValueRange{x, max},
                            e.filled(e.sizes(max), 0.0),
                            {e.identity(rank), reduced, reduced}, red,
                            [](OpBuilder &b, Location l, ValueRange a) {
                              Value d = arith::SubFOp::create(b, l, a[0], a[1]);
                              return arith::AddFOp::create(
                                  b, l, math::ExpOp::create(b, l, d), a[2]);
                            });
      AffineMap rowMap = e.identity(rowRank);
      lse =
          e.generic(max.getType(), ValueRange{max, sum},
                    e.empty(e.sizes(max), e.f32()), {rowMap, rowMap, rowMap},
                    SmallVector<IteratorType>(rowRank, IteratorType::parallel),
                    [](OpBuilder &b, Location l, ValueRange a) {
                      return arith::AddFOp::create(
                          b, l, a[0], math::LogOp::create(b, l, a[1]));
                    });
    }
    // The gradient scale: g (sum), g / #not-ignored (mean), g[row] (none).
    auto isIgnored = [&](OpBuilder &b, Location l, Value t) -> Value {
      if (!ignore) {
        return arith::ConstantOp::create(b, l, b.getBoolAttr(false));
      }
      return arith::CmpIOp::create(
          b, l, arith::CmpIPredicate::eq, t,
          arith::ConstantOp::create(b, l,
                                    b.getIntegerAttr(t.getType(), *ignore)));
    };
    Value scale = lossGrad; // rank 0, or [rows] for none
    if (reduction == LossReduction::mean) {
      auto scalar = RankedTensorType::get({}, e.f32());
      Value count = e.keptCount(targets, ignore);
      AffineMap none = AffineMap::get(0, 0, {}, rewriter.getContext());
      scale = e.generic(scalar, ValueRange{lossGrad, count},
                        e.empty({}, e.f32()), {none, none, none}, {},
                        [](OpBuilder &b, Location l, ValueRange a) {
                          return arith::DivFOp::create(b, l, a[0], a[1]);
                        });
    }
    SmallVector<Value> inputs = {x, targets, scale};
    SmallVector<AffineMap> maps = {
        e.identity(rank), reduced,
        reduction == LossReduction::none
            ? reduced
            : AffineMap::get(rank, 0, {}, rewriter.getContext())};
    if (lse) {
      inputs.push_back(lse);
      maps.push_back(reduced);
    }
    maps.push_back(e.identity(rank));
    SmallVector<IteratorType> par(rank, IteratorType::parallel);
    Value result = e.generic(
        resultType(op), inputs, e.empty(e.sizes(x), e.f32()), maps, par,
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          auto c = [&](double v) {
            return arith::ConstantOp::create(b, l, b.getF32FloatAttr(float(v)));
          };
          Value cls = arith::IndexCastOp::create(
              b, l, a[1].getType(), linalg::IndexOp::create(b, l, axis));
          Value hit =
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, cls, a[1]);
          // q = (1 - s)·onehot + s/C
          Value q = arith::AddFOp::create(
              b, l,
              arith::SelectOp::create(b, l, hit, c(1.0 - smoothing), c(0.0)),
              arith::DivFOp::create(b, l, c(smoothing), classesF));
          Value d = arith::SubFOp::create(b, l, c(0.0), q);
          if (lse) {
            Value p = math::ExpOp::create(
                b, l, arith::SubFOp::create(b, l, a[0], a[3]));
            d = arith::AddFOp::create(b, l, p, d);
          }
          d = arith::MulFOp::create(b, l, d, a[2]);
          return arith::SelectOp::create(b, l, isIgnored(b, l, a[1]), c(0.0),
                                         d);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Scatter-add of the output gradient rows into the table: a loop over the
/// positions (in order, so the sums are deterministic) carrying the table.
struct EmbeddingGradPattern : KilnPattern<EmbeddingGradOp> {
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(EmbeddingGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    Location loc = op.getLoc();
    Value g = adaptor.getGrad(), ids = adaptor.getIds();
    auto gType = Emitter::type(g);
    int64_t rank = gType.getRank();
    // View the positions as one dimension.
    Value g2 = g, ids1 = ids;
    if (rank != 2) {
      ReassociationIndices lead;
      for (int64_t d = 0; d + 1 < rank; ++d) {
        lead.push_back(d);
      }
      g2 = rank == 1 ? g
                     : tensor::CollapseShapeOp::create(
                           rewriter, loc, g,
                           ArrayRef<ReassociationIndices>{lead, {rank - 1}})
                           .getResult();
      if (rank > 2) {
        ids1 = tensor::CollapseShapeOp::create(
            rewriter, loc, ids, ArrayRef<ReassociationIndices>{lead});
      }
    }
    auto type = resultType(op);
    int64_t vocab = type.getDimSize(0);
    Value table = e.filled({rewriter.getIndexAttr(vocab), e.size(g2, 1)}, 0.0);
    Value positions = e.sizeValue(g2, 0), width = e.sizeValue(g2, 1);
    std::optional<int64_t> pad = op.getPaddingIdx();
    Value zero = e.index(0), one = e.index(1);
    auto outer = scf::ForOp::create(
        rewriter, loc, zero, positions, one, ValueRange{table},
        [&](OpBuilder &b, Location l, Value n, ValueRange iter) {
          Value id = tensor::ExtractOp::create(b, l, ids1, ValueRange{n});
          Value idx = arith::IndexCastOp::create(b, l, b.getIndexType(), id);
          Value inRange = arith::AndIOp::create(
              b, l,
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge, idx,
                                    arith::ConstantIndexOp::create(b, l, 0)),
              arith::CmpIOp::create(
                  b, l, arith::CmpIPredicate::slt, idx,
                  arith::ConstantIndexOp::create(b, l, vocab)));
          if (pad) {
            inRange = arith::AndIOp::create(
                b, l, inRange,
                arith::CmpIOp::create(
                    b, l, arith::CmpIPredicate::ne, idx,
                    arith::ConstantIndexOp::create(b, l, *pad)));
          }
          auto update = scf::IfOp::create(
              b, l, inRange,
              [&](OpBuilder &tb, Location tl) {
                auto inner = scf::ForOp::create(
                    tb, tl, arith::ConstantIndexOp::create(tb, tl, 0), width,
                    arith::ConstantIndexOp::create(tb, tl, 1), iter,
                    [&](OpBuilder &ib, Location il, Value d, ValueRange acc) {
                      Value cur = tensor::ExtractOp::create(ib, il, acc[0],
                                                            ValueRange{idx, d});
                      Value add = tensor::ExtractOp::create(ib, il, g2,
                                                            ValueRange{n, d});
                      Value sum = arith::AddFOp::create(ib, il, cur, add);
                      Value next = tensor::InsertOp::create(ib, il, sum, acc[0],
                                                            ValueRange{idx, d});
                      scf::YieldOp::create(ib, il, next);
                    });
                scf::YieldOp::create(tb, tl, inner.getResults());
              },
              [&](OpBuilder &eb, Location el) {
                scf::YieldOp::create(eb, el, iter);
              });
          scf::YieldOp::create(b, l, update.getResults());
        });
    Value result = outer.getResult(0);
    if (result.getType() != type) {
      result = tensor::CastOp::create(rewriter, loc, type, result);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// The learned position table's gradient: the output gradient summed over
/// the batch dims, placed at rows offset .. offset + T.
struct PositionalEncodingGradPattern : KilnPattern<PositionalEncodingGradOp> {
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(PositionalEncodingGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    Location loc = op.getLoc();
    Value g = adaptor.getGrad();
    int64_t rank = Emitter::type(g).getRank();
    // [..., T, D] -> [T, D]
    Value rows = g;
    if (rank > 2) {
      SmallVector<IteratorType> iterators(rank, IteratorType::reduction);
      iterators[rank - 2] = iterators[rank - 1] = IteratorType::parallel;
      Value acc = e.filled({e.size(g, rank - 2), e.size(g, rank - 1)}, 0.0);
      rows = e.generic(acc.getType(), g, acc,
                       {e.identity(rank), e.select(rank, {rank - 2, rank - 1})},
                       iterators, [](OpBuilder &b, Location l, ValueRange a) {
                         return arith::AddFOp::create(b, l, a[0], a[1]);
                       });
    }
    Value offset =
        adaptor.getOffset()
            ? arith::IndexCastOp::create(rewriter, loc, rewriter.getIndexType(),
                                         adaptor.getOffset())
                  .getResult()
            : e.index(0);
    Value length = e.sizeValue(rows, 0);
    auto type = resultType(op);
    SmallVector<OpFoldResult> shape = {
        rewriter.getIndexAttr(type.getDimSize(0)), e.size(rows, 1)};
    Value result = e.generic(
        type, ValueRange{}, e.empty(shape, e.f32()), {e.identity(2)},
        {IteratorType::parallel, IteratorType::parallel},
        [&](OpBuilder &b, Location l, ValueRange) -> Value {
          Value r = linalg::IndexOp::create(b, l, 0);
          Value d = linalg::IndexOp::create(b, l, 1);
          Value p = arith::SubIOp::create(b, l, r, offset);
          Value inside = arith::AndIOp::create(
              b, l,
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge, p,
                                    arith::ConstantIndexOp::create(b, l, 0)),
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, p,
                                    length));
          Value row = Emitter::clampIndex(b, l, p, length);
          Value v = tensor::ExtractOp::create(b, l, rows, ValueRange{row, d});
          Value zero = arith::ConstantOp::create(b, l, b.getF32FloatAttr(0.0f));
          return arith::SelectOp::create(b, l, inside, v, zero);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

/// An optimizer update: one elementwise loop that reads `state` (the
/// parameter and its optimizer state, all of one shape), `tensors` of that
/// shape and rank-0 `scalars`, and writes the new state into `state` as its
/// destinations (linalg outs), so that bufferization can update arguments in
/// place. `body` gets the old state values, then the tensors' and the
/// scalars' elements, and returns the new state. With a `guard` (rank 0),
/// each element keeps its old value unless the guard is finite. Returns the
/// new state with the types of `resultTypes`.
static SmallVector<Value> optimizerUpdate(
    Emitter &e, TypeRange resultTypes, ValueRange state, ValueRange tensors,
    ValueRange scalars, Value guard,
    function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)> body) {
  int64_t rank = Emitter::type(state.front()).getRank();
  AffineMap scalarMap = AffineMap::get(rank, 0, {}, e.b.getContext());
  SmallVector<Value> inputs(tensors.begin(), tensors.end());
  SmallVector<AffineMap> maps(tensors.size(), e.identity(rank));
  llvm::append_range(inputs, scalars);
  maps.append(scalars.size(), scalarMap);
  if (guard) {
    inputs.push_back(guard);
    maps.push_back(scalarMap);
  }
  maps.append(state.size(), e.identity(rank));
  size_t numInputs = inputs.size();
  auto op = linalg::GenericOp::create(
      e.b, e.loc, TypeRange(state), inputs, state, maps,
      SmallVector<IteratorType>(rank, IteratorType::parallel),
      [&](OpBuilder &b, Location l, ValueRange args) {
        ValueRange old = args.drop_front(numInputs);
        SmallVector<Value> operands(old.begin(), old.end());
        llvm::append_range(operands,
                           args.take_front(tensors.size() + scalars.size()));
        SmallVector<Value> updated = body(b, l, operands);
        if (guard) {
          // |guard| < inf is false for inf and NaN (ordered comparison).
          Value magnitude = math::AbsFOp::create(b, l, args[numInputs - 1]);
          Value inf = arith::ConstantOp::create(
              b, l, b.getF32FloatAttr(std::numeric_limits<float>::infinity()));
          Value finite = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OLT,
                                               magnitude, inf);
          for (auto [value, before] : llvm::zip(updated, old)) {
            value = arith::SelectOp::create(b, l, finite, value, before);
          }
        }
        linalg::YieldOp::create(b, l, updated);
      });
  SmallVector<Value> results;
  for (auto [value, type] : llvm::zip(op.getResults(), resultTypes)) {
    results.push_back(value.getType() == type ? Value(value)
                                              : Value(tensor::CastOp::create(
                                                    e.b, e.loc, type, value)));
  }
  return results;
}

struct AdamUpdatePattern : KilnPattern<AdamUpdateOp> {
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(AdamUpdateOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    Location loc = op.getLoc();
    double b1 = op.getBeta1().convertToDouble(),
           b2 = op.getBeta2().convertToDouble();
    double eps = op.getEps().convertToDouble();
    double wd = op.getWeightDecay().convertToDouble();
    bool decoupled = op.getDecoupled();
    // 1 - beta^step, once per call.
    Value step = arith::SIToFPOp::create(rewriter, loc, rewriter.getF32Type(),
                                         adaptor.getStep());
    auto correction = [&](double beta) -> Value {
      Value pow = math::PowFOp::create(rewriter, loc, e.f32c(beta), step);
      return arith::SubFOp::create(rewriter, loc, e.f32c(1.0), pow);
    };
    Value bc1 = correction(b1), bc2 = correction(b2);
    SmallVector<Value> results = optimizerUpdate(
        e, op.getResultTypes(),
        ValueRange{adaptor.getParam(), adaptor.getM(), adaptor.getV()},
        ValueRange{adaptor.getGrad()}, ValueRange{adaptor.getLr()},
        adaptor.getGuard(),
        [&](OpBuilder &b, Location l, ValueRange a) -> SmallVector<Value> {
          auto c = [&](double v) {
            return arith::ConstantOp::create(b, l, b.getF32FloatAttr(float(v)));
          };
          Value p = a[0], g = a[3], lr = a[4];
          if (wd != 0.0) {
            Value decay = arith::MulFOp::create(b, l, c(wd), p);
            if (decoupled) {
              p = arith::SubFOp::create(b, l, p,
                                        arith::MulFOp::create(b, l, lr, decay));
            } else {
              g = arith::AddFOp::create(b, l, g, decay);
            }
          }
          Value m = arith::AddFOp::create(
              b, l, arith::MulFOp::create(b, l, c(b1), a[1]),
              arith::MulFOp::create(b, l, c(1 - b1), g));
          Value v = arith::AddFOp::create(
              b, l, arith::MulFOp::create(b, l, c(b2), a[2]),
              arith::MulFOp::create(b, l, c(1 - b2),
                                    arith::MulFOp::create(b, l, g, g)));
          Value mHat = arith::DivFOp::create(b, l, m, bc1);
          Value vHat = arith::DivFOp::create(b, l, v, bc2);
          Value denom = arith::AddFOp::create(
              b, l, math::SqrtOp::create(b, l, vHat), c(eps));
          Value update = arith::MulFOp::create(
              b, l, lr, arith::DivFOp::create(b, l, mHat, denom));
          return {arith::SubFOp::create(b, l, p, update), m, v};
        });
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct SgdUpdatePattern : KilnPattern<SgdUpdateOp> {
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(SgdUpdateOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    double momentum = op.getMomentum().convertToDouble();
    double wd = op.getWeightDecay().convertToDouble();
    SmallVector<Value> results = optimizerUpdate(
        e, op.getResultTypes(),
        ValueRange{adaptor.getParam(), adaptor.getBuf()},
        ValueRange{adaptor.getGrad()}, ValueRange{adaptor.getLr()},
        adaptor.getGuard(),
        [&](OpBuilder &b, Location l, ValueRange a) -> SmallVector<Value> {
          auto c = [&](double v) {
            return arith::ConstantOp::create(b, l, b.getF32FloatAttr(float(v)));
          };
          Value g = a[2];
          if (wd != 0.0) {
            g = arith::AddFOp::create(b, l, g,
                                      arith::MulFOp::create(b, l, c(wd), a[0]));
          }
          Value buf =
              momentum != 0.0
                  ? arith::AddFOp::create(
                        b, l, arith::MulFOp::create(b, l, c(momentum), a[1]), g)
                        .getResult()
                  : g;
          Value p = arith::SubFOp::create(
              b, l, a[0], arith::MulFOp::create(b, l, a[3], buf));
          return {p, buf};
        });
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct GlobalNormScalePattern : KilnPattern<GlobalNormScaleOp> {
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(GlobalNormScaleOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    auto scalar = RankedTensorType::get({}, e.f32());
    Value total = e.filled({}, 0.0);
    for (Value g : adaptor.getInputs()) {
      int64_t rank = Emitter::type(g).getRank();
      total =
          e.generic(scalar, g, total,
                    {e.identity(rank),
                     AffineMap::get(rank, 0, {}, rewriter.getContext())},
                    SmallVector<IteratorType>(rank, IteratorType::reduction),
                    [](OpBuilder &b, Location l, ValueRange a) {
                      return arith::AddFOp::create(
                          b, l, arith::MulFOp::create(b, l, a[0], a[0]), a[1]);
                    });
    }
    double maxNorm = op.getMaxNorm().convertToDouble();
    AffineMap none = AffineMap::get(0, 0, {}, rewriter.getContext());
    Value scale = e.generic(
        scalar, total, e.empty({}, e.f32()), {none, none}, {},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          auto c = [&](double v) {
            return arith::ConstantOp::create(b, l, b.getF32FloatAttr(float(v)));
          };
          Value norm = math::SqrtOp::create(b, l, a[0]);
          Value factor = arith::DivFOp::create(
              b, l, c(maxNorm), arith::AddFOp::create(b, l, norm, c(1e-6)));
          return arith::MinimumFOp::create(b, l, factor, c(1.0));
        });
    rewriter.replaceOp(op, scale);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

struct ConvertKilnToLinalgPass
    : kiln::impl::ConvertKilnToLinalgPassBase<ConvertKilnToLinalgPass> {
  using ConvertKilnToLinalgPassBase::ConvertKilnToLinalgPassBase;
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    ConversionTarget target(*context);
    target.addIllegalDialect<KilnDialect>();
    target.addLegalDialect<linalg::LinalgDialect, tensor::TensorDialect,
                           arith::ArithDialect, math::MathDialect,
                           func::FuncDialect, scf::SCFDialect>();
    RewritePatternSet patterns(context);
    populateKilnToLinalgPatterns(patterns, attentionBlock);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns)))) {
      signalPassFailure();
    }
  }
};

} // namespace

void mlir::kiln::populateKilnToLinalgPatterns(RewritePatternSet &patterns,
                                              int64_t attentionBlock) {
  MLIRContext *context = patterns.getContext();
  patterns
      .add<ElementwisePattern<AddOp>, ElementwisePattern<SubOp>,
           ElementwisePattern<MulOp>, ElementwisePattern<DivOp>,
           ElementwisePattern<ReluOp>, ElementwisePattern<TanhOp>,
           ElementwisePattern<ExpOp>, ElementwisePattern<LogOp>,
           ElementwisePattern<GeluOp>, ElementwisePattern<ScaleOp>,
           DropoutPattern, EmbeddingPattern, PositionalEncodingPattern,
           LayerNormPattern, LinearPattern, MatmulPattern, SoftmaxPattern,
           LogSoftmaxPattern, ReducePattern, ReduceMaxGradPattern,
           ReshapePattern, TransposePattern, SlicePattern, ConcatPattern,
           ConstantPattern, FeedForwardPattern, LossPattern<CrossEntropyOp>,
           LossPattern<NLLLossOp>, ActivationGradPattern, LayerNormGradPattern,
           LossGradPattern, EmbeddingGradPattern, PositionalEncodingGradPattern,
           AdamUpdatePattern, SgdUpdatePattern, GlobalNormScalePattern>(
          context);
  patterns
      .add<MultiHeadAttentionPattern, AttentionPattern, AttentionGradPattern>(
          context, attentionBlock);
}
