//===- Lowering.h - Kiln IR to the LLVM dialect, for JIT and AOT -*- C++
//-*-===//
//
// What the JIT and the ahead-of-time compiler share: reading the functions'
// signatures and input contracts and the model's parameters off kiln IR,
// running the pipelines down to the LLVM dialect, and the target machine.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_COMMON_LOWERING_H
#define KILN_COMPILER_TARGET_COMMON_LOWERING_H

#include "dialects/Kiln/IR/KilnDialect.h"
#include "runtime/Function.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include "llvm/Support/CodeGen.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace llvm {
class Module;
class TargetMachine;
} // namespace llvm

namespace kiln {

struct LoweringOptions {
  /// A textual pass pipeline run on the kiln module before it is lowered
  /// (e.g. "kiln-training-step{function=loss optimizer=adamw}").
  std::string prePipeline;
  /// When non-empty, the IR of every stage is written there as
  /// <stem>.kiln.mlir, <stem>.linalg.mlir, <stem>.llvm.mlir and <stem>.ll.
  std::string dumpDirectory;
  std::string dumpStem = "module";
  /// The file the source was read from, if any: a dump that would
  /// overwrite it is refused before anything is compiled or written.
  std::string sourcePath;
  /// The public functions to compile (after prePipeline); empty: all.
  std::vector<std::string> functions;
  /// When non-empty, the NVIDIA architecture ("sm_80", "sm_90") to compile
  /// GPU kernels for, with host code that launches them (kiln-to-gpu)
  /// instead of CPU code. The functions keep their signatures: they take
  /// and return host buffers.
  std::string gpuChip;
  /// With gpuChip: parameters, optimizer state and decoder caches are read
  /// from device memory, and the results that update them come back there
  /// (ArgSpec::onDevice, ResultSpec::onDevice), so that they stay on the
  /// GPU across calls. Off, every argument and result is in host memory.
  bool gpuResidentState = false;
  /// With gpuChip: the contractions' arithmetic, "fp32" (FMA on the CUDA
  /// cores: results as the CPU's to fp32 rounding), "tf32" (tensor cores,
  /// operands rounded to TF32), "tf32x3" (three TF32 products, about
  /// fp32's accuracy) or "bf16" (tensor cores, operands rounded to bf16);
  /// the last three on sm_80 and newer. Anything else, or
  /// tensor cores without a GPU or on an older one, is a kiln::Error before
  /// anything is compiled.
  std::string gpuMath = "fp32";
  /// With gpuChip, when not empty: predict each function's time on
  /// `gpuCostDevice` (h200, h100, a100) at these argument sizes
  /// ("idx=8x256,targets=8x256": kiln.name or number = sizes), without a
  /// GPU (kiln-gpu-cost-model); the prediction is the lowered module's
  /// `kiln.gpu_cost` (gpuCostPredictions reads it).
  std::string gpuCostSizes;
  std::string gpuCostDevice = "h200";
  /// With gpuCostSizes: also print each kernel's prediction (standard
  /// output, the most expensive first).
  bool gpuCostReport = false;
  /// With gpuChip: the kernels compiled for the host CPU instead of PTX, for
  /// a CUDA driver that emulates the GPU on the host (the JIT sets it when
  /// the loaded driver says it runs such kernels:
  /// kiln::cuda::runsHostKernels).
  bool gpuHostKernels = false;
  /// The CPU the code is generated for (and, with gpuChip, the host code):
  /// "host" or an LLVM CPU name ("x86-64-v3", "znver4"), resolved once into
  /// the module's `kiln.target`, which every pass and the target machine
  /// read. An unknown name is a kiln::Error before anything is compiled.
  std::string cpu = "host";
  /// CPU target: products read the 2-D parameters they take transposed
  /// from prepared copies, arguments appended to the functions that do
  /// (kiln-prepare-weights; ArgSpec::Role::prepared).
  bool prepareWeights = false;
  /// CPU target: "fp32" (every product in f32), or "bf16" (matrix products
  /// of bf16 values with f32 sums: kiln-bf16-products; the CPU must have
  /// AVX512-BF16). Anything else, bf16 on a CPU without it or with gpuChip,
  /// is a kiln::Error before anything is compiled.
  std::string precision = "fp32";
  /// With precision "bf16": kiln-bf16-products' kernels (auto, dot, amx,
  /// amx-emulated: cpu::bf16Kernels checks them against the target). A
  /// name other than auto with fp32 is a kiln::Error.
  std::string bf16Kernels = "auto";
};

struct LoweredModule {
  LoweredModule() = default;
  LoweredModule(LoweredModule &&) = default;
  /// Destroys the old module before the context it lives in.
  LoweredModule &operator=(LoweredModule &&other) {
    module = {};
    context = std::move(other.context);
    module = std::move(other.module);
    functions = std::move(other.functions);
    params = std::move(other.params);
    seconds = other.seconds;
    return *this;
  }

  std::unique_ptr<mlir::MLIRContext> context;
  mlir::OwningOpRef<mlir::ModuleOp> module; ///< In the LLVM dialect.
  std::vector<FunctionSpec> functions;      ///< The public functions.
  std::vector<ParamSpec> params;
  double seconds = 0; ///< Time in the MLIR pipelines.
};

/// Lowers a module of kiln functions to the LLVM dialect (the module is
/// cloned into a context of its own, not modified). Throws kiln::Error with
/// the compiler's diagnostics.
LoweredModule lowerToLLVMDialect(mlir::ModuleOp source,
                                 const LoweringOptions &options);
/// The same from kiln IR text; `what` names the text in errors.
LoweredModule lowerSourceToLLVMDialect(const std::string &source,
                                       const std::string &what,
                                       const LoweringOptions &options);

/// kiln-gpu-cost-model's prediction of one function's time on a GPU
/// (LoweringOptions::gpuCostSizes).
struct GpuCostPrediction {
  int64_t launches = 0, copies = 0;
  double flops = 0, bytes = 0;
  double kernelMilliseconds = 0, milliseconds = 0;
};
/// The predictions of a module lowered with gpuCostSizes, by function name
/// (none without).
std::map<std::string, GpuCostPrediction>
gpuCostPredictions(const LoweredModule &lowered);

/// LLVM's code generation level for O`optLevel` (0: none, 1: less, 2:
/// default, 3 and above: aggressive).
llvm::CodeGenOptLevel codeGenOptLevel(unsigned optLevel);

/// A target machine for `cpu`, the target a lowered module names (its
/// `kiln.target`, mlir::kiln::cpu::getTarget), with FMA contraction,
/// generating code at codeGenOptLevel(optLevel). Throws kiln::Error when
/// `cpu` is null.
std::unique_ptr<llvm::TargetMachine>
createTargetMachine(mlir::kiln::TargetAttr cpu, unsigned optLevel);

/// Writes `print`'s output to <dumpDirectory>/<dumpStem>.<suffix> when
/// dumping is on; `suffix` is one of those LoweringOptions::dumpDirectory
/// lists.
void dumpStage(const LoweringOptions &options, const std::string &suffix,
               const std::function<void(llvm::raw_ostream &)> &print);

/// LLVM's O`optLevel` pipeline for `machine`, run on `module`.
void optimizeModule(llvm::Module &module, llvm::TargetMachine &machine,
                    unsigned optLevel);

} // namespace kiln

#endif // KILN_COMPILER_TARGET_COMMON_LOWERING_H
