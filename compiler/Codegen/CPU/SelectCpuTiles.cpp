//===- SelectCpuTiles.cpp - Choose each linalg op's tiles
//------------------===//
//
// Implements kiln-select-cpu-tiles.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/Passes.h"

#include "compiler/Codegen/CPU/TargetInfo.h"
#include "compiler/Codegen/CPU/TileSelection.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kiln-select-cpu-tiles"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNSELECTCPUTILESPASS
#include "compiler/Codegen/CPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {
struct KilnSelectCpuTilesPass
    : mlir::kiln::impl::KilnSelectCpuTilesPassBase<KilnSelectCpuTilesPass> {
  using Base::Base;

  void runOnOperation() override {
    FailureOr<mlir::kiln::TargetAttr> resolved =
        mlir::kiln::cpu::requireTarget(getOperation(), "kiln-select-cpu-tiles");
    if (failed(resolved)) {
      return signalPassFailure();
    }
    mlir::kiln::cpu::TileParams params = mlir::kiln::cpu::TileParams::of(
        mlir::kiln::cpu::TargetInfo::of(*resolved), tileM, tileN, vectorWidth,
        blockK, blockN, blockM);
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op.getNumLoops() == 0 || op->hasAttr(mlir::kiln::kCpuTilesAttr)) {
        return;
      }
      mlir::kiln::CpuTilesAttr tiles =
          mlir::kiln::cpu::selectCpuTiles(op, params);
      LLVM_DEBUG(llvm::dbgs()
                 << DEBUG_TYPE ": " << tiles << " for " << op->getName()
                 << " at " << op->getLoc() << "\n");
      op->setAttr(mlir::kiln::kCpuTilesAttr, tiles);
    });
  }
};
} // namespace
