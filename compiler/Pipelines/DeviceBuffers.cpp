//===- DeviceBuffers.cpp - Buffers of GPU code in device memory -----------===//
//
// Implements kiln-device-buffers.
//
//===----------------------------------------------------------------------===//

#include "compiler/Pipelines/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNDEVICEBUFFERSPASS
#define GEN_PASS_DEF_KILNHOSTINTERFACEPASS
#define GEN_PASS_DEF_KILNSERIALNESTSTOPARALLELPASS
#define GEN_PASS_DEF_KILNSTRIDEDCOPIESTOLINALGPASS
#include "compiler/Pipelines/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

/// A small host buffer that only describes a shape: written by stores and
/// read by memref.reshape on the host, never by a kernel.
bool isShapeBuffer(Value buffer) {
  bool reshaped = llvm::any_of(buffer.getUsers(), [&](Operation *user) {
    auto reshape = dyn_cast<memref::ReshapeOp>(user);
    return reshape && reshape.getShape() == buffer;
  });
  return reshaped && llvm::all_of(buffer.getUsers(), [&](Operation *user) {
           if (auto store = dyn_cast<memref::StoreOp>(user)) {
             return store.getMemRef() == buffer;
           }
           if (auto reshape = dyn_cast<memref::ReshapeOp>(user)) {
             return reshape.getShape() == buffer;
           }
           return isa<memref::DeallocOp>(user);
         });
}

/// Whether `op` reads or writes a shape buffer only.
bool onShapeBuffer(Operation *op) {
  if (auto store = dyn_cast<memref::StoreOp>(op)) {
    return isShapeBuffer(store.getMemRef());
  }
  if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
    return isShapeBuffer(dealloc.getMemref());
  }
  if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
    return isShapeBuffer(alloc.getResult());
  }
  return false;
}

struct DeviceBuffers
    : public kiln::impl::KilnDeviceBuffersPassBase<DeviceBuffers> {
  void runOnOperation() override {
    // The host code's memory ops (kernels are already device code).
    SmallVector<Operation *> ops;
    getOperation().walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isa<gpu::GPUModuleOp>(op)) {
        return WalkResult::skip();
      }
      if (isa<memref::AllocOp, memref::DeallocOp, memref::CopyOp,
              memref::AllocaOp, memref::GetGlobalOp, memref::LoadOp,
              memref::StoreOp>(op)) {
        ops.push_back(op);
      }
      return WalkResult::advance();
    });
    IRRewriter rewriter(&getContext());
    for (Operation *op : ops) {
      if (onShapeBuffer(op)) {
        continue; // stays on the host, for memref.reshape
      }
      rewriter.setInsertionPoint(op);
      if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
        rewriter.replaceOp(
            alloc,
            gpu::AllocOp::create(rewriter, alloc.getLoc(), alloc.getType(),
                                 Type(), ValueRange(), alloc.getDynamicSizes(),
                                 alloc.getSymbolOperands())
                .getMemref());
      } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
        gpu::DeallocOp::create(rewriter, dealloc.getLoc(), Type(), ValueRange(),
                               dealloc.getMemref());
        rewriter.eraseOp(dealloc);
      } else if (auto copy = dyn_cast<memref::CopyOp>(op)) {
        gpu::MemcpyOp::create(rewriter, copy.getLoc(), Type(), ValueRange(),
                              copy.getTarget(), copy.getSource());
        rewriter.eraseOp(copy);
      } else if (auto global = dyn_cast<memref::GetGlobalOp>(op)) {
        // A constant: copied into device memory, freed on return.
        auto type = cast<MemRefType>(global.getType());
        Location loc = global.getLoc();
        rewriter.setInsertionPointAfter(global);
        Value device =
            gpu::AllocOp::create(rewriter, loc, type, Type(), ValueRange(),
                                 ValueRange(), ValueRange())
                .getMemref();
        auto copy = gpu::MemcpyOp::create(rewriter, loc, Type(), ValueRange(),
                                          device, global);
        global.getResult().replaceAllUsesExcept(device, copy);
        global->getParentOfType<func::FuncOp>().walk([&](func::ReturnOp ret) {
          rewriter.setInsertionPoint(ret);
          gpu::DeallocOp::create(rewriter, loc, Type(), ValueRange(), device);
        });
      } else if (isa<memref::LoadOp, memref::StoreOp>(op)) {
        // Every access must be in a kernel by now.
        op->emitOpError("would access device memory from the host");
        return signalPassFailure();
      } else {
        // A stack buffer in host code, which kernels would read.
        op->emitOpError("is host memory, which GPU kernels cannot read");
        return signalPassFailure();
      }
    }
  }
};

/// The sizes of `buffer`'s dynamic dimensions.
SmallVector<Value> dynamicSizes(OpBuilder &b, Location loc, Value buffer) {
  SmallVector<Value> sizes;
  auto type = cast<MemRefType>(buffer.getType());
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (type.isDynamicDim(d)) {
      sizes.push_back(memref::DimOp::create(b, loc, buffer, d));
    }
  }
  return sizes;
}

/// The buffer `value` is a view of (itself when it is none).
Value viewRoot(Value value) {
  while (auto view = value.getDefiningOp<ViewLikeOpInterface>()) {
    value = view.getViewSource();
  }
  return value;
}

struct HostInterface
    : public kiln::impl::KilnHostInterfacePassBase<HostInterface> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal() || func.isPrivate()) {
        continue;
      }
      if (failed(convert(func))) {
        return signalPassFailure();
      }
    }
  }

  LogicalResult convert(func::FuncOp func) {
    OpBuilder b(func.getBody());
    // Arguments: copied into device buffers, which the body then uses.
    llvm::SmallPtrSet<Operation *, 8> argumentBuffers;
    for (BlockArgument arg : func.getArguments()) {
      auto type = dyn_cast<MemRefType>(arg.getType());
      if (!type) {
        continue;
      }
      if (!type.getLayout().isIdentity()) {
        return func.emitOpError("argument ")
               << arg.getArgNumber() << " is not a contiguous buffer";
      }
      Location loc = arg.getLoc();
      llvm::SmallPtrSet<Operation *, 4> keep;
      SmallVector<Value> sizes = dynamicSizes(b, loc, arg);
      for (Value size : sizes) {
        keep.insert(size.getDefiningOp());
      }
      auto device = gpu::AllocOp::create(b, loc, type, Type(), ValueRange(),
                                         sizes, ValueRange());
      auto copy = gpu::MemcpyOp::create(b, loc, Type(), ValueRange(),
                                        device.getMemref(), arg);
      keep.insert(device);
      keep.insert(copy);
      arg.replaceUsesWithIf(device.getMemref(), [&](OpOperand &use) {
        return !keep.contains(use.getOwner());
      });
      argumentBuffers.insert(device);
    }
    // Results: copied into new host buffers; the device buffers they came
    // from are freed, as are the arguments' device copies.
    WalkResult walk = func.walk([&](func::ReturnOp ret) {
      // Before the buffers freed on return (a constant's device copy).
      Operation *at = ret;
      while (isa_and_nonnull<gpu::DeallocOp>(at->getPrevNode())) {
        at = at->getPrevNode();
      }
      b.setInsertionPoint(at);
      Location loc = ret.getLoc();
      SmallVector<Value> results;
      llvm::SetVector<Value> owned;
      for (Value value : ret.getOperands()) {
        auto type = dyn_cast<MemRefType>(value.getType());
        if (!type) {
          results.push_back(value);
          continue;
        }
        auto host = memref::AllocOp::create(
            b, loc, type, dynamicSizes(b, loc, value), b.getI64IntegerAttr(64));
        gpu::MemcpyOp::create(b, loc, Type(), ValueRange(), host, value);
        results.push_back(host);
        Value root = viewRoot(value);
        auto alloc = root.getDefiningOp<gpu::AllocOp>();
        if (!alloc) {
          ret.emitOpError("returns a buffer of unknown origin from GPU code");
          return WalkResult::interrupt();
        }
        bool freed = llvm::any_of(root.getUsers(), [](Operation *user) {
          return isa<gpu::DeallocOp>(user);
        });
        if (!argumentBuffers.contains(alloc) && !freed) {
          owned.insert(root);
        }
      }
      for (Value buffer : owned) {
        gpu::DeallocOp::create(b, loc, Type(), ValueRange(), buffer);
      }
      for (Operation *buffer : argumentBuffers) {
        gpu::DeallocOp::create(b, loc, Type(), ValueRange(),
                               buffer->getResult(0));
      }
      ret->setOperands(results);
      return WalkResult::advance();
    });
    return failure(walk.wasInterrupted());
  }
};

} // namespace

//===----------------------------------------------------------------------===//
// kiln-strided-copies-to-linalg, kiln-serial-nests-to-parallel
//===----------------------------------------------------------------------===//

namespace {

struct StridedCopiesToLinalg
    : public kiln::impl::KilnStridedCopiesToLinalgPassBase<
          StridedCopiesToLinalg> {
  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation().walk([&](memref::CopyOp copy) {
      auto source = cast<MemRefType>(copy.getSource().getType());
      auto target = cast<MemRefType>(copy.getTarget().getType());
      if (!source.getLayout().isIdentity() ||
          !target.getLayout().isIdentity()) {
        copies.push_back(copy);
      }
    });
    IRRewriter rewriter(&getContext());
    for (memref::CopyOp copy : copies) {
      rewriter.setInsertionPoint(copy);
      linalg::CopyOp::create(rewriter, copy.getLoc(), copy.getSource(),
                             copy.getTarget());
      rewriter.eraseOp(copy);
    }
  }
};

/// Does `op` read or write memory other than by allocating, freeing,
/// copying whole buffers or taking views?
bool touchesMemory(Operation *op) {
  if (onShapeBuffer(op)) {
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
