//===- BlockForCaches.cpp - Cache blocks and packed copies of products ----===//
//
// Implements kiln-block-for-caches: the cache blocks and block copies that
// kiln-select-cpu-tiles chose (TileSelection.h says when and why).
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

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kiln-block-for-caches"

namespace mlir::kiln::cpu {
namespace {

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

/// One operand of a blocked contraction to copy block by block: a
/// CpuPackAttr with its reads counted (when the copy depends on them).
struct Packing {
  unsigned operand;          // operand number
  SmallVector<int64_t> dims; // its two loops, outer first
  Value reuse; // how often a block is read once copied (null: always copy)
  bool transpose = false; // copy [n, k] blocks into [k, n] (B stored as Bᵀ)
  int64_t minReuse = 0;   // the least reuse worth the copy
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
/// `p.panelDim` (see kPanelReadsAttr), in a [P, kc + 1, T] buffer allocated
/// around `outer`: the whole panels with one copy of the window viewed as [kc,
/// P', T] (or [P', T, kc]), the last partial panel, if any, with another.
/// The copies are made right before `copyAt`, and only when `when` holds
/// (when given).
Value packPanels(RewriterBase &rewriter, linalg::LinalgOp blocked,
                 Operation *outer, Operation *copyAt, Value when,
                 const Packing &p, ArrayRef<int64_t> bounds) {
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
    if (pos == 0) {
      // [P', T, kc] -> [P', kc, T]: T x kc panels of a transposed B, each
      // read row by row and transposed in registers.
      linalg::TransposeOp::create(rewriter, loc, expanded, target,
                                  ArrayRef<int64_t>{0, 2, 1});
    } else {
      // [kc, P', T] -> [P', kc, T], copied in the order it is read: into
      // the panels seen as [kc, P', T], not panel after panel (which reads
      // T elements of each of kc rows per pass).
      AffineMap swap = AffineMap::getPermutationMap(ArrayRef<unsigned>{1, 0, 2},
                                                    rewriter.getContext());
      Value view = memref::TransposeOp::create(rewriter, loc, target,
                                               AffineMapAttr::get(swap));
      linalg::CopyOp::create(rewriter, loc, expanded, view);
    }
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
      if (pos == 0) {
        linalg::TransposeOp::create(b, l, source, target,
                                    ArrayRef<int64_t>{1, 0});
      } else {
        linalg::CopyOp::create(b, l, source, target);
      }
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
  return buffer;
}

/// Copies operand `p.operand` of `blocked` (a window of a wider matrix)
/// into a contiguous buffer before each use, and makes the op read the copy
/// (always, or when the run-time reuse count `p.reuse` is at least
/// `p.minReuse`). The buffer,
/// `bounds` in size, is allocated around `outer`, the outermost block loop
/// (or the op itself when it is not blocked); the copy is made right before
/// `copyAt`. A transposing packing copies the [n, k] window into a [k, n]
/// buffer and makes the op index it (k, n).
void pack(RewriterBase &rewriter, linalg::LinalgOp blocked, Operation *outer,
          Operation *copyAt, const Packing &p, ArrayRef<int64_t> bounds) {
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
    if (p.transpose) {
      linalg::TransposeOp::create(b, l, window, view, ArrayRef<int64_t>{1, 0});
    } else {
      linalg::CopyOp::create(b, l, window, view);
    }
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
  if (!p.reuse) {
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

/// Blocks `op` for the caches as `config` says (see CpuTilesAttr): loops
/// over the batches blocked by one (outermost), then column blocks, then
/// reduction blocks, then row blocks, around the op (whose register tiles
/// then run over a block); the operands of `config.getPacks()` copied block
/// by block. Returns the blocked op (`op` when nothing is blocked), whose
/// config keeps only its tile and thread loops. `panels` numbers the
/// micro-panel buffers of the function.
FailureOr<linalg::LinalgOp> applyCacheBlocking(RewriterBase &rewriter,
                                               linalg::LinalgOp op,
                                               CpuTilesAttr config,
                                               int64_t &panels) {
  SmallVector<unsigned> parallel, reduction;
  op.getParallelDims(parallel);
  op.getReductionDims(reduction);
  unsigned loops = op.getNumLoops();
  if (parallel.size() < 2 || reduction.size() != 1 ||
      config.getTile().size() != loops) {
    return op->emitOpError()
           << "has a '" << kCpuTilesAttr
           << "' with cache blocks, which need a contraction with rows, "
              "columns and one reduction loop, and a tile size per loop";
  }
  unsigned m = parallel[parallel.size() - 2], n = parallel.back(),
           k = reduction.front();
  SmallVector<int64_t> sizes(loops, 0);
  if (config.getBlocks()) {
    sizes.assign(config.getBlocks().asArrayRef().begin(),
                 config.getBlocks().asArrayRef().end());
  }
  ArrayRef<int64_t> blockThreads = config.getBlockThreads()
                                       ? config.getBlockThreads().asArrayRef()
                                       : ArrayRef<int64_t>();
  // Threads share batch blocks and row blocks only: column blocks share
  // the copies made around them, and reduction blocks accumulate.
  for (int64_t loop : blockThreads) {
    if (!llvm::is_contained(parallel, unsigned(loop)) || loop == int64_t(n)) {
      return op->emitOpError()
             << "has a '" << kCpuTilesAttr << "' that shares block loop "
             << loop << " between threads, which is no batch or row loop";
    }
  }
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  // The packings, their reads counted before the op (outside every block
  // loop).
  rewriter.setInsertionPoint(op);
  SmallVector<Packing> packings;
  for (Attribute attr : config.getPacks() ? config.getPacks().getValue()
                                          : ArrayRef<Attribute>()) {
    auto pack = cast<CpuPackAttr>(attr);
    int64_t operand = pack.getOperand();
    auto type = operand < op.getNumDpsInputs()
                    ? dyn_cast<MemRefType>(op->getOperand(operand).getType())
                    : MemRefType();
    if (!type || type.getRank() < 2 ||
        llvm::any_of(pack.getDims().asArrayRef(),
                     [&](int64_t d) { return d >= int64_t(loops); })) {
      return op->emitOpError()
             << "has a '" << kCpuTilesAttr << "' that packs operand " << operand
             << ", which is no matrix input of the op";
    }
    // What the copies can do (a config written by hand may ask for more):
    // the operand's last two dimensions are the pack's loops, in order; its
    // other dimensions are loops blocked by one (a batch); each block has a
    // static size; a copy that changes the op's indexing (transposed, or
    // micro-panels read as (k, n)) needs a linalg.generic.
    AffineMap map = op.getMatchingIndexingMap(&op->getOpOperand(operand));
    unsigned rank = map.getNumResults();
    auto isLoop = [&](unsigned result, int64_t loop) {
      auto dim = dyn_cast<AffineDimExpr>(map.getResult(result));
      return dim && int64_t(dim.getPosition()) == loop;
    };
    bool fits = isLoop(rank - 2, pack.getDims()[0]) &&
                isLoop(rank - 1, pack.getDims()[1]);
    for (unsigned r = 0; r + 2 < rank && fits; ++r) {
      auto dim = dyn_cast<AffineDimExpr>(map.getResult(r));
      fits = dim && sizes[dim.getPosition()] == 1;
    }
    for (int64_t dim : pack.getDims().asArrayRef()) {
      fits &= sizes[dim] != 0 || !ShapedType::isDynamic(ranges[dim]);
    }
    bool reindexes = pack.getTranspose() ||
                     (pack.getPanelWidth() > 0 &&
                      (pack.getPanelDim() == pack.getDims()[0] || rank > 2));
    if (!fits || (reindexes && !isa<linalg::GenericOp>(op.getOperation()))) {
      return op->emitOpError()
             << "has a '" << kCpuTilesAttr << "' that packs operand " << operand
             << " in a way its copies cannot: the operand's last two "
                "dimensions must be the pack's loops, its others loops "
                "blocked by one, each block of static size, and a "
                "transposed or (k, n) panel copy needs a linalg.generic";
    }
    Packing p;
    p.operand = operand;
    llvm::append_range(p.dims, pack.getDims().asArrayRef());
    p.transpose = pack.getTranspose();
    p.minReuse = pack.getMinReuse();
    p.panelDim = pack.getPanelDim();
    p.panelWidth = pack.getPanelWidth();
    if (DenseI64ArrayAttr reuse = pack.getReuse()) {
      SmallVector<unsigned> dims(reuse.asArrayRef());
      p.reuse = loopProduct(rewriter, op, dims);
    }
    packings.push_back(std::move(p));
  }
  auto bounds = [&](const Packing &p) {
    SmallVector<int64_t> result;
    for (int64_t dim : p.dims) {
      result.push_back(sizes[dim] ? sizes[dim] : ranges[dim]);
    }
    return result;
  };
  // Panels: a link from the op to the buffer it reads (kPanelReadsAttr),
  // followed by kiln-tile-and-peel.
  auto linkPanels = [&](linalg::LinalgOp blocked, const Packing &p,
                        Value buffer) {
    int64_t id = panels++;
    buffer.getDefiningOp()->setAttr(kPanelBufferAttr,
                                    rewriter.getI64IntegerAttr(id));
    SmallVector<Attribute> reads;
    if (auto existing = blocked->getAttrOfType<ArrayAttr>(kPanelReadsAttr)) {
      llvm::append_range(reads, existing.getValue());
    }
    reads.push_back(rewriter.getDenseI64ArrayAttr(
        {int64_t(p.operand), p.panelDim, p.panelWidth, id}));
    blocked->setAttr(kPanelReadsAttr, rewriter.getArrayAttr(reads));
  };
  // With a run-time reuse count, the blocked op runs either on panels or
  // as it is: a copy of it in the other branch of an scf.if.
  auto packOne = [&](linalg::LinalgOp blocked, Operation *outer,
                     Operation *copyAt, const Packing &p) {
    if (!p.panelWidth) {
      pack(rewriter, blocked, outer, copyAt, p, bounds(p));
      return;
    }
    Value enough;
    if (p.reuse) {
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
      rewriter.clone(*blocked);
      if (copyAt == blocked.getOperation()) {
        copyAt = choose;
      }
    }
    linkPanels(
        blocked, p,
        packPanels(rewriter, blocked, outer, copyAt, enough, p, bounds(p)));
  };
  auto keepTiles = [&](linalg::LinalgOp blocked) {
    rewriter.modifyOpInPlace(blocked, [&] {
      blocked->setAttr(kCpuTilesAttr, CpuTilesAttr::get(rewriter.getContext(),
                                                        config.getTile(),
                                                        config.getThreads()));
    });
  };
  bool unblocked = llvm::all_of(sizes, [](int64_t s) { return s == 0; });
  if (unblocked) {
    // Only copies (a transposed B, whole) around the op itself.
    keepTiles(op);
    for (const Packing &p : packings) {
      packOne(op, op, op, p);
    }
    return op;
  }
  // A deferred fill is done tile by tile in the first reduction block
  // (the later ones accumulate): no pass over the output before the product.
  bool fillFirstBlock =
      sizes[k] != 0 && op->hasAttr(mlir::kiln::cpu::kFillAttr);

  SmallVector<OpFoldResult> tileSizes;
  for (int64_t s : sizes) {
    tileSizes.push_back(rewriter.getIndexAttr(s));
  }
  // Batches (when blocked) outermost, then n-blocks outside k-blocks (a
  // column block of C is finished before the next one starts), then
  // m-blocks.
  SmallVector<int64_t> interchange;
  for (unsigned d : parallel) {
    if (d != m && d != n) {
      interchange.push_back(d);
    }
  }
  size_t batchLoops =
      llvm::count_if(interchange, [&](int64_t d) { return sizes[d] != 0; });
  interchange.append({int64_t(n), int64_t(k), int64_t(m)});
  for (unsigned d = 0; d < loops; ++d) {
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
  keepTiles(blocked);
  if (tiled->loops.empty()) {
    return blocked;
  }
  // The loops follow `interchange` over the blocked dimensions.
  SmallVector<int64_t> loopDims;
  llvm::copy_if(interchange, std::back_inserter(loopDims),
                [&](int64_t d) { return sizes[d] != 0; });
  for (auto [loop, dim] : llvm::zip(tiled->loops, loopDims)) {
    if (llvm::is_contained(blockThreads, dim)) {
      loop->setAttr(mlir::kiln::cpu::kParallelAttr, rewriter.getUnitAttr());
    }
  }
  // Buffers are allocated inside the batch loops (one per thread).
  Operation *outer = tiled->loops.size() > batchLoops
                         ? tiled->loops[batchLoops].getOperation()
                         : blocked.getOperation();
  if (fillFirstBlock) {
    auto blocks = cast<scf::ForOp>(
        tiled->loops[batchLoops + (sizes[n] != 0 ? 1 : 0)].getOperation());
    blocks->setAttr(kFillFirstBlockAttr, rewriter.getUnitAttr());
    // A reduction of dynamic length may be empty (a weight gradient over a
    // batch of no tokens): its loop still runs a first block, of no steps
    // (the blocks' sizes come from the length, not from the loop's bound),
    // which fills the output tile by tile. With no block at all such a
    // product had returned whatever its buffer held (the previous call's
    // result when the buffer was reused); a separate fill before the loop
    // would stand between the parallel regions kiln-merge-parallel-regions
    // joins.
    if (ShapedType::isDynamic(ranges[k])) {
      Location loc = blocks.getLoc();
      rewriter.setInsertionPoint(blocks);
      Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
      Value first =
          arith::AddIOp::create(rewriter, loc, blocks.getLowerBound(), one);
      Value upper = arith::MaxSIOp::create(rewriter, loc,
                                           blocks.getUpperBound(), first);
      rewriter.modifyOpInPlace(
          blocks, [&] { blocks.getUpperBoundMutable().assign(upper); });
    }
  }
  // A block of B does not depend on the rows: copied before the row-block
  // loop, when there is one (its subview hoisted out of it), not once per
  // row block.
  Operation *rowBlocks =
      sizes[m] != 0 ? tiled->loops.back().getOperation() : nullptr;
  if (rowBlocks) {
    moveLoopInvariantCode(cast<LoopLikeOpInterface>(rowBlocks));
  }
  // Row blocks on all cores: each thread copies the blocks of A it
  // multiplies, right before it does (as micro-panels when the packing
  // says so: AVX2, TileSelection.cpp).
  bool threadRowBlocks = rowBlocks && llvm::is_contained(blockThreads, m);
  for (const Packing &p : packings) {
    if (threadRowBlocks && llvm::is_contained(p.dims, int64_t(m))) {
      if (p.panelWidth) {
        linkPanels(blocked, p,
                   packPanels(rewriter, blocked, blocked, blocked, Value(), p,
                              bounds(p)));
        continue;
      }
      pack(rewriter, blocked, blocked, blocked, p, bounds(p));
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

} // namespace
} // namespace mlir::kiln::cpu

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNBLOCKFORCACHESPASS
#include "compiler/Codegen/CPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {
struct KilnBlockForCachesPass
    : mlir::kiln::impl::KilnBlockForCachesPassBase<KilnBlockForCachesPass> {
  using Base::Base;

  void runOnOperation() override {
    using namespace mlir::kiln;
    SmallVector<std::pair<linalg::LinalgOp, CpuTilesAttr>> ops;
    getOperation().walk([&](linalg::LinalgOp op) {
      auto config = op->getAttrOfType<CpuTilesAttr>(kCpuTilesAttr);
      if (config && (config.getBlocks() || config.getPacks())) {
        ops.push_back({op, config});
      }
    });
    IRRewriter rewriter(&getContext());
    int64_t panels = 0;
    for (auto [op, config] : ops) {
      LLVM_DEBUG(llvm::dbgs()
                 << DEBUG_TYPE ": " << config << " for " << op->getName()
                 << " at " << op->getLoc() << "\n");
      if (failed(cpu::applyCacheBlocking(rewriter, op, config, panels))) {
        return signalPassFailure();
      }
    }
  }
};
} // namespace
