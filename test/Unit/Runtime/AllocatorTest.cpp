//===- AllocatorTest.cpp - The heap of compiled code ----------------------===//

#include "runtime/Allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

using namespace kiln;

namespace {

bool aligned(void *p, uintptr_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

struct AllocatorTest : ::testing::Test {
  void SetUp() override {
    memory::trim();
    memory::setCacheLimit(size_t(1) << 30);
  }
  void TearDown() override { memory::trim(); }
};

TEST_F(AllocatorTest, BlocksAreAlignedAndWritable) {
  for (size_t size : {size_t(0), size_t(1), size_t(63), size_t(4096),
                      memory::kCachedBlockBytes, size_t(3) << 20}) {
    auto *p = static_cast<char *>(memory::allocate(size));
    ASSERT_NE(p, nullptr) << size;
    EXPECT_TRUE(aligned(p, 64)) << size;
    std::memset(p, 0x5a, size);
    memory::release(p);
  }
  memory::release(nullptr);
}

TEST_F(AllocatorTest, LargeBlocksAreReusedAcrossCalls) {
  size_t size = 5 << 20;
  memory::Stats before = memory::stats();
  void *first = memory::allocate(size);
  memory::release(first);
  EXPECT_EQ(memory::stats().cachedBytes, size);
  // The same size (or within 1/8 above the block) gets the same block ...
  void *again = memory::allocate(size - 1000);
  EXPECT_EQ(again, first);
  EXPECT_EQ(memory::stats().reused, before.reused + 1);
  EXPECT_EQ(memory::stats().cachedBytes, 0u);
  memory::release(again);
  // ... a larger one does not take it.
  void *large = memory::allocate(size + 4096);
  EXPECT_NE(large, first);
  memory::release(large);
}

// A miss returns cached blocks of other sizes to the system rather than let
// live + cached bytes pass the most ever live at once (what malloc reaches).
TEST_F(AllocatorTest, TheCacheDoesNotRaiseTheFootprint) {
  size_t mib = 1 << 20;
  void *a = memory::allocate(4 * mib), *b = memory::allocate(4 * mib);
  memory::release(a);
  memory::release(b);
  EXPECT_EQ(memory::stats().cachedBytes, 8 * mib); // 8 MiB were live
  // 2 MiB live: at most 6 MiB may stay cached, so one 4 MiB block goes.
  void *c = memory::allocate(2 * mib);
  EXPECT_EQ(memory::stats().cachedBytes, 4 * mib);
  // 9 MiB live, a new peak: nothing may stay cached.
  void *d = memory::allocate(4 * mib + 3 * 4096 * 256);
  EXPECT_EQ(memory::stats().cachedBytes, 0u);
  memory::release(c);
  memory::release(d);
}

TEST_F(AllocatorTest, SmallBlocksAreNotCached) {
  void *p = memory::allocate(memory::kCachedBlockBytes / 2);
  memory::release(p);
  EXPECT_EQ(memory::stats().cachedBytes, 0u);
}

TEST_F(AllocatorTest, TheCacheRespectsItsLimit) {
  size_t size = 1 << 20;
  memory::setCacheLimit(2 * size);
  void *a = memory::allocate(size), *b = memory::allocate(size),
       *c = memory::allocate(size);
  memory::release(a);
  memory::release(b);
  memory::release(c); // over the limit: back to the system
  EXPECT_EQ(memory::stats().cachedBytes, 2 * size);
  memory::setCacheLimit(size);
  EXPECT_EQ(memory::stats().cachedBytes, size);
  memory::trim();
  EXPECT_EQ(memory::stats().cachedBytes, 0u);
}

TEST_F(AllocatorTest, LargerAlignments) {
  for (size_t alignment : {size_t(64), size_t(128), size_t(4096)}) {
    void *p = memory::allocateAligned(alignment, 1000);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(aligned(p, alignment)) << alignment;
    std::memset(p, 1, 1000);
    memory::release(p);
  }
  EXPECT_EQ(memory::allocateAligned(48, 16), nullptr); // not a power of two
  EXPECT_EQ(memory::allocate(SIZE_MAX - 10), nullptr);
}

TEST_F(AllocatorTest, CompiledCodeEntryPoints) {
  void *p = _mlir_memref_to_llvm_aligned_alloc(64, 2 << 20);
  ASSERT_NE(p, nullptr);
  _mlir_memref_to_llvm_free(p);
  EXPECT_EQ(_mlir_memref_to_llvm_alloc(2 << 20), p);
  _mlir_memref_to_llvm_free(p);
}

} // namespace
