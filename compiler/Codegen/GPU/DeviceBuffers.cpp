//===- DeviceBuffers.cpp - Buffers of GPU code in device memory -----------===//
//
// Implements kiln-device-buffers.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/GPU/Passes.h"

#include "compiler/Codegen/GPU/ShapeBuffers.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNDEVICEBUFFERSPASS
#include "compiler/Codegen/GPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

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
      if (kiln::onShapeBuffer(op)) {
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

} // namespace
