//===- CommandLine.h - The examples' option parsing --------------*- C++
//-*-===//
//
// `--name value` options bound to variables, `--name` switches, and --help,
// shared by the training examples. Bad input is a kiln::Error that names the
// option.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_EXAMPLES_COMMON_COMMANDLINE_H
#define KILN_EXAMPLES_COMMON_COMMANDLINE_H

#include "runtime/Error.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

namespace kiln::examples {

/// The whole of `text` as a T; throws kiln::Error naming `flag` otherwise.
template <typename T>
T parseNumber(const std::string &flag, const char *text) {
  T value{};
  const char *end = text + std::strlen(text);
  auto [ptr, ec] = std::from_chars(text, end, value);
  if (ec != std::errc() || ptr != end) {
    throw Error(fmt::format("{} needs a number, got '{}'", flag, text));
  }
  return value;
}

struct CommandLine {
  std::map<std::string, int64_t *> integers;
  std::map<std::string, uint64_t *> unsignedIntegers;
  std::map<std::string, double *> reals;
  std::map<std::string, std::string *> strings;
  std::map<std::string, bool *> switches;

  /// Sets the bound variables from argv; prints `usage` and exits for
  /// --help.
  void parse(int argc, char **argv, const char *usage) const {
    for (int i = 1; i < argc; ++i) {
      std::string flag = argv[i];
      if (flag == "--help" || flag == "-h") {
        fmt::print("{}", usage);
        std::exit(0);
      }
      if (auto it = switches.find(flag); it != switches.end()) {
        *it->second = true;
        continue;
      }
      if (i + 1 >= argc) {
        throw Error(fmt::format("unknown option or missing value: '{}' (see "
                                "--help)",
                                flag));
      }
      const char *value = argv[++i];
      if (auto it = integers.find(flag); it != integers.end()) {
        *it->second = parseNumber<int64_t>(flag, value);
      } else if (auto it = unsignedIntegers.find(flag);
                 it != unsignedIntegers.end()) {
        *it->second = parseNumber<uint64_t>(flag, value);
      } else if (auto it = reals.find(flag); it != reals.end()) {
        *it->second = parseNumber<double>(flag, value);
      } else if (auto it = strings.find(flag); it != strings.end()) {
        *it->second = value;
      } else {
        throw Error(fmt::format("unknown option '{}' (see --help)", flag));
      }
    }
  }
};

} // namespace kiln::examples

#endif // KILN_EXAMPLES_COMMON_COMMANDLINE_H
