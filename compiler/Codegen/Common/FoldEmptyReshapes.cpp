//===- FoldEmptyReshapes.cpp - Reshapes of nothing are empty tensors -----===//
//
// Implements kiln-fold-empty-reshapes.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/Common/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kiln-fold-empty-reshapes"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNFOLDEMPTYRESHAPESPASS
#include "compiler/Codegen/Common/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

bool hasNoElements(Value tensor) {
  return llvm::is_contained(cast<RankedTensorType>(tensor.getType()).getShape(),
                            0);
}

/// The reshape's result as an empty tensor whose dynamic sizes are `sizes`'
/// dynamic entries.
void replaceWithEmpty(PatternRewriter &rewriter, Operation *op,
                      RankedTensorType type, ArrayRef<OpFoldResult> sizes) {
  LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": " << *op << "\n");
  SmallVector<Value> dynamic;
  for (auto [i, size] : llvm::enumerate(sizes)) {
    if (type.isDynamicDim(i)) {
      dynamic.push_back(
          getValueOrCreateConstantIndexOp(rewriter, op->getLoc(), size));
    }
  }
  rewriter.replaceOpWithNewOp<tensor::EmptyOp>(op, type.getShape(),
                                               type.getElementType(), dynamic);
}

/// A collapse of no elements: each size the product of its group's.
struct EmptyCollapse : OpRewritePattern<tensor::CollapseShapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tensor::CollapseShapeOp op,
                                PatternRewriter &rewriter) const override {
    if (!hasNoElements(op.getSrc())) {
      return failure();
    }
    Location loc = op.getLoc();
    SmallVector<OpFoldResult> sizes;
    for (const ReassociationIndices &group : op.getReassociationIndices()) {
      Value product = arith::ConstantIndexOp::create(rewriter, loc, 1);
      for (int64_t d : group) {
        Value size = getValueOrCreateConstantIndexOp(
            rewriter, loc, tensor::getMixedSize(rewriter, loc, op.getSrc(), d));
        product = arith::MulIOp::create(rewriter, loc, product, size);
      }
      sizes.push_back(product);
    }
    replaceWithEmpty(rewriter, op, op.getResultType(), sizes);
    return success();
  }
};

/// An expand of no elements: the sizes it names.
struct EmptyExpand : OpRewritePattern<tensor::ExpandShapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tensor::ExpandShapeOp op,
                                PatternRewriter &rewriter) const override {
    if (!hasNoElements(op.getSrc())) {
      return failure();
    }
    replaceWithEmpty(rewriter, op, op.getResultType(),
                     op.getMixedOutputShape());
    return success();
  }
};

struct KilnFoldEmptyReshapesPass
    : mlir::kiln::impl::KilnFoldEmptyReshapesPassBase<
          KilnFoldEmptyReshapesPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<EmptyCollapse, EmptyExpand>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      return signalPassFailure();
    }
  }
};

} // namespace
