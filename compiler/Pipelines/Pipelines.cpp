//===- Pipelines.cpp - Kiln's named compilation pipelines -----------------===//
//
// The pipelines are written as textual pass pipelines so that kiln-opt, the
// JIT and the AOT compiler run exactly the same passes.
//
//===----------------------------------------------------------------------===//

#include "compiler/Pipelines/Pipelines.h"

#include "compiler/Codegen/CPU/Passes.h"
#include "compiler/Codegen/CPU/TargetInfo.h"
#include "compiler/Codegen/Common/Passes.h"
#include "compiler/Codegen/GPU/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;

std::string kiln::kilnToLinalgPipeline(int64_t attentionBlock) {
  return "convert-kiln-to-linalg{attention-block=" +
         std::to_string(attentionBlock) +
         "},"
         "canonicalize,"
         "kiln-fuse-elementwise,"
         "canonicalize,"
         "cse,"
         "kiln-check-lowered{stage=linalg}";
}

std::string kiln::kilnToLLVMPipeline(const std::string &cpu) {
  return kilnToLinalgPipeline(kCpuAttentionBlock) + "," +
         linalgToLLVMPipeline(cpu);
}

/// How the register transposes of kiln-tile-and-vectorize's transpose tiles
/// (vector-width squares) become LLVM: the AVX-512-specific 16x16 shuffle
/// sequence where vectors hold 16 f32, else one 1-D shuffle per tile (the
/// default, extract/insert per element, is far slower for 8x8 tiles).
static std::string transposeLowering(const std::string &cpu) {
  llvm::Expected<kiln::cpu::TargetInfo> target = kiln::cpu::lookupTarget(cpu);
  if (!target) {
    llvm::consumeError(target.takeError()); // kiln-tile-and-vectorize says
    return "shuffle1d";
  }
  return target->vectorWidth() == 16 ? "shuffle16x16" : "shuffle1d";
}

std::string kiln::linalgToLLVMPipeline(const std::string &cpu) {
  return "func.func(kiln-clone-fills-per-use),"
         "kiln-mark-in-place-arguments,"
         "one-shot-bufferize{bufferize-function-boundaries "
         "function-boundary-type-conversion=identity-layout-map},"
         "kiln-drop-in-place-results,"
         "buffer-deallocation-pipeline,"
         "convert-bufferization-to-memref,"
         "func.func(kiln-defer-fills),"
         // Flash attention's loop over (batch, head, query block).
         "func.func(scf-forall-to-parallel),"
         "kiln-outline-kernels,"
         "func.func(kiln-deallocate-after-last-use),"
         "func.func(kiln-tile-and-vectorize{target-cpu=" +
         cpu +
         "}),"
         "canonicalize,"
         "cse,"
         "fold-memref-alias-ops,"
         "func.func(kiln-hoist-vector-transfers),"
         "func.func(kiln-parallelize-loops),"
         "func.func(convert-linalg-to-loops),"
         "func.func(lower-vector-mask),"
         "func.func(lower-vector-multi-reduction),"
         "convert-vector-to-scf{full-unroll},"
         "kiln-approximate-math,"
         "expand-strided-metadata,"
         "lower-affine,"
         "convert-scf-to-openmp,"
         "kiln-inline-alloca-scopes,"
         "convert-scf-to-cf,"
         "canonicalize,"
         "convert-vector-to-llvm{vector-contract-lowering=outerproduct "
         "vector-transpose-lowering=" +
         transposeLowering(cpu) +
         "},"
         "convert-math-to-llvm,"
         "convert-math-to-libm,"
         // Buffers come from Kiln's allocator (runtime/Allocator.h), which
         // reuses the blocks of earlier steps.
         "finalize-memref-to-llvm{use-generic-functions use-aligned-alloc},"
         "convert-arith-to-llvm,"
         "convert-index-to-llvm,"
         "convert-cf-to-llvm,"
         "convert-func-to-llvm,"
         "kiln-apply-noalias,"
         "convert-ub-to-llvm,"
         "convert-openmp-to-llvm,"
         "reconcile-unrealized-casts,"
         "kiln-check-lowered{stage=llvm}";
}

std::string kiln::cudaToolkitPath() {
  for (const char *variable : {"CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"}) {
    if (const char *path = std::getenv(variable); path && *path) {
      return path;
    }
  }
  return llvm::sys::fs::exists("/usr/local/cuda/nvvm/libdevice")
             ? "/usr/local/cuda"
             : "";
}

bool kiln::isGpuChip(llvm::StringRef chip) {
  unsigned version = 0;
  return chip.consume_front("sm_") && !chip.getAsInteger(10, version) &&
         version >= 50;
}

std::string kiln::kilnToGpuPipeline(const std::string &chip) {
  return kilnToLinalgPipeline() + "," + linalgToGpuPipeline(chip);
}

std::string kiln::linalgToGpuPipeline(const std::string &chip) {
  // Every distinct linalg op becomes one GPU kernel (kiln-outline-kernels
  // shares it between identical layers): its parallel loops are tiled by
  // 16 x 16 and mapped to blocks and threads (loops past the second stay
  // serial in each thread, as do reduction loops), its buffers live in
  // device memory, the host code runs on one stream, and the kernels are
  // compiled to PTX for `chip`. Math functions come from CUDA's libdevice,
  // linked when a toolkit is found. Arguments stay read-only and results
  // fresh (no in-place updates: the host code stages arguments through
  // device buffers); readSpec in compiler/Target/JIT/Lowering.cpp then
  // records no ResultSpec::updates for a GPU target.
  std::string toolkit = cudaToolkitPath();
  return "kiln-mark-in-place-arguments{in-place=false},"
         "one-shot-bufferize{bufferize-function-boundaries "
         "function-boundary-type-conversion=identity-layout-map},"
         "buffer-deallocation-pipeline,"
         "convert-bufferization-to-memref,"
         "kiln-outline-kernels,"
         "kiln-strided-copies-to-linalg,"
         "func.func(kiln-gpu-kernels),"
         "func.func(convert-linalg-to-parallel-loops),"
         "func.func(kiln-serial-nests-to-parallel),"
         "func.func(scf-parallel-loop-tiling{parallel-loop-tile-sizes=16,16 "
         "no-min-max-bounds=true}),"
         "func.func(gpu-map-parallel-loops),"
         "func.func(convert-parallel-loops-to-gpu),"
         "gpu-launch-sink-index-computations,"
         "gpu-kernel-outlining,"
         // The host side of each kernel goes back into its callers, so that
         // all launches of a function share one stream; the device side
         // stays shared.
         "inline{default-pipeline=},"
         "symbol-dce,"
         "kiln-device-buffers,"
         "kiln-host-interface,"
         "func.func(gpu-async-region),"
         "lower-affine,"
         "canonicalize,"
         "nvvm-attach-target{chip=" +
         chip +
         " O=3},"
         "gpu.module(kiln-approximate-math,convert-scf-to-cf,convert-gpu-to-"
         "nvvm,"
         "canonicalize,"
         "reconcile-unrealized-casts),"
         "expand-strided-metadata,"
         "lower-affine,"
         "convert-scf-to-cf,"
         "finalize-memref-to-llvm,"
         "convert-arith-to-llvm,"
         "convert-index-to-llvm,"
         "convert-cf-to-llvm,"
         "gpu-to-llvm,"
         "convert-func-to-llvm,"
         "reconcile-unrealized-casts,"
         "gpu-module-to-binary{format=isa" +
         (toolkit.empty() ? std::string() : " toolkit=" + toolkit) + "}";
}

LogicalResult kiln::addPipeline(OpPassManager &pm,
                                const std::string &pipeline) {
  std::string errors;
  llvm::raw_string_ostream os(errors);
  if (failed(parsePassPipeline(pipeline, pm, os))) {
    llvm::errs() << "kiln: invalid pass pipeline: " << errors << "\n";
    return failure();
  }
  return success();
}

namespace {
struct GpuPipelineOptions : public PassPipelineOptions<GpuPipelineOptions> {
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("The GPU architecture: sm_80, sm_90"),
                           llvm::cl::init("sm_90")};
};
struct CpuPipelineOptions : public PassPipelineOptions<CpuPipelineOptions> {
  Option<std::string> cpu{
      *this, "cpu",
      llvm::cl::desc("The CPU: host, or an LLVM CPU name (x86-64-v3, ...)"),
      llvm::cl::init("host")};
};
} // namespace

void kiln::registerKilnPipelines() {
  registerKilnCodegenCommonPasses();
  registerKilnCodegenCPUPasses();
  registerKilnCodegenGPUPasses();
  // Registered by hand (not PassPipelineRegistration) so that a chip that
  // is no NVIDIA architecture is an error, not a crash in nvvm-attach-target.
  registerPassPipeline(
      "kiln-to-gpu",
      "Lower kiln to GPU kernels compiled to PTX, with host code that "
      "launches them (NVIDIA)",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        GpuPipelineOptions options;
        if (failed(options.parseFromString(text))) {
          return failure();
        }
        if (!isGpuChip(options.chip)) {
          return errorHandler("kiln-to-gpu: chip '" + options.chip +
                              "' is not an NVIDIA GPU architecture (sm_80, "
                              "sm_90, ...)");
        }
        return addPipeline(pm, kilnToGpuPipeline(options.chip));
      },
      [](function_ref<void(const detail::PassOptions &)> optHandler) {
        optHandler(GpuPipelineOptions());
      });
  PassPipelineRegistration<>(
      "kiln-to-linalg", "Lower kiln to linalg on tensors",
      [](OpPassManager &pm) { (void)addPipeline(pm, kilnToLinalgPipeline()); });
  PassPipelineRegistration<CpuPipelineOptions>(
      "kiln-to-llvm", "Lower kiln to the LLVM dialect (CPU)",
      [](OpPassManager &pm, const CpuPipelineOptions &options) {
        (void)addPipeline(pm, kilnToLLVMPipeline(options.cpu));
      });
}
