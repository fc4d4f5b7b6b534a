//===- FuseElementwise.cpp - Fuse elementwise producers -------------------===//
//
// Implements kiln-fuse-elementwise.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/Common/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
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
          //
          // bf16 values (kiln-widen-bf16) add conversions around each op: a
          // widening (a kiln.cast from bf16 to f32: one load and a shift
          // per element) is worth duplicating into every consumer that
          // reads each of its elements once, a reduction too (a layer
          // norm's statistics over a bf16 row), rather than written out as
          // an f32 copy; but nothing with several users is duplicated into
          // conversions, which would carry it into their own users (the
          // residual stream's rounded sum, widened for the layer norm and
          // for the next residual add, would be recomputed layer after
          // layer) instead of storing it once in bf16.
          auto elementwise = [](Operation *op) {
            auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
            return linalgOp &&
                   linalgOp.getNumLoops() == linalgOp.getNumParallelLoops();
          };
          auto conversion = [&](Operation *op) -> Operation * {
            auto generic = dyn_cast<linalg::GenericOp>(op);
            if (!generic || !elementwise(generic) ||
                generic.getNumDpsInputs() != 1 ||
                generic.getNumDpsInits() != 1) {
              return nullptr;
            }
            Block &body = generic.getRegion().front();
            Operation *first = &body.front();
            return body.getOperations().size() == 2 &&
                           isa<arith::ExtFOp, arith::TruncFOp>(first)
                       ? first
                       : nullptr;
          };
          Operation *producer = operand->get().getDefiningOp();
          if (!producer) {
            return false;
          }
          Operation *converts = conversion(producer);
          bool widening = converts && isa<arith::ExtFOp>(converts);
          bool shared = !producer->hasOneUse();
          return llvm::all_of(producer->getUses(), [&](OpOperand &use) {
            auto user = dyn_cast<linalg::LinalgOp>(use.getOwner());
            if (!user || !user.isDpsInput(&use)) {
              return false;
            }
            if (widening) {
              return elementwise(user) ||
                     user.getMatchingIndexingMap(&use).isPermutation();
            }
            return elementwise(user) && !(shared && conversion(user));
          });
        });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      signalPassFailure();
    }
  }
};
} // namespace
