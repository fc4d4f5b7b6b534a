//===- StateDictFuzzer.cpp - libFuzzer target: state-dict name patterns ---===//
//
// The names a state dict maps come from untrusted files (and patterns from
// users): matchStateDictPattern either matches, does not, or refuses with a
// kiln::Error, in time linear in the name. The input is a pattern, a
// newline, and a name. A match's captures, put back between the pattern's
// literals, give the name again, a '*' capture being one or more non-dots;
// on short inputs the result is that of a backtracking reference that tries
// the longest run first (a greedy regular expression's captures).
//
//===----------------------------------------------------------------------===//

#include "runtime/Error.h"
#include "runtime/StateDict.h"

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

using namespace kiln;

namespace {

struct Token {
  std::string literal; ///< empty for a wildcard
  bool wildcard = false, anything = false;
};

/// The pattern as tokens; nothing for a run of three or more '*'.
std::optional<std::vector<Token>> tokenize(const std::string &p) {
  std::vector<Token> tokens;
  for (size_t i = 0; i < p.size();) {
    if (p[i] != '*') {
      if (tokens.empty() || tokens.back().wildcard) {
        tokens.push_back({});
      }
      tokens.back().literal += p[i++];
      continue;
    }
    size_t run = 0;
    while (i + run < p.size() && p[i + run] == '*') {
      ++run;
    }
    if (run > 2) {
      return std::nullopt;
    }
    tokens.push_back({"", true, run == 2});
    i += run;
  }
  return tokens;
}

/// Backtracking, longest run first: exponential, for short inputs only.
bool reference(const std::vector<Token> &tokens, size_t t,
               std::string_view name, size_t at,
               std::vector<std::string> &captures) {
  if (t == tokens.size()) {
    return at == name.size();
  }
  const Token &token = tokens[t];
  if (!token.wildcard) {
    return name.substr(at).starts_with(token.literal) &&
           reference(tokens, t + 1, name, at + token.literal.size(),
                     captures);
  }
  size_t limit = name.size();
  if (!token.anything) {
    size_t dot = name.find('.', at);
    limit = dot == std::string_view::npos ? name.size() : dot;
  }
  for (size_t end = limit + 1; end-- > at + (token.anything ? 0 : 1);) {
    captures.push_back(std::string(name.substr(at, end - at)));
    if (reference(tokens, t + 1, name, end, captures)) {
      return true;
    }
    captures.pop_back();
  }
  return false;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view input(reinterpret_cast<const char *>(data), size);
  size_t newline = input.find('\n');
  if (newline == std::string_view::npos) {
    return 0;
  }
  std::string pattern(input.substr(0, newline));
  std::string name(input.substr(newline + 1));
  std::optional<std::vector<std::string>> captures;
  try {
    captures = matchStateDictPattern(pattern, name);
  } catch (const Error &) {
    return 0; // an empty, overlong or malformed pattern, an overlong name
  }
  std::optional<std::vector<Token>> tokens = tokenize(pattern);
  if (!tokens) {
    std::abort(); // accepted a malformed pattern
  }
  if (captures) {
    std::string rebuilt;
    size_t w = 0;
    for (const Token &t : *tokens) {
      if (!t.wildcard) {
        rebuilt += t.literal;
        continue;
      }
      if (w >= captures->size()) {
        std::abort();
      }
      const std::string &c = (*captures)[w++];
      if (!t.anything && (c.empty() || c.find('.') != std::string::npos)) {
        std::abort();
      }
      rebuilt += c;
    }
    if (w != captures->size() || rebuilt != name) {
      std::abort();
    }
  }
  if (pattern.size() <= 12 && name.size() <= 24) {
    std::vector<std::string> expected;
    bool matched = reference(*tokens, 0, name, 0, expected);
    if (matched != captures.has_value() ||
        (matched && expected != *captures)) {
      std::abort();
    }
  }
  return 0;
}
