//===- HoistVectorTransfers.cpp - Accumulator tiles in registers ----------===//
//
// Implements kiln-hoist-vector-transfers.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/Passes.h"

#include "compiler/Codegen/Common/Attributes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/Transforms/VectorTransforms.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/CSE.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNHOISTVECTORTRANSFERSPASS
#include "compiler/Codegen/CPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

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
    // A tile's accumulators read right after the tile was filled
    // (kiln-defer-fills) take the filled vector, and the fill's write, now
    // overwritten before anything reads it, goes.
    vector::transferOpflowOpt(rewriter, getOperation());
  }
};
} // namespace
