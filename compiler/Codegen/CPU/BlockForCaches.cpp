//===- BlockForCaches.cpp - Cache blocks and packed copies of products ----===//
//
// Implements the cache blocking of kiln-tile-and-vectorize (BlockForCaches.h).
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/BlockForCaches.h"

#include "compiler/Codegen/CPU/Passes.h"
#include "compiler/Codegen/CPU/TileSelection.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

namespace mlir::kiln::cpu {
namespace {

/// The unbatched input of a contraction indexed by exactly the loops
/// `outer` and `inner` in that order (A [K, M] stored transposed: (k, m);
/// B: (k, n) or (n, k)), with its innermost dimension contiguous, or null.
OpOperand *matrixOperand(linalg::LinalgOp op, unsigned outer, unsigned inner) {
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    auto type = dyn_cast<MemRefType>(input->get().getType());
    int64_t offset;
    SmallVector<int64_t> strides;
    if (type && map.getNumResults() == 2 && map.isProjectedPermutation() &&
        map.getDimPosition(0) == outer && map.getDimPosition(1) == inner &&
        succeeded(type.getStridesAndOffset(strides, offset)) &&
        strides.back() == 1) {
      return input;
    }
  }
  return nullptr;
}

/// Do the rows of a matrix operand lie a multiple of 4 KiB apart (or a
/// dynamic stride apart, which may be)? Such rows share cache sets, and a
/// block of them does not stay in cache unless copied; rows of other
/// strides spread over the sets, and copying them into a row-major block
/// measured slower (N = 8000: 196 -> 190 GFLOP/s on one core; M = 1536
/// gradients: 206 -> 187).
bool rowsAlias(OpOperand *operand) {
  auto type = cast<MemRefType>(operand->get().getType());
  int64_t offset;
  SmallVector<int64_t> strides;
  return succeeded(type.getStridesAndOffset(strides, offset)) &&
         (ShapedType::isDynamic(strides.front()) ||
          strides.front() * type.getElementTypeBitWidth() / 8 % 4096 == 0);
}

/// The input of a linalg.generic contraction stored as B transposed: indexed
/// by exactly the loops (n, k), of static shape, contiguous along k (a
/// kiln.linear weight [N, K]). Its register tiles would read a column of N
/// scattered elements per vector, so it is always copied, transposed, into
/// contiguous [kc, nc] blocks (the copy kiln.linear made of the whole
/// weight once per call, now made block by block while the block is in
/// cache). Null when there is none.
OpOperand *transposedOperand(linalg::LinalgOp op, unsigned n, unsigned k,
                             ArrayRef<unsigned> batch) {
  if (!isa<linalg::GenericOp>(op.getOperation())) {
    return nullptr;
  }
  SmallVector<unsigned> dims(batch);
  dims.append({n, k});
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    auto type = dyn_cast<MemRefType>(input->get().getType());
    int64_t offset;
    SmallVector<int64_t> strides;
    if (!type || map.getNumResults() != int64_t(dims.size()) ||
        !map.isProjectedPermutation() ||
        failed(type.getStridesAndOffset(strides, offset)) ||
        strides.back() != 1) {
      continue;
    }
    if (llvm::all_of(llvm::enumerate(dims), [&](auto d) {
          return map.getDimPosition(d.index()) == d.value();
        })) {
      return input;
    }
  }
  return nullptr;
}

/// The subview of `source` at `offsets` of `sizes`, all but the last two
/// of them 1, with those unit dimensions dropped: a matrix.
Value matrixView(OpBuilder &b, Location loc, Value source,
                 ArrayRef<OpFoldResult> offsets, ArrayRef<OpFoldResult> sizes) {
  auto type = cast<MemRefType>(source.getType());
  SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
  MemRefType full =
      memref::SubViewOp::inferResultType(type, offsets, sizes, strides);
  auto layout = cast<StridedLayoutAttr>(full.getLayout());
  auto matrix =
      MemRefType::get(full.getShape().take_back(2), full.getElementType(),
                      StridedLayoutAttr::get(b.getContext(), layout.getOffset(),
                                             layout.getStrides().take_back(2)));
  return memref::SubViewOp::create(b, loc, matrix, source, offsets, sizes,
                                   strides);
}

/// A matrix operand of a blocked contraction as a matrix: itself, or, for
/// a batched operand (one batch of it: leading dimensions of 1), its last
/// two dimensions.
Value matrixOf(OpBuilder &b, Location loc, Value operand) {
  int64_t rank = cast<MemRefType>(operand.getType()).getRank();
  if (rank == 2) {
    return operand;
  }
  SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0)),
      sizes(rank, b.getIndexAttr(1));
  SmallVector<OpFoldResult> whole = memref::getMixedSizes(b, loc, operand);
  sizes[rank - 2] = whole[rank - 2];
  sizes[rank - 1] = whole[rank - 1];
  return matrixView(b, loc, operand, offsets, sizes);
}

} // namespace

AffineMap matrixMap(AffineMap map, bool transpose) {
  unsigned last = map.getNumResults() - 1;
  SmallVector<AffineExpr> results = {map.getResult(last - 1),
                                     map.getResult(last)};
  if (transpose) {
    std::swap(results[0], results[1]);
  }
  return AffineMap::get(map.getNumDims(), 0, results, map.getContext());
}

namespace {

/// The product of `op`'s loop ranges along `dims`.
Value loopProduct(RewriterBase &rewriter, linalg::LinalgOp op,
                  ArrayRef<unsigned> dims) {
  Location loc = op.getLoc();
  SmallVector<Range> ranges =
      cast<TilingInterface>(op.getOperation()).getIterationDomain(rewriter);
  Value product = arith::ConstantIndexOp::create(rewriter, loc, 1);
  for (unsigned dim : dims) {
    Value size =
        getValueOrCreateConstantIndexOp(rewriter, loc, ranges[dim].size);
    // Folded: a constant count decides at compile time.
    product = rewriter.createOrFold<arith::MulIOp>(loc, product, size);
  }
  return product;
}

/// One operand of a blocked contraction to copy block by block.
struct Packing {
  unsigned operand;          // operand number
  SmallVector<int64_t> dims; // its two loops, outer first
  Value reuse; // how often a block is read once copied (null: always copy)
  bool transpose = false; // copy [n, k] blocks into [k, n] (B stored as Bᵀ)
  int64_t minReuse = 0;   // the least reuse worth the copy (TargetInfo)
  /// The loop the copy is cut into micro-panels along (B's columns), and
  /// the register tile's size along it; -1 and 0: one row-major block.
  int64_t panelDim = -1;
  int64_t panelWidth = 0;
};

} // namespace

Value panelView(OpBuilder &b, Location loc, Value buffer, OpFoldResult panel,
                OpFoldResult k, OpFoldResult columns) {
  OpFoldResult zero = b.getIndexAttr(0);
  return matrixView(b, loc, buffer, {panel, zero, zero},
                    {b.getIndexAttr(1), k, columns});
}

namespace {

/// A buffer of `type` allocated right before `outer` and freed right after.
Value allocateAround(RewriterBase &rewriter, Location loc, Operation *outer,
                     MemRefType type) {
  rewriter.setInsertionPoint(outer);
  Value buffer = memref::AllocOp::create(rewriter, loc, type,
                                         rewriter.getI64IntegerAttr(64));
  rewriter.setInsertionPointAfter(outer);
  memref::DeallocOp::create(rewriter, loc, buffer);
  return buffer;
}

/// Copies operand `p.operand` of `blocked` (a [kc, nc] or, transposed,
/// [nc, kc] window) into micro-panels `p.panelWidth` wide along
/// `p.panelDim` (see PanelRead), in a [P, kc + 1, T] buffer allocated around
/// `outer`: the whole panels with one copy of the window viewed as [kc,
/// P', T] (or [P', T, kc]), the last partial panel, if any, with another.
/// The copies are made right before `copyAt`, and only when `when` holds
/// (when given).
PanelRead packPanels(RewriterBase &rewriter, linalg::LinalgOp blocked,
                     Operation *outer, Operation *copyAt, Value when,
                     const Packing &p, ArrayRef<int64_t> bounds,
                     SmallVectorImpl<linalg::LinalgOp> &copies) {
  Location loc = blocked.getLoc();
  Type elementType = cast<MemRefType>(blocked->getOperand(p.operand).getType())
                         .getElementType();
  int64_t width = p.panelWidth;
  // pos: the window's dimension along the panels; the other is k.
  unsigned pos = p.dims[0] == p.panelDim ? 0 : 1;
  int64_t panels = llvm::divideCeil(bounds[pos], width);
  // One row of padding after each panel: panels of 512 (or 64) rows of 32
  // floats lie 64 KiB (8 KiB) apart, a multiple of 4 KiB, and a copy that
  // writes one row of each in turn kept all of them in one cache set (B's
  // copy had taken a quarter of gpt-small's fc2 weight gradient, [2048,
  // 384]^T [2048, 1536], on two Zen 4 cores; 5% padded).
  Value buffer = allocateAround(
      rewriter, loc, outer,
      MemRefType::get({panels, bounds[1 - pos] + 1, width}, elementType));

  rewriter.setInsertionPoint(copyAt);
  if (when) {
    auto onlyWhen = scf::IfOp::create(rewriter, loc, when);
    rewriter.setInsertionPoint(onlyWhen.thenBlock()->getTerminator());
  }
  Value window = matrixOf(rewriter, loc, blocked->getOperand(p.operand));
  SmallVector<OpFoldResult> sizes =
      memref::getMixedSizes(rewriter, loc, window);
  OpFoldResult reduced = sizes[1 - pos];
  AffineExpr d0 = rewriter.getAffineDimExpr(0);
  OpFoldResult whole = affine::makeComposedFoldedAffineApply(
      rewriter, loc, d0.floorDiv(width), {sizes[pos]});
  OpFoldResult wholeColumns = affine::makeComposedFoldedAffineApply(
      rewriter, loc, d0.floorDiv(width) * width, {sizes[pos]});
  OpFoldResult rest = affine::makeComposedFoldedAffineApply(
      rewriter, loc, d0 % width, {sizes[pos]});
  OpFoldResult zero = rewriter.getIndexAttr(0), one = rewriter.getIndexAttr(1);
  SmallVector<OpFoldResult> ones2(2, one), ones3(3, one);

  if (getConstantIntValue(whole) != 0) {
    SmallVector<OpFoldResult> cut(sizes);
    cut[pos] = wholeColumns;
    Value source = memref::SubViewOp::create(
        rewriter, loc, window, SmallVector<OpFoldResult>(2, zero), cut, ones2);
    SmallVector<ReassociationIndices> groups =
        pos == 0 ? SmallVector<ReassociationIndices>{{0, 1}, {2}}
                 : SmallVector<ReassociationIndices>{{0}, {1, 2}};
    SmallVector<OpFoldResult> expandedSizes =
        pos == 0
            ? SmallVector<OpFoldResult>{whole, rewriter.getIndexAttr(width),
                                        reduced}
            : SmallVector<OpFoldResult>{reduced, whole,
                                        rewriter.getIndexAttr(width)};
    Value expanded = memref::ExpandShapeOp::create(
        rewriter, loc, decomposeMixedValues(expandedSizes).first, source,
        groups, expandedSizes);
    Value target = memref::SubViewOp::create(
        rewriter, loc, buffer, SmallVector<OpFoldResult>(3, zero),
        {whole, reduced, rewriter.getIndexAttr(width)}, ones3);
    Operation *copy;
    if (pos == 0) {
      // [P', T, kc] -> [P', kc, T]: T x kc panels of a transposed B, each
      // read row by row and transposed in registers.
      copy = linalg::TransposeOp::create(rewriter, loc, expanded, target,
                                         ArrayRef<int64_t>{0, 2, 1});
    } else {
      // [kc, P', T] -> [P', kc, T], copied in the order it is read: into
      // the panels seen as [kc, P', T], not panel after panel (which reads
      // T elements of each of kc rows per pass).
      AffineMap swap = AffineMap::getPermutationMap(ArrayRef<unsigned>{1, 0, 2},
                                                    rewriter.getContext());
      Value view = memref::TransposeOp::create(rewriter, loc, target,
                                               AffineMapAttr::get(swap));
      copy = linalg::CopyOp::create(rewriter, loc, expanded, view);
    }
    copies.push_back(cast<linalg::LinalgOp>(copy));
  }

  std::optional<int64_t> restSize = getConstantIntValue(rest);
  if (restSize != 0) {
    auto copyRest = [&](OpBuilder &b, Location l) {
      SmallVector<OpFoldResult> offsets(2, zero), cut(sizes);
      offsets[pos] = wholeColumns;
      cut[pos] = rest;
      Value source =
          memref::SubViewOp::create(b, l, window, offsets, cut, ones2);
      Value target = panelView(b, l, buffer, whole, reduced, rest);
      Operation *copy =
          pos == 0
              ? linalg::TransposeOp::create(b, l, source, target,
                                            ArrayRef<int64_t>{1, 0})
                    .getOperation()
              : linalg::CopyOp::create(b, l, source, target).getOperation();
      copies.push_back(cast<linalg::LinalgOp>(copy));
    };
    if (restSize) {
      copyRest(rewriter, loc);
    } else {
      Value any = arith::CmpIOp::create(
          rewriter, loc, arith::CmpIPredicate::sgt,
          getValueOrCreateConstantIndexOp(rewriter, loc, rest),
          arith::ConstantIndexOp::create(rewriter, loc, 0));
      scf::IfOp::create(rewriter, loc, any, [&](OpBuilder &b, Location l) {
        copyRest(b, l);
        scf::YieldOp::create(b, l);
      });
    }
  }
  return PanelRead{blocked, p.operand, p.panelDim, width, buffer};
}

/// Copies operand `p.operand` of `blocked` (a window of a wider matrix)
/// into a contiguous buffer before each use, and makes the op read the copy
/// (when the run-time reuse count is at least `p.minReuse`). The buffer,
/// `bounds` in size, is allocated around `outer`, the outermost block loop
/// (or the op itself when it is not blocked); the copy is made right before
/// `copyAt`. A transposing packing copies the [n, k] window into a [k, n]
/// buffer and makes the op index it (k, n).
void pack(RewriterBase &rewriter, linalg::LinalgOp blocked, Operation *outer,
          Operation *copyAt, const Packing &p, ArrayRef<int64_t> bounds,
          SmallVectorImpl<linalg::LinalgOp> &copies) {
  Location loc = blocked.getLoc();
  rewriter.setInsertionPoint(copyAt);
  Value window = matrixOf(rewriter, loc, blocked->getOperand(p.operand));
  auto windowType = cast<MemRefType>(window.getType());
  Type elementType = windowType.getElementType();
  SmallVector<int64_t> bufferShape(bounds);
  SmallVector<int64_t> viewShape(windowType.getShape());
  if (p.transpose) {
    std::swap(bufferShape[0], bufferShape[1]);
    std::swap(viewShape[0], viewShape[1]);
  }
  Value buffer = allocateAround(rewriter, loc, outer,
                                MemRefType::get(bufferShape, elementType));

  rewriter.setInsertionPoint(copyAt);
  auto anyRowStride = MemRefType::get(
      viewShape, elementType,
      StridedLayoutAttr::get(rewriter.getContext(), ShapedType::kDynamic,
                             {ShapedType::kDynamic, 1}));
  SmallVector<OpFoldResult> sizes =
      memref::getMixedSizes(rewriter, loc, window);
  if (p.transpose) {
    std::swap(sizes[0], sizes[1]);
  }
  auto copied = [&](OpBuilder &b, Location l) {
    SmallVector<OpFoldResult> zeros(2, b.getIndexAttr(0));
    SmallVector<OpFoldResult> ones(2, b.getIndexAttr(1));
    Value view = memref::SubViewOp::create(b, l, buffer, zeros, sizes, ones);
    Operation *copy =
        p.transpose ? linalg::TransposeOp::create(b, l, window, view,
                                                  ArrayRef<int64_t>{1, 0})
                          .getOperation()
                    : linalg::CopyOp::create(b, l, window, view).getOperation();
    copies.push_back(cast<linalg::LinalgOp>(copy));
    return memref::CastOp::create(b, l, anyRowStride, view).getResult();
  };
  if (p.transpose) {
    // The op now reads the copy as (k, n).
    auto generic = cast<linalg::GenericOp>(blocked.getOperation());
    SmallVector<AffineMap> maps = generic.getIndexingMapsArray();
    maps[p.operand] = matrixMap(maps[p.operand], /*transpose=*/true);
    Value operand = copied(rewriter, loc);
    rewriter.modifyOpInPlace(generic, [&] {
      generic->setOperand(p.operand, operand);
      generic.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(maps));
    });
    return;
  }
  Value operand;
  if (getConstantIntValue(p.reuse)) {
    operand = copied(rewriter, loc);
  } else {
    Value enough = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::sge, p.reuse,
        arith::ConstantIndexOp::create(rewriter, loc, p.minReuse));
    auto choose = scf::IfOp::create(
        rewriter, loc, enough,
        [&](OpBuilder &b, Location l) {
          scf::YieldOp::create(b, l, copied(b, l));
        },
        [&](OpBuilder &b, Location l) {
          scf::YieldOp::create(
              b, l,
              memref::CastOp::create(b, l, anyRowStride, window).getResult());
        });
    operand = choose.getResult(0);
  }
  rewriter.modifyOpInPlace(blocked,
                           [&] { blocked->setOperand(p.operand, operand); });
}

} // namespace

linalg::LinalgOp blockForCaches(RewriterBase &rewriter, linalg::LinalgOp op,
                                const mlir::kiln::cpu::TargetInfo &target,
                                int64_t blockK, int64_t blockN, int64_t blockM,
                                int64_t tileM, int64_t tileN,
                                SmallVectorImpl<linalg::LinalgOp> &copies,
                                SmallVectorImpl<PanelRead> &panelReads) {
  if (!isTiledContraction(op)) {
    return op;
  }
  SmallVector<unsigned> parallel, reduction;
  op.getParallelDims(parallel);
  op.getReductionDims(reduction);
  if (parallel.size() < 2 || reduction.size() != 1) {
    return op;
  }
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  auto exceeds = [&](unsigned dim, int64_t block) {
    return ShapedType::isDynamic(ranges[dim]) || ranges[dim] > block;
  };
  unsigned m = parallel[parallel.size() - 2], n = parallel.back(),
           k = reduction.front();
  SmallVector<int64_t> sizes(op.getNumLoops(), 0);
  if (exceeds(n, blockN)) {
    sizes[n] = blockN;
  }
  if (exceeds(k, blockK)) {
    sizes[k] = blockK;
  }
  OpOperand *lhsT = matrixOperand(op, k, m);
  if (lhsT && !rowsAlias(lhsT)) {
    lhsT = nullptr; // read in place
  }
  if (lhsT && exceeds(m, blockM)) {
    sizes[m] = blockM;
  }
  // The other parallel loops are batch loops (batch, heads). A B stored
  // transposed per batch (attention's keys) is copied batch by batch: the
  // batch loops are blocked by one, outermost, and run on all cores, each
  // thread copying into a buffer of its own.
  SmallVector<unsigned> batch;
  llvm::copy_if(parallel, std::back_inserter(batch),
                [&](unsigned d) { return d != m && d != n; });
  OpOperand *rhsT = transposedOperand(op, n, k, {});
  bool batchedB = false;
  if (!rhsT && !batch.empty()) {
    rhsT = transposedOperand(op, n, k, batch);
    batchedB = rhsT != nullptr;
  }
  if (batchedB) {
    for (unsigned d : batch) {
      sizes[d] = 1;
    }
  }
  bool unblocked = llvm::all_of(sizes, [](int64_t s) { return s == 0; });
  if (unblocked && !rhsT) {
    return op;
  }
  // A deferred fill is done tile by tile in the first reduction block
  // (the later ones accumulate): no pass over the output before the product.
  bool fillFirstBlock =
      sizes[k] != 0 && op->hasAttr(mlir::kiln::cpu::kFillAttr);

  // Which operands to copy: B stored transposed, always; others when their
  // contiguous dimension blocking cuts them (B's rows only when they alias
  // in the caches or the copy is cut into micro-panels, below).
  rewriter.setInsertionPoint(op);
  SmallVector<Packing> packings;
  SmallVector<unsigned> rowDims;
  llvm::copy_if(parallel, std::back_inserter(rowDims),
                [&](unsigned d) { return d != n; });
  if (rhsT) {
    packings.push_back(
        {rhsT->getOperandNumber(), {int64_t(n), int64_t(k)}, Value(), true});
  }
  for (OpOperand *rhs : {matrixOperand(op, k, n), matrixOperand(op, n, k)}) {
    AffineMap map = rhs ? op.getMatchingIndexingMap(rhs) : AffineMap();
    if (rhs && rhs != rhsT && sizes[map.getDimPosition(1)] != 0) {
      packings.push_back({rhs->getOperandNumber(),
                          {map.getDimPosition(0), map.getDimPosition(1)},
                          loopProduct(rewriter, op, rowDims)});
    }
  }
  if (lhsT && sizes[m] != 0) {
    packings.push_back({lhsT->getOperandNumber(),
                        {int64_t(k), int64_t(m)},
                        loopProduct(rewriter, op, {n})});
  }
  for (Packing &p : packings) {
    p.minReuse = target.packMinReuse;
  }
  auto tooFewRows = [](const Packing &p) {
    std::optional<int64_t> reuse =
        p.reuse ? getConstantIntValue(p.reuse) : std::nullopt;
    return reuse && *reuse < p.minReuse;
  };
  llvm::erase_if(packings, tooFewRows);
  auto bounds = [&](const Packing &p) {
    SmallVector<int64_t> result;
    for (int64_t dim : p.dims) {
      result.push_back(sizes[dim] ? sizes[dim] : ranges[dim]);
    }
    return result;
  };
  // A copy of B is cut into micro-panels along its columns when the block
  // is wider than one register tile (a linalg.generic can read a
  // transposed B's panels as (k, n)); then B is copied whatever its stride
  // (+10% for the [2048, 384] B of a weight gradient on Zen 4). A transposed
  // A stays one row-major block (micro-panels of its rows measured slower:
  // a copy scattered over many panels costs more than it saves).
  for (Packing &p : packings) {
    int64_t dim = p.dims[0] == int64_t(k) ? p.dims[1] : p.dims[0];
    int64_t extent = sizes[dim] ? sizes[dim] : ranges[dim];
    bool readable = p.dims[1] == dim || isa<linalg::GenericOp>(op);
    if (dim == int64_t(n) && readable && !ShapedType::isDynamic(extent) &&
        extent > tileN) {
      p.panelDim = dim;
      p.panelWidth = tileN;
    }
  }
  llvm::erase_if(packings, [&](Packing &p) {
    if (p.transpose || rowsAlias(&op->getOpOperand(p.operand))) {
      return false;
    }
    p.minReuse = target.panelMinReuse;
    return !p.panelWidth || tooFewRows(p);
  });
  // With a run-time reuse count, the blocked op runs either on panels or
  // as it is: a copy of it (appended to `copies`, tiled like them) in the
  // other branch of an scf.if.
  auto packOne = [&](linalg::LinalgOp blocked, Operation *outer,
                     Operation *copyAt, const Packing &p) {
    if (!p.panelWidth) {
      pack(rewriter, blocked, outer, copyAt, p, bounds(p), copies);
      return;
    }
    Value enough;
    if (p.reuse && !getConstantIntValue(p.reuse)) {
      Location loc = blocked.getLoc();
      rewriter.setInsertionPoint(outer);
      enough = arith::CmpIOp::create(
          rewriter, loc, arith::CmpIPredicate::sge, p.reuse,
          arith::ConstantIndexOp::create(rewriter, loc, p.minReuse));
      rewriter.setInsertionPoint(blocked);
      auto choose = scf::IfOp::create(rewriter, loc, enough,
                                      /*withElseRegion=*/true);
      rewriter.moveOpBefore(blocked, choose.thenBlock()->getTerminator());
      rewriter.setInsertionPoint(choose.elseBlock()->getTerminator());
      copies.push_back(cast<linalg::LinalgOp>(rewriter.clone(*blocked)));
      if (copyAt == blocked.getOperation()) {
        copyAt = choose;
      }
    }
    panelReads.push_back(packPanels(rewriter, blocked, outer, copyAt, enough, p,
                                    bounds(p), copies));
  };
  if (unblocked) {
    // Only the transposed copy of B, whole, around the op itself.
    packOne(op, op, op, packings.front());
    return op;
  }

  SmallVector<OpFoldResult> tileSizes;
  for (int64_t s : sizes) {
    tileSizes.push_back(rewriter.getIndexAttr(s));
  }
  // Batches (when blocked) outermost, then n-blocks outside k-blocks (a
  // column block of C is finished before the next one starts), then
  // m-blocks.
  SmallVector<int64_t> interchange;
  if (batchedB) {
    interchange.append(batch.begin(), batch.end());
  }
  interchange.append({int64_t(n), int64_t(k), int64_t(m)});
  for (unsigned d = 0; d < op.getNumLoops(); ++d) {
    if (!llvm::is_contained(interchange, int64_t(d))) {
      interchange.push_back(d);
    }
  }
  scf::SCFTilingOptions options;
  options.setTileSizes(tileSizes);
  options.setInterchange(interchange);
  FailureOr<scf::SCFTilingResult> tiled = scf::tileUsingSCF(
      rewriter, cast<TilingInterface>(op.getOperation()), options);
  if (failed(tiled) || tiled->tiledOps.size() != 1) {
    return op;
  }
  rewriter.replaceOp(op, tiled->replacements);
  auto blocked = cast<linalg::LinalgOp>(tiled->tiledOps.front());
  if (tiled->loops.empty()) {
    return blocked;
  }
  // The loops follow `interchange` over the tiled dimensions: the batches
  // (when blocked), n, k, m.
  size_t batchLoops = batchedB ? batch.size() : 0;
  for (size_t i = 0; i < batchLoops; ++i) {
    tiled->loops[i]->setAttr(mlir::kiln::cpu::kParallelAttr,
                             rewriter.getUnitAttr());
  }
  // Buffers are allocated inside the batch loops (one per thread).
  Operation *outer = tiled->loops.size() > batchLoops
                         ? tiled->loops[batchLoops].getOperation()
                         : blocked.getOperation();
  if (fillFirstBlock) {
    Operation *blocks = tiled->loops[batchLoops + (sizes[n] != 0 ? 1 : 0)];
    blocks->setAttr(kFillFirstBlockAttr, rewriter.getUnitAttr());
  }
  // A block of B does not depend on the rows: copied before the row-block
  // loop, when there is one (its subview hoisted out of it), not once per
  // row block.
  Operation *rowBlocks =
      sizes[m] != 0 ? tiled->loops.back().getOperation() : nullptr;
  if (rowBlocks) {
    moveLoopInvariantCode(cast<LoopLikeOpInterface>(rowBlocks));
  }
  // Row blocks on all cores: a block of A is then copied and multiplied by
  // the same thread, from its own caches, with no barrier in between (the
  // head's weight gradient, [2048, 4096]^T [2048, 384], had spent 9% of
  // its time in libomp's barriers, copying and multiplying each of its 128
  // blocks in two parallel loops of their own, and each core read half of
  // the block it multiplied from the other core's copy).
  bool threadRowBlocks = rowBlocks && !batchedB &&
                         !ShapedType::isDynamic(ranges[m]) &&
                         int64_t(llvm::divideCeil(ranges[m], sizes[m])) >=
                             target.parallelRowBlocks &&
                         lhsT && llvm::any_of(packings, [&](const Packing &p) {
                           return p.operand == lhsT->getOperandNumber();
                         });
  if (threadRowBlocks) {
    rowBlocks->setAttr(mlir::kiln::cpu::kParallelAttr, rewriter.getUnitAttr());
  }
  for (const Packing &p : packings) {
    if (threadRowBlocks && p.operand == lhsT->getOperandNumber()) {
      pack(rewriter, blocked, blocked, blocked, p, bounds(p), copies);
      continue;
    }
    Operation *copyAt = blocked;
    Operation *window = blocked->getOperand(p.operand).getDefiningOp();
    if (rowBlocks && !llvm::is_contained(p.dims, int64_t(m)) &&
        !(window && rowBlocks->isAncestor(window))) {
      copyAt = rowBlocks;
    }
    packOne(blocked, outer, copyAt, p);
  }
  return blocked;
}

} // namespace mlir::kiln::cpu
