//===- Function.cpp - Call compiled kiln functions ------------------------===//
//
// Argument checks, the packed calling convention, adoption of the results,
// and the text forms of specs embedded in ahead-of-time objects.
//
//===----------------------------------------------------------------------===//

#include "runtime/Function.h"

#include "runtime/Allocator.h"
#include "runtime/BoundaryNames.h"
#include "runtime/Cuda.h"

#include "runtime/Error.h"
#include "runtime/PreparedWeights.h"
#include "runtime/SpecText.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

namespace kiln {

//===----------------------------------------------------------------------===//
// Text forms
//===----------------------------------------------------------------------===//

namespace {

/// Whether `token` can stand in the spec text (and in the C string it is
/// embedded in): printable ASCII without spaces (a NUL had cut the text and
/// lost the size relations after it).
bool isToken(std::string_view token) {
  return !token.empty() &&
         std::all_of(token.begin(), token.end(), [](char c) {
           auto byte = static_cast<unsigned char>(c);
           return byte > 0x20 && byte < 0x7f;
         });
}

/// `text` with every byte that is not printable ASCII as \xNN, for
/// messages.
std::string escaped(std::string_view text) {
  std::string out;
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    out += byte >= 0x20 && byte < 0x7f ? std::string(1, c)
                                       : fmt::format("\\x{:02x}", byte);
  }
  return out;
}

void checkToken(const std::string &token, const char *what) {
  if (!isToken(token)) {
    throw Error(std::string("kiln: cannot serialize ") + what + " '" +
                escaped(token) +
                "': it must be non-empty printable ASCII without spaces");
  }
}

std::string joinShape(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    text += (i ? "," : "") + std::to_string(shape[i]);
  }
  return text + "]";
}

/// A SizeExpr as one word: "<constant>" then ",<coefficient>*g<group>" per
/// term ("-1,1*g0,1*g3").
std::string joinExpr(const SizeExpr &e) {
  std::string text = std::to_string(e.constant);
  for (auto [group, coefficient] : e.terms) {
    text += "," + std::to_string(coefficient) + "*g" + std::to_string(group);
  }
  return text;
}

/// Reads the words of one line, reporting where a malformed one is.
class LineReader {
public:
  LineReader(std::string_view text, const char *what) : what_(what) {
    std::istringstream in{std::string(text)};
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty()) {
        lines_.push_back(line);
      }
    }
  }
  bool next() {
    if (index_ >= lines_.size()) {
      return false;
    }
    words_.clear();
    std::istringstream in(lines_[index_++]);
    std::string w;
    while (in >> w) {
      words_.push_back(w);
    }
    // A line of white space only says nothing.
    return words_.empty() ? next() : true;
  }
  const std::string &keyword() const { return words_.front(); }
  size_t size() const { return words_.size(); }
  [[noreturn]] void fail(const std::string &why) const {
    throw Error(std::string("kiln: malformed ") + what_ + " at line " +
                std::to_string(index_) + " ('" + escaped(lines_[index_ - 1]) +
                "'): " + why);
  }
  void expectWords(size_t n) const {
    if (words_.size() != n) {
      fail("expected " + std::to_string(n) + " fields");
    }
  }
  const std::string &word(size_t i) const { return words_.at(i); }
  int64_t integer(size_t i) const {
    const std::string &w = words_.at(i);
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(w.c_str(), &end, 10);
    if (w.empty() || *end != '\0' || errno == ERANGE) {
      fail("'" + w + "' is not an integer");
    }
    return v;
  }
  double real(size_t i) const {
    const std::string &w = words_.at(i);
    char *end = nullptr;
    double v = std::strtod(w.c_str(), &end);
    if (w.empty() || *end != '\0') {
      fail("'" + w + "' is not a number");
    }
    return v;
  }
  /// A product of SizeExprs, its factors joined by ';'.
  std::vector<SizeExpr> product(size_t i, size_t groups) const {
    const std::string &w = words_.at(i);
    std::vector<SizeExpr> factors;
    size_t start = 0;
    while (true) {
      size_t end = w.find(';', start);
      std::string part =
          w.substr(start, end == std::string::npos ? end : end - start);
      if (factors.size() >= ElementCheck::kMaxFactors) {
        fail("'" + w + "' has more than " +
             std::to_string(ElementCheck::kMaxFactors) + " factors");
      }
      factors.push_back(expr(part, groups));
      if (end == std::string::npos) {
        return factors;
      }
      start = end + 1;
    }
  }
  /// A SizeExpr (joinExpr's form) over the first `groups` groups.
  SizeExpr expr(size_t i, size_t groups) const {
    return expr(words_.at(i), groups);
  }
  SizeExpr expr(const std::string &w, size_t groups) const {
    SizeExpr e;
    std::istringstream in(w);
    std::string part;
    bool first = true;
    while (std::getline(in, part, ',')) {
      char *end = nullptr;
      errno = 0;
      long long v = std::strtoll(part.c_str(), &end, 10);
      if (part.empty() || end == part.c_str() || errno == ERANGE) {
        fail("'" + w + "' is not a size expression");
      }
      if (first) {
        if (*end != '\0') {
          fail("'" + w + "' is not a size expression");
        }
        e.constant = v;
        first = false;
        continue;
      }
      if (end[0] != '*' || end[1] != 'g' || v > SizeExpr::kMaxCoefficient ||
          v < -SizeExpr::kMaxCoefficient || e.terms.size() >= SizeExpr::kMaxTerms) {
        fail("'" + w + "' is not a size expression (at most " +
             std::to_string(SizeExpr::kMaxTerms) + " terms, coefficients within " +
             std::to_string(SizeExpr::kMaxCoefficient) + ")");
      }
      const char *digits = end + 2;
      char *groupEnd = nullptr;
      errno = 0;
      unsigned long long g = std::strtoull(digits, &groupEnd, 10);
      if (!std::isdigit(static_cast<unsigned char>(*digits)) ||
          *groupEnd != '\0' || errno == ERANGE || g >= groups) {
        fail("'" + w + "' names no group");
      }
      e.terms.push_back({size_t(g), v});
    }
    if (first || w.back() == ',') {
      fail("'" + w + "' is not a size expression");
    }
    return e;
  }
  std::vector<int64_t> shape(size_t i) const {
    const std::string &w = words_.at(i);
    if (w.size() < 2 || w.front() != '[' || w.back() != ']') {
      fail("'" + w + "' is not a shape");
    }
    std::vector<int64_t> shape;
    std::string inner = w.substr(1, w.size() - 2);
    std::istringstream in(inner);
    std::string part;
    while (std::getline(in, part, ',')) {
      char *end = nullptr;
      long long v = std::strtoll(part.c_str(), &end, 10);
      if (part.empty() || *end != '\0' || v < -1) {
        fail("'" + w + "' is not a shape");
      }
      shape.push_back(v);
    }
    return shape;
  }

private:
  const char *what_;
  std::vector<std::string> lines_, words_;
  size_t index_ = 0;
};

DType parseDType(const LineReader &r, size_t i) {
  for (DType d : {DType::f32, DType::i32, DType::i64, DType::i1}) {
    if (r.word(i) == name(d)) {
      return d;
    }
  }
  r.fail("unknown dtype '" + r.word(i) + "'");
}

} // namespace

// ArgSpec::Role in the spec text: the IR's kiln.kind spellings, in the
// enum's order.
static_assert(std::size(boundary::kRoles) ==
              size_t(ArgSpec::Role::prepared) + 1);

std::optional<ArgSpec::Role> parseRole(std::string_view text) {
  for (size_t i = 0; i < std::size(boundary::kRoles); ++i) {
    if (text == boundary::kRoles[i]) {
      return ArgSpec::Role(i);
    }
  }
  return std::nullopt;
}

/// ArgSpec::Require in the spec text, in the enum's order.
static const std::string kRequireNames[] = {
    "-", boundary::kRequirePositive, boundary::kRequireFiniteNonnegative};

std::string serialize(const FunctionSpec &spec) {
  checkToken(spec.name, "a function name");
  // The spec text is the ahead-of-time objects', whose GPU code takes and
  // returns host buffers only.
  for (const ArgSpec &a : spec.args) {
    if (a.onDevice) {
      throw Error("kiln: function '" + spec.name + "' keeps '" + a.name +
                  "' in GPU memory, which a spec text cannot say");
    }
  }
  for (const ResultSpec &r : spec.results) {
    if (r.onDevice) {
      throw Error("kiln: function '" + spec.name + "' returns '" + r.name +
                  "' in GPU memory, which a spec text cannot say");
    }
  }
  std::ostringstream os;
  os << "function " << spec.name << "\n";
  for (const ArgSpec &a : spec.args) {
    checkToken(a.name, "an argument name");
    std::string kind = boundary::kRoles[size_t(a.role)];
    os << "arg " << a.name << " " << kind << " "
       << (a.isScalar ? "scalar" : name(a.dtype)) << " " << joinShape(a.shape)
       << " " << a.idBound << " "
       << (a.ignoredId ? std::to_string(*a.ignoredId) : "none") << " "
       << kRequireNames[size_t(a.require)] << "\n";
  }
  for (const ResultSpec &r : spec.results) {
    checkToken(r.name, "a result name");
    os << "result " << r.name << " " << joinShape(r.shape) << " " << r.updates
       << "\n";
  }
  for (const DimGroup &g : spec.groups) {
    os << "group " << g.size;
    for (auto [arg, dim] : g.dims) {
      os << " " << arg << ":" << dim;
    }
    os << "\n";
  }
  for (const PositionLimit &l : spec.positionLimits) {
    os << "limit " << l.group << " " << l.offsetArg << " " << l.maxLen;
    if (l.length >= 0) {
      os << " " << l.length;
    }
    os << "\n";
  }
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    if (spec.groups[g].minSize > 0) {
      os << "min " << g << " " << spec.groups[g].minSize << "\n";
    }
  }
  for (const SizeCheck &c : spec.sizeChecks) {
    os << "check " << (c.atLeast ? "ge " : "eq ") << joinExpr(c.lhs) << " "
       << joinExpr(c.rhs) << "\n";
  }
  // A product as one word: its factors joined by ';'.
  auto joinProduct = [](const std::vector<SizeExpr> &factors) {
    std::string text;
    for (const SizeExpr &f : factors) {
      text += (text.empty() ? "" : ";") + joinExpr(f);
    }
    return text;
  };
  for (const ElementCheck &c : spec.elementChecks) {
    os << (c.divides ? "divides " : "elements ") << joinProduct(c.lhs) << " "
       << joinProduct(c.rhs)
       << "\n";
  }
  if (spec.lossTokens) {
    os << "tokens " << spec.lossTokens->arg << " "
       << (spec.lossTokens->ignoreIndex
               ? std::to_string(*spec.lossTokens->ignoreIndex)
               : "none")
       << (spec.lossTokens->sum ? " sum" : " mean") << "\n";
  }
  return os.str();
}

FunctionSpec parseFunctionSpec(std::string_view text) {
  LineReader r(text, "function spec");
  FunctionSpec spec;
  if (!r.next() || r.keyword() != "function" || r.size() != 2) {
    throw Error("kiln: malformed function spec: it must start with "
                "'function <name>'");
  }
  spec.name = r.word(1);
  while (r.next()) {
    const std::string &k = r.keyword();
    if (k == "arg") {
      r.expectWords(8);
      ArgSpec a;
      a.name = r.word(1);
      if (!isToken(a.name)) {
        r.fail("an argument name must be printable ASCII without spaces");
      }
      std::optional<ArgSpec::Role> role = parseRole(r.word(2));
      if (!role) {
        r.fail("unknown argument kind '" + r.word(2) + "'");
      }
      a.role = *role;
      // Names are unique, but for a parameter's prepared layout, which
      // takes its parameter's name.
      for (const ArgSpec &earlier : spec.args) {
        bool preparedOf = a.role == ArgSpec::Role::prepared &&
                          earlier.role == ArgSpec::Role::param;
        if (earlier.name == a.name && !preparedOf) {
          r.fail("two arguments are called '" + a.name + "'");
        }
      }
      a.isScalar = r.word(3) == "scalar";
      if (!a.isScalar) {
        a.dtype = parseDType(r, 3);
      }
      a.shape = r.shape(4);
      a.idBound = r.integer(5);
      if (r.word(6) != "none") {
        a.ignoredId = r.integer(6);
      }
      auto require = std::find(std::begin(kRequireNames),
                               std::end(kRequireNames), r.word(7));
      if (require == std::end(kRequireNames)) {
        r.fail("unknown requirement '" + r.word(7) + "'");
      }
      a.require = ArgSpec::Require(require - std::begin(kRequireNames));
      if ((a.require == ArgSpec::Require::positive && !a.isScalar) ||
          (a.require == ArgSpec::Require::finiteNonnegative &&
           (a.isScalar || a.dtype != DType::f32))) {
        r.fail("argument '" + a.name + "' cannot be required to be " +
               r.word(7));
      }
      bool scalarTensor = !a.isScalar && a.dtype == DType::f32 &&
                          a.shape.empty();
      bool f32Tensor = !a.isScalar && a.dtype == DType::f32;
      switch (a.role) {
      case ArgSpec::Role::learningRate:
        if (!scalarTensor) {
          r.fail("the learning rate must be an f32 scalar tensor");
        }
        break;
      case ArgSpec::Role::step:
      case ArgSpec::Role::seed:
        if (!a.isScalar) {
          r.fail("a step number or seed must be an i64 scalar");
        }
        break;
      case ArgSpec::Role::param:
      case ArgSpec::Role::state:
        if (!f32Tensor) {
          r.fail("a parameter or optimizer state must be an f32 tensor");
        }
        break;
      case ArgSpec::Role::prepared:
        if (!f32Tensor || a.shape.size() != 2) {
          r.fail("a prepared parameter must be a 2-D f32 tensor");
        }
        break;
      case ArgSpec::Role::input:
        break;
      }
      spec.args.push_back(a);
    } else if (k == "result") {
      r.expectWords(4);
      ResultSpec result{r.word(1), r.shape(2), r.integer(3)};
      if (!isToken(result.name)) {
        r.fail("a result name must be printable ASCII without spaces");
      }
      for (const ResultSpec &earlier : spec.results) {
        if (earlier.name == result.name) {
          r.fail("two results are called '" + result.name + "'");
        }
      }
      if (result.updates < -1 || result.updates >= int64_t(spec.args.size())) {
        r.fail("the result updates no argument");
      }
      if (result.updates >= 0) {
        const ArgSpec &arg = spec.args[result.updates];
        if (arg.isScalar || arg.dtype != DType::f32 ||
            arg.shape != result.shape) {
          r.fail("the result updates argument '" + arg.name +
                 "', which is not an f32 tensor of the result's shape");
        }
        for (const ResultSpec &earlier : spec.results) {
          if (earlier.updates == result.updates) {
            r.fail("two results update argument '" + arg.name + "'");
          }
        }
      }
      spec.results.push_back(result);
    } else if (k == "group") {
      if (r.size() < 2) {
        r.fail("expected a size");
      }
      DimGroup g;
      g.size = r.integer(1);
      for (size_t i = 2; i < r.size(); ++i) {
        const std::string &w = r.word(i);
        size_t colon = w.find(':');
        char *end = nullptr;
        unsigned long long arg = std::strtoull(w.c_str(), &end, 10);
        long long dim = colon == std::string::npos
                            ? -1
                            : std::strtoll(w.c_str() + colon + 1, nullptr, 10);
        if (colon == std::string::npos || end != w.c_str() + colon ||
            arg >= spec.args.size() || spec.args[arg].isScalar || dim < 0 ||
            dim >= int64_t(spec.args[arg].shape.size())) {
          r.fail("'" + w + "' is not an argument dimension");
        }
        g.dims.push_back({size_t(arg), dim});
      }
      if (g.dims.empty()) {
        r.fail("an empty group");
      }
      spec.groups.push_back(g);
    } else if (k == "limit") {
      // limit <group> <offset arg> <max_len> [<static length>]
      if (r.size() != 5) {
        r.expectWords(4);
      }
      PositionLimit l;
      int64_t group = r.integer(1);
      l.offsetArg = r.integer(2);
      l.maxLen = r.integer(3);
      if (r.size() == 5) {
        l.length = r.integer(4);
        if (l.length < 0 || group != 0) {
          r.fail("a static length is at least 0, with group 0");
        }
      } else if (group < 0 || size_t(group) >= spec.groups.size()) {
        r.fail("no such group");
      }
      if (l.offsetArg < -1 || l.offsetArg >= int64_t(spec.args.size()) ||
          (l.offsetArg >= 0 && !spec.args[l.offsetArg].isScalar)) {
        r.fail("the offset is not a scalar argument");
      }
      l.group = size_t(group);
      spec.positionLimits.push_back(l);
    } else if (k == "min") {
      r.expectWords(3);
      int64_t group = r.integer(1), size = r.integer(2);
      if (group < 0 || size_t(group) >= spec.groups.size()) {
        r.fail("no such group");
      }
      if (size < 0) {
        r.fail("a negative least size");
      }
      spec.groups[size_t(group)].minSize = size;
    } else if (k == "check") {
      r.expectWords(4);
      if (r.word(1) != "eq" && r.word(1) != "ge") {
        r.fail("a size check is 'eq' or 'ge', got '" + r.word(1) + "'");
      }
      spec.sizeChecks.push_back({r.expr(2, spec.groups.size()),
                                 r.expr(3, spec.groups.size()),
                                 r.word(1) == "ge"});
    } else if (k == "elements" || k == "divides") {
      r.expectWords(3);
      spec.elementChecks.push_back({r.product(1, spec.groups.size()),
                                    r.product(2, spec.groups.size()),
                                    k == "divides"});
    } else if (k == "tokens") {
      r.expectWords(4);
      LossTokens tokens;
      tokens.arg = r.integer(1);
      if (r.word(2) != "none") {
        tokens.ignoreIndex = r.integer(2);
      }
      if (r.word(3) != "mean" && r.word(3) != "sum") {
        r.fail("the loss reduction must be mean or sum, got '" + r.word(3) +
               "'");
      }
      tokens.sum = r.word(3) == "sum";
      if (tokens.arg < 0 || tokens.arg >= int64_t(spec.args.size()) ||
          spec.args[tokens.arg].isScalar ||
          (spec.args[tokens.arg].dtype != DType::i32 &&
           spec.args[tokens.arg].dtype != DType::i64)) {
        r.fail("the loss tokens are not an integer tensor argument");
      }
      if (spec.lossTokens) {
        r.fail("two loss token entries");
      }
      spec.lossTokens = tokens;
    } else {
      r.fail("unknown entry '" + k + "'");
    }
  }
  return spec;
}

std::string serialize(const std::vector<ParamSpec> &params) {
  std::ostringstream os;
  os.precision(17);
  for (const ParamSpec &p : params) {
    checkToken(p.name, "a parameter name");
    os << "param " << p.name << " " << joinShape(p.shape) << " "
       << int(p.init.kind) << " " << p.init.a << " " << p.init.b << "\n";
  }
  return os.str();
}

std::vector<ParamSpec> parseParamSpecs(std::string_view text) {
  LineReader r(text, "parameter list");
  std::vector<ParamSpec> params;
  while (r.next()) {
    if (r.keyword() != "param") {
      r.fail("unknown entry '" + r.keyword() + "'");
    }
    r.expectWords(6);
    ParamSpec p;
    p.name = r.word(1);
    p.shape = r.shape(2);
    int64_t kind = r.integer(3);
    if (kind < 0 || kind > int64_t(Init::Kind::xavierNormal)) {
      r.fail("unknown initializer");
    }
    for (int64_t size : p.shape) {
      if (size < 0) {
        r.fail("a parameter needs a static shape");
      }
    }
    p.init = {Init::Kind(kind), r.real(4), r.real(5)};
    params.push_back(p);
  }
  return params;
}

//===----------------------------------------------------------------------===//
// Calls
//===----------------------------------------------------------------------===//

int64_t countTokens(const LossTokens &tokens, const Tensor &targets) {
  auto count = [&](const auto *ids) {
    int64_t kept = 0;
    for (int64_t i = 0, n = targets.numel(); i < n; ++i) {
      kept += !tokens.ignoreIndex || int64_t(ids[i]) != *tokens.ignoreIndex;
    }
    return kept;
  };
  switch (targets.dtype()) {
  case DType::i64:
    return count(targets.data<int64_t>());
  case DType::i32:
    return count(targets.data<int32_t>());
  default:
    throw Error("kiln: loss targets must be an i32 or i64 tensor, got " +
                std::string(name(targets.dtype())));
  }
}

CompiledFunction::CompiledFunction(FunctionSpec spec, PackedFunction fn)
    : spec_(std::move(spec)), fn_(fn), plans_(memory::makeCallPlans()) {
  if (!fn_) {
    throw Error("kiln: function '" + spec_.name + "' has no code");
  }
}

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

/// An argument the function writes (ResultSpec::updates) must share no
/// byte with any other argument: the function would read values it has
/// already overwritten, or write one result over another.
static void checkInPlaceArguments(const FunctionSpec &spec,
                                  const std::vector<Arg> &args) {
  std::vector<bool> written(args.size(), false);
  bool any = false;
  for (const ResultSpec &r : spec.results) {
    if (r.updates >= 0) {
      written[r.updates] = any = true;
    }
  }
  if (!any) {
    return;
  }
  struct Span {
    uintptr_t begin, end;
    size_t arg;
  };
  std::vector<Span> spans;
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg &arg = args[i];
    if (!arg.isScalar && arg.tensor.nbytes() > 0) {
      auto begin = reinterpret_cast<uintptr_t>(arg.tensor.raw());
      spans.push_back({begin, begin + arg.tensor.nbytes(), i});
    }
  }
  std::sort(spans.begin(), spans.end(),
            [](const Span &a, const Span &b) { return a.begin < b.begin; });
  // In order of start, a span overlaps an earlier one iff it starts before
  // the furthest end so far; it overlaps an earlier written one iff it
  // starts before the furthest end of the written ones.
  const Span *furthest = nullptr, *furthestWritten = nullptr;
  for (const Span &span : spans) {
    const Span *other = nullptr;
    if (furthestWritten && span.begin < furthestWritten->end) {
      other = furthestWritten;
    } else if (written[span.arg] && furthest && span.begin < furthest->end) {
      other = furthest;
    }
    if (other) {
      size_t w = written[span.arg] ? span.arg : other->arg;
      size_t o = w == span.arg ? other->arg : span.arg;
      throw Error("kiln: " + describeArg(spec, w) +
                  " is updated in place but shares memory with " +
                  describeArg(spec, o) +
                  "; pass a tensor of its own (Tensor::clone)");
    }
    if (!furthest || span.end > furthest->end) {
      furthest = &span;
    }
    if (written[span.arg] &&
        (!furthestWritten || span.end > furthestWritten->end)) {
      furthestWritten = &span;
    }
  }
}

/// The value of `e` for the sizes of `args`, exactly (128 bits: SizeExpr's
/// bounds keep it far inside).
static __int128 valueOf(const FunctionSpec &spec, const std::vector<Arg> &args,
                        const SizeExpr &e) {
  __int128 v = e.constant;
  for (auto [group, coefficient] : e.terms) {
    auto [arg, dim] = spec.groups[group].dims.front();
    v += static_cast<__int128>(coefficient) * args[arg].tensor.shape()[dim];
  }
  return v;
}

/// `e` in words: "dimension 1 of argument #2 'v' of 'f' + 1".
static std::string describeExpr(const FunctionSpec &spec, const SizeExpr &e) {
  std::string text;
  for (auto [group, coefficient] : e.terms) {
    auto [arg, dim] = spec.groups[group].dims.front();
    std::string term =
        "dimension " + std::to_string(dim) + " of " + describeArg(spec, arg);
    if (coefficient == 1 || coefficient == -1) {
      text += text.empty() ? (coefficient < 0 ? "-" : "")
                           : (coefficient < 0 ? " - " : " + ");
    } else {
      text += (text.empty() ? "" : " + ") + std::to_string(coefficient) + " * ";
    }
    text += term;
  }
  if (e.constant != 0 || text.empty()) {
    __int128 c = e.constant;
    text += text.empty() ? fmt::format("{}", c)
                         : fmt::format(" {} {}", c < 0 ? '-' : '+',
                                       c < 0 ? -c : c);
  }
  return text;
}

/// The conditions of SizeCheck.
static void checkSizes(const FunctionSpec &spec, const std::vector<Arg> &args) {
  for (const SizeCheck &c : spec.sizeChecks) {
    __int128 lhs = valueOf(spec, args, c.lhs), rhs = valueOf(spec, args, c.rhs);
    if (c.atLeast ? lhs >= rhs : lhs == rhs) {
      continue;
    }
    // "<expression> (<value>)", the value left out of a constant.
    auto side = [&](const SizeExpr &e, __int128 v) {
      return e.terms.empty() ? describeExpr(spec, e)
                             : fmt::format("{} ({})", describeExpr(spec, e), v);
    };
    throw Error(fmt::format("kiln: the sizes given to '{}' do not fit: {} "
                            "must {} {}",
                            spec.name, side(c.lhs, lhs),
                            c.atLeast ? "be at least" : "equal",
                            side(c.rhs, rhs)));
  }
}

/// The conditions of ElementCheck: each product evaluated exactly, a 0
/// factor making it 0, and one past 2^126 taken as too large to equal any
/// tensor's element count.
static void checkElements(const FunctionSpec &spec,
                          const std::vector<Arg> &args) {
  // The product, or nothing when it is too large.
  auto product = [&](const std::vector<SizeExpr> &factors)
      -> std::optional<__int128> {
    std::vector<__int128> values;
    for (const SizeExpr &f : factors) {
      values.push_back(valueOf(spec, args, f));
      if (values.back() == 0) {
        return 0;
      }
    }
    __int128 p = 1;
    for (__int128 v : values) {
      if (__builtin_mul_overflow(p, v, &p) ||
          p > (static_cast<__int128>(1) << 126) ||
          p < -(static_cast<__int128>(1) << 126)) {
        return std::nullopt;
      }
    }
    return p;
  };
  auto describe = [&](const std::vector<SizeExpr> &factors) {
    std::string text;
    for (const SizeExpr &f : factors) {
      std::string factor = describeExpr(spec, f);
      bool sum = f.terms.size() + (f.constant != 0) > 1;
      text += (text.empty() ? "" : " * ") +
              (sum && factors.size() > 1 ? "(" + factor + ")" : factor);
    }
    return text;
  };
  for (const ElementCheck &c : spec.elementChecks) {
    std::optional<__int128> lhs = product(c.lhs), rhs = product(c.rhs);
    auto shown = [](std::optional<__int128> v) {
      return v ? fmt::format("{}", *v) : std::string("too many");
    };
    if (c.divides) {
      if (lhs && rhs && *rhs != 0 && *lhs % *rhs == 0) {
        continue;
      }
      throw Error(fmt::format(
          "kiln: the sizes given to '{}' do not fit: {} ({}) elements must "
          "be a multiple of {} ({}), which is not 0: a reshape infers a "
          "whole size",
          spec.name, describe(c.lhs), shown(lhs), describe(c.rhs),
          shown(rhs)));
    }
    if (lhs && rhs && *lhs == *rhs) {
      continue;
    }
    throw Error(fmt::format("kiln: the sizes given to '{}' do not fit: {} "
                            "({}) elements must equal {} ({}): a reshape "
                            "keeps its element count",
                            spec.name, describe(c.lhs), shown(lhs),
                            describe(c.rhs), shown(rhs)));
  }
}

static void checkArguments(const FunctionSpec &spec,
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
      if (expected.require == ArgSpec::Require::positive && arg.scalar < 1) {
        throw Error("kiln: " + what + " must be at least 1, got " +
                    std::to_string(arg.scalar));
      }
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
      throw Error("kiln: " + what + " must have shape " +
                  formatShape(expected.shape) + " (?: any size), got " +
                  formatShape(t.shape()));
    }
    if (expected.require == ArgSpec::Require::finiteNonnegative) {
      const float *data = t.data<float>();
      for (int64_t e = 0, n = t.numel(); e < n; ++e) {
        if (!(std::isfinite(data[e]) && data[e] >= 0.0f)) {
          throw Error("kiln: " + what + " must be finite and >= 0, got " +
                      fmt::format("{}", data[e]) + " at flat index " +
                      std::to_string(e));
        }
      }
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
  for (const DimGroup &g : spec.groups) {
    const auto &group = g.dims;
    int64_t want = g.size;
    size_t wantFrom = SIZE_MAX;
    for (auto [argIndex, dim] : group) {
      int64_t size = args[argIndex].tensor.shape()[dim];
      if (size < g.minSize) {
        throw Error("kiln: dimension " + std::to_string(dim) + " of " +
                    describeArg(spec, argIndex) + " is " +
                    std::to_string(size) + " but must be at least " +
                    std::to_string(g.minSize));
      }
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
  checkSizes(spec, args);
  checkElements(spec, args);
  checkInPlaceArguments(spec, args);
  for (const PositionLimit &limit : spec.positionLimits) {
    int64_t length = limit.length;
    if (length < 0) {
      const auto &[argIndex, dim] = spec.groups[limit.group].dims.front();
      length = args[argIndex].tensor.shape()[dim];
    }
    int64_t offset = limit.offsetArg >= 0 ? args[limit.offsetArg].scalar : 0;
    if (offset < 0 || length > limit.maxLen || offset > limit.maxLen - length) {
      // offset + length may not fit in 64 bits (UBSan found it).
      throw Error("kiln: positions [" + std::to_string(offset) + ", " +
                  fmt::format("{}", static_cast<__int128>(offset) + length) +
                  ") of '" + spec.name +
                  "' exceed the positions the model holds (a learned position "
                  "table or a key/value cache of " +
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
CompiledFunction::run(const ParameterStore &parameters,
                      const std::map<std::string, Arg> &inputs,
                      PreparedWeights *prepared) const {
  const FunctionSpec &fs = spec_;
  const std::string &name = fs.name;
  std::vector<Arg> args;
  size_t used = 0;
  for (const ArgSpec &arg : fs.args) {
    if (arg.role == ArgSpec::Role::param) {
      args.emplace_back(parameters.get(arg.name));
      continue;
    }
    if (arg.role == ArgSpec::Role::prepared) {
      args.emplace_back(prepared ? prepared->get(parameters, arg.name)
                                 : transposeMatrix(parameters.get(arg.name)));
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
        known |= arg.role != ArgSpec::Role::param &&
                 arg.role != ArgSpec::Role::prepared && arg.name == input;
      }
      if (!known) {
        throw Error("kiln: '" + name + "' has no input '" + input + "'");
      }
    }
  }
  return call(args);
}

/// `args` with each argument in the memory `spec` reads it from: a host
/// tensor for an argument read from device memory (ArgSpec::onDevice) is
/// copied to the GPU for the call, into `placed`, which is then returned
/// (`args` itself when nothing moves: no copy on the CPU's calls). Throws
/// kiln::Error for a GPU tensor where host memory is read.
static const std::vector<Arg> &placeArguments(const FunctionSpec &spec,
                                              const std::vector<Arg> &args,
                                              std::vector<Arg> &placed) {
  for (size_t i = 0; i < std::min(args.size(), spec.args.size()); ++i) {
    const Arg &arg = args[i];
    if (arg.isScalar || !arg.tensor.defined()) {
      continue;
    }
    if (arg.tensor.onGpu() && !spec.args[i].onDevice) {
      throw Error("kiln: " + describeArg(spec, i) +
                  " is a tensor in GPU memory, but the function reads it "
                  "from host memory; copy it with kiln::cuda::toHost");
    }
    if (spec.args[i].onDevice && !arg.tensor.onGpu()) {
      if (placed.empty()) {
        placed = args;
      }
      placed[i] = Arg(cuda::toDevice(arg.tensor));
    }
  }
  return placed.empty() ? args : placed;
}

std::vector<Tensor> CompiledFunction::call(const std::vector<Arg> &given) const {
  const FunctionSpec &fs = spec_;
  checkArguments(fs, given);
  std::vector<Arg> placed;
  const std::vector<Arg> &args = placeArguments(fs, given, placed);

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
  // The descriptors of the results the function returns (those it writes
  // into arguments are not among them).
  size_t resultWords = 0, returned = 0;
  for (const ResultSpec &r : fs.results) {
    if (r.updates < 0) {
      resultWords += 3 + 2 * r.shape.size();
      ++returned;
    }
  }
  std::vector<uint64_t> results(std::max<size_t>(resultWords, 1));
  if (returned) {
    packed.push_back(results.data());
  }
  // The large buffers the call allocates and frees come from the arena
  // planned for these input shapes (runtime/Allocator.h).
  std::string shapes;
  for (const Arg &arg : args) {
    if (!arg.isScalar) {
      for (int64_t s : arg.tensor.shape()) {
        shapes += std::to_string(s) + ",";
      }
    }
    shapes += ";";
  }
  memory::PlannedCall planned(*plans_, shapes);
  fn_(packed.data());
  planned.finish();

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
  for (const ResultSpec &r : fs.results) {
    if (r.updates >= 0) {
      out.push_back(args[r.updates].tensor); // written in place
      continue;
    }
    size_t rank = r.shape.size();
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
    if (r.onDevice) {
      // kiln-host-interface hands over a contiguous device buffer of the
      // result's own.
      out.push_back(cuda::adopt(d.allocated, data, d.sizes, DType::f32));
      continue;
    }
    auto allocated = reinterpret_cast<uintptr_t>(d.allocated);
    bool owned = allocated != kGlobalMarker && !inputs.count(allocated) &&
                 !inputs.count(reinterpret_cast<uintptr_t>(d.aligned)) &&
                 !planned.inArena(d.allocated); // never outlives the call
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
                                  [toRelease] { memory::release(toRelease); }));
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
    memory::release(p);
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Executable
//===----------------------------------------------------------------------===//

Executable::~Executable() = default;

void Executable::add(CompiledFunction function) {
  std::string name = function.spec().name;
  functions_.insert_or_assign(name, std::move(function));
}

const CompiledFunction &Executable::function(const std::string &name) const {
  auto it = functions_.find(name);
  if (it == functions_.end()) {
    std::string known;
    for (const auto &[fn, _] : functions_) {
      known += (known.empty() ? "" : ", ") + fn;
    }
    throw Error("kiln: no function '" + name +
                "' in the compiled module (it has: " + known + ")");
  }
  return it->second;
}

bool Executable::contains(const std::string &name) const {
  return functions_.count(name) != 0;
}

std::vector<std::string> Executable::functions() const {
  std::vector<std::string> names;
  for (const auto &[name, _] : functions_) {
    names.push_back(name);
  }
  return names;
}

std::vector<Tensor> Executable::call(const std::string &name,
                                     const std::vector<Arg> &args) const {
  return function(name).call(args);
}

std::vector<Tensor> Executable::run(const std::string &name,
                                    const ParameterStore &parameters,
                                    const std::map<std::string, Arg> &inputs,
                                    PreparedWeights *prepared) const {
  return function(name).run(parameters, inputs, prepared);
}

ParameterStore Executable::initParameters(uint64_t seed) const {
  ParameterStore store;
  Rng rng(seed);
  for (const ParamSpec &p : params_) {
    store.add(p.name, p.shape, p.init, rng);
  }
  return store;
}

} // namespace kiln
