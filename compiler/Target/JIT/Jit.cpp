//===- Jit.cpp - Compile kiln IR in-process and call it -------------------===//
//
// Lowers with Lowering.h and hands the LLVM dialect module to MLIR's
// ExecutionEngine, whose packed wrappers follow runtime/Function.h's calling
// convention.
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/JIT/Jit.h"

#include "compiler/Codegen/CPU/TargetInfo.h"
#include "compiler/Target/Common/Lowering.h"
#include "compiler/Target/JIT/JitMemory.h"
#include "dialects/Kiln/IR/KilnDialect.h"
#include "runtime/Allocator.h"
#include "runtime/Cuda.h"
#include "runtime/Error.h"
#include "runtime/MemrefCopy.h"
#include "runtime/Sanitizer.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/MLIRContext.h"

#include "llvm/ExecutionEngine/Orc/CoreContainers.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Transforms/Instrumentation/AddressSanitizer.h"

#include <dlfcn.h>

#include <chrono>
#include <map>
#include <mutex>

#ifdef __GLIBC__
#include <malloc.h>
#endif

using namespace mlir;

extern "C" int omp_get_max_threads(); // LLVM's OpenMP runtime (libomp)

namespace kiln {

struct JitModule::Impl {
  /// Where the engine's sections live (JitMemory.h); outlives the engine,
  /// which gives its sections back when it goes.
  std::unique_ptr<ContiguousMemoryMapper> memory;
  std::unique_ptr<ExecutionEngine> engine;
  double pipelineSeconds = 0, codegenSeconds = 0;
};

JitModule::JitModule(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JitModule::~JitModule() = default;

double JitModule::pipelineSeconds() const { return impl_->pipelineSeconds; }
double JitModule::codegenSeconds() const { return impl_->codegenSeconds; }
size_t JitModule::codeBytes() const { return impl_->memory->used(); }

/// The GPU architecture JitOptions::gpu names ("" for the CPU); checks
/// its spelling, then that there is a GPU to run on.
static std::string gpuChip(const std::string &gpu) {
  if (gpu.empty()) {
    return "";
  }
  if (gpu != "native" && !mlir::kiln::isGpuChip(gpu)) {
    throw Error("kiln: JitOptions::gpu: '" + gpu +
                "' is not an NVIDIA GPU architecture: use native (this "
                "machine's GPU) or sm_NN (sm_80, sm_90)");
  }
  cuda::requireDevice();
  return gpu == "native" ? cuda::architecture() : gpu;
}

std::string precisionError(const std::string &precision,
                           const std::string &cpu) {
  mlir::MLIRContext context;
  context.getOrLoadDialect<mlir::kiln::KilnDialect>();
  llvm::Expected<mlir::kiln::TargetAttr> target =
      mlir::kiln::cpu::resolveTarget(&context, cpu);
  if (!target) {
    return llvm::toString(target.takeError());
  }
  return mlir::kiln::cpu::cpuPrecisionError(precision, *target);
}

/// Whether compiled code gets AddressSanitizer's checks
/// (JitOptions::addressSanitizer).
static bool instrumentsAddresses(const JitOptions &options) {
  return options.addressSanitizer.value_or(kAddressSanitizer) &&
         options.gpu.empty();
}

/// The lowering's share of `options` (every compile path goes through
/// here first, so options that cannot work are refused here).
static LoweringOptions loweringOptions(const JitOptions &options) {
  // The checks call the sanitizer's runtime, which the JIT finds among the
  // process's symbols.
  if (instrumentsAddresses(options) &&
      !dlsym(RTLD_DEFAULT, "__asan_report_load4")) {
    throw Error("kiln: JitOptions::addressSanitizer needs AddressSanitizer's "
                "runtime in the process (a program linked with "
                "-fsanitize=address)");
  }
  LoweringOptions lowering;
  lowering.prePipeline = options.prePipeline;
  lowering.functions = options.functions;
  lowering.dumpDirectory = options.dumpDirectory;
  lowering.dumpStem = options.dumpStem;
  lowering.cpu = options.cpu;
  lowering.prepareWeights = options.prepareWeights.value_or(false);
  lowering.gpuMath = options.gpuMath;
  lowering.precision = options.precision;
  lowering.bf16Kernels = options.bf16Kernels;
  return lowering;
}

/// loweringOptions() with the target's architecture.
static LoweringOptions targetLoweringOptions(const JitOptions &options) {
  LoweringOptions lowering = loweringOptions(options);
  lowering.gpuChip = gpuChip(options.gpu);
  lowering.gpuHostKernels =
      !lowering.gpuChip.empty() && cuda::runsHostKernels();
  // In-process, the runtime keeps parameters and optimizer state on the GPU
  // (a Trainer's across steps); an ahead-of-time object keeps the C calling
  // convention of host buffers only.
  lowering.gpuResidentState = true;
  return lowering;
}

/// Adds AddressSanitizer's checks to every function of `module` (run after
/// the optimizations, as clang places it). The process already runs the
/// sanitizer (JitOptions::addressSanitizer), so the module needs no
/// constructor of its own; its globals (constants the compiler made) are
/// left uninstrumented, so that nothing is registered with the sanitizer
/// that would outlive the module's memory.
static void instrumentAddresses(llvm::Module &module,
                                llvm::TargetMachine &machine) {
  for (llvm::Function &fn : module) {
    if (!fn.isDeclaration()) {
      fn.addFnAttr(llvm::Attribute::SanitizeAddress);
    }
  }
  for (llvm::GlobalVariable &global : module.globals()) {
    llvm::GlobalValue::SanitizerMetadata metadata;
    metadata.NoAddress = true;
    global.setSanitizerMetadata(metadata);
  }
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager cgscc;
  llvm::ModuleAnalysisManager modules;
  llvm::PassBuilder builder(&machine);
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(cgscc);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, cgscc, modules);
  llvm::AddressSanitizerOptions options;
  options.UseAfterReturn = llvm::AsanDetectStackUseAfterReturnMode::Never;
  options.InsertVersionCheck = false;
  llvm::ModulePassManager passes;
  passes.addPass(llvm::AddressSanitizerPass(
      options, /*UseGlobalGC=*/false, /*UseOdrIndicator=*/false,
      llvm::AsanDtorKind::None, llvm::AsanCtorKind::None));
  passes.run(module, modules);
}

std::shared_ptr<JitModule> JitModule::compile(ModuleOp source,
                                              const JitOptions &options) {
  return compileLowered(
      lowerToLLVMDialect(source, targetLoweringOptions(options)), options);
}

std::shared_ptr<JitModule>
JitModule::compileLowered(LoweredModule lowered, const JitOptions &options) {
  LoweringOptions lowering = loweringOptions(options);
  auto impl = std::make_unique<Impl>();
  impl->pipelineSeconds = lowered.seconds;

  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<llvm::TargetMachine> machine = createTargetMachine(
      mlir::kiln::cpu::getTarget(*lowered.module), options.optLevel);
  llvm::TargetMachine *target = machine.get();
  std::function<llvm::Error(llvm::Module *)> optimizeAndDump =
      [&](llvm::Module *m) -> llvm::Error {
    try {
      optimizeModule(*m, *target, options.optLevel);
      if (instrumentsAddresses(options)) {
        instrumentAddresses(*m, *target);
      }
    } catch (const Error &e) {
      return llvm::createStringError(e.what());
    }
    dumpStage(lowering, "ll",
              [&](llvm::raw_ostream &os) { m->print(os, nullptr); });
    return llvm::Error::success();
  };
  ExecutionEngineOptions engineOptions;
  impl->memory = std::make_unique<ContiguousMemoryMapper>();
  engineOptions.sectionMemoryMapper = impl->memory.get();
  engineOptions.transformer = optimizeAndDump;
  engineOptions.jitCodeGenOptLevel = codeGenOptLevel(options.optLevel);
  auto engine = ExecutionEngine::create(*lowered.module, engineOptions,
                                        std::move(machine));
  if (!engine) {
    throw Error("kiln: JIT compilation failed: " +
                llvm::toString(engine.takeError()));
  }
  impl->engine = std::move(*engine);
  // The LLVM module is the engine's own: the MLIR module and its context
  // (every type and attribute the pipeline uniqued) are freed now.
  lowered.module = {};
  lowered.context.reset();
#ifdef __GLIBC__
  malloc_trim(0); // and the heap they lived in goes back to the system
#endif
  // The run-time functions compiled code may call, from the Kiln runtime.
  impl->engine->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap symbols;
    symbols[interner("memrefCopy")] = {
        llvm::orc::ExecutorAddr::fromPtr(&memrefCopy),
        llvm::JITSymbolFlags::Exported};
    symbols[interner("_mlir_memref_to_llvm_alloc")] = {
        llvm::orc::ExecutorAddr::fromPtr(&_mlir_memref_to_llvm_alloc),
        llvm::JITSymbolFlags::Exported};
    symbols[interner("_mlir_memref_to_llvm_aligned_alloc")] = {
        llvm::orc::ExecutorAddr::fromPtr(&_mlir_memref_to_llvm_aligned_alloc),
        llvm::JITSymbolFlags::Exported};
    symbols[interner("_mlir_memref_to_llvm_free")] = {
        llvm::orc::ExecutorAddr::fromPtr(&_mlir_memref_to_llvm_free),
        llvm::JITSymbolFlags::Exported};
    // Threaded loops call LLVM's OpenMP runtime, which KilnRuntime links
    // into the process: the engine finds its __kmpc_* entry points there
    // (no library loaded from a path fixed at build time, so a relocated
    // install works). Naming one here keeps libomp linked under
    // --as-needed.
    symbols[interner("omp_get_max_threads")] = {
        llvm::orc::ExecutorAddr::fromPtr(&omp_get_max_threads),
        llvm::JITSymbolFlags::Exported};
    for (auto [name, address] : cuda::runtimeSymbols()) {
      symbols[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(address),
                                 llvm::JITSymbolFlags::Exported};
    }
    return symbols;
  });
  if (!options.gpu.empty()) {
    // The constructors that register the GPU kernels' modules.
    impl->engine->initialize();
  }
  auto module = std::shared_ptr<JitModule>(new JitModule(std::move(impl)));
  // Machine code is generated on the first lookup: do it now, so that calls
  // are fast from the first one and the time is reported as compile time.
  for (FunctionSpec &spec : lowered.functions) {
    auto fn = module->impl_->engine->lookupPacked(spec.name);
    if (!fn) {
      throw Error("kiln: JIT compilation of '" + spec.name +
                  "' failed: " + llvm::toString(fn.takeError()));
    }
    module->add(CompiledFunction(std::move(spec), *fn));
  }
  module->setParams(std::move(lowered.params));
  module->impl_->codegenSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return module;
}

std::shared_ptr<JitModule> JitModule::compileCached(ModuleOp module,
                                                    const JitOptions &options) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<JitModule>> cache;
  std::string key;
  {
    llvm::raw_string_ostream os(key);
    module->print(os, OpPrintingFlags().printGenericOpForm());
    os << "\n// opt=" << options.optLevel << " dump=" << options.dumpDirectory
       << " pre=" << options.prePipeline << " gpu=" << options.gpu
       << " gpu_math=" << options.gpuMath << " cpu=" << options.cpu
       << " precision=" << options.precision
       << " bf16_kernels=" << options.bf16Kernels
       << " asan=" << instrumentsAddresses(options)
       << " prepare=" << options.prepareWeights.value_or(false)
       << " functions=";
    for (const std::string &f : options.functions) {
      os << f << ",";
    }
  }
  std::lock_guard<std::mutex> lock(mutex);
  if (auto found = cache[key].lock()) {
    return found;
  }
  auto compiled = compile(module, options);
  cache[key] = compiled;
  return compiled;
}

std::shared_ptr<JitModule> JitModule::compileSource(const std::string &source,
                                                    const JitOptions &options) {
  return compileLowered(
      lowerSourceToLLVMDialect(source, "the source",
                               targetLoweringOptions(options)),
      options);
}

} // namespace kiln
