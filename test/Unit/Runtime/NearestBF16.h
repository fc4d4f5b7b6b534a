//===- NearestBF16.h - The BF16 value nearest to an F32 ---------*- C++ -*-===//

#ifndef KILN_TEST_UNIT_RUNTIME_NEARESTBF16_H
#define KILN_TEST_UNIT_RUNTIME_NEARESTBF16_H

#include <bit>
#include <cmath>
#include <cstdint>

namespace kiln::test {

/// The BF16 value nearest to the finite `value` (ties to the one whose last
/// bit is 0), as an F32: the two BF16 values around it (its upper 16 bits,
/// and the next value away from zero) compared in double, not the rounding
/// carry the writer uses.
inline float nearestBF16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value) & 0xFFFF0000u;
  float towardZero = std::bit_cast<float>(bits);
  float awayFromZero = std::bit_cast<float>(bits + 0x10000u);
  double below = std::abs(double(value) - double(towardZero));
  double above = std::abs(double(awayFromZero) - double(value));
  if (below != above) {
    return below < above ? towardZero : awayFromZero;
  }
  return (bits >> 16) % 2 == 0 ? towardZero : awayFromZero;
}

} // namespace kiln::test

#endif // KILN_TEST_UNIT_RUNTIME_NEARESTBF16_H
