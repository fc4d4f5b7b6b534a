//===- VectorizeTiles.cpp - Vectors for the tiles of static size ----------===//
//
// Implements kiln-vectorize-tiles.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/Passes.h"

#include "compiler/Codegen/CPU/TileSelection.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/Transforms/VectorRewritePatterns.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kiln-vectorize-tiles"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNVECTORIZETILESPASS
#include "compiler/Codegen/CPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

using namespace mlir::kiln::cpu;

namespace {

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

struct KilnVectorizeTilesPass
    : mlir::kiln::impl::KilnVectorizeTilesPassBase<KilnVectorizeTilesPass> {
  using Base::Base;

  /// The pattern set is built once per pass instance, not per function.
  LogicalResult initialize(MLIRContext *context) override {
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
    IRRewriter rewriter(&getContext());
    SmallVector<linalg::LinalgOp> tiles;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op->hasAttr(kTileAttr)) {
        tiles.push_back(op);
      }
    });
    // Vectorize the tiles of static shape; the rest stay scalar loops,
    // and so do tiles the vectorizer would get wrong (reductions of values
    // not read from an input element, i1 buffers).
    for (linalg::LinalgOp op : tiles) {
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

    // Drop the unit dimensions of the tiles' vectors (leading batch and
    // head dims), so that they lower to plain 1-D vector registers.
    (void)applyPatternsGreedily(getOperation(), vectorCleanup);
  }

  FrozenRewritePatternSet vectorCleanup;
};
} // namespace
