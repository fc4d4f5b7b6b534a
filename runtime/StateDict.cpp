//===- StateDict.cpp - Parameters saved under other names ----------------===//
//
// Patterns become std::regex (a '*' a group of non-dots, a '**' a group of
// anything); a rule's replacement is its `to` pattern with the groups put
// back in order.
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
#include <regex>

using namespace kiln;

namespace {

/// A pattern split at its wildcards: literal parts around them.
struct Pattern {
  std::string text;
  std::vector<std::string> literals; ///< wildcards + 1 parts
  std::vector<bool> anything;        ///< per wildcard: '**' rather than '*'
  std::regex regex;

  size_t wildcards() const { return anything.size(); }
};

/// Parses `text` (what: "rename rule 2's 'from'"), throwing kiln::Error for
/// an empty pattern or a run of three or more '*'.
Pattern parsePattern(const std::string &text, const std::string &what) {
  if (text.empty()) {
    throw Error(fmt::format("kiln: state dict mapping: {} is empty", what));
  }
  Pattern p;
  p.text = text;
  p.literals.emplace_back();
  std::string regex;
  for (size_t i = 0; i < text.size();) {
    if (text[i] != '*') {
      static const std::string special = R"(\^$.|?+()[]{})";
      if (special.find(text[i]) != std::string::npos) {
        regex += '\\';
      }
      regex += text[i];
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
    regex += run == 2 ? "(.*)" : "([^.]+)";
    p.literals.emplace_back();
    i += run;
  }
  p.regex = std::regex(regex, std::regex::ECMAScript | std::regex::optimize);
  return p;
}

bool matches(const Pattern &p, const std::string &name) {
  return std::regex_match(name, p.regex);
}

/// `name` renamed by `from` -> `to`, or nothing when `from` does not match.
std::optional<std::string> rename(const Pattern &from, const Pattern &to,
                                  const std::string &name) {
  std::smatch match;
  if (!std::regex_match(name, match, from.regex)) {
    return std::nullopt;
  }
  std::string out = to.literals[0];
  for (size_t w = 0; w < to.wildcards(); ++w) {
    out += match[w + 1].str() + to.literals[w + 1];
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
  SafetensorsFile file = loadSafetensors(path);
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
