//===- HostInterface.cpp - GPU functions on host memory -------------------===//
//
// Implements kiln-host-interface.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/GPU/Passes.h"

#include "compiler/Codegen/Common/Views.h"
#include "dialects/Kiln/IR/KilnDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNHOSTINTERFACEPASS
#include "compiler/Codegen/GPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

bool mlir::kiln::isResidentArgument(func::FuncOp func, unsigned i) {
  auto kind = func.getArgAttrOfType<StringAttr>(i, kKindAttr);
  std::optional<ArgKind> role =
      kind ? symbolizeArgKind(kind.getValue()) : std::nullopt;
  if (role == ArgKind::param || role == ArgKind::state) {
    return true;
  }
  for (unsigned r = 0; r < func.getNumResults(); ++r) {
    auto updates = func.getResultAttrOfType<IntegerAttr>(r, kUpdatesAttr);
    if (updates && updates.getInt() == int64_t(i)) {
      return true; // a decoder's key/value cache
    }
  }
  return false;
}

bool mlir::kiln::isResidentResult(func::FuncOp func, unsigned r) {
  return func.getResultAttr(r, kUpdatesAttr) != nullptr;
}

namespace {

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

struct HostInterface
    : public mlir::kiln::impl::KilnHostInterfacePassBase<HostInterface> {
  using Base::Base;
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
    // Arguments: copied into device buffers, which the body then uses;
    // resident ones are device buffers already.
    llvm::SmallPtrSet<Operation *, 8> argumentBuffers;
    llvm::SmallPtrSet<Value, 8> residentArguments;
    for (BlockArgument arg : func.getArguments()) {
      auto type = dyn_cast<MemRefType>(arg.getType());
      if (!type) {
        continue;
      }
      if (!type.getLayout().isIdentity()) {
        return func.emitOpError("argument ")
               << arg.getArgNumber() << " is not a contiguous buffer";
      }
      if (resident &&
          mlir::kiln::isResidentArgument(func, arg.getArgNumber())) {
        residentArguments.insert(arg);
        continue;
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
    // Results: copied into new host buffers, or (resident ones) handed
    // over in device buffers of their own; the device buffers they came
    // from are freed unless handed over, as are the arguments' device
    // copies.
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
      llvm::SmallPtrSet<Value, 8> handedOver;
      for (auto [r, value] : llvm::enumerate(ret.getOperands())) {
        auto type = dyn_cast<MemRefType>(value.getType());
        if (!type) {
          results.push_back(value);
          continue;
        }
        Value root = mlir::kiln::viewRoot(value);
        auto alloc = root.getDefiningOp<gpu::AllocOp>();
        if (!alloc && !residentArguments.contains(root)) {
          ret.emitOpError("returns a buffer of unknown origin from GPU code");
          return WalkResult::interrupt();
        }
        bool freed = llvm::any_of(root.getUsers(), [](Operation *user) {
          return isa<gpu::DeallocOp>(user);
        });
        bool mine = alloc && !argumentBuffers.contains(alloc) && !freed;
        if (resident && mlir::kiln::isResidentResult(func, r)) {
          // The caller takes the buffer: the whole of one computed here and
          // returned once, else a copy.
          if (mine && value == root && type.getLayout().isIdentity() &&
              handedOver.insert(root).second) {
            owned.remove(root);
            results.push_back(value);
            continue;
          }
          auto copy = gpu::AllocOp::create(b, loc, type, Type(), ValueRange(),
                                           dynamicSizes(b, loc, value),
                                           ValueRange());
          gpu::MemcpyOp::create(b, loc, Type(), ValueRange(),
                                copy.getMemref(), value);
          results.push_back(copy.getMemref());
        } else {
          auto host = memref::AllocOp::create(b, loc, type,
                                              dynamicSizes(b, loc, value),
                                              b.getI64IntegerAttr(64));
          gpu::MemcpyOp::create(b, loc, Type(), ValueRange(), host, value);
          results.push_back(host);
        }
        if (mine && !handedOver.contains(root)) {
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
