//===- KilnLossOps.cpp - Type inference and verifiers of the losses -------===//
//
// kiln.cross_entropy and kiln.nll_loss, and the checks of a loss that
// kiln.loss_grad shares (verifyLoss).
//
//===----------------------------------------------------------------------===//

#include "dialects/Kiln/IR/KilnOps.h"
#include "dialects/Kiln/IR/OpVerifiers.h"
#include "dialects/Kiln/IR/ShapeUtils.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::detail;

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

static LogicalResult inferLoss(std::optional<Location> loc, Value input,
                               Value targets, LossReduction reduction,
                               SmallVectorImpl<Type> &inferred) {
  auto inputType = getRanked(loc, input, "input");
  auto targetType = getRanked(loc, targets, "targets");
  if (failed(inputType) || failed(targetType)) {
    return failure();
  }
  ArrayRef<int64_t> shape;
  if (reduction == LossReduction::none) {
    shape = targetType->getShape();
  }
  inferred.push_back(RankedTensorType::get(shape, inputType->getElementType()));
  return success();
}

LogicalResult
mlir::kiln::detail::verifyLoss(Operation *op, Value input, Value targets,
                               double smoothing,
                               std::optional<int64_t> ignoreIndex) {
  auto inputType = tensorType(input);
  auto targetType = tensorType(targets);
  bool ok = inputType.getRank() >= 1 &&
            targetType.getRank() == inputType.getRank() - 1;
  for (int64_t i = 0; ok && i < targetType.getRank(); ++i) {
    ok = shape::compatible(inputType.getDimSize(i), targetType.getDimSize(i));
  }
  if (!ok) {
    return op->emitOpError("expects 'targets' to be the shape of 'input' "
                           "without its last (class) dimension: 'input' is ")
           << shapeOf(inputType) << ", 'targets' is " << shapeOf(targetType);
  }
  // Compiled code reads the logit of every target, ignored ones too (then
  // masks it), clamped into [0, classes - 1]: there must be a class (a
  // dynamic class count is checked at the call).
  if (inputType.getDimSize(inputType.getRank() - 1) == 0) {
    return op->emitOpError("expects at least one class, got 'input' of "
                           "shape ")
           << shapeOf(inputType);
  }
  if (!(smoothing >= 0.0 && smoothing <= 1.0)) {
    return op->emitOpError("expects 'label_smoothing' to be in [0, 1], got ")
           << smoothing;
  }
  // Compared in the targets' type: a value that does not fit would be
  // truncated into another class (2^32 + 1 into class 1).
  unsigned width = targetType.getElementType().getIntOrFloatBitWidth();
  if (ignoreIndex && width < 64 &&
      (*ignoreIndex < -(int64_t(1) << (width - 1)) ||
       *ignoreIndex >= (int64_t(1) << (width - 1)))) {
    return op->emitOpError("expects 'ignore_index' to fit the targets' i")
           << width << ", got " << *ignoreIndex;
  }
  return success();
}

#define KILN_LOSS_OP(OpClass)                                                  \
  LogicalResult OpClass::inferReturnTypes(                                     \
      MLIRContext *, std::optional<Location> loc, Adaptor adaptor,             \
      SmallVectorImpl<Type> &inferred) {                                       \
    return inferLoss(loc, adaptor.getInput(), adaptor.getTargets(),            \
                     adaptor.getReduction(), inferred);                        \
  }                                                                            \
  LogicalResult OpClass::verify() {                                            \
    return verifyLoss(*this, getInput(), getTargets(),                         \
                      getLabelSmoothing().convertToDouble(),                   \
                      getIgnoreIndex());                                       \
  }
KILN_LOSS_OP(CrossEntropyOp)
KILN_LOSS_OP(NLLLossOp)
#undef KILN_LOSS_OP
