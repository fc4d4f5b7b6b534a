//===- ParallelizeLoops.cpp - Marked loops on all cores -------------------===//
//
// Implements kiln-parallelize-loops.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/Passes.h"
#include "compiler/Codegen/Common/Attributes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNPARALLELIZELOOPSPASS
#include "compiler/Codegen/CPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

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
    if (!inner || !inner->hasAttr(mlir::kiln::cpu::kParallelAttr) || !movable ||
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

/// Runs `parallel` only when the loop its body holds has iterations, if
/// that loop's bounds do not depend on it: a peeled partial tile is often
/// empty (a width that is a multiple of the tile), and starting the threads
/// for nothing costs a fork and a barrier.
void guardEmptyInnerLoop(RewriterBase &rewriter, scf::ParallelOp parallel) {
  // The index arithmetic of the inner loop's bounds, moved in with the
  // collapsed loops, comes back out when it does not use the indices.
  moveLoopInvariantCode(cast<LoopLikeOpInterface>(parallel.getOperation()));
  scf::ForOp inner;
  for (Operation &op : parallel.getBody()->without_terminator()) {
    if (op.getNumRegions() > 0) {
      if (inner || !isa<scf::ForOp>(op)) {
        return;
      }
      inner = cast<scf::ForOp>(op);
    }
  }
  if (!inner || !parallel.isDefinedOutsideOfLoop(inner.getLowerBound()) ||
      !parallel.isDefinedOutsideOfLoop(inner.getUpperBound())) {
    return;
  }
  std::optional<int64_t> lower = getConstantIntValue(inner.getLowerBound());
  std::optional<int64_t> upper = getConstantIntValue(inner.getUpperBound());
  if (lower && upper) {
    return; // canonicalization knows
  }
  Location loc = parallel.getLoc();
  rewriter.setInsertionPoint(parallel);
  Value nonEmpty =
      arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::slt,
                            inner.getLowerBound(), inner.getUpperBound());
  auto guard = scf::IfOp::create(rewriter, loc, nonEmpty,
                                 /*withElseRegion=*/false);
  rewriter.moveOpBefore(parallel, guard.thenBlock()->getTerminator());
}

/// Turns the loops that kiln-block-for-caches and kiln-tile-and-peel marked
/// into scf.parallel: the outermost marked loop of each nest, with the marked
/// loops perfectly nested in it (one multi-dimensional scf.parallel, which
/// libomp runs as one collapsed iteration space), when they carry no values.
struct KilnParallelizeLoopsPass
    : mlir::kiln::impl::KilnParallelizeLoopsPassBase<KilnParallelizeLoopsPass> {
  void runOnOperation() override {
    // A serial kernel runs inside a parallel loop of its caller.
    if (!getOperation()->hasAttr(mlir::kiln::kSerialKernelAttr)) {
      parallelizeMarkedLoops();
    }
    getOperation().walk([&](scf::ForOp loop) {
      loop->removeAttr(mlir::kiln::cpu::kParallelAttr);
    });
  }

  void parallelizeMarkedLoops() {
    IRRewriter rewriter(&getContext());
    SmallVector<scf::ForOp> marked;
    getOperation().walk([&](scf::ForOp loop) { // innermost first
      if (loop->hasAttr(mlir::kiln::cpu::kParallelAttr)) {
        marked.push_back(loop);
      }
    });
    for (scf::ForOp loop : marked) {
      distribute(rewriter, loop);
    }
    SmallVector<scf::ForOp> outermost;
    getOperation().walk<WalkOrder::PreOrder>([&](scf::ForOp loop) {
      if (!loop->hasAttr(mlir::kiln::cpu::kParallelAttr)) {
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
      guardEmptyInnerLoop(rewriter, parallel);
    }
  }
};
} // namespace
