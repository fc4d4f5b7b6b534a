//===- MemrefCopyTest.cpp - memrefCopy against an element-by-element copy -===//

#include "runtime/MemrefCopy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

namespace {

/// A ranked descriptor of rank R, laid out as MLIR's lowering makes it.
template <int R> struct Descriptor {
  float *allocated, *aligned;
  int64_t offset;
  int64_t sizes[R], strides[R];
};

/// Copies `sizes` elements from `src` (offset, strides) into a buffer of
/// `dstElements` floats filled with -1 at (offset, strides) through
/// memrefCopy, and through a naive loop; both results must be equal.
template <int R>
void expectCopy(const std::vector<int64_t> &sizes, int64_t srcOffset,
                const std::vector<int64_t> &srcStrides, int64_t dstOffset,
                const std::vector<int64_t> &dstStrides, int64_t srcElements,
                int64_t dstElements) {
  std::vector<float> src(srcElements);
  std::iota(src.begin(), src.end(), 1.0f);
  std::vector<float> expected(dstElements, -1.0f), actual(dstElements, -1.0f);
  int64_t count = 1;
  for (int64_t s : sizes) {
    count *= s;
  }
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i, s = srcOffset, d = dstOffset;
    for (int k = R - 1; k >= 0; --k) {
      int64_t index = rest % sizes[k];
      rest /= sizes[k];
      s += index * srcStrides[k];
      d += index * dstStrides[k];
    }
    expected[d] = src[s];
  }
  Descriptor<R> from{src.data(), src.data(), srcOffset, {}, {}};
  Descriptor<R> to{actual.data(), actual.data(), dstOffset, {}, {}};
  for (int k = 0; k < R; ++k) {
    from.sizes[k] = to.sizes[k] = sizes[k];
    from.strides[k] = srcStrides[k];
    to.strides[k] = dstStrides[k];
  }
  kiln::UnrankedMemref a{R, &from}, b{R, &to};
  memrefCopy(sizeof(float), &a, &b);
  EXPECT_EQ(actual, expected);
}

TEST(MemrefCopy, MatchesAnElementByElementCopy) {
  // Contiguous: one run.
  expectCopy<3>({2, 3, 4}, 0, {12, 4, 1}, 0, {12, 4, 1}, 24, 24);
  // A cache of 3 positions into one of 5 (rows 4 apart in both, batches
  // 12 and 20 apart): runs of one batch's rows.
  expectCopy<3>({2, 3, 4}, 0, {12, 4, 1}, 0, {20, 4, 1}, 24, 40);
  // The new position written after them, at an offset.
  expectCopy<3>({2, 1, 4}, 0, {4, 4, 1}, 12, {20, 4, 1}, 8, 40);
  // A column slice: runs of the inner dimension only.
  expectCopy<2>({3, 2}, 1, {5, 1}, 0, {2, 1}, 15, 6);
  // Transposed: no contiguous run, element by element.
  expectCopy<2>({3, 4}, 0, {1, 3}, 0, {4, 1}, 12, 12);
  // Size-1 dimensions with any stride join the run.
  expectCopy<3>({1, 4, 1}, 2, {99, 1, 7}, 3, {5, 1, 9}, 8, 8);
  // Empty.
  expectCopy<2>({0, 4}, 0, {4, 1}, 0, {4, 1}, 0, 4);
  expectCopy<2>({3, 0}, 0, {0, 1}, 0, {0, 1}, 0, 4);
}

TEST(MemrefCopy, RankZeroCopiesOneElement) {
  float from = 7, to = 0;
  struct {
    float *allocated, *aligned;
    int64_t offset;
  } a{&from, &from, 0}, b{&to, &to, 0};
  kiln::UnrankedMemref src{0, &a}, dst{0, &b};
  memrefCopy(sizeof(float), &src, &dst);
  EXPECT_EQ(to, 7);
}

} // namespace
