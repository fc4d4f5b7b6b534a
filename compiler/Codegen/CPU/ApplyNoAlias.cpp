//===- ApplyNoAlias.cpp - noalias kernel arguments in the LLVM dialect ----===//
//
// Implements kiln-apply-noalias.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/Passes.h"

#include "compiler/Codegen/Common/Attributes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNAPPLYNOALIASPASS
#include "compiler/Codegen/CPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

struct ApplyNoAlias
    : public mlir::kiln::impl::KilnApplyNoAliasPassBase<ApplyNoAlias> {
  void runOnOperation() override {
    getOperation().walk([&](LLVM::LLVMFuncOp func) {
      auto positions =
          func->getAttrOfType<DenseI64ArrayAttr>(mlir::kiln::kNoAliasArgsAttr);
      if (!positions) {
        return;
      }
      func->removeAttr(mlir::kiln::kNoAliasArgsAttr);
      for (int64_t p : positions.asArrayRef()) {
        if (p >= func.getNumArguments() ||
            !isa<LLVM::LLVMPointerType>(func.getArgumentTypes()[p])) {
          func.emitOpError("has no pointer argument #") << p << " to mark";
          return signalPassFailure();
        }
        func.setArgAttr(p, LLVM::LLVMDialect::getNoAliasAttrName(),
                        UnitAttr::get(&getContext()));
      }
    });
  }
};

} // namespace
