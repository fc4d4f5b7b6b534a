//===- ShapeBuffers.h - Host buffers that hold a shape ----------*- C++ -*-===//
//
// memref.reshape reads its shape from a buffer on the host: such buffers
// stay host memory in GPU code, and the stores that fill them host code.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_CODEGEN_GPU_SHAPEBUFFERS_H
#define KILN_COMPILER_CODEGEN_GPU_SHAPEBUFFERS_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

namespace mlir::kiln {

/// Whether `buffer` is a small host buffer that only describes a shape:
/// written by stores and read by memref.reshape on the host, never by a
/// kernel.
bool isShapeBuffer(Value buffer);

/// Whether `op` (a store, dealloc or alloc) reads or writes a shape buffer
/// only.
bool onShapeBuffer(Operation *op);

} // namespace mlir::kiln

#endif // KILN_COMPILER_CODEGEN_GPU_SHAPEBUFFERS_H
