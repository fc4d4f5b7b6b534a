//===- DeferFills.cpp - Fills done tile by tile by their consumer ---------===//
//
// Implements kiln-defer-fills.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/Passes.h"

#include "compiler/Codegen/Common/Views.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNDEFERFILLSPASS
#include "compiler/Codegen/CPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

/// The op after `fill` that next touches memory, if it writes the fill's
/// buffer as its only output and reads nothing of that buffer.
linalg::LinalgOp consumerOf(linalg::FillOp fill) {
  Value buffer = fill.getOutputs()[0];
  for (Operation *op = fill->getNextNode(); op; op = op->getNextNode()) {
    if (isMemoryEffectFree(op) || isa<memref::AllocOp>(op)) {
      continue;
    }
    auto consumer = dyn_cast<linalg::LinalgOp>(op);
    if (!consumer || !consumer.hasPureBufferSemantics() ||
        consumer.getNumDpsInits() != 1 || consumer.getDpsInits()[0] != buffer) {
      return {};
    }
    Value root = mlir::kiln::viewRoot(buffer);
    for (Value input : consumer.getDpsInputs()) {
      if (isa<MemRefType>(input.getType()) &&
          mlir::kiln::viewRoot(input) == root) {
        return {};
      }
    }
    return consumer;
  }
  return {};
}

struct KilnDeferFillsPass
    : mlir::kiln::impl::KilnDeferFillsPassBase<KilnDeferFillsPass> {
  void runOnOperation() override {
    SmallVector<linalg::FillOp> fills;
    getOperation()->walk([&](linalg::FillOp fill) {
      if (fill.hasPureBufferSemantics()) {
        fills.push_back(fill);
      }
    });
    for (linalg::FillOp fill : fills) {
      TypedAttr value;
      if (!matchPattern(fill.getInputs()[0], m_Constant(&value))) {
        continue;
      }
      linalg::LinalgOp consumer = consumerOf(fill);
      if (!consumer || isa<linalg::FillOp>(consumer.getOperation()) ||
          consumer->hasAttr(mlir::kiln::cpu::kFillAttr)) {
        continue;
      }
      // A consumer that never reads its output (a copy, an elementwise op)
      // overwrites the fill: nothing to defer.
      if (consumer.payloadUsesValueFromOperand(
              &consumer.getDpsInitsMutable()[0])) {
        consumer->setAttr(mlir::kiln::cpu::kFillAttr, value);
      }
      fill.erase();
    }
  }
};

} // namespace
