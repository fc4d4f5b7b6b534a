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
#include "compiler/Target/JIT/Jit.h"
#include "compiler/Target/JIT/Training.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

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
/// kiln-to-gpu.
int64_t gpuKernels(int64_t layers) {
  dsl::Module module;
  addGptLoss(module, layers);
  registerAllPasses();
  mlir::OwningOpRef<mlir::ModuleOp> copy = module.op().clone();
  // The DSL's context knows only the dialects it builds IR of; the
  // pipeline needs every dialect and its interfaces.
  mlir::DialectRegistry registry;
  registerAllDialects(registry);
  copy->getContext()->appendDialectRegistry(registry);
  mlir::PassManager pm(copy->getContext());
  mlir::kiln::buildKilnToGpuPipeline(pm, "sm_90");
  EXPECT_TRUE(succeeded(pm.run(*copy)));
  int64_t count = 0;
  copy->walk([&](mlir::gpu::BinaryOp) { ++count; });
  return count;
}

} // namespace

TEST(Outlining, GpuKernelCountDoesNotGrowWithDepth) {
  // 20 kernels at 2 layers (attention forward as one of them).
  int64_t two = gpuKernels(2);
  EXPECT_GT(two, 15);
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

// What stays after outlining is glue (descriptors, allocations, calls),
// marked optnone, which LLVM's pipeline runs through anyway (the upstream
// helper registers no optnone instrumentation). The vectorizers must skip it
// (noimplicitfloat): the SLP vectorizer, quadratic in a block's length, took
// 200 of the 222 s an encoder-decoder's GPU training step took to compile.
// Kernels keep every optimization.
TEST(Outlining, TheVectorizersSkipTheGlue) {
  dsl::Module module;
  addGptLoss(module, 2);
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("kiln-glue-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  JitOptions options;
  options.dumpDirectory = dir.string();
  options.prePipeline = trainingStepPipeline("loss", {});
  JitModule::compile(module.op(), options);
  std::ifstream in(dir / "module.ll");
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove_all(dir);
  std::string ll = text.str();
  ASSERT_FALSE(ll.empty());
  // Each defined function's attribute group, then what each group holds.
  std::map<std::string, std::string> groupOf, groups;
  std::regex define(R"(define [^\n]*@([A-Za-z0-9_.]+)\([^\n]*\)[^\n]* #([0-9]+) \{)");
  for (std::sregex_iterator it(ll.begin(), ll.end(), define), end; it != end;
       ++it) {
    groupOf[(*it)[1]] = (*it)[2];
  }
  std::regex attributes(R"(attributes #([0-9]+) = \{ ([^}]*)\})");
  for (std::sregex_iterator it(ll.begin(), ll.end(), attributes), end;
       it != end; ++it) {
    groups[(*it)[1]] = (*it)[2];
  }
  int64_t kernelsSeen = 0;
  for (const char *glue : {"loss", "train_step", "_mlir_train_step"}) {
    ASSERT_TRUE(groupOf.count(glue)) << glue;
    const std::string &held = groups[groupOf[glue]];
    EXPECT_NE(held.find("noimplicitfloat"), std::string::npos)
        << glue << ": " << held;
    EXPECT_NE(held.find("optnone"), std::string::npos) << glue << ": " << held;
  }
  for (const auto &[name, group] : groupOf) {
    if (name.rfind("kiln_kernel_", 0) == 0) {
      ++kernelsSeen;
      EXPECT_EQ(groups[group].find("noimplicitfloat"), std::string::npos)
          << name;
    }
  }
  EXPECT_GT(kernelsSeen, 10);
}
