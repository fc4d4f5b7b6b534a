//===- KilnElementwiseOps.cpp - Elementwise op inference, verifiers, folds ===//
//
// The broadcasting binary ops (kiln.add, kiln.sub, kiln.mul, kiln.div), the
// unary ones (kiln.relu, kiln.tanh, kiln.exp, kiln.log, kiln.abs, kiln.silu,
// kiln.gelu), kiln.scale and kiln.dropout.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kiln/IR/KilnOps.h"
#include "dialects/Kiln/IR/OpVerifiers.h"
#include "dialects/Kiln/IR/ShapeUtils.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::detail;

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

static LogicalResult inferBroadcast(std::optional<Location> loc, Value lhs,
                                    Value rhs,
                                    SmallVectorImpl<Type> &inferred) {
  auto a = getRanked(loc, lhs, "lhs");
  auto b = getRanked(loc, rhs, "rhs");
  if (failed(a) || failed(b)) {
    return failure();
  }
  SmallVector<int64_t> shape;
  (void)shape::broadcast(a->getShape(), b->getShape(), shape);
  inferred.push_back(RankedTensorType::get(shape, a->getElementType()));
  return success();
}

static LogicalResult verifyBroadcast(Operation *op) {
  SmallVector<int64_t> shape;
  std::string error =
      shape::broadcast(tensorType(op->getOperand(0)).getShape(),
                       tensorType(op->getOperand(1)).getShape(), shape);
  if (!error.empty()) {
    return op->emitOpError("expects broadcast-compatible operands: ") << error;
  }
  return success();
}

#define KILN_BINARY_OP(OpClass)                                                \
  LogicalResult OpClass::inferReturnTypes(                                     \
      MLIRContext *, std::optional<Location> loc, Adaptor adaptor,             \
      SmallVectorImpl<Type> &inferred) {                                       \
    return inferBroadcast(loc, adaptor.getLhs(), adaptor.getRhs(), inferred);  \
  }                                                                            \
  LogicalResult OpClass::verify() { return verifyBroadcast(*this); }
KILN_BINARY_OP(AddOp)
KILN_BINARY_OP(SubOp)
KILN_BINARY_OP(MulOp)
KILN_BINARY_OP(DivOp)
#undef KILN_BINARY_OP

#define KILN_SAME_TYPE_OP(OpClass)                                             \
  LogicalResult OpClass::inferReturnTypes(                                     \
      MLIRContext *, std::optional<Location> loc, Adaptor adaptor,             \
      SmallVectorImpl<Type> &inferred) {                                       \
    return inferSameAsInput(loc, adaptor.getInput(), inferred);                \
  }
KILN_SAME_TYPE_OP(ReluOp)
KILN_SAME_TYPE_OP(TanhOp)
KILN_SAME_TYPE_OP(ExpOp)
KILN_SAME_TYPE_OP(LogOp)
KILN_SAME_TYPE_OP(AbsOp)
KILN_SAME_TYPE_OP(SiluOp)
KILN_SAME_TYPE_OP(GeluOp)
KILN_SAME_TYPE_OP(ScaleOp)
KILN_SAME_TYPE_OP(DropoutOp)
#undef KILN_SAME_TYPE_OP

OpFoldResult ScaleOp::fold(FoldAdaptor) {
  return getFactor().convertToDouble() == 1.0 ? getInput() : nullptr;
}

LogicalResult DropoutOp::verify() {
  double p = getP().convertToDouble();
  if (!(p >= 0.0 && p < 1.0)) {
    return emitOpError("expects 'p' to be a probability in [0, 1), got ") << p;
  }
  return success();
}

LogicalResult CastOp::verify() {
  auto from = tensorType(getInput());
  auto to = tensorType(getResult());
  if (from.getShape() != to.getShape()) {
    return emitOpError("expects the result to have the input's shape ")
           << shapeOf(from) << ", got " << shapeOf(to);
  }
  return success();
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType()) {
    return getInput();
  }
  // bf16 -> f32 -> bf16 is exact (f32 -> bf16 -> f32 is not).
  if (auto widened = getInput().getDefiningOp<CastOp>();
      widened && widened.getInput().getType() == getType() &&
      getElementTypeOrSelf(widened.getType()).getIntOrFloatBitWidth() >
          getElementTypeOrSelf(getType()).getIntOrFloatBitWidth()) {
    return widened.getInput();
  }
  return nullptr;
}

OpFoldResult DropoutOp::fold(FoldAdaptor) {
  return getP().convertToDouble() == 0.0 ? getInput() : nullptr;
}
