//===- MarkInPlaceArguments.cpp - Which arguments bufferization writes ----===//
//
// Implements kiln-mark-in-place-arguments.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/Common/Passes.h"

#include "dialects/Kiln/IR/KilnDialect.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNMARKINPLACEARGUMENTSPASS
#include "compiler/Codegen/Common/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

struct KilnMarkInPlaceArgumentsPass
    : mlir::kiln::impl::KilnMarkInPlaceArgumentsPassBase<
          KilnMarkInPlaceArgumentsPass> {
  using Base::Base;

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal()) {
        continue;
      }
      SmallVector<bool> writable(func.getNumArguments(), false);
      for (unsigned r = 0; r < func.getNumResults(); ++r) {
        auto updates =
            func.getResultAttrOfType<IntegerAttr>(r, mlir::kiln::kUpdatesAttr);
        if (!updates) {
          continue;
        }
        // The dialect verified it names an argument of the result's type.
        writable[updates.getInt()] = inPlace;
      }
      Builder b(func.getContext());
      for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
        if (isa<TensorType>(type)) {
          func.setArgAttr(
              i, bufferization::BufferizationDialect::kWritableAttrName,
              b.getBoolAttr(writable[i]));
        }
      }
    }
  }
};

} // namespace
