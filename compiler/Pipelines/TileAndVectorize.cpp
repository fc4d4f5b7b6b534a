//===- TileAndVectorize.cpp - Register tiles and vectors for the CPU ------===//
//
// Implements kiln-tile-and-vectorize.
//
//===----------------------------------------------------------------------===//

#include "compiler/Pipelines/Pipelines.h"

#include "compiler/Codegen/CPU/TargetInfo.h"

#include "mlir/Analysis/SliceAnalysis.h"
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
#include "mlir/IR/Dominance.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/CSE.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNHOISTVECTORTRANSFERSPASS
#define GEN_PASS_DEF_KILNPARALLELIZELOOPSPASS
#define GEN_PASS_DEF_KILNFUSEELEMENTWISEPASS
#define GEN_PASS_DEF_KILNINLINEALLOCASCOPESPASS
#define GEN_PASS_DEF_KILNTILEANDVECTORIZEPASS
#include "compiler/Pipelines/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

/// Tile sizes for one linalg op: a register tile for contractions, a vector
/// along the innermost loop for everything else.
SmallVector<int64_t> chooseTileSizes(linalg::LinalgOp op, int64_t tileM,
                                     int64_t tileN, int64_t width) {
  int64_t loops = op.getNumLoops();
  SmallVector<int64_t> sizes(loops, 1);
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  auto clampTo = [&](int64_t dim, int64_t size) {
    int64_t range = ranges[dim];
    sizes[dim] = ShapedType::isDynamic(range) ? size : std::min(size, range);
  };
  if (linalg::isaContractionOpInterface(op)) {
    SmallVector<unsigned> parallel;
    op.getParallelDims(parallel);
    if (!parallel.empty()) {
      clampTo(parallel.back(), tileN);
    }
    if (parallel.size() >= 2) {
      clampTo(parallel[parallel.size() - 2], tileM);
    }
    return sizes;
  }
  if (loops > 0) {
    clampTo(loops - 1, width);
  }
  // A transpose reads its input along another loop than the one it writes
  // along: square width x width tiles, read row by row and transposed in
  // registers, instead of a column of scalar loads per output vector.
  if (auto transpose = dyn_cast<linalg::TransposeOp>(op.getOperation())) {
    ArrayRef<int64_t> perm = transpose.getPermutation();
    auto read = llvm::find(perm, int64_t(perm.size()) - 1);
    if (read != perm.end() && int64_t(read - perm.begin()) != loops - 1) {
      clampTo(read - perm.begin(), width);
    }
  }
  return sizes;
}

/// Does linalg::vectorize compute every reduction of `op` exactly?
///
/// The vectorizer reads each input as a vector of the whole (tile's)
/// iteration space and reduces the combiner's other operand over the
/// reduction dimensions with vector.multi_reduction. A value that is not such
/// a vector (a constant, a function argument, a scalar operand, or something
/// computed from those only) is left as it is, and the combiner then applies
/// it ONCE per tile instead of once per reduced element: a count written as
/// `acc + 1.0` over a 16-wide tile adds 1, not 16 (MLIR 22). Index-only
/// bodies get a vector of the innermost loop alone and are no safer. So a
/// reduction is vectorized only when each accumulator has exactly one
/// combiner the vectorizer knows and the value it combines is computed from
/// an input element; anything else stays a scalar loop, which is exact.
bool reductionsVectorizeExactly(linalg::LinalgOp op) {
  if (op.getNumReductionLoops() == 0) {
    return true;
  }
  Block *body = op.getBlock();
  auto readsAnInputElement = [&](Value value) {
    SmallVector<Value> worklist = {value};
    DenseSet<Value> seen;
    while (!worklist.empty()) {
      Value v = worklist.pop_back_val();
      if (!seen.insert(v).second) {
        continue;
      }
      if (auto arg = dyn_cast<BlockArgument>(v)) {
        if (arg.getOwner() == body &&
            arg.getArgNumber() < unsigned(op.getNumDpsInputs()) &&
            isa<ShapedType>(op.getDpsInputs()[arg.getArgNumber()].getType())) {
          return true;
        }
        continue;
      }
      Operation *def = v.getDefiningOp();
      if (def && def->getBlock() == body) {
        llvm::append_range(worklist, def->getOperands());
      }
    }
    return false;
  };
  for (OpOperand &init : op.getDpsInitsMutable()) {
    if (op.getMatchingIndexingMap(&init).isPermutation()) {
      continue; // not reduced: every iteration has its own element
    }
    unsigned position = init.getOperandNumber() - op.getNumDpsInputs();
    SmallVector<Operation *> combiners;
    Value reduced =
        matchReduction(op.getRegionOutputArgs(), position, combiners);
    if (!reduced || combiners.size() != 1 ||
        !linalg::getCombinerOpKind(combiners.front()) ||
        !readsAnInputElement(reduced)) {
      return false;
    }
  }
  return true;
}

/// Does `op` read or write buffers of elements narrower than a byte (i1)?
/// A buffer of i1 holds one byte per element, but LLVM loads and stores a
/// vector of i1 as packed bits: vectorized, a 16-wide tile of an attention
/// mask read 2 bytes instead of 16.
bool touchesSubByteElements(linalg::LinalgOp op) {
  return llvm::any_of(op->getOperands(), [](Value v) {
    auto shaped = dyn_cast<ShapedType>(v.getType());
    Type elem = shaped ? shaped.getElementType() : Type();
    return elem && elem.isIntOrFloat() && elem.getIntOrFloatBitWidth() % 8;
  });
}

/// Blocks a contraction for the caches: loops over `blockN` columns, then
/// `blockK` reduction steps, around the op (whose register tiles then run
/// over a block). Dimensions already within a block are left whole; an op
/// that fits entirely, or is no contraction, is returned as it is.
linalg::LinalgOp blockForCaches(RewriterBase &rewriter, linalg::LinalgOp op,
                                int64_t blockK, int64_t blockN) {
  if (!linalg::isaContractionOpInterface(op)) {
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
  unsigned n = parallel.back(), k = reduction.front();
  SmallVector<int64_t> sizes(op.getNumLoops(), 0);
  if (exceeds(n, blockN)) {
    sizes[n] = blockN;
  }
  if (exceeds(k, blockK)) {
    sizes[k] = blockK;
  }
  if (llvm::all_of(sizes, [](int64_t s) { return s == 0; })) {
    return op;
  }
  SmallVector<OpFoldResult> tileSizes;
  for (int64_t s : sizes) {
    tileSizes.push_back(rewriter.getIndexAttr(s));
  }
  // n-blocks outside k-blocks: a column block of C is finished before the
  // next one starts.
  SmallVector<int64_t> interchange;
  for (unsigned d = 0; d < op.getNumLoops(); ++d) {
    if (d != n && d != k) {
      interchange.push_back(d);
    }
  }
  interchange.insert(interchange.begin(), {int64_t(n), int64_t(k)});
  scf::SCFTilingOptions options;
  options.setTileSizes(tileSizes);
  options.setInterchange(interchange);
  rewriter.setInsertionPoint(op);
  FailureOr<scf::SCFTilingResult> tiled = scf::tileUsingSCF(
      rewriter, cast<TilingInterface>(op.getOperation()), options);
  if (failed(tiled) || tiled->tiledOps.size() != 1) {
    return op;
  }
  rewriter.replaceOp(op, tiled->replacements);
  return cast<linalg::LinalgOp>(tiled->tiledOps.front());
}

/// Marks ops created by tiling with the vector sizes they were tiled for.
constexpr llvm::StringLiteral kTileAttr = "kiln.tile";
constexpr llvm::StringLiteral kLoopAttr = "kiln.tile_loop";
/// Marks the tiled loop whose iterations run on all cores.
constexpr llvm::StringLiteral kParallelAttr = "kiln.parallel";

/// The loops of an op to spread across threads, outermost first: every
/// parallel loop outside the innermost one (a contraction's: every one but
/// its column loop; batch, head and row loops together), so that the
/// threads share the product of their trip counts (a batch of 1 still
/// splits its rows). Never a loop nested in a reduction loop (a bias
/// gradient summing [B, T, D] into [D]): that would start threads once per
/// reduced element. An op with a single parallel loop spreads that one.
SmallVector<unsigned> chooseParallelDims(linalg::LinalgOp op) {
  SmallVector<unsigned> parallel;
  op.getParallelDims(parallel);
  SmallVector<unsigned> reduction;
  op.getReductionDims(reduction);
  bool contraction = linalg::isaContractionOpInterface(op);
  if (!reduction.empty() && !contraction) {
    llvm::erase_if(parallel,
                   [&](unsigned dim) { return dim > reduction.front(); });
  }
  if (parallel.size() >= 2 &&
      (contraction || parallel.back() == op.getNumLoops() - 1)) {
    parallel.pop_back(); // the columns: vectors (and register tiles)
  }
  return parallel;
}

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

struct KilnTileAndVectorizePass
    : kiln::impl::KilnTileAndVectorizePassBase<KilnTileAndVectorizePass> {
  using Base::Base;

  /// The target is looked up once per pass instance, not per function (a
  /// model has hundreds of outlined kernels).
  LogicalResult initialize(MLIRContext *) override {
    llvm::Expected<kiln::cpu::TargetInfo> found =
        kiln::cpu::lookupTarget(targetCpu);
    if (!found) {
      targetError = llvm::toString(found.takeError());
      return success(); // reported on each function, where there is a loc
    }
    target = *found;
    return success();
  }

  void runOnOperation() override {
    MLIRContext *context = &getContext();
    IRRewriter rewriter(context);
    if (!targetError.empty()) {
      getOperation().emitError("kiln-tile-and-vectorize: ") << targetError;
      return signalPassFailure();
    }
    int64_t rows = tileM ? int64_t(tileM) : target.tileM();
    int64_t columns = tileN ? int64_t(tileN) : target.tileN();
    int64_t width = vectorWidth ? int64_t(vectorWidth) : target.vectorWidth();
    int64_t cacheK = blockK ? int64_t(blockK) : target.blockK();
    int64_t cacheN = blockN ? int64_t(blockN) : target.blockN();

    // 1. Tile every linalg op (on buffers).
    SmallVector<linalg::LinalgOp> ops;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op.getNumLoops() > 0) {
        ops.push_back(op);
      }
    });
    for (linalg::LinalgOp &op : ops) {
      op = blockForCaches(rewriter, op, cacheK, cacheN);
    }
    for (linalg::LinalgOp op : ops) {
      SmallVector<int64_t> sizes = chooseTileSizes(op, rows, columns, width);
      SmallVector<unsigned> parallelDims = chooseParallelDims(op);
      rewriter.setInsertionPoint(op);
      scf::SCFTilingOptions options;
      SmallVector<OpFoldResult> tileSizes;
      for (int64_t s : sizes) {
        tileSizes.push_back(rewriter.getIndexAttr(s));
      }
      options.setTileSizes(tileSizes);
      FailureOr<scf::SCFTilingResult> tiled = scf::tileUsingSCF(
          rewriter, cast<TilingInterface>(op.getOperation()), options);
      if (failed(tiled)) {
        continue; // Keep the op whole: it still lowers to loops.
      }
      rewriter.replaceOp(op, tiled->replacements);
      for (Operation *tiledOp : tiled->tiledOps) {
        tiledOp->setAttr(kTileAttr, rewriter.getDenseI64ArrayAttr(sizes));
      }
      for (auto [dim, loop] : llvm::enumerate(tiled->loops)) {
        loop->setAttr(kLoopAttr, rewriter.getUnitAttr());
        if (llvm::is_contained(parallelDims, unsigned(dim))) {
          loop->setAttr(kParallelAttr, rewriter.getUnitAttr());
        }
      }
    }

    // 2. Peel the partial last tile off every tiled loop, so that the main
    //    loops see full tiles of static size.
    SmallVector<scf::ForOp> loops;
    getOperation().walk<WalkOrder::PreOrder>([&](scf::ForOp loop) {
      if (loop->hasAttr(kLoopAttr)) {
        loops.push_back(loop);
      }
    });
    for (scf::ForOp loop : loops) {
      scf::ForOp partial;
      rewriter.setInsertionPoint(loop);
      if (succeeded(
              scf::peelForLoopAndSimplifyBounds(rewriter, loop, partial)) &&
          partial) {
        partial->removeAttr(kParallelAttr); // one iteration: nothing to share
      }
    }
    {
      RewritePatternSet patterns(context);
      for (Dialect *dialect : context->getLoadedDialects()) {
        dialect->getCanonicalizationPatterns(patterns);
      }
      for (RegisteredOperationName op : context->getRegisteredOperations()) {
        op.getCanonicalizationPatterns(patterns, context);
      }
      (void)applyPatternsGreedily(getOperation(), std::move(patterns));
    }

    // 3. Vectorize the tiles: full tiles have static shapes; partial ones
    //    stay scalar loops, and so do tiles the vectorizer would get wrong
    //    (reductions of values not read from an input element, i1 buffers).
    SmallVector<linalg::LinalgOp> tiles;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op->hasAttr(kTileAttr)) {
        tiles.push_back(op);
      }
    });
    for (linalg::LinalgOp op : tiles) {
      op->removeAttr(kTileAttr);
      if (llvm::any_of(op.getStaticLoopRanges(), ShapedType::isDynamic) ||
          !reductionsVectorizeExactly(op) || touchesSubByteElements(op)) {
        continue;
      }
      rewriter.setInsertionPoint(op);
      FailureOr<linalg::VectorizationResult> vectorized =
          linalg::vectorize(rewriter, op);
      if (succeeded(vectorized)) {
        rewriter.replaceOp(op, vectorized->replacements);
      }
    }
    getOperation().walk([&](scf::ForOp loop) { loop->removeAttr(kLoopAttr); });

    // 4. Drop the unit dimensions of the tiles' vectors (leading batch and
    //    head dims), so that they lower to plain 1-D vector registers.
    RewritePatternSet patterns(context);
    vector::populateCastAwayVectorLeadingOneDimPatterns(patterns);
    patterns.add<TransposedTileRead>(context);
    vector::populateVectorTransferDropUnitDimsPatterns(patterns);
    vector::populateDropUnitDimWithShapeCastPatterns(patterns);
    vector::TransferReadOp::getCanonicalizationPatterns(patterns, context);
    vector::TransferWriteOp::getCanonicalizationPatterns(patterns, context);
    vector::BroadcastOp::getCanonicalizationPatterns(patterns, context);
    vector::ShapeCastOp::getCanonicalizationPatterns(patterns, context);
    vector::ExtractOp::getCanonicalizationPatterns(patterns, context);
    (void)applyPatternsGreedily(getOperation(), std::move(patterns));
  }

  kiln::cpu::TargetInfo target;
  std::string targetError;
};
} // namespace

namespace {

/// The allocation (or argument) a memref view is carved from.
Value baseOf(Value memref) {
  while (auto view = memref.getDefiningOp<ViewLikeOpInterface>()) {
    memref = view.getViewSource();
  }
  return memref;
}

/// Is `v` a kernel's buffer argument that overlaps no other one?
bool isNoAliasArgument(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  auto func = arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp())
                  : func::FuncOp();
  return func && func.getArgAttr(arg.getArgNumber(), kiln::kNoAliasArgAttr);
}

/// Moves a transfer_read/transfer_write pair of a loop-invariant tile of a
/// fresh allocation (or of a kernel argument that overlaps no other) out of
/// `loop`, carrying the vector as an iteration argument. The buffer must not
/// be touched by anything else in the loop.
void hoistTransferPairs(RewriterBase &rewriter, scf::ForOp loop) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (auto read : loop.getBody()->getOps<vector::TransferReadOp>()) {
      Value source = read.getBase();
      if (read.getMask() || !loop.isDefinedOutsideOfLoop(source) ||
          !llvm::all_of(read.getIndices(), [&](Value v) {
            return loop.isDefinedOutsideOfLoop(v);
          })) {
        continue;
      }
      Value base = baseOf(source);
      if (!base.getDefiningOp<memref::AllocOp>() && !isNoAliasArgument(base)) {
        continue;
      }
      vector::TransferWriteOp write;
      for (auto candidate : loop.getBody()->getOps<vector::TransferWriteOp>()) {
        if (candidate.getBase() == source && !candidate.getMask() &&
            candidate.getIndices() == read.getIndices() &&
            candidate.getVector().getType() == read.getType() &&
            candidate.getPermutationMap() == read.getPermutationMap()) {
          write = candidate;
          break;
        }
      }
      if (!write || !read->isBeforeInBlock(write)) {
        continue;
      }
      bool conflict = false;
      loop.getBody()->walk([&](Operation *op) {
        if (op == read.getOperation() || op == write.getOperation()) {
          return;
        }
        for (Value operand : op->getOperands()) {
          if (isa<MemRefType>(operand.getType()) && baseOf(operand) == base) {
            conflict = true;
          }
        }
      });
      if (conflict) {
        continue;
      }
      read->moveBefore(loop);
      auto yieldWrite = [&](OpBuilder &, Location, ArrayRef<BlockArgument>) {
        return SmallVector<Value>{write.getVector()};
      };
      FailureOr<LoopLikeOpInterface> grown = loop.replaceWithAdditionalYields(
          rewriter, ValueRange{read.getResult()},
          /*replaceInitOperandUsesInLoop=*/true, yieldWrite);
      if (failed(grown)) {
        return;
      }
      loop = cast<scf::ForOp>(grown->getOperation());
      write->moveAfter(loop);
      write.getValueToStoreMutable().assign(loop.getResults().back());
      changed = true;
      break;
    }
  }
}

struct KilnHoistVectorTransfersPass
    : kiln::impl::KilnHoistVectorTransfersPassBase<
          KilnHoistVectorTransfersPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    SmallVector<scf::ForOp> loops;
    getOperation().walk([&](scf::ForOp loop) { loops.push_back(loop); });
    // Index arithmetic that tiling left inside loops (a block's offset plus
    // a tile's, once per transfer) must move out and merge first, or a
    // tile's read and write look loop-variant or at different places.
    for (scf::ForOp loop : loops) {
      moveLoopInvariantCode(cast<LoopLikeOpInterface>(loop.getOperation()));
    }
    DominanceInfo dominance(getOperation());
    eliminateCommonSubExpressions(rewriter, dominance, getOperation());
    for (scf::ForOp loop : loops) { // innermost first (post-order)
      hoistTransferPairs(rewriter, loop);
    }
  }
};
} // namespace

namespace {
/// The marked loops directly inside `loop` that can join it in one
/// scf.parallel: each the only op of its parent's body but pure index
/// arithmetic (moved into it), with bounds that do not depend on the outer
/// loops.
SmallVector<scf::ForOp> collapsibleNest(scf::ForOp outer) {
  SmallVector<scf::ForOp> nest = {outer};
  while (true) {
    Block *body = nest.back().getBody();
    scf::ForOp inner;
    bool movable = true;
    for (Operation &op : body->without_terminator()) {
      if (auto loop = dyn_cast<scf::ForOp>(&op)) {
        if (inner) {
          return nest;
        }
        inner = loop;
        continue;
      }
      movable &= isPure(&op) && op.getNumRegions() == 0;
    }
    if (!inner || !inner->hasAttr(kParallelAttr) || !movable ||
        inner.getNumResults() != 0) {
      return nest;
    }
    for (Value bound :
         {inner.getLowerBound(), inner.getUpperBound(), inner.getStep()}) {
      if (!outer.isDefinedOutsideOfLoop(bound)) {
        return nest;
      }
    }
    // The index arithmetic (used by the inner loop only: there is nothing
    // else in the body) moves to the front of the inner body, in order.
    Operation *anchor = &inner.getBody()->front();
    for (Operation &op :
         llvm::make_early_inc_range(body->without_terminator())) {
      if (&op != inner.getOperation()) {
        op.moveBefore(anchor);
      }
    }
    nest.push_back(inner);
  }
}

/// Splits a marked loop whose body runs several loops (the full tiles of a
/// row loop and its peeled partial tile) into one copy per inner loop, so
/// that each copy is a perfect nest that can be collapsed. Legal because a
/// marked loop is a parallel dimension of its op: its iterations write
/// disjoint elements, in any order.
void distribute(RewriterBase &rewriter, scf::ForOp loop) {
  SmallVector<Operation *> inner;
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (op.getNumRegions() > 0) {
      if (!isa<scf::ForOp>(op)) {
        return;
      }
      inner.push_back(&op);
    } else if (!isPure(&op)) {
      return;
    }
  }
  if (inner.size() < 2 || loop.getNumResults() != 0) {
    return;
  }
  rewriter.setInsertionPointAfter(loop);
  for (size_t keep = inner.size(); keep-- > 1;) {
    IRMapping mapping;
    auto copy = cast<scf::ForOp>(rewriter.clone(*loop, mapping));
    rewriter.setInsertionPoint(copy);
    for (size_t other = 0; other < inner.size(); ++other) {
      if (other != keep) {
        rewriter.eraseOp(mapping.lookup(inner[other]));
      }
    }
  }
  for (size_t other = 1; other < inner.size(); ++other) {
    rewriter.eraseOp(inner[other]);
  }
}

/// Turns the loops that kiln-tile-and-vectorize marked into scf.parallel:
/// the outermost marked loop of each nest, with the marked loops perfectly
/// nested in it (one multi-dimensional scf.parallel, which libomp runs as
/// one collapsed iteration space), when they carry no values.
struct KilnParallelizeLoopsPass
    : kiln::impl::KilnParallelizeLoopsPassBase<KilnParallelizeLoopsPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    SmallVector<scf::ForOp> marked;
    getOperation().walk([&](scf::ForOp loop) { // innermost first
      if (loop->hasAttr(kParallelAttr)) {
        marked.push_back(loop);
      }
    });
    for (scf::ForOp loop : marked) {
      distribute(rewriter, loop);
    }
    SmallVector<scf::ForOp> outermost;
    getOperation().walk<WalkOrder::PreOrder>([&](scf::ForOp loop) {
      if (!loop->hasAttr(kParallelAttr)) {
        return WalkResult::advance();
      }
      if (loop.getNumResults() == 0 &&
          !loop->getParentOfType<scf::ParallelOp>()) {
        outermost.push_back(loop);
        return WalkResult::skip(); // nested marks join it or stay serial
      }
      return WalkResult::advance();
    });
    for (scf::ForOp loop : outermost) {
      SmallVector<scf::ForOp> nest = collapsibleNest(loop);
      SmallVector<Value> lower, upper, steps;
      for (scf::ForOp l : nest) {
        lower.push_back(l.getLowerBound());
        upper.push_back(l.getUpperBound());
        steps.push_back(l.getStep());
      }
      rewriter.setInsertionPoint(loop);
      auto parallel =
          scf::ParallelOp::create(rewriter, loop.getLoc(), lower, upper, steps);
      Block *body = parallel.getBody();
      rewriter.eraseOp(body->getTerminator());
      // The innermost loop's body, with each loop's induction variable
      // replaced by the matching one of the scf.parallel (the index
      // arithmetic moved into the inner loops comes along).
      scf::ForOp innermost = nest.back();
      for (auto [l, iv] : llvm::zip(nest, body->getArguments())) {
        rewriter.replaceAllUsesWith(l.getInductionVar(), iv);
      }
      rewriter.mergeBlocks(innermost.getBody(), body,
                           body->getArguments().take_back(1));
      // The scf.yield of the for loop becomes the scf.reduce terminator.
      Operation *yield = body->getTerminator();
      rewriter.setInsertionPoint(yield);
      scf::ReduceOp::create(rewriter, yield->getLoc());
      rewriter.eraseOp(yield);
      rewriter.eraseOp(loop);
    }
    getOperation().walk(
        [&](scf::ForOp loop) { loop->removeAttr(kParallelAttr); });
  }
};
} // namespace

namespace {
struct KilnInlineAllocaScopesPass
    : kiln::impl::KilnInlineAllocaScopesPassBase<KilnInlineAllocaScopesPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    SmallVector<memref::AllocaScopeOp> scopes;
    getOperation()->walk([&](memref::AllocaScopeOp scope) {
      bool allocates = false;
      scope.getBodyRegion().walk([&](memref::AllocaOp) { allocates = true; });
      if (!allocates && scope.getBodyRegion().hasOneBlock()) {
        scopes.push_back(scope);
      }
    });
    for (memref::AllocaScopeOp scope : scopes) {
      Block *body = &scope.getBodyRegion().front();
      auto terminator =
          cast<memref::AllocaScopeReturnOp>(body->getTerminator());
      SmallVector<Value> results(terminator.getResults());
      rewriter.eraseOp(terminator);
      rewriter.inlineBlockBefore(body, scope);
      rewriter.replaceOp(scope, results);
    }
  }
};
} // namespace

namespace {
struct KilnFuseElementwisePass
    : kiln::impl::KilnFuseElementwisePassBase<KilnFuseElementwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(
        patterns, [](OpOperand *operand) {
          // A producer is duplicated into each consumer it fuses into, so
          // it must fuse into all of its users or none: one that is kept
          // for another user (a residual stream feeding a layer norm) would
          // be computed twice, and along the stream every layer would
          // recompute all the ones before it.
          auto elementwise = [](Operation *op) {
            auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
            return linalgOp &&
                   linalgOp.getNumLoops() == linalgOp.getNumParallelLoops();
          };
          Operation *producer = operand->get().getDefiningOp();
          return producer && elementwise(operand->getOwner()) &&
                 llvm::all_of(producer->getUses(), [&](OpOperand &use) {
                   auto user = dyn_cast<linalg::LinalgOp>(use.getOwner());
                   return user && elementwise(user) && user.isDpsInput(&use);
                 });
        });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      signalPassFailure();
    }
  }
};
} // namespace
