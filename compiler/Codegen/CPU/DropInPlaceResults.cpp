//===- DropInPlaceResults.cpp - Updated arguments instead of results ------===//
//
// Implements kiln-drop-in-place-results.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/Passes.h"

#include "dialects/Kiln/IR/KilnDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNDROPINPLACERESULTSPASS
#include "compiler/Codegen/CPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

/// `value` with memref.casts looked through.
Value stripCasts(Value value) {
  while (auto cast = value.getDefiningOp<memref::CastOp>()) {
    value = cast.getSource();
  }
  return value;
}

struct KilnDropInPlaceResultsPass
    : mlir::kiln::impl::KilnDropInPlaceResultsPassBase<KilnDropInPlaceResultsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal()) {
        continue;
      }
      BitVector dropped(func.getNumResults());
      SmallVector<int64_t> targets(func.getNumResults(), -1);
      for (unsigned r = 0; r < func.getNumResults(); ++r) {
        if (auto updates = func.getResultAttrOfType<IntegerAttr>(
                r, mlir::kiln::kUpdatesAttr)) {
          targets[r] = updates.getInt();
          dropped.set(r);
        }
      }
      if (dropped.none()) {
        continue;
      }
      if (!SymbolTable::symbolKnownUseEmpty(func, module)) {
        func.emitOpError("updates arguments in place (kiln.updates) and is "
                         "called from the module: its callers would lose "
                         "those results");
        return signalPassFailure();
      }
      for (unsigned r : dropped.set_bits()) {
        int64_t arg = targets[r];
        if (arg < 0 || arg >= int64_t(func.getNumArguments()) ||
            !isa<MemRefType>(func.getArgumentTypes()[arg])) {
          func.emitOpError("result #")
              << r << " updates argument #" << arg
              << ", which is not a buffer argument (run after "
                 "one-shot-bufferize)";
          return signalPassFailure();
        }
      }
      // Store each updated value into its argument unless it is already
      // there, then return the other results only.
      func.walk([&](func::ReturnOp ret) {
        OpBuilder b(ret);
        for (unsigned r : dropped.set_bits()) {
          Value value = ret.getOperand(r);
          Value target = func.getArgument(targets[r]);
          if (stripCasts(value) != target) {
            memref::CopyOp::create(b, ret.getLoc(), value, target);
          }
        }
        ret->eraseOperands(dropped);
      });
      if (failed(func.eraseResults(dropped))) {
        func.emitOpError("could not drop the results updated in place");
        return signalPassFailure();
      }
    }
  }
};

} // namespace
