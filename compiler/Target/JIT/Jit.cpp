//===- Jit.cpp - Compile kiln IR in-process and call it -------------------===//
//
// The pipeline is the same as kiln-opt --kiln-to-llvm. Before lowering, an
// input contract is read off the kiln IR (which arguments are token ids of
// which table, which dynamic sizes must agree, how long a learned position
// table is), and every call is checked against it, so compiled code only ever
// sees inputs it can process without reading out of bounds.
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/JIT/Jit.h"

#include "compiler/InitAll.h"
#include "compiler/Pipelines/Pipelines.h"
#include "dialects/Kiln/IR/KilnOps.h"
#include "runtime/Error.h"
#include "runtime/MemrefCopy.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ExecutionEngine/Orc/CoreContainers.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
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

DType dtypeOf(Type type) {
  if (type.isF32()) {
    return DType::f32;
  }
  if (type.isInteger(1)) {
    return DType::i1;
  }
  if (type.isInteger(32)) {
    return DType::i32;
  }
  if (type.isInteger(64)) {
    return DType::i64;
  }
  throw Error("kiln: unsupported element type in a compiled function");
}

//===----------------------------------------------------------------------===//
// Input contract
//===----------------------------------------------------------------------===//

/// A dynamic size of a value: (value, dimension).
using DimKey = std::pair<void *, int64_t>;

/// Sizes that must agree at run time, and the argument sizes in each group.
struct DimContract {
  /// Groups of argument dims (argument index, dim) that must be equal.
  std::vector<std::vector<std::pair<size_t, int64_t>>> groups;
  /// A static size that a group must have (or -1).
  std::vector<int64_t> groupSize;
  /// Learned positional tables: (group, offset argument or -1, max_len).
  struct PositionLimit {
    size_t group;
    int64_t offsetArg;
    int64_t maxLen;
  };
  std::vector<PositionLimit> positionLimits;
};

class ContractBuilder {
public:
  explicit ContractBuilder(func::FuncOp func) : func(func) {}

  DimContract build(FunctionSpec &spec) {
    func.walk([&](Operation *op) { visit(op, spec); });
    // Group argument dims by class.
    std::map<DimKey, size_t> groupOf;
    DimContract contract;
    for (auto [index, arg] : llvm::enumerate(func.getArguments())) {
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type) {
        continue;
      }
      for (int64_t d = 0; d < type.getRank(); ++d) {
        DimKey leader = classes.getOrInsertLeaderValue(key(arg, d));
        auto [it, inserted] =
            groupOf.try_emplace(leader, contract.groups.size());
        if (inserted) {
          contract.groups.emplace_back();
          contract.groupSize.push_back(staticSize(leader));
        }
        contract.groups[it->second].push_back({index, d});
      }
    }
    for (auto &[pe, offsetArg, maxLen] : positionLimits) {
      DimKey leader = classes.getOrInsertLeaderValue(pe);
      auto it = groupOf.find(leader);
      if (it != groupOf.end()) {
        contract.positionLimits.push_back({it->second, offsetArg, maxLen});
      }
    }
    return contract;
  }

private:
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

  void unite(Value a, int64_t da, Value b, int64_t db) {
    classes.unionSets(key(a, da), key(b, db));
  }
  /// Result dim i == operand dim i for the trailing-aligned dims.
  void uniteAligned(Value a, Value b) {
    auto ta = cast<RankedTensorType>(a.getType());
    auto tb = cast<RankedTensorType>(b.getType());
    int64_t rank = std::min(ta.getRank(), tb.getRank());
    for (int64_t i = 1; i <= rank; ++i) {
      int64_t da = ta.getRank() - i, db = tb.getRank() - i;
      // A static 1 broadcasts; everything else must agree.
      if (ta.getDimSize(da) == 1 || tb.getDimSize(db) == 1) {
        continue;
      }
      unite(a, da, b, db);
    }
  }
  void uniteAll(Value a, Value b) {
    auto ta = cast<RankedTensorType>(a.getType());
    for (int64_t d = 0; d < ta.getRank(); ++d) {
      unite(a, d, b, d);
    }
  }

  std::optional<size_t> argIndex(Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner()->getParentOp() == func.getOperation()) {
        return arg.getArgNumber();
      }
    }
    return std::nullopt;
  }

  void visit(Operation *op, FunctionSpec &spec) {
    Value result = op->getNumResults() == 1 ? op->getResult(0) : Value();
    if (isa<AddOp, SubOp, MulOp, DivOp>(op)) {
      uniteAligned(op->getOperand(0), op->getOperand(1));
      uniteAligned(result, op->getOperand(0));
      uniteAligned(result, op->getOperand(1));
    } else if (isa<ReluOp, TanhOp, ExpOp, LogOp, GeluOp, ScaleOp, DropoutOp,
                   SoftmaxOp, LogSoftmaxOp, LayerNormOp, FeedForwardOp>(op)) {
      uniteAll(result, op->getOperand(0));
      if (auto ffn = dyn_cast<FeedForwardOp>(op)) {
        auto w1 = cast<RankedTensorType>(ffn.getW1().getType());
        int64_t rank = cast<RankedTensorType>(result.getType()).getRank();
        unite(ffn.getInput(), rank - 1, ffn.getW1(), 1);
        (void)w1;
      }
    } else if (auto emb = dyn_cast<EmbeddingOp>(op)) {
      int64_t rank = cast<RankedTensorType>(emb.getIds().getType()).getRank();
      for (int64_t d = 0; d < rank; ++d) {
        unite(result, d, emb.getIds(), d);
      }
      unite(result, rank, emb.getTable(), 1);
      auto table = cast<RankedTensorType>(emb.getTable().getType());
      if (auto index = argIndex(emb.getIds());
          index && !table.isDynamicDim(0)) {
        spec.args[*index].idBound = table.getDimSize(0);
      }
    } else if (auto pe = dyn_cast<PositionalEncodingOp>(op)) {
      uniteAll(result, pe.getInput());
      auto input = cast<RankedTensorType>(pe.getInput().getType());
      if (pe.getTable()) {
        unite(pe.getInput(), input.getRank() - 1, pe.getTable(), 1);
        auto table = cast<RankedTensorType>(pe.getTable().getType());
        if (!table.isDynamicDim(0)) {
          int64_t offsetArg = -1;
          if (pe.getOffset()) {
            auto index = argIndex(pe.getOffset());
            offsetArg = index ? int64_t(*index) : -2; // -2: not checkable
          }
          if (offsetArg != -2) {
            positionLimits.push_back({key(pe.getInput(), input.getRank() - 2),
                                      offsetArg, table.getDimSize(0)});
          }
        }
      }
    } else if (auto lin = dyn_cast<LinearOp>(op)) {
      int64_t rank = cast<RankedTensorType>(result.getType()).getRank();
      for (int64_t d = 0; d + 1 < rank; ++d) {
        unite(result, d, lin.getInput(), d);
      }
      unite(lin.getInput(), rank - 1, lin.getWeight(), 1);
      unite(result, rank - 1, lin.getWeight(), 0);
    } else if (auto mm = dyn_cast<MatmulOp>(op)) {
      int64_t rank = cast<RankedTensorType>(result.getType()).getRank();
      for (int64_t d = 0; d + 2 < rank; ++d) {
        unite(mm.getLhs(), d, mm.getRhs(), d);
        unite(result, d, mm.getLhs(), d);
      }
      int64_t lk = mm.getTransposeLhs() ? rank - 2 : rank - 1;
      int64_t lm = mm.getTransposeLhs() ? rank - 1 : rank - 2;
      int64_t rk = mm.getTransposeRhs() ? rank - 1 : rank - 2;
      int64_t rn = mm.getTransposeRhs() ? rank - 2 : rank - 1;
      unite(mm.getLhs(), lk, mm.getRhs(), rk);
      unite(result, rank - 2, mm.getLhs(), lm);
      unite(result, rank - 1, mm.getRhs(), rn);
    } else if (auto mha = dyn_cast<MultiHeadAttentionOp>(op)) {
      uniteAll(result, mha.getQuery());
      unite(mha.getQuery(), 0, mha.getKeyValue(), 0);
      if (Value mask = mha.getKeyPaddingMask()) {
        unite(mask, 0, mha.getQuery(), 0);
        unite(mask, 1, mha.getKeyValue(), 1);
      }
    } else if (auto tr = dyn_cast<TransposeOp>(op)) {
      for (auto [i, p] : llvm::enumerate(tr.getPermutation())) {
        unite(result, i, tr.getInput(), p);
      }
    } else if (auto rs = dyn_cast<ReshapeOp>(op)) {
      for (auto [i, entry] : llvm::enumerate(rs.getShape())) {
        if (entry == 0) {
          unite(result, i, rs.getInput(), i);
        }
      }
    } else if (auto red = dyn_cast<ReduceOp>(op)) {
      auto type = cast<RankedTensorType>(red.getInput().getType());
      std::set<int64_t> axes;
      for (int64_t a : red.getAxes()) {
        axes.insert(a < 0 ? a + type.getRank() : a);
      }
      int64_t out = 0;
      for (int64_t d = 0; d < type.getRank(); ++d) {
        if (!axes.count(d)) {
          unite(result, out++, red.getInput(), d);
        } else if (red.getKeepDims()) {
          ++out;
        }
      }
    } else if (auto sl = dyn_cast<SliceOp>(op)) {
      int64_t rank = cast<RankedTensorType>(result.getType()).getRank();
      int64_t axis = int64_t(sl.getAxis());
      axis = axis < 0 ? axis + rank : axis;
      for (int64_t d = 0; d < rank; ++d) {
        if (d != axis) {
          unite(result, d, sl.getInput(), d);
        }
      }
    } else if (auto cat = dyn_cast<ConcatOp>(op)) {
      int64_t rank = cast<RankedTensorType>(result.getType()).getRank();
      int64_t axis = int64_t(cat.getAxis());
      axis = axis < 0 ? axis + rank : axis;
      for (Value input : cat.getInputs()) {
        for (int64_t d = 0; d < rank; ++d) {
          if (d != axis) {
            unite(result, d, input, d);
          }
        }
      }
    } else if (isa<CrossEntropyOp, NLLLossOp>(op)) {
      Value input = op->getOperand(0), targets = op->getOperand(1);
      auto tt = cast<RankedTensorType>(targets.getType());
      for (int64_t d = 0; d < tt.getRank(); ++d) {
        unite(input, d, targets, d);
      }
      auto it = cast<RankedTensorType>(input.getType());
      if (auto index = argIndex(targets);
          index && !it.isDynamicDim(it.getRank() - 1)) {
        spec.args[*index].idBound = it.getDimSize(it.getRank() - 1);
        if (auto ignore = op->getAttrOfType<IntegerAttr>("ignore_index")) {
          spec.args[*index].ignoredId = ignore.getInt();
        }
      }
    }
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
};

void ensureNativeTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

} // namespace

//===----------------------------------------------------------------------===//
// JitModule
//===----------------------------------------------------------------------===//

struct JitModule::Impl {
  std::unique_ptr<MLIRContext> context;
  std::unique_ptr<ExecutionEngine> engine;
  std::map<std::string, FunctionSpec> specs;
  std::map<std::string, DimContract> contracts;
  double pipelineSeconds = 0, codegenSeconds = 0;
};

JitModule::JitModule(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JitModule::~JitModule() = default;

double JitModule::pipelineSeconds() const { return impl_->pipelineSeconds; }
double JitModule::codegenSeconds() const { return impl_->codegenSeconds; }

static void writeFile(const JitOptions &options, const std::string &suffix,
                      const std::function<void(llvm::raw_ostream &)> &print) {
  if (options.dumpDirectory.empty()) {
    return;
  }
  std::string path =
      options.dumpDirectory + "/" + options.dumpStem + "." + suffix;
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec) {
    throw Error("kiln: cannot write IR dump '" + path + "': " + ec.message());
  }
  print(os);
}

static MLIRContext *jitContextFor(std::unique_ptr<MLIRContext> &context) {
  DialectRegistry registry;
  registerAllDialects(registry);
  context = std::make_unique<MLIRContext>(registry);
  context->loadAllAvailableDialects();
  registerAllPasses();
  return context.get();
}

std::shared_ptr<JitModule> JitModule::compile(ModuleOp source,
                                              const JitOptions &options) {
  ensureNativeTarget();
  auto impl = std::make_unique<Impl>();
  // Work in a context of our own so that the caller's module is untouched and
  // the JIT owns everything it needs.
  std::string text;
  {
    llvm::raw_string_ostream os(text);
    source->print(os, OpPrintingFlags().printGenericOpForm());
  }
  MLIRContext *context = jitContextFor(impl->context);
  DiagnosticCollector diagnostics(context);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, context);
  if (!module || failed(verify(*module))) {
    throw Error("kiln: the module does not verify:" + diagnostics.str());
  }
  if (!options.prePipeline.empty()) {
    PassManager pre(context);
    if (failed(mlir::kiln::addPipeline(pre, options.prePipeline)) ||
        failed(pre.run(*module))) {
      throw Error("kiln: the pipeline '" + options.prePipeline +
                  "' failed:" + diagnostics.str());
    }
  }
  writeFile(options, "kiln.mlir",
            [&](llvm::raw_ostream &os) { module->print(os); });

  // Signatures and input contracts, read off the kiln IR.
  for (auto func : module->getOps<func::FuncOp>()) {
    if (func.isExternal()) {
      continue;
    }
    FunctionSpec spec;
    spec.name = func.getName().str();
    for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
      ArgSpec arg;
      auto name = func.getArgAttrOfType<StringAttr>(i, "kiln.name");
      arg.name = name ? name.str() : "arg" + std::to_string(i);
      auto kind = func.getArgAttrOfType<StringAttr>(i, "kiln.kind");
      arg.isParam = kind && kind.getValue() == "param";
      arg.isState = kind && kind.getValue() == "state";
      if (auto tensor = dyn_cast<RankedTensorType>(type)) {
        arg.dtype = dtypeOf(tensor.getElementType());
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
    for (Type type : func.getResultTypes()) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      if (!tensor || !tensor.getElementType().isF32()) {
        throw Error("kiln: function '" + spec.name +
                    "' must return f32 tensors only");
      }
      std::vector<int64_t> shape;
      for (int64_t size : tensor.getShape()) {
        shape.push_back(ShapedType::isDynamic(size) ? -1 : size);
      }
      spec.results.push_back(shape);
    }
    impl->contracts[spec.name] = ContractBuilder(func).build(spec);
    impl->specs[spec.name] = spec;
    // Compiled code must never write into the caller's tensors.
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      if (isa<TensorType>(func.getArgumentTypes()[i])) {
        func.setArgAttr(i, "bufferization.writable",
                        BoolAttr::get(context, false));
      }
    }
  }

  auto start = std::chrono::steady_clock::now();
  PassManager linalg(context);
  PassManager llvmPm(context);
  if (failed(mlir::kiln::addPipeline(linalg,
                                     mlir::kiln::kilnToLinalgPipeline())) ||
      failed(mlir::kiln::addPipeline(llvmPm,
                                     mlir::kiln::linalgToLLVMPipeline()))) {
    throw Error("kiln: internal error: the pipelines do not parse");
  }
  if (failed(linalg.run(*module))) {
    throw Error("kiln: lowering to linalg failed:" + diagnostics.str());
  }
  writeFile(options, "linalg.mlir",
            [&](llvm::raw_ostream &os) { module->print(os); });
  if (failed(llvmPm.run(*module))) {
    throw Error("kiln: lowering to LLVM failed:" + diagnostics.str());
  }
  writeFile(options, "llvm.mlir",
            [&](llvm::raw_ostream &os) { module->print(os); });
  impl->pipelineSeconds = secondsSince(start);

  start = std::chrono::steady_clock::now();
  auto machineBuilder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!machineBuilder) {
    throw Error("kiln: cannot detect the host CPU: " +
                llvm::toString(machineBuilder.takeError()));
  }
  machineBuilder->setCodeGenOptLevel(options.optLevel >= 3
                                         ? llvm::CodeGenOptLevel::Aggressive
                                         : llvm::CodeGenOptLevel::Default);
  // Fuse multiply-adds into FMAs (as every BLAS does).
  machineBuilder->getOptions().AllowFPOpFusion = llvm::FPOpFusion::Fast;
  auto machine = machineBuilder->createTargetMachine();
  if (!machine) {
    throw Error("kiln: cannot create a target machine: " +
                llvm::toString(machine.takeError()));
  }
  auto transformer =
      makeOptimizingTransformer(options.optLevel, 0, machine->get());
  std::function<llvm::Error(llvm::Module *)> optimizeAndDump =
      [&](llvm::Module *m) -> llvm::Error {
    if (auto err = transformer(m)) {
      return err;
    }
    writeFile(options, "ll",
              [&](llvm::raw_ostream &os) { m->print(os, nullptr); });
    return llvm::Error::success();
  };
  ExecutionEngineOptions engineOptions;
  // Threaded loops call the LLVM OpenMP runtime.
  static const std::string openmp = KILN_OPENMP_LIBRARY;
  llvm::StringRef libraries[] = {openmp};
  engineOptions.sharedLibPaths = libraries;
  engineOptions.transformer = optimizeAndDump;
  engineOptions.jitCodeGenOptLevel = options.optLevel >= 3
                                         ? llvm::CodeGenOptLevel::Aggressive
                                         : llvm::CodeGenOptLevel::Default;
  auto engine =
      ExecutionEngine::create(*module, engineOptions, std::move(*machine));
  if (!engine) {
    throw Error("kiln: JIT compilation failed: " +
                llvm::toString(engine.takeError()) + diagnostics.str());
  }
  impl->engine = std::move(*engine);
  // The run-time functions compiled code may call, from the Kiln runtime.
  impl->engine->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap symbols;
    symbols[interner("memrefCopy")] = {
        llvm::orc::ExecutorAddr::fromPtr(&memrefCopy),
        llvm::JITSymbolFlags::Exported};
    return symbols;
  });
  // Machine code is generated on the first lookup: do it now, so that calls
  // are fast from the first one and the time is reported as compile time.
  for (const auto &[name, _] : impl->specs) {
    if (auto fn = impl->engine->lookupPacked(name); !fn) {
      throw Error("kiln: JIT compilation of '" + name +
                  "' failed: " + llvm::toString(fn.takeError()));
    }
  }
  impl->codegenSeconds = secondsSince(start);
  return std::shared_ptr<JitModule>(new JitModule(std::move(impl)));
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
       << " pre=" << options.prePipeline;
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
  std::unique_ptr<MLIRContext> context;
  jitContextFor(context);
  DiagnosticCollector diagnostics(context.get());
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(source, context.get());
  if (!module) {
    throw Error("kiln: the source does not parse:" + diagnostics.str());
  }
  return compile(*module, options);
}

const FunctionSpec &JitModule::spec(const std::string &name) const {
  auto it = impl_->specs.find(name);
  if (it == impl_->specs.end()) {
    std::string known;
    for (auto &[fn, _] : impl_->specs) {
      known += (known.empty() ? "" : ", ") + fn;
    }
    throw Error("kiln: no function '" + name +
                "' in the compiled module (it has: " + known + ")");
  }
  return it->second;
}

std::vector<std::string> JitModule::functions() const {
  std::vector<std::string> names;
  for (auto &[name, _] : impl_->specs) {
    names.push_back(name);
  }
  return names;
}

//===----------------------------------------------------------------------===//
// Calls
//===----------------------------------------------------------------------===//

static std::string describeArg(const FunctionSpec &spec, size_t index) {
  return "argument #" + std::to_string(index) + " '" + spec.args[index].name +
         "' of '" + spec.name + "'";
}

template <typename T>
static void checkIds(const Tensor &tensor, const ArgSpec &arg,
                     const std::string &what) {
  const T *data = tensor.data<T>();
  for (int64_t i = 0, n = tensor.numel(); i < n; ++i) {
    int64_t v = data[i];
    if ((v < 0 || v >= arg.idBound) && v != arg.ignoredId) {
      throw Error("kiln: " + what + " holds " + std::to_string(v) +
                  " at flat index " + std::to_string(i) + ", outside [0, " +
                  std::to_string(arg.idBound) + ")");
    }
  }
}

static void checkArguments(const FunctionSpec &spec,
                           const DimContract &contract,
                           const std::vector<Arg> &args) {
  if (args.size() != spec.args.size()) {
    throw Error("kiln: '" + spec.name + "' takes " +
                std::to_string(spec.args.size()) + " arguments, got " +
                std::to_string(args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgSpec &expected = spec.args[i];
    const Arg &arg = args[i];
    std::string what = describeArg(spec, i);
    if (expected.isScalar != arg.isScalar) {
      throw Error("kiln: " + what + " must be " +
                  (expected.isScalar ? "an i64 scalar" : "a tensor"));
    }
    if (arg.isScalar) {
      continue;
    }
    const Tensor &t = arg.tensor;
    if (!t.defined()) {
      throw Error("kiln: " + what + " is an empty (undefined) tensor");
    }
    if (t.dtype() != expected.dtype) {
      throw Error("kiln: " + what + " must have dtype " + name(expected.dtype) +
                  ", got " + name(t.dtype()));
    }
    bool shapeOk = t.rank() == int64_t(expected.shape.size());
    for (size_t d = 0; shapeOk && d < expected.shape.size(); ++d) {
      shapeOk = expected.shape[d] < 0 || expected.shape[d] == t.shape()[d];
    }
    if (!shapeOk) {
      std::vector<int64_t> shown = expected.shape;
      throw Error("kiln: " + what + " must have shape " + formatShape(shown) +
                  " (-1: any size), got " + formatShape(t.shape()));
    }
    if (expected.idBound >= 0) {
      if (t.dtype() == DType::i64) {
        checkIds<int64_t>(t, expected, what);
      } else if (t.dtype() == DType::i32) {
        checkIds<int32_t>(t, expected, what);
      }
    }
  }
  // Dynamic sizes that the model needs to agree.
  for (size_t g = 0; g < contract.groups.size(); ++g) {
    const auto &group = contract.groups[g];
    int64_t want = contract.groupSize[g];
    size_t wantFrom = SIZE_MAX;
    for (auto [argIndex, dim] : group) {
      int64_t size = args[argIndex].tensor.shape()[dim];
      if (want < 0) {
        want = size;
        wantFrom = argIndex;
        continue;
      }
      if (size != want) {
        std::string source = wantFrom == SIZE_MAX
                                 ? "the model's size " + std::to_string(want)
                                 : "dimension of " +
                                       describeArg(spec, wantFrom) + " (" +
                                       std::to_string(want) + ")";
        throw Error("kiln: dimension " + std::to_string(dim) + " of " +
                    describeArg(spec, argIndex) + " is " +
                    std::to_string(size) + " but must equal " + source);
      }
    }
  }
  for (const auto &limit : contract.positionLimits) {
    const auto &[argIndex, dim] = contract.groups[limit.group].front();
    int64_t length = args[argIndex].tensor.shape()[dim];
    int64_t offset = limit.offsetArg >= 0 ? args[limit.offsetArg].scalar : 0;
    if (offset < 0 || offset + length > limit.maxLen) {
      throw Error("kiln: positions [" + std::to_string(offset) + ", " +
                  std::to_string(offset + length) + ") of '" + spec.name +
                  "' exceed the learned position table (max_len " +
                  std::to_string(limit.maxLen) + ")");
    }
  }
}

namespace {
/// Where a memref descriptor's words live in the packed argument list.
struct Descriptor {
  void *allocated;
  void *aligned;
  int64_t offset;
  std::vector<int64_t> sizes, strides;
};
} // namespace

/// The MLIR marker of a memref that points into a global (not malloc'ed).
static constexpr uintptr_t kGlobalMarker = 0xdeadbeef;

std::vector<Tensor>
JitModule::run(const std::string &name, const ParameterStore &parameters,
               const std::map<std::string, Arg> &inputs) const {
  const FunctionSpec &fs = spec(name);
  std::vector<Arg> args;
  size_t used = 0;
  for (const ArgSpec &arg : fs.args) {
    if (arg.isParam) {
      args.emplace_back(parameters.get(arg.name));
      continue;
    }
    auto it = inputs.find(arg.name);
    if (it == inputs.end()) {
      throw Error("kiln: '" + name + "' needs the input '" + arg.name + "'");
    }
    args.push_back(it->second);
    ++used;
  }
  if (used != inputs.size()) {
    for (const auto &[input, _] : inputs) {
      bool known = false;
      for (const ArgSpec &arg : fs.args) {
        known |= !arg.isParam && arg.name == input;
      }
      if (!known) {
        throw Error("kiln: '" + name + "' has no input '" + input + "'");
      }
    }
  }
  return call(name, args);
}

std::vector<Tensor> JitModule::call(const std::string &name,
                                    const std::vector<Arg> &args) const {
  const FunctionSpec &fs = spec(name);
  checkArguments(fs, impl_->contracts.at(name), args);

  // Lay the arguments out as the expanded LLVM arguments of the function:
  // a memref is (allocated, aligned, offset, sizes..., strides...), an i64 is
  // itself. The packed list points at each of those words.
  std::vector<uint64_t> words;
  std::vector<size_t> starts;
  for (const Arg &arg : args) {
    starts.push_back(words.size());
    if (arg.isScalar) {
      continue;
    }
    const Tensor &t = arg.tensor;
    words.push_back(reinterpret_cast<uint64_t>(t.raw()));
    words.push_back(reinterpret_cast<uint64_t>(t.raw()));
    words.push_back(0);
    for (int64_t s : t.shape()) {
      words.push_back(uint64_t(s));
    }
    for (int64_t s : t.strides()) {
      words.push_back(uint64_t(s));
    }
  }
  std::vector<void *> packed;
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg &arg = args[i];
    if (arg.isScalar) {
      packed.push_back(const_cast<int64_t *>(&arg.scalar));
      continue;
    }
    size_t count = 3 + 2 * arg.tensor.rank();
    for (size_t k = 0; k < count; ++k) {
      packed.push_back(&words[starts[i] + k]);
    }
  }
  size_t resultWords = 0;
  for (const auto &shape : fs.results) {
    resultWords += 3 + 2 * shape.size();
  }
  std::vector<uint64_t> results(std::max<size_t>(resultWords, 1));
  if (!fs.results.empty()) {
    packed.push_back(results.data());
  }
  if (llvm::Error err = impl_->engine->invokePacked(name, packed)) {
    throw Error("kiln: calling '" + name +
                "' failed: " + llvm::toString(std::move(err)));
  }

  // Adopt the results (or copy those that alias an input, a global, or an
  // earlier result, or are not contiguous).
  std::set<uintptr_t> inputs;
  for (const Arg &arg : args) {
    if (!arg.isScalar) {
      inputs.insert(reinterpret_cast<uintptr_t>(arg.tensor.raw()));
    }
  }
  std::vector<Tensor> out;
  std::set<uintptr_t> adopted;
  std::vector<void *> toFree;
  size_t at = 0;
  for (const auto &shape : fs.results) {
    size_t rank = shape.size();
    Descriptor d;
    d.allocated = reinterpret_cast<void *>(results[at]);
    d.aligned = reinterpret_cast<void *>(results[at + 1]);
    d.offset = int64_t(results[at + 2]);
    for (size_t k = 0; k < rank; ++k) {
      d.sizes.push_back(int64_t(results[at + 3 + k]));
      d.strides.push_back(int64_t(results[at + 3 + rank + k]));
    }
    at += 3 + 2 * rank;
    float *data = static_cast<float *>(d.aligned) + d.offset;
    auto allocated = reinterpret_cast<uintptr_t>(d.allocated);
    bool owned = allocated != kGlobalMarker && !inputs.count(allocated) &&
                 !inputs.count(reinterpret_cast<uintptr_t>(d.aligned));
    bool contiguous = true;
    int64_t expect = 1;
    for (size_t k = rank; k-- > 0;) {
      if (d.sizes[k] != 1 && d.strides[k] != expect) {
        contiguous = false;
      }
      expect *= d.sizes[k];
    }
    if (owned && contiguous && !adopted.count(allocated)) {
      adopted.insert(allocated);
      void *toRelease = d.allocated;
      out.push_back(Tensor::adopt(data, d.sizes, DType::f32,
                                  [toRelease] { std::free(toRelease); }));
      continue;
    }
    Tensor copy = Tensor::empty(d.sizes, DType::f32);
    float *dst = copy.data<float>();
    int64_t n = copy.numel();
    std::vector<int64_t> index(rank, 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t src = 0;
      for (size_t k = 0; k < rank; ++k) {
        src += index[k] * d.strides[k];
      }
      dst[i] = data[src];
      for (size_t k = rank; k-- > 0;) {
        if (++index[k] < d.sizes[k]) {
          break;
        }
        index[k] = 0;
      }
    }
    out.push_back(copy);
    if (owned && !adopted.count(allocated)) {
      adopted.insert(allocated);
      toFree.push_back(d.allocated);
    }
  }
  for (void *p : toFree) {
    std::free(p);
  }
  return out;
}

} // namespace kiln
