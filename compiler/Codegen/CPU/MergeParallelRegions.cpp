//===- MergeParallelRegions.cpp - One thread team per kernel --------------===//
//
// Implements kiln-merge-parallel-regions.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/Passes.h"

#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNMERGEPARALLELREGIONSPASS
#include "compiler/Codegen/CPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

/// A region that every thread of a team runs the same way: no clause
/// (threads, condition, privates, reductions, binding) and one block.
bool isPlain(omp::ParallelOp parallel) {
  return parallel->getNumOperands() == 0 && parallel.getRegion().hasOneBlock();
}

/// Has every thread of the team finished all `block`'s memory effects
/// (reads and writes) when it reaches the block's terminator? True when
/// the last op with any is a work-sharing loop that waits (no `nowait`) or
/// a barrier, looking through serial loops that end that way (and, for
/// their zero-trip case, at what comes before them).
bool endsWithBarrier(Block &block) {
  for (Operation *op = block.getTerminator()->getPrevNode(); op;
       op = op->getPrevNode()) {
    if (isa<omp::BarrierOp>(op)) {
      return true;
    }
    if (auto loop = dyn_cast<omp::WsloopOp>(op)) {
      return !loop.getNowait();
    }
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      if (loop.getNumResults() != 0 || !endsWithBarrier(*loop.getBody())) {
        return false;
      }
      continue;
    }
    if (!isMemoryEffectFree(op)) {
      return false;
    }
  }
  return true; // nothing since the block began
}

/// Makes sure the team waits for every thread at the end of `body` (before
/// its terminator): a region's end would have.
void endWithBarrier(RewriterBase &rewriter, Block &body, Location loc) {
  if (!endsWithBarrier(body)) {
    rewriter.setInsertionPoint(body.getTerminator());
    omp::BarrierOp::create(rewriter, loc);
  }
}

/// Merges `second` into `first` when only ops without memory effects stand
/// between them: those move before `first` (nothing there depends on a
/// parallel region, which has no results), and `second`'s body follows
/// `first`'s after a barrier, so one team runs both.
bool mergeWithNext(RewriterBase &rewriter, omp::ParallelOp first) {
  if (!isPlain(first)) {
    return false;
  }
  SmallVector<Operation *> between;
  Operation *next = first->getNextNode();
  for (; next && !isa<omp::ParallelOp>(next); next = next->getNextNode()) {
    if (!isMemoryEffectFree(next) || next->hasTrait<OpTrait::IsTerminator>()) {
      return false;
    }
    between.push_back(next);
  }
  auto second = dyn_cast_or_null<omp::ParallelOp>(next);
  if (!second || !isPlain(second)) {
    return false;
  }
  for (Operation *op : between) {
    rewriter.moveOpBefore(op, first);
  }
  Block &body = first.getRegion().front();
  endWithBarrier(rewriter, body, first.getLoc());
  Block &secondBody = second.getRegion().front();
  rewriter.eraseOp(body.getTerminator());
  rewriter.mergeBlocks(&secondBody, &body);
  rewriter.eraseOp(second);
  return true;
}

/// Moves a serial loop whose body is one plain parallel region and ops
/// without memory effects into that region: every thread runs the loop (its
/// bounds are the same for all), the work-sharing loops inside share each
/// iteration's work, and a barrier ends each iteration as the region's end
/// did. One team then runs all iterations instead of one per iteration.
bool hoistOutOf(RewriterBase &rewriter, scf::ForOp loop) {
  if (loop.getNumResults() != 0) {
    return false;
  }
  omp::ParallelOp parallel;
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (auto inner = dyn_cast<omp::ParallelOp>(op)) {
      if (parallel || !isPlain(inner)) {
        return false;
      }
      parallel = inner;
    } else if (!isMemoryEffectFree(&op)) {
      return false;
    }
  }
  if (!parallel) {
    return false;
  }
  Block &body = parallel.getRegion().front();
  endWithBarrier(rewriter, body, parallel.getLoc());
  // The loop's ops, in order, around the region's body:
  //   scf.for { a; omp.parallel { b }; c }
  //   -> omp.parallel { scf.for { a; b; c } }
  rewriter.setInsertionPoint(loop);
  auto team = omp::ParallelOp::create(rewriter, parallel.getLoc());
  Block *teamBody = rewriter.createBlock(&team.getRegion());
  rewriter.setInsertionPointToEnd(teamBody);
  omp::TerminatorOp::create(rewriter, parallel.getLoc());
  rewriter.moveOpBefore(loop, teamBody->getTerminator());
  rewriter.eraseOp(body.getTerminator());
  rewriter.inlineBlockBefore(&body, parallel);
  rewriter.eraseOp(parallel);
  return true;
}

struct KilnMergeParallelRegionsPass
    : mlir::kiln::impl::KilnMergeParallelRegionsPassBase<
          KilnMergeParallelRegionsPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    bool changed = true;
    while (changed) {
      changed = false;
      SmallVector<omp::ParallelOp> regions;
      getOperation()->walk([&](omp::ParallelOp p) { regions.push_back(p); });
      for (omp::ParallelOp p : regions) {
        // A region merged away earlier in this sweep is gone: start over.
        if (mergeWithNext(rewriter, p)) {
          changed = true;
          break;
        }
      }
      if (changed) {
        continue;
      }
      SmallVector<scf::ForOp> loops;
      getOperation()->walk([&](scf::ForOp loop) {
        if (!loop->getParentOfType<omp::ParallelOp>()) {
          loops.push_back(loop);
        }
      });
      for (scf::ForOp loop : loops) {
        if (hoistOutOf(rewriter, loop)) {
          changed = true;
          break;
        }
      }
    }
  }
};

} // namespace
