//===- Passes.h - CPU code generation passes --------------------*- C++ -*-===//
//
// The passes of compiler/Codegen/CPU (Passes.td) and what they share.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_CODEGEN_CPU_PASSES_H
#define KILN_COMPILER_CODEGEN_CPU_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir::kiln {

#define GEN_PASS_DECL
#include "compiler/Codegen/CPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/Codegen/CPU/Passes.h.inc"

namespace cpu {
/// Marks the tiled loops (kiln-block-for-caches, kiln-tile-and-peel) whose
/// iterations run on all cores (kiln-parallelize-loops).
constexpr llvm::StringLiteral kParallelAttr = "kiln.parallel";
/// Marks a linalg op whose output buffer holds this value (a TypedAttr)
/// before the op runs: kiln-defer-fills erased the fill, and
/// kiln-tile-and-peel fills each tile right before it is computed.
constexpr llvm::StringLiteral kFillAttr = "kiln.fill";
/// Marks the tiles kiln-tile-and-peel made with the sizes they were tiled
/// for (a DenseI64ArrayAttr): the ops kiln-vectorize-tiles vectorizes.
constexpr llvm::StringLiteral kTileAttr = "kiln.tile";
} // namespace cpu

} // namespace mlir::kiln

#endif // KILN_COMPILER_CODEGEN_CPU_PASSES_H
