//===- TestUtil.h - Helpers shared by the DSL unit tests ---------*- C++
//-*-===//
//
// Catching kiln::Error and checking that it names the offending line of the
// test file, and reading a graph's IR back.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_DSL_TESTUTIL_H
#define KILN_TEST_UNIT_DSL_TESTUTIL_H

#include "compiler/DSL/DSL.h"

#include <gtest/gtest.h>

#include <functional>
#include <source_location>
#include <string>

namespace kiln::dsl::testing {

/// The message of the kiln::Error that `build` throws; records a test
/// failure and returns "" when it throws nothing.
inline std::string errorOf(const std::function<void()> &build) {
  try {
    build();
  } catch (const Error &error) {
    return error.what();
  }
  ADD_FAILURE() << "expected a kiln::Error";
  return "";
}

/// "<the calling file>:<line>:", the start of an error reported for `line`
/// of the calling file.
inline std::string
at(int line, std::source_location loc = std::source_location::current()) {
  return std::string(loc.file_name()) + ":" + std::to_string(line) + ":";
}

/// True when `text` contains `part`.
inline bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

/// The number of occurrences of `part` in `text`.
inline int count(const std::string &text, const std::string &part) {
  int n = 0;
  for (size_t pos = text.find(part); pos != std::string::npos;
       pos = text.find(part, pos + part.size())) {
    ++n;
  }
  return n;
}

constexpr int64_t kDyn = kDynamic;

} // namespace kiln::dsl::testing

#endif // KILN_TEST_UNIT_DSL_TESTUTIL_H
