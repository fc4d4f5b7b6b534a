//===- TileAndVectorize.cpp - Register tiles and vectors for the CPU ------===//
//
// Implements kiln-tile-and-vectorize.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/Passes.h"

#include "compiler/Codegen/CPU/BlockForCaches.h"
#include "compiler/Codegen/CPU/TargetInfo.h"
#include "compiler/Codegen/CPU/TileSelection.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/Transforms/VectorRewritePatterns.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kiln-tile-and-vectorize"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNTILEANDVECTORIZEPASS
#include "compiler/Codegen/CPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

using namespace mlir::kiln::cpu;

namespace {

/// Fills the output of `op` with its kiln.fill value right before it and
/// drops the mark (kiln-defer-fills deferred the fill to the op); inside a
/// reduction-block loop marked kFillFirstBlockAttr, only in its first
/// iteration (the later blocks accumulate onto the first). Returns the
/// fill.
linalg::FillOp materializeFill(RewriterBase &rewriter, linalg::LinalgOp op) {
  auto value = op->getAttrOfType<TypedAttr>(mlir::kiln::cpu::kFillAttr);
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  Value constant = arith::ConstantOp::create(rewriter, loc, value).getResult();
  op->removeAttr(mlir::kiln::cpu::kFillAttr);
  auto fill = [&](OpBuilder &b, Location l) {
    return linalg::FillOp::create(b, l, constant, op.getDpsInits()[0]);
  };
  scf::ForOp blocks = op->getParentOfType<scf::ForOp>();
  while (blocks && !blocks->hasAttr(kFillFirstBlockAttr)) {
    blocks = blocks->getParentOfType<scf::ForOp>();
  }
  if (!blocks) {
    return fill(rewriter, loc);
  }
  Value first =
      arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                            blocks.getInductionVar(), blocks.getLowerBound());
  linalg::FillOp result;
  scf::IfOp::create(rewriter, loc, first, [&](OpBuilder &b, Location l) {
    result = fill(b, l);
    scf::YieldOp::create(b, l);
  });
  return result;
}

/// Marks ops created by tiling with the vector sizes they were tiled for.
constexpr llvm::StringLiteral kTileAttr = "kiln.tile";
constexpr llvm::StringLiteral kLoopAttr = "kiln.tile_loop";

/// A transpose's tile read (a 2-D transfer_read whose columns run along
/// the source's last dimension: a [K, N] tile of a [N, K] weight, a
/// [dh, T] tile of [B, T, H, dh] keys) becomes a read of contiguous rows and a
/// vector.transpose, which LLVM lowers to shuffles in registers; read as it
/// is, every column of the tile would be a gather of scalar loads.
struct TransposedTileRead : OpRewritePattern<vector::TransferReadOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(vector::TransferReadOp read,
                                PatternRewriter &rewriter) const override {
    VectorType type = read.getVectorType();
    auto source = dyn_cast<MemRefType>(read.getBase().getType());
    if (type.getRank() != 2 || !source || source.getRank() < 2 ||
        read.getMask() || read.hasOutOfBoundsDim()) {
      return failure();
    }
    MLIRContext *context = rewriter.getContext();
    unsigned rank = source.getRank();
    AffineMap map = read.getPermutationMap();
    auto first = dyn_cast<AffineDimExpr>(map.getResult(0));
    auto second = dyn_cast<AffineDimExpr>(map.getResult(1));
    if (!first || !second || first.getPosition() != rank - 1 ||
        second.getPosition() == rank - 1) {
      return failure();
    }
    // Rows along the other dimension, each contiguous along the last.
    AffineMap rowsMap = AffineMap::get(rank, 0, {second, first}, context);
    auto rowsType = VectorType::get({type.getDimSize(1), type.getDimSize(0)},
                                    type.getElementType());
    Value rows = vector::TransferReadOp::create(
        rewriter, read.getLoc(), rowsType, read.getBase(), read.getIndices(),
        read.getPadding(), rowsMap, ArrayRef<bool>{true, true});
    rewriter.replaceOpWithNewOp<vector::TransposeOp>(read, rows,
                                                     ArrayRef<int64_t>{1, 0});
    return success();
  }
};

/// A tile read that spreads contiguous elements along a vector dimension
/// other than the innermost and broadcasts them along another: a register
/// tile's column of A when A is stored transposed ([K, M]: 8 consecutive
/// elements, each broadcast across a row of 32). Read as one vector, every
/// element then needs a shuffle to broadcast it (8 per 16 FMAs, which kept
/// weight gradients at 75% of the other products); read element by
/// element, each is one broadcasting load.
struct SplitBroadcastRead : OpRewritePattern<vector::TransferReadOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(vector::TransferReadOp read,
                                PatternRewriter &rewriter) const override {
    VectorType type = read.getVectorType();
    auto source = dyn_cast<MemRefType>(read.getBase().getType());
    AffineMap map = read.getPermutationMap();
    if (!source || read.getMask() || type.isScalable()) {
      return failure();
    }
    unsigned last = source.getRank() - 1;
    std::optional<unsigned> contiguous, innermost;
    bool broadcasts = false;
    for (unsigned i = 0; i < map.getNumResults(); ++i) {
      if (type.getDimSize(i) > 1) {
        innermost = i;
      }
      if (auto dim = dyn_cast<AffineDimExpr>(map.getResult(i))) {
        if (dim.getPosition() == last) {
          contiguous = i;
        }
        continue;
      }
      auto zero = dyn_cast<AffineConstantExpr>(map.getResult(i));
      if (!zero || zero.getValue() != 0) {
        return failure();
      }
      if (type.getDimSize(i) > 1) {
        broadcasts = true; // a constant 0: broadcast along this dimension
      }
    }
    if (!contiguous || !broadcasts || contiguous == innermost ||
        type.getDimSize(*contiguous) <= 1) {
      return failure();
    }
    Location loc = read.getLoc();
    SmallVector<int64_t> pieceShape(type.getShape());
    pieceShape[*contiguous] = 1;
    auto pieceType = VectorType::get(pieceShape, type.getElementType());
    Value result = arith::ConstantOp::create(rewriter, loc, type,
                                             rewriter.getZeroAttr(type));
    SmallVector<int64_t> strides(type.getRank(), 1);
    for (int64_t j = 0; j < type.getDimSize(*contiguous); ++j) {
      SmallVector<Value> indices(read.getIndices());
      indices[last] = arith::AddIOp::create(
          rewriter, loc, indices[last],
          arith::ConstantIndexOp::create(rewriter, loc, j));
      Value piece = vector::TransferReadOp::create(
          rewriter, loc, pieceType, read.getBase(), indices, read.getPadding(),
          map, read.getInBoundsValues());
      SmallVector<int64_t> offsets(type.getRank(), 0);
      offsets[*contiguous] = j;
      result = vector::InsertStridedSliceOp::create(rewriter, loc, piece,
                                                    result, offsets, strides);
    }
    rewriter.replaceOp(read, result);
    return success();
  }
};

/// A register tile made by tiling an op, and the induction variable of
/// each loop tiling made (by the op's loop dimension).
struct Tiles {
  linalg::LinalgOp op;
  DenseMap<unsigned, Value> ivs;
};

/// Makes the register tile `tiles.op` of `read.op` read its block of
/// operand `read.operand` from its micro-panel: the panel of the tile's
/// first column along `read.panelDim` (the tile is `read.width` wide there,
/// starting at a multiple of it, so it lies in one panel; the partial tiles
/// that peeling and re-tiling cut from it too). A tile not cut along the
/// panels keeps reading the window the panels were copied from.
void readPanels(RewriterBase &rewriter, const PanelRead &read,
                const Tiles &tiles) {
  auto iv = tiles.ivs.find(read.panelDim);
  if (iv == tiles.ivs.end()) {
    return;
  }
  linalg::LinalgOp tile = tiles.op;
  Location loc = tile.getLoc();
  OpOperand &operand = tile->getOpOperand(read.operand);
  AffineMap map = tile.getMatchingIndexingMap(&operand);
  unsigned rank = map.getNumResults();
  unsigned pos = map.getDimPosition(rank - 2) == read.panelDim ? 0 : 1;
  rewriter.setInsertionPoint(tile);
  SmallVector<OpFoldResult> sizes = llvm::to_vector(
      ArrayRef(memref::getMixedSizes(rewriter, loc, operand.get()))
          .take_back(2));
  AffineExpr d0 = rewriter.getAffineDimExpr(0);
  OpFoldResult index = affine::makeComposedFoldedAffineApply(
      rewriter, loc, d0.floorDiv(read.width), {iv->second});
  Value panel =
      panelView(rewriter, loc, read.buffer, index, sizes[1 - pos], sizes[pos]);
  rewriter.modifyOpInPlace(tile, [&] {
    operand.set(panel);
    if (pos == 0 || rank > 2) {
      // The tile now reads (k, column) of one batch.
      auto generic = cast<linalg::GenericOp>(tile.getOperation());
      SmallVector<AffineMap> maps = generic.getIndexingMapsArray();
      maps[read.operand] = matrixMap(maps[read.operand], pos == 0);
      generic.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(maps));
    }
  });
}

struct KilnTileAndVectorizePass
    : mlir::kiln::impl::KilnTileAndVectorizePassBase<KilnTileAndVectorizePass> {
  using Base::Base;

  /// The pattern sets are built once per pass instance, not per function (a
  /// model has hundreds of outlined kernels, and every kernel canonicalizes
  /// three times).
  LogicalResult initialize(MLIRContext *context) override {
    RewritePatternSet canonical(context);
    for (Dialect *dialect : context->getLoadedDialects()) {
      dialect->getCanonicalizationPatterns(canonical);
    }
    for (RegisteredOperationName op : context->getRegisteredOperations()) {
      op.getCanonicalizationPatterns(canonical, context);
    }
    canonicalization = FrozenRewritePatternSet(std::move(canonical));
    RewritePatternSet vectors(context);
    vector::populateCastAwayVectorLeadingOneDimPatterns(vectors);
    vectors.add<TransposedTileRead, SplitBroadcastRead>(context);
    vector::populateVectorTransferDropUnitDimsPatterns(vectors);
    vector::populateDropUnitDimWithShapeCastPatterns(vectors);
    vector::TransferReadOp::getCanonicalizationPatterns(vectors, context);
    vector::TransferWriteOp::getCanonicalizationPatterns(vectors, context);
    vector::BroadcastOp::getCanonicalizationPatterns(vectors, context);
    vector::ShapeCastOp::getCanonicalizationPatterns(vectors, context);
    vector::ExtractOp::getCanonicalizationPatterns(vectors, context);
    vectorCleanup = FrozenRewritePatternSet(std::move(vectors));
    return success();
  }

  void runOnOperation() override {
    MLIRContext *context = &getContext();
    IRRewriter rewriter(context);
    FailureOr<mlir::kiln::TargetAttr> resolved = mlir::kiln::cpu::requireTarget(
        getOperation(), "kiln-tile-and-vectorize");
    if (failed(resolved)) {
      return signalPassFailure();
    }
    mlir::kiln::cpu::TargetInfo target =
        mlir::kiln::cpu::TargetInfo::of(*resolved);
    int64_t rows = tileM ? int64_t(tileM) : target.tileM();
    int64_t columns = tileN ? int64_t(tileN) : target.tileN();
    int64_t width = vectorWidth ? int64_t(vectorWidth) : target.vectorWidth();
    int64_t cacheK = blockK ? int64_t(blockK) : target.blockK();
    int64_t cacheN = blockN ? int64_t(blockN) : target.blockN();
    int64_t cacheM = blockM ? int64_t(blockM) : target.blockM();

    // 1. Tile the parallel loops of every linalg op (on buffers); its
    //    reduction loops are tiled last (step 3), innermost, so that a
    //    register tile's accumulators stay in registers across them.
    SmallVector<linalg::LinalgOp> ops;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op.getNumLoops() > 0) {
        ops.push_back(op);
      } else if (op->hasAttr(mlir::kiln::cpu::kFillAttr)) {
        materializeFill(rewriter, op);
      }
    });
    SmallVector<linalg::LinalgOp> copies;
    SmallVector<PanelRead> panelReads;
    for (linalg::LinalgOp &op : ops) {
      op = blockForCaches(rewriter, op, target, cacheK, cacheN, cacheM, rows,
                          columns, copies, panelReads);
    }
    ops.append(copies);
    for (linalg::LinalgOp op : ops) {
      // The op's panel reads, found before tiling replaces it.
      SmallVector<PanelRead> reads;
      llvm::copy_if(panelReads, std::back_inserter(reads),
                    [&](const PanelRead &read) { return read.op == op; });
      FailureOr<mlir::kiln::CpuTilesAttr> config =
          takeConfig(op, rows, columns, width);
      if (failed(config)) {
        return signalPassFailure();
      }
      LLVM_DEBUG(llvm::dbgs()
                 << DEBUG_TYPE ": " << *config << " for " << op->getName()
                 << " at " << op->getLoc() << "\n");
      SmallVector<unsigned> threads;
      for (int64_t dim : config->getThreads().asArrayRef()) {
        threads.push_back(dim);
      }
      Tiles tiles = tileLoops(rewriter, op, config->getTile().asArrayRef(),
                              utils::IteratorType::parallel, threads);
      for (const PanelRead &read : reads) {
        if (tiles.op) {
          readPanels(rewriter, read, tiles);
        }
      }
    }

    // 2. Peel the partial last tile off every tiled loop, so that the main
    //    loops see full tiles of static size. A partial tile is tiled once
    //    more, one row by one vector (the M remainder of a 6x16 register
    //    tile becomes 1x16 tiles, its N remainder 6x8 ones), so that only
    //    the last columns short of a vector stay scalar: with T = 64 and
    //    6-row tiles, 4 scalar rows in every 64 had cost AVX2 code half its
    //    speed.
    peelTiledLoops(rewriter);
    for (linalg::LinalgOp op : taggedTiles()) {
      retilePartial(rewriter, op, width);
    }
    peelTiledLoops(rewriter);

    // A tile whose output kiln-defer-fills left unfilled is filled right
    // before it is computed (its reduction loops are tiled inside, in step
    // 3): the fill's vector then reaches the accumulators directly
    // (kiln-hoist-vector-transfers), with no pass over memory.
    for (linalg::LinalgOp op : taggedTiles()) {
      if (!op->hasAttr(mlir::kiln::cpu::kFillAttr)) {
        continue;
      }
      ArrayRef<int64_t> sizes =
          op->getAttrOfType<DenseI64ArrayAttr>(kTileAttr).asArrayRef();
      SmallVector<int64_t> fillSizes;
      for (AffineExpr e : op.getMatchingIndexingMap(&op.getDpsInitsMutable()[0])
                              .getResults()) {
        auto dim = dyn_cast<AffineDimExpr>(e);
        fillSizes.push_back(dim ? sizes[dim.getPosition()] : 1);
      }
      linalg::FillOp fill = materializeFill(rewriter, op);
      fill->setAttr(kTileAttr, rewriter.getDenseI64ArrayAttr(fillSizes));
    }

    // 3. Tile the reduction loops inside the parallel ones.
    for (linalg::LinalgOp op : taggedTiles()) {
      auto sizes = op->getAttrOfType<DenseI64ArrayAttr>(kTileAttr);
      tileLoops(rewriter, op, sizes.asArrayRef(),
                utils::IteratorType::reduction, /*parallelDims=*/{});
    }
    peelTiledLoops(rewriter);

    // 4. Vectorize the tiles of static shape; the rest stay scalar loops,
    //    and so do tiles the vectorizer would get wrong (reductions of
    //    values not read from an input element, i1 buffers).
    for (linalg::LinalgOp op : taggedTiles()) {
      op->removeAttr(kTileAttr);
      // A full tile of an op on dynamically sized operands (a transposing
      // copy of a partial weight block) reads static subviews through
      // casts to the dynamic type; read them directly (linalg.transpose's
      // folder does not, unlike linalg.copy's and linalg.generic's).
      rewriter.modifyOpInPlace(op, [&] { (void)memref::foldMemRefCast(op); });
      StringRef scalar;
      if (llvm::any_of(op.getStaticLoopRanges(), ShapedType::isDynamic)) {
        scalar = "its tile has a dynamic size (a loop left whole, or a "
                 "partial tile short of a vector)";
      } else if (!reductionsVectorizeExactly(op)) {
        scalar = "its reduction combines a value not read from an input "
                 "element, which the vectorizer would apply once per tile";
      } else if (touchesSubByteElements(op)) {
        scalar = "it reads or writes i1 buffers, which vectors would read "
                 "as packed bits";
      } else {
        rewriter.setInsertionPoint(op);
        FailureOr<linalg::VectorizationResult> vectorized =
            linalg::vectorize(rewriter, op);
        if (succeeded(vectorized)) {
          rewriter.replaceOp(op, vectorized->replacements);
          continue;
        }
        scalar = "the vectorizer refused it";
      }
      LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": stays scalar, " << scalar << ": "
                              << *op << "\n");
      if (remarks) {
        op->emitRemark() << "stays a scalar loop nest: " << scalar;
      }
    }

    // 5. Drop the unit dimensions of the tiles' vectors (leading batch and
    //    head dims), so that they lower to plain 1-D vector registers.
    (void)applyPatternsGreedily(getOperation(), vectorCleanup);

    // Whatever kept a deferred fill (an op left whole) fills first.
    SmallVector<linalg::LinalgOp> unfilled;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op->hasAttr(mlir::kiln::cpu::kFillAttr)) {
        unfilled.push_back(op);
      }
    });
    for (linalg::LinalgOp op : unfilled) {
      materializeFill(rewriter, op);
    }
    getOperation().walk(
        [](scf::ForOp loop) { loop->removeAttr(kFillFirstBlockAttr); });
  }

  /// The tile of `op`: its kiln.cpu_tiles (kiln-select-cpu-tiles, or
  /// written by hand), dropped from the op before tiling copies it onto the
  /// tiles, or the same choice made here for an op without one (the copies
  /// blockForCaches makes; any op when the pass runs alone). A config that
  /// does not fit the op is an error.
  FailureOr<mlir::kiln::CpuTilesAttr> takeConfig(linalg::LinalgOp op,
                                                 int64_t rows, int64_t columns,
                                                 int64_t width) {
    auto config =
        op->getAttrOfType<mlir::kiln::CpuTilesAttr>(mlir::kiln::kCpuTilesAttr);
    if (!config) {
      return selectCpuTiles(op, rows, columns, width);
    }
    op->removeAttr(mlir::kiln::kCpuTilesAttr);
    if (int64_t(config.getTile().size()) != int64_t(op.getNumLoops())) {
      return op->emitOpError()
             << "has a '" << mlir::kiln::kCpuTilesAttr << "' of "
             << config.getTile().size() << " tile sizes for "
             << op.getNumLoops() << " loops";
    }
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    for (int64_t dim : config.getThreads().asArrayRef()) {
      if (iterators[dim] != utils::IteratorType::parallel) {
        return op->emitOpError()
               << "has a '" << mlir::kiln::kCpuTilesAttr
               << "' that shares loop " << dim
               << " between threads, which is no parallel loop";
      }
    }
    return config;
  }

  /// The ops tiling has produced (and tagged with their tile sizes).
  SmallVector<linalg::LinalgOp> taggedTiles() {
    SmallVector<linalg::LinalgOp> tiles;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op->hasAttr(kTileAttr)) {
        tiles.push_back(op);
      }
    });
    return tiles;
  }

  /// Tiles the loops of `op` of iterator type `kind` by `sizes` (the others
  /// stay whole), marking the new loops for peeling (and those along
  /// `parallelDims` for threads) and the tiles with `sizes`. An op with no
  /// such loop to tile is tagged as it is. Returns the tile and the
  /// induction variable of each tiled dimension (none when tiling failed).
  Tiles tileLoops(RewriterBase &rewriter, linalg::LinalgOp op,
                  ArrayRef<int64_t> sizes, utils::IteratorType kind,
                  ArrayRef<unsigned> parallelDims) {
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    SmallVector<OpFoldResult> tileSizes;
    bool any = false;
    for (auto [dim, size] : llvm::enumerate(sizes)) {
      int64_t s = iterators[dim] == kind ? size : 0;
      any |= s != 0;
      tileSizes.push_back(rewriter.getIndexAttr(s));
    }
    DenseI64ArrayAttr tag = rewriter.getDenseI64ArrayAttr(sizes);
    if (!any) {
      op->setAttr(kTileAttr, tag);
      Tiles tag;
      tag.op = op;
      return tag;
    }
    rewriter.setInsertionPoint(op);
    scf::SCFTilingOptions options;
    options.setTileSizes(tileSizes);
    FailureOr<scf::SCFTilingResult> tiled = scf::tileUsingSCF(
        rewriter, cast<TilingInterface>(op.getOperation()), options);
    if (failed(tiled)) {
      op->removeAttr(kTileAttr); // Keep the op whole: it lowers to loops.
      return Tiles();
    }
    rewriter.replaceOp(op, tiled->replacements);
    for (Operation *tiledOp : tiled->tiledOps) {
      tiledOp->setAttr(kTileAttr, tag);
    }
    // tileUsingSCF creates loops only for the dimensions it tiles, in order.
    SmallVector<unsigned> tiledDims;
    for (auto [dim, size] : llvm::enumerate(tileSizes)) {
      if (getConstantIntValue(size) != 0) {
        tiledDims.push_back(dim);
      }
    }
    Tiles tiles;
    if (tiled->tiledOps.size() == 1) {
      tiles.op = dyn_cast<linalg::LinalgOp>(tiled->tiledOps.front());
    }
    for (auto [loop, dim] : llvm::zip(tiled->loops, tiledDims)) {
      loop->setAttr(kLoopAttr, rewriter.getUnitAttr());
      if (llvm::is_contained(parallelDims, dim)) {
        loop->setAttr(mlir::kiln::cpu::kParallelAttr, rewriter.getUnitAttr());
      }
      if (auto forOp = dyn_cast<scf::ForOp>(loop.getOperation())) {
        tiles.ivs[dim] = forOp.getInductionVar();
      }
    }
    return tiles;
  }

  /// Peels the partial last iteration off every loop marked for it (also
  /// those inside the partial iterations peeling creates), then
  /// canonicalizes (the full tiles' sizes fold to constants).
  void peelTiledLoops(RewriterBase &rewriter) {
    while (true) {
      SmallVector<scf::ForOp> loops;
      getOperation().walk<WalkOrder::PreOrder>([&](scf::ForOp loop) {
        if (loop->hasAttr(kLoopAttr)) {
          loops.push_back(loop);
        }
      });
      if (loops.empty()) {
        break;
      }
      for (scf::ForOp loop : loops) {
        loop->removeAttr(kLoopAttr);
        scf::ForOp partial;
        rewriter.setInsertionPoint(loop);
        if (succeeded(
                scf::peelForLoopAndSimplifyBounds(rewriter, loop, partial)) &&
            partial) {
          partial->removeAttr(
              mlir::kiln::cpu::kParallelAttr); // one iteration: nothing to
                                               // share
          partial->removeAttr(kLoopAttr);
        }
      }
    }
    (void)applyPatternsGreedily(getOperation(), canonicalization);
  }

  /// Tiles the parallel loops of a partial tile (one cut short along a
  /// dynamic range) again: a loop tiled by at least a vector by one vector,
  /// a narrower one (a register tile's rows) by 1. Nothing happens when that
  /// would not change the tiling (an elementwise op's last partial vector).
  void retilePartial(RewriterBase &rewriter, linalg::LinalgOp op,
                     int64_t width) {
    SmallVector<int64_t> sizes(
        op->getAttrOfType<DenseI64ArrayAttr>(kTileAttr).asArrayRef());
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    SmallVector<int64_t> smaller(sizes);
    bool changed = false;
    for (auto [dim, range] : llvm::enumerate(ranges)) {
      if (iterators[dim] != utils::IteratorType::parallel) {
        continue;
      }
      if (!ShapedType::isDynamic(range)) {
        smaller[dim] = 0; // a full dimension of this tile
        continue;
      }
      smaller[dim] = sizes[dim] >= width ? width : 1;
      changed |= smaller[dim] != sizes[dim];
    }
    if (!changed) {
      return;
    }
    // The reduction loops keep their sizes, tiled in step 3.
    for (auto [dim, range] : llvm::enumerate(ranges)) {
      if (iterators[dim] != utils::IteratorType::parallel) {
        smaller[dim] = sizes[dim];
      }
    }
    tileLoops(rewriter, op, smaller, utils::IteratorType::parallel,
              /*parallelDims=*/{});
  }

  FrozenRewritePatternSet canonicalization, vectorCleanup;
};
} // namespace
