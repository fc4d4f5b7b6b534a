//===- CloneFillsPerUse.cpp - One fill for each op that writes into it ----===//
//
// Implements kiln-clone-fills-per-use.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/Common/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNCLONEFILLSPERUSEPASS
#include "compiler/Codegen/Common/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

struct KilnCloneFillsPerUsePass
    : mlir::kiln::impl::KilnCloneFillsPerUsePassBase<KilnCloneFillsPerUsePass> {
  void runOnOperation() override {
    SmallVector<linalg::FillOp> fills;
    getOperation()->walk([&](linalg::FillOp fill) {
      if (fill.hasPureTensorSemantics() &&
          fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>()) {
        fills.push_back(fill);
      }
    });
    IRRewriter rewriter(&getContext());
    for (linalg::FillOp fill : fills) {
      auto empty = fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>();
      Value filled = fill.getResult(0);
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : filled.getUses()) {
        uses.push_back(&use);
      }
      for (OpOperand *use : uses) {
        Operation *user = use->getOwner();
        // A fill in another region stays shared (it may run many times).
        if (user->getBlock() != fill->getBlock()) {
          continue;
        }
        rewriter.setInsertionPoint(user);
        IRMapping mapping;
        Operation *newEmpty = rewriter.clone(*empty, mapping);
        mapping.map(empty.getResult(), newEmpty->getResult(0));
        Operation *newFill = rewriter.clone(*fill, mapping);
        rewriter.modifyOpInPlace(user,
                                 [&] { use->set(newFill->getResult(0)); });
      }
      if (fill->use_empty()) {
        rewriter.eraseOp(fill);
        if (empty->use_empty()) {
          rewriter.eraseOp(empty);
        }
      }
    }
  }
};
} // namespace
