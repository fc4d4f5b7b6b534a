//===- WidenBf16.cpp - Compute bf16 ops in f32 ----------------------------===//
//
// Implements kiln-widen-bf16.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kiln/IR/KilnOps.h"
#include "dialects/Kiln/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kiln-widen-bf16"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNWIDENBF16PASS
#include "dialects/Kiln/Transforms/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// `type` with f32 elements if it is a tensor of bf16, else null.
RankedTensorType widened(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.getElementType().isBF16()) {
    return {};
  }
  return tensor.clone(Float32Type::get(type.getContext()));
}

/// Ops that only move or select elements: they lower for any element type
/// and stay in bf16 (half the bytes; an in-place cache update stays in
/// place; an embedding gathers its rows without a copy of the table).
bool movesOnly(Operation *op) {
  return isa<CastOp, ConstantOp, ReshapeOp, TransposeOp, SliceOp, ConcatOp,
             UpdateSliceOp, EmbeddingOp>(op);
}

/// The operands of `op` that only its matrix products read (not biases).
SmallVector<OpOperand *> productOperands(Operation *op) {
  if (auto linear = dyn_cast<LinearOp>(op)) {
    return {&linear.getInputMutable(), &linear.getWeightMutable()};
  }
  if (auto matmul = dyn_cast<MatmulOp>(op)) {
    return {&matmul.getLhsMutable(), &matmul.getRhsMutable()};
  }
  if (auto ffn = dyn_cast<FeedForwardOp>(op)) {
    return {&ffn.getInputMutable(), &ffn.getW1Mutable(), &ffn.getW2Mutable()};
  }
  if (auto mha = dyn_cast<MultiHeadAttentionOp>(op)) {
    return {&mha.getQueryMutable(), &mha.getKeyValueMutable(),
            &mha.getWqMutable(),    &mha.getWkMutable(),
            &mha.getWvMutable(),    &mha.getWoMutable()};
  }
  return {};
}

struct KilnWidenBf16Pass
    : mlir::kiln::impl::KilnWidenBf16PassBase<KilnWidenBf16Pass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation()->walk([&](Operation *op) {
      if (!isa<KilnDialect>(op->getDialect()) || movesOnly(op)) {
        return;
      }
      auto bf16 = [](Type type) { return bool(widened(type)); };
      if (llvm::any_of(op->getOperandTypes(), bf16) ||
          llvm::any_of(op->getResultTypes(), bf16)) {
        ops.push_back(op);
      }
    });
    for (Operation *op : ops) {
      LLVM_DEBUG(llvm::dbgs() << "kiln-widen-bf16: " << op->getName() << " at "
                              << op->getLoc() << "\n");
      OpBuilder b(op);
      Location loc = op->getLoc();
      if (roundingProducts) {
        // The products round their operands to bf16 as they pack them: an
        // f32 value rounded to bf16 is read as that f32 value (the same
        // bf16 values, without the rounded copy and its widening).
        for (OpOperand *operand : productOperands(op)) {
          auto rounded = operand->get().getDefiningOp<CastOp>();
          if (rounded && widened(rounded.getType()) &&
              getElementTypeOrSelf(rounded.getInput().getType()).isF32()) {
            operand->set(rounded.getInput());
          }
        }
      }
      for (OpOperand &operand : op->getOpOperands()) {
        if (RankedTensorType wide = widened(operand.get().getType())) {
          operand.set(CastOp::create(b, loc, wide, operand.get()));
        }
      }
      b.setInsertionPointAfter(op);
      for (OpResult result : op->getResults()) {
        Type narrow = result.getType();
        if (RankedTensorType wide = widened(narrow)) {
          result.setType(wide);
          auto back = CastOp::create(b, loc, narrow, result);
          result.replaceAllUsesExcept(back, back);
        }
      }
    }
  }
};

} // namespace
