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
#include "mlir/Target/LLVMIR/Dialect/All.h"

void kiln::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::kiln::KilnDialect>();
  mlir::kiln::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // Translation to LLVM IR, for the JIT and ahead of time alike: OpenMP
  // for threaded loops; GPU and NVVM for kiln-to-gpu, whose gpu.module
  // bodies become PTX and whose gpu.binary ops are embedded in the host
  // module through the offloading interface.
  mlir::registerAllToLLVMIRTranslations(registry);
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
