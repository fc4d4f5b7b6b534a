//===- DType.h - Kiln's tensor element types --------------------*- C++ -*-===//
//
// The element types of Kiln's tensors, shared by every layer: the runtime's
// Tensor holds them, the kiln dialect maps them to MLIR types
// (dialects/Kiln/IR/DTypes.h), the DSL declares inputs with them.
// Header-only, with no dependency but the standard library.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_BASE_DTYPE_H
#define KILN_BASE_DTYPE_H

#include <bit>
#include <cstddef>
#include <cstdint>

namespace kiln {

/// Element types. f32 computes; bf16 stores floats in half the bytes (every
/// kiln op computes it in f32: docs/precision.md); i32/i64 hold token ids and
/// targets; i1 (one byte per element) holds masks.
enum class DType { f32, i32, i64, i1, bf16 };

/// A bfloat16 value, the element of DType::bf16: the upper 16 bits of an
/// f32 (1 sign, 8 exponent, 7 fraction bits). Every bf16 value is an f32
/// value; an f32 becomes one by rounding.
struct BFloat16 {
  uint16_t bits = 0;

  /// `value` rounded to the nearest bf16, ties to even (a value beyond
  /// bf16's largest becomes infinity); a NaN stays a quiet NaN of its sign.
  static constexpr BFloat16 round(float value) {
    uint32_t f = std::bit_cast<uint32_t>(value);
    if ((f & 0x7fffffffu) > 0x7f800000u) {
      return {uint16_t((f >> 16) | 0x0040)};
    }
    uint32_t lsb = (f >> 16) & 1;
    return {uint16_t((f + 0x7fffu + lsb) >> 16)};
  }
  /// The f32 this value is, exactly.
  constexpr float toFloat() const {
    return std::bit_cast<float>(uint32_t(bits) << 16);
  }
  friend constexpr bool operator==(BFloat16, BFloat16) = default;
};

/// Bytes per element.
constexpr size_t sizeOf(DType dtype) {
  switch (dtype) {
  case DType::f32:
    return 4;
  case DType::i32:
    return 4;
  case DType::i64:
    return 8;
  case DType::i1:
    return 1;
  case DType::bf16:
    return 2;
  }
  return 0;
}

/// "f32", "i32", "i64", "i1", "bf16".
constexpr const char *name(DType dtype) {
  switch (dtype) {
  case DType::f32:
    return "f32";
  case DType::i32:
    return "i32";
  case DType::i64:
    return "i64";
  case DType::i1:
    return "i1";
  case DType::bf16:
    return "bf16";
  }
  return "?";
}

/// Maps a C++ element type to its DType.
template <typename T>
constexpr DType dtypeOf();
template <>
constexpr DType dtypeOf<float>() {
  return DType::f32;
}
template <>
constexpr DType dtypeOf<int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtypeOf<int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtypeOf<bool>() {
  return DType::i1;
}
template <>
constexpr DType dtypeOf<BFloat16>() {
  return DType::bf16;
}

} // namespace kiln

#endif // KILN_BASE_DTYPE_H
