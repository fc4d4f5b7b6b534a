//===- KilnReductionAndShapeOps.cpp - Reductions and shape ops ------------===//
//
// Type inference, verifiers, folds and canonicalizations of kiln.softmax,
// kiln.log_softmax, kiln.reduce and its gradient kiln.reduce_max_grad (which
// shares the reduction's type rule), kiln.reshape, kiln.transpose,
// kiln.slice, kiln.concat, kiln.update_slice and kiln.constant.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kiln/IR/KilnOps.h"
#include "dialects/Kiln/IR/OpVerifiers.h"
#include "dialects/Kiln/IR/ShapeUtils.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::detail;

//===----------------------------------------------------------------------===//
// Softmax, reductions
//===----------------------------------------------------------------------===//

static LogicalResult verifyAxis(Operation *op, int64_t axis, Type type) {
  int64_t rank = cast<RankedTensorType>(type).getRank();
  if (!shape::normalizeAxis(axis, rank)) {
    return op->emitOpError("expects 'axis' (")
           << axis << ") to be in [" << -rank << ", " << rank
           << ") for an input of rank " << rank;
  }
  return success();
}

LogicalResult SoftmaxOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  return inferSameAsInput(loc, adaptor.getInput(), inferred);
}

LogicalResult SoftmaxOp::verify() {
  return verifyAxis(*this, getAxis(), getInput().getType());
}

LogicalResult LogSoftmaxOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &inferred) {
  return inferSameAsInput(loc, adaptor.getInput(), inferred);
}

LogicalResult LogSoftmaxOp::verify() {
  return verifyAxis(*this, getAxis(), getInput().getType());
}

/// The type of `input` reduced over `axes` (out-of-range axes ignored; the
/// verifier reports them): the axes dropped, or kept with size 1.
static RankedTensorType reducedType(RankedTensorType input,
                                    ArrayRef<int64_t> axes, bool keepDims) {
  int64_t rank = input.getRank();
  SmallVector<bool> reduced(rank, false);
  for (int64_t axis : axes) {
    if (auto normalized = shape::normalizeAxis(axis, rank)) {
      reduced[*normalized] = true;
    }
  }
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduced[i]) {
      shape.push_back(input.getDimSize(i));
    } else if (keepDims) {
      shape.push_back(1);
    }
  }
  return RankedTensorType::get(shape, input.getElementType());
}

LogicalResult ReduceOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto input = getRanked(loc, adaptor.getInput(), "input");
  if (failed(input)) {
    return failure();
  }
  inferred.push_back(
      reducedType(*input, adaptor.getAxes(), adaptor.getKeepDims()));
  return success();
}

/// Checks a reduction's axes: at least one, each in range, none twice.
static LogicalResult verifyReductionAxes(Operation *op, Value input,
                                         ArrayRef<int64_t> axes) {
  int64_t rank = tensorType(input).getRank();
  if (axes.empty()) {
    return op->emitOpError("expects at least one axis to reduce");
  }
  SmallVector<bool> seen(rank, false);
  for (int64_t axis : axes) {
    if (failed(verifyAxis(op, axis, input.getType()))) {
      return failure();
    }
    int64_t normalized = *shape::normalizeAxis(axis, rank);
    if (seen[normalized]) {
      return op->emitOpError("expects distinct axes, axis ")
             << normalized << " is named twice";
    }
    seen[normalized] = true;
  }
  return success();
}

LogicalResult ReduceOp::verify() {
  return verifyReductionAxes(*this, getInput(), getAxes());
}

LogicalResult
ReduceMaxGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &inferred) {
  return inferSameAsInput(loc, adaptor.getInput(), inferred);
}

LogicalResult ReduceMaxGradOp::verify() {
  if (failed(verifyReductionAxes(*this, getInput(), getAxes()))) {
    return failure();
  }
  // grad has the shape of the reduction's result.
  RankedTensorType expected =
      reducedType(tensorType(getInput()), getAxes(), getKeepDims());
  auto grad = tensorType(getGrad());
  bool ok = grad.getRank() == expected.getRank();
  for (int64_t i = 0; ok && i < expected.getRank(); ++i) {
    ok = shape::compatible(grad.getDimSize(i), expected.getDimSize(i));
  }
  if (!ok) {
    return emitOpError("expects 'grad' to have the shape of the reduction's "
                       "result ")
           << expected << ", got " << getGrad().getType();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ReshapeOp
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  auto input = getRanked(loc, adaptor.getInput(), "input");
  if (failed(input)) {
    return failure();
  }
  SmallVector<int64_t> shape;
  (void)shape::reshape(input->getShape(), adaptor.getShape(), shape);
  inferred.push_back(RankedTensorType::get(shape, input->getElementType()));
  return success();
}

LogicalResult ReshapeOp::verify() {
  SmallVector<int64_t> shape;
  std::string error =
      shape::reshape(tensorType(getInput()).getShape(), getShape(), shape);
  if (!error.empty()) {
    return emitOpError("has an invalid shape ")
           << shape::format(getShape()) << ": " << error;
  }
  return success();
}

/// True when the reshape provably keeps every size of its input.
static bool isIdentityReshape(RankedTensorType input, ArrayRef<int64_t> spec) {
  if (input.getRank() != static_cast<int64_t>(spec.size())) {
    return false;
  }
  int unknown = 0;
  for (auto [size, entry] : llvm::zip(input.getShape(), spec)) {
    bool same = entry == 0 || (entry > 0 && entry == size);
    if (!same && !(entry == -1 && ++unknown == 1)) {
      return false;
    }
  }
  return true; // At most one -1, and every other size is kept.
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  return isIdentityReshape(tensorType(getInput()), getShape()) ? getInput()
                                                               : nullptr;
}

namespace {
/// reshape(reshape(x, s1), s2) -> reshape(x, s2'), where the sizes s2 keeps
/// from the intermediate are taken from s1.
struct ComposeReshapes : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<ReshapeOp>();
    if (!inner) {
      return failure();
    }
    auto middle = tensorType(inner.getResult());
    SmallVector<int64_t> composed;
    for (auto [i, entry] : llvm::enumerate(op.getShape())) {
      if (entry != 0) {
        composed.push_back(entry);
      } else if (inner.getShape()[i] != -1) {
        // A kept size: s1's entry (0 keeps x's size at the same index).
        composed.push_back(inner.getShape()[i]);
      } else if (!middle.isDynamicDim(i)) {
        composed.push_back(middle.getDimSize(i));
      } else {
        return failure();
      }
    }
    auto replacement =
        ReshapeOp::create(rewriter, op.getLoc(), inner.getInput(), composed);
    if (replacement.getType() != op.getType()) {
      rewriter.eraseOp(replacement);
      return failure();
    }
    rewriter.replaceOp(op, replacement.getResult());
    return success();
  }
};
} // namespace

void ReshapeOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                            MLIRContext *context) {
  patterns.add<ComposeReshapes>(context);
}

//===----------------------------------------------------------------------===//
// TransposeOp
//===----------------------------------------------------------------------===//

static bool isPermutation(ArrayRef<int64_t> perm) {
  SmallVector<bool> seen(perm.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(perm.size()) || seen[p]) {
      return false;
    }
    seen[p] = true;
  }
  return true;
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto input = getRanked(loc, adaptor.getInput(), "input");
  if (failed(input)) {
    return failure();
  }
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    shape.push_back(dimOr(*input, p < 0 ? input->getRank() : p));
  }
  inferred.push_back(RankedTensorType::get(shape, input->getElementType()));
  return success();
}

LogicalResult TransposeOp::verify() {
  int64_t rank = tensorType(getInput()).getRank();
  ArrayRef<int64_t> perm = getPermutation();
  if (static_cast<int64_t>(perm.size()) != rank || !isPermutation(perm)) {
    return emitOpError("expects 'permutation' ")
           << shape::format(perm) << " to be a permutation of [0, " << rank
           << ")";
  }
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  for (auto [i, p] : llvm::enumerate(getPermutation())) {
    if (static_cast<int64_t>(i) != p) {
      return nullptr;
    }
  }
  return getInput();
}

namespace {
/// transpose(transpose(x, p1), p2) -> transpose(x, p1[p2[i]]).
struct ComposeTransposes : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<TransposeOp>();
    if (!inner) {
      return failure();
    }
    SmallVector<int64_t> composed;
    for (int64_t p : op.getPermutation()) {
      composed.push_back(inner.getPermutation()[p]);
    }
    rewriter.replaceOpWithNewOp<TransposeOp>(op, inner.getInput(), composed);
    return success();
  }
};
} // namespace

void TransposeOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                              MLIRContext *context) {
  patterns.add<ComposeTransposes>(context);
}

//===----------------------------------------------------------------------===//
// SliceOp
//===----------------------------------------------------------------------===//

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto input = getRanked(loc, adaptor.getInput(), "input");
  if (failed(input)) {
    return failure();
  }
  SmallVector<int64_t> shape(input->getShape());
  if (auto axis = shape::normalizeAxis(adaptor.getAxis(), input->getRank())) {
    (void)shape::slice(shape[*axis], adaptor.getStart(), adaptor.getEnd(),
                       shape[*axis]);
  }
  inferred.push_back(RankedTensorType::get(shape, input->getElementType()));
  return success();
}

LogicalResult SliceOp::verify() {
  auto input = tensorType(getInput());
  if (failed(verifyAxis(*this, getAxis(), input))) {
    return failure();
  }
  int64_t length;
  std::string error = shape::slice(
      input.getDimSize(*shape::normalizeAxis(getAxis(), input.getRank())),
      getStart(), getEnd(), length);
  if (!error.empty()) {
    return emitOpError("expects a non-empty slice along axis ")
           << static_cast<int64_t>(getAxis()) << " of " << shapeOf(input)
           << ": " << error;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ConcatOp
//===----------------------------------------------------------------------===//

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  if (adaptor.getInputs().empty()) {
    return emitOptionalError(loc,
                             "'kiln.concat' op expects at least one input");
  }
  auto first = getRanked(loc, adaptor.getInputs().front(), "inputs");
  if (failed(first)) {
    return failure();
  }
  SmallVector<int64_t> shape(first->getShape());
  auto axis = shape::normalizeAxis(adaptor.getAxis(), first->getRank());
  for (Value input : adaptor.getInputs().drop_front()) {
    auto type = getRanked(loc, input, "inputs");
    if (failed(type)) {
      return failure();
    }
    for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
      int64_t size = dimOr(*type, i);
      if (axis && i == *axis) {
        if (ShapedType::isDynamic(shape[i]) || ShapedType::isDynamic(size)) {
          shape[i] = ShapedType::kDynamic;
        } else if (__builtin_add_overflow(shape[i], size, &shape[i])) {
          return emitOptionalError(loc,
                                   "'kiln.concat' op expects the "
                                   "lengths of its inputs along axis ",
                                   *axis, " to add up to less than 2^63");
        }
      } else {
        shape[i] = shape::merge(shape[i], size);
      }
    }
  }
  inferred.push_back(RankedTensorType::get(shape, first->getElementType()));
  return success();
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty()) {
    return emitOpError("expects at least one input");
  }
  auto first = tensorType(getInputs().front());
  if (failed(verifyAxis(*this, getAxis(), first))) {
    return failure();
  }
  int64_t axis = *shape::normalizeAxis(getAxis(), first.getRank());
  for (auto [index, input] : llvm::enumerate(getInputs())) {
    auto type = tensorType(input);
    bool ok = type.getRank() == first.getRank();
    for (int64_t i = 0; ok && i < first.getRank(); ++i) {
      ok = i == axis ||
           shape::compatible(type.getDimSize(i), first.getDimSize(i));
    }
    if (!ok) {
      return emitOpError("expects every input to match input #0 ")
             << shapeOf(first) << " outside axis " << axis << ", input #"
             << index << " is " << shapeOf(type);
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// UpdateSliceOp
//===----------------------------------------------------------------------===//

LogicalResult UpdateSliceOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &inferred) {
  return inferSameAsInput(loc, adaptor.getDest(), inferred, "dest");
}

LogicalResult UpdateSliceOp::verify() {
  auto dest = cast<RankedTensorType>(getDest().getType());
  auto source = cast<RankedTensorType>(getSource().getType());
  if (dest.getRank() != source.getRank()) {
    return emitOpError("expects the source to have the destination's rank ")
           << dest.getRank() << ", got " << source;
  }
  if (dest.getElementType() != source.getElementType()) {
    return emitOpError("expects the source to have the destination's element "
                       "type ")
           << dest.getElementType() << ", got " << source.getElementType();
  }
  int64_t axis = int64_t(getAxis());
  if (axis < 0 || axis >= dest.getRank()) {
    return emitOpError("expects an axis in [0, ")
           << dest.getRank() << "), got " << axis;
  }
  if (dest.isDynamicDim(axis)) {
    return emitOpError("expects the destination's length along axis ")
           << axis << " to be static (a buffer of fixed capacity), got "
           << dest;
  }
  for (int64_t d = 0; d < dest.getRank(); ++d) {
    int64_t a = dest.getDimSize(d), b = source.getDimSize(d);
    if (ShapedType::isDynamic(a) || ShapedType::isDynamic(b)) {
      continue;
    }
    if (d == axis ? b > a : a != b) {
      return emitOpError("expects the source ")
             << source << " to fit in the destination " << dest
             << " (dimension " << d << ")";
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &inferred) {
  auto value = dyn_cast_if_present<ElementsAttr>(adaptor.getValueAttr());
  if (!value) {
    return emitOptionalError(loc, "'kiln.constant' op expects an elements "
                                  "attribute 'value'");
  }
  inferred.push_back(value.getType());
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValueAttr(); }
