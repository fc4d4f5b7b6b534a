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
#include <numeric>
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

/// A size as the contract knows it: a linear combination of the sizes of
/// argument dimension groups plus a constant (SizeExpr, kept sorted by
/// group and without zero coefficients), or nothing when it is not known.
using Expr = std::optional<SizeExpr>;

/// `a + factor * b`, exact, or nothing on overflow or when a coefficient
/// leaves SizeExpr's bounds.
static Expr combine(const SizeExpr &a, const SizeExpr &b, int64_t factor) {
  std::map<size_t, int64_t> terms(a.terms.begin(), a.terms.end());
  for (auto [group, coefficient] : b.terms) {
    int64_t scaled, sum;
    if (__builtin_mul_overflow(coefficient, factor, &scaled) ||
        __builtin_add_overflow(terms[group], scaled, &sum) ||
        sum > SizeExpr::kMaxCoefficient || sum < -SizeExpr::kMaxCoefficient) {
      return std::nullopt;
    }
    terms[group] = sum;
  }
  SizeExpr out;
  int64_t scaled;
  if (__builtin_mul_overflow(b.constant, factor, &scaled) ||
      __builtin_add_overflow(a.constant, scaled, &out.constant)) {
    return std::nullopt;
  }
  for (auto [group, coefficient] : terms) {
    if (coefficient != 0) {
      out.terms.push_back({group, coefficient});
    }
  }
  return out;
}

/// The input contract of a function: what its kiln ops state of their
/// sizes (ShapeContractOpInterface), as conditions on its arguments that the
/// runtime checks before every call. Every size is expressed through the
/// argument sizes; a condition that cannot be (it involves a size no
/// statement defines) or can never hold refuses the function.
class ContractBuilder : public mlir::kiln::ShapeContract {
public:
  ContractBuilder(func::FuncOp func, FunctionSpec &spec)
      : func(func), spec(spec) {}

  /// Fills the groups, position limits, size checks and id bounds of
  /// `spec`; throws kiln::Error for a condition that cannot be checked.
  void build() {
    func.walk([&](mlir::kiln::ShapeContractOpInterface op) {
      current = op;
      op.addShapeContract(*this);
    });
    current = nullptr;
    // A result written into an argument in place has that argument's
    // sizes: the code writes the result's elements into the caller's buffer.
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    for (auto [r, result] : llvm::enumerate(spec.results)) {
      if (result.updates >= 0) {
        Value arg = func.getArgument(result.updates);
        for (int64_t d = 0, e = rankOf(arg); d < e; ++d) {
          same(ret.getOperand(r), d, arg, d);
        }
      }
    }
    // Group argument dims by class.
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
    // A quotient that reduces to a multiple of one size (a unit axis
    // inserted or removed: B*T*D / (B*T) is D) or to a constant is a linear
    // definition like any other.
    for (auto it = quotients.begin(); it != quotients.end();) {
      std::optional<Signature> s = signature(it->second);
      if (s && s->divisors.empty() && s->factors.size() <= 1 &&
          s->denominator == 1) {
        Definition def{{}, s->factors.empty() ? s->numerator : 0,
                       it->second.what};
        if (!s->factors.empty()) {
          def.terms.push_back({s->factors.front(), s->numerator});
        }
        definitions.push_back({it->first, std::move(def)});
        it = quotients.erase(it);
      } else {
        ++it;
      }
    }
    // Each class has one size; every other way to compute it must agree.
    std::set<DimKey> leaders;
    for (auto &[result, def] : definitions) {
      leaders.insert(classes.getOrInsertLeaderValue(result));
    }
    for (auto &[result, q] : quotients) {
      leaders.insert(classes.getOrInsertLeaderValue(result));
    }
    for (const DimKey &leader : leaders) {
      checkForms(leader);
    }
    for (const Quotient &pair : elementPairs) {
      checkElements(pair);
    }
    for (auto &[result, q] : quotients) {
      checkDivides(q);
    }
    for (auto &[pe, offsetArg, maxLen, what] : positionLimits) {
      DimKey leader = classes.getOrInsertLeaderValue(pe);
      auto it = groupOf.find(leader);
      if (it != groupOf.end()) {
        spec.positionLimits.push_back({it->second, offsetArg, maxLen});
        continue;
      }
      // A length no argument has (a concatenation's, a static result's):
      // positions [0, length) must fit the table, proved or checked.
      std::string where = "learned positions over the length of " + what;
      Expr length = resolve(leader);
      if (!length) {
        refuse(where, "span a size that is computed in a way the call "
                      "cannot check (a reshape's inferred size)");
      }
      if (offsetArg >= 0 && length->terms.empty()) {
        // A static length (a gradient's, its class holding no argument):
        // the call checks the offset with it.
        spec.positionLimits.push_back({0, offsetArg, maxLen, length->constant});
        continue;
      }
      if (offsetArg >= 0) {
        refuse(where, "start at an offset argument, which the call checks "
                      "only against an argument's size (give the positions "
                      "the length of an argument)");
      }
      if (length->terms.empty()) {
        if (length->constant > maxLen) {
          refuse(where, "are " + std::to_string(length->constant) +
                            ", past the table's " + std::to_string(maxLen) +
                            " rows whatever the arguments");
        }
        continue; // proved
      }
      addCheck({SizeExpr{{}, maxLen}, *length, /*atLeast=*/true});
    }
    for (auto &[dim, size, what] : minimums) {
      DimKey leader = classes.getOrInsertLeaderValue(dim);
      auto group = groupOf.find(leader);
      if (group != groupOf.end()) {
        int64_t &min = spec.groups[group->second].minSize;
        min = std::max(min, size);
        continue;
      }
      Expr e = resolve(leader);
      if (!e) {
        refuse(what, "needs a size of at least " + std::to_string(size) +
                         " that is computed in a way the call cannot check "
                         "(a reshape's inferred size)");
      }
      if (e->terms.empty()) {
        if (e->constant < size) {
          refuse(what, "needs a size of at least " + std::to_string(size) +
                           ", but it is always " +
                           std::to_string(e->constant));
        }
        continue;
      }
      addCheck({*e, SizeExpr{{}, size}, true});
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
        // A computed offset: compiled code clamps the rows of a learned
        // position table it reads; a cache is written or read as it is.
        if (current && isa<mlir::kiln::PositionalEncodingOp,
                           mlir::kiln::PositionalEncodingGradOp>(current)) {
          return;
        }
        std::string what;
        llvm::raw_string_ostream os(what);
        os << "'" << current->getName() << "' at " << current->getLoc();
        refuse(what, "has an offset that is not an argument of the function");
      }
      offsetArg = int64_t(*index);
    }
    positionLimits.push_back({key(x, dim), offsetArg, maxLen, owner(x)});
  }

  void linear(Value result, int64_t dim, ArrayRef<Term> terms,
              int64_t constant) override {
    Definition def{{}, constant, owner(result)};
    for (const Term &t : terms) {
      if (t.coefficient != 0) {
        def.terms.push_back({key(t.value, t.dim), t.coefficient});
      }
    }
    definitions.push_back({key(result, dim), std::move(def)});
  }

  void quotient(Value result, int64_t dim, ArrayRef<Dim> factors,
                ArrayRef<Dim> divisors) override {
    Quotient q{{}, {}, owner(result)};
    for (auto [v, d] : factors) {
      q.factors.push_back(key(v, d));
    }
    for (auto [v, d] : divisors) {
      q.divisors.push_back(key(v, d));
    }
    quotients.push_back({key(result, dim), std::move(q)});
  }

  void atLeast(Value x, int64_t dim, int64_t size) override {
    minimums.push_back({key(x, dim), size, owner(x)});
  }

  void sameElements(Value a, Value b) override {
    std::vector<DimKey> da, db;
    for (int64_t d = 0, e = rankOf(a); d < e; ++d) {
      da.push_back(key(a, d));
    }
    for (int64_t d = 0, e = rankOf(b); d < e; ++d) {
      db.push_back(key(b, d));
    }
    elementPairs.push_back({Quotient{da, db, owner(b)}});
  }

private:
  struct Definition {
    std::vector<std::pair<DimKey, int64_t>> terms;
    int64_t constant;
    std::string what; ///< the op that states it
  };
  struct Quotient {
    std::vector<DimKey> factors, divisors;
    std::string what;
  };
  /// A quotient reduced: the classes of its dynamic factors and divisors
  /// (sorted, common ones cancelled) and its static factor as a reduced
  /// fraction; nothing when a static product overflows or is 0.
  struct Signature {
    std::vector<DimKey> factors, divisors;
    int64_t numerator = 1, denominator = 1;
    bool operator==(const Signature &) const = default;
  };
  std::optional<Signature> signature(const Quotient &q) {
    Signature s;
    auto collect = [&](const std::vector<DimKey> &dims,
                       std::vector<DimKey> &leaders, int64_t &product) {
      for (const DimKey &d : dims) {
        DimKey leader = classes.getOrInsertLeaderValue(d);
        int64_t size = staticSize(leader);
        if (size < 0) {
          leaders.push_back(leader);
        } else if (size == 0 || __builtin_mul_overflow(product, size,
                                                       &product)) {
          return false;
        }
      }
      llvm::sort(leaders);
      return true;
    };
    std::vector<DimKey> factors, divisors;
    if (!collect(q.factors, factors, s.numerator) ||
        !collect(q.divisors, divisors, s.denominator)) {
      return std::nullopt;
    }
    std::set_difference(factors.begin(), factors.end(), divisors.begin(),
                        divisors.end(), std::back_inserter(s.factors));
    std::set_difference(divisors.begin(), divisors.end(), factors.begin(),
                        factors.end(), std::back_inserter(s.divisors));
    int64_t g = std::gcd(s.numerator, s.denominator);
    s.numerator /= g;
    s.denominator /= g;
    return s;
  }

  /// "'kiln.concat' at loc", or the function for its arguments.
  std::string owner(Value v) {
    std::string text;
    llvm::raw_string_ostream os(text);
    if (Operation *op = v.getDefiningOp()) {
      os << "'" << op->getName() << "' at " << op->getLoc();
    } else {
      os << "an argument";
    }
    return text;
  }

  /// The op whose contract is being added.
  Operation *current = nullptr;

  [[noreturn]] void refuse(const std::string &what, const std::string &why) {
    throw Error("kiln: function '" + spec.name + "': " + what + " " + why +
                "; its sizes cannot be checked before a call, so it is "
                "not compiled");
  }

  /// The size of class `leader`: its argument group, its static size, or
  /// the first of its definitions whose terms are known.
  Expr resolve(DimKey leader) {
    if (auto it = memo.find(leader); it != memo.end()) {
      return it->second;
    }
    if (auto group = groupOf.find(leader); group != groupOf.end()) {
      return memo[leader] = SizeExpr{{{group->second, 1}}, 0};
    }
    if (int64_t size = staticSize(leader); size >= 0) {
      return memo[leader] = SizeExpr{{}, size};
    }
    memo[leader] = std::nullopt; // a cycle resolves to nothing
    for (auto &[result, def] : definitions) {
      if (classes.getOrInsertLeaderValue(result) != leader) {
        continue;
      }
      if (Expr e = evaluate(def)) {
        return memo[leader] = e;
      }
    }
    return std::nullopt;
  }

  Expr evaluate(const Definition &def) {
    Expr sum = SizeExpr{{}, def.constant};
    for (auto &[dim, coefficient] : def.terms) {
      Expr term = resolve(classes.getOrInsertLeaderValue(dim));
      if (!term || !(sum = combine(*sum, *term, coefficient))) {
        return std::nullopt;
      }
    }
    return sum;
  }

  /// Checks every definition of class `leader` against its size.
  void checkForms(DimKey leader) {
    Expr size = resolve(leader);
    // Quotients: equal to one another when they reduce alike; the call
    // cannot evaluate one, so no size of another form may meet them.
    std::optional<Signature> first;
    std::string firstWhat;
    bool otherForms = groupOf.count(leader) || staticSize(leader) >= 0;
    for (auto &[result, def] : definitions) {
      otherForms |= classes.getOrInsertLeaderValue(result) == leader;
    }
    for (auto &[result, q] : quotients) {
      if (classes.getOrInsertLeaderValue(result) != leader) {
        continue;
      }
      std::optional<Signature> s = signature(q);
      if (otherForms || !s || (first && *s != *first)) {
        refuse(q.what, "infers a size that " +
                           (first ? "differs from the one " + firstWhat +
                                        " infers for the same dimension"
                                  : std::string("another operand or result "
                                                "must equal")) +
                           " (give the reshape the size it must have)");
      }
      if (!first) {
        first = s;
        firstWhat = q.what;
      }
    }
    for (auto &[result, def] : definitions) {
      if (classes.getOrInsertLeaderValue(result) != leader) {
        continue;
      }
      Expr form = evaluate(def);
      if (!size || !form) {
        refuse(def.what, "has a size that is computed in a way the call "
                         "cannot check (a reshape's inferred size), or too "
                         "large to compute");
      }
      if (*form == *size) {
        continue; // proved from the signature
      }
      Expr difference = combine(*form, *size, -1);
      if (difference && difference->terms.empty()) {
        refuse(def.what, "has a size that differs from the one its users "
                         "need by " + std::to_string(difference->constant) +
                         " whatever the arguments");
      }
      addCheck({*size, *form, false});
    }
  }

  /// The element counts of `pair` (factors: one value's dimensions,
  /// divisors: the other's) must agree: proved when they reduce alike,
  /// refused when they reduce to different constants, else an
  /// ElementCheck of the sizes left.
  void checkElements(const Quotient &pair) {
    std::optional<Signature> s = signature(pair);
    if (!s) {
      // A static product past 64 bits, or a static 0: compare the zero.
      bool zeroA = llvm::any_of(pair.factors,
                                [&](DimKey k) { return staticSize(k) == 0; });
      bool zeroB = llvm::any_of(pair.divisors,
                                [&](DimKey k) { return staticSize(k) == 0; });
      if (zeroA && zeroB) {
        return;
      }
      refuse(pair.what, "reshapes a tensor whose element count cannot be "
                        "compared with the result's (a static size is 0 on "
                        "one side only, or the sizes overflow)");
    }
    if (s->factors.empty() && s->divisors.empty()) {
      if (s->numerator != s->denominator) {
        refuse(pair.what, "reshapes " + std::to_string(s->numerator) +
                              " elements' worth into " +
                              std::to_string(s->denominator) +
                              " whatever the arguments");
      }
      return; // proved
    }
    ElementCheck check{side(s->factors, s->numerator, pair.what),
                       side(s->divisors, s->denominator, pair.what)};
    if (!llvm::is_contained(spec.elementChecks, check)) {
      spec.elementChecks.push_back(std::move(check));
    }
  }

  /// A reshape's inferred size `q` divides the input's elements by the
  /// other sizes exactly: proved when what is left of the divisors after
  /// cancelling is 1, else an ElementCheck with `divides` (6 elements into
  /// rows of 4 had dropped the last 2).
  void checkDivides(const Quotient &q) {
    std::optional<Signature> s = signature(q);
    if (!s || (s->divisors.empty() && s->denominator == 1)) {
      return; // refused by checkForms, or a whole size whatever the call
    }
    ElementCheck check{side(s->factors, s->numerator, q.what),
                       side(s->divisors, s->denominator, q.what),
                       /*divides=*/true};
    if (!llvm::is_contained(spec.elementChecks, check)) {
      spec.elementChecks.push_back(std::move(check));
    }
  }

  /// The factors of one side of an ElementCheck: `constant` and the sizes of
  /// the classes `leaders`.
  std::vector<SizeExpr> side(const std::vector<DimKey> &leaders,
                             int64_t constant, const std::string &what) {
    std::vector<SizeExpr> factors;
    if (constant != 1) {
      factors.push_back(SizeExpr{{}, constant});
    }
    for (const DimKey &leader : leaders) {
      Expr e = resolve(leader);
      if (!e) {
        refuse(what, "reshapes sizes that are computed in a way the call "
                     "cannot check (a reshape's inferred size)");
      }
      factors.push_back(*e);
    }
    if (factors.empty()) {
      factors.push_back(SizeExpr{{}, 1});
    }
    if (factors.size() > ElementCheck::kMaxFactors) {
      refuse(what, "reshapes more sizes than a check takes");
    }
    return factors;
  }

  /// Adds `check` with what both sides share cancelled (pk + n == pv + n
  /// reads pk == pv).
  void addCheck(SizeCheck check) {
    Expr difference = combine(check.lhs, check.rhs, -1);
    if (difference) {
      SizeExpr lhs, rhs;
      for (auto [group, coefficient] : difference->terms) {
        (coefficient > 0 ? lhs : rhs)
            .terms.push_back({group, coefficient > 0 ? coefficient
                                                     : -coefficient});
      }
      // Both within SizeExpr's bounds: the constant's negation fits when
      // it is not the least int64.
      if (difference->constant != INT64_MIN) {
        (difference->constant > 0 ? lhs.constant : rhs.constant) =
            difference->constant > 0 ? difference->constant
                                     : -difference->constant;
        // Terms on the left of an equality: "n must equal 1".
        bool swap = !check.atLeast && lhs.terms.empty();
        check.lhs = swap ? rhs : lhs;
        check.rhs = swap ? lhs : rhs;
      }
    }
    if (!llvm::is_contained(spec.sizeChecks, check)) {
      spec.sizeChecks.push_back(std::move(check));
    }
  }

  static int64_t rankOf(Value v) {
    return cast<RankedTensorType>(v.getType()).getRank();
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
  std::map<DimKey, size_t> groupOf;
  std::map<DimKey, Expr> memo;
  struct PendingLimit {
    DimKey dim;
    int64_t offsetArg;
    int64_t maxLen;
    std::string what; ///< the value whose length the positions span
  };
  std::vector<PendingLimit> positionLimits;
  /// Sizes defined from others (concatenations, slices).
  std::vector<std::pair<DimKey, Definition>> definitions;
  /// Sizes inferred by reshapes.
  std::vector<std::pair<DimKey, Quotient>> quotients;
  /// Values that hold as many elements (factors: one's dimensions,
  /// divisors: the other's).
  std::vector<Quotient> elementPairs;
  /// Dimensions with a least size, and the op that needs it.
  struct Minimum {
    DimKey dim;
    int64_t size;
    std::string what;
  };
  std::vector<Minimum> minimums;
  FunctionSpec &spec;
};

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
    arg.onDevice = resident && mlir::kiln::isResidentArgument(func, i);
    spec.args.push_back(arg);
  }
  for (auto [r, type] : llvm::enumerate(func.getResultTypes())) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.getElementType().isF32()) {
      throw Error("kiln: function '" + spec.name +
                  "' must return f32 tensors only");
    }
    ResultSpec result;
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
  ContractBuilder(func, spec).build();
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

/// Lowers `lowered.module` in place. `lowered` must outlive `diagnostics`
/// (whose handler lives in its context), also when this throws.
static void lower(LoweredModule &lowered, const LoweringOptions &options,
                  DiagnosticCollector &diagnostics) {
  MLIRContext *context = lowered.context.get();
  ModuleOp module = *lowered.module;
  checkDumpsSpareTheSource(options);
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
  PassManager linalg(context);
  PassManager llvmPm(context);
  if (options.gpuChip.empty()) {
    mlir::kiln::buildKilnToLinalgPipeline(
        linalg, mlir::kiln::kCpuAttentionBlock, options.prepareWeights);
    mlir::kiln::buildLinalgToLLVMPipeline(llvmPm, options.cpu);
  } else {
    mlir::kiln::buildKilnToLinalgPipeline(linalg);
    mlir::kiln::buildLinalgToGpuPipeline(llvmPm, options.gpuChip,
                                         options.gpuResidentState);
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
      codeGenOptLevel(optLevel)));
  if (!machine) {
    throw Error("kiln: cannot create a target machine for '" + cpu + "'");
  }
  return machine;
}

llvm::CodeGenOptLevel codeGenOptLevel(unsigned optLevel) {
  return *llvm::CodeGenOpt::getLevel(int(std::min(optLevel, 3u)));
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
