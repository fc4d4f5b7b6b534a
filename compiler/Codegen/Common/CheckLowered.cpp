//===- CheckLowered.cpp - Verify a pipeline lowered everything ------------===//
//
// Implements kiln-check-lowered.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/Common/Passes.h"

#include "dialects/Kiln/IR/KilnDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNCHECKLOWEREDPASS
#include "compiler/Codegen/Common/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {
struct KilnCheckLoweredPass
    : kiln::impl::KilnCheckLoweredPassBase<KilnCheckLoweredPass> {
  using Base::Base;

  void runOnOperation() override {
    bool toLLVM = stage == "llvm";
    if (!toLLVM && stage != "linalg") {
      getOperation().emitError("kiln-check-lowered: unknown stage '")
          << stage << "' (expected linalg or llvm)";
      return signalPassFailure();
    }
    bool failed = false;
    getOperation().walk([&](Operation *op) {
      if (op == getOperation().getOperation()) {
        return;
      }
      Dialect *dialect = op->getDialect();
      // OpenMP regions are translated to LLVM IR alongside the LLVM dialect.
      bool leftover =
          toLLVM
              ? !isa_and_nonnull<LLVM::LLVMDialect, omp::OpenMPDialect>(dialect)
              : isa_and_nonnull<kiln::KilnDialect>(dialect);
      if (leftover) {
        op->emitOpError("was not lowered to ") << stage;
        failed = true;
      }
    });
    if (failed) {
      signalPassFailure();
    }
  }
};
} // namespace
