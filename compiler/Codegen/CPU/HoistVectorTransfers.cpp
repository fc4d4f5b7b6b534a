//===- HoistVectorTransfers.cpp - Accumulator tiles in registers ----------===//
//
// Implements kiln-hoist-vector-transfers.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/Passes.h"

#include "compiler/Codegen/Common/Attributes.h"
#include "compiler/Codegen/Common/Views.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/Transforms/VectorTransforms.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/CSE.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

#include <limits>

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNHOISTVECTORTRANSFERSPASS
#include "compiler/Codegen/CPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

/// Is `v` a kernel's buffer argument that overlaps no other one?
bool isNoAliasArgument(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  auto func = arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp())
                  : func::FuncOp();
  return func &&
         func.getArgAttr(arg.getArgNumber(), mlir::kiln::kNoAliasArgAttr);
}

/// Does an op in `loop`'s body other than `except` use a view of `base`?
bool touchesBuffer(scf::ForOp loop, Value base,
                   ArrayRef<Operation *> except = {}) {
  WalkResult result = loop.getBody()->walk([&](Operation *op) {
    if (llvm::is_contained(except, op)) {
      return WalkResult::advance();
    }
    for (Value operand : op->getOperands()) {
      if (isa<MemRefType>(operand.getType()) &&
          mlir::kiln::viewRoot(operand) == base) {
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return result.wasInterrupted();
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
      Value base = mlir::kiln::viewRoot(source);
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
      if (touchesBuffer(loop, base, {read, write})) {
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

/// The most cache lines one deferred accumulator read prefetches (a
/// register tile of 8 rows of 32 floats touches 16), and the bytes of a
/// line (64 on every x86 CPU).
constexpr int64_t kMaxPrefetchedLines = 64;
constexpr int64_t kLineBytes = 64;

/// A loop that adds to an accumulator read from memory right before it
/// (a register tile's output, carried through its reduction loop by
/// hoistTransferPairs: `acc + a * b` at every step) starts from zeros
/// instead, and the tile is read and added once, after the loop; its cache
/// lines are prefetched before the loop, so that they arrive while the
/// loop runs. Read first, the tile of a large output (a weight gradient's
/// [4096, 384], read again in each reduction block) had cost a cache miss
/// per row before every tile's first multiply (7% of the head's weight
/// gradient on Zen 4). The tile is then added to the loop's sum, not the
/// sum to the tile, step by step: another order of the same additions.
void deferAccumulatorReads(RewriterBase &rewriter, scf::ForOp loop) {
  for (unsigned index = 0; index < loop.getNumRegionIterArgs(); ++index) {
    BlockArgument arg = loop.getRegionIterArgs()[index];
    auto read =
        loop.getInitArgs()[index].getDefiningOp<vector::TransferReadOp>();
    auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
    auto add = yield.getOperand(index).getDefiningOp<arith::AddFOp>();
    VectorType type = read ? read.getVectorType() : VectorType();
    auto source = read ? dyn_cast<MemRefType>(read.getBase().getType())
                       : MemRefType();
    if (!read || !isa<FloatType>(type.getElementType()) ||
        !read->hasOneUse() || read->getBlock() != loop->getBlock() ||
        read.getMask() || !source || type.isScalable() ||
        !read.getPermutationMap().isMinorIdentity() ||
        llvm::any_of(read.getInBoundsValues(), [](bool b) { return !b; }) ||
        !add || add->getBlock() != loop.getBody() || !add->hasOneUse() ||
        !arg.hasOneUse() ||
        (add.getLhs() != arg && add.getRhs() != arg)) {
      continue;
    }
    // Nothing in the loop may touch the read's buffer.
    if (touchesBuffer(loop, mlir::kiln::viewRoot(read.getBase()))) {
      continue;
    }
    int64_t elementBytes = type.getElementTypeBitWidth() / 8;
    if (elementBytes == 0) {
      continue;
    }
    int64_t lineElements = std::max<int64_t>(1, kLineBytes / elementBytes);
    ArrayRef<int64_t> shape = type.getShape();
    int64_t width = shape.back(), rows = type.getNumElements() / width;
    if (rows * llvm::divideCeil(width, lineElements) > kMaxPrefetchedLines) {
      continue;
    }
    // One prefetch per cache line of each row of the tile.
    Location loc = read.getLoc();
    rewriter.setInsertionPoint(loop);
    unsigned leading = source.getRank() - type.getRank();
    SmallVector<int64_t> rowStrides = computeSuffixProduct(shape.drop_back());
    for (int64_t row = 0; row < rows; ++row) {
      SmallVector<int64_t> offsets = delinearize(row, rowStrides);
      offsets.push_back(0);
      for (int64_t column = 0; column < width; column += lineElements) {
        offsets.back() = column;
        SmallVector<Value> indices(read.getIndices());
        for (auto [d, offset] : llvm::enumerate(offsets)) {
          if (offset != 0) {
            indices[leading + d] = arith::AddIOp::create(
                rewriter, loc, indices[leading + d],
                arith::ConstantIndexOp::create(rewriter, loc, offset));
          }
        }
        memref::PrefetchOp::create(rewriter, loc, read.getBase(), indices,
                                   /*isWrite=*/true, /*localityHint=*/3,
                                   /*isDataCache=*/true);
      }
    }
    Value zeros = arith::ConstantOp::create(
        rewriter, loc,
        DenseElementsAttr::get(
            type, rewriter.getFloatAttr(type.getElementType(), -0.0)));
    rewriter.modifyOpInPlace(
        loop, [&] { loop.getInitArgsMutable()[index].assign(zeros); });
    rewriter.moveOpAfter(read, loop);
    rewriter.setInsertionPointAfter(read);
    Value result = loop.getResult(index);
    auto total = arith::AddFOp::create(rewriter, loc, read.getResult(), result,
                                       add.getFastmathAttr());
    rewriter.replaceAllUsesExcept(result, total.getResult(), total);
  }
}

/// The value that leaves any f32 unchanged when combined with `kind`.
std::optional<float> neutralOf(vector::CombiningKind kind) {
  switch (kind) {
  case vector::CombiningKind::ADD:
    return -0.0f;
  case vector::CombiningKind::MUL:
    return 1.0f;
  case vector::CombiningKind::MAXIMUMF:
  case vector::CombiningKind::MAXNUMF:
    return -std::numeric_limits<float>::infinity();
  case vector::CombiningKind::MINIMUMF:
  case vector::CombiningKind::MINNUMF:
    return std::numeric_limits<float>::infinity();
  default:
    return std::nullopt;
  }
}

/// `value` with shape-only ops (shape_cast, broadcast, extract at constant
/// positions) looked through, stopping at `stop`'s block boundary.
Value throughShapeOps(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    if (auto cast = dyn_cast<vector::ShapeCastOp>(def)) {
      value = cast.getSource();
    } else if (auto broadcast = dyn_cast<vector::BroadcastOp>(def)) {
      value = broadcast.getSource();
    } else if (auto extract = dyn_cast<vector::ExtractOp>(def);
               extract && extract.getDynamicPosition().empty()) {
      value = extract.getSource();
    } else {
      break;
    }
  }
  return value;
}

/// A reduction along a loop whose accumulator is a single element (a row
/// maximum or sum, tiled one vector at a time along the row): each step
/// reduced its vector across the lanes into the scalar, a shuffle sequence
/// per vector (for maximumf, with NaN checks at every step). The loop now
/// carries a whole vector of partial results, combined lane by lane, and
/// reduces it across the lanes once, after the loop. Sums are then added
/// in another order (lane by lane, then across), as any vectorized sum is.
void vectorizeCarriedReductions(RewriterBase &rewriter, scf::ForOp loop) {
  for (unsigned index = 0; index < loop.getNumRegionIterArgs(); ++index) {
    BlockArgument arg = loop.getRegionIterArgs()[index];
    auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
    auto reduction = throughShapeOps(yield.getOperand(index))
                         .getDefiningOp<vector::MultiDimReductionOp>();
    if (!reduction || reduction->getBlock() != loop.getBody() ||
        throughShapeOps(reduction.getAcc()) != arg || !arg.hasOneUse()) {
      continue;
    }
    VectorType source = reduction.getSourceVectorType();
    auto resultVector = dyn_cast<VectorType>(reduction.getDestType());
    std::optional<float> neutral = neutralOf(reduction.getKind());
    if (!neutral || !source.getElementType().isF32() ||
        source.getNumElements() < 2 ||
        (resultVector && resultVector.getNumElements() != 1)) {
      continue;
    }
    Location loc = reduction.getLoc();
    vector::CombiningKind kind = reduction.getKind();
    auto lanes =
        VectorType::get({source.getNumElements()}, source.getElementType());
    rewriter.setInsertionPoint(loop);
    Value init = arith::ConstantOp::create(
        rewriter, loc, DenseElementsAttr::get(lanes, *neutral));
    Value sourceValue = reduction.getSource();
    FailureOr<LoopLikeOpInterface> grown = loop.replaceWithAdditionalYields(
        rewriter, init, /*replaceInitOperandUsesInLoop=*/false,
        [&](OpBuilder &b, Location l, ArrayRef<BlockArgument> partial) {
          Value flat = vector::ShapeCastOp::create(b, l, lanes, sourceValue);
          return SmallVector<Value>{
              vector::makeArithReduction(b, l, kind, flat, partial.front())};
        });
    if (failed(grown)) {
      return;
    }
    loop = cast<scf::ForOp>(grown->getOperation());
    // The element accumulator now passes through the loop unchanged.
    yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
    Value oldYielded = yield.getOperand(index);
    rewriter.modifyOpInPlace(yield, [&] {
      yield.setOperand(index, loop.getRegionIterArgs()[index]);
    });
    for (Operation *op = oldYielded.getDefiningOp(); op && op->use_empty();) {
      Operation *next =
          op->getNumOperands() ? op->getOperand(0).getDefiningOp() : nullptr;
      if (auto red = dyn_cast<vector::MultiDimReductionOp>(op)) {
        next = red.getAcc().getDefiningOp();
      }
      rewriter.eraseOp(op);
      op = next && next->getBlock() == loop.getBody() ? next : nullptr;
    }
    // After the loop: across the lanes, then with the element.
    rewriter.setInsertionPointAfter(loop);
    Value element = loop.getResult(index);
    Value scalar = element;
    if (auto type = dyn_cast<VectorType>(element.getType())) {
      scalar = vector::ExtractOp::create(
          rewriter, loc, element, SmallVector<int64_t>(type.getRank(), 0));
    }
    Value total = vector::ReductionOp::create(rewriter, loc, kind,
                                              loop.getResults().back(), scalar);
    Value replacement = total;
    if (isa<VectorType>(element.getType())) {
      replacement =
          vector::BroadcastOp::create(rewriter, loc, element.getType(), total);
    }
    rewriter.replaceAllUsesExcept(element, replacement, scalar.getDefiningOp());
  }
}

struct KilnHoistVectorTransfersPass
    : mlir::kiln::impl::KilnHoistVectorTransfersPassBase<
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
    SmallVector<scf::ForOp> hoisted;
    getOperation().walk([&](scf::ForOp loop) { hoisted.push_back(loop); });
    for (scf::ForOp loop : hoisted) {
      vectorizeCarriedReductions(rewriter, loop);
    }
    // A tile's accumulators read right after the tile was filled
    // (kiln-defer-fills) take the filled vector, and the fill's write, now
    // overwritten before anything reads it, goes.
    vector::transferOpflowOpt(rewriter, getOperation());
    SmallVector<scf::ForOp> carrying;
    getOperation().walk([&](scf::ForOp loop) { carrying.push_back(loop); });
    for (scf::ForOp loop : carrying) {
      deferAccumulatorReads(rewriter, loop);
    }
  }
};
} // namespace
