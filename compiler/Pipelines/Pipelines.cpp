//===- Pipelines.cpp - Kiln's named compilation pipelines -----------------===//
//
// The pipelines are built in C++ from the passes' typed constructors (a
// misspelled pass or option is a compile error, not a pipeline string that
// fails to parse at run time), so that kiln-opt, the JIT and the AOT
// compiler run exactly the same passes.
//
//===----------------------------------------------------------------------===//

#include "compiler/Pipelines/Pipelines.h"

#include "compiler/Codegen/CPU/Passes.h"
#include "compiler/Codegen/CPU/TargetInfo.h"
#include "compiler/Codegen/Common/Passes.h"
#include "compiler/Codegen/GPU/Passes.h"
#include "compiler/Conversion/KilnToLinalg/KilnToLinalg.h"
#include "dialects/Kiln/IR/KilnDialect.h"
#include "dialects/Kiln/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Dialect/Vector/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;

namespace {

/// kiln-check-lowered at `stage`, the last pass of every pipeline.
std::unique_ptr<Pass> checkLowered(const std::string &stage) {
  return mlir::kiln::createKilnCheckLoweredPass({.stage = stage});
}

/// One-shot bufferization of whole modules, with plain (identity-layout)
/// buffers at function boundaries.
std::unique_ptr<Pass> bufferizeModule() {
  bufferization::OneShotBufferizePassOptions options;
  options.bufferizeFunctionBoundaries = true;
  options.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  return bufferization::createOneShotBufferizePass(options);
}

/// The inliner with no simplification of the inlined code
/// (`inline{default-pipeline=}`). createInlinerPass(..., nullptr) would
/// behave the same but print, and re-parse, as default-pipeline=canonicalize.
std::unique_ptr<Pass> inlineWithoutSimplifying() {
  std::unique_ptr<Pass> inliner = createInlinerPass();
  LogicalResult parsed = inliner->initializeOptions(
      "default-pipeline=", [](const Twine &) { return failure(); });
  assert(succeeded(parsed) && "the inliner's options changed");
  (void)parsed;
  return inliner;
}

} // namespace

void mlir::kiln::buildKilnToLinalgPipeline(OpPassManager &pm,
                                           int64_t attentionBlock,
                                           bool prepareWeights,
                                           bool attentionKernel,
                                           bool roundingProducts) {
  pm.addPass(createKilnWidenBf16Pass({.roundingProducts = roundingProducts}));
  pm.addPass(createConvertKilnToLinalgPass(
      {.attentionBlock = attentionBlock, .attentionKernel = attentionKernel}));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createKilnFuseElementwisePass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createKilnFoldEmptyReshapesPass());
  pm.addPass(createCSEPass());
  pm.addPass(checkLowered("linalg"));
  if (prepareWeights) {
    pm.addPass(createKilnPrepareWeightsPass());
  }
}

void mlir::kiln::buildKilnToLLVMPipeline(OpPassManager &pm,
                                         const std::string &cpu,
                                         bool prepareWeights,
                                         llvm::StringRef precision,
                                         llvm::StringRef bf16Kernels) {
  pm.addPass(createKilnSetTargetPass({.cpu = cpu}));
  buildKilnToLinalgPipeline(pm, kCpuAttentionBlock, prepareWeights,
                            /*attentionKernel=*/false, precision == "bf16");
  buildLinalgToLLVMPipeline(pm, precision, bf16Kernels);
}

/// Adds CPU tiling to a pass manager of functions on buffers: the decision
/// (kiln-select-cpu-tiles, with `select`'s sizes) and the passes that apply
/// it, `remarks` where a tile stays scalar. Registered as the pipeline
/// kiln-tile-and-vectorize.
static void buildCpuTilingPipeline(
    OpPassManager &pm,
    const mlir::kiln::KilnSelectCpuTilesPassOptions &select = {},
    bool remarks = false) {
  using namespace mlir::kiln;
  pm.addPass(createKilnSelectCpuTilesPass(select));
  pm.addPass(createKilnBlockForCachesPass());
  pm.addPass(createKilnTileAndPeelPass({.vectorWidth = select.vectorWidth}));
  pm.addPass(createKilnVectorizeTilesPass({.remarks = remarks}));
}

void mlir::kiln::buildLinalgToLLVMPipeline(OpPassManager &pm,
                                           llvm::StringRef precision,
                                           llvm::StringRef bf16Kernels) {
  // Buffers: arguments updated in place, fills per user, freed early.
  pm.addNestedPass<func::FuncOp>(createKilnCloneFillsPerUsePass());
  pm.addPass(createKilnMarkInPlaceArgumentsPass());
  pm.addPass(bufferizeModule());
  pm.addPass(createKilnDropInPlaceResultsPass());
  bufferization::buildBufferDeallocationPipeline(pm);
  pm.addPass(createConvertBufferizationToMemRefPass());
  pm.addNestedPass<func::FuncOp>(createKilnDeferFillsPass());
  // Flash attention's loop over (batch, head, query block).
  pm.addNestedPass<func::FuncOp>(createForallToParallelLoopPass());
  pm.addPass(createKilnOutlineKernelsPass());
  pm.addNestedPass<func::FuncOp>(createKilnDeallocateAfterLastUsePass());
  // Register tiles and vectors, the loops that run on all cores; products
  // of a few rows stream their weight instead.
  pm.addNestedPass<func::FuncOp>(createKilnVectorMatrixProductsPass());
  if (precision == "bf16") {
    pm.addNestedPass<func::FuncOp>(
        createKilnBf16ProductsPass({.kernels = bf16Kernels.str()}));
  }
  buildCpuTilingPipeline(pm.nest<func::FuncOp>());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(memref::createFoldMemRefAliasOpsPass());
  pm.addNestedPass<func::FuncOp>(createKilnHoistVectorTransfersPass());
  pm.addNestedPass<func::FuncOp>(createKilnParallelizeLoopsPass());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addNestedPass<func::FuncOp>(vector::createLowerVectorMaskPass());
  pm.addNestedPass<func::FuncOp>(vector::createLowerVectorMultiReductionPass());
  pm.addPass(createConvertVectorToSCFPass(
      VectorTransferToSCFOptions().enableFullUnroll()));
  pm.addPass(createKilnLowerTransposesPass());
  pm.addPass(createKilnApproximateMathPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertSCFToOpenMPPass());
  pm.addPass(createKilnInlineAllocaScopesPass());
  // One thread team per kernel, not one per parallel loop.
  pm.addPass(createKilnMergeParallelRegionsPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createCanonicalizerPass());
  // The LLVM dialect.
  pm.addPass(createKilnConvertVectorToLLVMPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  // Buffers come from Kiln's allocator (runtime/Allocator.h), which reuses
  // the blocks of earlier steps.
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(
      {.useAlignedAlloc = true, .useGenericFunctions = true}));
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createKilnApplyNoAliasPass());
  pm.addPass(createUBToLLVMConversionPass());
  pm.addPass(createConvertOpenMPToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createKilnLLVMTargetAttributesPass());
  pm.addPass(checkLowered("llvm"));
}

std::string mlir::kiln::cudaToolkitPath() {
  for (const char *variable : {"CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"}) {
    if (const char *path = std::getenv(variable); path && *path) {
      return path;
    }
  }
  return llvm::sys::fs::exists("/usr/local/cuda/nvvm/libdevice")
             ? "/usr/local/cuda"
             : "";
}

void mlir::kiln::buildKilnToGpuPipeline(OpPassManager &pm,
                                        const std::string &gpu,
                                        const std::string &cpu,
                                        const GpuPipelineOptions &options) {
  pm.addPass(createKilnSetTargetPass({.cpu = cpu, .gpu = gpu}));
  buildKilnToLinalgPipeline(pm, /*attentionBlock=*/0, /*prepareWeights=*/false,
                            options.attentionKernel);
  buildLinalgToGpuPipeline(pm, options);
}

void mlir::kiln::buildLinalgToGpuPipeline(OpPassManager &pm,
                                          const GpuPipelineOptions &options) {
  // Every distinct linalg op becomes one GPU kernel (kiln-outline-kernels
  // shares it between identical layers): its parallel loops, innermost
  // dimension first (on threadIdx.x: consecutive threads, consecutive
  // elements), are tiled by 16 x 16 (256 for one dimension) and mapped to
  // blocks and threads (a third dimension to blocks only, later ones stay
  // serial in each thread, as do reduction loops), its buffers live in
  // device memory, the host code runs on one stream, and the kernels are
  // compiled to PTX for the module's kiln.target. Math functions come from
  // CUDA's libdevice, linked when a toolkit is found. Arguments stay read-only
  // and results fresh (no in-place updates: the host code stages arguments
  // through device buffers); readSpec in compiler/Target/Common/Lowering.cpp
  // then records no ResultSpec::updates for a GPU target. Each op that
  // accumulates into a fill gets its own (no copies of a shared one), so
  // that the fill goes into its kernel.
  pm.addNestedPass<func::FuncOp>(createKilnCloneFillsPerUsePass());
  pm.addPass(createKilnMarkInPlaceArgumentsPass({.inPlace = false}));
  pm.addPass(bufferizeModule());
  bufferization::buildBufferDeallocationPipeline(pm);
  pm.addPass(createConvertBufferizationToMemRefPass());
  // A fill goes with the op it initializes: reductions and products start
  // from its value rather than launching a kernel for it. Chains of ops over
  // the same rows (softmax, layer norm, a loss) become one kernel each, run
  // with a block per row.
  pm.addPass(
      createKilnOutlineKernelsPass({.groupFills = true, .groupRows = true}));
  // Kernels: tuned ones for contractions (in fp32 or TF32) and reductions,
  // 16 x 16 tiles of parallel loops for the rest.
  pm.addPass(createKilnStridedCopiesToLinalgPass());
  pm.addNestedPass<func::FuncOp>(
      createKilnGpuKernelsPass({.math = options.math}));
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToParallelLoopsPass());
  pm.addNestedPass<func::FuncOp>(createKilnSerialNestsToParallelPass());
  pm.addNestedPass<func::FuncOp>(createKilnGpuLoopTilesPass());
  pm.addNestedPass<func::FuncOp>(createGpuMapParallelLoopsPass());
  pm.addNestedPass<func::FuncOp>(createConvertParallelLoopToGpuPass());
  pm.addPass(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  // The host side of each kernel goes back into its callers, so that all
  // launches of a function share one stream; the device side stays shared.
  pm.addPass(inlineWithoutSimplifying());
  pm.addPass(createSymbolDCEPass());
  // Device memory, host functions on host memory, one stream.
  pm.addPass(createKilnDeviceBuffersPass());
  pm.addPass(createKilnHostInterfacePass({.resident = options.resident}));
  pm.addNestedPass<func::FuncOp>(createGpuAsyncRegionPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createCanonicalizerPass());
  // A prediction of each function's time, when asked for: the launches and
  // their kernels are final, the kernels still structured.
  if (!options.costSizes.empty()) {
    pm.addPass(createKilnGpuCostModelPass({.device = options.costDevice,
                                           .sizes = options.costSizes,
                                           .report = options.costReport,
                                           .resident = options.resident}));
  }
  // The kernels: NVVM, then PTX for the architecture kiln.target names.
  pm.addPass(createKilnAttachGpuTargetPass());
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addPass(createKilnAlignWorkgroupMemoryPass());
  kernels.addPass(createKilnApproximateMathPass());
  kernels.addPass(createSCFToControlFlowPass());
  // cp.async (kiln-gpu-kernels' contractions on sm_80 and newer) first: it
  // reads the memref descriptors convert-gpu-to-nvvm then lowers.
  kernels.addPass(createConvertNVGPUToNVVMPass());
  kernels.addPass(createConvertGpuOpsToNVVMOps());
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());
  // The host code: the LLVM dialect.
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  // Host buffers (results among them) come from Kiln's allocator too: the
  // runtime releases results through it (a plain malloc'd result was freed
  // as one of its blocks and corrupted the heap).
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(
      {.useAlignedAlloc = true, .useGenericFunctions = true}));
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createGpuToLLVMConversionPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  if (options.hostKernels) {
    pm.addPass(createKilnGpuModulesToHostPass());
  } else {
    GpuModuleToBinaryPassOptions binary;
    binary.toolkitPath = cudaToolkitPath();
    binary.compilationTarget = "isa";
    pm.addPass(createGpuModuleToBinaryPass(binary));
  }
  pm.addPass(checkLowered("llvm"));
}

LogicalResult mlir::kiln::addPipeline(OpPassManager &pm,
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
struct GpuTextOptions : public PassPipelineOptions<GpuTextOptions> {
  Option<std::string> gpu{
      *this, "gpu", llvm::cl::desc("The NVIDIA GPU architecture: sm_80, sm_90"),
      llvm::cl::init("sm_90")};
  Option<std::string> cpu{
      *this, "cpu",
      llvm::cl::desc("The host code's CPU: host, or an LLVM CPU name"),
      llvm::cl::init("host")};
  Option<bool> resident{
      *this, "resident",
      llvm::cl::desc("Parameters and optimizer state stay in device memory"),
      llvm::cl::init(false)};
  Option<std::string> math{
      *this, "math",
      llvm::cl::desc("The contractions' arithmetic: fp32, or tf32, "
                     "tf32x3 or bf16 (tensor cores; sm_80 and newer)"),
      llvm::cl::init("fp32")};
  Option<std::string> costSizes{
      *this, "cost-sizes",
      llvm::cl::desc("Predict each function's time at these argument sizes "
                     "(kiln-gpu-cost-model: name=8x256,...) and print it"),
      llvm::cl::init("")};
  Option<std::string> costDevice{
      *this, "cost-device",
      llvm::cl::desc("The GPU of the prediction: h200, h100, a100"),
      llvm::cl::init("h200")};
  Option<bool> hostKernels{
      *this, "host-kernels",
      llvm::cl::desc("Compile the kernels for the host CPU, for a driver "
                     "that emulates the GPU (kiln-gpu-modules-to-host), "
                     "instead of PTX"),
      llvm::cl::init(false)};
  Option<bool> attentionKernel{
      *this, "attention-kernel",
      llvm::cl::desc("Attention as flash kernels (kiln.flash_attention, no "
                     "[B, H, Tq, Tk] scores); false: whole scores"),
      llvm::cl::init(true)};
};
struct CpuTilingOptions : public PassPipelineOptions<CpuTilingOptions> {
  Option<int64_t> tileM{*this, "tile-m",
                        llvm::cl::desc("Rows of a contraction register tile "
                                       "(0: from the target)"),
                        llvm::cl::init(0)};
  Option<int64_t> tileN{*this, "tile-n",
                        llvm::cl::desc("Columns of a contraction register "
                                       "tile (0: from the target)"),
                        llvm::cl::init(0)};
  Option<int64_t> vectorWidth{
      *this, "vector-width",
      llvm::cl::desc("Elements per vector (0: from the target)"),
      llvm::cl::init(0)};
  Option<int64_t> blockK{*this, "block-k",
                         llvm::cl::desc("Reduction steps of a contraction's "
                                        "cache block (0: from the target)"),
                         llvm::cl::init(0)};
  Option<int64_t> blockN{*this, "block-n",
                         llvm::cl::desc("Columns of a contraction's cache "
                                        "block (0: from the target)"),
                         llvm::cl::init(0)};
  Option<int64_t> blockM{*this, "block-m",
                         llvm::cl::desc("Rows of a contraction's cache block "
                                        "when its A is stored transposed (0: "
                                        "from the target)"),
                         llvm::cl::init(0)};
  Option<bool> remarks{*this, "remarks",
                       llvm::cl::desc("Emit a remark at each tile that stays "
                                      "a scalar loop nest, saying why"),
                       llvm::cl::init(false)};
};
struct CpuPipelineOptions : public PassPipelineOptions<CpuPipelineOptions> {
  Option<std::string> cpu{
      *this, "cpu",
      llvm::cl::desc("The CPU: host, or an LLVM CPU name (x86-64-v3, ...)"),
      llvm::cl::init("host")};
  Option<bool> prepareWeights{
      *this, "prepare-weights",
      llvm::cl::desc("Products read the 2-D parameters they take transposed "
                     "from prepared copies, appended arguments "
                     "(kiln-prepare-weights)"),
      llvm::cl::init(false)};
  Option<std::string> precision{
      *this, "precision",
      llvm::cl::desc("Matrix products: fp32, or bf16 (bf16 values, f32 "
                     "sums; AVX512-BF16)"),
      llvm::cl::init("fp32")};
  Option<std::string> bf16Kernels{
      *this, "bf16-kernels",
      llvm::cl::desc("With precision=bf16: auto, dot (vdpbf16ps), amx (AMX "
                     "tiles) or amx-emulated"),
      llvm::cl::init("auto")};
};
} // namespace

void mlir::kiln::registerKilnPipelines() {
  registerKilnCodegenCommonPasses();
  registerKilnCodegenCPUPasses();
  registerKilnCodegenGPUPasses();
  // Registered by hand (not PassPipelineRegistration) so that a `gpu` that
  // is no NVIDIA architecture is an error before the pipeline runs.
  registerPassPipeline(
      "kiln-to-gpu",
      "Lower kiln to GPU kernels compiled to PTX, with host code that "
      "launches them (NVIDIA)",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        GpuTextOptions options;
        if (failed(options.parseFromString(text))) {
          return failure();
        }
        if (!isGpuChip(options.gpu)) {
          return errorHandler("kiln-to-gpu: gpu '" + options.gpu +
                              "' is not an NVIDIA GPU architecture (sm_80, "
                              "sm_90, ...)");
        }
        if (std::string why = gpuMathError(options.math, options.gpu);
            !why.empty()) {
          return errorHandler("kiln-to-gpu: " + why);
        }
        buildKilnToGpuPipeline(pm, options.gpu, options.cpu,
                               {.resident = options.resident,
                                .math = options.math,
                                .costSizes = options.costSizes,
                                .costDevice = options.costDevice,
                                .costReport = true,
                                .hostKernels = options.hostKernels,
                                .attentionKernel = options.attentionKernel});
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optHandler) {
        optHandler(GpuTextOptions());
      });
  PassPipelineRegistration<CpuTilingOptions>(
      "kiln-tile-and-vectorize",
      "CPU tiling on buffers: kiln-select-cpu-tiles, kiln-block-for-caches, "
      "kiln-tile-and-peel, kiln-vectorize-tiles",
      [](OpPassManager &pm, const CpuTilingOptions &options) {
        buildCpuTilingPipeline(pm,
                               {.tileM = options.tileM,
                                .tileN = options.tileN,
                                .vectorWidth = options.vectorWidth,
                                .blockK = options.blockK,
                                .blockN = options.blockN,
                                .blockM = options.blockM},
                               options.remarks);
      });
  PassPipelineRegistration<>(
      "kiln-to-linalg", "Lower kiln to linalg on tensors",
      [](OpPassManager &pm) { buildKilnToLinalgPipeline(pm); });
  // By hand too: a precision that is none is an error before the pipeline
  // runs (whether the target has what it needs, kiln-bf16-products says).
  registerPassPipeline(
      "kiln-to-llvm", "Lower kiln to the LLVM dialect (CPU)",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        CpuPipelineOptions options;
        if (failed(options.parseFromString(text))) {
          return failure();
        }
        if (std::string why =
                cpu::cpuPrecisionError(options.precision, TargetAttr());
            !why.empty()) {
          return errorHandler("kiln-to-llvm: " + why);
        }
        if (llvm::Expected<cpu::Bf16Kernels> kernels =
                cpu::bf16Kernels(options.bf16Kernels, TargetAttr());
            !kernels) {
          return errorHandler("kiln-to-llvm: " +
                              llvm::toString(kernels.takeError()));
        }
        buildKilnToLLVMPipeline(pm, options.cpu, options.prepareWeights,
                                options.precision, options.bf16Kernels);
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optHandler) {
        optHandler(CpuPipelineOptions());
      });
}
