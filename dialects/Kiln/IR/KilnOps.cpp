//===- KilnOps.cpp - Kiln op type inference, verifiers and folds ----------===//
//
// Type inference is total on ranked tensors (unknown sizes become dynamic) so
// that builders never fail; the verifiers then check every shape and report
// the actual values.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kiln/IR/KilnOps.h"
#include "dialects/Kiln/IR/ShapeUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::kiln;

static_assert(shape::kDynamic == ShapedType::kDynamic,
              "shape::kDynamic must match MLIR's dynamic size marker");

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// The operand's type as a ranked tensor, or a diagnostic (only reachable
/// while parsing ill-typed IR, before the ODS type constraints run).
static FailureOr<RankedTensorType> getRanked(std::optional<Location> loc,
                                             Value value, StringRef name) {
  if (auto type = dyn_cast_if_present<RankedTensorType>(value ? value.getType()
                                                              : Type())) {
    return type;
  }
  return emitOptionalError(loc, "expects '", name, "' to be a ranked tensor");
}

/// The result type of ops whose result has their (first) input's type.
static LogicalResult inferSameAsInput(std::optional<Location> loc, Value input,
                                      SmallVectorImpl<Type> &inferred) {
  auto type = getRanked(loc, input, "input");
  if (failed(type)) {
    return failure();
  }
  inferred.push_back(*type);
  return success();
}

static RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// The shape of a ranked tensor type, formatted for diagnostics.
static std::string shapeOf(Type type) {
  return shape::format(cast<RankedTensorType>(type).getShape());
}

static int64_t dimOr(RankedTensorType type, int64_t dim) {
  return dim < type.getRank() ? type.getDimSize(dim) : ShapedType::kDynamic;
}

/// Checks that `value` is a rank-1 tensor of a size compatible with `size`.
static LogicalResult verifyVector(Operation *op, Value value, StringRef name,
                                  int64_t size, StringRef sizeName) {
  auto type = tensorType(value);
  if (type.getRank() != 1 || !shape::compatible(type.getDimSize(0), size)) {
    return op->emitOpError("expects '")
           << name << "' to be [" << sizeName << "] = " << shape::format({size})
           << ", got " << shapeOf(type);
  }
  return success();
}

/// Checks that `value` is a rank-2 tensor compatible with [rows, cols].
static LogicalResult verifyMatrix(Operation *op, Value value, StringRef name,
                                  int64_t rows, int64_t cols,
                                  StringRef layout) {
  auto type = tensorType(value);
  if (type.getRank() != 2 || !shape::compatible(type.getDimSize(0), rows) ||
      !shape::compatible(type.getDimSize(1), cols)) {
    return op->emitOpError("expects '")
           << name << "' to be " << layout << " = "
           << shape::format({rows, cols}) << ", got " << shapeOf(type);
  }
  return success();
}

/// Checks that every float tensor operand and the result share one element
/// type (bf16/f16 may be admitted later, but never mixed silently).
static LogicalResult verifySameFloatElements(Operation *op) {
  Type expected = tensorType(op->getResult(0)).getElementType();
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = dyn_cast<RankedTensorType>(operand.get().getType());
    if (!type || !isa<FloatType>(type.getElementType())) {
      continue;
    }
    if (type.getElementType() != expected) {
      return op->emitOpError("expects all floating-point operands to have "
                             "the result's element type ")
             << expected << ", operand #" << operand.getOperandNumber()
             << " has " << type.getElementType();
    }
  }
  return success();
}

static LogicalResult verifyDropout(Operation *op, double p, bool hasSeed,
                                   StringRef name) {
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
  return verifySameFloatElements(*this);
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
  double eps = getEps().convertToDouble();
  if (!(eps >= 0.0) || !std::isfinite(eps)) {
    return emitOpError("expects 'eps' to be finite and >= 0, got ") << eps;
  }
  if (getMode() == NormMode::std_eps && dim == 1) {
    return emitOpError("expects at least 2 features for the unbiased "
                       "standard deviation of mode std_eps, got 1");
  }
  return verifySameFloatElements(*this);
}

//===----------------------------------------------------------------------===//
// MultiHeadAttentionOp
//===----------------------------------------------------------------------===//

LogicalResult MultiHeadAttentionOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  return inferSameAsInput(loc, adaptor.getQuery(), inferred);
}

LogicalResult MultiHeadAttentionOp::verify() {
  auto query = tensorType(getQuery());
  auto kv = tensorType(getKeyValue());
  if (query.getRank() != 3) {
    return emitOpError("expects 'query' to be [batch, seq, dim], got ")
           << shapeOf(query);
  }
  if (kv.getRank() != 3) {
    return emitOpError("expects 'key_value' to be [batch, seq, dim], got ")
           << shapeOf(kv);
  }
  if (!shape::compatible(query.getDimSize(0), kv.getDimSize(0))) {
    return emitOpError("expects 'query' ")
           << shapeOf(query) << " and 'key_value' " << shapeOf(kv)
           << " to have the same batch size";
  }
  int64_t dim = query.getDimSize(2);
  int64_t kvDim = kv.getDimSize(2);
  int64_t heads = getNumHeads();
  if (heads <= 0) {
    return emitOpError("expects 'num_heads' to be positive, got ") << heads;
  }
  if (ShapedType::isDynamic(dim)) {
    return emitOpError("expects a static model dimension, got 'query' ")
           << shapeOf(query);
  }
  if (dim == 0) {
    return emitOpError("expects a model dimension of at least 1 (heads of "
                       "width 0 attend to nothing), got 'query' ")
           << shapeOf(query);
  }
  if (dim % heads != 0) {
    return emitOpError("expects 'num_heads' (")
           << heads << ") to divide the model dimension (" << dim << ")";
  }
  if (failed(verifyMatrix(*this, getWq(), "wq", dim, dim, "[dim, dim]")) ||
      failed(verifyMatrix(*this, getWk(), "wk", dim, kvDim, "[dim, kv_dim]")) ||
      failed(verifyMatrix(*this, getWv(), "wv", dim, kvDim, "[dim, kv_dim]")) ||
      failed(verifyMatrix(*this, getWo(), "wo", dim, dim, "[dim, dim]"))) {
    return failure();
  }
  Value biases[] = {getBq(), getBk(), getBv(), getBo()};
  int numBiases = llvm::count_if(biases, [](Value v) { return bool(v); });
  if (numBiases != 0 && numBiases != 4) {
    return emitOpError("expects all four biases (bq, bk, bv, bo) or none, got ")
           << numBiases;
  }
  if (numBiases == 4) {
    StringRef names[] = {"bq", "bk", "bv", "bo"};
    for (auto [bias, name] : llvm::zip(biases, names)) {
      if (failed(verifyVector(*this, bias, name, dim, "dim"))) {
        return failure();
      }
    }
  }
  int64_t querySeq = query.getDimSize(1);
  int64_t keySeq = kv.getDimSize(1);
  if (Value mask = getKeyPaddingMask()) {
    auto maskType = tensorType(mask);
    int64_t batch = shape::merge(query.getDimSize(0), kv.getDimSize(0));
    if (maskType.getRank() != 2 ||
        !shape::compatible(maskType.getDimSize(0), batch) ||
        !shape::compatible(maskType.getDimSize(1), keySeq)) {
      return emitOpError("expects 'key_padding_mask' to be [batch, key_seq] = ")
             << shape::format({batch, keySeq}) << ", got " << shapeOf(maskType);
    }
  }
  if (getCausal() && !ShapedType::isDynamic(querySeq) &&
      !ShapedType::isDynamic(keySeq) && querySeq > keySeq) {
    return emitOpError("expects causal attention to have no more queries (")
           << querySeq << ") than keys (" << keySeq << ")";
  }
  if (failed(verifyDropout(*this, getDropout().convertToDouble(),
                           bool(getSeed()), "dropout"))) {
    return failure();
  }
  return verifySameFloatElements(*this);
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
  return verifySameFloatElements(*this);
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
  return verifySameFloatElements(*this);
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
  return verifySameFloatElements(*this);
}

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
  return verifySameFloatElements(op);
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
KILN_SAME_TYPE_OP(GeluOp)
KILN_SAME_TYPE_OP(ScaleOp)
KILN_SAME_TYPE_OP(DropoutOp)
KILN_SAME_TYPE_OP(SoftmaxOp)
KILN_SAME_TYPE_OP(LogSoftmaxOp)
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

OpFoldResult DropoutOp::fold(FoldAdaptor) {
  return getP().convertToDouble() == 0.0 ? getInput() : nullptr;
}

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

LogicalResult SoftmaxOp::verify() {
  return verifyAxis(*this, getAxis(), getInput().getType());
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
  auto input = getRanked(loc, adaptor.getInput(), "input");
  if (failed(input)) {
    return failure();
  }
  inferred.push_back(*input);
  return success();
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
          return emitOptionalError(loc, "'kiln.concat' op expects the "
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
  return verifySameFloatElements(*this);
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

static LogicalResult verifyLoss(Operation *op, Value input, Value targets,
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
  return verifySameFloatElements(op);
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
  auto grad = getRanked(loc, adaptor.getGrad(), "grad");
  if (failed(grad)) {
    return failure();
  }
  inferred.push_back(*grad);
  return success();
}

/// Checks that two tensors have the same rank and compatible sizes.
static LogicalResult verifySameShape(Operation *op, Value a, StringRef aName,
                                     Value b, StringRef bName) {
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

/// The checks shared by kiln.attention and kiln.attention_grad.
static LogicalResult verifyAttention(Operation *op, Value query, Value key,
                                     Value value, Value mask, int64_t heads,
                                     bool causal, double dropout,
                                     bool hasSeed) {
  auto q = tensorType(query), k = tensorType(key), v = tensorType(value);
  if (q.getRank() != 3 || k.getRank() != 3 || v.getRank() != 3) {
    return op->emitOpError("expects 'query', 'key' and 'value' to be [batch, "
                           "seq, dim], got ")
           << shapeOf(q) << ", " << shapeOf(k) << " and " << shapeOf(v);
  }
  if (failed(verifySameShape(op, key, "key", value, "value"))) {
    return failure();
  }
  int64_t dim = q.getDimSize(2);
  if (!shape::compatible(q.getDimSize(0), k.getDimSize(0)) ||
      !shape::compatible(dim, k.getDimSize(2))) {
    return op->emitOpError("expects 'key' ")
           << shapeOf(k) << " to match the batch and width of 'query' "
           << shapeOf(q);
  }
  if (dim == 0) {
    return op->emitOpError("expects a model dimension of at least 1 (heads "
                           "of width 0 attend to nothing), got 'query' ")
           << shapeOf(q);
  }
  if (heads <= 0 || ShapedType::isDynamic(dim) || dim % heads != 0) {
    return op->emitOpError("expects 'num_heads' (")
           << heads << ") to divide the static model dimension ("
           << shape::format({dim}).substr(1, shape::format({dim}).size() - 2)
           << ")";
  }
  if (mask) {
    auto m = tensorType(mask);
    int64_t batch = shape::merge(q.getDimSize(0), k.getDimSize(0));
    if (m.getRank() != 2 || !shape::compatible(m.getDimSize(0), batch) ||
        !shape::compatible(m.getDimSize(1), k.getDimSize(1))) {
      return op->emitOpError("expects 'key_padding_mask' to be [batch, "
                             "key_seq] = ")
             << shape::format({batch, k.getDimSize(1)}) << ", got "
             << shapeOf(m);
    }
  }
  if (causal && !ShapedType::isDynamic(q.getDimSize(1)) &&
      !ShapedType::isDynamic(k.getDimSize(1)) &&
      q.getDimSize(1) > k.getDimSize(1)) {
    return op->emitOpError("expects causal attention to have no more queries (")
           << q.getDimSize(1) << ") than keys (" << k.getDimSize(1) << ")";
  }
  return verifyDropout(op, dropout, hasSeed, "dropout");
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  return inferSameAsInput(loc, adaptor.getQuery(), inferred);
}

//===----------------------------------------------------------------------===//
// UpdateSliceOp
//===----------------------------------------------------------------------===//

LogicalResult UpdateSliceOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &inferred) {
  auto dest = getRanked(loc, adaptor.getDest(), "dest");
  if (failed(dest)) {
    return failure();
  }
  inferred.push_back(*dest);
  return success();
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

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttention(*this, getQuery(), getKey(), getValue(),
                             getKeyPaddingMask(), int64_t(getNumHeads()),
                             getCausal(), getDropout().convertToDouble(),
                             bool(getSeed())))) {
    return failure();
  }
  if (getOffset()) {
    if (!getCausal()) {
      return emitOpError("expects 'offset' only with causal attention (the "
                         "queries' positions among the keys)");
    }
    if (cast<RankedTensorType>(getKey().getType()).isDynamicDim(1)) {
      return emitOpError("expects keys of static length with 'offset' (a "
                         "cache of fixed capacity), got ")
             << getKey().getType();
    }
  }
  return success();
}

LogicalResult
AttentionGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &inferred) {
  for (Value v : {adaptor.getQuery(), adaptor.getKey(), adaptor.getValue()}) {
    auto type = getRanked(loc, v, "operand");
    if (failed(type)) {
      return failure();
    }
    inferred.push_back(*type);
  }
  return success();
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifySameShape(*this, getGrad(), "grad", getQuery(), "query"))) {
    return failure();
  }
  if (getOutput() && failed(verifySameShape(*this, getOutput(), "output",
                                            getQuery(), "query"))) {
    return failure();
  }
  return verifyAttention(*this, getQuery(), getKey(), getValue(),
                         getKeyPaddingMask(), int64_t(getNumHeads()),
                         getCausal(), getDropout().convertToDouble(),
                         bool(getSeed()));
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

#define GET_OP_CLASSES
#include "dialects/Kiln/IR/KilnOps.cpp.inc"
