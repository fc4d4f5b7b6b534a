//===- LLVMTargetAttributes.cpp - The target on every LLVM function -------===//
//
// Implements kiln-llvm-target-attributes.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/Passes.h"
#include "compiler/Codegen/CPU/TargetInfo.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNLLVMTARGETATTRIBUTESPASS
#include "compiler/Codegen/CPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

struct KilnLLVMTargetAttributesPass
    : mlir::kiln::impl::KilnLLVMTargetAttributesPassBase<
          KilnLLVMTargetAttributesPass> {
  using Base::Base;

  void runOnOperation() override {
    FailureOr<mlir::kiln::TargetAttr> target = mlir::kiln::cpu::requireTarget(
        getOperation(), "kiln-llvm-target-attributes");
    if (failed(target)) {
      return signalPassFailure();
    }
    MLIRContext *context = &getContext();
    auto cpu = StringAttr::get(context, target->getCpu());
    auto features =
        LLVM::TargetFeaturesAttr::get(context, target->getFeatures());
    for (auto func : getOperation().getOps<LLVM::LLVMFuncOp>()) {
      if (func.isExternal() || func.getTargetCpuAttr()) {
        continue;
      }
      func.setTargetCpuAttr(cpu);
      func.setTargetFeaturesAttr(features);
    }
  }
};

} // namespace
