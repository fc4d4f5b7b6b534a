//===- SplitMix64.h - The one definition of splitmix64 ----------*- C++ -*-===//
//
// splitmix64 (Steele, Lea, Flood 2014): the runtime's Rng, and the hash that
// decides which elements dropout keeps. The kiln-to-linalg lowering builds
// the same function out of arith ops from these constants, and the tests'
// reference calls `splitmix64` and `dropoutBits`, so compiled dropout, its
// reference and the runtime cannot drift apart.
//
// Header-only and constexpr: the runtime, the compiler and the tests include
// it without linking anything.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_BASE_SPLITMIX64_H
#define KILN_BASE_SPLITMIX64_H

#include <cmath>
#include <cstdint>

namespace kiln::splitmix64 {

/// The increment of the splitmix64 counter (2^64 / golden ratio), added
/// before mixing; also the stride between dropout streams.
inline constexpr uint64_t kIncrement = 0x9e3779b97f4a7c15ull;
/// The multipliers of the finalizer's two xor-shift-multiply rounds.
inline constexpr uint64_t kMultiplier1 = 0xbf58476d1ce4e5b9ull;
inline constexpr uint64_t kMultiplier2 = 0x94d049bb133111ebull;
/// The finalizer's right shifts, in order.
inline constexpr unsigned kShift1 = 30, kShift2 = 27, kShift3 = 31;

/// splitmix64's finalizer: a bijection of 64-bit values.
constexpr uint64_t finalize(uint64_t z) {
  z = (z ^ (z >> kShift1)) * kMultiplier1;
  z = (z ^ (z >> kShift2)) * kMultiplier2;
  return z ^ (z >> kShift3);
}

/// One splitmix64 step from counter `z`: finalize(z + kIncrement).
constexpr uint64_t mix(uint64_t z) { return finalize(z + kIncrement); }

/// The 64 random bits dropout draws for element `index` of stream `stream`:
/// mix(mix(seed + stream·kIncrement) ^ index). An element is kept iff the top
/// kDropoutBits bits are >= dropoutThreshold(p); kept ones scale by 1/(1-p).
constexpr uint64_t dropoutBits(uint64_t seed, int64_t stream, uint64_t index) {
  uint64_t key = mix(seed + uint64_t(stream) * kIncrement);
  return mix(key ^ index);
}

/// How many of dropout's random bits decide (the top ones).
inline constexpr unsigned kDropoutBits = 24;

/// The value the top kDropoutBits bits of `dropoutBits` must reach for an
/// element to be kept when dropout drops with probability `p`.
inline uint64_t dropoutThreshold(double p) {
  return uint64_t(std::llround(p * double(uint64_t(1) << kDropoutBits)));
}

// The published first outputs of splitmix64 seeded with 0 (as
// state += kIncrement; return finalize(state)).
static_assert(mix(0) == 0xe220a8397b1dcdafull);
static_assert(mix(kIncrement) == 0x6e789e6aa1b965f4ull);

} // namespace kiln::splitmix64

#endif // KILN_BASE_SPLITMIX64_H
