//===- TileAndVectorize.cpp - Register tiles and vectors for the CPU ------===//
//
// Implements kiln-tile-and-vectorize.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/Passes.h"

#include "compiler/Codegen/CPU/TargetInfo.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/Transforms/VectorRewritePatterns.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNTILEANDVECTORIZEPASS
#include "compiler/Codegen/CPU/Passes.h.inc"
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
          loop->setAttr(kiln::cpu::kParallelAttr, rewriter.getUnitAttr());
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
        partial->removeAttr(
            kiln::cpu::kParallelAttr); // one iteration: nothing to share
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
