//===- ArgumentChecks.cpp - Checks of a compiled function's arguments -----===//
//
// What CompiledFunction::call checks of its arguments before the compiled
// code runs (ArgumentChecks.h): their number, kinds, dtypes and shapes, the
// values some must hold, the dynamic sizes the function needs to agree, the
// size and element-count relations of its spec, arguments updated in place
// that share memory with others, and the positions a call may reach.
//
//===----------------------------------------------------------------------===//

#include "runtime/ArgumentChecks.h"

#include "runtime/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

namespace kiln {

std::string describeArg(const FunctionSpec &spec, size_t index) {
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
    text += text.empty()
                ? fmt::format("{}", c)
                : fmt::format(" {} {}", c < 0 ? '-' : '+', c < 0 ? -c : c);
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
  auto product =
      [&](const std::vector<SizeExpr> &factors) -> std::optional<__int128> {
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
          spec.name, describe(c.lhs), shown(lhs), describe(c.rhs), shown(rhs)));
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

void checkArguments(const FunctionSpec &spec, const std::vector<Arg> &args) {
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

} // namespace kiln
