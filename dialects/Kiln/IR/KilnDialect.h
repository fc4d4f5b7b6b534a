//===- KilnDialect.h - The kiln dialect --------------------------*- C++
//-*-===//
//
// Declares the kiln dialect and its attributes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECTS_KILN_IR_KILNDIALECT_H
#define KILN_DIALECTS_KILN_IR_KILNDIALECT_H

#include "base/BoundaryNames.h"

#include "mlir/IR/Dialect.h"

#include <optional>
#include <string>

#include "dialects/Kiln/IR/KilnOpsDialect.h.inc"
#include "dialects/Kiln/IR/KilnOpsEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Kiln/IR/KilnOpsAttributes.h.inc"

namespace mlir::kiln {

/// Registers how one-shot bufferization bufferizes the kernel ops
/// (kiln.flash_attention, kiln.flash_attention_grad); kiln::registerAllDialects
/// calls it.
void registerBufferizableOpInterfaceExternalModels(DialectRegistry &registry);

//===----------------------------------------------------------------------===//
// The function boundary: the attributes that tie compiled functions to the
// runtime. The dialect declares and verifies them (KilnDialect.cpp:
// verifyRegionArgAttribute, verifyRegionResultAttribute,
// verifyOperationAttribute); compiler/Target/Common/Lowering.cpp turns them
// into the runtime's FunctionSpec.
//===----------------------------------------------------------------------===//

/// Argument and result attribute: the name the runtime binds it by
/// (parameters by their store name, inputs by the caller's map). Printable
/// ASCII without spaces, at most kMaxBoundaryNameLength characters.
constexpr llvm::StringLiteral kNameAttr = "kiln.name";
constexpr size_t kMaxBoundaryNameLength = 256;

/// Argument attribute: what the runtime passes there (ArgKind's spelling).
constexpr llvm::StringLiteral kKindAttr = "kiln.kind";

/// The roles of a function argument, as kiln.kind spells them.
enum class ArgKind {
  input, ///< from the caller, by name (the default)
  param, ///< a parameter, from the parameter store by name
  state, ///< optimizer state, from the trainer by name
  lr,    ///< the learning rate of a training step (an f32 scalar tensor)
  step,  ///< the step number of a training step (an i64 scalar)
  seed,  ///< the dropout seed (an i64 scalar)
  /// The transpose of the 2-D parameter of the same kiln.name, made by the
  /// runtime (kiln-prepare-weights adds such arguments).
  prepared,
};
std::optional<ArgKind> symbolizeArgKind(llvm::StringRef text);
llvm::StringRef stringifyArgKind(ArgKind kind);

/// Result attribute `kiln.updates = <i>`: the result replaces argument i,
/// and CPU code writes it there in place (kiln-training-step sets it;
/// kiln-mark-in-place-arguments and kiln-drop-in-place-results act on it).
/// The argument is an f32 tensor of the result's type.
constexpr llvm::StringLiteral kUpdatesAttr = "kiln.updates";

/// Argument attribute `kiln.require = "positive"` (an i64 scalar >= 1) or
/// `"finite-nonnegative"` (an f32 tensor of finite values >= 0): a
/// condition the runtime checks before every call (kiln-training-step sets
/// it on the step and the learning rate).
constexpr llvm::StringLiteral kRequireAttr = "kiln.require";
constexpr llvm::StringLiteral kRequirePositive =
    ::kiln::boundary::kRequirePositive;
constexpr llvm::StringLiteral kRequireFiniteNonnegative =
    ::kiln::boundary::kRequireFiniteNonnegative;

/// Function attribute `kiln.loss_tokens = {arg = i, ignore_index = n,
/// reduction = "mean" | "sum"}` of a data-parallel gradient step
/// (kiln-training-step with split): its loss is a mean over the tokens of
/// integer tensor argument i that are not n, and each process's loss and
/// gradients count as many times as it kept tokens.
constexpr llvm::StringLiteral kLossTokensAttr = "kiln.loss_tokens";

/// The module attribute listing a model's parameters in declaration order:
/// an array of {name, shape, init, a, b} dictionaries (`init` is the
/// kiln::Init::Kind, `a` and `b` its arguments), written by the DSL and read
/// by the compilers, which initialize parameters from it.
constexpr llvm::StringLiteral kParametersAttr = "kiln.parameters";

/// The module attribute `kiln.target = #kiln.target<...>` (a TargetAttr):
/// the CPU (and GPU) code is generated for, resolved once (kiln-set-target).
constexpr llvm::StringLiteral kTargetAttr = "kiln.target";

/// The module attribute `kiln.gpu_cost = {fn = {launches, copies, flops,
/// bytes, kernel_ms, ms, device}, ...}`: kiln-gpu-cost-model's prediction of
/// each function's time on a GPU.
constexpr llvm::StringLiteral kGpuCostAttr = "kiln.gpu_cost";

/// Whether `gpu` names an NVIDIA GPU architecture ("sm_80", "sm_90", ...):
/// the one check of a GPU target's spelling.
bool isGpuChip(llvm::StringRef gpu);

/// The version NN of an NVIDIA GPU architecture "sm_NN" (80 for "sm_80"),
/// or 0 where `gpu` names none (isGpuChip).
unsigned gpuChipVersion(llvm::StringRef gpu);

/// The one check of a GPU contraction math mode (kiln-gpu-kernels' `math`,
/// kiln-to-gpu's, JitOptions::gpuMath, kiln-compile's --gpu-math) against
/// the architecture `gpu` it would run on: "fp32" runs anywhere, "tf32",
/// "tf32x3" and "bf16" (tensor cores, mma.sync) need sm_80 or newer. Empty when
/// `math` can run there, else why not (an unknown name, or an architecture too
/// old).
std::string gpuMathError(llvm::StringRef math, llvm::StringRef gpu);

/// The attribute `kiln.cpu_tiles = #kiln.cpu_tiles<...>` (a CpuTilesAttr) of
/// a linalg op: the tile sizes and thread loops kiln-select-cpu-tiles chose
/// for it (and its cache blocks and copies), applied by kiln-block-for-caches
/// and kiln-tile-and-peel.
constexpr llvm::StringLiteral kCpuTilesAttr = "kiln.cpu_tiles";

/// Why `name` cannot name a boundary argument or result (empty: it can).
std::string checkBoundaryName(llvm::StringRef name);

} // namespace mlir::kiln

#endif // KILN_DIALECTS_KILN_IR_KILNDIALECT_H
