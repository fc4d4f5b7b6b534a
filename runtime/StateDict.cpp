//===- StateDict.cpp - Parameters saved under other names ----------------===//
//
// Patterns are matched by a linear-time glob matcher (names come from
// untrusted files: a backtracking matcher that recurses per character
// overflowed the stack on one long name). A rule's replacement is its `to`
// pattern with what `from`'s wildcards matched put back in order.
//
//===----------------------------------------------------------------------===//

#include "runtime/StateDict.h"

#include "runtime/Error.h"
#include "runtime/Safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string_view>

using namespace kiln;

namespace {

/// A pattern split at its wildcards: literal parts around them.
struct Pattern {
  std::string text;
  std::vector<std::string> literals; ///< wildcards + 1 parts
  std::vector<bool> anything;        ///< per wildcard: '**' rather than '*'

  size_t wildcards() const { return anything.size(); }
};

/// Parses `text` (what: "rename rule 2's 'from'"), throwing kiln::Error for
/// an empty or overlong pattern or a run of three or more '*'.
Pattern parsePattern(const std::string &text, const std::string &what) {
  if (text.empty()) {
    throw Error(fmt::format("kiln: state dict mapping: {} is empty", what));
  }
  if (text.size() > kMaxStateDictNameLength) {
    throw Error(fmt::format("kiln: state dict mapping: {} has {} characters, "
                            "more than {}",
                            what, text.size(), kMaxStateDictNameLength));
  }
  Pattern p;
  p.text = text;
  p.literals.emplace_back();
  for (size_t i = 0; i < text.size();) {
    if (text[i] != '*') {
      p.literals.back() += text[i];
      ++i;
      continue;
    }
    size_t run = text.find_first_not_of('*', i);
    run = (run == std::string::npos ? text.size() : run) - i;
    if (run > 2) {
      throw Error(fmt::format("kiln: state dict mapping: {} '{}' has '{}': "
                              "use '*' (within a component) or '**' (any "
                              "characters)",
                              what, text, std::string(run, '*')));
    }
    p.anything.push_back(run == 2);
    p.literals.emplace_back();
    i += run;
  }
  return p;
}

/// What the wildcards of `p` match in `name`, in order, or nothing when `p`
/// does not match the whole name. Each wildcard takes the longest run that
/// lets the rest match (as a greedy regular expression would). Linear in
/// the name's length for a given pattern, without recursion: can[k][i] says
/// whether the pattern from literal k on matches name[i..], filled from the
/// last literal back; the captures are then read forwards.
std::optional<std::vector<std::string_view>> match(const Pattern &p,
                                                   std::string_view name) {
  size_t n = name.size(), parts = p.literals.size();
  // nextDot[i]: the first '.' at or after i (n when none).
  std::vector<size_t> nextDot(n + 1, n);
  for (size_t i = n; i-- > 0;) {
    nextDot[i] = name[i] == '.' ? i : nextDot[i + 1];
  }
  auto literalAt = [&](size_t k, size_t i) {
    const std::string &l = p.literals[k];
    return i <= n && name.substr(i).starts_with(l);
  };
  // can[k][i], and last[k][i]: the greatest j <= i with can[k][j] (or -1).
  std::vector<std::vector<char>> can(parts, std::vector<char>(n + 1, 0));
  std::vector<std::vector<int64_t>> last(parts,
                                         std::vector<int64_t>(n + 1, -1));
  auto fillLast = [&](size_t k) {
    for (size_t i = 0; i <= n; ++i) {
      last[k][i] = can[k][i] ? int64_t(i) : (i ? last[k][i - 1] : -1);
    }
  };
  // The end of the run wildcard w may take starting at `from`, when the
  // pattern from literal w + 1 must match after it; -1 when there is none.
  auto longestRun = [&](size_t w, size_t from) -> int64_t {
    if (p.anything[w]) {
      int64_t j = last[w + 1][n];
      return j >= int64_t(from) ? j : -1;
    }
    // '*': one or more characters, none of them a dot.
    size_t limit = nextDot[from];
    if (limit <= from) {
      return -1;
    }
    int64_t j = last[w + 1][limit];
    return j > int64_t(from) ? j : -1;
  };
  for (size_t k = parts; k-- > 0;) {
    size_t len = p.literals[k].size();
    for (size_t i = 0; i <= n; ++i) {
      if (!literalAt(k, i)) {
        continue;
      }
      size_t after = i + len;
      can[k][i] = k + 1 == parts ? after == n : longestRun(k, after) >= 0;
    }
    fillLast(k);
  }
  if (!can[0][0]) {
    return std::nullopt;
  }
  std::vector<std::string_view> captures;
  size_t at = p.literals[0].size();
  for (size_t w = 0; w < p.wildcards(); ++w) {
    size_t end = size_t(longestRun(w, at));
    captures.push_back(name.substr(at, end - at));
    at = end + p.literals[w + 1].size();
  }
  return captures;
}

bool matches(const Pattern &p, const std::string &name) {
  return match(p, name).has_value();
}

/// `name` renamed by `from` -> `to`, or nothing when `from` does not match.
std::optional<std::string> rename(const Pattern &from, const Pattern &to,
                                  const std::string &name) {
  auto captures = match(from, name);
  if (!captures) {
    return std::nullopt;
  }
  std::string out = to.literals[0];
  for (size_t w = 0; w < to.wildcards(); ++w) {
    out += std::string((*captures)[w]) + to.literals[w + 1];
  }
  return out;
}

/// A copy of the 2-D tensor `t` transposed.
Tensor transposed(const Tensor &t) {
  int64_t rows = t.shape()[0], cols = t.shape()[1];
  Tensor out = Tensor::empty({cols, rows}, t.dtype());
  size_t bytes = sizeOf(t.dtype());
  const char *in = static_cast<const char *>(t.raw());
  char *dst = static_cast<char *>(out.raw());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      std::memcpy(dst + (c * rows + r) * bytes, in + (r * cols + c) * bytes,
                  bytes);
    }
  }
  return out;
}

/// "'h.0.w' (file: 'transformer.h.0.w')", or "'w'" when it was not renamed.
std::string described(const std::string &model, const std::string &file) {
  return model == file ? fmt::format("'{}'", model)
                       : fmt::format("'{}' (file: '{}')", model, file);
}

} // namespace

std::optional<std::vector<std::string>>
kiln::matchStateDictPattern(const std::string &pattern,
                            const std::string &name) {
  Pattern p = parsePattern(pattern, "the pattern");
  if (name.size() > kMaxStateDictNameLength) {
    throw Error(fmt::format("kiln: state dict mapping: a name of {} "
                            "characters is longer than {}",
                            name.size(), kMaxStateDictNameLength));
  }
  auto captures = match(p, name);
  if (!captures) {
    return std::nullopt;
  }
  return std::vector<std::string>(captures->begin(), captures->end());
}

NamedTensors kiln::mapStateDict(const NamedTensors &tensors,
                                const StateDictMapping &mapping,
                                const ParameterStore &store) {
  std::vector<std::pair<Pattern, Pattern>> renames;
  for (size_t i = 0; i < mapping.renames.size(); ++i) {
    const auto &rule = mapping.renames[i];
    std::string what = fmt::format("rename rule {}", i + 1);
    Pattern from = parsePattern(rule.from, what + "'s 'from'");
    Pattern to = parsePattern(rule.to, what + "'s 'to'");
    if (from.wildcards() != to.wildcards()) {
      throw Error(fmt::format("kiln: state dict mapping: {} '{}' -> '{}' has "
                              "{} wildcard(s) on the left and {} on the "
                              "right: each side needs the same",
                              what, rule.from, rule.to, from.wildcards(),
                              to.wildcards()));
    }
    renames.emplace_back(std::move(from), std::move(to));
  }
  std::vector<Pattern> ignore, transpose;
  for (size_t i = 0; i < mapping.ignore.size(); ++i) {
    ignore.push_back(parsePattern(mapping.ignore[i],
                                  fmt::format("ignore pattern {}", i + 1)));
  }
  for (size_t i = 0; i < mapping.transpose.size(); ++i) {
    transpose.push_back(parsePattern(
        mapping.transpose[i], fmt::format("transpose pattern {}", i + 1)));
  }

  std::vector<std::string> problems;
  std::map<std::string, std::pair<std::string, Tensor>> byParameter;
  for (const auto &[fileName, tensor] : tensors) {
    if (fileName.size() > kMaxStateDictNameLength) {
      problems.push_back(fmt::format("a file tensor's name has {} characters, "
                                     "more than {} ('{}...')",
                                     fileName.size(), kMaxStateDictNameLength,
                                     fileName.substr(0, 40)));
      continue;
    }
    if (std::any_of(ignore.begin(), ignore.end(),
                    [&](const Pattern &p) { return matches(p, fileName); })) {
      continue;
    }
    std::string name = fileName;
    for (const auto &[from, to] : renames) {
      if (auto renamed = rename(from, to, fileName)) {
        name = *renamed;
        break;
      }
    }
    std::string what = described(name, fileName);
    if (!store.contains(name)) {
      problems.push_back(fmt::format("{} {} names no parameter of the model",
                                     what, formatShape(tensor.shape())));
      continue;
    }
    auto [it, inserted] = byParameter.emplace(name, std::pair{fileName, tensor});
    if (!inserted) {
      problems.push_back(fmt::format("'{}' is given twice: by file tensors "
                                     "'{}' and '{}'",
                                     name, it->second.first, fileName));
      continue;
    }
    bool flip = std::any_of(transpose.begin(), transpose.end(),
                            [&](const Pattern &p) { return matches(p, name); });
    const Tensor &target = store.get(name);
    std::string how;
    if (flip) {
      if (tensor.rank() != 2) {
        problems.push_back(fmt::format("{} is to be transposed but has shape "
                                       "{}, not 2-D",
                                       what, formatShape(tensor.shape())));
        continue;
      }
      how = fmt::format(" (transposed from {})", formatShape(tensor.shape()));
    }
    std::vector<int64_t> shape = tensor.shape();
    if (flip) {
      std::swap(shape[0], shape[1]);
    }
    if (shape != target.shape()) {
      problems.push_back(fmt::format("{} has shape {}{} but the model's "
                                     "parameter is {}",
                                     what, formatShape(shape), how,
                                     formatShape(target.shape())));
    } else if (tensor.dtype() != target.dtype()) {
      problems.push_back(fmt::format("{} has dtype {} but the model's "
                                     "parameter is {}",
                                     what, kiln::name(tensor.dtype()),
                                     kiln::name(target.dtype())));
    } else if (flip) {
      it->second.second = transposed(tensor);
    }
  }
  NamedTensors mapped;
  for (const Parameter &parameter : store) {
    auto it = byParameter.find(parameter.name);
    if (it == byParameter.end()) {
      problems.push_back(fmt::format("no file tensor gives parameter '{}' {}",
                                     parameter.name,
                                     formatShape(parameter.tensor.shape())));
      continue;
    }
    mapped.emplace_back(parameter.name, it->second.second);
  }
  if (!problems.empty()) {
    std::string message = fmt::format(
        "kiln: the state dict does not fit the model ({} problem{}):",
        problems.size(), problems.size() == 1 ? "" : "s");
    size_t shown = std::min<size_t>(problems.size(), 20);
    for (size_t i = 0; i < shown; ++i) {
      message += "\n  " + problems[i];
    }
    if (shown < problems.size()) {
      message += fmt::format("\n  ... and {} more", problems.size() - shown);
    }
    throw Error(message);
  }
  return mapped;
}

std::map<std::string, std::string>
kiln::loadParameters(const std::string &path, ParameterStore &store,
                     const StateDictMapping &mapping) {
  SafetensorsFile file = loadCheckpointTensors(path);
  try {
    store.setFrom(mapStateDict(file.tensors, mapping, store));
  } catch (const Error &e) {
    std::string_view message = e.what();
    if (message.starts_with("kiln: ")) {
      message.remove_prefix(6);
    }
    throw Error(fmt::format("kiln: {}: {}", path, message));
  }
  return file.metadata;
}
