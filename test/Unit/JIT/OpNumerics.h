//===- OpNumerics.h - Helpers of the OpNumerics tests -----------*- C++ -*-===//
//
// What OpNumericsTest.cpp, OpNumericsAttentionTest.cpp and
// OpNumericsElementwiseTest.cpp share: the sizes each test runs its compiled
// function at, a reference for unary ops, and the message of an expected
// kiln::Error.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_JIT_OPNUMERICS_H
#define KILN_TEST_UNIT_JIT_OPNUMERICS_H

#include "runtime/Error.h"
#include "runtime/Tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::opnumerics {

/// The (batch, sequence) sizes a test runs its compiled function at.
inline const std::vector<std::pair<int64_t, int64_t>> kSizes = {
    {1, 1}, {2, 5}, {3, 7}};

/// Applies `f` to every element (a reference for unary ops).
inline Tensor mapRef(const Tensor &x, const std::function<double(double)> &f) {
  Tensor y = Tensor::empty(x.shape(), DType::f32);
  for (int64_t i = 0; i < x.numel(); ++i) {
    y.data<float>()[i] = float(f(x.data<float>()[i]));
  }
  return y;
}

/// The message of the kiln::Error `f` throws (a test failure if none).
inline std::string expectErrorMessage(const std::function<void()> &f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a kiln::Error";
  return "";
}

} // namespace kiln::opnumerics

#endif // KILN_TEST_UNIT_JIT_OPNUMERICS_H
