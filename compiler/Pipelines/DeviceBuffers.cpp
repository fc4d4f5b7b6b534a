//===- DeviceBuffers.cpp - Buffers of GPU code in device memory -----------===//
//
// Implements kiln-device-buffers.
//
//===----------------------------------------------------------------------===//

#include "compiler/Pipelines/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNDEVICEBUFFERSPASS
#include "compiler/Pipelines/Passes.h.inc"
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
              memref::AllocaOp, memref::GetGlobalOp>(op)) {
        ops.push_back(op);
      }
      return WalkResult::advance();
    });
    IRRewriter rewriter(&getContext());
    for (Operation *op : ops) {
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
      } else {
        // Host memory that kernels would read: not supported yet.
        op->emitOpError("is host memory, which GPU kernels cannot read");
        return signalPassFailure();
      }
    }
  }
};

} // namespace
