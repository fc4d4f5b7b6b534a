//===- ExpectError.h - Expect a kiln::Error with a message ------*- C++ -*-===//

#ifndef KILN_TEST_UNIT_RUNTIME_EXPECTERROR_H
#define KILN_TEST_UNIT_RUNTIME_EXPECTERROR_H

#include "runtime/Error.h"

#include <gtest/gtest.h>

#include <string>

/// Runs `statement` and expects it to throw a kiln::Error whose message
/// contains `fragment` (any other outcome is a test failure).
#define EXPECT_KILN_ERROR(statement, fragment)                                 \
  do {                                                                         \
    try {                                                                      \
      statement;                                                               \
      ADD_FAILURE() << "expected a kiln::Error containing \"" << (fragment)    \
                    << "\" from: " #statement;                                 \
    } catch (const kiln::Error &error) {                                       \
      EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos)   \
          << "message: " << error.what()                                       \
          << "\nexpected to contain: " << (fragment);                          \
    }                                                                          \
  } while (false)

#endif // KILN_TEST_UNIT_RUNTIME_EXPECTERROR_H
