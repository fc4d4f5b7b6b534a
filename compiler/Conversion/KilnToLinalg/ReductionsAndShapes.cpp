//===- ReductionsAndShapes.cpp - Reductions, softmax and shape ops --------===//
//
// kiln.softmax, log_softmax, reduce, reshape, transpose, slice, concat and
// constant.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/KilnToLinalg/Emitter.h"

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// softmax and log_softmax, one lowering for both.
template <typename Op, bool Log>
SmallVector<Value> lowerSoftmaxLike(Op op, typename Op::Adaptor adaptor,
                                    Emitter &e) {
  int64_t axis = normalizedAxis(op.getAxis(), resultType(op).getRank());
  return {e.softmax(adaptor.getInput(), axis, Log)};
}
using SoftmaxPattern = Lowering<SoftmaxOp, lowerSoftmaxLike<SoftmaxOp, false>>;
using LogSoftmaxPattern =
    Lowering<LogSoftmaxOp, lowerSoftmaxLike<LogSoftmaxOp, true>>;

SmallVector<Value> lowerReduce(ReduceOp op, ReduceOp::Adaptor adaptor,
                               Emitter &e) {
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
        count =
            arith::MulFOp::create(e.b, op.getLoc(), count, e.sizeAsFloat(x, d));
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
    SmallVector<OpFoldResult> outShape;
    SmallVector<bool> kept;
    for (int64_t d = 0; d < rank; ++d) {
      outShape.push_back(reduced[d] ? e.b.getIndexAttr(1) : e.size(x, d));
      kept.push_back(!reduced[d]);
    }
    SmallVector<ReassociationIndices> groups = Emitter::collapseGroups(kept);
    result = tensor::ExpandShapeOp::create(e.b, op.getLoc(), resultType(op),
                                           result, groups, outShape);
  }
  return {result};
}

SmallVector<Value> lowerReshape(ReshapeOp op, ReshapeOp::Adaptor adaptor,
                                Emitter &e) {
  Location loc = op.getLoc();
  Value x = adaptor.getInput();
  auto type = resultType(op);
  int64_t inRank = Emitter::type(x).getRank();
  ArrayRef<int64_t> spec = op.getShape();
  // The inferred size: the input's sizes that the result does not copy
  // (entry 0) over the product of the given ones, a positive constant. The
  // copies cancel, so that a copied size of 0 divides nothing by 0 ([0, -1]
  // of a [0, 5] tensor is [0, 5]); the call has checked that the constant
  // divides the rest (ElementCheck::divides).
  Value numel = e.index(1);
  for (int64_t d = 0; d < inRank; ++d) {
    if (d < int64_t(spec.size()) && spec[d] == 0) {
      continue;
    }
    numel = arith::MulIOp::create(e.b, loc, numel, e.sizeValue(x, d));
  }
  SmallVector<Value> sizes;
  std::optional<size_t> inferred;
  int64_t known = 1;
  for (auto [i, entry] : llvm::enumerate(spec)) {
    if (entry == -1) {
      inferred = i;
      sizes.push_back(Value());
      continue;
    }
    if (entry > 0) {
      known *= entry; // the verifier bounds the result's element count
    }
    sizes.push_back(entry == 0 ? e.sizeValue(x, i) : e.index(entry));
  }
  if (inferred) {
    sizes[*inferred] = arith::DivUIOp::create(e.b, loc, numel, e.index(known));
  }
  SmallVector<Value> asI64;
  for (Value s : sizes) {
    asI64.push_back(arith::IndexCastOp::create(e.b, loc, e.b.getI64Type(), s));
  }
  Value shape = tensor::FromElementsOp::create(e.b, loc, asI64);
  Value result = tensor::ReshapeOp::create(e.b, loc, type, x, shape);
  return {result};
}

SmallVector<Value> lowerTranspose(TransposeOp op, TransposeOp::Adaptor adaptor,
                                  Emitter &e) {
  Value x = adaptor.getInput();
  SmallVector<OpFoldResult> shape;
  for (int64_t p : op.getPermutation()) {
    shape.push_back(e.size(x, p));
  }
  Value init = e.empty(shape, getElementTypeOrSelf(x.getType()));
  auto transposed = linalg::TransposeOp::create(e.b, op.getLoc(), x, init,
                                                op.getPermutation());
  return {transposed.getResult()[0]};
}

SmallVector<Value> lowerSlice(SliceOp op, SliceOp::Adaptor adaptor,
                              Emitter &e) {
  Location loc = op.getLoc();
  Value x = adaptor.getInput();
  auto type = resultType(op);
  int64_t rank = type.getRank();
  int64_t axis = normalizedAxis(op.getAxis(), rank);
  Value dim = e.sizeValue(x, axis);
  auto bound = [&](int64_t v) -> Value {
    return v < 0 ? arith::AddIOp::create(e.b, loc, dim, e.index(v)).getResult()
                 : e.index(v);
  };
  // Clamp into [0, dim] so that no run-time size reads out of bounds.
  auto clamp = [&](Value v) -> Value {
    Value low = arith::MaxSIOp::create(e.b, loc, v, e.index(0));
    return arith::MinSIOp::create(e.b, loc, low, dim);
  };
  Value start = clamp(bound(op.getStart()));
  OpFoldResult length;
  if (!type.isDynamicDim(axis)) {
    length = e.b.getIndexAttr(type.getDimSize(axis));
  } else {
    Value end = op.getEnd() ? clamp(bound(*op.getEnd())) : dim;
    Value diff = arith::SubIOp::create(e.b, loc, end, start);
    length = arith::MaxSIOp::create(e.b, loc, diff, e.index(0)).getResult();
  }
  SmallVector<OpFoldResult> offsets(rank, e.b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes = e.sizes(x);
  SmallVector<OpFoldResult> strides(rank, e.b.getIndexAttr(1));
  offsets[axis] = start;
  sizes[axis] = length;
  // A result with no elements whatever the sizes (a static 0 in its shape)
  // reads nothing: an extract_slice at offset 0 of a dimension of static
  // size 0 is out of bounds to its verifier.
  if (llvm::is_contained(type.getShape(), 0)) {
    return {e.castTo(e.empty(sizes, type.getElementType()), type)};
  }
  Value result = tensor::ExtractSliceOp::create(e.b, loc, type, x, offsets,
                                                sizes, strides);
  return {result};
}

SmallVector<Value> lowerConcat(ConcatOp op, ConcatOp::Adaptor adaptor,
                               Emitter &e) {
  Location loc = op.getLoc();
  auto type = resultType(op);
  int64_t rank = type.getRank();
  int64_t axis = normalizedAxis(op.getAxis(), rank);
  ValueRange inputs = adaptor.getInputs();
  SmallVector<OpFoldResult> shape = e.sizes(inputs.front());
  Value total = e.index(0);
  for (Value input : inputs) {
    total = arith::AddIOp::create(e.b, loc, total, e.sizeValue(input, axis));
  }
  shape[axis] = total;
  Value result = e.empty(shape, type.getElementType());
  Value offset = e.index(0);
  // A result with no elements is complete as it is, and a piece with none
  // adds nothing: an insert_slice of either at the end of a dimension of
  // static size would be out of bounds (offset == size) to its verifier.
  bool empty = llvm::is_contained(type.getShape(), 0);
  for (Value input : empty ? ValueRange() : inputs) {
    if (cast<RankedTensorType>(input.getType()).getDimSize(axis) == 0) {
      continue;
    }
    SmallVector<OpFoldResult> offsets(rank, e.b.getIndexAttr(0));
    SmallVector<OpFoldResult> strides(rank, e.b.getIndexAttr(1));
    offsets[axis] = offset;
    result = tensor::InsertSliceOp::create(e.b, loc, input, result, offsets,
                                           e.sizes(input), strides);
    offset = arith::AddIOp::create(e.b, loc, offset, e.sizeValue(input, axis));
  }
  return {result};
}

/// `dest` with `source` inserted at the offset along the axis: one
/// insert_slice, which bufferization writes into `dest`'s buffer (the
/// caller's, when a result updates that argument in place).
SmallVector<Value> lowerUpdateSlice(UpdateSliceOp op,
                                    UpdateSliceOp::Adaptor adaptor,
                                    Emitter &e) {
  Value source = adaptor.getSource();
  int64_t rank = resultType(op).getRank();
  int64_t axis = int64_t(op.getAxis());
  SmallVector<OpFoldResult> offsets(rank, e.b.getIndexAttr(0));
  SmallVector<OpFoldResult> strides(rank, e.b.getIndexAttr(1));
  offsets[axis] = arith::IndexCastOp::create(e.b, op.getLoc(),
                                             e.b.getIndexType(),
                                             adaptor.getOffset())
                      .getResult();
  return {tensor::InsertSliceOp::create(e.b, op.getLoc(), source,
                                        adaptor.getDest(), offsets,
                                        e.sizes(source), strides)
              .getResult()};
}

/// Splat constants of more elements than this lower to fills.
constexpr int64_t kMaxSplatConstant = 4096;

struct ConstantPattern : OpConversionPattern<ConstantOp> {
  using OpConversionPattern::OpConversionPattern;
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

} // namespace

void mlir::kiln::populateReductionAndShapePatterns(
    RewritePatternSet &patterns) {
  patterns
      .add<SoftmaxPattern, LogSoftmaxPattern, Lowering<ReduceOp, lowerReduce>,
           Lowering<ReshapeOp, lowerReshape>,
           Lowering<TransposeOp, lowerTranspose>, Lowering<SliceOp, lowerSlice>,
           Lowering<ConcatOp, lowerConcat>,
           Lowering<UpdateSliceOp, lowerUpdateSlice>, ConstantPattern>(
          patterns.getContext());
}
