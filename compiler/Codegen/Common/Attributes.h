//===- Attributes.h - Attributes code generation passes share ---*- C++ -*-===//

#ifndef KILN_COMPILER_CODEGEN_COMMON_ATTRIBUTES_H
#define KILN_COMPILER_CODEGEN_COMMON_ATTRIBUTES_H

#include "llvm/ADT/StringRef.h"

namespace mlir::kiln {

/// The argument attribute that marks a kernel's buffer argument as
/// overlapping no other argument written by the kernel (see
/// kiln-outline-kernels).
constexpr llvm::StringLiteral kNoAliasArgAttr = "kiln.noalias";

/// The function attribute of a kernel (kiln-outline-kernels) that lists the
/// positions, in its LLVM signature, of the aligned pointers of its noalias
/// buffer arguments: func-to-llvm drops `llvm.noalias` on memref arguments,
/// so kiln-apply-noalias puts it on these after the conversion.
constexpr llvm::StringLiteral kNoAliasArgsAttr = "kiln.noalias_args";

/// Marks a kernel that runs inside a parallel loop (kiln-outline-kernels):
/// its own loops stay serial (kiln-parallelize-loops).
constexpr llvm::StringLiteral kSerialKernelAttr = "kiln.serial";

} // namespace mlir::kiln

#endif // KILN_COMPILER_CODEGEN_COMMON_ATTRIBUTES_H
