//===- Passes.h - GPU code generation passes --------------------*- C++ -*-===//
//
// The passes of compiler/Codegen/GPU (Passes.td).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_CODEGEN_GPU_PASSES_H
#define KILN_COMPILER_CODEGEN_GPU_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir::kiln {

#define GEN_PASS_DECL
#include "compiler/Codegen/GPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/Codegen/GPU/Passes.h.inc"

} // namespace mlir::kiln

#endif // KILN_COMPILER_CODEGEN_GPU_PASSES_H
