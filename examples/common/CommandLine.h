//===- CommandLine.h - The examples' option parsing --------------*- C++
//-*-===//
//
// `--name value` options bound to variables, `--name` switches, and --help,
// shared by the training examples. Bad input (not a number, outside the
// option's range, a real that is not finite) is a kiln::Error that names
// the option.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_EXAMPLES_COMMON_COMMANDLINE_H
#define KILN_EXAMPLES_COMMON_COMMANDLINE_H

#include <kiln/runtime.h>

#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
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

/// "between 1 and 64", "at least 0", ... for an error message.
template <typename T>
std::string describeRange(T min, T max) {
  bool low = min != std::numeric_limits<T>::lowest(),
       high = max != std::numeric_limits<T>::max();
  if (low && high) {
    return fmt::format("between {} and {}", min, max);
  }
  if (low) {
    return fmt::format("at least {}", min);
  }
  return high ? fmt::format("at most {}", max) : std::string("a number");
}

/// An integer option and the values it may take.
struct Integer {
  Integer(int64_t *value, int64_t min = std::numeric_limits<int64_t>::min(),
          int64_t max = std::numeric_limits<int64_t>::max())
      : value(value), min(min), max(max) {}
  int64_t *value;
  int64_t min, max;
};

/// A real option: always finite, and within [min, max].
struct Real {
  Real(double *value, double min = -std::numeric_limits<double>::max(),
       double max = std::numeric_limits<double>::max())
      : value(value), min(min), max(max) {}
  double *value;
  double min, max;
};

struct CommandLine {
  std::map<std::string, Integer> integers;
  std::map<std::string, uint64_t *> unsignedIntegers;
  std::map<std::string, Real> reals;
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
        int64_t parsed = parseNumber<int64_t>(flag, value);
        const Integer &option = it->second;
        if (parsed < option.min || parsed > option.max) {
          throw Error(fmt::format("{} must be {}, got {}", flag,
                                  describeRange(option.min, option.max),
                                  parsed));
        }
        *option.value = parsed;
      } else if (auto it = unsignedIntegers.find(flag);
                 it != unsignedIntegers.end()) {
        *it->second = parseNumber<uint64_t>(flag, value);
      } else if (auto it = reals.find(flag); it != reals.end()) {
        double parsed = parseNumber<double>(flag, value);
        const Real &option = it->second;
        // NaN fails both comparisons; the bounds are finite.
        if (!(parsed >= option.min && parsed <= option.max)) {
          throw Error(fmt::format("{} must be a finite number {}, got {}", flag,
                                  describeRange(option.min, option.max),
                                  value));
        }
        *option.value = parsed;
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
