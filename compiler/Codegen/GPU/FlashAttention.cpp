//===- FlashAttention.cpp - Attention forward and backward GPU kernels ----===//
//
// The kernels of kiln.flash_attention (forward) and kiln.flash_attention_grad
// (backward), built by kiln-gpu-kernels. No [B, H, Tq, Tk] tensor exists:
// scores live in registers, 32 keys (or queries) at a time.
//
// Layout shared by the kernels: a block of kWarps warps handles kRows rows
// (query rows forward and for dQ, keys for dK and dV), each warp kRowsPerWarp
// of them at once; the other side is staged in shared memory kLanes rows at
// a time, lane l taking row l of the tile for the dot products, and the
// products' sums over the tile broadcast lane by lane (warp shuffles) into
// accumulators whose columns d = lane + 32c the lanes own. Masked scores
// are -1e9, as on whole scores, so a row that sees no key attends
// uniformly to every key.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/GPU/FlashAttention.h"

#include "compiler/Conversion/KilnToLinalg/Attention.h"
#include "compiler/Conversion/KilnToLinalg/Emitter.h"
#include "dialects/Kiln/IR/KilnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"

#include <cassert>
#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::kiln;

namespace {

constexpr int64_t kLanes = 32;
constexpr int64_t kWarps = 4;
constexpr int64_t kThreads = kWarps * kLanes;
/// Static shared memory a block may declare.
constexpr int64_t kSharedLimit = 48 * 1024;

/// What both kernels know of the attention, and helpers to build its code.
struct Kernel {
  OpBuilder &b;
  Location loc;
  int64_t heads, kvHeads, headDim;
  bool causal;
  double dropout;
  int64_t stream;
  Value seed, mask;
  /// Host values: the batch, the query and key lengths.
  Value batch, tq, tk;
  /// Inside a launch: its thread's warp and lane.
  Value warp, lane;
  /// Rows each warp handles at once (4; 2 where the backward kernels' tiles
  /// of 4 would not fit in shared memory: heads of 128).
  int64_t rowsPerWarp = 4;

  /// Rows of a block.
  int64_t rows() const { return kWarps * rowsPerWarp; }

  /// Columns each lane owns: d = lane + 32c for c < columns().
  int64_t columns() const { return (headDim + kLanes - 1) / kLanes; }

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value f32(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(float(v)));
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value addf(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value mulf(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value ult(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, y);
  }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value andi(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  Value minIndex(Value x, Value y) {
    return arith::MinUIOp::create(b, loc, x, y);
  }
  Value load(Value memref, ValueRange indices) {
    return memref::LoadOp::create(b, loc, memref, indices);
  }
  void store(Value v, Value memref, ValueRange indices) {
    memref::StoreOp::create(b, loc, v, memref, indices);
  }
  void barrier() { gpu::BarrierOp::create(b, loc); }

  /// The butterfly reduction of `v` over the warp's 32 lanes.
  Value warpReduce(Value v, bool max) {
    for (int32_t offset = kLanes / 2; offset > 0; offset /= 2) {
      Value other = gpu::ShuffleOp::create(b, loc, v, offset, kLanes,
                                           gpu::ShuffleMode::XOR)
                        .getShuffleResult();
      v = max ? arith::MaximumFOp::create(b, loc, v, other).getResult()
              : addf(v, other);
    }
    return v;
  }
  /// Lane `from`'s `v`, in every lane.
  Value fromLane(Value v, Value from) {
    Value offset = arith::IndexCastOp::create(b, loc, b.getI32Type(), from);
    Value width = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(32));
    return gpu::ShuffleOp::create(b, loc, v, offset, width,
                                  gpu::ShuffleMode::IDX)
        .getShuffleResult();
  }

  /// Column d = lane + 32c, clamped into the head (lanes past it compute
  /// what nobody stores).
  Value column(int64_t c) {
    return minIndex(add(lane, idx(c * kLanes)), idx(headDim - 1));
  }
  Value columnInHead(int64_t c) {
    return ult(add(lane, idx(c * kLanes)), idx(headDim));
  }

  /// Whether key `key` (< Tk) is visible from query `query`: its padding
  /// mask entry is non-zero and, causal, key <= query + Tk - Tq.
  /// `maskValue` is the mask's entry (null without a mask).
  Value visible(Value maskValue, Value query, Value key) {
    Value vis = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
    if (maskValue) {
      Value zero = arith::ConstantOp::create(
          b, loc, b.getIntegerAttr(maskValue.getType(), 0));
      vis = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, maskValue,
                                  zero);
    }
    if (causal) {
      Value limit = add(query, arith::SubIOp::create(b, loc, tk, tq));
      vis = andi(vis, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle,
                                            key, limit));
    }
    return vis;
  }
  /// The mask's entry of key `key` of batch row `bi` (clamped into the
  /// keys), or null without a mask.
  Value maskAt(Value bi, Value key) {
    if (!mask) {
      return Value();
    }
    Value last = arith::SubIOp::create(
        b, loc, arith::MaxUIOp::create(b, loc, tk, idx(1)), idx(1));
    return load(mask, {bi, minIndex(key, last)});
  }
  /// `score` scaled, or the masked score -1e9 where not `vis`.
  Value score(Value dot, Value vis) {
    Value s = mulf(dot, f32(1.0 / std::sqrt(double(headDim))));
    return select(vis, s, f32(kMaskedScore));
  }
  /// The dropout scale of score (bi, h, query, key) of [B, H, Tq, Tk], or
  /// null without dropout.
  Value dropoutScale(Value bi, Value h, Value query, Value key) {
    if (dropout <= 0.0) {
      return Value();
    }
    Value linear =
        add(mul(add(mul(add(mul(bi, idx(heads)), h), tq), query), tk), key);
    return Emitter::dropoutScaleAt(b, loc, seed, stream, dropout, linear);
  }
  Value dropped(Value v, Value scale) { return scale ? mulf(v, scale) : v; }

  /// Copies rows [first, first + rows) of head `head` of `source` ([B, T,
  /// n·dh], T rows) into `tile` ([rows, >= dh]), zeros past T; the block's
  /// threads stride over the elements (consecutive threads, consecutive
  /// columns).
  void stage(Value tile, Value source, Value bi, Value head, Value first,
             int64_t rows, Value length, Value thread) {
    auto loop =
        scf::ForOp::create(b, loc, thread, idx(rows * headDim), idx(kThreads));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value e = loop.getInductionVar();
    Value r = arith::DivUIOp::create(b, loc, e, idx(headDim));
    Value d = arith::RemUIOp::create(b, loc, e, idx(headDim));
    Value row = add(first, r);
    Value inside = ult(row, length);
    Value safeRow = minIndex(
        row,
        arith::SubIOp::create(
            b, loc, arith::MaxUIOp::create(b, loc, length, idx(1)), idx(1)));
    auto ifInside = scf::IfOp::create(b, loc, TypeRange{b.getF32Type()}, inside,
                                      /*withElse=*/true);
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(&ifInside.getThenRegion().front());
      Value v = load(source, {bi, safeRow, add(mul(head, idx(headDim)), d)});
      scf::YieldOp::create(b, loc, v);
      b.setInsertionPointToStart(&ifInside.getElseRegion().front());
      scf::YieldOp::create(b, loc, f32(0.0));
    }
    store(ifInside.getResult(0), tile, {r, d});
  }

  /// Σ_d rows[r][d]·tile[lane][d] for each of the warp's rows r (`rows`
  /// indexed by `rowBase` + r), and, given `tile2` and `rows2`, the same of
  /// them: the dot products of lane `lane`'s row of the tile.
  SmallVector<Value> dots(Value rows, Value rowBase, Value tile,
                          Value rows2 = {}, Value tile2 = {}) {
    int64_t n = rows2 ? 2 * rowsPerWarp : rowsPerWarp;
    auto loop = scf::ForOp::create(b, loc, idx(0), idx(headDim), idx(1),
                                   SmallVector<Value>(n, f32(0.0)));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value d = loop.getInductionVar();
    Value x = load(tile, {lane, d});
    Value x2 = tile2 ? load(tile2, {lane, d}) : Value();
    SmallVector<Value> next;
    for (int64_t r = 0; r < rowsPerWarp; ++r) {
      Value row = add(rowBase, idx(r));
      next.push_back(
          addf(loop.getRegionIterArgs()[r], mulf(load(rows, {row, d}), x)));
    }
    if (rows2) {
      for (int64_t r = 0; r < rowsPerWarp; ++r) {
        Value row = add(rowBase, idx(r));
        next.push_back(addf(loop.getRegionIterArgs()[rowsPerWarp + r],
                            mulf(load(rows2, {row, d}), x2)));
      }
    }
    scf::YieldOp::create(b, loc, next);
    return SmallVector<Value>(loop.getResults());
  }

  /// acc[r][c] += Σ_j weights[r] of lane j · tile[j][lane + 32c], for each
  /// of `weights` (one per row of the warp) and its accumulators `acc`
  /// (rowsPerWarp x columns(), row-major), over the tile's kLanes rows.
  SmallVector<Value> accumulate(ArrayRef<Value> weights, Value tile,
                                ValueRange acc) {
    auto loop = scf::ForOp::create(b, loc, idx(0), idx(kLanes), idx(1), acc);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value j = loop.getInductionVar();
    SmallVector<Value> next;
    SmallVector<Value> row;
    for (int64_t c = 0; c < columns(); ++c) {
      row.push_back(load(tile, {j, column(c)}));
    }
    for (auto [r, weight] : llvm::enumerate(weights)) {
      Value w = fromLane(weight, j);
      for (int64_t c = 0; c < columns(); ++c) {
        next.push_back(
            addf(loop.getRegionIterArgs()[r * columns() + c], mulf(w, row[c])));
      }
    }
    scf::YieldOp::create(b, loc, next);
    return SmallVector<Value>(loop.getResults());
  }

  /// A loop from `from` to `to` carrying `state`, `body` giving the next.
  SmallVector<Value>
  loop(Value from, Value to, ValueRange state,
       function_ref<SmallVector<Value>(Value, ValueRange)> body) {
    auto l = scf::ForOp::create(b, loc, from, to, idx(1), state);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(l.getBody());
    scf::YieldOp::create(b, loc,
                         body(l.getInductionVar(), l.getRegionIterArgs()));
    return SmallVector<Value>(l.getResults());
  }

  /// A launch of kThreads threads a block over (x, y, z) blocks (each at
  /// least one: an empty launch is not allowed) with shared `tiles`; the
  /// insertion point is left where `active` (built by `isActive` from the
  /// block indices) holds, and warp and lane are set.
  gpu::LaunchOp launch(Value x, Value y, Value z, TypeRange tiles,
                       function_ref<Value(gpu::LaunchOp)> isActive) {
    Value one = idx(1);
    auto l = gpu::LaunchOp::create(
        b, loc, arith::MaxUIOp::create(b, loc, x, one), y,
        arith::MaxUIOp::create(b, loc, z, one), idx(kThreads), one, one,
        /*dynamicSharedMemorySize=*/nullptr, /*asyncTokenType=*/nullptr,
        ValueRange(), tiles);
    b.setInsertionPointToEnd(&l.getBody().front());
    gpu::TerminatorOp::create(b, loc);
    b.setInsertionPointToStart(&l.getBody().front());
    warp = arith::DivUIOp::create(b, loc, l.getThreadIds().x, idx(kLanes));
    lane = arith::RemUIOp::create(b, loc, l.getThreadIds().x, idx(kLanes));
    auto ifActive = scf::IfOp::create(b, loc, isActive(l), /*withElse=*/false);
    b.setInsertionPointToStart(&ifActive.getThenRegion().front());
    return l;
  }

  MemRefType sharedType(ArrayRef<int64_t> shape, Type element) {
    return MemRefType::get(shape, element, AffineMap(),
                           gpu::AddressSpaceAttr::get(
                               b.getContext(), gpu::AddressSpace::Workgroup));
  }
  MemRefType sharedRows(int64_t rows, int64_t width) {
    return sharedType({rows, width}, b.getF32Type());
  }

  /// ceil(n / d).
  Value ceilDiv(Value n, int64_t d) {
    return arith::CeilDivUIOp::create(b, loc, n, idx(d));
  }
  /// The number of key tiles a block whose last query row is `lastQuery`
  /// visits before it knows whether each of its rows saw a key: up to its
  /// last visible key when causal, all of them otherwise.
  Value visitedTiles(Value lastQuery, Value tiles) {
    if (!causal) {
      return tiles;
    }
    Value lastKey = add(lastQuery, arith::SubIOp::create(b, loc, tk, tq));
    Value none = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                       lastKey, idx(0));
    Value upTo = minIndex(
        tiles,
        add(arith::DivUIOp::create(b, loc, lastKey, idx(kLanes)), idx(1)));
    return select(none, idx(0), upTo);
  }
};

/// The online softmax step of one tile for the warp's rows: scores of the
/// lane's key (`scores`, -inf past the keys) update each row's maximum `m`
/// and sum `l`; returns the new m and l and, per row, the weight
/// exp(score - m_new) of the lane's key (0 past the keys) and the factor
/// exp(m_old - m_new) that rescales what was accumulated.
struct OnlineStep {
  SmallVector<Value> m, l, weights, alpha;
};
OnlineStep onlineStep(Kernel &k, ArrayRef<Value> scores, Value valid,
                      ValueRange m, ValueRange l) {
  OnlineStep o;
  for (int64_t r = 0; r < k.rowsPerWarp; ++r) {
    Value s = k.select(valid, scores[r],
                       k.f32(-std::numeric_limits<double>::infinity()));
    Value mNew = arith::MaximumFOp::create(k.b, k.loc, m[r],
                                           k.warpReduce(s, /*max=*/true));
    Value alpha = math::ExpOp::create(
        k.b, k.loc, arith::SubFOp::create(k.b, k.loc, m[r], mNew));
    Value w = k.select(
        valid,
        math::ExpOp::create(k.b, k.loc,
                            arith::SubFOp::create(k.b, k.loc, scores[r], mNew)),
        k.f32(0.0));
    o.m.push_back(mNew);
    o.l.push_back(k.addf(k.mulf(l[r], alpha), k.warpReduce(w, /*max=*/false)));
    o.weights.push_back(w);
    o.alpha.push_back(alpha);
  }
  return o;
}

/// Whether any of the warp's rows that exist (`rowsExist`) saw no visible
/// key: its maximum is the masked score or less.
Value sawNothing(Kernel &k, ValueRange m, ArrayRef<Value> rowsExist) {
  Value any = arith::ConstantOp::create(k.b, k.loc, k.b.getBoolAttr(false));
  for (int64_t r = 0; r < k.rowsPerWarp; ++r) {
    Value saw = arith::CmpFOp::create(k.b, k.loc, arith::CmpFPredicate::OGT,
                                      m[r], k.f32(kMaskedScore));
    Value nothing =
        k.andi(rowsExist[r],
               arith::XOrIOp::create(k.b, k.loc, saw,
                                     arith::ConstantOp::create(
                                         k.b, k.loc, k.b.getBoolAttr(true))));
    any = arith::OrIOp::create(k.b, k.loc, any, nothing);
  }
  return any;
}

/// The key tiles of a block of query rows: [0, visited), then, when a row
/// of the block saw no visible key in them (causal only: `flag`, shared,
/// set by the warps), the rest; `tile` gets each tile and the state and
/// gives the next state. The warps' state (m first, k.rowsPerWarp of it) is
/// what `sawNothing` reads.
SmallVector<Value>
keyTiles(Kernel &k, Value visited, Value tiles, Value flag,
         ArrayRef<Value> rowsExist, ValueRange state,
         function_ref<SmallVector<Value>(Value, ValueRange)> tile) {
  SmallVector<Value> s = k.loop(k.idx(0), visited, state, tile);
  if (!k.causal) {
    return s;
  }
  Value nothing =
      sawNothing(k, ValueRange(s).take_front(k.rowsPerWarp), rowsExist);
  auto ifNothing = scf::IfOp::create(
      k.b, k.loc,
      k.andi(nothing,
             arith::CmpIOp::create(k.b, k.loc, arith::CmpIPredicate::eq, k.lane,
                                   k.idx(0))),
      /*withElse=*/false);
  {
    OpBuilder::InsertionGuard guard(k.b);
    k.b.setInsertionPointToStart(&ifNothing.getThenRegion().front());
    k.store(arith::ConstantOp::create(k.b, k.loc, k.b.getI32IntegerAttr(1)),
            flag, {k.idx(0)});
  }
  k.barrier();
  Value any = arith::CmpIOp::create(
      k.b, k.loc, arith::CmpIPredicate::ne, k.load(flag, {k.idx(0)}),
      arith::ConstantOp::create(k.b, k.loc, k.b.getI32IntegerAttr(0)));
  return k.loop(visited, k.select(any, tiles, visited), s, tile);
}

/// Clears the block's flag (thread 0) before the barrier that follows.
void clearFlag(Kernel &k, Value flag, Value thread) {
  if (!k.causal) {
    return;
  }
  auto first = scf::IfOp::create(k.b, k.loc,
                                 arith::CmpIOp::create(k.b, k.loc,
                                                       arith::CmpIPredicate::eq,
                                                       thread, k.idx(0)),
                                 /*withElse=*/false);
  OpBuilder::InsertionGuard guard(k.b);
  k.b.setInsertionPointToStart(&first.getThenRegion().front());
  k.store(arith::ConstantOp::create(k.b, k.loc, k.b.getI32IntegerAttr(0)), flag,
          {k.idx(0)});
}

/// The kernel description of `op` (either kernel op), its host sizes
/// read before the launches.
template <typename Op>
Kernel kernelFor(OpBuilder &b, Op op) {
  Location loc = op.getLoc();
  Value query = op.getQuery(), key = op.getKey();
  auto heads = int64_t(op.getNumHeads());
  int64_t width = cast<MemRefType>(query.getType()).getDimSize(2);
  return Kernel{b,
                loc,
                heads,
                int64_t(op.getNumKvHeads()),
                width / heads,
                op.getCausal(),
                op.getDropout().convertToDouble(),
                int64_t(op.getStream()),
                op.getSeed(),
                op.getKeyPaddingMask(),
                memref::DimOp::create(b, loc, query, 0),
                memref::DimOp::create(b, loc, query, 1),
                memref::DimOp::create(b, loc, key, 1),
                Value(),
                Value()};
}

/// A block of query rows of one head, in a launch over (ceil(Tq / rows),
/// H, B) blocks: its batch row, head, key/value head, first row, the
/// warp's first row in the block, the warp's queries and whether each
/// exists, the key tiles, and those it visits before knowing whether each
/// row saw a key (visitedTiles).
struct QueryRows {
  gpu::LaunchOp launch;
  Value thread, bi, h, kvh, q0, rowBase, tiles, visited;
  SmallVector<Value> queries, rowsExist;
};

QueryRows launchQueryRows(Kernel &k, TypeRange shared) {
  QueryRows q;
  Value queryBlocks = k.ceilDiv(k.tq, k.rows());
  q.launch = k.launch(queryBlocks, k.idx(k.heads), k.batch, shared,
                      [&](gpu::LaunchOp l) {
                        return k.andi(k.ult(l.getBlockIds().x, queryBlocks),
                                      k.ult(l.getBlockIds().z, k.batch));
                      });
  q.thread = q.launch.getThreadIds().x;
  q.bi = q.launch.getBlockIds().z;
  q.h = q.launch.getBlockIds().y;
  q.kvh = arith::DivUIOp::create(k.b, k.loc, q.h, k.idx(k.heads / k.kvHeads));
  q.q0 = k.mul(q.launch.getBlockIds().x, k.idx(k.rows()));
  q.rowBase = k.mul(k.warp, k.idx(k.rowsPerWarp));
  for (int64_t r = 0; r < k.rowsPerWarp; ++r) {
    q.queries.push_back(k.add(q.q0, k.add(q.rowBase, k.idx(r))));
    q.rowsExist.push_back(k.ult(q.queries.back(), k.tq));
  }
  q.tiles = k.ceilDiv(k.tk, kLanes);
  Value lastQuery =
      k.minIndex(k.add(q.q0, k.idx(k.rows() - 1)),
                 arith::SubIOp::create(k.b, k.loc, k.tq, k.idx(1)));
  q.visited = k.visitedTiles(lastQuery, q.tiles);
  return q;
}

/// In a block of query rows: key tile `t` staged (the keys into `kTile`,
/// and the values into `vTile` where given) once the block is done with
/// the previous one; the lane's key, whether it exists, and its mask entry.
struct KeyLane {
  Value key, valid, maskValue;
};
KeyLane stageKeyTile(Kernel &k, const QueryRows &rows, Value t, Value kTile,
                     Value keys, Value vTile = {}, Value values = {}) {
  Value k0 = k.mul(t, k.idx(kLanes));
  k.barrier();
  k.stage(kTile, keys, rows.bi, rows.kvh, k0, kLanes, k.tk, rows.thread);
  if (vTile) {
    k.stage(vTile, values, rows.bi, rows.kvh, k0, kLanes, k.tk, rows.thread);
  }
  k.barrier();
  Value key = k.add(k0, k.lane);
  return {key, k.ult(key, k.tk), k.maskAt(rows.bi, key)};
}

/// Stores `acc[r][c] / l[r]` (0 where l is 0: no keys) of the warp's rows
/// that exist into `out` ([B, T, n·dh]) at head `head`.
void storeRows(Kernel &k, Value out, Value bi, Value head, Value first,
               Value length, ValueRange acc, ArrayRef<Value> divisors) {
  for (int64_t r = 0; r < k.rowsPerWarp; ++r) {
    Value row =
        k.add(first, k.add(k.mul(k.warp, k.idx(k.rowsPerWarp)), k.idx(r)));
    for (int64_t c = 0; c < k.columns(); ++c) {
      auto inside = scf::IfOp::create(
          k.b, k.loc, k.andi(k.ult(row, length), k.columnInHead(c)),
          /*withElse=*/false);
      OpBuilder::InsertionGuard guard(k.b);
      k.b.setInsertionPointToStart(&inside.getThenRegion().front());
      Value v = acc[r * k.columns() + c];
      if (!divisors.empty()) {
        Value l = divisors[r];
        Value positive = arith::CmpFOp::create(
            k.b, k.loc, arith::CmpFPredicate::OGT, l, k.f32(0.0));
        v = k.select(positive, arith::DivFOp::create(k.b, k.loc, v, l),
                     k.f32(0.0));
      }
      k.store(v, out,
              {bi, row, k.add(k.mul(head, k.idx(k.headDim)), k.column(c))});
    }
  }
}

} // namespace

void mlir::kiln::buildFlashAttention(RewriterBase &b, FlashAttentionOp op) {
  b.setInsertionPoint(op);
  Kernel k = kernelFor(b, op);
  int64_t dh = k.headDim;
  assert(int64_t(sizeof(float)) * (k.rows() * dh + kLanes * (2 * dh + 1)) + 4 <=
             kSharedLimit &&
         "heads too wide for the kernel");
  Value query = op.getQuery(), key = op.getKey(), value = op.getValue(),
        out = op.getInit();
  // Keys are read by rows across lanes: a column of padding puts the 32
  // lanes' reads of one column in 32 banks.
  SmallVector<Type> shared = {
      k.sharedRows(k.rows(), dh), k.sharedRows(kLanes, dh + 1),
      k.sharedRows(kLanes, dh), k.sharedType({1}, b.getI32Type())};
  QueryRows rows = launchQueryRows(k, shared);
  auto attrs = rows.launch.getWorkgroupAttributions();
  Value qTile = attrs[0], kTile = attrs[1], vTile = attrs[2], flag = attrs[3];
  Value thread = rows.thread, bi = rows.bi, h = rows.h, q0 = rows.q0,
        rowBase = rows.rowBase, tiles = rows.tiles, visited = rows.visited;
  ArrayRef<Value> queries = rows.queries, rowsExist = rows.rowsExist;
  k.stage(qTile, query, bi, h, q0, k.rows(), k.tq, thread);
  clearFlag(k, flag, thread);
  k.barrier();
  int64_t cols = k.columns();
  SmallVector<Value> state(k.rowsPerWarp,
                           k.f32(-std::numeric_limits<double>::infinity()));
  state.append(k.rowsPerWarp, k.f32(0.0));
  state.append(k.rowsPerWarp * cols, k.f32(0.0));
  auto tile = [&](Value t, ValueRange s) -> SmallVector<Value> {
    ValueRange m = s.take_front(k.rowsPerWarp),
               l = s.slice(k.rowsPerWarp, k.rowsPerWarp),
               acc = s.drop_front(2 * k.rowsPerWarp);
    KeyLane lane = stageKeyTile(k, rows, t, kTile, key, vTile, value);
    Value keyIndex = lane.key, valid = lane.valid, maskValue = lane.maskValue;
    SmallVector<Value> raw = k.dots(qTile, rowBase, kTile);
    SmallVector<Value> scores;
    for (int64_t r = 0; r < k.rowsPerWarp; ++r) {
      scores.push_back(
          k.score(raw[r], k.visible(maskValue, queries[r], keyIndex)));
    }
    OnlineStep o = onlineStep(k, scores, valid, m, l);
    SmallVector<Value> weights, rescaled;
    for (int64_t r = 0; r < k.rowsPerWarp; ++r) {
      weights.push_back(
          k.dropped(o.weights[r], k.dropoutScale(bi, h, queries[r], keyIndex)));
      for (int64_t c = 0; c < cols; ++c) {
        rescaled.push_back(k.mulf(acc[r * cols + c], o.alpha[r]));
      }
    }
    SmallVector<Value> next = o.m;
    next.append(o.l);
    next.append(k.accumulate(weights, vTile, rescaled));
    return next;
  };
  SmallVector<Value> result =
      keyTiles(k, visited, tiles, flag, rowsExist, state, tile);
  storeRows(k, out, bi, h, q0, k.tq,
            ValueRange(result).drop_front(2 * k.rowsPerWarp),
            SmallVector<Value>(
                ValueRange(result).slice(k.rowsPerWarp, k.rowsPerWarp)));
  b.eraseOp(op);
}

void mlir::kiln::buildFlashAttentionGrad(RewriterBase &b,
                                         FlashAttentionGradOp op) {
  Location loc = op.getLoc();
  b.setInsertionPoint(op);
  Kernel k = kernelFor(b, op);
  int64_t dh = k.headDim, group = k.heads / k.kvHeads;
  // Each kernel stages two tiles of the block's rows and two padded ones of
  // 32 rows (and a flag).
  auto sharedBytes = [&] {
    return int64_t(sizeof(float)) *
               (2 * k.rows() * dh + 2 * kLanes * (dh + 1)) +
           4;
  };
  if (sharedBytes() > kSharedLimit) {
    k.rowsPerWarp = 2;
  }
  assert(sharedBytes() <= kSharedLimit && "heads too wide for the kernels");
  int64_t cols = k.columns();
  Value grad = op.getGrad(), query = op.getQuery(), key = op.getKey(),
        value = op.getValue(), output = op.getOutput();
  Value inf = k.f32(-std::numeric_limits<double>::infinity());
  // Per query row of each head: its maximum, its sum and D = dO·O.
  Value rowsTotal = k.mul(k.mul(k.batch, k.idx(k.heads)), k.tq);
  Value stats = memref::AllocOp::create(
      b, loc, MemRefType::get({ShapedType::kDynamic, 3}, b.getF32Type()),
      ValueRange{rowsTotal});
  auto statRow = [&](Value bi, Value h, Value qi) {
    return k.add(k.mul(k.add(k.mul(bi, k.idx(k.heads)), h), k.tq), qi);
  };
  Value tiles = k.ceilDiv(k.tk, kLanes);

  // Kernel 1: a block per 16 query rows of a head (8 at heads over 127):
  // the statistics, then dQ.
  {
    OpBuilder::InsertionGuard guard(b);
    SmallVector<Type> shared = {
        k.sharedRows(k.rows(), dh), k.sharedRows(k.rows(), dh),
        k.sharedRows(kLanes, dh + 1), k.sharedRows(kLanes, dh + 1),
        k.sharedType({1}, b.getI32Type())};
    QueryRows rows = launchQueryRows(k, shared);
    auto attrs = rows.launch.getWorkgroupAttributions();
    Value qTile = attrs[0], gTile = attrs[1], kTile = attrs[2],
          vTile = attrs[3], flag = attrs[4];
    Value thread = rows.thread, bi = rows.bi, h = rows.h, q0 = rows.q0,
          rowBase = rows.rowBase, visited = rows.visited;
    ArrayRef<Value> queries = rows.queries, rowsExist = rows.rowsExist;
    k.stage(qTile, query, bi, h, q0, k.rows(), k.tq, thread);
    k.stage(gTile, grad, bi, h, q0, k.rows(), k.tq, thread);
    clearFlag(k, flag, thread);
    k.barrier();
    // Pass 1: each row's maximum and sum, as the forward pass found them.
    SmallVector<Value> state(k.rowsPerWarp, inf);
    state.append(k.rowsPerWarp, k.f32(0.0));
    auto statsTile = [&](Value t, ValueRange s) -> SmallVector<Value> {
      KeyLane lane = stageKeyTile(k, rows, t, kTile, key);
      Value keyIndex = lane.key, maskValue = lane.maskValue;
      SmallVector<Value> raw = k.dots(qTile, rowBase, kTile);
      SmallVector<Value> scores;
      for (int64_t r = 0; r < k.rowsPerWarp; ++r) {
        scores.push_back(
            k.score(raw[r], k.visible(maskValue, queries[r], keyIndex)));
      }
      OnlineStep o =
          onlineStep(k, scores, k.ult(keyIndex, k.tk),
                     s.take_front(k.rowsPerWarp), s.drop_front(k.rowsPerWarp));
      SmallVector<Value> next = o.m;
      next.append(o.l);
      return next;
    };
    SmallVector<Value> ml =
        keyTiles(k, visited, tiles, flag, rowsExist, state, statsTile);
    // D = Σ_d dO·O per row; lane 0 stores (m, l, D).
    SmallVector<Value> rowDots;
    for (int64_t r = 0; r < k.rowsPerWarp; ++r) {
      Value row = k.add(rowBase, k.idx(r));
      Value safeQuery =
          k.minIndex(queries[r], arith::SubIOp::create(b, loc, k.tq, k.idx(1)));
      Value partial = k.f32(0.0);
      for (int64_t c = 0; c < cols; ++c) {
        Value o = k.load(
            output, {bi, safeQuery, k.add(k.mul(h, k.idx(dh)), k.column(c))});
        Value term = k.mulf(k.load(gTile, {row, k.column(c)}), o);
        partial =
            k.addf(partial, k.select(k.andi(k.columnInHead(c), rowsExist[r]),
                                     term, k.f32(0.0)));
      }
      rowDots.push_back(k.warpReduce(partial, /*max=*/false));
      auto ifStore = scf::IfOp::create(
          b, loc,
          k.andi(rowsExist[r],
                 arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, k.lane,
                                       k.idx(0))),
          /*withElse=*/false);
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(&ifStore.getThenRegion().front());
      Value at = statRow(bi, h, queries[r]);
      k.store(ml[r], stats, {at, k.idx(0)});
      k.store(ml[k.rowsPerWarp + r], stats, {at, k.idx(1)});
      k.store(rowDots.back(), stats, {at, k.idx(2)});
    }
    // Pass 2: dQ = Σ_j dS·K over the visible tiles (past them dS is 0).
    SmallVector<Value> dq(k.rowsPerWarp * cols, k.f32(0.0));
    auto gradTile = [&](Value t, ValueRange acc) -> SmallVector<Value> {
      KeyLane lane = stageKeyTile(k, rows, t, kTile, key, vTile, value);
      Value keyIndex = lane.key, valid = lane.valid, maskValue = lane.maskValue;
      SmallVector<Value> raw = k.dots(qTile, rowBase, kTile, gTile, vTile);
      SmallVector<Value> dScores;
      for (int64_t r = 0; r < k.rowsPerWarp; ++r) {
        Value vis = k.andi(valid, k.visible(maskValue, queries[r], keyIndex));
        Value p = arith::DivFOp::create(
            b, loc,
            math::ExpOp::create(
                b, loc,
                arith::SubFOp::create(b, loc, k.score(raw[r], vis), ml[r])),
            ml[k.rowsPerWarp + r]);
        Value dp = k.dropped(raw[k.rowsPerWarp + r],
                             k.dropoutScale(bi, h, queries[r], keyIndex));
        Value ds =
            k.mulf(k.mulf(p, arith::SubFOp::create(b, loc, dp, rowDots[r])),
                   k.f32(1.0 / std::sqrt(double(dh))));
        dScores.push_back(k.select(vis, ds, k.f32(0.0)));
      }
      return k.accumulate(dScores, kTile, acc);
    };
    SmallVector<Value> dqResult = k.loop(k.idx(0), visited, dq, gradTile);
    storeRows(k, op.getQueryInit(), bi, h, q0, k.tq, dqResult, {});
  }
  b.setInsertionPoint(op);

  // Kernel 2: a block per 16 keys of a key/value head (8 at heads over
  // 127): dK and dV, over the
  // group's query heads in order and their query tiles.
  {
    OpBuilder::InsertionGuard guard(b);
    SmallVector<Type> shared = {
        k.sharedRows(k.rows(), dh), k.sharedRows(k.rows(), dh),
        k.sharedRows(kLanes, dh + 1), k.sharedRows(kLanes, dh + 1)};
    Value keyBlocks = k.ceilDiv(k.tk, k.rows());
    gpu::LaunchOp launch = k.launch(
        keyBlocks, k.idx(k.kvHeads), k.batch, shared, [&](gpu::LaunchOp l) {
          return k.andi(k.ult(l.getBlockIds().x, keyBlocks),
                        k.ult(l.getBlockIds().z, k.batch));
        });
    auto attrs = launch.getWorkgroupAttributions();
    Value kRowsTile = attrs[0], vRowsTile = attrs[1], qTile = attrs[2],
          gTile = attrs[3];
    Value thread = launch.getThreadIds().x;
    Value bi = launch.getBlockIds().z, kvh = launch.getBlockIds().y;
    Value j0 = k.mul(launch.getBlockIds().x, k.idx(k.rows()));
    Value rowBase = k.mul(k.warp, k.idx(k.rowsPerWarp));
    SmallVector<Value> keys, maskValues;
    for (int64_t r = 0; r < k.rowsPerWarp; ++r) {
      keys.push_back(k.add(j0, k.add(rowBase, k.idx(r))));
      maskValues.push_back(k.maskAt(bi, keys.back()));
    }
    k.stage(kRowsTile, key, bi, kvh, j0, k.rows(), k.tk, thread);
    k.stage(vRowsTile, value, bi, kvh, j0, k.rows(), k.tk, thread);
    Value queryTiles = k.ceilDiv(k.tq, kLanes);
    Value lastQuery = arith::SubIOp::create(b, loc, k.tq, k.idx(1));
    SmallVector<Value> acc(2 * k.rowsPerWarp * cols, k.f32(0.0));
    auto headLoop = [&](Value g, ValueRange accIn) -> SmallVector<Value> {
      Value h = k.add(k.mul(kvh, k.idx(group)), g);
      auto queryTile = [&](Value t, ValueRange s) -> SmallVector<Value> {
        Value i0 = k.mul(t, k.idx(kLanes));
        k.barrier();
        k.stage(qTile, query, bi, h, i0, kLanes, k.tq, thread);
        k.stage(gTile, grad, bi, h, i0, kLanes, k.tq, thread);
        k.barrier();
        Value qi = k.add(i0, k.lane);
        Value validQuery = k.ult(qi, k.tq);
        Value at = statRow(bi, h, k.minIndex(qi, lastQuery));
        Value m =
            k.select(validQuery, k.load(stats, {at, k.idx(0)}), k.f32(0.0));
        Value l =
            k.select(validQuery, k.load(stats, {at, k.idx(1)}), k.f32(1.0));
        Value rowDot =
            k.select(validQuery, k.load(stats, {at, k.idx(2)}), k.f32(0.0));
        // Causal: a tile whose queries all come before the block's first
        // key adds nothing unless one of its rows saw no key (which
        // attends to every key): the warp skips it then.
        Value skip = arith::ConstantOp::create(b, loc, b.getBoolAttr(false));
        if (k.causal) {
          Value tileLast = k.minIndex(k.add(i0, k.idx(kLanes - 1)), lastQuery);
          Value before = arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::slt,
              k.add(tileLast, arith::SubIOp::create(b, loc, k.tk, k.tq)), j0);
          Value nothing = arith::CmpFOp::create(
              b, loc, arith::CmpFPredicate::OLE, m, k.f32(kMaskedScore));
          Value anyNothing = k.warpReduce(
              k.select(k.andi(validQuery, nothing), k.f32(1.0), k.f32(0.0)),
              /*max=*/true);
          skip = k.andi(before,
                        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                              anyNothing, k.f32(0.0)));
        }
        auto ifRun = scf::IfOp::create(b, loc, ValueRange(s).getTypes(), skip,
                                       /*withElse=*/true);
        {
          OpBuilder::InsertionGuard inner(b);
          b.setInsertionPointToStart(&ifRun.getThenRegion().front());
          scf::YieldOp::create(b, loc, s);
          b.setInsertionPointToStart(&ifRun.getElseRegion().front());
          // Lane i's query against the warp's keys: s_ij and dO_i·V_j.
          SmallVector<Value> raw =
              k.dots(kRowsTile, rowBase, qTile, vRowsTile, gTile);
          SmallVector<Value> pWeights, dWeights;
          for (int64_t r = 0; r < k.rowsPerWarp; ++r) {
            Value vis = k.visible(maskValues[r], qi, keys[r]);
            Value p = arith::DivFOp::create(
                b, loc,
                math::ExpOp::create(
                    b, loc,
                    arith::SubFOp::create(b, loc, k.score(raw[r], vis), m)),
                l);
            Value scale = k.dropoutScale(bi, h, qi, keys[r]);
            Value dp = k.dropped(raw[k.rowsPerWarp + r], scale);
            Value ds =
                k.mulf(k.mulf(p, arith::SubFOp::create(b, loc, dp, rowDot)),
                       k.f32(1.0 / std::sqrt(double(dh))));
            pWeights.push_back(
                k.select(validQuery, k.dropped(p, scale), k.f32(0.0)));
            dWeights.push_back(
                k.select(k.andi(validQuery, vis), ds, k.f32(0.0)));
          }
          ValueRange dk = ValueRange(s).take_front(k.rowsPerWarp * cols),
                     dv = ValueRange(s).drop_front(k.rowsPerWarp * cols);
          SmallVector<Value> next = k.accumulate(dWeights, qTile, dk);
          next.append(k.accumulate(pWeights, gTile, dv));
          scf::YieldOp::create(b, loc, next);
        }
        return SmallVector<Value>(ifRun.getResults());
      };
      return k.loop(k.idx(0), queryTiles, accIn, queryTile);
    };
    SmallVector<Value> result = k.loop(k.idx(0), k.idx(group), acc, headLoop);
    ValueRange all(result);
    storeRows(k, op.getKeyInit(), bi, kvh, j0, k.tk,
              all.take_front(k.rowsPerWarp * cols), {});
    storeRows(k, op.getValueInit(), bi, kvh, j0, k.tk,
              all.drop_front(k.rowsPerWarp * cols), {});
  }
  b.setInsertionPoint(op);
  memref::DeallocOp::create(b, loc, stats);
  b.eraseOp(op);
}
