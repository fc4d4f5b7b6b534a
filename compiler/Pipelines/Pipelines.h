//===- Pipelines.h - Kiln's named compilation pipelines ---------*- C++ -*-===//
//
// kiln-to-linalg and kiln-to-llvm, usable from kiln-opt and from C++.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_PIPELINES_PIPELINES_H
#define KILN_COMPILER_PIPELINES_PIPELINES_H

#include "mlir/Pass/Pass.h"

#include <string>

namespace mlir {
class OpPassManager;

namespace kiln {

/// The block of query rows and keys of CPU code's attention (flash
/// attention: convert-kiln-to-linalg's `attention-block`).
constexpr int64_t kCpuAttentionBlock = 64;
/// The textual pass pipeline (without the `builtin.module(...)` wrapper)
/// from kiln to linalg on tensors; `attentionBlock` > 0 computes attention
/// block by block (CPU code), 0 materializes its scores (GPU code).
std::string kilnToLinalgPipeline(int64_t attentionBlock = 0);
/// The textual pass pipeline from linalg on tensors (the output of
/// kiln-to-linalg) to the LLVM dialect: bufferization, loops, LLVM, with
/// tiles sized for `cpu` ("host" or an LLVM CPU name).
std::string linalgToLLVMPipeline(const std::string &cpu = "host");
/// kiln-to-linalg followed by linalg-to-LLVM.
std::string kilnToLLVMPipeline(const std::string &cpu = "host");
/// linalg on tensors -> GPU kernels (PTX for `chip`, e.g. "sm_90") and host
/// code in the LLVM dialect that launches them through the mgpu* runtime
/// functions; public functions take and return host buffers.
std::string linalgToGpuPipeline(const std::string &chip);
/// kiln-to-linalg followed by linalg-to-GPU.
std::string kilnToGpuPipeline(const std::string &chip);
/// Whether `chip` names an NVIDIA architecture ("sm_80", "sm_90", ...).
bool isGpuChip(llvm::StringRef chip);
/// The CUDA toolkit whose libdevice GPU kernels link ($CUDA_HOME,
/// $CUDA_PATH, $CUDA_ROOT or /usr/local/cuda), or "" when there is none.
std::string cudaToolkitPath();

/// Adds a textual pipeline to `pm`; fails with a diagnostic if it does not
/// parse (every pass it names must be registered).
LogicalResult addPipeline(OpPassManager &pm, const std::string &pipeline);

/// Registers the kiln-to-linalg, kiln-to-llvm and kiln-to-gpu pipelines and
/// the code generation passes (compiler/Codegen).
void registerKilnPipelines();

} // namespace kiln
} // namespace mlir

#endif // KILN_COMPILER_PIPELINES_PIPELINES_H
