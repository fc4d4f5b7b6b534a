//===- KilnOps.cpp - Kiln op classes and shared verifier helpers ----------===//
//
// Type inference is total on ranked tensors (unknown sizes become dynamic) so
// that builders never fail; the verifiers then check every shape and report
// the actual values.
//
// This file holds the ODS-generated op classes and the helpers that several
// op families share (declared in OpVerifiers.h). The type inference, verifiers
// and folds of the ops live in one file per op family, as in the
// kiln-to-linalg conversion: KilnLayerOps.cpp, KilnAttentionOps.cpp,
// KilnElementwiseOps.cpp, KilnReductionAndShapeOps.cpp, KilnLossOps.cpp,
// KilnBackwardOps.cpp and KilnOptimizerOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kiln/IR/KilnOps.h"
#include "dialects/Kiln/IR/OpVerifiers.h"
#include "dialects/Kiln/IR/ShapeUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::kiln;

static_assert(shape::kDynamic == ShapedType::kDynamic,
              "shape::kDynamic must match MLIR's dynamic size marker");

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

FailureOr<RankedTensorType>
mlir::kiln::detail::getRanked(std::optional<Location> loc, Value value,
                              StringRef name) {
  if (auto type = dyn_cast_if_present<RankedTensorType>(value ? value.getType()
                                                              : Type())) {
    return type;
  }
  return emitOptionalError(loc, "expects '", name, "' to be a ranked tensor");
}

LogicalResult
mlir::kiln::detail::inferSameAsInput(std::optional<Location> loc, Value input,
                                     SmallVectorImpl<Type> &inferred,
                                     StringRef name) {
  auto type = getRanked(loc, input, name);
  if (failed(type)) {
    return failure();
  }
  inferred.push_back(*type);
  return success();
}

RankedTensorType mlir::kiln::detail::tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

std::string mlir::kiln::detail::shapeOf(Type type) {
  return shape::format(cast<RankedTensorType>(type).getShape());
}

int64_t mlir::kiln::detail::dimOr(RankedTensorType type, int64_t dim) {
  return dim < type.getRank() ? type.getDimSize(dim) : ShapedType::kDynamic;
}

LogicalResult mlir::kiln::detail::verifyVector(Operation *op, Value value,
                                               StringRef name, int64_t size,
                                               StringRef sizeName) {
  auto type = tensorType(value);
  if (type.getRank() != 1 || !shape::compatible(type.getDimSize(0), size)) {
    return op->emitOpError("expects '")
           << name << "' to be [" << sizeName << "] = " << shape::format({size})
           << ", got " << shapeOf(type);
  }
  return success();
}

LogicalResult mlir::kiln::detail::verifyMatrix(Operation *op, Value value,
                                               StringRef name, int64_t rows,
                                               int64_t cols, StringRef layout) {
  auto type = tensorType(value);
  if (type.getRank() != 2 || !shape::compatible(type.getDimSize(0), rows) ||
      !shape::compatible(type.getDimSize(1), cols)) {
    return op->emitOpError("expects '")
           << name << "' to be " << layout << " = "
           << shape::format({rows, cols}) << ", got " << shapeOf(type);
  }
  return success();
}

LogicalResult mlir::kiln::verifyOneFloatType(Operation *op) {
  if (isa<CastOp>(op)) {
    return success();
  }
  auto floatOf = [](Type type) -> Type {
    auto tensor = dyn_cast<RankedTensorType>(type);
    return tensor && isa<FloatType>(tensor.getElementType())
               ? tensor.getElementType()
               : Type();
  };
  Type expected;
  auto check = [&](Type type, StringRef what, unsigned index) -> LogicalResult {
    Type element = floatOf(type);
    if (!element || element == expected) {
      return success();
    }
    if (!expected) {
      expected = element;
      return success();
    }
    return op->emitOpError("expects one floating-point element type for all "
                           "its operands and results (kiln.cast converts), "
                           "but ")
           << what << " #" << index << " has " << element << " where "
           << expected << " came first";
  };
  for (OpOperand &operand : op->getOpOperands()) {
    if (failed(check(operand.get().getType(), "operand",
                     operand.getOperandNumber()))) {
      return failure();
    }
  }
  for (OpResult result : op->getResults()) {
    if (failed(check(result.getType(), "result", result.getResultNumber()))) {
      return failure();
    }
  }
  return success();
}

LogicalResult mlir::kiln::detail::verifyEps(Operation *op, double eps) {
  if (!(eps >= 0.0) || !std::isfinite(eps)) {
    return op->emitOpError("expects 'eps' to be finite and >= 0, got ") << eps;
  }
  return success();
}

LogicalResult mlir::kiln::detail::verifyDropout(Operation *op, double p,
                                                bool hasSeed, StringRef name) {
  if (!(p >= 0.0 && p < 1.0)) {
    return op->emitOpError("expects '")
           << name << "' to be a probability in [0, 1), got " << p;
  }
  if (p > 0.0 && !hasSeed) {
    return op->emitOpError("expects a 'seed' operand when '")
           << name << "' (" << p << ") is non-zero";
  }
  return success();
}

LogicalResult mlir::kiln::detail::verifySameShape(Operation *op, Value a,
                                                  StringRef aName, Value b,
                                                  StringRef bName) {
  auto at = tensorType(a), bt = tensorType(b);
  bool ok = at.getRank() == bt.getRank();
  for (int64_t i = 0; ok && i < at.getRank(); ++i) {
    ok = shape::compatible(at.getDimSize(i), bt.getDimSize(i));
  }
  if (!ok) {
    return op->emitOpError("expects '")
           << aName << "' " << shapeOf(at) << " and '" << bName << "' "
           << shapeOf(bt) << " to have the same shape";
  }
  return success();
}

#define GET_OP_CLASSES
#include "dialects/Kiln/IR/KilnOps.cpp.inc"
