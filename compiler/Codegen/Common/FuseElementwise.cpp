//===- FuseElementwise.cpp - Fuse elementwise producers -------------------===//
//
// Implements kiln-fuse-elementwise.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/Common/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNFUSEELEMENTWISEPASS
#include "compiler/Codegen/Common/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

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
