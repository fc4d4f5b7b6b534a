//===- Elementwise.cpp - Elementwise arithmetic and activations -----------===//
//
// kiln.add/sub/mul/div (broadcasting), relu, tanh, exp, log, abs, silu, gelu,
// scale and cast: one linalg.generic each, with the op's scalar body.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/KilnToLinalg/Emitter.h"

#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// The scalar body of an elementwise op: one `ScalarOp` on the operands'
/// elements, or (without a `ScalarOp`) a specialization below.
template <typename Op, typename ScalarOp = void>
Value scalarBody(Op op, OpBuilder &b, Location loc, ValueRange args) {
  if constexpr (Op::template hasTrait<OpTrait::OneOperand>()) {
    return ScalarOp::create(b, loc, args[0]);
  } else {
    return ScalarOp::create(b, loc, args[0], args[1]);
  }
}

template <>
Value scalarBody<ReluOp>(ReluOp, OpBuilder &b, Location loc, ValueRange args) {
  return relu(b, loc, args[0]);
}
template <>
Value scalarBody<ScaleOp>(ScaleOp op, OpBuilder &b, Location loc,
                          ValueRange args) {
  Value factor = arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(float(op.getFactor().convertToDouble())));
  return arith::MulFOp::create(b, loc, args[0], factor);
}
template <>
Value scalarBody<SiluOp>(SiluOp, OpBuilder &b, Location loc, ValueRange args) {
  return silu(b, loc, args[0]);
}
template <>
Value scalarBody<GeluOp>(GeluOp op, OpBuilder &b, Location loc,
                         ValueRange args) {
  return gelu(b, loc, args[0], op.getApproximateTanh());
}

template <>
Value scalarBody<CastOp>(CastOp op, OpBuilder &b, Location loc,
                         ValueRange args) {
  auto to = cast<FloatType>(getElementTypeOrSelf(op.getType()));
  auto from = cast<FloatType>(args[0].getType());
  if (to.getWidth() > from.getWidth()) {
    return arith::ExtFOp::create(b, loc, to, args[0]);
  }
  // Rounds to the nearest, ties to even (arith.truncf's default).
  return arith::TruncFOp::create(b, loc, to, args[0]);
}

/// Elementwise arithmetic on one or two broadcast operands.
template <typename Op, typename ScalarOp = void>
SmallVector<Value> lowerElementwise(Op op, typename Op::Adaptor adaptor,
                                    Emitter &e) {
  auto type = resultType(op);
  SmallVector<Value> tensors;
  for (Value v : adaptor.getOperands()) {
    if (isa<RankedTensorType>(v.getType())) {
      tensors.push_back(v);
    }
  }
  return {e.elementwise(type, e.broadcastShape(type, tensors), tensors,
                        [&](OpBuilder &b, Location loc, ValueRange args) {
                          return scalarBody<Op, ScalarOp>(op, b, loc, args);
                        })};
}

/// The pattern of elementwise op `Op`.
template <typename Op, typename ScalarOp = void>
using ElementwisePattern = Lowering<Op, lowerElementwise<Op, ScalarOp>>;

} // namespace

void mlir::kiln::populateElementwisePatterns(RewritePatternSet &patterns) {
  patterns
      .add<ElementwisePattern<AddOp, arith::AddFOp>,
           ElementwisePattern<SubOp, arith::SubFOp>,
           ElementwisePattern<MulOp, arith::MulFOp>,
           ElementwisePattern<DivOp, arith::DivFOp>,
           ElementwisePattern<TanhOp, math::TanhOp>,
           ElementwisePattern<ExpOp, math::ExpOp>,
           ElementwisePattern<LogOp, math::LogOp>,
           ElementwisePattern<AbsOp, math::AbsFOp>, ElementwisePattern<ReluOp>,
           ElementwisePattern<SiluOp>, ElementwisePattern<GeluOp>,
           ElementwisePattern<ScaleOp>, ElementwisePattern<CastOp>>(
          patterns.getContext());
}
