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

#include <cstddef>
#include <cstdint>

namespace kiln {

/// Element types. f32 computes; i32/i64 hold token ids and targets; i1 (one
/// byte per element) holds masks.
enum class DType { f32, i32, i64, i1 };

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
  }
  return 0;
}

/// "f32", "i32", "i64", "i1".
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

} // namespace kiln

#endif // KILN_BASE_DTYPE_H
