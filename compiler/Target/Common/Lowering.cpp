//===- Lowering.cpp - Kiln IR to the LLVM dialect, for JIT and AOT --------===//
//
// The pipeline is the same as kiln-opt --kiln-to-llvm. Before lowering, the
// signature and the input contract (InputContract.h) of every public
// function are read off the kiln IR; the runtime checks every call against
// them (runtime/Function.h).
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/Common/Lowering.h"

#include "compiler/Target/Common/InputContract.h"

#include "compiler/Codegen/CPU/TargetInfo.h"
#include "compiler/Codegen/GPU/Passes.h"

#include "compiler/InitAll.h"
#include "compiler/Pipelines/Pipelines.h"
#include "dialects/Kiln/IR/DTypes.h"
#include "dialects/Kiln/IR/KilnOps.h"
#include "runtime/Error.h"
#include "runtime/Files.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/Analysis/LoopInfo.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/Transforms/Utils/LoopUtils.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <sstream>

using namespace mlir;
using namespace mlir::kiln;

namespace kiln {

namespace {

/// Collects diagnostics while alive so they can be put in a kiln::Error.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(MLIRContext *context)
      : handler(context, [this](Diagnostic &diag) {
          std::string text;
          llvm::raw_string_ostream os(text);
          os << diag.getLocation() << ": " << diag.str();
          for (Diagnostic &note : diag.getNotes()) {
            os << "\n  note: " << note.str();
          }
          messages.push_back(text);
          return success();
        }) {}

  std::string str() const {
    std::string text;
    for (const std::string &m : messages) {
      text += "\n  " + m;
    }
    return text;
  }

private:
  ScopedDiagnosticHandler handler;
  std::vector<std::string> messages;
};

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

} // namespace

/// The stages dumpStage writes, in order.
static constexpr const char *kDumpSuffixes[] = {"kiln.mlir", "linalg.mlir",
                                                "llvm.mlir", "ll"};

static std::string dumpPath(const LoweringOptions &options,
                            const std::string &suffix) {
  return options.dumpDirectory + "/" + options.dumpStem + "." + suffix;
}

/// Refuses dumps that would overwrite the source they are made from.
static void checkDumpsSpareTheSource(const LoweringOptions &options) {
  if (options.dumpDirectory.empty() || options.sourcePath.empty()) {
    return;
  }
  for (const char *suffix : kDumpSuffixes) {
    std::string path = dumpPath(options, suffix);
    if (sameFile(path, options.sourcePath)) {
      throw Error("kiln: the IR dump '" + path + "' would overwrite the "
                  "input '" + options.sourcePath + "'");
    }
  }
}

void dumpStage(const LoweringOptions &options, const std::string &suffix,
               const std::function<void(llvm::raw_ostream &)> &print) {
  if (options.dumpDirectory.empty()) {
    return;
  }
  assert(llvm::is_contained(kDumpSuffixes, suffix) && "an unlisted stage");
  std::string path = dumpPath(options, suffix); // spares the source (lower())
  std::error_code ec = llvm::sys::fs::create_directories(options.dumpDirectory);
  if (ec) {
    throw Error("kiln: cannot create the IR dump directory '" +
                options.dumpDirectory + "': " + ec.message());
  }
  llvm::raw_fd_ostream os(path, ec);
  if (ec) {
    throw Error("kiln: cannot write IR dump '" + path + "': " + ec.message());
  }
  print(os);
}

static std::unique_ptr<MLIRContext> makeContext() {
  DialectRegistry registry;
  registerAllDialects(registry);
  auto context = std::make_unique<MLIRContext>(registry);
  context->loadAllAvailableDialects();
  registerAllPasses();
  return context;
}

/// Why a public function of a compiled module cannot be called `name`
/// (empty: it can): the symbols compiled code calls, and the prefixes of the
/// runtime's and the compiler's own.
static std::string reservedSymbol(StringRef name) {
  for (StringRef prefix : {"_mlir_", "kiln_", "mgpu", "__"}) {
    if (name.starts_with(prefix)) {
      return "names starting with '" + prefix.str() +
             "' belong to the runtime and the compiler";
    }
  }
  if (llvm::is_contained({"memrefCopy", "malloc", "free", "aligned_alloc",
                          "main"},
                         name)) {
    return "compiled code or the C runtime calls a function of that name";
  }
  return {};
}

/// The parameters the DSL recorded in the module (none for hand-written IR).
static std::vector<ParamSpec> readParams(ModuleOp module) {
  std::vector<ParamSpec> params;
  auto list = module->getAttrOfType<ArrayAttr>(mlir::kiln::kParametersAttr);
  if (!list) {
    return params;
  }
  auto bad = [](const std::string &why) {
    return Error("kiln: malformed '" + mlir::kiln::kParametersAttr.str() +
                 "' module attribute: " + why);
  };
  for (Attribute entry : list) {
    auto dict = dyn_cast<DictionaryAttr>(entry);
    auto name = dict ? dict.getAs<StringAttr>("name") : StringAttr();
    auto shape =
        dict ? dict.getAs<DenseI64ArrayAttr>("shape") : DenseI64ArrayAttr();
    auto init = dict ? dict.getAs<IntegerAttr>("init") : IntegerAttr();
    auto a = dict ? dict.getAs<FloatAttr>("a") : FloatAttr();
    auto b = dict ? dict.getAs<FloatAttr>("b") : FloatAttr();
    if (!name || !shape || !init || !a || !b) {
      throw bad("each entry needs name, shape, init, a and b");
    }
    int64_t kind = init.getInt();
    if (kind < 0 || kind > int64_t(Init::Kind::xavierNormal)) {
      throw bad("unknown initializer " + std::to_string(kind) + " of '" +
                name.str() + "'");
    }
    ParamSpec p;
    p.name = name.str();
    p.shape.assign(shape.asArrayRef().begin(), shape.asArrayRef().end());
    for (int64_t size : p.shape) {
      if (size < 0) {
        throw bad("'" + p.name + "' has a negative size");
      }
    }
    p.init = {Init::Kind(kind), a.getValueAsDouble(), b.getValueAsDouble()};
    params.push_back(p);
  }
  return params;
}

/// The signature of `func` and its input contract. With `inPlace`, the
/// results marked kiln.updates are written into their arguments; with
/// `resident`, GPU code keeps its parameters and optimizer state in device
/// memory (kiln-host-interface's `resident` decides which: the same
/// predicates).
static FunctionSpec readSpec(func::FuncOp func, bool inPlace, bool resident) {
  FunctionSpec spec;
  spec.name = func.getName().str();
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
    // The boundary attributes, as the dialect verified them.
    ArgSpec arg;
    auto name = func.getArgAttrOfType<StringAttr>(i, mlir::kiln::kNameAttr);
    arg.name = name ? name.str() : "arg" + std::to_string(i);
    auto kind = func.getArgAttrOfType<StringAttr>(i, mlir::kiln::kKindAttr);
    // kiln.kind's spellings are the spec text's (the dialect verified it).
    arg.role = kind ? *parseRole(kind.getValue().str()) : ArgSpec::Role::input;
    if (arg.role == ArgSpec::Role::prepared) {
      throw Error("kiln: function '" + spec.name + "' argument #" +
                  std::to_string(i) + " ('" + arg.name +
                  "') is of kind 'prepared', which only the compiler adds "
                  "(kiln-prepare-weights); a parameter is of kind 'param'");
    }
    for (auto [j, earlier] : llvm::enumerate(spec.args)) {
      if (earlier.name == arg.name) {
        throw Error("kiln: function '" + spec.name + "': arguments #" +
                    std::to_string(j) + " and #" + std::to_string(i) +
                    " are both called '" + arg.name +
                    "' (the runtime binds arguments by name)");
      }
    }
    if (auto require = func.getArgAttrOfType<StringAttr>(
            i, mlir::kiln::kRequireAttr)) {
      arg.require = require.getValue() == mlir::kiln::kRequirePositive
                        ? ArgSpec::Require::positive
                        : ArgSpec::Require::finiteNonnegative;
    }
    if (auto tensor = dyn_cast<RankedTensorType>(type)) {
      std::optional<DType> dtype = mlir::kiln::dtypeOf(tensor);
      if (!dtype) {
        throw Error(
            "kiln: function '" + spec.name + "' argument #" +
            std::to_string(i) + " has element type " +
            llvm::formatv("{0}", tensor.getElementType()).str() +
            ": compiled functions take f32, bf16, i32, i64 and i1 tensors");
      }
      arg.dtype = *dtype;
      for (int64_t size : tensor.getShape()) {
        arg.shape.push_back(ShapedType::isDynamic(size) ? -1 : size);
      }
    } else if (type.isInteger(64)) {
      arg.isScalar = true;
    } else {
      throw Error("kiln: function '" + spec.name + "' argument #" +
                  std::to_string(i) +
                  " must be a ranked tensor or an i64 scalar");
    }
    arg.onDevice = resident && mlir::kiln::isResidentArgument(func, i);
    spec.args.push_back(arg);
  }
  for (auto [r, type] : llvm::enumerate(func.getResultTypes())) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    std::optional<DType> dtype =
        tensor ? mlir::kiln::dtypeOf(tensor) : std::nullopt;
    if (!dtype || (*dtype != DType::f32 && *dtype != DType::bf16)) {
      throw Error("kiln: function '" + spec.name +
                  "' must return f32 and bf16 tensors only");
    }
    ResultSpec result;
    result.dtype = *dtype;
    auto name = func.getResultAttrOfType<StringAttr>(r, mlir::kiln::kNameAttr);
    result.name = name ? name.str() : "result" + std::to_string(r);
    for (const ResultSpec &earlier : spec.results) {
      if (earlier.name == result.name) {
        throw Error("kiln: function '" + spec.name + "' has two results called '" +
                    result.name + "'");
      }
    }
    for (int64_t size : tensor.getShape()) {
      result.shape.push_back(ShapedType::isDynamic(size) ? -1 : size);
    }
    auto updates =
        func.getResultAttrOfType<IntegerAttr>(r, mlir::kiln::kUpdatesAttr);
    if (inPlace && updates) {
      result.updates = updates.getInt();
    }
    result.onDevice = resident && mlir::kiln::isResidentResult(func, r);
    spec.results.push_back(result);
  }
  buildInputContract(func, spec);
  if (auto tokens = func->getAttrOfType<DictionaryAttr>(
          mlir::kiln::kLossTokensAttr)) {
    auto arg = tokens.getAs<IntegerAttr>("arg");
    if (!arg || arg.getInt() < 0 || arg.getInt() >= int64_t(spec.args.size()) ||
        spec.args[arg.getInt()].isScalar ||
        (spec.args[arg.getInt()].dtype != DType::i32 &&
         spec.args[arg.getInt()].dtype != DType::i64)) {
      throw Error("kiln: function '" + spec.name +
                  "' has a kiln.loss_tokens that names no integer tensor "
                  "argument");
    }
    LossTokens lossTokens{arg.getInt(), std::nullopt, false};
    if (auto ignored = tokens.getAs<IntegerAttr>("ignore_index")) {
      lossTokens.ignoreIndex = ignored.getInt();
    }
    if (auto reduction = tokens.getAs<StringAttr>("reduction")) {
      lossTokens.sum = reduction.getValue() == "sum";
    }
    spec.lossTokens = lossTokens;
  }
  return spec;
}

/// Appends to `spec` the arguments kiln-prepare-weights appended to `func`
/// (after those `spec` has): the prepared layouts of parameters.
static void addPreparedArguments(func::FuncOp func, FunctionSpec &spec) {
  if (!func) {
    throw Error("kiln: function '" + spec.name +
                "' disappeared while lowering to linalg");
  }
  for (unsigned i = spec.args.size(); i < func.getNumArguments(); ++i) {
    auto kind = func.getArgAttrOfType<StringAttr>(i, mlir::kiln::kKindAttr);
    auto name = func.getArgAttrOfType<StringAttr>(i, mlir::kiln::kNameAttr);
    auto type = dyn_cast<RankedTensorType>(func.getArgumentTypes()[i]);
    if (!kind || parseRole(kind.getValue().str()) != ArgSpec::Role::prepared ||
        !name || !type || type.getRank() != 2 || !type.hasStaticShape() ||
        !type.getElementType().isF32()) {
      throw Error("kiln: function '" + spec.name + "' gained argument #" +
                  std::to_string(i) +
                  " while lowering to linalg, which is no prepared "
                  "parameter");
    }
    ArgSpec arg;
    arg.name = name.str();
    arg.role = ArgSpec::Role::prepared;
    arg.shape.assign(type.getShape().begin(), type.getShape().end());
    spec.args.push_back(arg);
  }
}

/// Erases the public functions not in `names`; throws kiln::Error for a
/// name that is not a public function.
static void selectFunctions(ModuleOp module,
                            const std::vector<std::string> &names) {
  std::set<std::string> wanted(names.begin(), names.end());
  std::vector<func::FuncOp> unwanted;
  std::string known;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal() || func.isPrivate()) {
      continue;
    }
    std::string name = func.getName().str();
    known += (known.empty() ? "" : ", ") + name;
    if (!wanted.erase(name)) {
      unwanted.push_back(func);
    }
  }
  if (!wanted.empty()) {
    throw Error("kiln: no function '" + *wanted.begin() +
                "' to compile (the module has: " + known + ")");
  }
  for (func::FuncOp func : unwanted) {
    func.erase();
  }
}

std::map<std::string, GpuCostPrediction>
gpuCostPredictions(const LoweredModule &lowered) {
  std::map<std::string, GpuCostPrediction> result;
  auto functions =
      (*lowered.module)
          ->getAttrOfType<DictionaryAttr>(mlir::kiln::kGpuCostAttr);
  if (!functions) {
    return result;
  }
  for (NamedAttribute function : functions) {
    auto fields = cast<DictionaryAttr>(function.getValue());
    auto integer = [&](StringRef key) {
      auto a = fields.getAs<IntegerAttr>(key);
      return a ? a.getInt() : 0;
    };
    auto real = [&](StringRef key) {
      auto a = fields.getAs<FloatAttr>(key);
      return a ? a.getValueAsDouble() : 0.0;
    };
    result[function.getName().str()] = {integer("launches"), integer("copies"),
                                        real("flops"),       real("bytes"),
                                        real("kernel_ms"),   real("ms")};
  }
  return result;
}

/// Lowers `lowered.module` in place. `lowered` must outlive `diagnostics`
/// (whose handler lives in its context), also when this throws.
static void lower(LoweredModule &lowered, const LoweringOptions &options,
                  DiagnosticCollector &diagnostics) {
  MLIRContext *context = lowered.context.get();
  ModuleOp module = *lowered.module;
  checkDumpsSpareTheSource(options);
  // The target CPU (and GPU), resolved once: the passes and the target
  // machine read it from the module.
  llvm::Expected<mlir::kiln::TargetAttr> target =
      mlir::kiln::cpu::resolveTarget(context, options.cpu, options.gpuChip);
  if (!target) {
    throw Error("kiln: " + llvm::toString(target.takeError()));
  }
  if (options.precision != "fp32" && !options.gpuChip.empty()) {
    throw Error("kiln: precision '" + options.precision +
                "' with a GPU: it applies to CPU code only (GPU code has "
                "its math: fp32, tf32, tf32x3, bf16)");
  }
  if (std::string why =
          mlir::kiln::cpu::cpuPrecisionError(options.precision, *target);
      !why.empty()) {
    throw Error("kiln: " + why);
  }
  if (options.bf16Kernels != "auto" && options.precision != "bf16") {
    throw Error("kiln: bf16 kernels '" + options.bf16Kernels +
                "' with precision '" + options.precision +
                "': they choose how the bf16 precision multiplies");
  }
  if (llvm::Expected<mlir::kiln::cpu::Bf16Kernels> kernels =
          mlir::kiln::cpu::bf16Kernels(options.bf16Kernels, *target);
      !kernels) {
    throw Error("kiln: " + llvm::toString(kernels.takeError()));
  }
  if (options.gpuMath != "fp32") {
    if (options.gpuChip.empty()) {
      throw Error("kiln: GPU math '" + options.gpuMath +
                  "' without a GPU: it applies to GPU code only");
    }
    if (std::string why =
            mlir::kiln::gpuMathError(options.gpuMath, options.gpuChip);
        !why.empty()) {
      throw Error("kiln: " + why);
    }
  }
  if (failed(verify(module))) {
    throw Error("kiln: the module does not verify:" + diagnostics.str());
  }
  if (!options.prePipeline.empty()) {
    PassManager pre(context);
    if (failed(mlir::kiln::addPipeline(pre, options.prePipeline)) ||
        failed(pre.run(module))) {
      throw Error("kiln: the pipeline '" + options.prePipeline +
                  "' failed:" + diagnostics.str());
    }
  }
  dumpStage(options, "kiln.mlir",
            [&](llvm::raw_ostream &os) { module->print(os); });

  if (!options.functions.empty()) {
    selectFunctions(module, options.functions);
  }
  lowered.params = readParams(module);
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal() || func.isPrivate()) {
      continue;
    }
    if (std::string why = reservedSymbol(func.getName()); !why.empty()) {
      throw Error("kiln: a function cannot be called '" +
                  func.getName().str() + "': " + why);
    }
    // Compiled code writes no argument of the caller's but those that a
    // result updates in place, and only in CPU code
    // (kiln-mark-in-place-arguments in the pipelines).
    lowered.functions.push_back(
        readSpec(func, options.gpuChip.empty(),
                 !options.gpuChip.empty() && options.gpuResidentState));
  }

  auto start = std::chrono::steady_clock::now();
  module->setAttr(mlir::kiln::kTargetAttr, *target);
  PassManager linalg(context);
  PassManager llvmPm(context);
  if (options.gpuChip.empty()) {
    mlir::kiln::buildKilnToLinalgPipeline(
        linalg, mlir::kiln::kCpuAttentionBlock, options.prepareWeights,
        /*attentionKernel=*/false, options.precision == "bf16");
    mlir::kiln::buildLinalgToLLVMPipeline(llvmPm, options.precision,
                                          options.bf16Kernels);
  } else {
    mlir::kiln::buildKilnToLinalgPipeline(linalg, /*attentionBlock=*/0,
                                          /*prepareWeights=*/false,
                                          /*attentionKernel=*/true);
    mlir::kiln::buildLinalgToGpuPipeline(
        llvmPm, {.resident = options.gpuResidentState,
                 .math = options.gpuMath,
                 .costSizes = options.gpuCostSizes,
                 .costDevice = options.gpuCostDevice,
                 .costReport = options.gpuCostReport,
                 .hostKernels = options.gpuHostKernels});
  }
  if (failed(linalg.run(module))) {
    throw Error("kiln: lowering to linalg failed:" + diagnostics.str());
  }
  for (FunctionSpec &spec : lowered.functions) {
    addPreparedArguments(module.lookupSymbol<func::FuncOp>(spec.name), spec);
  }
  dumpStage(options, "linalg.mlir",
            [&](llvm::raw_ostream &os) { module->print(os); });
  if (failed(llvmPm.run(module))) {
    throw Error("kiln: lowering to LLVM failed:" + diagnostics.str());
  }
  dumpStage(options, "llvm.mlir",
            [&](llvm::raw_ostream &os) { module->print(os); });
  lowered.seconds = secondsSince(start);
}

LoweredModule lowerToLLVMDialect(ModuleOp source,
                                 const LoweringOptions &options) {
  // Work in a context of our own so that the caller's module is untouched and
  // the result owns everything it needs.
  std::string text;
  {
    llvm::raw_string_ostream os(text);
    source->print(os, OpPrintingFlags().printGenericOpForm());
  }
  return lowerSourceToLLVMDialect(text, "the module", options);
}

LoweredModule lowerSourceToLLVMDialect(const std::string &source,
                                       const std::string &what,
                                       const LoweringOptions &options) {
  LoweredModule lowered;
  lowered.context = makeContext();
  DiagnosticCollector diagnostics(lowered.context.get());
  lowered.module = parseSourceString<ModuleOp>(source, lowered.context.get());
  if (!lowered.module) {
    throw Error("kiln: " + what + " does not parse:" + diagnostics.str());
  }
  lower(lowered, options, diagnostics);
  return lowered;
}

std::unique_ptr<llvm::TargetMachine>
createTargetMachine(mlir::kiln::TargetAttr cpu, unsigned optLevel) {
  if (!cpu) {
    throw Error("kiln: the lowered module names no target CPU (its "
                "'kiln.target' attribute)");
  }
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    // The AMX kernels' inline `syscall` (kiln-bf16-products) is assembled.
    llvm::InitializeNativeTargetAsmParser();
  });
  llvm::Triple triple(llvm::sys::getProcessTriple());
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) {
    throw Error("kiln: no code generator for " + triple.str() + ": " + error);
  }
  std::string name = cpu.getCpu().str();
  std::string features = cpu.getFeatures().str();
  llvm::TargetOptions targetOptions;
  // Fuse multiply-adds into FMAs (as every BLAS does).
  targetOptions.AllowFPOpFusion = llvm::FPOpFusion::Fast;
  // Constructors (the GPU target's module loads) in .init_array, which the
  // C runtime runs; it ignores .ctors sections.
  targetOptions.UseInitArray = true;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, name, features, targetOptions, llvm::Reloc::PIC_, std::nullopt,
      codeGenOptLevel(optLevel)));
  if (!machine) {
    throw Error("kiln: cannot create a target machine for '" + name + "'");
  }
  return machine;
}

llvm::CodeGenOptLevel codeGenOptLevel(unsigned optLevel) {
  return *llvm::CodeGenOpt::getLevel(int(std::min(optLevel, 3u)));
}

/// Whether `loop`'s own blocks (not those of loops inside it) multiply and
/// add vectors of floats: a contraction's k loop, whose inner loops over a
/// register tile's rows LLVM unrolls completely.
static bool multipliesAndAddsVectors(const llvm::Loop &loop,
                                     const llvm::LoopInfo &loops) {
  bool multiplies = false, adds = false;
  for (llvm::BasicBlock *block : loop.blocks()) {
    if (loops.getLoopFor(block) != &loop) {
      continue;
    }
    for (const llvm::Instruction &inst : *block) {
      if (inst.getType()->isVectorTy()) {
        multiplies |= inst.getOpcode() == llvm::Instruction::FMul;
        adds |= inst.getOpcode() == llvm::Instruction::FAdd;
      }
    }
  }
  return multiplies && adds;
}

/// Keeps LLVM's runtime unrolling (a loop whose trip count is known only at
/// run time copied 2-8 times, with a remainder loop) for contractions' k
/// loops and turns it off for every other loop Kiln emits
/// (llvm.loop.unroll.runtime.disable): those are already tiled and
/// vectorized, their copies did not run faster, and making them took about
/// a third of LLVM's time on dynamic shapes. Measured on AMD Zen 3,
/// 2026-12-03: an attention block's gradient at dynamic sizes compiled for
/// x86-64-v4 in 3.2-3.9 s of LLVM time instead of 4.7-6.3 s; in-process A/B
/// runs of the 42 GEMM shapes and of layernorm, GELU and softmax chains
/// were within noise (turning it off for the k loops too made weight
/// gradients 4-10% slower). Complete unrolling of loops with a known trip
/// count is kept.
static void limitRuntimeUnrolling(llvm::Function &fn) {
  llvm::DominatorTree dominators(fn);
  llvm::LoopInfo loops(dominators);
  for (llvm::Loop *loop : loops.getLoopsInPreorder()) {
    if (!multipliesAndAddsVectors(*loop, loops)) {
      llvm::addStringMetadataToLoop(loop, "llvm.loop.unroll.runtime.disable");
    }
  }
}

void optimizeModule(llvm::Module &module, llvm::TargetMachine &machine,
                    unsigned optLevel) {
  // The packed wrappers (ExecutionEngine's _mlir_<name>, AOT's <name>.packed)
  // only move descriptor words, thousands of them for a deep model's
  // training step: optimizing them would cost more than it could save.
  for (llvm::Function &fn : module) {
    if (!fn.isDeclaration() && (fn.getName().starts_with("_mlir_") ||
                                fn.getName().ends_with(".packed"))) {
      fn.addFnAttr(llvm::Attribute::NoInline);
      fn.addFnAttr(llvm::Attribute::OptimizeNone);
    }
  }
  // Kernels (kiln-outline-kernels) are called only from the module: the
  // JIT's packed wrappers of them (_mlir_kiln_kernel_*) are never looked up,
  // and internal kernels get the same interprocedural optimization as in
  // ahead-of-time objects (which internalize everything), so that JIT and
  // AOT code compute bit-identical results (LLVM's argument promotion
  // changed how a 16-element optimizer update contracted its FMAs).
  std::vector<llvm::Function *> unused;
  for (llvm::Function &fn : module) {
    if (fn.getName().starts_with("_mlir_kiln_kernel_")) {
      unused.push_back(&fn);
    }
  }
  for (llvm::Function *fn : unused) {
    fn->eraseFromParent();
  }
  for (llvm::Function &fn : module) {
    if (!fn.isDeclaration() && fn.getName().starts_with("kiln_kernel_")) {
      fn.setLinkage(llvm::GlobalValue::InternalLinkage);
    }
  }
  // The glue marked optnone (above, and by kiln-outline-kernels) still goes
  // through the pipeline: makeOptimizingTransformer registers no optnone
  // instrumentation, and the simplification is what keeps the backend fast
  // on it (left raw, its descriptor aggregates took SelectionDAG twice as
  // long as the whole pipeline saved). Only the vectorizers, which skip
  // noimplicitfloat functions, are kept off it: glue has nothing to
  // vectorize, and the SLP vectorizer's cost model, quadratic in a block's
  // length, took 200 of the 222 s an encoder-decoder's GPU training step
  // took to compile (GPU glue passes each launch dozens of arguments).
  // Kernels keep LLVM's runtime unrolling for their k loops alone.
  for (llvm::Function &fn : module) {
    if (fn.isDeclaration()) {
      continue;
    }
    if (fn.hasOptNone()) {
      fn.addFnAttr(llvm::Attribute::NoImplicitFloat);
    } else {
      limitRuntimeUnrolling(fn);
    }
  }
  module.setDataLayout(machine.createDataLayout());
  module.setTargetTriple(machine.getTargetTriple());
  auto transformer = makeOptimizingTransformer(optLevel, 0, &machine);
  if (llvm::Error err = transformer(&module)) {
    throw Error("kiln: LLVM optimization failed: " +
                llvm::toString(std::move(err)));
  }
}

} // namespace kiln
