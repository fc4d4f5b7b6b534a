//===- TensorTest.cpp - Tests of kiln::Tensor -----------------------------===//

#include "runtime/Tensor.h"

#include "test/Unit/Runtime/ExpectError.h"
#include "test/Unit/Runtime/NearestBF16.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>

using namespace kiln;

namespace {

/// Whether `pointer` is 64-byte aligned.
bool isAligned64(const void *pointer) {
  return reinterpret_cast<uintptr_t>(pointer) % 64 == 0;
}

TEST(TensorTest, DTypeSizesAndNames) {
  EXPECT_EQ(sizeOf(DType::f32), 4u);
  EXPECT_EQ(sizeOf(DType::i32), 4u);
  EXPECT_EQ(sizeOf(DType::i64), 8u);
  EXPECT_EQ(sizeOf(DType::i1), 1u);
  EXPECT_EQ(sizeOf(DType::bf16), 2u);
  EXPECT_STREQ(name(DType::bf16), "bf16");
  EXPECT_STREQ(name(DType::f32), "f32");
  EXPECT_STREQ(name(DType::i32), "i32");
  EXPECT_STREQ(name(DType::i64), "i64");
  EXPECT_STREQ(name(DType::i1), "i1");
  EXPECT_EQ(formatShape({2, 3}), "[2, 3]");
  EXPECT_EQ(formatShape({}), "[]");
}

TEST(TensorTest, UndefinedByDefault) {
  Tensor tensor;
  EXPECT_FALSE(tensor.defined());
  EXPECT_EQ(tensor.numel(), 0);
  EXPECT_EQ(tensor.nbytes(), 0u);
  EXPECT_FALSE(tensor.clone().defined());
  EXPECT_KILN_ERROR(tensor.reshape({1}), "undefined");
}

TEST(TensorTest, ShapeStridesAndDims) {
  Tensor tensor = Tensor::zeros({2, 3, 4}, DType::f32);
  EXPECT_TRUE(tensor.defined());
  EXPECT_EQ(tensor.rank(), 3);
  EXPECT_EQ(tensor.numel(), 24);
  EXPECT_EQ(tensor.nbytes(), 96u);
  EXPECT_EQ(tensor.strides(), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(tensor.dim(0), 2);
  EXPECT_EQ(tensor.dim(2), 4);
  EXPECT_EQ(tensor.dim(-1), 4);
  EXPECT_EQ(tensor.dim(-3), 2);
  EXPECT_KILN_ERROR(tensor.dim(3), "dimension 3 is out of range for a tensor "
                                   "of rank 3 (shape [2, 3, 4])");
  EXPECT_KILN_ERROR(tensor.dim(-4), "dimension -4 is out of range");
  EXPECT_TRUE(isAligned64(tensor.raw()));
  for (float value : tensor.toVector<float>()) {
    EXPECT_EQ(value, 0.0f);
  }
}

TEST(TensorTest, Scalar) {
  Tensor tensor = Tensor::full({}, 2.5f);
  EXPECT_EQ(tensor.rank(), 0);
  EXPECT_EQ(tensor.numel(), 1);
  EXPECT_TRUE(tensor.strides().empty());
  EXPECT_EQ(tensor.toVector<float>(), std::vector<float>{2.5f});
  EXPECT_KILN_ERROR(tensor.dim(0), "out of range for a tensor of rank 0");
}

TEST(TensorTest, ZeroSize) {
  for (DType dtype : {DType::f32, DType::i32, DType::i64, DType::i1}) {
    Tensor tensor = Tensor::zeros({0, 5}, dtype);
    EXPECT_TRUE(tensor.defined());
    EXPECT_NE(tensor.raw(), nullptr);
    EXPECT_TRUE(isAligned64(tensor.raw()));
    EXPECT_EQ(tensor.numel(), 0);
    EXPECT_EQ(tensor.nbytes(), 0u);
    EXPECT_EQ(tensor.strides(), (std::vector<int64_t>{5, 1}));
    Tensor copy = tensor.clone();
    EXPECT_TRUE(copy.defined());
    EXPECT_EQ(copy.shape(), tensor.shape());
    EXPECT_EQ(tensor.reshape({5, 0, 3}).numel(), 0);
  }
  EXPECT_TRUE(Tensor::fromVector<float>({0}, {}).toVector<float>().empty());
}

TEST(TensorTest, AlignmentOfOddSizes) {
  for (int64_t size : {1, 3, 17, 63, 65, 1000}) {
    Tensor tensor = Tensor::empty({size}, DType::i1);
    EXPECT_TRUE(isAligned64(tensor.raw())) << size;
  }
}

TEST(TensorTest, RefusesNegativeSizesAndOverflow) {
  EXPECT_KILN_ERROR(Tensor::empty({2, -1}, DType::f32),
                    "shape [2, -1] has a negative size");
  EXPECT_KILN_ERROR(
      Tensor::empty({int64_t(1) << 40, int64_t(1) << 40}, DType::f32),
      "overflows");
  EXPECT_KILN_ERROR(Tensor::empty({int64_t(1) << 62}, DType::i64), "too large");
}

TEST(TensorTest, FromVectorRoundTripsEveryDType) {
  EXPECT_EQ(
      Tensor::fromVector<float>({3}, {1.5f, -2.0f, 0.25f}).toVector<float>(),
      (std::vector<float>{1.5f, -2.0f, 0.25f}));
  EXPECT_EQ(Tensor::fromVector<int32_t>({2, 2}, {1, -2, 3, INT32_MIN})
                .toVector<int32_t>(),
            (std::vector<int32_t>{1, -2, 3, INT32_MIN}));
  EXPECT_EQ(
      Tensor::fromVector<int64_t>({2}, {INT64_MAX, -7}).toVector<int64_t>(),
      (std::vector<int64_t>{INT64_MAX, -7}));
  Tensor mask = Tensor::fromVector<bool>({2, 2}, {true, false, false, true});
  EXPECT_EQ(mask.dtype(), DType::i1);
  EXPECT_EQ(mask.nbytes(), 4u);
  EXPECT_EQ(mask.toVector<bool>(),
            (std::vector<bool>{true, false, false, true}));
  const uint8_t *bytes = static_cast<const uint8_t *>(mask.raw());
  EXPECT_EQ(bytes[0], 1);
  EXPECT_EQ(bytes[1], 0);
}

TEST(TensorTest, FromVectorChecksSize) {
  EXPECT_KILN_ERROR(Tensor::fromVector<float>({2, 3}, {1, 2, 3}),
                    "shape [2, 3] has 6 elements but 3 values were given");
}

TEST(TensorTest, DTypeMismatchNamesBothDTypes) {
  Tensor tensor = Tensor::zeros({2, 3}, DType::f32);
  EXPECT_NE(tensor.data<float>(), nullptr);
  EXPECT_KILN_ERROR(tensor.data<int32_t>(),
                    "tensor of dtype f32 (shape [2, 3]) accessed as i32");
  EXPECT_KILN_ERROR(Tensor::zeros({1}, DType::i64).toVector<bool>(),
                    "dtype i64 (shape [1]) accessed as i1");
}

TEST(TensorTest, CopiesShareStorageCloneDoesNot) {
  Tensor a = Tensor::fromVector<float>({2}, {1, 2});
  Tensor shared = a;
  Tensor deep = a.clone();
  EXPECT_EQ(shared.raw(), a.raw());
  EXPECT_NE(deep.raw(), a.raw());
  EXPECT_TRUE(isAligned64(deep.raw()));
  a.data<float>()[0] = 9;
  EXPECT_EQ(shared.toVector<float>()[0], 9);
  EXPECT_EQ(deep.toVector<float>()[0], 1);
}

TEST(TensorTest, ReshapeSharesStorageAndChecksCount) {
  Tensor a = Tensor::fromVector<int32_t>({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor b = a.reshape({3, 2});
  EXPECT_EQ(b.shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(b.raw(), a.raw());
  EXPECT_EQ(b.toVector<int32_t>(), a.toVector<int32_t>());
  EXPECT_EQ(a.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.reshape({6, 1, 1}).rank(), 3);
  EXPECT_KILN_ERROR(a.reshape({4, 2}), "cannot reshape a tensor of shape "
                                       "[2, 3] (6 elements) to [4, 2] (8 "
                                       "elements)");
  EXPECT_KILN_ERROR(a.reshape({-1, 6}), "negative size");
}

TEST(TensorTest, AdoptReleasesExactlyOnce) {
  int releases = 0;
  void *memory = std::malloc(24);
  {
    Tensor adopted = Tensor::adopt(memory, {2, 3}, DType::f32, [&] {
      ++releases;
      std::free(memory);
    });
    EXPECT_EQ(adopted.raw(), memory);
    EXPECT_EQ(adopted.numel(), 6);
    Tensor copy = adopted;
    Tensor view = adopted.reshape({6});
    adopted = Tensor();
    copy = Tensor();
    EXPECT_EQ(releases, 0);
    EXPECT_EQ(view.raw(), memory);
  }
  EXPECT_EQ(releases, 1);
}

TEST(TensorTest, AdoptNullZeroSizeIsDefinedAndReleased) {
  int releases = 0;
  {
    Tensor adopted =
        Tensor::adopt(nullptr, {0, 4}, DType::i64, [&] { ++releases; });
    EXPECT_TRUE(adopted.defined());
    EXPECT_EQ(adopted.numel(), 0);
  }
  EXPECT_EQ(releases, 1);
}

TEST(TensorTest, FailedAdoptStillReleases) {
  int releases = 0;
  EXPECT_KILN_ERROR(
      Tensor::adopt(nullptr, {2}, DType::f32, [&] { ++releases; }),
      "null data");
  EXPECT_EQ(releases, 1);
  float value = 0;
  EXPECT_KILN_ERROR(
      Tensor::adopt(&value, {-1}, DType::f32, [&] { ++releases; }),
      "negative size");
  EXPECT_EQ(releases, 2);
}

TEST(TensorTest, AdoptWithoutReleaseIsAView) {
  float values[4] = {1, 2, 3, 4};
  Tensor view = Tensor::adopt(values, {4}, DType::f32, nullptr);
  EXPECT_EQ(view.toVector<float>(), (std::vector<float>{1, 2, 3, 4}));
}

} // namespace

// f32 -> bf16 rounds to the nearest (ties to even) as the test's own
// reference does; overflow to infinity, NaN stays NaN; bf16 -> f32 exact;
// other dtypes and undefined tensors are refused.
TEST(TensorTest, ConvertsBetweenF32AndBf16) {
  std::vector<float> in = {0.0f,
                           -0.0f,
                           1.0f,
                           1.00390625f /* tie: down */,
                           1.01171875f /* tie: up */,
                           -2.5f,
                           1e-30f,
                           3.0e38f,
                           0.1f,
                           65504.0f};
  for (int i = 0; i < 1000; ++i) {
    in.push_back(std::ldexp(float(i * 7919 % 1000) - 500.0f, i % 40 - 20));
  }
  Tensor h =
      Tensor::fromVector<float>({int64_t(in.size())}, in).to(DType::bf16);
  ASSERT_EQ(h.dtype(), DType::bf16);
  EXPECT_EQ(h.nbytes(), in.size() * 2);
  std::vector<float> back = h.to(DType::f32).toVector<float>();
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(back[i]),
              std::bit_cast<uint32_t>(kiln::test::nearestBF16(in[i])))
        << in[i];
  }
  EXPECT_TRUE(std::isinf(BFloat16::round(3.4e38f).toFloat()));
  EXPECT_TRUE(std::isnan(BFloat16::round(NAN).toFloat()));
  EXPECT_EQ(BFloat16::round(-INFINITY).toFloat(), -INFINITY);
  EXPECT_EQ(h.to(DType::bf16).toVector<BFloat16>(), h.toVector<BFloat16>());
  EXPECT_KILN_ERROR(Tensor::zeros({2}, DType::i64).to(DType::bf16),
                    "Tensor::to: cannot convert a tensor of dtype i64 "
                    "(shape [2]) to bf16");
  EXPECT_KILN_ERROR(Tensor().to(DType::f32),
                    "cannot convert an undefined tensor");
}
