//===- Tensor.h - Host tensors -----------------------------------*- C++
//-*-===//
//
// A dense, contiguous, row-major host tensor with 64-byte aligned storage.
// Copies share storage (like torch::Tensor); clone() makes a deep copy. The
// JIT passes the storage to compiled code without copying.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TENSOR_H
#define KILN_RUNTIME_TENSOR_H

#include "base/DType.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

/// Formats a shape as "[2, 3]", a negative (dynamic) size as '?': "[?, 3]".
/// The one shape formatter of messages and headers (the DSL's kDynamic and
/// a function spec's -1 are both negative).
std::string formatShape(const std::vector<int64_t> &shape);

class Tensor {
public:
  /// An empty (null) tensor: defined() is false.
  Tensor() = default;

  /// Uninitialized storage of the given shape (all sizes >= 0).
  static Tensor empty(std::vector<int64_t> shape, DType dtype);
  /// Zero-filled.
  static Tensor zeros(std::vector<int64_t> shape, DType dtype);
  /// Filled with one value.
  static Tensor full(std::vector<int64_t> shape, float value);
  /// Copies `values` (whose size must be the element count).
  template <typename T>
  static Tensor fromVector(std::vector<int64_t> shape,
                           const std::vector<T> &values);
  /// Takes ownership of memory allocated elsewhere (by compiled code):
  /// `release` is called once when the last Tensor sharing it goes away.
  static Tensor adopt(void *data, std::vector<int64_t> shape, DType dtype,
                      std::function<void()> release);
  /// Takes ownership of GPU memory (a non-null device address), as adopt()
  /// does: a tensor whose elements the host cannot touch (onGpu()).
  /// runtime/Cuda.h makes and copies these.
  static Tensor adoptGpu(void *data, std::vector<int64_t> shape, DType dtype,
                         std::function<void()> release);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  /// Size of dimension `dim` (negative counts from the end).
  int64_t dim(int64_t dim) const;
  int64_t numel() const;
  size_t nbytes() const { return numel() * sizeOf(dtype_); }
  /// Row-major strides in elements.
  std::vector<int64_t> strides() const;

  /// The address of the elements: a device address for a GPU tensor.
  void *raw() const { return data_; }
  /// Whether the elements are in GPU memory (adoptGpu()).
  bool onGpu() const { return gpu_; }
  /// Typed access; throws kiln::Error when T does not match dtype() or the
  /// tensor is on the GPU.
  template <typename T>
  T *data() const;

  /// A deep copy (of a host tensor; throws kiln::Error for a GPU one).
  Tensor clone() const;
  /// The same storage seen with another shape of equal element count.
  Tensor reshape(std::vector<int64_t> shape) const;
  /// The elements converted to `dtype`: f32 to bf16 rounds to the nearest
  /// (ties to even), bf16 to f32 is exact; a copy when the dtype is the
  /// same. Throws kiln::Error for other dtypes and GPU tensors.
  Tensor to(DType dtype) const;
  /// Copies the elements into a std::vector (T must match dtype()).
  template <typename T>
  std::vector<T> toVector() const;

private:
  std::shared_ptr<void> storage_;
  void *data_ = nullptr;
  std::vector<int64_t> shape_;
  DType dtype_ = DType::f32;
  bool gpu_ = false;
};

} // namespace kiln

#endif // KILN_RUNTIME_TENSOR_H
