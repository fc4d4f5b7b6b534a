//===- AttachGpuTarget.cpp - The module's GPU architecture on its kernels -===//
//
// Implements kiln-attach-gpu-target.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/GPU/Passes.h"
#include "dialects/Kiln/IR/KilnDialect.h"

#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kiln-attach-gpu-target"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNATTACHGPUTARGETPASS
#include "compiler/Codegen/GPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

struct KilnAttachGpuTargetPass
    : mlir::kiln::impl::KilnAttachGpuTargetPassBase<KilnAttachGpuTargetPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto target =
        module->getAttrOfType<mlir::kiln::TargetAttr>(mlir::kiln::kTargetAttr);
    if (!target || target.getGpu().empty()) {
      module.emitError("kiln-attach-gpu-target: the module's kiln.target "
                       "names no GPU architecture: run "
                       "kiln-set-target{gpu=sm_90} first (kiln-to-gpu does)");
      return signalPassFailure();
    }
    LLVM_DEBUG(llvm::dbgs()
               << DEBUG_TYPE ": kernels for " << target.getGpu() << "\n");
    // Upstream's attachment, with the architecture read from the IR.
    GpuNVVMAttachTargetOptions options;
    options.chip = target.getGpu().str();
    options.optLevel = 3;
    OpPassManager attach(ModuleOp::getOperationName());
    attach.addPass(createGpuNVVMAttachTarget(options));
    if (failed(runPipeline(attach, module))) {
      signalPassFailure();
    }
  }
};

} // namespace
