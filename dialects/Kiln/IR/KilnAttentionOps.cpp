//===- KilnAttentionOps.cpp - Type inference and verifiers of attention ---===//
//
// kiln.mha, the scaled dot-product attention it is taken apart into
// (kiln.attention) and that attention's gradient (kiln.attention_grad),
// whose checks kiln.attention shares.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kiln/IR/KilnOps.h"
#include "dialects/Kiln/IR/OpVerifiers.h"
#include "dialects/Kiln/IR/ShapeUtils.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::detail;

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
  return success();
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

/// The checks that end kiln.attention's, kiln.attention_grad's and the
/// kernel ops' verifiers: the mask [batch, key_seq], no more queries than
/// keys when causal, and the dropout probability with its seed.
static LogicalResult verifyMaskCausalDropout(Operation *op, ShapedType q,
                                             ShapedType k, Value mask,
                                             bool causal, double dropout,
                                             bool hasSeed) {
  if (mask) {
    auto m = cast<ShapedType>(mask.getType());
    int64_t batch = shape::merge(q.getDimSize(0), k.getDimSize(0));
    if (m.getRank() != 2 || !shape::compatible(m.getDimSize(0), batch) ||
        !shape::compatible(m.getDimSize(1), k.getDimSize(1))) {
      return op->emitOpError("expects 'key_padding_mask' to be [batch, "
                             "key_seq] = ")
             << shape::format({batch, k.getDimSize(1)}) << ", got "
             << shape::format(m.getShape());
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

/// The checks shared by kiln.attention and kiln.attention_grad.
static LogicalResult verifyAttention(Operation *op, Value query, Value key,
                                     Value value, Value mask, int64_t heads,
                                     std::optional<uint64_t> kvHeadsAttr,
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
  if (!kvHeadsAttr) {
    if (!shape::compatible(q.getDimSize(0), k.getDimSize(0)) ||
        !shape::compatible(dim, k.getDimSize(2))) {
      return op->emitOpError("expects 'key' ")
             << shapeOf(k) << " to match the batch and width of 'query' "
             << shapeOf(q);
    }
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
  if (kvHeadsAttr) {
    auto kvHeads = int64_t(*kvHeadsAttr);
    if (kvHeads <= 0 || heads % kvHeads != 0) {
      return op->emitOpError("expects 'num_kv_heads' (")
             << kvHeads << ") to divide 'num_heads' (" << heads << ")";
    }
    int64_t kvDim = dim / heads * kvHeads;
    if (!shape::compatible(q.getDimSize(0), k.getDimSize(0)) ||
        !shape::compatible(kvDim, k.getDimSize(2))) {
      return op->emitOpError("expects 'key' ")
             << shapeOf(k) << " to match the batch of 'query' " << shapeOf(q)
             << " and have " << kvHeads << " heads of width " << dim / heads
             << " (" << kvDim << ")";
    }
  }
  return verifyMaskCausalDropout(op, q, k, mask, causal, dropout, hasSeed);
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  return inferSameAsInput(loc, adaptor.getQuery(), inferred);
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttention(
          *this, getQuery(), getKey(), getValue(), getKeyPaddingMask(),
          int64_t(getNumHeads()), getNumKvHeads(), getCausal(),
          getDropout().convertToDouble(), bool(getSeed())))) {
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

//===----------------------------------------------------------------------===//
// AttentionGradOp
//===----------------------------------------------------------------------===//

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
                         getNumKvHeads(), getCausal(),
                         getDropout().convertToDouble(), bool(getSeed()));
}

//===----------------------------------------------------------------------===//
// FlashAttentionOp and FlashAttentionGradOp
//===----------------------------------------------------------------------===//

/// The checks shared by the kernel ops: every shaped operand a tensor or
/// every one a buffer; `query` [B, Tq, H·dh], `key` and `value` [B, Tk,
/// Hkv·dh] with dh at most FlashAttentionOp::kMaxHeadDim; each of
/// `likeQuery` shaped like the query, each of `likeKey` like the key; the
/// mask [B, Tk] of integers; the causal, dropout and seed rules of
/// kiln.attention.
static LogicalResult
verifyAttentionKernel(Operation *op, Value query, Value key, Value value,
                      Value mask, ArrayRef<Value> likeQuery,
                      ArrayRef<Value> likeKey, int64_t heads, int64_t kvHeads,
                      bool causal, double dropout, bool hasSeed) {
  auto dps = cast<DestinationStyleOpInterface>(op);
  if (!dps.hasPureTensorSemantics() && !dps.hasPureBufferSemantics()) {
    return op->emitOpError("expects tensors only or buffers only");
  }
  auto shaped = [](Value v) { return cast<ShapedType>(v.getType()); };
  auto format = [&](Value v) { return shape::format(shaped(v).getShape()); };
  auto q = shaped(query), k = shaped(key);
  for (Value v : {query, key, value}) {
    if (shaped(v).getRank() != 3) {
      return op->emitOpError("expects 'query', 'key' and 'value' to be "
                             "[batch, seq, dim], got ")
             << format(query) << ", " << format(key) << " and "
             << format(value);
    }
  }
  if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0) {
    return op->emitOpError("expects 'num_kv_heads' (")
           << kvHeads << ") to divide 'num_heads' (" << heads
           << "), both positive";
  }
  int64_t dim = q.getDimSize(2);
  if (ShapedType::isDynamic(dim) || dim % heads != 0) {
    return op->emitOpError("expects 'num_heads' (")
           << heads << ") to divide the static width of 'query' "
           << format(query);
  }
  int64_t headDim = dim / heads;
  if (headDim < 1 || headDim > FlashAttentionOp::kMaxHeadDim) {
    return op->emitOpError("expects heads 1 to ")
           << FlashAttentionOp::kMaxHeadDim << " wide, got " << headDim;
  }
  int64_t batch = q.getDimSize(0);
  if (!shape::compatible(k.getDimSize(0), batch) ||
      !shape::compatible(k.getDimSize(2), headDim * kvHeads)) {
    return op->emitOpError("expects 'key' ")
           << format(key) << " to match the batch of 'query' " << format(query)
           << " and have " << kvHeads << " heads of width " << headDim;
  }
  auto sameShape = [&](Value v, ShapedType like) {
    auto t = shaped(v);
    if (t.getRank() != like.getRank()) {
      return false;
    }
    for (int64_t d = 0; d < t.getRank(); ++d) {
      if (!shape::compatible(t.getDimSize(d), like.getDimSize(d))) {
        return false;
      }
    }
    return true;
  };
  if (!sameShape(value, k)) {
    return op->emitOpError("expects 'value' ")
           << format(value) << " shaped like 'key' " << format(key);
  }
  for (Value v : likeQuery) {
    if (!sameShape(v, q)) {
      return op->emitOpError("expects ")
             << format(v) << " shaped like 'query' " << format(query);
    }
  }
  for (Value v : likeKey) {
    if (!sameShape(v, k)) {
      return op->emitOpError("expects ")
             << format(v) << " shaped like 'key' " << format(key);
    }
  }
  return verifyMaskCausalDropout(op, q, k, mask, causal, dropout, hasSeed);
}

/// Reads every shaped input, writes (and reads) every init, on buffers.
static void kernelEffects(
    DestinationStyleOpInterface op,
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  if (!op.hasPureBufferSemantics()) {
    return;
  }
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isa<MemRefType>(operand.get().getType())) {
      continue;
    }
    effects.emplace_back(MemoryEffects::Read::get(), &operand,
                         SideEffects::DefaultResource::get());
    if (op.isDpsInit(&operand)) {
      effects.emplace_back(MemoryEffects::Write::get(), &operand,
                           SideEffects::DefaultResource::get());
    }
  }
}

LogicalResult FlashAttentionOp::verify() {
  return verifyAttentionKernel(
      *this, getQuery(), getKey(), getValue(), getKeyPaddingMask(), {getInit()},
      {}, int64_t(getNumHeads()), int64_t(getNumKvHeads()), getCausal(),
      getDropout().convertToDouble(), bool(getSeed()));
}

void FlashAttentionOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  kernelEffects(*this, effects);
}

LogicalResult FlashAttentionGradOp::verify() {
  return verifyAttentionKernel(
      *this, getQuery(), getKey(), getValue(), getKeyPaddingMask(),
      {getGrad(), getOutput(), getQueryInit()}, {getKeyInit(), getValueInit()},
      int64_t(getNumHeads()), int64_t(getNumKvHeads()), getCausal(),
      getDropout().convertToDouble(), bool(getSeed()));
}

void FlashAttentionGradOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  kernelEffects(*this, effects);
}
