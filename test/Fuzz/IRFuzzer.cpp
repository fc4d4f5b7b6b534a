//===- IRFuzzer.cpp - libFuzzer target: kiln IR through the pipelines ----===//
//
// IR is untrusted input like any file. For a module of kiln ops (functions
// whose bodies hold kiln ops and func.return), MLIR's rule must hold: what
// parses and verifies never crashes a pass, and no pass emits invalid IR;
// what cannot be compiled fails with a diagnostic. The input is parsed and
// verified; then, on copies of it, three pipelines run to the LLVM dialect:
// kiln-to-llvm, kiln-autodiff + kiln-to-llvm and kiln-training-step
// (AdamW, clipping) + kiln-to-llvm, the last two for the module's first
// function alone.
// A pass whose output does not verify, or a pipeline that fails without an
// error diagnostic, aborts with the pass's name. Modules with ops of other
// dialects are skipped: their passes are upstream MLIR's.
//
// The first function, when every value it computes is small, is then
// compiled by the JIT for this machine with AddressSanitizer's checks in
// the generated code (JitOptions::addressSanitizer; the allocator hands out
// exact blocks in this build) and called with inputs drawn from the
// input's hash: sizes that satisfy its entry checks (five tries: every
// dynamic size 3, 0 or 1, then drawn per group of sizes that must agree),
// values in range for ids and requirements. A call the entry checks refuse
// is fine; a read or write outside any buffer is a sanitizer report, a
// finding.
//
// Byte mutations rarely keep IR parseable (0.5% of their inputs parsed), so
// a structure-aware mutator (LLVMFuzzerCustomMutator) changes what parses at
// the level of the IR: an argument's size (dynamic, 0, 1, or across a tile
// boundary) or element type, an op's integer attribute (an axis, a slice
// bound, a head count), or a boundary attribute (kiln.updates, kiln.kind,
// kiln.require, kiln.name), then infers every op's result types again, so
// that most of what it makes verifies and reaches the pipelines.
//
//===----------------------------------------------------------------------===//

#include "compiler/InitAll.h"
#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Target/JIT/Jit.h"
#include "dialects/Kiln/Transforms/Passes.h"
#include "runtime/Error.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>

using namespace mlir;

namespace {

/// Collects the text of every diagnostic; prints nothing (most inputs are
/// refused, and that is the expected outcome).
struct Diagnostics {
  explicit Diagnostics(MLIRContext &context)
      : handler(&context, [this](Diagnostic &diagnostic) {
          if (diagnostic.getSeverity() == DiagnosticSeverity::Error) {
            ++errors;
          }
          text += diagnostic.str() + "\n";
          return success();
        }) {}
  ScopedDiagnosticHandler handler;
  int errors = 0;
  std::string text;
};

[[noreturn]] void fail(const std::string &what, const std::string &details) {
  llvm::errs() << "kiln-fuzz-ir: " << what << "\n" << details << "\n";
  std::abort();
}

/// Verifies the IR after every pass that succeeded (the pass manager's own
/// verifier is off so that a failure names the pass that broke the IR).
struct VerifyAfterEachPass : public PassInstrumentation {
  explicit VerifyAfterEachPass(Diagnostics &diagnostics)
      : diagnostics(diagnostics) {}
  void runAfterPass(Pass *pass, Operation *op) override {
    if (failed(verify(op))) {
      fail("the pass '" + pass->getArgument().str() +
               "' produced IR that does not verify",
           diagnostics.text);
    }
  }
  Diagnostics &diagnostics;
};

/// How far the inputs got: printed at exit (KILN_FUZZ_STATS set), to tell
/// how many inputs reach the pipelines.
struct Stats {
  long inputs = 0, parsed = 0, kilnModules = 0, compiled = 0;
  long jitCompiled = 0, calls = 0, refusedCalls = 0;
  double pipelineSeconds = 0, jitSeconds = 0;
  /// Printed with stdio: LLVM's streams may be gone when this runs.
  ~Stats() {
    if (std::getenv("KILN_FUZZ_STATS")) {
      std::fprintf(stderr,
                   "kiln-fuzz-ir: %ld inputs, %ld parsed and verified, %ld "
                   "kiln modules, %ld pipelines that reached the LLVM "
                   "dialect, %ld functions compiled by the JIT, %ld calls "
                   "run, %ld calls refused by the entry checks; %.0f s in "
                   "the pipelines, %.0f s in the JIT and the calls\n",
                   inputs, parsed, kilnModules, compiled, jitCompiled, calls,
                   refusedCalls, pipelineSeconds, jitSeconds);
    }
  }
} stats;

/// Only kiln ops in function bodies: the IR Kiln's users write.
bool isKilnModule(ModuleOp module) {
  bool onlyKiln = true;
  module.walk([&](Operation *op) {
    if (op == module.getOperation() || isa<func::FuncOp, func::ReturnOp>(op) ||
        op->getDialect()->getNamespace() == "kiln") {
      return WalkResult::advance();
    }
    onlyKiln = false;
    return WalkResult::interrupt();
  });
  return onlyKiln;
}

/// Runs `first` (when given) and then kiln-to-llvm for `cpu` on a copy of
/// `source`.
void runPipeline(MLIRContext &context, ModuleOp source,
                 std::unique_ptr<Pass> first, const std::string &cpu) {
  std::string pipeline = "kiln-to-llvm{cpu=" + cpu + "}";
  Diagnostics diagnostics(context);
  OwningOpRef<ModuleOp> module = source.clone();
  PassManager pm(&context);
  pm.enableVerifier(false);
  pm.addInstrumentation(std::make_unique<VerifyAfterEachPass>(diagnostics));
  if (first) {
    pm.addPass(std::move(first));
  }
  mlir::kiln::buildKilnToLLVMPipeline(pm, cpu);
  if (succeeded(pm.run(*module))) {
    // Function passes were verified function by function: the module too.
    if (failed(verify(*module))) {
      fail("the pipeline produced a module that does not verify (" + pipeline +
               ")",
           diagnostics.text);
    }
    ++stats.compiled;
  } else if (diagnostics.errors == 0) {
    fail("a pass failed without an error diagnostic (" + pipeline + ")",
         diagnostics.text);
  }
}

const DialectRegistry &registry() {
  static DialectRegistry *registry = [] {
    auto *result = new DialectRegistry;
    ::kiln::registerAllDialects(*result);
    ::kiln::registerAllPasses();
    return result;
  }();
  return *registry;
}

/// Infers the result types of every op of `func` again, in order, and its
/// signature's results from its return. False when an op's inference
/// refuses its operands.
bool reinferTypes(func::FuncOp func) {
  bool ok = true;
  func.walk([&](Operation *op) {
    auto iface = dyn_cast<InferTypeOpInterface>(op);
    if (!iface) {
      return WalkResult::advance();
    }
    SmallVector<Type> types;
    if (failed(iface.inferReturnTypes(op->getContext(), op->getLoc(),
                                      op->getOperands(),
                                      op->getRawDictionaryAttrs(),
                                      op->getPropertiesStorage(),
                                      op->getRegions(), types)) ||
        types.size() != op->getNumResults()) {
      ok = false;
      return WalkResult::interrupt();
    }
    for (auto [result, type] : llvm::zip(op->getResults(), types)) {
      result.setType(type);
    }
    return WalkResult::advance();
  });
  if (!ok) {
    return false;
  }
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  func.setType(FunctionType::get(func.getContext(),
                                 func.getBody().getArgumentTypes(),
                                 ret.getOperandTypes()));
  return true;
}

/// One structural change to `module`, drawn from `rng`; false when none
/// could be made or the result does not verify.
bool mutateStructure(ModuleOp module, std::mt19937 &rng) {
  SmallVector<func::FuncOp> funcs;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (!func.isExternal()) {
      funcs.push_back(func);
    }
  }
  if (funcs.empty()) {
    return false;
  }
  auto pick = [&](size_t n) { return size_t(rng() % n); };
  func::FuncOp func = funcs[pick(funcs.size())];
  MLIRContext *context = module.getContext();
  Builder b(context);
  switch (pick(4)) {
  case 0: { // a size of an argument
    if (func.getNumArguments() == 0) {
      return false;
    }
    unsigned i = unsigned(pick(func.getNumArguments()));
    auto type = dyn_cast<RankedTensorType>(func.getArgumentTypes()[i]);
    if (!type || type.getRank() == 0) {
      return false;
    }
    static const int64_t sizes[] = {ShapedType::kDynamic, 0, 1, 2, 15,
                                    16, 17, 33, 65};
    SmallVector<int64_t> shape(type.getShape());
    shape[pick(shape.size())] = sizes[pick(std::size(sizes))];
    func.getArgument(i).setType(type.clone(shape));
    break;
  }
  case 1: { // an element type of an argument
    if (func.getNumArguments() == 0) {
      return false;
    }
    unsigned i = unsigned(pick(func.getNumArguments()));
    auto type = dyn_cast<RankedTensorType>(func.getArgumentTypes()[i]);
    if (!type) {
      return false;
    }
    Type elements[] = {b.getF32Type(), b.getI32Type(), b.getI64Type(),
                       b.getI1Type()};
    func.getArgument(i).setType(
        type.clone(elements[pick(std::size(elements))]));
    break;
  }
  case 2: { // an integer attribute of an op
    SmallVector<std::pair<Operation *, NamedAttribute>> candidates;
    func.walk([&](Operation *op) {
      if (op->getDialect() && op->getDialect()->getNamespace() == "kiln") {
        for (NamedAttribute a : op->getAttrDictionary()) {
          if (isa<IntegerAttr>(a.getValue())) {
            candidates.push_back({op, a});
          }
        }
      }
    });
    if (candidates.empty()) {
      return false;
    }
    auto [op, attr] = candidates[pick(candidates.size())];
    auto value = cast<IntegerAttr>(attr.getValue());
    static const int64_t deltas[] = {-3, -2, -1, 1, 2, 3};
    int64_t v = pick(3) == 0 ? int64_t(pick(5)) - 2
                             : value.getInt() + deltas[pick(std::size(deltas))];
    op->setAttr(attr.getName(), IntegerAttr::get(value.getType(), v));
    break;
  }
  default: { // a boundary attribute
    if (func.getNumArguments() == 0) {
      return false;
    }
    unsigned i = unsigned(pick(func.getNumArguments()));
    switch (pick(4)) {
    case 0:
      if (func.getNumResults() == 0) {
        return false;
      }
      func.setResultAttr(unsigned(pick(func.getNumResults())), "kiln.updates",
                         b.getI64IntegerAttr(int64_t(i)));
      break;
    case 1: {
      static const char *kinds[] = {"input", "param", "state",
                                    "lr",    "step",  "seed"};
      func.setArgAttr(i, "kiln.kind",
                      b.getStringAttr(kinds[pick(std::size(kinds))]));
      break;
    }
    case 2:
      func.setArgAttr(i, "kiln.require",
                      b.getStringAttr(pick(2) ? "positive"
                                              : "finite-nonnegative"));
      break;
    default: {
      static const char *names[] = {"lr", "step", "seed", "x", "a.b"};
      func.setArgAttr(i, "kiln.name",
                      b.getStringAttr(names[pick(std::size(names))]));
      break;
    }
    }
    break;
  }
  }
  return reinferTypes(func) && succeeded(verify(module.getOperation()));
}

//===----------------------------------------------------------------------===//
// Running the first function
//===----------------------------------------------------------------------===//

/// Dynamic sizes the calls use are at most this; a function is run only if
/// every value it computes has at most kMaxRunElements elements then.
constexpr int64_t kMaxRunSize = 17;
constexpr int64_t kMaxRunElements = int64_t(1) << 20;

bool smallEnoughToRun(func::FuncOp func) {
  bool small = true;
  auto check = [&](Type type) {
    auto shaped = dyn_cast<ShapedType>(type);
    if (!shaped || !shaped.hasRank()) {
      return;
    }
    int64_t elements = 1;
    for (int64_t size : shaped.getShape()) {
      size = ShapedType::isDynamic(size) ? kMaxRunSize : size;
      if (size > kMaxRunElements ||
          (elements *= std::max<int64_t>(size, 1)) > kMaxRunElements) {
        small = false;
        return;
      }
    }
  };
  for (Type type : func.getArgumentTypes()) {
    check(type);
  }
  func.walk([&](Operation *op) {
    for (Type type : op->getResultTypes()) {
      check(type);
    }
  });
  return small;
}

/// Arguments for `spec` from `rng`: on try 0 every dynamic size is 3, on
/// try 1 every one is 0, on try 2 every one is 1, later ones draw a size
/// per group of sizes that must agree. Values suit each argument's role, bound and requirement.
std::vector<::kiln::Arg> makeArgs(const ::kiln::FunctionSpec &spec,
                                  std::mt19937_64 &rng, int attempt) {
  using ::kiln::ArgSpec;
  using ::kiln::DType;
  static const int64_t sizes[] = {0, 1, 2, 3, 5, 15, 16, 17};
  auto draw = [&] {
    if (attempt == 0) {
      return int64_t(3);
    }
    if (attempt == 1) {
      return int64_t(0);
    }
    if (attempt == 2) {
      return int64_t(1);
    }
    return sizes[rng() % std::size(sizes)];
  };
  std::map<std::pair<size_t, int64_t>, int64_t> chosen;
  for (const ::kiln::DimGroup &group : spec.groups) {
    int64_t size = group.size >= 0 ? group.size
                                   : std::max(group.minSize, draw());
    for (const auto &dim : group.dims) {
      chosen[dim] = size;
    }
  }
  std::vector<::kiln::Arg> args;
  for (size_t i = 0; i < spec.args.size(); ++i) {
    const ArgSpec &arg = spec.args[i];
    if (arg.isScalar) {
      bool positive = arg.require == ArgSpec::Require::positive ||
                      arg.role == ArgSpec::Role::step;
      args.emplace_back(int64_t(rng() % 4) + (positive ? 1 : 0));
      continue;
    }
    std::vector<int64_t> shape = arg.shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] < 0) {
        auto found = chosen.find({i, int64_t(d)});
        shape[d] = found != chosen.end() ? found->second : draw();
      }
    }
    ::kiln::Tensor tensor = ::kiln::Tensor::empty(shape, arg.dtype);
    int64_t n = tensor.numel();
    std::uniform_real_distribution<float> uniform(
        arg.require == ArgSpec::Require::finiteNonnegative ? 0.0f : -2.0f,
        2.0f);
    // Ids within their table (one time in 16 an id just outside, which the
    // entry checks must refuse), else small.
    int64_t bound = arg.idBound > 0 ? arg.idBound : 4;
    bool outside = arg.idBound >= 0 && rng() % 16 == 0;
    auto id = [&](int64_t k) {
      if (outside && k == 0) {
        return rng() % 2 ? int64_t(-1) : bound;
      }
      return int64_t(rng() % uint64_t(bound));
    };
    switch (arg.dtype) {
    case DType::f32:
      for (int64_t k = 0; k < n; ++k) {
        tensor.data<float>()[k] =
            arg.role == ArgSpec::Role::learningRate ? 0.01f : uniform(rng);
      }
      break;
    case DType::i32:
      for (int64_t k = 0; k < n; ++k) {
        tensor.data<int32_t>()[k] = int32_t(id(k));
      }
      break;
    case DType::i64:
      for (int64_t k = 0; k < n; ++k) {
        tensor.data<int64_t>()[k] = id(k);
      }
      break;
    case DType::i1:
      for (int64_t k = 0; k < n; ++k) {
        tensor.data<bool>()[k] = rng() % 2;
      }
      break;
    case DType::bf16:
      for (int64_t k = 0; k < n; ++k) {
        tensor.data<::kiln::BFloat16>()[k] =
            ::kiln::BFloat16::round(uniform(rng));
      }
      break;
    }
    args.emplace_back(std::move(tensor));
  }
  return args;
}

/// Compiles `name` of `module` with the sanitizer's checks and calls it a
/// few times (makeArgs) until the entry checks accept a call.
void runFirstFunction(ModuleOp module, const std::string &name,
                      uint64_t seed) {
  ::kiln::JitOptions options;
  options.optLevel = 0; // the checks matter here, not the speed
  options.functions = {name};
  options.addressSanitizer = true;
  std::shared_ptr<::kiln::JitModule> jit;
  try {
    jit = ::kiln::JitModule::compile(module, options);
  } catch (const ::kiln::Error &) {
    return; // refused with a reason (a result rank past the C ABI's)
  }
  ++stats.jitCompiled;
  const ::kiln::CompiledFunction &fn = jit->function(name);
  std::mt19937_64 rng(seed);
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::vector<::kiln::Arg> args = makeArgs(fn.spec(), rng, attempt);
    try {
      fn.call(args);
      ++stats.calls;
    } catch (const ::kiln::Error &) {
      ++stats.refusedCalls;
    }
  }
}

} // namespace

/// Mutates what parses structurally (mutateStructure) three times in four,
/// else, or when that fails, as bytes.
extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned seed) {
  std::mt19937 rng(seed);
  if (rng() % 4 == 0) {
    return LLVMFuzzerMutate(data, size, maxSize);
  }
  MLIRContext context(registry(), MLIRContext::Threading::DISABLED);
  ScopedDiagnosticHandler silence(&context,
                                  [](Diagnostic &) { return success(); });
  std::string text(reinterpret_cast<const char *>(data), size);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  if (!module || !isKilnModule(*module) ||
      !mutateStructure(*module, rng)) {
    return LLVMFuzzerMutate(data, size, maxSize);
  }
  std::string out;
  llvm::raw_string_ostream os(out);
  module->print(os);
  if (out.size() > maxSize) {
    return LLVMFuzzerMutate(data, size, maxSize);
  }
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ++stats.inputs;
  MLIRContext context(registry(), MLIRContext::Threading::DISABLED);
  Diagnostics diagnostics(context);
  // MLIR's lexer reads up to a NUL after the text (as files and std::string
  // have); the fuzzer's buffer has none.
  std::string text(reinterpret_cast<const char *>(data), size);
  // Parsing verifies: what is refused here has been explained.
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  if (!module) {
    if (diagnostics.errors == 0) {
      fail("the input was refused without an error diagnostic", "");
    }
    return 0;
  }
  ++stats.parsed;
  if (!isKilnModule(*module)) {
    return 0;
  }
  ++stats.kilnModules;
  func::FuncOp first;
  for (auto func : module->getOps<func::FuncOp>()) {
    if (!func.isExternal()) {
      first = func;
      break;
    }
  }
  if (!first) {
    return 0;
  }
  std::string name = first.getName().str();
  auto start = std::chrono::steady_clock::now();
  runPipeline(context, *module, nullptr, "x86-64-v4");
  // Gradients and training steps of the first function alone (there are no
  // calls), with AVX2's tiles.
  OwningOpRef<ModuleOp> alone = module->clone();
  for (auto func : llvm::make_early_inc_range(alone->getOps<func::FuncOp>())) {
    if (func.getName() != name) {
      func.erase();
    }
  }
  std::string avx2 = "x86-64-v3";
  mlir::kiln::KilnAutodiffPassOptions autodiff;
  autodiff.function = name;
  runPipeline(context, *alone, mlir::kiln::createKilnAutodiffPass(autodiff),
              avx2);
  mlir::kiln::KilnTrainingStepPassOptions training;
  training.function = name;
  training.optimizer = "adamw";
  training.weightDecay = 0.01;
  training.clipNorm = 1.0;
  runPipeline(context, *alone, mlir::kiln::createKilnTrainingStepPass(training),
              avx2);
  auto piped = std::chrono::steady_clock::now();
  stats.pipelineSeconds += std::chrono::duration<double>(piped - start).count();
  if (smallEnoughToRun(first)) {
    runFirstFunction(*alone, name, std::hash<std::string>()(text));
  }
  stats.jitSeconds += std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - piped)
                          .count();
  return 0;
}
