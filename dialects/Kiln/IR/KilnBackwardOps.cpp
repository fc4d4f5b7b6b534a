//===- KilnBackwardOps.cpp - Type inference and verifiers of backward ops -===//
//
// The backward ops that kiln-autodiff builds: kiln.embedding_grad,
// kiln.activation_grad, kiln.layernorm_grad, kiln.loss_grad and
// kiln.pe_grad. (kiln.attention_grad is with attention, kiln.reduce_max_grad
// with the reductions: they share their forward op's checks.)
//
//===----------------------------------------------------------------------===//

#include "dialects/Kiln/IR/KilnOps.h"
#include "dialects/Kiln/IR/OpVerifiers.h"
#include "dialects/Kiln/IR/ShapeUtils.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::detail;

//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//

LogicalResult
EmbeddingGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &inferred) {
  auto grad = getRanked(loc, adaptor.getGrad(), "grad");
  if (failed(grad)) {
    return failure();
  }
  int64_t dim = grad->getRank() ? grad->getDimSize(grad->getRank() - 1)
                                : ShapedType::kDynamic;
  inferred.push_back(RankedTensorType::get(
      {int64_t(adaptor.getNumEmbeddings()), dim}, grad->getElementType()));
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  auto grad = tensorType(getGrad());
  auto ids = tensorType(getIds());
  bool ok = grad.getRank() == ids.getRank() + 1;
  for (int64_t i = 0; ok && i < ids.getRank(); ++i) {
    ok = shape::compatible(grad.getDimSize(i), ids.getDimSize(i));
  }
  if (!ok) {
    return emitOpError("expects 'grad' to be the shape of 'ids' plus the "
                       "embedding width: 'ids' is ")
           << shapeOf(ids) << ", 'grad' is " << shapeOf(grad);
  }
  auto vocab = static_cast<int64_t>(getNumEmbeddings());
  if (vocab <= 0) {
    return emitOpError("expects 'num_embeddings' to be positive, got ")
           << vocab;
  }
  if (std::optional<int64_t> pad = getPaddingIdx();
      pad && (*pad < 0 || *pad >= vocab)) {
    return emitOpError("expects 'padding_idx' (")
           << *pad << ") to be in [0, " << vocab << ")";
  }
  return success();
}

LogicalResult
ActivationGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                   Adaptor adaptor,
                                   SmallVectorImpl<Type> &inferred) {
  return inferSameAsInput(loc, adaptor.getGrad(), inferred, "grad");
}

LogicalResult ActivationGradOp::verify() {
  return verifySameShape(*this, getGrad(), "grad", getInput(), "input");
}

LogicalResult
LayerNormGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &inferred) {
  auto input = getRanked(loc, adaptor.getInput(), "input");
  auto gamma = getRanked(loc, adaptor.getGamma(), "gamma");
  if (failed(input) || failed(gamma)) {
    return failure();
  }
  inferred.append({*input, *gamma, *gamma});
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  if (failed(verifySameShape(*this, getGrad(), "grad", getInput(), "input"))) {
    return failure();
  }
  auto input = tensorType(getInput());
  if (input.getRank() < 1) {
    return emitOpError("expects 'input' to have rank >= 1");
  }
  return verifyVector(*this, getGamma(), "gamma",
                      input.getDimSize(input.getRank() - 1), "dim");
}

LogicalResult RmsNormGradOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &inferred) {
  auto input = getRanked(loc, adaptor.getInput(), "input");
  auto weight = getRanked(loc, adaptor.getWeight(), "weight");
  if (failed(input) || failed(weight)) {
    return failure();
  }
  inferred.append({*input, *weight});
  return success();
}

LogicalResult RmsNormGradOp::verify() {
  if (failed(verifySameShape(*this, getGrad(), "grad", getInput(), "input"))) {
    return failure();
  }
  auto input = tensorType(getInput());
  if (input.getRank() < 1) {
    return emitOpError("expects 'input' to have rank >= 1");
  }
  if (failed(verifyEps(*this, getEps().convertToDouble()))) {
    return failure();
  }
  return verifyVector(*this, getWeight(), "weight",
                      input.getDimSize(input.getRank() - 1), "dim");
}

LogicalResult LossGradOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &inferred) {
  return inferSameAsInput(loc, adaptor.getInput(), inferred);
}

LogicalResult LossGradOp::verify() {
  if (failed(verifyLoss(*this, getInput(), getTargets(),
                        getLabelSmoothing().convertToDouble(),
                        getIgnoreIndex()))) {
    return failure();
  }
  auto lossGrad = tensorType(getLossGrad());
  auto targets = tensorType(getTargets());
  if (getReduction() == LossReduction::none) {
    return verifySameShape(*this, getLossGrad(), "loss_grad", getTargets(),
                           "targets");
  }
  if (lossGrad.getRank() != 0) {
    return emitOpError("expects a rank-0 'loss_grad' for a reduced loss, got ")
           << shapeOf(lossGrad) << " (targets " << shapeOf(targets) << ")";
  }
  return success();
}

LogicalResult PositionalEncodingGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto grad = getRanked(loc, adaptor.getGrad(), "grad");
  if (failed(grad)) {
    return failure();
  }
  inferred.push_back(RankedTensorType::get(
      {int64_t(adaptor.getMaxLen()), dimOr(*grad, grad->getRank() - 1)},
      grad->getElementType()));
  return success();
}

LogicalResult PositionalEncodingGradOp::verify() {
  auto grad = tensorType(getGrad());
  if (grad.getRank() < 2) {
    return emitOpError("expects 'grad' to be [..., seq, dim], got ")
           << shapeOf(grad);
  }
  auto maxLen = static_cast<int64_t>(getMaxLen());
  if (maxLen <= 0) {
    return emitOpError("expects 'max_len' to be positive, got ") << maxLen;
  }
  int64_t seq = grad.getDimSize(grad.getRank() - 2);
  if (!getOffset() && !ShapedType::isDynamic(seq) && seq > maxLen) {
    return emitOpError("expects the sequence length (")
           << seq << ") to be at most 'max_len' (" << maxLen << ")";
  }
  return success();
}
