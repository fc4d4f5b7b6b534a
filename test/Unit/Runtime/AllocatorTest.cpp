//===- AllocatorTest.cpp - The heap of compiled code ----------------------===//

#include "runtime/Allocator.h"
#include "runtime/Sanitizer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace kiln;

namespace {

bool aligned(void *p, uintptr_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

/// Under AddressSanitizer the allocator neither caches nor plans: every
/// block comes from the sanitizer's allocator (Allocator.h).
#define SKIP_UNDER_ADDRESS_SANITIZER()                                         \
  if (kAddressSanitizer) {                                                     \
    GTEST_SKIP() << "no cache and no plans under AddressSanitizer";           \
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
  SKIP_UNDER_ADDRESS_SANITIZER();
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
  SKIP_UNDER_ADDRESS_SANITIZER();
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

TEST_F(AllocatorTest, AThreadReusesTheSmallBlocksItReleased) {
  SKIP_UNDER_ADDRESS_SANITIZER();
  // Up to 64 KiB, a released block serves the same thread's next request
  // of that size or up to a quarter smaller, not a larger one.
  void *p = memory::allocate(16 * 1024);
  memory::release(p);
  void *same = memory::allocate(16 * 1024);
  EXPECT_EQ(same, p);
  memory::release(same);
  void *smaller = memory::allocate(13 * 1024);
  EXPECT_EQ(smaller, p);
  memory::release(smaller);
  void *larger = memory::allocate(16 * 1024 + 1);
  EXPECT_NE(larger, p);
  void *again = memory::allocate(16 * 1024);
  EXPECT_EQ(again, p);
  memory::release(larger);
  memory::release(again);
  // Larger blocks are not kept per thread.
  void *big = memory::allocate(128 * 1024);
  memory::release(big);
  EXPECT_EQ(memory::stats().cachedBytes, 0u);
  // Many blocks at once: the thread keeps some, frees the others; every
  // block stays usable.
  std::vector<char *> blocks;
  for (int i = 0; i < 64; ++i) {
    blocks.push_back(static_cast<char *>(memory::allocate(4096 + 64 * i)));
    std::memset(blocks.back(), i, 4096 + 64 * i);
  }
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(blocks[i][4095], char(i));
    memory::release(blocks[i]);
  }
}

TEST_F(AllocatorTest, SmallBlocksMoveBetweenThreads) {
  SKIP_UNDER_ADDRESS_SANITIZER();
  // Blocks allocated by one thread and released by another (the threads of
  // a parallel loop) are kept by the releasing thread, and freed when it
  // ends.
  for (int round = 0; round < 4; ++round) {
    std::vector<char *> made(32);
    for (int i = 0; i < 32; ++i) {
      made[i] = static_cast<char *>(memory::allocate(8192));
      std::memset(made[i], round, 8192);
    }
    std::thread releaser([&] {
      for (char *p : made) {
        memory::release(p);
      }
      for (int i = 0; i < 100; ++i) {
        auto *p = static_cast<char *>(memory::allocate(8192));
        std::memset(p, 1, 8192);
        memory::release(p);
      }
    });
    releaser.join();
  }
}

TEST_F(AllocatorTest, TheCacheRespectsItsLimit) {
  SKIP_UNDER_ADDRESS_SANITIZER();
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

//===----------------------------------------------------------------------===//
// Planned calls
//===----------------------------------------------------------------------===//

namespace {

/// One "call" of a compiled function: three large temporaries, the first
/// and second live at once, the third after the first is freed (so it can
/// share the first one's bytes), and one result that outlives the call.
struct Call {
  char *a = nullptr, *b = nullptr, *c = nullptr, *result = nullptr;
};

Call runCall(memory::CallPlans &plans, const std::string &shapes, size_t size) {
  Call call;
  memory::PlannedCall planned(plans, shapes);
  call.a = static_cast<char *>(memory::allocate(size));
  call.b = static_cast<char *>(memory::allocate(2 * size));
  std::memset(call.a, 1, size);
  std::memset(call.b, 2, 2 * size);
  memory::release(call.a);
  call.c = static_cast<char *>(memory::allocate(size));
  std::memset(call.c, 3, size);
  call.result = static_cast<char *>(memory::allocate(size));
  std::memset(call.result, 4, size);
  EXPECT_EQ(call.b[2 * size - 1], 2); // c did not overlap b
  memory::release(call.b);
  memory::release(call.c);
  planned.finish();
  EXPECT_FALSE(planned.inArena(call.result));
  return call;
}

} // namespace

TEST_F(AllocatorTest, PlannedCallsReplayTheirBlocksFromOneArena) {
  SKIP_UNDER_ADDRESS_SANITIZER();
  size_t size = 1 << 20;
  // Arenas of other plans alive in this process (earlier tests' compiled
  // functions) count too.
  size_t others = memory::stats().arenaBytes;
  auto plans = memory::makeCallPlans();
  Call first = runCall(*plans, "8,64;", size); // records
  EXPECT_EQ(memory::stats().arenaBytes - others,
            3 * size); // b and a|c: 3 MiB
  Call second = runCall(*plans, "8,64;", size);    // replays
  Call third = runCall(*plans, "8,64;", size);
  // The same arena blocks every replay; a and c share bytes (never live at
  // once), b does not overlap them.
  EXPECT_EQ(second.a, third.a);
  EXPECT_EQ(second.b, third.b);
  EXPECT_EQ(second.c, second.a);
  EXPECT_TRUE(second.b + 2 * size <= second.a || second.a + size <= second.b);
  // The result outlives the call: never an arena block.
  EXPECT_NE(second.result, third.result);
  for (Call *call : {&first, &second, &third}) {
    EXPECT_EQ(call->result[size - 1], 4);
    memory::release(call->result);
  }
  plans.reset();
  EXPECT_EQ(memory::stats().arenaBytes, others);
}

TEST_F(AllocatorTest, APlanCallWithOtherSizesFallsBackAndRecordsAgain) {
  SKIP_UNDER_ADDRESS_SANITIZER();
  size_t size = 1 << 20;
  auto plans = memory::makeCallPlans();
  Call recorded = runCall(*plans, "8,64;", size);
  Call replayed = runCall(*plans, "8,64;", size);
  // Same shapes key, other sizes (a plan that no longer matches): the call
  // diverges at its first allocation and runs on the general allocator.
  Call diverged = runCall(*plans, "8,64;", 2 * size);
  EXPECT_NE(diverged.a, replayed.a);
  // It recorded nothing; the next call records the new sizes afresh, and
  // the one after replays them.
  Call again = runCall(*plans, "8,64;", 2 * size);
  Call replayedAgain = runCall(*plans, "8,64;", 2 * size);
  Call replayedTwice = runCall(*plans, "8,64;", 2 * size);
  EXPECT_EQ(replayedAgain.b, replayedTwice.b);
  for (Call *call : {&recorded, &replayed, &diverged, &again, &replayedAgain,
                     &replayedTwice}) {
    memory::release(call->result);
  }
}

// A decoding step's blocks grow with the positions so far, its input
// shapes unchanged: smaller blocks replay in their planned room; a larger
// one records again, and from then on the plan leaves an eighth more room,
// so that the next calls' slightly larger blocks replay.
TEST_F(AllocatorTest, BlocksThatGrowReplayInRoomLeftForThem) {
  SKIP_UNDER_ADDRESS_SANITIZER();
  size_t size = 1 << 20, page = 4096;
  auto plans = memory::makeCallPlans();
  std::vector<Call> calls;
  calls.push_back(runCall(*plans, "4,1;", size));        // records
  calls.push_back(runCall(*plans, "4,1;", size - page)); // fits: replays
  EXPECT_EQ(calls[1].a, calls[1].c);
  calls.push_back(runCall(*plans, "4,1;", size));
  EXPECT_EQ(calls[2].b, calls[1].b);
  calls.push_back(runCall(*plans, "4,1;", size + page)); // outgrows: diverges
  EXPECT_NE(calls[3].b, calls[2].b);
  calls.push_back(runCall(*plans, "4,1;", size + page)); // records, with room
  calls.push_back(runCall(*plans, "4,1;", size + 2 * page));
  calls.push_back(runCall(*plans, "4,1;", size + 16 * page));
  calls.push_back(runCall(*plans, "4,1;", size + 32 * page));
  for (size_t i = 6; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].b, calls[5].b) << i; // replayed in the same room
    EXPECT_EQ(calls[i].a, calls[i].c) << i;
  }
  for (Call &call : calls) {
    memory::release(call.result);
  }
}

// A replayed block never takes room that a live block still holds, even
// when the call frees its blocks in another order than the recorded one.
TEST_F(AllocatorTest, AReplayNeverOverlapsALiveBlock) {
  SKIP_UNDER_ADDRESS_SANITIZER();
  size_t size = 1 << 20;
  auto plans = memory::makeCallPlans();
  Call recorded = runCall(*plans, "2;", size); // c shares a's room
  memory::PlannedCall planned(*plans, "2;");
  char *a = static_cast<char *>(memory::allocate(size));
  char *b = static_cast<char *>(memory::allocate(2 * size));
  // a is still live where the plan has it freed: c gets other memory.
  char *c = static_cast<char *>(memory::allocate(size));
  EXPECT_TRUE(c + size <= a || a + size <= c);
  EXPECT_TRUE(c + size <= b || b + 2 * size <= c);
  std::memset(c, 5, size);
  std::memset(a, 6, size);
  EXPECT_EQ(c[0], 5);
  memory::release(a);
  memory::release(b);
  memory::release(c);
  planned.finish();
  memory::release(recorded.result);
}

TEST_F(AllocatorTest, PlansAreKeptPerInputShapes) {
  SKIP_UNDER_ADDRESS_SANITIZER();
  size_t size = 1 << 20;
  auto plans = memory::makeCallPlans();
  std::vector<Call> calls;
  calls.push_back(runCall(*plans, "8,64;", size));
  calls.push_back(runCall(*plans, "1,64;", size / 2));
  calls.push_back(runCall(*plans, "8,64;", size));
  calls.push_back(runCall(*plans, "1,64;", size / 2));
  calls.push_back(runCall(*plans, "8,64;", size));
  calls.push_back(runCall(*plans, "1,64;", size / 2));
  // Alternating shapes replay their own arenas.
  EXPECT_EQ(calls[2].b, calls[4].b);
  EXPECT_EQ(calls[3].b, calls[5].b);
  EXPECT_NE(calls[2].b, calls[3].b);
  for (Call &call : calls) {
    memory::release(call.result);
  }
}

TEST_F(AllocatorTest, NestedPlannedCallsAreUnplanned) {
  SKIP_UNDER_ADDRESS_SANITIZER();
  size_t size = 1 << 20;
  size_t others = memory::stats().arenaBytes;
  auto outer = memory::makeCallPlans(), inner = memory::makeCallPlans();
  memory::PlannedCall call(*outer, "x");
  Call nested = runCall(*inner, "x", size);
  Call nestedAgain = runCall(*inner, "x", size);
  EXPECT_EQ(memory::stats().arenaBytes, others); // the inner one never planned
  memory::release(nested.result);
  memory::release(nestedAgain.result);
}
