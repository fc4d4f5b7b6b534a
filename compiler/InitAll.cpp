//===- InitAll.cpp - Registration of everything Kiln provides -------------===//
//
// Dialects, passes and pipelines, registered once for all tools. Kiln's
// pipelines run a long chain of upstream passes (bufferization, conversions to
// LLVM) whose dialects and interface models must all be present, so the
// upstream registration entry points are used as a whole rather than a
// hand-kept list that would break silently when a pipeline grows.
//
//===----------------------------------------------------------------------===//

#include "compiler/InitAll.h"

#include "compiler/Conversion/KilnToLinalg/KilnToLinalg.h"
#include "compiler/Pipelines/Pipelines.h"
#include "dialects/Kiln/IR/KilnDialect.h"
#include "dialects/Kiln/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"

void kiln::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::kiln::KilnDialect>();
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::registerOpenMPDialectTranslation(registry);
  // kiln-to-gpu: gpu.module bodies become NVVM IR, then PTX.
  mlir::registerGPUDialectTranslation(registry);
  mlir::registerNVVMDialectTranslation(registry);
}

void kiln::registerAllPasses() {
  static bool registered = [] {
    mlir::registerAllPasses();
    mlir::kiln::registerKilnPasses();
    mlir::kiln::registerKilnToLinalgPasses();
    mlir::kiln::registerKilnPipelines();
    return true;
  }();
  (void)registered;
}
