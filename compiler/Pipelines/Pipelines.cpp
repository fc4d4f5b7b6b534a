//===- Pipelines.cpp - Kiln's named compilation pipelines -----------------===//
//
// The pipelines are written as textual pass pipelines so that kiln-opt, the
// JIT and the AOT compiler run exactly the same passes.
//
//===----------------------------------------------------------------------===//

#include "compiler/Pipelines/Pipelines.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

std::string kiln::kilnToLinalgPipeline() {
  return "convert-kiln-to-linalg,"
         "canonicalize,"
         "kiln-fuse-elementwise,"
         "canonicalize,"
         "cse,"
         "kiln-check-lowered{stage=linalg}";
}

std::string kiln::kilnToLLVMPipeline() {
  return kilnToLinalgPipeline() + "," + linalgToLLVMPipeline();
}

std::string kiln::linalgToLLVMPipeline() {
  return "one-shot-bufferize{bufferize-function-boundaries "
         "function-boundary-type-conversion=identity-layout-map},"
         "buffer-deallocation-pipeline,"
         "convert-bufferization-to-memref,"
         "kiln-outline-kernels,"
         "func.func(kiln-tile-and-vectorize),"
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
         "convert-vector-to-llvm{vector-contract-lowering=outerproduct},"
         "convert-math-to-llvm,"
         "convert-math-to-libm,"
         "finalize-memref-to-llvm,"
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

void kiln::registerKilnPipelines() {
  registerKilnPipelinesPasses();
  PassPipelineRegistration<>(
      "kiln-to-linalg", "Lower kiln to linalg on tensors",
      [](OpPassManager &pm) { (void)addPipeline(pm, kilnToLinalgPipeline()); });
  PassPipelineRegistration<>(
      "kiln-to-llvm", "Lower kiln to the LLVM dialect (CPU)",
      [](OpPassManager &pm) { (void)addPipeline(pm, kilnToLLVMPipeline()); });
}
