//===- Pipelines.h - Kiln's named compilation pipelines ---------*- C++ -*-===//
//
// kiln-to-linalg, kiln-to-llvm (CPU) and kiln-to-gpu (NVIDIA), built in C++
// from typed pass constructors, usable from kiln-opt and from C++.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_PIPELINES_PIPELINES_H
#define KILN_COMPILER_PIPELINES_PIPELINES_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace mlir {
class OpPassManager;

namespace kiln {

/// The block of query rows and keys of CPU code's attention (flash
/// attention: convert-kiln-to-linalg's `attention-block`).
constexpr int64_t kCpuAttentionBlock = 64;

/// Adds the passes from kiln to linalg on tensors to `pm`, ending with
/// kiln-check-lowered{stage=linalg}. Attention: `attentionKernel` (GPU code)
/// makes it the kernel ops kiln.flash_attention and
/// kiln.flash_attention_grad where heads are at most 128 wide; otherwise
/// `attentionBlock` > 0 computes it block by block (flash attention, with
/// key blocks that long: the CPU's), 0 materializes its scores.
/// `prepareWeights` (CPU): products read the 2-D parameters they take
/// transposed from prepared copies passed as arguments
/// (kiln-prepare-weights). `roundingProducts` (the CPU's bf16 precision):
/// products read f32 values where their bf16 operands are those values
/// rounded (kiln-widen-bf16{rounding-products}).
void buildKilnToLinalgPipeline(OpPassManager &pm, int64_t attentionBlock = 0,
                               bool prepareWeights = false,
                               bool attentionKernel = false,
                               bool roundingProducts = false);
/// Adds the passes from linalg on tensors (the output of kiln-to-linalg) to
/// the LLVM dialect: bufferization, loops, LLVM, with tiles sized for the
/// module's `kiln.target` (kiln-set-target; a module without one fails);
/// ends with kiln-check-lowered{stage=llvm}. `precision` "bf16": matrix
/// products of bf16 values with f32 sums (kiln-bf16-products; the target
/// must have AVX512-BF16: cpu::cpuPrecisionError), with `bf16Kernels`
/// (kiln-bf16-products{kernels}); "fp32": all f32.
void buildLinalgToLLVMPipeline(OpPassManager &pm,
                               llvm::StringRef precision = "fp32",
                               llvm::StringRef bf16Kernels = "auto");
/// kiln-set-target{cpu} ("host" or an LLVM CPU name), kiln-to-linalg
/// (attention by blocks), then linalg-to-LLVM: the kiln-to-llvm pipeline.
void buildKilnToLLVMPipeline(OpPassManager &pm, const std::string &cpu = "host",
                             bool prepareWeights = false,
                             llvm::StringRef precision = "fp32",
                             llvm::StringRef bf16Kernels = "auto");
/// What the GPU pipeline is asked for besides the target.
struct GpuPipelineOptions {
  /// Parameters and optimizer state, and the results that update them, are
  /// device buffers (kiln-host-interface{resident}).
  bool resident = false;
  /// The contractions' arithmetic (kiln-gpu-kernels{math}: "fp32", or
  /// "tf32", "tf32x3" or "bf16" on sm_80 and newer; checked by
  /// gpuMathError).
  std::string math = "fp32";
  /// Non-empty: kiln-gpu-cost-model{sizes} predicts each function's time on
  /// `costDevice` at these argument sizes ("idx=8x256,..."), into the
  /// module's kiln.gpu_cost; with `costReport`, also printed per launch.
  std::string costSizes;
  std::string costDevice = "h200";
  bool costReport = false;
  /// The kernels compiled for the host CPU (kiln-gpu-modules-to-host), for
  /// a driver that emulates a GPU on it (test/Unit/Cuda's fake driver),
  /// instead of PTX.
  bool hostKernels = false;
  /// Attention as the flash kernels (kiln.flash_attention, built by
  /// kiln-gpu-kernels), not whole [B, H, Tq, Tk] scores: read by
  /// buildKilnToGpuPipeline (the kiln-to-linalg stage).
  bool attentionKernel = true;
};

/// Adds the passes from linalg on tensors to GPU kernels (PTX for the
/// architecture the module's `kiln.target` names: kiln-set-target{gpu}; a
/// module without one fails) and host code in the LLVM dialect that
/// launches them through the mgpu* runtime functions; public
/// functions take and return host buffers, but with `resident` their
/// parameters and optimizer state, and the results that update them, are
/// device buffers (kiln-host-interface{resident}). Ends with
/// kiln-check-lowered{stage=llvm}.
void buildLinalgToGpuPipeline(OpPassManager &pm,
                              const GpuPipelineOptions &options = {});
/// kiln-set-target{gpu, cpu} (`gpu` an NVIDIA architecture, "sm_90", which
/// must satisfy isGpuChip; `cpu` the host code's), kiln-to-linalg, then
/// linalg-to-GPU: the kiln-to-gpu pipeline.
void buildKilnToGpuPipeline(OpPassManager &pm, const std::string &gpu,
                            const std::string &cpu = "host",
                            const GpuPipelineOptions &options = {});
/// The CUDA toolkit whose libdevice GPU kernels link ($CUDA_HOME,
/// $CUDA_PATH, $CUDA_ROOT or /usr/local/cuda), or "" when there is none.
std::string cudaToolkitPath();

/// Adds a pipeline given as text (a user's pre-pipeline, such as
/// kiln-training-step's) to `pm`; fails with a diagnostic if it does not
/// parse (every pass it names must be registered).
LogicalResult addPipeline(OpPassManager &pm, const std::string &pipeline);

/// Registers the kiln-to-linalg, kiln-to-llvm and kiln-to-gpu pipelines and
/// the code generation passes (compiler/Codegen).
void registerKilnPipelines();

} // namespace kiln
} // namespace mlir

#endif // KILN_COMPILER_PIPELINES_PIPELINES_H
