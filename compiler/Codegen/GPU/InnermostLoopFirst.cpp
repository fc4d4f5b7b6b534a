//===- InnermostLoopFirst.cpp - Contiguous dimension on threadIdx.x -------===//
//
// Implements kiln-innermost-loop-first.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/GPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/ParallelLoopMapper.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kiln-innermost-loop-first"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNINNERMOSTLOOPFIRSTPASS
#include "compiler/Codegen/GPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

struct InnermostLoopFirst
    : public kiln::impl::KilnInnermostLoopFirstPassBase<InnermostLoopFirst> {
  void runOnOperation() override {
    SmallVector<scf::ParallelOp> loops;
    getOperation().walk([&](scf::ParallelOp loop) {
      if (loop.getNumLoops() >= 2 && loop.getNumReductions() == 0 &&
          !loop->getParentOfType<scf::ParallelOp>() &&
          !loop->getParentOfType<gpu::LaunchOp>() &&
          !loop->hasAttr(gpu::getMappingAttrName())) {
        loops.push_back(loop);
      }
    });
    IRRewriter rewriter(&getContext());
    for (scf::ParallelOp loop : loops) {
      LLVM_DEBUG(llvm::dbgs() << "reversing the " << loop.getNumLoops()
                              << " dimensions of " << loop.getLoc() << "\n");
      auto reversed = [](ValueRange values) {
        return SmallVector<Value>(llvm::reverse(values));
      };
      rewriter.setInsertionPoint(loop);
      auto flipped = scf::ParallelOp::create(
          rewriter, loop.getLoc(), reversed(loop.getLowerBound()),
          reversed(loop.getUpperBound()), reversed(loop.getStep()));
      flipped->setDiscardableAttrs(loop->getDiscardableAttrDictionary());
      Block *body = flipped.getBody();
      rewriter.eraseOp(body->getTerminator());
      // Old dimension i is new dimension n - 1 - i.
      rewriter.mergeBlocks(loop.getBody(), body,
                           reversed(flipped.getInductionVars()));
      rewriter.eraseOp(loop);
    }
  }
};

} // namespace
