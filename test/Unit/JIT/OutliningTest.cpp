//===- OutliningTest.cpp - Compile work does not grow with depth ----------===//
//
// kiln-outline-kernels gives identical layers the same kernels, so a deeper
// model adds calls, not code: the number of kernel functions LLVM has to
// optimize is the same for 2 and 6 layers, with and without a training step.
//
//===----------------------------------------------------------------------===//

#include "compiler/DSL/DSL.h"
#include "compiler/DSL/Models.h"
#include "compiler/InitAll.h"
#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Target/Common/Lowering.h"
#include "compiler/Target/JIT/Training.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

/// A small GPT's loss graph with `layers` blocks.
void addGptLoss(dsl::Module &module, int64_t layers) {
  dsl::models::GptConfig config;
  config.vocabSize = 17;
  config.dModel = 16;
  config.numHeads = 2;
  config.numLayers = layers;
  config.dFF = 32;
  config.maxSeqLen = 8;
  dsl::models::addGptLoss(module, config);
}

/// Kernel functions in the lowered module of a GPT with `layers` blocks.
int64_t kernels(int64_t layers, bool training) {
  dsl::Module module;
  addGptLoss(module, layers);
  LoweringOptions options;
  if (training) {
    options.prePipeline = trainingStepPipeline("loss", {});
  }
  LoweredModule lowered = lowerToLLVMDialect(module.op(), options);
  int64_t count = 0;
  lowered.module->walk([&](mlir::LLVM::LLVMFuncOp func) {
    count += func.getName().starts_with("kiln_kernel_");
  });
  return count;
}

/// GPU kernels (gpu.binary ops) of a GPT loss with `layers` blocks, through
/// kiln-to-gpu. (Training steps do not lower to the GPU yet: the
/// scatter-add of embedding gradients reads token ids on the host, which
/// kiln-device-buffers refuses.)
int64_t gpuKernels(int64_t layers) {
  dsl::Module module;
  addGptLoss(module, layers);
  registerAllPasses();
  mlir::OwningOpRef<mlir::ModuleOp> copy = module.op().clone();
  mlir::PassManager pm(copy->getContext());
  mlir::kiln::buildKilnToGpuPipeline(pm, "sm_90");
  EXPECT_TRUE(succeeded(pm.run(*copy)));
  int64_t count = 0;
  copy->walk([&](mlir::gpu::BinaryOp) { ++count; });
  return count;
}

} // namespace

TEST(Outlining, GpuKernelCountDoesNotGrowWithDepth) {
  int64_t two = gpuKernels(2);
  EXPECT_GT(two, 20);
  EXPECT_EQ(gpuKernels(6), two);
}

TEST(Outlining, KernelCountDoesNotGrowWithDepth) {
  int64_t two = kernels(2, false);
  EXPECT_GT(two, 10);
  EXPECT_EQ(kernels(6, false), two);
}

TEST(Outlining, TrainingStepKernelCountDoesNotGrowWithDepth) {
  int64_t two = kernels(2, true);
  EXPECT_GT(two, 20);
  EXPECT_EQ(kernels(6, true), two);
}
