//===- GpuLoopTiles.cpp - Parallel loops as blocks of threads -------------===//
//
// Implements kiln-gpu-loop-tiles.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/GPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/ParallelLoopMapper.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/Support/Debug.h"

#include <algorithm>
#include <optional>

#define DEBUG_TYPE "kiln-gpu-loop-tiles"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNGPULOOPTILESPASS
#include "compiler/Codegen/GPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

/// Threads per block along a loop's first two dimensions, or along its only
/// one.
constexpr int64_t kTile2d = 16;
constexpr int64_t kTile1d = 256;

/// The number of iterations of one-dimensional `loop`, when constant.
std::optional<int64_t> constantTripCount(scf::ParallelOp loop) {
  std::optional<int64_t> lower = getConstantIntValue(loop.getLowerBound()[0]);
  std::optional<int64_t> upper = getConstantIntValue(loop.getUpperBound()[0]);
  std::optional<int64_t> step = getConstantIntValue(loop.getStep()[0]);
  if (!lower || !upper || !step || *step <= 0) {
    return std::nullopt;
  }
  return *upper <= *lower ? 0 : (*upper - *lower + *step - 1) / *step;
}

/// Whether `loop` is one the generic mapping takes (not a kernel of
/// kiln-gpu-kernels', not one mapped already) and can tile.
bool mappable(scf::ParallelOp loop) {
  return loop.getNumReductions() == 0 &&
         !loop->getParentOfType<gpu::LaunchOp>() &&
         !loop->hasAttr(gpu::getMappingAttrName());
}

/// `loop` with its dimensions in reverse order (the same iterations).
scf::ParallelOp reverse(IRRewriter &rewriter, scf::ParallelOp loop) {
  LLVM_DEBUG(llvm::dbgs() << "reversing the " << loop.getNumLoops()
                          << " dimensions of " << loop.getLoc() << "\n");
  auto reversed = [](ValueRange values) {
    return SmallVector<Value>(llvm::reverse(values));
  };
  rewriter.setInsertionPoint(loop);
  auto flipped = scf::ParallelOp::create(
      rewriter, loop.getLoc(), reversed(loop.getLowerBound()),
      reversed(loop.getUpperBound()), reversed(loop.getStep()));
  flipped->setDiscardableAttrs(loop->getDiscardableAttrDictionary());
  Block *body = flipped.getBody();
  rewriter.eraseOp(body->getTerminator());
  // Old dimension i is new dimension n - 1 - i.
  rewriter.mergeBlocks(loop.getBody(), body,
                       reversed(flipped.getInductionVars()));
  rewriter.eraseOp(loop);
  return flipped;
}

struct GpuLoopTiles
    : public kiln::impl::KilnGpuLoopTilesPassBase<GpuLoopTiles> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    SmallVector<scf::ParallelOp> outermost;
    getOperation().walk([&](scf::ParallelOp loop) {
      if (loop.getNumLoops() >= 2 && mappable(loop) &&
          !loop->getParentOfType<scf::ParallelOp>()) {
        outermost.push_back(loop);
      }
    });
    for (scf::ParallelOp loop : outermost) {
      reverse(rewriter, loop);
    }
    SmallVector<scf::ParallelOp> innermost;
    getOperation().walk([&](scf::ParallelOp loop) {
      bool nests = false;
      loop.getBody()->walk([&](scf::ParallelOp) { nests = true; });
      if (!nests && mappable(loop)) {
        innermost.push_back(loop);
      }
    });
    for (scf::ParallelOp loop : innermost) {
      SmallVector<int64_t> tiles{kTile2d, kTile2d};
      if (loop.getNumLoops() == 1) {
        // No more threads than iterations when that is known: one for the
        // one iteration of serial code (kiln-serial-nests-to-parallel).
        std::optional<int64_t> trips = constantTripCount(loop);
        tiles = {trips ? std::clamp<int64_t>(*trips, 1, kTile1d) : kTile1d};
      }
      LLVM_DEBUG(llvm::dbgs() << "tiling " << loop.getLoc() << " by "
                              << tiles.front() << "\n");
      scf::tileParallelLoop(loop, tiles, /*noMinMaxBounds=*/true);
    }
  }
};

} // namespace
