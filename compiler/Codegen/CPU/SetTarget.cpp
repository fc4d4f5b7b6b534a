//===- SetTarget.cpp - The target CPU resolved once, on the module --------===//
//
// Implements kiln-set-target.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/Passes.h"
#include "compiler/Codegen/CPU/TargetInfo.h"

#include "mlir/IR/BuiltinOps.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kiln-set-target"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNSETTARGETPASS
#include "compiler/Codegen/CPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

struct KilnSetTargetPass
    : mlir::kiln::impl::KilnSetTargetPassBase<KilnSetTargetPass> {
  using Base::Base;

  void runOnOperation() override {
    llvm::Expected<mlir::kiln::TargetAttr> target =
        mlir::kiln::cpu::resolveTarget(&getContext(), cpu, gpu);
    if (!target) {
      getOperation().emitError("kiln-set-target: ")
          << llvm::toString(target.takeError());
      return signalPassFailure();
    }
    LLVM_DEBUG(llvm::dbgs()
               << DEBUG_TYPE ": '" << cpu << "'"
               << (gpu.empty() ? "" : " and '") << gpu
               << (gpu.empty() ? "" : "'") << " is " << *target << "\n");
    getOperation()->setAttr(mlir::kiln::kTargetAttr, *target);
  }
};

} // namespace
