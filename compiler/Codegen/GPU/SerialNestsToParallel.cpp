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
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kiln-serial-nests-to-parallel"

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

/// The allocation a memref is a view of (through views), or null when it is
/// not a fresh `memref.alloc` (an argument, which others may alias).
memref::AllocOp rootAllocation(Value memref) {
  while (true) {
    Operation *def = memref.getDefiningOp();
    if (auto alloc = dyn_cast_or_null<memref::AllocOp>(def)) {
      return alloc;
    }
    auto view = dyn_cast_or_null<ViewLikeOpInterface>(def);
    if (!view) {
      return nullptr;
    }
    memref = view.getViewSource();
  }
}

/// A serial nest whose inner loop's iterations are independent:
///
///   scf.for %n { <pure ops, loads>; scf.if %c { scf.for %d { body } } }
///
/// (the scf.if optional) where every buffer the nest writes is a fresh
/// allocation with the identity layout, accessed, loads and stores alike,
/// only inside the inner loop and only through the memref the stores use,
/// with %d as the last index. Distinct %d then never touch the same memory
/// (embedding_grad's scatter-add of rows into a table: each column its own),
/// and the nest becomes
///
///   scf.parallel %d { scf.for %n { <pure ops, loads>; scf.if %c { body } } }
///
/// Each column still sums in the outer loop's order: the results are those
/// of the serial nest, bit for bit. Returns whether it was rewritten.
bool parallelizeIndependentColumns(scf::ForOp outer) {
  if (outer.getNumResults() != 0) {
    return false;
  }
  Block *outerBody = outer.getBody();
  // The last op before the terminator is the inner loop or an scf.if that
  // holds only it.
  Operation *last = outerBody->getTerminator()->getPrevNode();
  if (!last) {
    return false;
  }
  auto guard = dyn_cast<scf::IfOp>(last);
  scf::ForOp inner = dyn_cast<scf::ForOp>(last);
  if (guard) {
    if (guard.getNumResults() != 0 || !guard.getElseRegion().empty() ||
        guard.thenBlock()->getOperations().size() != 2) {
      return false;
    }
    inner = dyn_cast<scf::ForOp>(guard.thenBlock()->front());
  }
  if (!inner || inner.getNumResults() != 0) {
    return false;
  }
  // The inner bounds are known before the outer loop starts.
  for (Value bound :
       {inner.getLowerBound(), inner.getUpperBound(), inner.getStep()}) {
    if (outer.getBodyRegion().isAncestor(bound.getParentRegion())) {
      return false;
    }
  }
  // The ops before it: pure, or loads; the inner body: pure, loads, stores.
  for (Operation &op : outerBody->without_terminator()) {
    if (&op == last) {
      break;
    }
    if (!isa<memref::LoadOp>(op) &&
        (op.getNumRegions() != 0 || !isMemoryEffectFree(&op))) {
      return false;
    }
  }
  for (Operation &op : inner.getBody()->without_terminator()) {
    if (!isa<memref::LoadOp, memref::StoreOp>(op) &&
        (op.getNumRegions() != 0 || !isMemoryEffectFree(&op))) {
      return false;
    }
  }
  // What the nest writes, and through which memref.
  llvm::SmallDenseMap<Operation *, Value> written; // root alloc -> memref
  for (auto store : inner.getBody()->getOps<memref::StoreOp>()) {
    memref::AllocOp root = rootAllocation(store.getMemRef());
    auto type = store.getMemRefType();
    if (!root || !type.getLayout().isIdentity() || type.getRank() == 0) {
      return false;
    }
    auto [it, added] = written.try_emplace(root, store.getMemRef());
    if (!added && it->second != store.getMemRef()) {
      return false;
    }
  }
  if (written.empty()) {
    return false;
  }
  Value column = inner.getInductionVar();
  WalkResult accesses = outer.getBody()->walk([&](Operation *op) {
    Value memref;
    ValueRange indices;
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      memref = load.getMemRef();
      indices = load.getIndices();
    } else if (auto store = dyn_cast<memref::StoreOp>(op)) {
      memref = store.getMemRef();
      indices = store.getIndices();
    } else {
      return WalkResult::advance();
    }
    memref::AllocOp root = rootAllocation(memref);
    if (!root || !written.count(root)) {
      return WalkResult::advance(); // read only in the nest
    }
    if (memref != written.lookup(root) || op->getParentOp() != inner ||
        indices.empty() || indices.back() != column) {
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (accesses.wasInterrupted()) {
    return false;
  }
  LLVM_DEBUG(llvm::dbgs() << "kiln-serial-nests-to-parallel: columns of "
                          << outer.getLoc() << " in parallel\n");
  // scf.parallel %d { scf.for %n { ...; scf.if %c { body } } }
  OpBuilder b(outer);
  Location loc = outer.getLoc();
  auto parallel = scf::ParallelOp::create(
      b, loc, ValueRange{inner.getLowerBound()},
      ValueRange{inner.getUpperBound()}, ValueRange{inner.getStep()});
  outer->moveBefore(parallel.getBody()->getTerminator());
  column.replaceAllUsesWith(parallel.getInductionVars()[0]);
  for (Operation &op :
       llvm::make_early_inc_range(inner.getBody()->without_terminator())) {
    op.moveBefore(inner);
  }
  inner->erase();
  return true;
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
    // Nests whose inner iterations are independent: parallel over them.
    SmallVector<scf::ForOp> nests;
    for (Block &block : getOperation().getBody()) {
      for (auto loop : block.getOps<scf::ForOp>()) {
        nests.push_back(loop);
      }
    }
    for (scf::ForOp loop : nests) {
      parallelizeIndependentColumns(loop);
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
