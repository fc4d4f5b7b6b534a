//===- StripDropout.cpp - Evaluation mode: remove dropout -----------------===//
//
// Implements kiln-strip-dropout.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kiln/IR/KilnOps.h"
#include "dialects/Kiln/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNSTRIPDROPOUTPASS
#include "dialects/Kiln/Transforms/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {
struct KilnStripDropoutPass
    : mlir::kiln::impl::KilnStripDropoutPassBase<KilnStripDropoutPass> {
  void runOnOperation() override {
    Builder builder(&getContext());
    FloatAttr zero = builder.getF64FloatAttr(0.0);
    getOperation()->walk([&](Operation *op) {
      if (auto dropout = dyn_cast<DropoutOp>(op)) {
        dropout.replaceAllUsesWith(dropout.getInput());
        dropout.erase();
      } else if (auto mha = dyn_cast<MultiHeadAttentionOp>(op)) {
        mha.setDropoutAttr(zero);
      } else if (auto ffn = dyn_cast<FeedForwardOp>(op)) {
        ffn.setDropoutAttr(zero);
      }
    });
  }
};
} // namespace
