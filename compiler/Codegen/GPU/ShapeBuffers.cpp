//===- ShapeBuffers.cpp - Host buffers that hold a shape ------------------===//
//
// Shape buffers stay on the host in GPU code (kiln-device-buffers,
// kiln-serial-nests-to-parallel).
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/GPU/ShapeBuffers.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

/// A small host buffer that only describes a shape: written by stores and
/// read by memref.reshape on the host, never by a kernel.
bool mlir::kiln::isShapeBuffer(Value buffer) {
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
bool mlir::kiln::onShapeBuffer(Operation *op) {
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
