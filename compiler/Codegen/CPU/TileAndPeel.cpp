//===- TileAndPeel.cpp - Register tiles, full and partial
//------------------===//
//
// Implements kiln-tile-and-peel.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/Passes.h"

#include "compiler/Codegen/CPU/BlockForCaches.h"
#include "compiler/Codegen/CPU/TargetInfo.h"
#include "compiler/Codegen/CPU/TileSelection.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kiln-tile-and-peel"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNTILEANDPEELPASS
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

/// Marks the loops tiling made, to be peeled.
constexpr llvm::StringLiteral kLoopAttr = "kiln.tile_loop";

/// A register tile made by tiling an op, and the induction variable of
/// each loop tiling made (by the op's loop dimension).
struct Tiles {
  linalg::LinalgOp op;
  DenseMap<unsigned, Value> ivs;
};

/// One entry of an op's kPanelReadsAttr: operand `operand` of the op is
/// read from micro-panels `width` wide along loop `panelDim`, in `buffer`.
struct PanelRead {
  unsigned operand;
  int64_t panelDim, width;
  Value buffer;
};

/// Makes the register tile `tiles.op` read its block of operand
/// `read.operand` from its micro-panel: the panel of the tile's
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

struct KilnTileAndPeelPass
    : mlir::kiln::impl::KilnTileAndPeelPassBase<KilnTileAndPeelPass> {
  using Base::Base;

  /// The canonicalization patterns are built once per pass instance, not
  /// per function (a model has hundreds of outlined kernels, and every
  /// kernel canonicalizes three times).
  LogicalResult initialize(MLIRContext *context) override {
    RewritePatternSet canonical(context);
    for (Dialect *dialect : context->getLoadedDialects()) {
      dialect->getCanonicalizationPatterns(canonical);
    }
    for (RegisteredOperationName op : context->getRegisteredOperations()) {
      op.getCanonicalizationPatterns(canonical, context);
    }
    canonicalization = FrozenRewritePatternSet(std::move(canonical));
    return success();
  }

  void runOnOperation() override {
    MLIRContext *context = &getContext();
    IRRewriter rewriter(context);
    FailureOr<mlir::kiln::TargetAttr> resolved =
        mlir::kiln::cpu::requireTarget(getOperation(), "kiln-tile-and-peel");
    if (failed(resolved)) {
      return signalPassFailure();
    }
    TileParams params = TileParams::of(
        mlir::kiln::cpu::TargetInfo::of(*resolved), 0, 0, vectorWidth);

    // 1. Tile the parallel loops of every linalg op (on buffers); its
    //    reduction loops are tiled last (step 3), innermost, so that a
    //    register tile's accumulators stay in registers across them. A
    //    tile whose op reads micro-panels (kiln-block-for-caches) reads
    //    its own panel.
    DenseMap<int64_t, Value> panelBuffers;
    getOperation().walk([&](memref::AllocOp alloc) {
      if (auto id = alloc->getAttrOfType<IntegerAttr>(kPanelBufferAttr)) {
        panelBuffers[id.getInt()] = alloc.getResult();
        alloc->removeAttr(kPanelBufferAttr);
      }
    });
    SmallVector<linalg::LinalgOp> ops;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op.getNumLoops() > 0) {
        ops.push_back(op);
      } else if (op->hasAttr(mlir::kiln::cpu::kFillAttr)) {
        materializeFill(rewriter, op);
      }
    });
    for (linalg::LinalgOp op : ops) {
      FailureOr<SmallVector<PanelRead>> reads =
          takePanelReads(op, panelBuffers);
      FailureOr<mlir::kiln::CpuTilesAttr> config = takeConfig(op, params);
      if (failed(reads) || failed(config)) {
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
      for (const PanelRead &read : *reads) {
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
      retilePartial(rewriter, op, params.width);
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

  /// The micro-panels `op` reads (its kPanelReadsAttr, dropped from it),
  /// each found among `buffers`. A link to no buffer is an error.
  FailureOr<SmallVector<PanelRead>>
  takePanelReads(linalg::LinalgOp op, const DenseMap<int64_t, Value> &buffers) {
    SmallVector<PanelRead> reads;
    auto links = op->getAttrOfType<ArrayAttr>(kPanelReadsAttr);
    if (!links) {
      return reads;
    }
    op->removeAttr(kPanelReadsAttr);
    for (Attribute link : links) {
      auto fields = dyn_cast<DenseI64ArrayAttr>(link);
      auto buffer = fields && fields.size() == 4 ? buffers.find(fields[3])
                                                 : buffers.end();
      auto panels = buffer == buffers.end()
                        ? MemRefType()
                        : dyn_cast<MemRefType>(buffer->second.getType());
      if (!panels || fields[0] < 0 || fields[0] >= op.getNumDpsInputs() ||
          fields[1] < 0 || fields[1] >= int64_t(op.getNumLoops()) ||
          fields[2] <= 0 || panels.getRank() != 3 || !panels.hasStaticShape() ||
          panels.getDimSize(2) != fields[2]) {
        return op->emitOpError()
               << "has a '" << kPanelReadsAttr << "' entry " << link
               << " that names no input, loop or panel buffer ('"
               << kPanelBufferAttr << "', a static [panels, rows, width])";
      }
      reads.push_back(
          {unsigned(fields[0]), fields[1], fields[2], buffer->second});
    }
    return reads;
  }

  /// The tile of `op`: its kiln.cpu_tiles (kiln-select-cpu-tiles, or
  /// written by hand), dropped from the op before tiling copies it onto the
  /// tiles, or the same choice made here for an op without one (the copies
  /// kiln-block-for-caches makes; any op when the pass runs alone). A config
  /// that does not fit the op is an error.
  FailureOr<mlir::kiln::CpuTilesAttr> takeConfig(linalg::LinalgOp op,
                                                 const TileParams &params) {
    auto config =
        op->getAttrOfType<mlir::kiln::CpuTilesAttr>(mlir::kiln::kCpuTilesAttr);
    if (!config) {
      return selectCpuTiles(op, params);
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

  FrozenRewritePatternSet canonicalization;
};
} // namespace
