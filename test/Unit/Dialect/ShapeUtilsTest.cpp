//===- ShapeUtilsTest.cpp - Tests of the shape arithmetic -----------------===//
//
// Broadcasting, reshape and slice resolution, with static and dynamic sizes.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kiln/IR/ShapeUtils.h"

#include <gtest/gtest.h>

#include <vector>

using namespace mlir::kiln;
using shape::kDynamic;
using Shape = std::vector<int64_t>;

static Shape toVector(const llvm::SmallVectorImpl<int64_t> &shape) {
  return Shape(shape.begin(), shape.end());
}

TEST(ShapeUtils, CompatibleTreatsDynamicAsWildcard) {
  EXPECT_TRUE(shape::compatible(4, 4));
  EXPECT_FALSE(shape::compatible(4, 5));
  EXPECT_TRUE(shape::compatible(kDynamic, 5));
  EXPECT_TRUE(shape::compatible(5, kDynamic));
  EXPECT_EQ(shape::merge(kDynamic, 7), 7);
  EXPECT_EQ(shape::merge(7, kDynamic), 7);
  EXPECT_EQ(shape::merge(kDynamic, kDynamic), kDynamic);
}

TEST(ShapeUtils, NormalizeAxis) {
  EXPECT_EQ(shape::normalizeAxis(-1, 3), 2);
  EXPECT_EQ(shape::normalizeAxis(0, 3), 0);
  EXPECT_EQ(shape::normalizeAxis(-3, 3), 0);
  EXPECT_FALSE(shape::normalizeAxis(3, 3));
  EXPECT_FALSE(shape::normalizeAxis(-4, 3));
  EXPECT_FALSE(shape::normalizeAxis(0, 0));
}

TEST(ShapeUtils, FormatPrintsDynamicAsQuestionMark) {
  EXPECT_EQ(shape::format({kDynamic, 4, 128}), "[?, 4, 128]");
  EXPECT_EQ(shape::format({}), "[]");
}

TEST(ShapeUtils, BroadcastAlignsTrailingDimensions) {
  llvm::SmallVector<int64_t> out;
  EXPECT_EQ(shape::broadcast({2, 3, 4}, {4}, out), "");
  EXPECT_EQ(toVector(out), (Shape{2, 3, 4}));
  EXPECT_EQ(shape::broadcast({2, 1, 4}, {3, 1}, out), "");
  EXPECT_EQ(toVector(out), (Shape{2, 3, 4}));
  EXPECT_EQ(shape::broadcast({}, {5}, out), "");
  EXPECT_EQ(toVector(out), (Shape{5}));
}

TEST(ShapeUtils, BroadcastWithDynamicSizes) {
  llvm::SmallVector<int64_t> out;
  // A dynamic size against a static one > 1 must be that size (or 1).
  EXPECT_EQ(shape::broadcast({kDynamic, kDynamic, 8}, {kDynamic, 8}, out), "");
  EXPECT_EQ(toVector(out), (Shape{kDynamic, kDynamic, 8}));
  EXPECT_EQ(shape::broadcast({kDynamic}, {6}, out), "");
  EXPECT_EQ(toVector(out), (Shape{6}));
  EXPECT_EQ(shape::broadcast({kDynamic}, {1}, out), "");
  EXPECT_EQ(toVector(out), (Shape{kDynamic}));
}

TEST(ShapeUtils, BroadcastReportsClash) {
  llvm::SmallVector<int64_t> out;
  std::string error = shape::broadcast({2, 3}, {4}, out);
  EXPECT_EQ(error, "shapes [2, 3] and [4] do not broadcast: size 3 vs 4 at "
                   "dimension 1 of the result");
  EXPECT_EQ(toVector(out), (Shape{2, kDynamic}));
}

TEST(ShapeUtils, ReshapeKeepsAndInfers) {
  llvm::SmallVector<int64_t> out;
  EXPECT_EQ(shape::reshape({kDynamic, kDynamic, 512}, {0, 0, 8, 64}, out), "");
  EXPECT_EQ(toVector(out), (Shape{kDynamic, kDynamic, 8, 64}));
  EXPECT_EQ(shape::reshape({2, 3, 4}, {-1, 4}, out), "");
  EXPECT_EQ(toVector(out), (Shape{6, 4}));
  EXPECT_EQ(shape::reshape({kDynamic, 4}, {-1}, out), "");
  EXPECT_EQ(toVector(out), (Shape{kDynamic}));
  // Merging heads back: -1 is known although batch and sequence are not.
  EXPECT_EQ(shape::reshape({kDynamic, kDynamic, 8, 64}, {0, 0, -1}, out), "");
  EXPECT_EQ(toVector(out), (Shape{kDynamic, kDynamic, 512}));
}

TEST(ShapeUtils, ReshapeErrors) {
  llvm::SmallVector<int64_t> out;
  EXPECT_EQ(shape::reshape({2, 3}, {-1, -1}, out),
            "at most one size may be -1, found -1 at indices 0 and 1");
  EXPECT_EQ(shape::reshape({2, 3}, {5}, out),
            "cannot reshape [2, 3] into [5]: the element counts differ (6 vs "
            "5 outside the kept dimensions)");
  // Kept dynamic sizes cancel, so the rest can still be checked.
  EXPECT_EQ(shape::reshape({kDynamic, 2, 2, 1}, {0, 0, 4}, out),
            "cannot reshape [?, 2, 2, 1] into [?, 2, 4]: the element counts "
            "differ (2 vs 4 outside the kept dimensions)");
  EXPECT_EQ(shape::reshape({2, 3}, {4, -1}, out),
            "cannot infer the size at index 1: 6 elements of [2, 3] are not "
            "a multiple of 4");
  EXPECT_EQ(shape::reshape({2}, {0, 0}, out),
            "size 0 at index 1 keeps an input dimension, but the input has "
            "rank 1");
  EXPECT_EQ(shape::reshape({2}, {-2}, out),
            "sizes must be positive, 0 (keep) or -1 (infer), found -2 at "
            "index 0");
}

TEST(ShapeUtils, SliceStatic) {
  int64_t length = 0;
  EXPECT_EQ(shape::slice(10, 2, 5, length), "");
  EXPECT_EQ(length, 3);
  EXPECT_EQ(shape::slice(10, -1, std::nullopt, length), "");
  EXPECT_EQ(length, 1);
  EXPECT_EQ(shape::slice(10, -4, -1, length), "");
  EXPECT_EQ(length, 3);
  EXPECT_EQ(shape::slice(10, 0, std::nullopt, length), "");
  EXPECT_EQ(length, 10);
  EXPECT_NE(shape::slice(10, 5, 5, length), "");
  EXPECT_NE(shape::slice(10, 0, 11, length), "");
  EXPECT_NE(shape::slice(10, -11, std::nullopt, length), "");
}

TEST(ShapeUtils, SliceDynamic) {
  int64_t length = 0;
  EXPECT_EQ(shape::slice(kDynamic, 1, 4, length), "");
  EXPECT_EQ(length, 3);
  EXPECT_EQ(shape::slice(kDynamic, -1, std::nullopt, length), "");
  EXPECT_EQ(length, 1);
  EXPECT_EQ(shape::slice(kDynamic, -3, -1, length), "");
  EXPECT_EQ(length, 2);
  EXPECT_EQ(shape::slice(kDynamic, 2, std::nullopt, length), "");
  EXPECT_EQ(length, kDynamic);
  EXPECT_EQ(shape::slice(kDynamic, 2, -1, length), "");
  EXPECT_EQ(length, kDynamic);
  EXPECT_EQ(shape::slice(kDynamic, 4, 2, length), "slice [4:2] is empty");
}
