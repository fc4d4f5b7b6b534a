//===- KilnOptimizerOps.cpp - Inference and verifiers of optimizer updates ===//
//
// kiln.adam_update, kiln.sgd_update and kiln.global_norm_scale, the last
// part of a compiled training step.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kiln/IR/KilnOps.h"
#include "dialects/Kiln/IR/OpVerifiers.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::detail;

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

/// A learning rate must be a rank-0 tensor.
/// `count` results of the type of `value` (an optimizer's new parameter and
/// state).
static LogicalResult inferCopies(std::optional<Location> loc, Value value,
                                 StringRef name, int count,
                                 SmallVectorImpl<Type> &inferred) {
  auto type = getRanked(loc, value, name);
  if (failed(type)) {
    return failure();
  }
  inferred.append(count, *type);
  return success();
}

/// The learning rate and the optional finiteness guard of an optimizer
/// update are scalars (rank-0 tensors).
static LogicalResult verifyScalars(Operation *op, Value lr, Value guard) {
  if (tensorType(lr).getRank() != 0) {
    return op->emitOpError("expects 'lr' to be a rank-0 tensor, got ")
           << shapeOf(lr.getType());
  }
  if (guard && tensorType(guard).getRank() != 0) {
    return op->emitOpError("expects the 'if_finite' value to be a rank-0 "
                           "tensor, got ")
           << shapeOf(guard.getType());
  }
  return success();
}

LogicalResult AdamUpdateOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &inferred) {
  return inferCopies(loc, adaptor.getParam(), "param", 3, inferred);
}

/// Is `value` finite once rounded to f32 (the code computes in f32: 1e39
/// is finite as a double, infinite as a float)?
static bool isFiniteF32(double value) {
  return std::isfinite(value) &&
         std::abs(value) <= double(std::numeric_limits<float>::max());
}

/// A weight decay is finite in f32 and >= 0 (NaN would make every
/// parameter NaN at the first step).
static LogicalResult verifyWeightDecay(Operation *op, double decay) {
  if (!(decay >= 0) || !isFiniteF32(decay)) {
    return op->emitOpError("expects a finite 'weight_decay' >= 0, got ")
           << decay;
  }
  return success();
}

LogicalResult AdamUpdateOp::verify() {
  Value others[] = {getGrad(), getM(), getV()};
  StringRef names[] = {"grad", "m", "v"};
  for (auto [value, name] : llvm::zip(others, names)) {
    if (failed(verifySameShape(*this, getParam(), "param", value, name))) {
      return failure();
    }
  }
  double b1 = getBeta1().convertToDouble(), b2 = getBeta2().convertToDouble();
  if (!(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1)) {
    return emitOpError("expects betas in [0, 1), got ") << b1 << " and " << b2;
  }
  if (!(getEps().convertToDouble() > 0) ||
      !isFiniteF32(getEps().convertToDouble())) {
    return emitOpError("expects a positive, finite 'eps', got ")
           << getEps().convertToDouble();
  }
  if (failed(verifyWeightDecay(*this, getWeightDecay().convertToDouble()))) {
    return failure();
  }
  return verifyScalars(*this, getLr(), getGuard());
}

LogicalResult SgdUpdateOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  return inferCopies(loc, adaptor.getParam(), "param", 2, inferred);
}

LogicalResult SgdUpdateOp::verify() {
  if (failed(verifySameShape(*this, getParam(), "param", getGrad(), "grad")) ||
      failed(verifySameShape(*this, getParam(), "param", getBuf(), "buf"))) {
    return failure();
  }
  double momentum = getMomentum().convertToDouble();
  if (!(momentum >= 0 && momentum < 1)) {
    return emitOpError("expects 'momentum' in [0, 1), got ") << momentum;
  }
  if (failed(verifyWeightDecay(*this, getWeightDecay().convertToDouble()))) {
    return failure();
  }
  return verifyScalars(*this, getLr(), getGuard());
}

LogicalResult
GlobalNormScaleOp::inferReturnTypes(MLIRContext *context,
                                    std::optional<Location>, Adaptor,
                                    SmallVectorImpl<Type> &inferred) {
  inferred.push_back(RankedTensorType::get({}, Float32Type::get(context)));
  return success();
}

LogicalResult GlobalNormScaleOp::verify() {
  if (getInputs().empty()) {
    return emitOpError("expects at least one input");
  }
  if (!(getMaxNorm().convertToDouble() > 0)) {
    return emitOpError("expects a positive 'max_norm', got ")
           << getMaxNorm().convertToDouble();
  }
  return success();
}
