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

/// The result attribute `kiln.updates = <i>`: the result replaces argument
/// i, and CPU code writes it there in place (kiln-training-step sets it;
/// kiln-mark-in-place-arguments and kiln-drop-in-place-results act on it).
constexpr llvm::StringLiteral kUpdatesAttrName = "kiln.updates";

/// The argument attribute `kiln.require = "positive"` (an i64 scalar >= 1)
/// or `"finite-nonnegative"` (an f32 tensor of finite values >= 0): a
/// condition the runtime checks before every call (kiln-training-step sets
/// it on `step` and `lr`).
constexpr llvm::StringLiteral kRequireAttrName = "kiln.require";

/// The function attribute `kiln.loss_tokens = {arg = i, ignore_index = n}`
/// of a data-parallel gradient step (kiln-training-step with split): its
/// loss is a mean over the tokens of argument i that are not n, and each
/// process's loss and gradients count as many times as it kept tokens.
constexpr llvm::StringLiteral kLossTokensAttrName = "kiln.loss_tokens";

} // namespace mlir::kiln

#endif // KILN_COMPILER_CODEGEN_COMMON_ATTRIBUTES_H
