//===- Passes.h - GPU code generation passes --------------------*- C++ -*-===//
//
// The passes of compiler/Codegen/GPU (Passes.td).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_CODEGEN_GPU_PASSES_H
#define KILN_COMPILER_CODEGEN_GPU_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace mlir::kiln {

/// With kiln-host-interface's `resident` option: whether argument `i` of
/// `func` is a device buffer its caller keeps (kiln.kind "param" or
/// "state", or a result updates it: a decoder's key/value cache), and
/// whether result `r` is returned in device memory (it updates an argument:
/// kiln.updates). The runtime's FunctionSpec records
/// the same (ArgSpec::onDevice, ResultSpec::onDevice) from these.
bool isResidentArgument(func::FuncOp func, unsigned i);
bool isResidentResult(func::FuncOp func, unsigned r);

#define GEN_PASS_DECL
#include "compiler/Codegen/GPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/Codegen/GPU/Passes.h.inc"

} // namespace mlir::kiln

#endif // KILN_COMPILER_CODEGEN_GPU_PASSES_H
