//===- Attention.cpp - Attention forward and backward ---------------------===//
//
// kiln.mha, kiln.attention and kiln.attention_grad: scaled dot-product
// attention per head, either as whole [B, H, Tq, Tk] score tensors (here) or
// block by block with an online softmax (flash attention, the
// `attention-block` option, in FlashAttention.cpp).
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/KilnToLinalg/Attention.h"

using namespace mlir;
using namespace mlir::kiln;

//===----------------------------------------------------------------------===//
// Attention on whole score tensors
//===----------------------------------------------------------------------===//

Value Attention::split(Value x, int64_t n) {
  auto t = Emitter::type(x);
  if (t.isDynamicDim(2)) {
    t = RankedTensorType::get({t.getDimSize(0), t.getDimSize(1), n * headDim},
                              e.f32());
    x = tensor::CastOp::create(b(), loc(), t, x);
  }
  auto splitType = RankedTensorType::get(
      {t.getDimSize(0), t.getDimSize(1), n, headDim}, e.f32());
  SmallVector<OpFoldResult> shape = {e.size(x, 0), e.size(x, 1),
                                     b().getIndexAttr(n),
                                     b().getIndexAttr(headDim)};
  return tensor::ExpandShapeOp::create(
      b(), loc(), splitType, x,
      ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3}}, shape);
}

/// [B, T, Hkv, G, dh]: the key/value heads' groups of query heads.
static std::pair<RankedTensorType, SmallVector<OpFoldResult>>
groupedHeads(Attention &a, Value xh) {
  int64_t group = a.heads / a.kvHeads;
  auto t = Emitter::type(xh);
  return {RankedTensorType::get(
              {t.getDimSize(0), t.getDimSize(1), a.kvHeads, group, a.headDim},
              a.e.f32()),
          {a.e.size(xh, 0), a.e.size(xh, 1), a.b().getIndexAttr(a.kvHeads),
           a.b().getIndexAttr(group), a.b().getIndexAttr(a.headDim)}};
}

Value Attention::repeatKv(Value xh) {
  if (kvHeads == heads) {
    return xh;
  }
  // [B, T, Hkv, dh] read at (b, t, g, d) for every r of [B, T, Hkv, G, dh],
  // then G folded into the heads: query head g·G + r reads head g.
  auto [groupedType, shape] = groupedHeads(*this, xh);
  Value grouped = e.generic(
      groupedType, xh, e.empty(shape, e.f32()),
      {e.select(5, {0, 1, 2, 4}), e.identity(5)}, Emitter::parallel(5),
      [](OpBuilder &, Location, ValueRange args) { return args[0]; });
  return tensor::CollapseShapeOp::create(
      b(), loc(), grouped,
      ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3}, {4}});
}

Value Attention::sumGroups(Value xh) {
  if (kvHeads == heads) {
    return xh;
  }
  auto [groupedType, grouped] = groupedHeads(*this, xh);
  Value expanded = tensor::ExpandShapeOp::create(
      b(), loc(), groupedType, xh,
      ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3}, {4}}, grouped);
  SmallVector<OpFoldResult> shape = {grouped[0], grouped[1], grouped[2],
                                     grouped[4]};
  auto sumType = RankedTensorType::get(
      {groupedType.getDimSize(0), groupedType.getDimSize(1), kvHeads, headDim},
      e.f32());
  return e.generic(sumType, expanded, e.filled(shape, 0.0),
                   {e.identity(5), e.select(5, {0, 1, 2, 4})},
                   {IteratorType::parallel, IteratorType::parallel,
                    IteratorType::parallel, IteratorType::reduction,
                    IteratorType::parallel},
                   [](OpBuilder &nb, Location l, ValueRange args) -> Value {
                     return arith::AddFOp::create(nb, l, args[0], args[1]);
                   });
}

Value Attention::merge(Value x) {
  return tensor::CollapseShapeOp::create(
      b(), loc(), x, ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3}});
}

Value Attention::headsMajor(Value xh, Value like) {
  int64_t n = Emitter::type(xh).getDimSize(2);
  SmallVector<OpFoldResult> shape = {e.size(like, 0), b().getIndexAttr(n),
                                     b().getIndexAttr(headDim),
                                     e.size(like, 1)};
  return linalg::TransposeOp::create(b(), loc(), xh, e.empty(shape, e.f32()),
                                     ArrayRef<int64_t>{0, 2, 3, 1})
      .getResult()[0];
}

RankedTensorType Attention::scoreType() {
  auto q = Emitter::type(query), k = Emitter::type(key);
  return RankedTensorType::get(
      {q.getDimSize(0), heads, q.getDimSize(1), k.getDimSize(1)}, e.f32());
}

SmallVector<OpFoldResult> Attention::scoreShape() {
  return {e.size(query, 0), b().getIndexAttr(heads), e.size(query, 1),
          e.size(key, 1)};
}

Value Attention::visibleAt(OpBuilder &nb, Location l, Value maskArg,
                           int64_t iDim, int64_t jDim, Value jOffset,
                           Value shift) {
  Value visible;
  if (maskArg) {
    Value zero = arith::ConstantOp::create(
        nb, l, nb.getIntegerAttr(maskArg.getType(), 0));
    visible =
        arith::CmpIOp::create(nb, l, arith::CmpIPredicate::ne, maskArg, zero);
  }
  if (causal) {
    Value i = linalg::IndexOp::create(nb, l, iDim);
    Value j = linalg::IndexOp::create(nb, l, jDim);
    if (jOffset) {
      j = arith::AddIOp::create(nb, l, j, jOffset);
    }
    Value limit = arith::AddIOp::create(nb, l, i, shift);
    Value c = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::sle, j, limit);
    visible =
        visible ? arith::AndIOp::create(nb, l, visible, c).getResult() : c;
  }
  return visible;
}

Value Attention::scaled(OpBuilder &nb, Location l, Value v) {
  float scale = float(1.0 / std::sqrt(double(headDim)));
  return arith::MulFOp::create(
      nb, l, v, arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(scale)));
}

Value Attention::scoreGrad(OpBuilder &nb, Location l, Value dProb, Value prob,
                           Value rowDot) {
  Value d = arith::MulFOp::create(nb, l, prob,
                                  arith::SubFOp::create(nb, l, dProb, rowDot));
  return scaled(nb, l, d);
}

Value Attention::masked(OpBuilder &nb, Location l, Value v, Value visible,
                        double fill) {
  if (!visible) {
    return v;
  }
  Value filler =
      arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(float(fill)));
  return arith::SelectOp::create(nb, l, visible, v, filler);
}

Value Attention::keep(OpBuilder &nb, Location l, Value maskArg, Value shift) {
  return visibleAt(nb, l, maskArg, 2, 3, Value(), shift);
}

Value Attention::shift() {
  return arith::SubIOp::create(b(), loc(), e.sizeValue(key, 1),
                               e.sizeValue(query, 1));
}

Value Attention::rowProducts(Value lhs, Value rhsT) {
  return e.generic(
      scoreType(), ValueRange{lhs, rhsT}, e.filled(scoreShape(), 0.0),
      {e.select(5, {0, 2, 1, 4}), e.select(5, {0, 1, 4, 3}),
       e.select(5, {0, 1, 2, 3})},
      {IteratorType::parallel, IteratorType::parallel, IteratorType::parallel,
       IteratorType::parallel, IteratorType::reduction},
      mulAdd);
}

Value Attention::probabilities(Value qh, Value kh) {
  Value raw = rowProducts(qh, headsMajor(kh, key));
  SmallVector<Value> inputs = {raw};
  SmallVector<AffineMap> maps = {e.identity(4)};
  if (mask) {
    inputs.push_back(mask);
    maps.push_back(e.select(4, {0, 3}));
  }
  maps.push_back(e.identity(4));
  Value sh = shift();
  Value scores =
      e.generic(scoreType(), inputs, e.empty(scoreShape(), e.f32()), maps,
                SmallVector<IteratorType>(4, IteratorType::parallel),
                [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
                  Value s = scaled(nb, l, args[0]);
                  Value visible = keep(nb, l, mask ? args[1] : Value(), sh);
                  return masked(nb, l, s, visible, kMaskedScore);
                });
  return e.softmax(scores, 3, /*log=*/false);
}

Value Attention::withDropout(Value x) {
  if (dropout <= 0.0) {
    return x;
  }
  SmallVector<Value> sizes = {e.sizeValue(query, 0), e.index(heads),
                              e.sizeValue(query, 1), e.sizeValue(key, 1)};
  Value s = seed;
  int64_t st = stream;
  double p = dropout;
  return e.elementwise(scoreType(), scoreShape(), x,
                       [&](OpBuilder &nb, Location l, ValueRange args) {
                         Value scale =
                             Emitter::dropoutScale(nb, l, s, st, p, sizes);
                         return arith::MulFOp::create(nb, l, args[0], scale);
                       });
}

Value Attention::headContraction(Value w, ArrayRef<int64_t> wDims, Value xh,
                                 Value like) {
  SmallVector<OpFoldResult> shape = {e.size(like, 0), e.size(like, 1),
                                     b().getIndexAttr(heads),
                                     b().getIndexAttr(headDim)};
  auto t = Emitter::type(like);
  auto type = RankedTensorType::get(
      {t.getDimSize(0), t.getDimSize(1), heads, headDim}, e.f32());
  return e.generic(type, ValueRange{w, xh}, e.filled(shape, 0.0),
                   {e.select(5, wDims), e.select(5, {0, 4, 1, 3}),
                    e.select(5, {0, 2, 1, 3})},
                   {IteratorType::parallel, IteratorType::parallel,
                    IteratorType::parallel, IteratorType::parallel,
                    IteratorType::reduction},
                   mulAdd);
}

Value Attention::weightedRows(Value w, Value xh) {
  return headContraction(w, {0, 1, 2, 4}, xh, query);
}

Value Attention::weightedColumns(Value w, Value xh) {
  return headContraction(w, {0, 1, 4, 2}, xh, key);
}

bool Attention::kernelTakes() const {
  return headDim <= FlashAttentionOp::kMaxHeadDim;
}

Value Attention::kernelForward(Value value) {
  OpBuilder &rb = b();
  Value init = e.empty(e.sizes(query), e.f32());
  auto op = FlashAttentionOp::create(
      rb, loc(), TypeRange{init.getType()}, query, key, value, mask, seed, init,
      rb.getI64IntegerAttr(heads), rb.getI64IntegerAttr(kvHeads),
      causal ? rb.getUnitAttr() : UnitAttr(), rb.getF64FloatAttr(dropout),
      rb.getI64IntegerAttr(stream));
  return op.getResult().front();
}

SmallVector<Value> Attention::kernelBackward(Value grad, Value value,
                                             Value output) {
  OpBuilder &rb = b();
  SmallVector<Value> inits;
  SmallVector<Type> types;
  for (Value like : {query, key, value}) {
    inits.push_back(e.empty(e.sizes(like), e.f32()));
    types.push_back(inits.back().getType());
  }
  auto op = FlashAttentionGradOp::create(
      rb, loc(), types, grad, query, key, value, output, mask, seed, inits[0],
      inits[1], inits[2], rb.getI64IntegerAttr(heads),
      rb.getI64IntegerAttr(kvHeads), causal ? rb.getUnitAttr() : UnitAttr(),
      rb.getF64FloatAttr(dropout), rb.getI64IntegerAttr(stream));
  return SmallVector<Value>(op.getResults());
}

Value Attention::forwardBy(Value value, int64_t block, bool kernel) {
  if (kernel && kernelTakes()) {
    return kernelForward(value);
  }
  return block > 0 ? fusedForward(value, block) : forward(value);
}

Value Attention::forward(Value value) {
  Value qh = split(query), kh = repeatKv(splitKv(key)),
        vh = repeatKv(splitKv(value));
  Value probs = withDropout(probabilities(qh, kh));
  return merge(weightedRows(probs, vh));
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

namespace {

/// The attention of `op`; `kernel`: lowered as a kernel op if it takes the
/// heads (which reads an i1 mask as it is).
template <typename Op>
static Attention attentionFor(Emitter &e, Op op, Value query, Value key,
                              Value mask, Value seed, bool kernel) {
  int64_t dim = Emitter::type(query).getDimSize(2);
  int64_t heads = int64_t(op.getNumHeads());
  // An i1 mask is widened to i8 once ([B, Tk] elements), so that the
  // [B, H, Tq, Tk] score kernels read bytes and stay vectorized: vectors of
  // i1 are bit-packed in memory, buffers of i1 hold a byte per element, and
  // kiln-tile-and-vectorize leaves ops on i1 buffers scalar.
  bool byKernel = kernel && dim / heads <= FlashAttentionOp::kMaxHeadDim;
  if (mask && !byKernel && Emitter::type(mask).getElementType().isInteger(1)) {
    auto maskType = Emitter::type(mask);
    mask = e.elementwise(
        RankedTensorType::get(maskType.getShape(), e.b.getI8Type()),
        e.sizes(mask), mask, [](OpBuilder &nb, Location l, ValueRange a) {
          return arith::ExtUIOp::create(nb, l, nb.getI8Type(), a[0]);
        });
  }
  int64_t kvHeads = heads;
  if constexpr (!std::is_same_v<Op, MultiHeadAttentionOp>) {
    kvHeads = int64_t(op.getNumKvHeads().value_or(heads));
  }
  return Attention{e,
                   heads,
                   dim / heads,
                   kvHeads,
                   op.getCausal(),
                   mask,
                   seed,
                   op.getDropout().convertToDouble(),
                   int64_t(op.getStream()),
                   query,
                   key};
}

/// A pattern of an attention op, lowered as the GPU kernel ops when
/// `kernel` (Attention::kernelForward; for the gradient,
/// Attention::kernelBackward given the forward output), else block by
/// block when `block` > 0 (Attention::fusedForward, fusedBackward).
template <typename Op>
struct AttentionBlockPattern : KilnPattern<Op> {
  AttentionBlockPattern(MLIRContext *context, int64_t block, bool kernel)
      : KilnPattern<Op>(context), block(block), kernel(kernel) {}
  int64_t block;
  bool kernel;
};

/// Multi-head attention: the q/k/v projections, the attention core (scores
/// with scale and masks, softmax, dropout, the weighted sum of values), and
/// the output projection.
struct MultiHeadAttentionPattern : AttentionBlockPattern<MultiHeadAttentionOp> {
  using AttentionBlockPattern::AttentionBlockPattern;
  SmallVector<Value> lower(MultiHeadAttentionOp op, OpAdaptor adaptor,
                           Emitter &e) const override {
    auto type = resultType(op);
    int64_t dim = type.getDimSize(2);
    Value query = adaptor.getQuery(), kv = adaptor.getKeyValue();
    auto projType = [&](Value x) {
      auto t = Emitter::type(x);
      return RankedTensorType::get({t.getDimSize(0), t.getDimSize(1), dim},
                                   e.f32());
    };
    // The weights and biases with the sizes the verifier implies (dim is
    // static; the input contract checks dynamic ones before a call), so
    // that every projection has the result type it claims.
    int64_t kvDim = Emitter::type(kv).getDimSize(2);
    auto sized = [&](Value x, ArrayRef<int64_t> shape) -> Value {
      if (!x) {
        return x;
      }
      return e.castTo(x, RankedTensorType::get(shape, e.f32()));
    };
    Value wq = sized(adaptor.getWq(), {dim, dim});
    Value wk = sized(adaptor.getWk(), {dim, kvDim});
    Value wv = sized(adaptor.getWv(), {dim, kvDim});
    Value wo = sized(adaptor.getWo(), {dim, dim});
    Value q =
        e.linear(query, wq, sized(adaptor.getBq(), {dim}), projType(query));
    Value k = e.linear(kv, wk, sized(adaptor.getBk(), {dim}), projType(kv));
    Value v = e.linear(kv, wv, sized(adaptor.getBv(), {dim}), projType(kv));
    Attention attention = attentionFor(e, op, q, k, adaptor.getKeyPaddingMask(),
                                       adaptor.getSeed(), kernel);
    Value merged = attention.forwardBy(v, block, kernel);
    return {e.linear(merged, wo, sized(adaptor.getBo(), {dim}), type)};
  }
};

struct AttentionPattern : AttentionBlockPattern<AttentionOp> {
  using AttentionBlockPattern::AttentionBlockPattern;
  SmallVector<Value> lower(AttentionOp op, OpAdaptor adaptor,
                           Emitter &e) const override {
    Value key = adaptor.getKey(), value = adaptor.getValue(),
          mask = adaptor.getKeyPaddingMask();
    if (Value offset = adaptor.getOffset()) {
      // Queries at positions [offset, offset + Tq) of a cache: its first
      // offset + Tq positions are the keys (the call checked they exist),
      // the queries their last Tq, as causal attention has them; the rest
      // is neither read nor transposed.
      Location loc = op.getLoc();
      Value length = arith::AddIOp::create(
          e.b, loc,
          arith::IndexCastOp::create(e.b, loc, e.b.getIndexType(), offset),
          e.sizeValue(adaptor.getQuery(), 1));
      auto prefix = [&](Value x) {
        SmallVector<OpFoldResult> sizes = e.sizes(x);
        sizes[1] = length;
        int64_t rank = Emitter::type(x).getRank();
        return tensor::ExtractSliceOp::create(
                   e.b, loc, x,
                   SmallVector<OpFoldResult>(rank, e.b.getIndexAttr(0)), sizes,
                   SmallVector<OpFoldResult>(rank, e.b.getIndexAttr(1)))
            .getResult();
      };
      key = prefix(key);
      value = prefix(value);
      if (mask) {
        mask = prefix(mask);
      }
    }
    Attention attention = attentionFor(e, op, adaptor.getQuery(), key, mask,
                                       adaptor.getSeed(), kernel);
    return {attention.forwardBy(value, block, kernel)};
  }
};

/// The attention backward pass, probabilities recomputed:
///   dP = dropout(dO·Vᵀ), dS = P·(dP - Σ_j dP·P)·scale·visible,
///   dQ = dS·K, dK = dSᵀ·Q, dV = dropout(P)ᵀ·dO.
struct AttentionGradPattern : AttentionBlockPattern<AttentionGradOp> {
  using AttentionBlockPattern::AttentionBlockPattern;

  SmallVector<Value> lower(AttentionGradOp op, OpAdaptor adaptor,
                           Emitter &e) const override {
    Value mask = adaptor.getKeyPaddingMask();
    Attention a =
        attentionFor(e, op, adaptor.getQuery(), adaptor.getKey(), mask,
                     adaptor.getSeed(), kernel && adaptor.getOutput());
    if (kernel && a.kernelTakes() && adaptor.getOutput()) {
      return a.kernelBackward(adaptor.getGrad(), adaptor.getValue(),
                              adaptor.getOutput());
    }
    if (block > 0 && adaptor.getOutput()) {
      SmallVector<Value> results = a.fusedBackward(
          adaptor.getGrad(), adaptor.getValue(), adaptor.getOutput(), block);
      return results;
    }
    Value qh = a.split(adaptor.getQuery()),
          kh = a.repeatKv(a.splitKv(adaptor.getKey())),
          vh = a.repeatKv(a.splitKv(adaptor.getValue())),
          gh = a.split(adaptor.getGrad());
    Value probs = a.probabilities(qh, kh);
    Value dropped = a.withDropout(probs);
    Value dProbs = a.withDropout(a.rowProducts(gh, a.headsMajor(vh, a.key)));
    // Σ_j dP·P per row.
    Value rowDot = e.generic(
        RankedTensorType::get(a.scoreType().getShape().drop_back(), e.f32()),
        ValueRange{dProbs, probs},
        e.filled(ArrayRef(a.scoreShape()).drop_back(), 0.0),
        {e.identity(4), e.identity(4), e.dropping(4, 3)},
        {IteratorType::parallel, IteratorType::parallel, IteratorType::parallel,
         IteratorType::reduction},
        mulAdd);
    SmallVector<Value> inputs = {dProbs, probs, rowDot};
    SmallVector<AffineMap> maps = {e.identity(4), e.identity(4),
                                   e.dropping(4, 3)};
    if (mask) {
      inputs.push_back(mask);
      maps.push_back(e.select(4, {0, 3}));
    }
    maps.push_back(e.identity(4));
    Value sh = a.shift();
    Value dScores =
        e.generic(a.scoreType(), inputs, e.empty(a.scoreShape(), e.f32()), maps,
                  SmallVector<IteratorType>(4, IteratorType::parallel),
                  [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
                    Value d = a.scoreGrad(nb, l, args[0], args[1], args[2]);
                    Value visible = a.keep(nb, l, mask ? args[3] : Value(), sh);
                    return Attention::masked(nb, l, d, visible, 0.0);
                  });
    Value dq = a.merge(a.weightedRows(dScores, kh));
    Value dk = a.merge(a.sumGroups(a.weightedColumns(dScores, qh)));
    Value dv = a.merge(a.sumGroups(a.weightedColumns(dropped, gh)));
    return {dq, dk, dv};
  }
};

} // namespace

void mlir::kiln::populateAttentionPatterns(RewritePatternSet &patterns,
                                           int64_t attentionBlock,
                                           bool attentionKernel) {
  patterns
      .add<MultiHeadAttentionPattern, AttentionPattern, AttentionGradPattern>(
          patterns.getContext(), attentionBlock, attentionKernel);
}
