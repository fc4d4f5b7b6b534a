//===- SpecText.cpp - Function and parameter specs as text ----------------===//
//
// The line-oriented text forms of FunctionSpec and ParamSpec that
// ahead-of-time objects embed (SpecText.h): writing them, and reading them
// back as untrusted input. Also the spellings of ArgSpec::Role
// (parseRole, runtime/Function.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/SpecText.h"

#include "base/BoundaryNames.h"
#include "runtime/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
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
  return !token.empty() && std::all_of(token.begin(), token.end(), [](char c) {
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
          v < -SizeExpr::kMaxCoefficient ||
          e.terms.size() >= SizeExpr::kMaxTerms) {
        fail("'" + w + "' is not a size expression (at most " +
             std::to_string(SizeExpr::kMaxTerms) +
             " terms, coefficients within " +
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
  for (DType d : {DType::f32, DType::i32, DType::i64, DType::i1, DType::bf16}) {
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
       << " " << name(r.dtype) << "\n";
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
       << joinProduct(c.rhs) << "\n";
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
      bool scalarTensor =
          !a.isScalar && a.dtype == DType::f32 && a.shape.empty();
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
      r.expectWords(5);
      ResultSpec result{r.word(1), r.shape(2), r.integer(3)};
      result.dtype = parseDType(r, 4);
      if (result.dtype != DType::f32 && result.dtype != DType::bf16) {
        r.fail("result '" + result.name + "' is not an f32 or bf16 tensor");
      }
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
        if (arg.isScalar || arg.dtype != result.dtype ||
            arg.shape != result.shape) {
          r.fail("the result updates argument '" + arg.name +
                 "', which is not a tensor of the result's dtype and shape");
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

} // namespace kiln
