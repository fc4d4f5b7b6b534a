//===- CheckLowered.cpp - Verify a pipeline lowered everything ------------===//
//
// Implements kiln-check-lowered.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/Common/Passes.h"

#include "dialects/Kiln/IR/KilnOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNCHECKLOWEREDPASS
#include "compiler/Codegen/Common/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

/// Whether `op`, outside the LLVM dialect, is translated to LLVM IR with it:
/// OpenMP regions (CPU code), and GPU binaries with the launches of their
/// kernels on LLVM values (GPU code).
bool translatesWithLLVM(Operation *op) {
  if (isa_and_nonnull<omp::OpenMPDialect>(op->getDialect())) {
    return true;
  }
  if (auto launch = dyn_cast<gpu::LaunchFuncOp>(op)) {
    return llvm::all_of(launch->getOperandTypes(), LLVM::isCompatibleType);
  }
  return isa<gpu::BinaryOp>(op);
}

struct KilnCheckLoweredPass
    : mlir::kiln::impl::KilnCheckLoweredPassBase<KilnCheckLoweredPass> {
  using Base::Base;

  void runOnOperation() override {
    bool toLLVM = stage == "llvm";
    if (!toLLVM && stage != "linalg") {
      getOperation().emitError("kiln-check-lowered: unknown stage '")
          << stage << "' (expected linalg or llvm)";
      return signalPassFailure();
    }
    // The GPU kernel ops are lowered later, by kiln-gpu-kernels: they may
    // stay in modules compiled for a GPU.
    auto target = getOperation()->getAttrOfType<mlir::kiln::TargetAttr>(
        mlir::kiln::kTargetAttr);
    bool forGpu = target && !target.getGpu().empty();
    bool failed = false;
    getOperation().walk([&](Operation *op) {
      if (op == getOperation().getOperation()) {
        return;
      }
      Dialect *dialect = op->getDialect();
      bool leftover =
          toLLVM ? !isa_and_nonnull<LLVM::LLVMDialect>(dialect) &&
                       !translatesWithLLVM(op)
                 : isa_and_nonnull<mlir::kiln::KilnDialect>(dialect) &&
                       !(forGpu && isa<mlir::kiln::FlashAttentionOp,
                                       mlir::kiln::FlashAttentionGradOp>(op));
      if (leftover) {
        InFlightDiagnostic error = op->emitOpError("was not lowered to ")
                                   << stage;
        if (isa<mlir::kiln::FlashAttentionOp, mlir::kiln::FlashAttentionGradOp>(
                op)) {
          error << " (a GPU kernel op: only code compiled for a GPU, "
                   "kiln-to-gpu, takes it)";
        }
        failed = true;
      }
    });
    if (failed) {
      signalPassFailure();
    }
  }
};

} // namespace
