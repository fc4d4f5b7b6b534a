//===- KilnLayerOps.cpp - Type inference and verifiers of the layers ------===//
//
// The building blocks of a transformer and its linear algebra: kiln.embedding,
// kiln.pe, kiln.layernorm, kiln.rms_norm, kiln.rotary, kiln.ffn, kiln.linear
// and kiln.matmul.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kiln/IR/KilnOps.h"
#include "dialects/Kiln/IR/OpVerifiers.h"
#include "dialects/Kiln/IR/ShapeUtils.h"

#include <cmath>

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::detail;

/// The widest rotary head (real models' are 64 to 256).
static constexpr int64_t kMaxRotaryHeadDim = 1 << 16;

//===----------------------------------------------------------------------===//
// EmbeddingOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto ids = getRanked(loc, adaptor.getIds(), "ids");
  auto table = getRanked(loc, adaptor.getTable(), "table");
  if (failed(ids) || failed(table)) {
    return failure();
  }
  SmallVector<int64_t> shape(ids->getShape());
  shape.push_back(dimOr(*table, 1));
  inferred.push_back(RankedTensorType::get(shape, table->getElementType()));
  return success();
}

LogicalResult EmbeddingOp::verify() {
  auto table = tensorType(getTable());
  if (table.getRank() != 2) {
    return emitOpError("expects 'table' to be [vocab, dim], got ")
           << shapeOf(table);
  }
  // No id is in range of a table without rows (its gradient would have
  // num_embeddings 0); a dynamic one is refused at the call.
  if (table.getDimSize(0) == 0) {
    return emitOpError("expects 'table' to have at least one row, got ")
           << shapeOf(table);
  }
  if (std::optional<int64_t> pad = getPaddingIdx()) {
    int64_t vocab = table.getDimSize(0);
    if (*pad < 0 || (!ShapedType::isDynamic(vocab) && *pad >= vocab)) {
      return emitOpError("expects 'padding_idx' (")
             << *pad << ") to be a row of the table " << shapeOf(table);
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// PositionalEncodingOp
//===----------------------------------------------------------------------===//

LogicalResult PositionalEncodingOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  return inferSameAsInput(loc, adaptor.getInput(), inferred);
}

LogicalResult PositionalEncodingOp::verify() {
  auto input = tensorType(getInput());
  if (input.getRank() < 2) {
    return emitOpError("expects 'input' to be [..., seq, dim], got ")
           << shapeOf(input);
  }
  int64_t seq = input.getDimSize(input.getRank() - 2);
  int64_t dim = input.getDimSize(input.getRank() - 1);
  if (getKind() == PEKind::sinusoidal) {
    if (getTable()) {
      return emitOpError("expects no 'table' for the sinusoidal encoding, "
                         "which has no parameters");
    }
    return success();
  }
  if (!getTable()) {
    return emitOpError("expects a 'table' [max_len, dim] for the learned "
                       "encoding");
  }
  auto table = tensorType(getTable());
  if (failed(verifyMatrix(*this, getTable(), "table", ShapedType::kDynamic, dim,
                          "[max_len, dim]"))) {
    return failure();
  }
  int64_t maxLen = table.getDimSize(0);
  if (!getOffset() && !ShapedType::isDynamic(seq) &&
      !ShapedType::isDynamic(maxLen) && seq > maxLen) {
    return emitOpError("expects the sequence length (")
           << seq << ") to be at most the learned table's max_len (" << maxLen
           << ")";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// LayerNormOp
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  return inferSameAsInput(loc, adaptor.getInput(), inferred);
}

LogicalResult LayerNormOp::verify() {
  auto input = tensorType(getInput());
  if (input.getRank() < 1) {
    return emitOpError("expects 'input' to have rank >= 1, got ")
           << shapeOf(input);
  }
  int64_t dim = input.getDimSize(input.getRank() - 1);
  if (failed(verifyVector(*this, getGamma(), "gamma", dim, "dim")) ||
      failed(verifyVector(*this, getBeta(), "beta", dim, "dim"))) {
    return failure();
  }
  if (failed(verifyEps(*this, getEps().convertToDouble()))) {
    return failure();
  }
  if (getMode() == NormMode::std_eps && dim == 1) {
    return emitOpError("expects at least 2 features for the unbiased "
                       "standard deviation of mode std_eps, got 1");
  }
  return success();
}

//===----------------------------------------------------------------------===//
// RmsNormOp
//===----------------------------------------------------------------------===//

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  return inferSameAsInput(loc, adaptor.getInput(), inferred);
}

LogicalResult RmsNormOp::verify() {
  auto input = tensorType(getInput());
  if (input.getRank() < 1) {
    return emitOpError("expects 'input' to have rank >= 1, got ")
           << shapeOf(input);
  }
  if (failed(verifyVector(*this, getWeight(), "weight",
                          input.getDimSize(input.getRank() - 1), "dim"))) {
    return failure();
  }
  if (failed(verifyEps(*this, getEps().convertToDouble()))) {
    return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// RotaryOp
//===----------------------------------------------------------------------===//

LogicalResult RotaryOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  return inferSameAsInput(loc, adaptor.getInput(), inferred);
}

LogicalResult RotaryOp::verify() {
  auto input = tensorType(getInput());
  if (input.getRank() < 2) {
    return emitOpError("expects 'input' to be [..., T, D] (rank >= 2), got ")
           << shapeOf(input);
  }
  int64_t headDim = int64_t(getHeadDim());
  if (headDim <= 0 || headDim % 2 != 0) {
    return emitOpError("expects 'head_dim' to be positive and even, got ")
           << headDim;
  }
  // The lowering keeps a constant of head_dim / 2 frequencies.
  if (headDim > kMaxRotaryHeadDim) {
    return emitOpError("expects 'head_dim' to be at most ")
           << kMaxRotaryHeadDim << ", got " << headDim;
  }
  int64_t dim = input.getDimSize(input.getRank() - 1);
  if (ShapedType::isDynamic(dim)) {
    return emitOpError("expects a static last dimension (the heads' width), "
                       "got ")
           << shapeOf(input);
  }
  if (dim % headDim != 0) {
    return emitOpError("expects 'head_dim' (")
           << headDim << ") to divide the last dimension (" << dim << ")";
  }
  double theta = getTheta().convertToDouble();
  if (!(theta > 0.0) || !std::isfinite(theta)) {
    return emitOpError("expects 'theta' to be finite and > 0, got ") << theta;
  }
  // The frequencies theta^(-2i/head_dim) in f32: a theta below 1 makes them
  // grow, past f32's range for a small one (then every angle were NaN).
  int64_t last = headDim / 2 - 1;
  if (!std::isfinite(
          float(std::pow(theta, -2.0 * double(last) / double(headDim))))) {
    return emitOpError("expects 'theta' to give f32 frequencies "
                       "theta^(-2i/head_dim), got ")
           << theta << " (infinite for i = " << last << ")";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// FeedForwardOp
//===----------------------------------------------------------------------===//

LogicalResult FeedForwardOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &inferred) {
  return inferSameAsInput(loc, adaptor.getInput(), inferred);
}

LogicalResult FeedForwardOp::verify() {
  auto input = tensorType(getInput());
  if (input.getRank() < 1) {
    return emitOpError("expects 'input' to have rank >= 1, got ")
           << shapeOf(input);
  }
  int64_t dim = input.getDimSize(input.getRank() - 1);
  auto w1 = tensorType(getW1());
  int64_t hidden = w1.getRank() == 2 ? w1.getDimSize(0) : ShapedType::kDynamic;
  if (failed(
          verifyMatrix(*this, getW1(), "w1", hidden, dim, "[ffn_dim, dim]")) ||
      failed(
          verifyMatrix(*this, getW2(), "w2", dim, hidden, "[dim, ffn_dim]"))) {
    return failure();
  }
  if (bool(getB1()) != bool(getB2())) {
    return emitOpError("expects both biases (b1, b2) or none");
  }
  if (getB1() &&
      (failed(verifyVector(*this, getB1(), "b1", hidden, "ffn_dim")) ||
       failed(verifyVector(*this, getB2(), "b2", dim, "dim")))) {
    return failure();
  }
  if (failed(verifyDropout(*this, getDropout().convertToDouble(),
                           bool(getSeed()), "dropout"))) {
    return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// LinearOp
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto input = getRanked(loc, adaptor.getInput(), "input");
  auto weight = getRanked(loc, adaptor.getWeight(), "weight");
  if (failed(input) || failed(weight)) {
    return failure();
  }
  SmallVector<int64_t> shape(input->getShape());
  int64_t out = dimOr(*weight, 0);
  if (shape.empty()) {
    shape.push_back(out);
  } else {
    shape.back() = out;
  }
  inferred.push_back(RankedTensorType::get(shape, input->getElementType()));
  return success();
}

LogicalResult LinearOp::verify() {
  auto input = tensorType(getInput());
  if (input.getRank() < 1) {
    return emitOpError("expects 'input' to have rank >= 1, got ")
           << shapeOf(input);
  }
  int64_t in = input.getDimSize(input.getRank() - 1);
  auto weight = tensorType(getWeight());
  int64_t out = dimOr(weight, 0);
  if (failed(verifyMatrix(*this, getWeight(), "weight", out, in,
                          "[out_features, in_features]"))) {
    return failure();
  }
  if (getBias() &&
      failed(verifyVector(*this, getBias(), "bias", out, "out_features"))) {
    return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

namespace {
/// The [..., rows, cols] view of a matmul operand after optional transposition.
struct MatrixView {
  int64_t rows, cols;
};
} // namespace

static MatrixView viewOf(RankedTensorType type, bool transposed) {
  int64_t rank = type.getRank();
  int64_t rows = rank >= 2 ? type.getDimSize(rank - 2) : ShapedType::kDynamic;
  int64_t cols = rank >= 1 ? type.getDimSize(rank - 1) : ShapedType::kDynamic;
  return transposed ? MatrixView{cols, rows} : MatrixView{rows, cols};
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto lhs = getRanked(loc, adaptor.getLhs(), "lhs");
  auto rhs = getRanked(loc, adaptor.getRhs(), "rhs");
  if (failed(lhs) || failed(rhs)) {
    return failure();
  }
  int64_t rank = std::max<int64_t>(lhs->getRank(), 2);
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < rank - 2; ++i) {
    shape.push_back(shape::merge(dimOr(*lhs, i), dimOr(*rhs, i)));
  }
  shape.push_back(viewOf(*lhs, adaptor.getTransposeLhs()).rows);
  shape.push_back(viewOf(*rhs, adaptor.getTransposeRhs()).cols);
  inferred.push_back(RankedTensorType::get(shape, lhs->getElementType()));
  return success();
}

LogicalResult MatmulOp::verify() {
  auto lhs = tensorType(getLhs());
  auto rhs = tensorType(getRhs());
  if (lhs.getRank() < 2 || lhs.getRank() != rhs.getRank()) {
    return emitOpError("expects operands of the same rank >= 2, got 'lhs' ")
           << shapeOf(lhs) << " and 'rhs' " << shapeOf(rhs);
  }
  for (int64_t i = 0; i + 2 < lhs.getRank(); ++i) {
    if (!shape::compatible(lhs.getDimSize(i), rhs.getDimSize(i))) {
      return emitOpError("expects equal batch dimensions, got 'lhs' ")
             << shapeOf(lhs) << " and 'rhs' " << shapeOf(rhs);
    }
  }
  int64_t k1 = viewOf(lhs, getTransposeLhs()).cols;
  int64_t k2 = viewOf(rhs, getTransposeRhs()).rows;
  if (!shape::compatible(k1, k2)) {
    return emitOpError("expects the contracted sizes to match, got ")
           << shape::format({k1}) << " from 'lhs' " << shapeOf(lhs) << " and "
           << shape::format({k2}) << " from 'rhs' " << shapeOf(rhs);
  }
  return success();
}
