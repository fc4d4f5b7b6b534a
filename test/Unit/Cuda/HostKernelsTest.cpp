//===- HostKernelsTest.cpp - The emulated GPU's threads, warps, barriers --===//
//
// The fake driver's emulated GPU (HostKernels.h) with kernels written here
// in C++ against the functions compiled kernels call (kiln_emu_*): thread and
// block indices, barriers, shfl.sync in each mode with and without
// segments, mma.sync's fragments, cvt.rna.tf32's rounding, cp.async's
// groups (a copy lands at its thread's wait, zeros past its source bytes),
// and the error for
// threads that wait for each other where none can pass. The expected
// values are worked out by hand from the PTX ISA's definitions.
//
//===----------------------------------------------------------------------===//

#include "HostKernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

extern "C" {
uint32_t kiln_emu_sreg(uint32_t which);
void kiln_emu_barrier();
uint64_t kiln_emu_shfl(uint32_t kind, uint32_t mask, uint32_t value,
                       uint32_t offset, uint32_t clamp);
void kiln_emu_mma_m16n8k8_tf32(float *d, uint32_t a0, uint32_t a1, uint32_t a2,
                               uint32_t a3, uint32_t b0, uint32_t b1, float c0,
                               float c1, float c2, float c3);
void kiln_emu_mma_m16n8k16_bf16(float *d, uint32_t a0, uint32_t a1, uint32_t a2,
                                uint32_t a3, uint32_t b0, uint32_t b1, float c0,
                                float c1, float c2, float c3);
uint32_t kiln_emu_cvt_rna_tf32(float x);
void kiln_emu_cp_async(char *dst, const char *src, uint32_t bytes,
                       uint32_t srcBytes);
void kiln_emu_cp_async_commit();
void kiln_emu_cp_async_wait(uint32_t n);
}

namespace {

using kiln::fake::runHostKernel;

constexpr uint32_t kBfly = 0, kUp = 1, kDown = 2, kIdx = 3;

/// The thread's index in its block, x fastest.
unsigned linear() {
  return kiln_emu_sreg(0) +
         kiln_emu_sreg(3) *
             (kiln_emu_sreg(1) + kiln_emu_sreg(4) * kiln_emu_sreg(2));
}

bool run(kiln::fake::HostKernelEntry kernel, std::vector<unsigned> grid,
         std::vector<unsigned> block, void **params, std::string &error) {
  return runHostKernel(kernel, nullptr, grid.data(), block.data(), params,
                       error);
}

TEST(HostKernels, ThreadsSeeTheirIndicesAndTheGrid) {
  // Grid 3 x 2 x 1 of blocks 4 x 2 x 2: each thread writes its 12 special
  // registers and its lane at its global place.
  static std::vector<uint32_t> out(6 * 16 * 13, ~0u);
  auto kernel = [](void **) {
    unsigned block = kiln_emu_sreg(6) + 3 * kiln_emu_sreg(7);
    unsigned at = (block * 16 + linear()) * 13;
    for (uint32_t r = 0; r < 13; ++r) {
      out[at + r] = kiln_emu_sreg(r);
    }
  };
  std::string error;
  ASSERT_TRUE(run(kernel, {3, 2, 1}, {4, 2, 2}, nullptr, error)) << error;
  for (unsigned by = 0; by < 2; ++by) {
    for (unsigned bx = 0; bx < 3; ++bx) {
      for (unsigned t = 0; t < 16; ++t) {
        const uint32_t *r = &out[((bx + 3 * by) * 16 + t) * 13];
        uint32_t expected[13] = {t % 4, t / 4 % 2, t / 8, 4, 2, 2, bx,
                                 by,    0,         3,     2, 1, t};
        for (int i = 0; i < 13; ++i) {
          EXPECT_EQ(r[i], expected[i])
              << "register " << i << " of thread " << t << " in block (" << bx
              << ", " << by << ")";
        }
      }
    }
  }
}

TEST(HostKernels, BarriersOrderTheBlocksWritesAndReads) {
  // Each of 256 threads writes its slot, waits, reads its neighbour's, waits,
  // overwrites its slot, waits, reads again: a missing wait reads the wrong
  // round's value.
  static std::vector<int> shared(256), first(256), second(256);
  auto kernel = [](void **) {
    unsigned t = linear();
    shared[t] = int(t);
    kiln_emu_barrier();
    first[t] = shared[(t + 1) % 256];
    kiln_emu_barrier();
    shared[t] = int(1000 + t);
    kiln_emu_barrier();
    second[t] = shared[(t + 255) % 256];
  };
  std::string error;
  ASSERT_TRUE(run(kernel, {1, 1, 1}, {256, 1, 1}, nullptr, error)) << error;
  for (int t = 0; t < 256; ++t) {
    EXPECT_EQ(first[t], (t + 1) % 256);
    EXPECT_EQ(second[t], 1000 + (t + 255) % 256);
  }
}

struct Shuffle {
  uint32_t kind, offset, clamp;
};
static Shuffle shuffle;
static std::vector<uint64_t> shuffled(64);

std::vector<uint64_t> shuffleAll(Shuffle s) {
  shuffle = s;
  auto kernel = [](void **) {
    unsigned t = linear();
    shuffled[t] = kiln_emu_shfl(shuffle.kind, ~0u, 100 + t, shuffle.offset,
                                shuffle.clamp);
  };
  std::string error;
  EXPECT_TRUE(run(kernel, {1, 1, 1}, {64, 1, 1}, nullptr, error)) << error;
  return shuffled;
}

uint32_t valueOf(uint64_t r) { return uint32_t(r); }
bool validOf(uint64_t r) { return (r >> 32) & 1; }

TEST(HostKernels, ShufflesFollowThePtxDefinition) {
  // Whole warps: the clamp is 0x1f (0 for up).
  std::vector<uint64_t> r = shuffleAll({kBfly, 16, 0x1f});
  EXPECT_EQ(valueOf(r[3]), 100u + 19);
  EXPECT_EQ(valueOf(r[40]), 100u + 56); // lane 8 of warp 1 reads lane 24
  EXPECT_TRUE(validOf(r[3]));
  r = shuffleAll({kDown, 1, 0x1f});
  EXPECT_EQ(valueOf(r[30]), 100u + 31);
  EXPECT_TRUE(validOf(r[30]));
  EXPECT_EQ(valueOf(r[31]), 100u + 31); // past lane 31: its own value
  EXPECT_FALSE(validOf(r[31]));
  EXPECT_EQ(valueOf(r[63]), 100u + 63); // warp 1 does not read warp 0
  r = shuffleAll({kUp, 2, 0});
  EXPECT_EQ(valueOf(r[0]), 100u);
  EXPECT_FALSE(validOf(r[1]));
  EXPECT_EQ(valueOf(r[5]), 100u + 3);
  EXPECT_TRUE(validOf(r[5]));
  EXPECT_EQ(valueOf(r[33]), 100u + 33);
  r = shuffleAll({kIdx, 7, 0x1f});
  EXPECT_EQ(valueOf(r[12]), 100u + 7);
  EXPECT_EQ(valueOf(r[44]), 100u + 39);
  // Segments of 8 lanes: the clamp is (32 - 8) << 8 | 0x1f (0x1800 for up).
  r = shuffleAll({kDown, 4, 0x181f});
  EXPECT_EQ(valueOf(r[2]), 100u + 6);
  EXPECT_TRUE(validOf(r[2]));
  EXPECT_EQ(valueOf(r[5]), 100u + 5); // lane 9 is in the next segment
  EXPECT_FALSE(validOf(r[5]));
  r = shuffleAll({kIdx, 3, 0x181f});
  EXPECT_EQ(valueOf(r[13]), 100u + 11); // segment 8..15, its lane 3
  r = shuffleAll({kUp, 1, 0x1800});
  EXPECT_EQ(valueOf(r[8]), 100u + 8); // the first lane of a segment
  EXPECT_FALSE(validOf(r[8]));
  EXPECT_EQ(valueOf(r[9]), 100u + 8);
  r = shuffleAll({kBfly, 4, 0x181f});
  EXPECT_EQ(valueOf(r[17]), 100u + 21);
}

TEST(HostKernels, AWarpReducesWithPartialMasks) {
  // The all-reduce upstream MLIR emits: the first 8 lanes of a warp reduce
  // with a membermask of 0xff while the other lanes go on to a barrier.
  static std::vector<uint32_t> sums(256);
  auto kernel = [](void **) {
    unsigned t = linear();
    uint32_t v = t + 1;
    if (t < 8) {
      for (uint32_t offset = 1; offset < 8; offset <<= 1) {
        uint64_t r = kiln_emu_shfl(kBfly, 0xff, v, offset, 0x181f);
        if (validOf(r)) {
          v += valueOf(r);
        }
      }
    }
    kiln_emu_barrier();
    sums[t] = v;
  };
  std::string error;
  ASSERT_TRUE(run(kernel, {1, 1, 1}, {256, 1, 1}, nullptr, error)) << error;
  for (unsigned t = 0; t < 8; ++t) {
    EXPECT_EQ(sums[t], 36u) << t; // 1 + 2 + ... + 8
  }
  EXPECT_EQ(sums[8], 9u);
}

TEST(HostKernels, ThreadsThatCanNeverMeetAreAnError) {
  // Lanes 0-15 wait at the barrier, lanes 16-31 at a whole-warp shuffle:
  // on a GPU this hangs or is undefined.
  auto kernel = [](void **) {
    if (linear() < 16) {
      kiln_emu_barrier();
    } else {
      kiln_emu_shfl(kBfly, ~0u, 1, 1, 0x1f);
    }
  };
  std::string error;
  EXPECT_FALSE(run(kernel, {1, 1, 1}, {32, 1, 1}, nullptr, error));
  EXPECT_NE(error.find("barrier"), std::string::npos) << error;
  // Threads that return before a barrier do not hold it up.
  static int passed = 0;
  passed = 0;
  auto early = [](void **) {
    if (linear() % 3 == 0) {
      return;
    }
    kiln_emu_barrier();
    ++passed;
  };
  error.clear();
  EXPECT_TRUE(run(early, {2, 1, 1}, {48, 1, 1}, nullptr, error)) << error;
  EXPECT_EQ(passed, 2 * 32);
}

TEST(HostKernels, OddBlocksStartTheirThreadsInReverse) {
  // Thread 31 reads what thread 0 writes with no barrier between: in block
  // 0 thread 0 runs first, in block 1 thread 31 does, and reads block 0's
  // value; a kernel with such a race gives wrong results here. `poison`
  // runs before each block.
  static int flag = 0, poisoned = 0;
  static int seen[2];
  flag = poisoned = 0;
  auto kernel = [](void **) {
    if (linear() == 0) {
      flag = int(kiln_emu_sreg(6)) + 1;
    }
    if (linear() == 31) {
      seen[kiln_emu_sreg(6)] = flag;
    }
  };
  auto poison = [] { ++poisoned; };
  unsigned grid[3] = {2, 1, 1}, block[3] = {32, 1, 1};
  std::string error;
  ASSERT_TRUE(runHostKernel(kernel, poison, grid, block, nullptr, error))
      << error;
  EXPECT_EQ(seen[0], 1);
  EXPECT_EQ(seen[1], 1);
  EXPECT_EQ(poisoned, 2);
}

uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float floatOf(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

/// Checks the 32 lanes' D fragments (lane 4g + t: (g, 2t), (g, 2t + 1),
/// (g + 8, 2t), (g + 8, 2t + 1)) of D = A B + C with A[i][k] = i - 2k,
/// B[k][j] = k + 3j - 5, C[i][j] = i j, summed here in double.
void expectIntegerProduct(const std::vector<float> &d, int depth = 8) {
  for (int l = 0; l < 32; ++l) {
    int g = l / 4, t = l % 4;
    int rows[4] = {g, g, g + 8, g + 8};
    int cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
    for (int r = 0; r < 4; ++r) {
      int i = rows[r], j = cols[r];
      double expected = i * j;
      for (int k = 0; k < depth; ++k) {
        expected += double(i - 2 * k) * double(k + 3 * j - 5);
      }
      EXPECT_EQ(d[l * 4 + r], float(expected)) << "D(" << i << ", " << j << ")";
    }
  }
}

TEST(HostKernels, MmaComputesA16x8x8ProductFromTheWarpsFragments) {
  // A[i][k] = i - 2k, B[k][j] = k + 3j - 5, C[i][j] = i * j: small
  // integers, exact in TF32 and fp32. Lane 4g + t holds, per the PTX ISA's
  // m16n8k8 .tf32 fragments: A (g, t), (g + 8, t), (g, t + 4), (g + 8,
  // t + 4); B (t, g), (t + 4, g); C and D (g, 2t), (g, 2t + 1), (g + 8,
  // 2t), (g + 8, 2t + 1).
  static std::vector<float> d(32 * 4);
  auto kernel = [](void **) {
    int l = int(linear()), g = l / 4, t = l % 4;
    auto a = [](int i, int k) { return bitsOf(float(i - 2 * k)); };
    auto b = [](int k, int j) { return bitsOf(float(k + 3 * j - 5)); };
    auto c = [](int i, int j) { return float(i * j); };
    kiln_emu_mma_m16n8k8_tf32(&d[l * 4], a(g, t), a(g + 8, t), a(g, t + 4),
                              a(g + 8, t + 4), b(t, g), b(t + 4, g),
                              c(g, 2 * t), c(g, 2 * t + 1), c(g + 8, 2 * t),
                              c(g + 8, 2 * t + 1));
  };
  std::string error;
  ASSERT_TRUE(run(kernel, {1, 1, 1}, {32, 1, 1}, nullptr, error)) << error;
  expectIntegerProduct(d);
}

TEST(HostKernels, Bf16MmaComputesA16x8x16ProductFromTheWarpsPairs) {
  // The same integers (exact in bf16: below 2^8) in the PTX ISA's m16n8k16
  // .bf16 fragments: lane 4g + t holds A's (g, 2t) and (g, 2t + 1) in its
  // first register, (g + 8, 2t), (g + 8, 2t + 1) in its second, and the
  // same at steps 2t + 8, 2t + 9 in its third and fourth; B's (2t, g) and
  // (2t + 1, g) in one, (2t + 8, g), (2t + 9, g) in the other, each pair's
  // lower k in the low half; C and D as TF32's.
  static std::vector<float> d(32 * 4);
  auto kernel = [](void **) {
    int l = int(linear()), g = l / 4, t = l % 4;
    auto pair = [](float low, float high) {
      return (bitsOf(high) & 0xffff0000u) | (bitsOf(low) >> 16);
    };
    auto a = [&](int i, int k) { return pair(i - 2 * k, i - 2 * (k + 1)); };
    auto b = [&](int k, int j) {
      return pair(k + 3 * j - 5, k + 1 + 3 * j - 5);
    };
    auto c = [](int i, int j) { return float(i * j); };
    kiln_emu_mma_m16n8k16_bf16(
        &d[l * 4], a(g, 2 * t), a(g + 8, 2 * t), a(g, 2 * t + 8),
        a(g + 8, 2 * t + 8), b(2 * t, g), b(2 * t + 8, g), c(g, 2 * t),
        c(g, 2 * t + 1), c(g + 8, 2 * t), c(g + 8, 2 * t + 1));
  };
  std::string error;
  ASSERT_TRUE(run(kernel, {1, 1, 1}, {32, 1, 1}, nullptr, error)) << error;
  expectIntegerProduct(d, 16);
}

TEST(HostKernels, MmaIgnoresTheLow13BitsOfItsOperands) {
  // 1 + 2^-12 is not a TF32 value: the tensor cores read it as 1.
  static float d[4];
  auto kernel = [](void **) {
    unsigned l = linear();
    uint32_t one = bitsOf(1.0f), above = bitsOf(1.0f + 0x1p-12f);
    // A's row 0 and B's column 0 hold 1 + 2^-12 at k = 0, zeros elsewhere.
    uint32_t a0 = l == 0 ? above : 0, b0 = l == 0 ? one : 0;
    float out[4];
    kiln_emu_mma_m16n8k8_tf32(out, a0, 0, 0, 0, b0, 0, 0, 0, 0, 0);
    if (l == 0) {
      std::memcpy(d, out, sizeof(out));
    }
  };
  std::string error;
  ASSERT_TRUE(run(kernel, {1, 1, 1}, {32, 1, 1}, nullptr, error)) << error;
  EXPECT_EQ(d[0], 1.0f);
}

TEST(HostKernels, CvtRnaRoundsToTf32TiesAwayFromZero) {
  EXPECT_EQ(kiln_emu_cvt_rna_tf32(1.0f + 0x1p-12f), bitsOf(1.0f));
  EXPECT_EQ(kiln_emu_cvt_rna_tf32(1.0f + 0x1p-11f), bitsOf(1.0f + 0x1p-10f));
  EXPECT_EQ(kiln_emu_cvt_rna_tf32(-(1.0f + 0x1p-11f)),
            bitsOf(-(1.0f + 0x1p-10f)));
  EXPECT_EQ(kiln_emu_cvt_rna_tf32(1.0f + 3 * 0x1p-12f),
            bitsOf(1.0f + 0x1p-10f));
  EXPECT_EQ(kiln_emu_cvt_rna_tf32(3.0f), bitsOf(3.0f));
  EXPECT_EQ(kiln_emu_cvt_rna_tf32(0x1.fffffep127f), bitsOf(INFINITY));
  EXPECT_EQ(kiln_emu_cvt_rna_tf32(-INFINITY), bitsOf(-INFINITY));
  EXPECT_EQ(kiln_emu_cvt_rna_tf32(NAN), 0x7fffffffu);
  EXPECT_EQ(floatOf(kiln_emu_cvt_rna_tf32(0x1p-130f)), 0x1p-130f);
}

// cp.async: in a block of even index a copy lands when its thread waits
// for its group, not before (a read of the destination in between sees the
// old bytes) and not at a barrier; wait_group n leaves the newest n
// committed groups pending (and copies not yet committed); bytes past the
// source's are zeros. In a block of odd index every copy lands as it is
// issued (the uncommitted one too, last).
TEST(HostKernels, AsyncCopiesLandWhenTheirThreadWaitsForTheirGroup) {
  static float src[4] = {1.5f, 2.5f, 3.5f, 4.5f};
  static float dst[2][2][4];
  static std::vector<float> seen[2][2];
  auto kernel = [](void **) {
    unsigned t = linear(), block = kiln_emu_sreg(6);
    float *row = dst[block][t];
    auto *to = reinterpret_cast<char *>(row);
    auto *from = reinterpret_cast<const char *>(&src[0]);
    auto record = [&] {
      seen[block][t].insert(seen[block][t].end(), row, row + 4);
    };
    kiln_emu_cp_async(to, from, 4, 4);         // group 0
    kiln_emu_cp_async(to + 4, from + 4, 8, 4); // group 0, zero-filled
    kiln_emu_cp_async_commit();
    kiln_emu_cp_async(to + 12, from + 12, 4, 4); // group 1
    kiln_emu_cp_async_commit();
    kiln_emu_cp_async(to + 12, from + 8, 4, 4); // never committed
    kiln_emu_barrier();
    record(); // nothing has landed
    kiln_emu_cp_async_wait(1);
    record(); // group 0
    kiln_emu_cp_async_wait(0);
    record(); // and group 1, not the uncommitted copy
  };
  for (auto &block : dst) {
    for (auto &row : block) {
      std::fill(row, row + 4, -1.0f);
    }
  }
  std::string error;
  ASSERT_TRUE(run(kernel, {2, 1, 1}, {2, 1, 1}, nullptr, error)) << error;
  std::vector<float> atWait = {-1, -1, -1,   -1,   1.5f, 2.5f,
                               0,  -1, 1.5f, 2.5f, 0,    4.5f};
  std::vector<float> atIssue = {1.5f, 2.5f, 0,    3.5f, 1.5f, 2.5f,
                                0,    3.5f, 1.5f, 2.5f, 0,    3.5f};
  for (unsigned t = 0; t < 2; ++t) {
    EXPECT_EQ(seen[0][t], atWait) << "thread " << t;
    EXPECT_EQ(seen[1][t], atIssue) << "thread " << t;
  }
}

} // namespace
