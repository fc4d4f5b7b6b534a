//===- SerialNestsToParallel.cpp - Serial code as one-thread kernels ------===//
//
// Implements kiln-serial-nests-to-parallel.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/GPU/Passes.h"

#include "compiler/Codegen/GPU/ShapeBuffers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNSERIALNESTSTOPARALLELPASS
#include "compiler/Codegen/GPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

/// Does `op` read or write memory other than by allocating, freeing,
/// copying whole buffers or taking views?
bool touchesMemory(Operation *op) {
  if (kiln::onShapeBuffer(op)) {
    return false;
  }
  if (isa<memref::AllocOp, memref::DeallocOp, memref::CopyOp,
          ViewLikeOpInterface, memref::DimOp, memref::ExtractStridedMetadataOp,
          scf::ParallelOp>(op)) {
    return false;
  }
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (effects) {
    return effects.hasEffect<MemoryEffects::Read>() ||
           effects.hasEffect<MemoryEffects::Write>();
  }
  return op->getNumRegions() > 0; // loops: whatever their bodies do
}

/// Ops a run of serial code does not extend over.
bool isBarrier(Operation *op) {
  bool hasParallel = false;
  op->walk([&](scf::ParallelOp) { hasParallel = true; });
  return hasParallel || op->hasTrait<OpTrait::IsTerminator>() ||
         isa<memref::AllocOp, memref::DeallocOp, memref::CopyOp,
             CallOpInterface, gpu::LaunchOp>(op);
}

struct SerialNestsToParallel
    : public kiln::impl::KilnSerialNestsToParallelPassBase<
          SerialNestsToParallel> {
  void runOnOperation() override {
    // A load on the host whose value only parallel loops use (a learning
    // rate, a clipping scale) is done by every thread instead.
    SmallVector<memref::LoadOp> loads;
    for (Block &block : getOperation().getBody()) {
      for (auto load : block.getOps<memref::LoadOp>()) {
        loads.push_back(load);
      }
    }
    for (memref::LoadOp load : loads) {
      Block *block = load->getBlock();
      SmallVector<Operation *> users(load->getUsers().begin(),
                                     load->getUsers().end());
      bool inKernels = !users.empty() && llvm::all_of(users, [&](Operation *u) {
        Operation *top = block->findAncestorOpInBlock(*u);
        return top && top != u && isa<scf::ParallelOp>(top);
      });
      if (!inKernels) {
        continue;
      }
      for (OpOperand &use : llvm::make_early_inc_range(load->getUses())) {
        auto parallel = cast<scf::ParallelOp>(
            block->findAncestorOpInBlock(*use.getOwner()));
        OpBuilder b(parallel.getBody(), parallel.getBody()->begin());
        use.set(b.clone(*load)->getResult(0));
      }
      load->erase();
    }
    // Runs of ops between barriers that touch memory outside any parallel
    // loop; each becomes one kernel, if no value it defines is used after
    // it (otherwise it stays, and kiln-device-buffers reports it).
    SmallVector<SmallVector<Operation *>> runs, constants;
    for (Block &block : getOperation().getBody()) {
      SmallVector<Operation *> run, runConstants;
      bool touches = false;
      auto flush = [&] {
        if (touches) {
          runs.push_back(run);
          constants.push_back(runConstants);
        }
        run.clear();
        runConstants.clear();
        touches = false;
      };
      llvm::SmallPtrSet<Operation *, 16> inRun;
      for (Operation &op : block) {
        if (isBarrier(&op)) {
          flush();
          inRun.clear();
          continue;
        }
        // Pure ops on values from before the run (constants, sizes) stay
        // outside it: code after the run may use them.
        bool hoistable = op.getNumRegions() == 0 && isMemoryEffectFree(&op) &&
                         llvm::none_of(op.getOperands(), [&](Value v) {
                           return inRun.contains(v.getDefiningOp());
                         });
        if (hoistable) {
          if (!run.empty()) {
            runConstants.push_back(&op);
          }
          continue;
        }
        run.push_back(&op);
        inRun.insert(&op);
        touches |= touchesMemory(&op);
      }
      flush();
    }
    OpBuilder b(&getContext());
    for (auto [run, runConstants] : llvm::zip(runs, constants)) {
      llvm::SmallPtrSet<Operation *, 16> inside(run.begin(), run.end());
      bool escapes = llvm::any_of(run, [&](Operation *op) {
        return llvm::any_of(op->getUsers(), [&](Operation *user) {
          Operation *top =
              run.front()->getBlock()->findAncestorOpInBlock(*user);
          return !top || !inside.contains(top);
        });
      });
      if (escapes) {
        continue;
      }
      for (Operation *constant : runConstants) {
        constant->moveBefore(run.front());
      }
      b.setInsertionPoint(run.front());
      Location loc = run.front()->getLoc();
      Value zero = arith::ConstantIndexOp::create(b, loc, 0);
      Value one = arith::ConstantIndexOp::create(b, loc, 1);
      auto parallel = scf::ParallelOp::create(b, loc, ValueRange{zero},
                                              ValueRange{one}, ValueRange{one});
      for (Operation *op : run) {
        op->moveBefore(parallel.getBody()->getTerminator());
      }
    }
  }
};

} // namespace
