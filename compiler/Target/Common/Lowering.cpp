//===- Lowering.cpp - Kiln IR to the LLVM dialect, for JIT and AOT --------===//
//
// The pipeline is the same as kiln-opt --kiln-to-llvm. Before lowering, an
// input contract is read off the kiln IR (which arguments are token ids of
// which table, which dynamic sizes must agree, how long a learned position
// table is); the runtime checks every call against it (runtime/Function.h).
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/Common/Lowering.h"

#include "compiler/Codegen/CPU/TargetInfo.h"
#include "compiler/Codegen/Common/Attributes.h"

#include "compiler/InitAll.h"
#include "compiler/Pipelines/Pipelines.h"
#include "dialects/Kiln/IR/DTypes.h"
#include "dialects/Kiln/IR/KilnOps.h"
#include "runtime/Error.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
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

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
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

//===----------------------------------------------------------------------===//
// Input contract
//===----------------------------------------------------------------------===//

/// A dynamic size of a value: (value, dimension).
using DimKey = std::pair<void *, int64_t>;

/// The input contract of a function: what its kiln ops state of their
/// sizes (ShapeContractOpInterface), as conditions on its arguments that the
/// runtime checks before every call.
class ContractBuilder : public mlir::kiln::ShapeContract {
public:
  ContractBuilder(func::FuncOp func, FunctionSpec &spec)
      : func(func), spec(spec) {}

  /// Fills the groups, position limits and id bounds of `spec`.
  void build() {
    func.walk([&](mlir::kiln::ShapeContractOpInterface op) {
      op.addShapeContract(*this);
    });
    uniteConcatenatedParts();
    // Group argument dims by class.
    std::map<DimKey, size_t> groupOf;
    for (auto [index, arg] : llvm::enumerate(func.getArguments())) {
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type) {
        continue;
      }
      for (int64_t d = 0; d < type.getRank(); ++d) {
        DimKey leader = classes.getOrInsertLeaderValue(key(arg, d));
        auto [it, inserted] = groupOf.try_emplace(leader, spec.groups.size());
        if (inserted) {
          spec.groups.push_back({{}, staticSize(leader)});
        }
        spec.groups[it->second].dims.push_back({index, d});
      }
    }
    for (auto &[pe, offsetArg, maxLen] : positionLimits) {
      auto it = groupOf.find(classes.getOrInsertLeaderValue(pe));
      if (it != groupOf.end()) {
        spec.positionLimits.push_back({it->second, offsetArg, maxLen});
      }
    }
    for (auto &[dim, size] : minimums) {
      auto it = groupOf.find(classes.getOrInsertLeaderValue(dim));
      if (it != groupOf.end()) {
        int64_t &min = spec.groups[it->second].minSize;
        min = std::max(min, size);
      }
    }
  }

  void same(Value a, int64_t da, Value b, int64_t db) override {
    classes.unionSets(key(a, da), key(b, db));
  }

  void idsWithin(Value ids, int64_t bound,
                 std::optional<int64_t> ignored) override {
    std::optional<size_t> index = argIndex(ids);
    if (!index) {
      return; // computed ids: compiled code clamps them
    }
    ArgSpec &arg = spec.args[*index];
    if (arg.idBound < 0) {
      arg.idBound = bound;
      arg.ignoredId = ignored;
      return;
    }
    // Read by several ops: within every bound, and exempt only where all
    // of them exempt the same value.
    arg.idBound = std::min(arg.idBound, bound);
    if (arg.ignoredId != ignored) {
      arg.ignoredId.reset();
    }
  }

  void positionsWithin(Value x, int64_t dim, Value offset,
                       int64_t maxLen) override {
    int64_t offsetArg = -1;
    if (offset) {
      std::optional<size_t> index = argIndex(offset);
      if (!index) {
        return; // a computed offset: compiled code clamps the rows it reads
      }
      offsetArg = int64_t(*index);
    }
    positionLimits.push_back({key(x, dim), offsetArg, maxLen});
  }

  void sumOf(Value result, int64_t axis, ValueRange parts) override {
    sums.push_back({result, axis, SmallVector<Value>(parts)});
  }

  void atLeast(Value x, int64_t dim, int64_t size) override {
    minimums.push_back({key(x, dim), size});
  }

private:
  /// Two concatenations whose results must be equally long along their
  /// axes (a decoder's key and value caches, each the past plus the new
  /// positions, read together by attention), whose parts are pairwise known
  /// to be equally long (equal static sizes, or sizes the contract already
  /// equates) but for one pair: then that pair must be equally long
  /// (exactly). A sum has no dimension of its own to check; without this, a
  /// key cache longer than the value cache passed and attention read past
  /// the end of the values.
  void uniteConcatenatedParts() {
    auto axisSize = [](Value v, int64_t axis) {
      return cast<RankedTensorType>(v.getType()).getDimSize(axis);
    };
    // The position of the one pair of parts of `a` and `b` not known to be
    // equally long, else nullopt.
    auto unknownPart = [&](const Sum &a,
                           const Sum &b) -> std::optional<size_t> {
      if (a.parts.size() != b.parts.size()) {
        return std::nullopt;
      }
      std::optional<size_t> part;
      for (auto [i, x, y] : llvm::enumerate(a.parts, b.parts)) {
        int64_t sx = axisSize(x, a.axis), sy = axisSize(y, b.axis);
        bool bothStatic =
            !ShapedType::isDynamic(sx) && !ShapedType::isDynamic(sy);
        if ((bothStatic && sx == sy) ||
            classes.getOrInsertLeaderValue(key(x, a.axis)) ==
                classes.getOrInsertLeaderValue(key(y, b.axis))) {
          continue;
        }
        if (bothStatic || part) {
          return std::nullopt; // never equal, or more than one unknown
        }
        part = i;
      }
      return part;
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (const Sum &a : sums) {
        for (const Sum &b : sums) {
          std::optional<size_t> part;
          if (&a == &b ||
              classes.getOrInsertLeaderValue(key(a.result, a.axis)) !=
                  classes.getOrInsertLeaderValue(key(b.result, b.axis)) ||
              !(part = unknownPart(a, b))) {
            continue;
          }
          Value x = a.parts[*part], y = b.parts[*part];
          if (classes.getOrInsertLeaderValue(key(x, a.axis)) !=
              classes.getOrInsertLeaderValue(key(y, b.axis))) {
            same(x, a.axis, y, b.axis);
            changed = true;
          }
        }
      }
    }
  }

  DimKey key(Value v, int64_t d) {
    DimKey k{v.getAsOpaquePointer(), d};
    classes.insert(k);
    auto type = cast<RankedTensorType>(v.getType());
    if (!type.isDynamicDim(d)) {
      sizes[k] = type.getDimSize(d);
    }
    return k;
  }

  int64_t staticSize(DimKey leader) {
    for (auto it = classes.findLeader(leader); it != classes.member_end();
         ++it) {
      auto found = sizes.find(*it);
      if (found != sizes.end()) {
        return found->second;
      }
    }
    return -1;
  }

  std::optional<size_t> argIndex(Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner()->getParentOp() == func.getOperation()) {
        return arg.getArgNumber();
      }
    }
    return std::nullopt;
  }

  func::FuncOp func;
  llvm::EquivalenceClasses<DimKey> classes;
  std::map<DimKey, int64_t> sizes;
  struct PendingLimit {
    DimKey dim;
    int64_t offsetArg;
    int64_t maxLen;
  };
  std::vector<PendingLimit> positionLimits;
  /// Dimensions that are sums of others (concatenations).
  struct Sum {
    Value result;
    int64_t axis;
    SmallVector<Value> parts;
  };
  std::vector<Sum> sums;
  /// Dimensions with a least size.
  std::vector<std::pair<DimKey, int64_t>> minimums;
  FunctionSpec &spec;
};

} // namespace

void dumpStage(const LoweringOptions &options, const std::string &suffix,
               const std::function<void(llvm::raw_ostream &)> &print) {
  if (options.dumpDirectory.empty()) {
    return;
  }
  std::string path =
      options.dumpDirectory + "/" + options.dumpStem + "." + suffix;
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
/// results marked kiln.updates are written into their arguments.
static FunctionSpec readSpec(func::FuncOp func, bool inPlace) {
  FunctionSpec spec;
  spec.name = func.getName().str();
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
    ArgSpec arg;
    auto name = func.getArgAttrOfType<StringAttr>(i, "kiln.name");
    arg.name = name ? name.str() : "arg" + std::to_string(i);
    auto kind = func.getArgAttrOfType<StringAttr>(i, "kiln.kind");
    arg.isParam = kind && kind.getValue() == "param";
    arg.isState = kind && kind.getValue() == "state";
    if (auto require = func.getArgAttrOfType<StringAttr>(
            i, mlir::kiln::kRequireAttrName)) {
      if (require.getValue() == "positive") {
        arg.require = ArgSpec::Require::positive;
      } else if (require.getValue() == "finite-nonnegative") {
        arg.require = ArgSpec::Require::finiteNonnegative;
      } else {
        throw Error("kiln: function '" + spec.name + "' argument #" +
                    std::to_string(i) + " has an unknown kiln.require '" +
                    require.getValue().str() + "'");
      }
    }
    if (auto tensor = dyn_cast<RankedTensorType>(type)) {
      std::optional<DType> dtype = mlir::kiln::dtypeOf(tensor);
      if (!dtype) {
        throw Error("kiln: function '" + spec.name + "' argument #" +
                    std::to_string(i) + " has element type " +
                    llvm::formatv("{0}", tensor.getElementType()).str() +
                    ": compiled functions take f32, i32, i64 and i1 tensors");
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
    spec.args.push_back(arg);
  }
  for (auto [r, type] : llvm::enumerate(func.getResultTypes())) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.getElementType().isF32()) {
      throw Error("kiln: function '" + spec.name +
                  "' must return f32 tensors only");
    }
    ResultSpec result;
    auto name = func.getResultAttrOfType<StringAttr>(r, "kiln.name");
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
        func.getResultAttrOfType<IntegerAttr>(r, mlir::kiln::kUpdatesAttrName);
    if (inPlace && updates) {
      result.updates = updates.getInt();
    }
    spec.results.push_back(result);
  }
  ContractBuilder(func, spec).build();
  if (auto tokens = func->getAttrOfType<DictionaryAttr>(
          mlir::kiln::kLossTokensAttrName)) {
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

/// Lowers `lowered.module` in place. `lowered` must outlive `diagnostics`
/// (whose handler lives in its context), also when this throws.
static void lower(LoweredModule &lowered, const LoweringOptions &options,
                  DiagnosticCollector &diagnostics) {
  MLIRContext *context = lowered.context.get();
  ModuleOp module = *lowered.module;
  if (!options.gpuChip.empty() && !mlir::kiln::isGpuChip(options.gpuChip)) {
    throw Error("kiln: '" + options.gpuChip +
                "' is not an NVIDIA GPU architecture (sm_80, sm_90, ...)");
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
    // Compiled code writes no argument of the caller's but those that a
    // result updates in place, and only in CPU code
    // (kiln-mark-in-place-arguments in the pipelines).
    lowered.functions.push_back(readSpec(func, options.gpuChip.empty()));
  }

  auto start = std::chrono::steady_clock::now();
  PassManager linalg(context);
  PassManager llvmPm(context);
  if (options.gpuChip.empty()) {
    mlir::kiln::buildKilnToLinalgPipeline(linalg,
                                          mlir::kiln::kCpuAttentionBlock);
    mlir::kiln::buildLinalgToLLVMPipeline(llvmPm, options.cpu);
  } else {
    mlir::kiln::buildKilnToLinalgPipeline(linalg);
    mlir::kiln::buildLinalgToGpuPipeline(llvmPm, options.gpuChip);
  }
  if (failed(linalg.run(module))) {
    throw Error("kiln: lowering to linalg failed:" + diagnostics.str());
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

std::unique_ptr<llvm::TargetMachine> createTargetMachine(const std::string &cpu,
                                                         unsigned optLevel) {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  llvm::Triple triple(llvm::sys::getProcessTriple());
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) {
    throw Error("kiln: no code generator for " + triple.str() + ": " + error);
  }
  std::string name = cpu == "host" ? llvm::sys::getHostCPUName().str() : cpu;
  std::string features;
  if (cpu == "host") {
    llvm::SubtargetFeatures list;
    for (const auto &feature : llvm::sys::getHostCPUFeatures()) {
      list.AddFeature(feature.getKey(), feature.getValue());
    }
    features = list.getString();
  } else if (llvm::Expected<mlir::kiln::cpu::TargetInfo> info =
                 mlir::kiln::cpu::lookupTarget(cpu);
             !info) {
    throw Error("kiln: " + llvm::toString(info.takeError()));
  }
  llvm::TargetOptions targetOptions;
  // Fuse multiply-adds into FMAs (as every BLAS does).
  targetOptions.AllowFPOpFusion = llvm::FPOpFusion::Fast;
  // Constructors (the GPU target's module loads) in .init_array, which the
  // C runtime runs; it ignores .ctors sections.
  targetOptions.UseInitArray = true;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, name, features, targetOptions, llvm::Reloc::PIC_, std::nullopt,
      optLevel >= 3 ? llvm::CodeGenOptLevel::Aggressive
                    : llvm::CodeGenOptLevel::Default));
  if (!machine) {
    throw Error("kiln: cannot create a target machine for '" + cpu + "'");
  }
  return machine;
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
  for (llvm::Function &fn : module) {
    if (!fn.isDeclaration() && fn.hasOptNone()) {
      fn.addFnAttr(llvm::Attribute::NoImplicitFloat);
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
