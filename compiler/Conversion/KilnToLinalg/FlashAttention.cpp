//===- FlashAttention.cpp - Attention block by block ----------------------===//
//
// Scaled dot-product attention forward and backward computed block by block
// with an online softmax, as flash attention does (the `attention-block`
// option of kiln-to-linalg): Attention::fusedForward and
// Attention::fusedBackward, and the pieces of their loops.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/KilnToLinalg/Attention.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <limits>

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// Attention block by block: the loops of fusedForward and fusedBackward on
/// top of the pieces Attention shares with the whole-score algorithm.
struct FlashAttention : Attention {
  explicit FlashAttention(const Attention &attention) : Attention(attention) {}

  /// The forward output [B, Tq, D], computed as flash attention does: one
  /// parallel iteration per (batch, head, block of `block` query rows)
  /// runs over blocks of `block` keys with an online softmax (a running row
  /// maximum m and sum l; the accumulated output and l are rescaled by
  /// exp(m_old - m_new) when the maximum grows), and divides by l at the
  /// end. Causal: keys past the block's last visible one are not visited
  /// (their weights would be exp(-1e9 - m) = 0), unless a row of the block
  /// sees no key at all, which attends uniformly to every key as in
  /// `forward`. Dropout scales the weights after l is summed, as it scales
  /// the normalized probabilities there.
  Value fusedForward(Value value, int64_t block) {
    OpBuilder &rb = b();
    Location l = loc();
    Flash f = flash(block);
    Value vh = splitKv(value);
    auto forall = scf::ForallOp::create(
        rb, l,
        ArrayRef<OpFoldResult>{f.batch, rb.getIndexAttr(heads),
                               ceilDiv(f.tq, block)},
        ValueRange{e.empty(headShape(query), e.f32())}, std::nullopt);
    OpBuilder::InsertionGuard guard(rb);
    rb.setInsertionPoint(forall.getTerminator());
    QueryBlock qb =
        queryBlock(f, forall.getInductionVar(0), forall.getInductionVar(1),
                   mulIndex(forall.getInductionVar(2), block));
    Value qBlock = headRows(f.qh, qb, qb.q0, qb.rows);
    // The output accumulates in its place in the result (a fresh block
    // would be copied there at the end).
    Value outSlice =
        headRows(forall.getRegionIterArgs()[0], qb, qb.q0, qb.rows);
    Value acc0 = linalg::FillOp::create(rb, l, ValueRange{e.f32c(0.0)},
                                        ValueRange{outSlice})
                     .getResult(0);
    auto loop = keyLoop(
        f, qb,
        {e.filled(qb.rowShape, -INFINITY), e.filled(qb.rowShape, 0.0), acc0});
    {
      OpBuilder::InsertionGuard inner(rb);
      KeyBlock kb = enterKeyLoop(f, qb, loop);
      auto state = loop.getRegionIterArgs();
      Value m = state[0], sum = state[1], acc = state[2];
      Value scores = blockScores(f, qb, kb, qBlock);
      Online o = onlineStep(qb, kb, scores, m, sum);
      Value weights = withBlockDropout(f, qb, kb, o.weights);
      // acc_new = acc·alpha + weights·V.
      Value scaledAcc = e.generic(
          rowsType(headDim), o.alpha, acc, {e.select(2, {0}), e.identity(2)},
          {IteratorType::parallel, IteratorType::parallel},
          [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
            return arith::MulFOp::create(nb, nl, args[1], args[0]);
          });
      Value accNew = blockProduct(
          weights, {0, 2}, kvRows(vh, qb, kb.k0, kb.cols), {2, 1}, scaledAcc);
      scf::YieldOp::create(rb, l,
                           ValueRange{finishMax(o.rowMax, m), o.sum, accNew});
    }
    // The block's output: acc / l, in place.
    Value outBlock =
        e.generic(rowsType(headDim), loop.getResult(1), loop.getResult(2),
                  {e.select(2, {0}), e.identity(2)},
                  {IteratorType::parallel, IteratorType::parallel},
                  [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
                    return arith::DivFOp::create(nb, nl, args[1], args[0]);
                  });
    rb.setInsertionPointToStart(forall.getTerminator().getBody());
    insertHeadRows(outBlock, forall.getRegionIterArgs()[0], qb, qb.q0, qb.rows);
    rb.setInsertionPointAfter(forall);
    return merge(forall.getResult(0));
  }

  /// The gradients (dQ, dK, dV) of `fusedForward`, block by block as
  /// flash attention's backward pass computes them: one parallel iteration
  /// per (batch, query head) (dK and dV sum over the query blocks; with
  /// grouped-query attention each query head's are summed over its group
  /// after the loop) runs over
  /// blocks of `block` query rows; for each, a first pass over the key
  /// blocks recomputes the row maxima m and sums l, and a second recomputes
  /// the probabilities P = exp(s - m)/l block by block and adds
  ///   dP = dropout(dO·Vᵀ), dS = P·(dP - D)·scale (0 where masked),
  ///   dQ += dS·K, dK += dSᵀ·Q, dV += dropout(P)ᵀ·dO,
  /// where D = Σ_j dP·P of a row is dO·O, from the forward output `output`.
  /// The key blocks visited are those of `fusedForward`.
  SmallVector<Value> fusedBackward(Value grad, Value value, Value output,
                                   int64_t block) {
    OpBuilder &rb = b();
    Location l = loc();
    Flash f = flash(block);
    Value kh = splitKv(key), vh = splitKv(value), gh = split(grad),
          oh = split(output);
    auto forall = scf::ForallOp::create(
        rb, l, ArrayRef<OpFoldResult>{f.batch, rb.getIndexAttr(heads)},
        ValueRange{e.empty(headShape(query), e.f32()),
                   e.empty(headShape(key), e.f32()),
                   e.empty(headShape(key), e.f32())},
        std::nullopt);
    OpBuilder::InsertionGuard guard(rb);
    rb.setInsertionPoint(forall.getTerminator());
    Value bi = forall.getInductionVar(0), h = forall.getInductionVar(1);
    QueryBlock whole{bi, h, f.zero, f.tq, f.tk, f.shift, {}, kvHead(h)};
    auto zeroed = [&](Value out, Value rows) {
      return linalg::FillOp::create(
                 rb, l, ValueRange{e.f32c(0.0)},
                 ValueRange{headRows(out, whole, f.zero, rows)})
          .getResult(0);
    };
    auto outs = forall.getRegionIterArgs();
    auto queryLoop = scf::ForOp::create(
        rb, l, f.zero, ceilDiv(f.tq, block), e.index(1),
        ValueRange{zeroed(outs[0], f.tq), zeroed(outs[1], f.tk),
                   zeroed(outs[2], f.tk)});
    {
      OpBuilder::InsertionGuard inQuery(rb);
      rb.setInsertionPointToStart(queryLoop.getBody());
      QueryBlock qb =
          queryBlock(f, bi, h, mulIndex(queryLoop.getInductionVar(), block));
      Value dqAll = queryLoop.getRegionIterArgs()[0];
      Value dkAll = queryLoop.getRegionIterArgs()[1];
      Value dvAll = queryLoop.getRegionIterArgs()[2];
      Value qBlock = headRows(f.qh, qb, qb.q0, qb.rows);
      Value gBlock = headRows(gh, qb, qb.q0, qb.rows);
      // Pass 1: the row maxima and sums, when the query block visits
      // several key blocks; with one (T <= block: every attention of the
      // encoder-decoder benchmark), pass 2 takes them from the scores it
      // computes anyway, and the block's scores are computed once, not
      // twice (pass 1 then runs no iteration and yields its -inf and 0).
      Value blocks = keyBlocks(f, qb);
      Value single = arith::CmpIOp::create(rb, l, arith::CmpIPredicate::eq,
                                           blocks, e.index(1));
      auto stats = keyLoop(
          f, qb, {e.filled(qb.rowShape, -INFINITY), e.filled(qb.rowShape, 0.0)},
          arith::SelectOp::create(rb, l, single, f.zero, blocks));
      {
        OpBuilder::InsertionGuard inStats(rb);
        KeyBlock kb = enterKeyLoop(f, qb, stats);
        Value m = stats.getRegionIterArgs()[0],
              sum = stats.getRegionIterArgs()[1];
        Online o = onlineStep(qb, kb, blockScores(f, qb, kb, qBlock), m, sum);
        scf::YieldOp::create(rb, l, ValueRange{finishMax(o.rowMax, m), o.sum});
      }
      Value m = stats.getResult(0), sum = stats.getResult(1);
      // D = Σ_d dO·O per row.
      Value rowDot = e.generic(
          rowsType(), ValueRange{gBlock, headRows(oh, qb, qb.q0, qb.rows)},
          e.filled(qb.rowShape, 0.0),
          {e.identity(2), e.identity(2), e.select(2, {0})},
          {IteratorType::parallel, IteratorType::reduction}, mulAdd);
      // Pass 2: the gradients.
      Value dq0 = extractRows(dqAll, qb.q0, qb.rows);
      auto grads = keyLoop(f, qb, {dq0, dkAll, dvAll}, blocks);
      {
        OpBuilder::InsertionGuard inGrads(rb);
        KeyBlock kb = enterKeyLoop(f, qb, grads);
        auto state = grads.getRegionIterArgs();
        Value dq = state[0], dk = state[1], dv = state[2];
        Value scores = blockScores(f, qb, kb, qBlock);
        auto oneBlock =
            scf::IfOp::create(rb, l, TypeRange{rowsType(), rowsType()}, single,
                              /*withElseRegion=*/true);
        {
          OpBuilder::InsertionGuard inIf(rb);
          rb.setInsertionPointToStart(oneBlock.thenBlock());
          Online o = onlineStep(qb, kb, scores, m, sum);
          scf::YieldOp::create(rb, l,
                               ValueRange{finishMax(o.rowMax, m), o.sum});
          rb.setInsertionPointToStart(oneBlock.elseBlock());
          scf::YieldOp::create(rb, l, ValueRange{m, sum});
        }
        Value rowMax = oneBlock.getResult(0), rowSum = oneBlock.getResult(1);
        Value kBlock = kvRows(kh, qb, kb.k0, kb.cols);
        Value vBlock = kvRows(vh, qb, kb.k0, kb.cols);
        Value probs = e.generic(
            blockType(), ValueRange{scores, rowMax, rowSum},
            e.empty(kb.scoreShape, e.f32()),
            {e.identity(2), e.select(2, {0}), e.select(2, {0}), e.identity(2)},
            {IteratorType::parallel, IteratorType::parallel},
            [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
              Value w = math::ExpOp::create(
                  nb, nl, arith::SubFOp::create(nb, nl, args[0], args[1]));
              return arith::DivFOp::create(nb, nl, w, args[2]);
            });
        Value dProbs =
            withBlockDropout(f, qb, kb,
                             blockProduct(gBlock, {0, 2}, vBlock, {1, 2},
                                          e.filled(kb.scoreShape, 0.0)));
        Value dropped = withBlockDropout(f, qb, kb, probs);
        SmallVector<Value> inputs = {dProbs, probs, rowDot};
        SmallVector<AffineMap> maps = {e.identity(2), e.identity(2),
                                       e.select(2, {0})};
        Value maskBlock = blockMask(f, qb, kb);
        if (maskBlock) {
          inputs.push_back(maskBlock);
          maps.push_back(e.select(2, {1}));
        }
        maps.push_back(e.identity(2));
        Value dScores = e.generic(
            blockType(), inputs, e.empty(kb.scoreShape, e.f32()), maps,
            {IteratorType::parallel, IteratorType::parallel},
            [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
              Value d = scoreGrad(nb, nl, args[0], args[1], args[2]);
              Value visible =
                  blockVisible(nb, nl, qb, kb, maskBlock ? args[3] : Value());
              return masked(nb, nl, d, visible, 0.0);
            });
        Value dqNew = blockProduct(dScores, {0, 2}, kBlock, {2, 1}, dq);
        // dK and dV rows k0..k0+cols: Σ_i over the block's query rows.
        Value dkRows = extractRows(dk, kb.k0, kb.cols);
        Value dkNew =
            insertRows(blockProduct(dScores, {2, 0}, qBlock, {2, 1}, dkRows),
                       dk, kb.k0, kb.cols);
        Value dvRows = extractRows(dv, kb.k0, kb.cols);
        Value dvNew =
            insertRows(blockProduct(dropped, {2, 0}, gBlock, {2, 1}, dvRows),
                       dv, kb.k0, kb.cols);
        scf::YieldOp::create(rb, l, ValueRange{dqNew, dkNew, dvNew});
      }
      scf::YieldOp::create(
          rb, l,
          ValueRange{insertRows(grads.getResult(0), dqAll, qb.q0, qb.rows),
                     grads.getResult(1), grads.getResult(2)});
    }
    rb.setInsertionPointToStart(forall.getTerminator().getBody());
    SmallVector<Value> lengths = {f.tq, f.tk, f.tk};
    for (int i = 0; i < 3; ++i) {
      insertHeadRows(queryLoop.getResult(i), outs[i], whole, f.zero,
                     lengths[i]);
    }
    rb.setInsertionPointAfter(forall);
    return {merge(forall.getResult(0)), merge(sumGroups(forall.getResult(1))),
            merge(sumGroups(forall.getResult(2)))};
  }

  // Pieces of the flash-attention loops.

  Value addIndex(Value x, Value y) {
    return arith::AddIOp::create(b(), loc(), x, y);
  }
  Value subIndex(Value x, Value y) {
    return arith::SubIOp::create(b(), loc(), x, y);
  }
  Value mulIndex(Value x, int64_t c) {
    return arith::MulIOp::create(b(), loc(), x, e.index(c));
  }
  Value minIndex(Value x, Value y) {
    return arith::MinSIOp::create(b(), loc(), x, y);
  }
  Value ceilDiv(Value x, int64_t c) {
    return arith::CeilDivSIOp::create(b(), loc(), x, e.index(c));
  }
  /// [rows, inner] with dynamic rows ([rows] when inner is 0).
  RankedTensorType rowsType(int64_t inner = 0) {
    if (inner == 0) {
      return RankedTensorType::get({ShapedType::kDynamic}, e.f32());
    }
    return RankedTensorType::get({ShapedType::kDynamic, inner}, e.f32());
  }
  RankedTensorType blockType() {
    return RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                                 e.f32());
  }
  /// [B, T, H, dh] of `like` ([B, T, D]).
  SmallVector<OpFoldResult> headShape(Value like) {
    return {e.size(like, 0), e.size(like, 1), b().getIndexAttr(heads),
            b().getIndexAttr(headDim)};
  }

  /// What every block of one attention shares.
  struct Flash {
    int64_t block;
    Value qh, kt;        ///< [B, Tq, H, dh], [B, Hkv, dh, Tk]
    Value batch, tq, tk; ///< sizes
    Value shift, first;  ///< Tk - Tq; first kept key per batch row or null
    Value mask;          ///< i8 [B, Tk] or null
    Value zero;
  };
  Flash flash(int64_t block) {
    Flash f;
    f.block = block;
    f.qh = split(query);
    f.kt = headsMajor(splitKv(key), key);
    f.batch = e.sizeValue(query, 0);
    f.tq = e.sizeValue(query, 1);
    f.tk = e.sizeValue(key, 1);
    f.shift = shift();
    f.first = causal && mask ? firstKeys() : Value();
    f.mask = mask;
    f.zero = e.index(0);
    return f;
  }
  /// Query rows q0..q0+rows of head h of batch row b, and the keys they
  /// visit: all, or (causal) up to the block's last visible one unless a
  /// row sees no key at all.
  struct QueryBlock {
    Value b, h, q0, rows, kEnd;
    Value rowShift; ///< q0 + Tk - Tq: query q0 + i sees keys <= i + rowShift
    SmallVector<OpFoldResult> rowShape;
    Value kvH; ///< the key/value head of query head h
  };
  /// The key/value head that query head `h` reads.
  Value kvHead(Value h) {
    if (kvHeads == heads) {
      return h;
    }
    return arith::DivUIOp::create(b(), loc(), h, e.index(heads / kvHeads));
  }
  QueryBlock queryBlock(const Flash &f, Value bi, Value h, Value q0) {
    QueryBlock qb{bi,   h,
                  q0,   minIndex(e.index(f.block), subIndex(f.tq, q0)),
                  f.tk, addIndex(q0, f.shift),
                  {},   kvHead(h)};
    qb.rowShape = {qb.rows};
    if (causal) {
      Value limit = minIndex(addIndex(addIndex(q0, qb.rows), f.shift), f.tk);
      Value firstKey = f.zero;
      if (f.first) {
        Value v =
            tensor::ExtractOp::create(b(), loc(), f.first, ValueRange{bi});
        firstKey =
            arith::IndexCastOp::create(b(), loc(), b().getIndexType(), v);
      }
      Value seesOne =
          arith::CmpIOp::create(b(), loc(), arith::CmpIPredicate::sge,
                                addIndex(q0, f.shift), firstKey);
      qb.kEnd = arith::SelectOp::create(b(), loc(), seesOne, limit, f.tk);
    }
    return qb;
  }
  /// The loop over the key blocks a query block visits, carrying `state`.
  scf::ForOp keyLoop(const Flash &f, const QueryBlock &qb,
                     ArrayRef<Value> state, Value blocks = {}) {
    return scf::ForOp::create(b(), loc(), f.zero,
                              blocks ? blocks : keyBlocks(f, qb), e.index(1),
                              state);
  }
  /// The number of key blocks a query block visits.
  Value keyBlocks(const Flash &f, const QueryBlock &qb) {
    return ceilDiv(qb.kEnd, f.block);
  }
  /// Keys k0..k0+cols of a query block's key loop at iteration `iv`.
  struct KeyBlock {
    Value k0, cols;
    SmallVector<OpFoldResult> scoreShape;
  };
  KeyBlock keyBlock(const Flash &f, const QueryBlock &qb, Value iv) {
    KeyBlock kb;
    kb.k0 = mulIndex(iv, f.block);
    kb.cols = minIndex(e.index(f.block), subIndex(qb.kEnd, kb.k0));
    kb.scoreShape = {qb.rows, kb.cols};
    return kb;
  }
  /// Moves the insertion point to the start of `loop` (a keyLoop) and
  /// returns the key block of its iteration.
  KeyBlock enterKeyLoop(const Flash &f, const QueryBlock &qb, scf::ForOp loop) {
    b().setInsertionPointToStart(loop.getBody());
    return keyBlock(f, qb, loop.getInductionVar());
  }
  /// Rows t0..t0+rows of head qb.h, batch row qb.b of x [B, T, H, dh].
  Value headRows(Value x, const QueryBlock &qb, Value t0, Value rows) {
    return rowsOfHead(x, qb.b, qb.h, t0, rows);
  }
  /// Rows t0..t0+rows of key/value head qb.kvH, batch row qb.b of x
  /// [B, T, Hkv, dh].
  Value kvRows(Value x, const QueryBlock &qb, Value t0, Value rows) {
    return rowsOfHead(x, qb.b, qb.kvH, t0, rows);
  }
  Value rowsOfHead(Value x, Value bi, Value h, Value t0, Value rows) {
    OpFoldResult one = b().getIndexAttr(1);
    SmallVector<OpFoldResult> offsets = {bi, t0, h, b().getIndexAttr(0)};
    SmallVector<OpFoldResult> sizes = {one, rows, one,
                                       b().getIndexAttr(headDim)};
    return tensor::ExtractSliceOp::create(b(), loc(), rowsType(headDim), x,
                                          offsets, sizes,
                                          SmallVector<OpFoldResult>(4, one));
  }
  void insertHeadRows(Value rows, Value into, const QueryBlock &qb, Value t0,
                      Value count) {
    OpFoldResult one = b().getIndexAttr(1);
    SmallVector<OpFoldResult> offsets = {qb.b, t0, qb.h, b().getIndexAttr(0)};
    SmallVector<OpFoldResult> sizes = {one, count, one,
                                       b().getIndexAttr(headDim)};
    tensor::ParallelInsertSliceOp::create(b(), loc(), rows, into, offsets,
                                          sizes,
                                          SmallVector<OpFoldResult>(4, one));
  }
  /// Rows r0..r0+rows of x [T, dh], and back.
  Value extractRows(Value x, Value r0, Value rows) {
    OpFoldResult one = b().getIndexAttr(1);
    SmallVector<OpFoldResult> offsets = {r0, b().getIndexAttr(0)};
    SmallVector<OpFoldResult> sizes = {rows, b().getIndexAttr(headDim)};
    return tensor::ExtractSliceOp::create(b(), loc(), rowsType(headDim), x,
                                          offsets, sizes,
                                          SmallVector<OpFoldResult>(2, one));
  }
  Value insertRows(Value rows, Value into, Value r0, Value count) {
    OpFoldResult one = b().getIndexAttr(1);
    SmallVector<OpFoldResult> offsets = {r0, b().getIndexAttr(0)};
    SmallVector<OpFoldResult> sizes = {count, b().getIndexAttr(headDim)};
    return tensor::InsertSliceOp::create(b(), loc(), rows, into, offsets, sizes,
                                         SmallVector<OpFoldResult>(2, one));
  }
  /// acc + Σ_r lhs·rhs over loops (p0, p1, r): `lhsDims`/`rhsDims` say which
  /// loops index each operand; acc is indexed by (p0, p1).
  Value blockProduct(Value lhs, ArrayRef<int64_t> lhsDims, Value rhs,
                     ArrayRef<int64_t> rhsDims, Value acc) {
    return e.generic(
        acc.getType(), ValueRange{lhs, rhs}, acc,
        {e.select(3, lhsDims), e.select(3, rhsDims), e.select(3, {0, 1})},
        {IteratorType::parallel, IteratorType::parallel,
         IteratorType::reduction},
        mulAdd);
  }
  /// The key block's padding mask [cols] (i8), or null.
  Value blockMask(const Flash &f, const QueryBlock &qb, const KeyBlock &kb) {
    if (!f.mask) {
      return Value();
    }
    OpFoldResult one = b().getIndexAttr(1);
    SmallVector<OpFoldResult> offsets = {qb.b, kb.k0};
    SmallVector<OpFoldResult> sizes = {one, kb.cols};
    return tensor::ExtractSliceOp::create(
        b(), loc(),
        RankedTensorType::get({ShapedType::kDynamic},
                              Emitter::type(f.mask).getElementType()),
        f.mask, offsets, sizes, SmallVector<OpFoldResult>(2, one));
  }
  /// Inside a [rows, cols] generic of a block: whether key k0 + j is
  /// visible from query q0 + i (null when every score is).
  Value blockVisible(OpBuilder &nb, Location nl, const QueryBlock &qb,
                     const KeyBlock &kb, Value maskArg) {
    return visibleAt(nb, nl, maskArg, 0, 1, kb.k0, qb.rowShift);
  }
  /// The scaled, masked scores [rows, cols] of a query block against a key
  /// block (Q rows times the transposed key block).
  Value blockScores(const Flash &f, const QueryBlock &qb, const KeyBlock &kb,
                    Value qBlock) {
    OpBuilder &rb = b();
    OpFoldResult one = rb.getIndexAttr(1);
    SmallVector<OpFoldResult> offsets = {qb.b, qb.kvH, rb.getIndexAttr(0),
                                         kb.k0};
    SmallVector<OpFoldResult> sizes = {one, one, rb.getIndexAttr(headDim),
                                       kb.cols};
    Value ktBlock = tensor::ExtractSliceOp::create(
        rb, loc(),
        RankedTensorType::get({headDim, ShapedType::kDynamic}, e.f32()), f.kt,
        offsets, sizes, SmallVector<OpFoldResult>(4, one));
    Value raw = blockProduct(qBlock, {0, 2}, ktBlock, {2, 1},
                             e.filled(kb.scoreShape, 0.0));
    SmallVector<Value> inputs = {raw};
    SmallVector<AffineMap> maps = {e.identity(2)};
    Value maskBlock = blockMask(f, qb, kb);
    if (maskBlock) {
      inputs.push_back(maskBlock);
      maps.push_back(e.select(2, {1}));
    }
    maps.push_back(e.identity(2));
    return e.generic(blockType(), inputs, e.empty(kb.scoreShape, e.f32()), maps,
                     {IteratorType::parallel, IteratorType::parallel},
                     [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
                       Value s = scaled(nb, nl, args[0]);
                       Value visible = blockVisible(
                           nb, nl, qb, kb, maskBlock ? args[1] : Value());
                       return masked(nb, nl, s, visible, kMaskedScore);
                     });
  }
  /// One step of the online softmax over a block of scores.
  struct Online {
    Value rowMax;  ///< the block's row maxima
    Value alpha;   ///< exp(m - m_new), the rescale of the old state
    Value weights; ///< exp(s - m_new)
    Value sum;     ///< l·alpha + Σ weights, in l's place
  };
  /// The loop's state is updated in place (bufferization wants each yielded
  /// value in its iter_arg's buffer): m becomes max(m, row maxima) last
  /// (finishMax), after every read of the old m.
  Online onlineStep(const QueryBlock &qb, const KeyBlock &kb, Value scores,
                    Value m, Value sum) {
    Online o;
    // (From the lowest float, not -inf: the -inf fill of the initial m would
    // be merged with this one by CSE, and m then copied each iteration.)
    o.rowMax = e.reduce(scores, 1, std::numeric_limits<float>::lowest(),
                        [](OpBuilder &nb, Location nl, Value v, Value a) {
                          return arith::MaximumFOp::create(nb, nl, v, a);
                        });
    Value mNew = e.generic(
        rowsType(), ValueRange{m, o.rowMax}, e.empty(qb.rowShape, e.f32()),
        {e.identity(1), e.identity(1), e.identity(1)}, {IteratorType::parallel},
        [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
          return arith::MaximumFOp::create(nb, nl, args[0], args[1]);
        });
    o.alpha = e.generic(
        rowsType(), ValueRange{m, mNew}, e.empty(qb.rowShape, e.f32()),
        {e.identity(1), e.identity(1), e.identity(1)}, {IteratorType::parallel},
        [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
          return math::ExpOp::create(
              nb, nl, arith::SubFOp::create(nb, nl, args[0], args[1]));
        });
    o.weights = e.generic(
        blockType(), ValueRange{scores, mNew}, e.empty(kb.scoreShape, e.f32()),
        {e.identity(2), e.select(2, {0}), e.identity(2)},
        {IteratorType::parallel, IteratorType::parallel},
        [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
          return math::ExpOp::create(
              nb, nl, arith::SubFOp::create(nb, nl, args[0], args[1]));
        });
    Value scaledSum =
        e.generic(rowsType(), o.alpha, sum, {e.identity(1), e.identity(1)},
                  {IteratorType::parallel},
                  [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
                    return arith::MulFOp::create(nb, nl, args[1], args[0]);
                  });
    o.sum = e.generic(rowsType(), o.weights, scaledSum,
                      {e.identity(2), e.select(2, {0})},
                      {IteratorType::parallel, IteratorType::reduction},
                      [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
                        return arith::AddFOp::create(nb, nl, args[0], args[1]);
                      });
    return o;
  }
  Value finishMax(Value rowMax, Value m) {
    return e.generic(rowsType(), rowMax, m, {e.identity(1), e.identity(1)},
                     {IteratorType::parallel},
                     [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
                       return arith::MaximumFOp::create(nb, nl, args[0],
                                                        args[1]);
                     });
  }
  /// x [rows, cols] times the dropout scale of each element's place
  /// (b, h, q0 + i, k0 + j) in [B, H, Tq, Tk] (x unchanged when p = 0).
  Value withBlockDropout(const Flash &f, const QueryBlock &qb,
                         const KeyBlock &kb, Value x) {
    if (dropout <= 0.0) {
      return x;
    }
    Value rowBase = addIndex(mulIndex(qb.b, heads), qb.h);
    return e.generic(
        blockType(), x, e.empty(kb.scoreShape, e.f32()),
        {e.identity(2), e.identity(2)},
        {IteratorType::parallel, IteratorType::parallel},
        [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
          Value i = arith::AddIOp::create(
              nb, nl, linalg::IndexOp::create(nb, nl, 0), qb.q0);
          Value j = arith::AddIOp::create(
              nb, nl, linalg::IndexOp::create(nb, nl, 1), kb.k0);
          Value row = arith::AddIOp::create(
              nb, nl, arith::MulIOp::create(nb, nl, rowBase, f.tq), i);
          Value linear = arith::AddIOp::create(
              nb, nl, arith::MulIOp::create(nb, nl, row, f.tk), j);
          Value scale =
              Emitter::dropoutScaleAt(nb, nl, seed, stream, dropout, linear);
          return arith::MulFOp::create(nb, nl, args[0], scale);
        });
  }

  /// Per batch row, the first key the padding mask keeps (Tk if none), as
  /// i64 [B]: a causal row before it sees no key at all.
  Value firstKeys() {
    Value tk = e.sizeValue(key, 1);
    Value tk64 = arith::IndexCastOp::create(b(), loc(), b().getI64Type(), tk);
    SmallVector<OpFoldResult> shape = {e.size(mask, 0)};
    Value init =
        linalg::FillOp::create(b(), loc(), ValueRange{tk64},
                               ValueRange{e.empty(shape, b().getI64Type())})
            .getResult(0);
    return e.generic(
        init.getType(), mask, init, {e.identity(2), e.select(2, {0})},
        {IteratorType::parallel, IteratorType::reduction},
        [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
          Value zero = arith::ConstantOp::create(
              nb, l, nb.getIntegerAttr(args[0].getType(), 0));
          Value kept = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::ne,
                                             args[0], zero);
          Value j = arith::IndexCastOp::create(
              nb, l, nb.getI64Type(), linalg::IndexOp::create(nb, l, 1));
          Value candidate = arith::SelectOp::create(nb, l, kept, j, args[1]);
          return arith::MinSIOp::create(nb, l, candidate, args[1]);
        });
  }
};

} // namespace

Value Attention::fusedForward(Value value, int64_t block) {
  return FlashAttention(*this).fusedForward(value, block);
}

SmallVector<Value> Attention::fusedBackward(Value grad, Value value,
                                            Value output, int64_t block) {
  return FlashAttention(*this).fusedBackward(grad, value, output, block);
}
