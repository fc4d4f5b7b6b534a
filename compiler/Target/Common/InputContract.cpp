//===- InputContract.cpp - A function's input contract from its IR -------===//
//
// Reads the input contract off the kiln IR before lowering: which arguments
// are token ids of which table, which dynamic sizes must agree, how long a
// learned position table is. The runtime checks every call against it.
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/Common/InputContract.h"

#include "dialects/Kiln/IR/KilnOps.h"
#include "runtime/Error.h"

#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

using namespace mlir;
using namespace mlir::kiln;

namespace kiln {

namespace {

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

void buildInputContract(func::FuncOp func, FunctionSpec &spec) {
  ContractBuilder(func, spec).build();
}

} // namespace kiln
