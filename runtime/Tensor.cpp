//===- Tensor.cpp - Host tensors -----------------------------------------===//
//
// Storage is 64-byte aligned (cache line, widest AVX-512 vector) and shared
// between copies through a std::shared_ptr whose deleter frees it, or calls
// the release callback of adopted memory.
//
//===----------------------------------------------------------------------===//

#include "runtime/Tensor.h"
#include "runtime/Sanitizer.h"

#include "runtime/Allocator.h"

#include "runtime/Error.h"

#include <fmt/format.h>

#include <algorithm>

#include <cstdlib>
#include <cstring>
#include <limits>

using namespace kiln;

static_assert(sizeof(bool) == 1, "i1 tensors store one byte per element");
static_assert(sizeof(float) == 4, "f32 tensors store IEEE binary32");

/// The alignment of every tensor's storage, in bytes.
static constexpr size_t kAlignment = 64;

std::string kiln::formatShape(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    text += (i ? ", " : "") +
            (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
  }
  return text + "]";
}

/// Checks that every size is non-negative and that the element count and the
/// byte size fit in memory; returns the element count.
static int64_t checkedNumel(const std::vector<int64_t> &shape, DType dtype,
                            const char *what) {
  int64_t numel = 1;
  for (int64_t size : shape) {
    if (size < 0) {
      throw Error(fmt::format("{}: shape [{}] has a negative size", what,
                              fmt::join(shape, ", ")));
    }
  }
  // A 0 anywhere makes an empty tensor, whatever the other sizes
  // ([2^40, 2^40, 0] holds nothing).
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) {
    return 0;
  }
  for (int64_t size : shape) {
    if (__builtin_mul_overflow(numel, size, &numel)) {
      throw Error(fmt::format("{}: the element count of shape {} overflows",
                              what, formatShape(shape)));
    }
  }
  int64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<int64_t>(sizeOf(dtype)),
                             &nbytes) ||
      nbytes > std::numeric_limits<int64_t>::max() -
                   static_cast<int64_t>(kAlignment)) {
    throw Error(fmt::format("{}: shape {} of {} is too large to address", what,
                            formatShape(shape), name(dtype)));
  }
  return numel;
}

/// Allocates `nbytes` bytes (at least one cache line, so that zero-size
/// tensors have a real, unique address) with 64-byte alignment, from the
/// heap compiled code uses (runtime/Allocator.h): a large tensor is pages of
/// its own, given back to the system (or to the next buffer of its size)
/// when released, where glibc's heap could keep it resident for good (the
/// initial parameters and optimizer state of a training run: 550 MiB of the
/// encoder-decoder's resident set). Under AddressSanitizer the block is
/// exactly `nbytes`, so that the sanitizer sees where the tensor ends.
static void *allocateAligned(size_t nbytes, const std::vector<int64_t> &shape,
                             DType dtype) {
  size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) {
    rounded = kAlignment;
  }
  if constexpr (kAddressSanitizer) {
    rounded = nbytes;
  }
  void *data = memory::allocate(rounded);
  if (!data) {
    throw Error(fmt::format("out of memory allocating {} bytes for a tensor "
                            "of shape {} of {}",
                            rounded, formatShape(shape), name(dtype)));
  }
  return data;
}

Tensor Tensor::empty(std::vector<int64_t> shape, DType dtype) {
  int64_t numel = checkedNumel(shape, dtype, "Tensor::empty");
  size_t nbytes = static_cast<size_t>(numel) * sizeOf(dtype);
  Tensor tensor;
  void *data = allocateAligned(nbytes, shape, dtype);
  tensor.storage_ = std::shared_ptr<void>(data, memory::release);
  tensor.data_ = data;
  tensor.shape_ = std::move(shape);
  tensor.dtype_ = dtype;
  return tensor;
}

Tensor Tensor::zeros(std::vector<int64_t> shape, DType dtype) {
  Tensor tensor = empty(std::move(shape), dtype);
  std::memset(tensor.data_, 0, tensor.nbytes());
  return tensor;
}

Tensor Tensor::full(std::vector<int64_t> shape, float value) {
  Tensor tensor = empty(std::move(shape), DType::f32);
  float *data = tensor.data<float>();
  for (int64_t i = 0, e = tensor.numel(); i < e; ++i) {
    data[i] = value;
  }
  return tensor;
}

template <typename T>
Tensor Tensor::fromVector(std::vector<int64_t> shape,
                          const std::vector<T> &values) {
  constexpr DType dtype = dtypeOf<T>();
  int64_t numel = checkedNumel(shape, dtype, "Tensor::fromVector");
  if (static_cast<uint64_t>(numel) != values.size()) {
    throw Error(fmt::format("Tensor::fromVector: shape {} has {} elements but "
                            "{} values were given",
                            formatShape(shape), numel, values.size()));
  }
  Tensor tensor = empty(std::move(shape), dtype);
  T *data = tensor.data<T>();
  // Element by element: std::vector<bool> is not contiguous.
  for (int64_t i = 0; i < numel; ++i) {
    data[i] = values[i];
  }
  return tensor;
}

Tensor Tensor::adopt(void *data, std::vector<int64_t> shape, DType dtype,
                     std::function<void()> release) {
  // Like the std::shared_ptr constructor with a deleter, release the memory
  // when adoption fails, so that ownership is always taken.
  int64_t numel = 0;
  try {
    numel = checkedNumel(shape, dtype, "Tensor::adopt");
    if (!data && numel != 0) {
      throw Error(fmt::format("Tensor::adopt: null data for shape {} of {}",
                              formatShape(shape), name(dtype)));
    }
  } catch (...) {
    if (release) {
      release();
    }
    throw;
  }

  Tensor tensor;
  if (!data) {
    // Compiled code may return null for a zero-size buffer: give the tensor a
    // real address (so that it is defined()) and still release exactly once.
    void *placeholder = nullptr;
    try {
      placeholder = allocateAligned(0, shape, dtype);
    } catch (...) {
      if (release) {
        release();
      }
      throw;
    }
    tensor.storage_ = std::shared_ptr<void>(
        placeholder, [release = std::move(release)](void *pointer) {
          memory::release(pointer);
          if (release) {
            release();
          }
        });
    tensor.data_ = placeholder;
  } else {
    tensor.storage_ =
        std::shared_ptr<void>(data, [release = std::move(release)](void *) {
          if (release) {
            release();
          }
        });
    tensor.data_ = data;
  }
  tensor.shape_ = std::move(shape);
  tensor.dtype_ = dtype;
  return tensor;
}

Tensor Tensor::adoptGpu(void *data, std::vector<int64_t> shape, DType dtype,
                        std::function<void()> release) {
  if (!data) {
    if (release) {
      release();
    }
    throw Error(fmt::format("Tensor::adoptGpu: null data for shape {} of {}",
                            formatShape(shape), name(dtype)));
  }
  Tensor tensor = adopt(data, std::move(shape), dtype, std::move(release));
  tensor.gpu_ = true;
  return tensor;
}

/// The error for host access to the elements of a GPU tensor.
static Error onGpuError(const std::vector<int64_t> &shape, DType dtype,
                        const char *what) {
  return Error(fmt::format("a tensor of shape {} of {} in GPU memory cannot "
                           "be {} on the host; copy it with kiln::cuda::"
                           "toHost (runtime/Cuda.h)",
                           formatShape(shape), name(dtype), what));
}

int64_t Tensor::dim(int64_t dim) const {
  int64_t rank = this->rank();
  int64_t index = dim < 0 ? dim + rank : dim;
  if (index < 0 || index >= rank) {
    throw Error(fmt::format("dimension {} is out of range for a tensor of "
                            "rank {} (shape {})",
                            dim, rank, formatShape(shape_)));
  }
  return shape_[index];
}

int64_t Tensor::numel() const {
  if (!defined()) {
    return 0;
  }
  if (std::find(shape_.begin(), shape_.end(), 0) != shape_.end()) {
    return 0; // the others may multiply past 64 bits
  }
  int64_t numel = 1;
  for (int64_t size : shape_) {
    numel *= size;
  }
  return numel;
}

std::vector<int64_t> Tensor::strides() const {
  std::vector<int64_t> strides(shape_.size());
  int64_t stride = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape_[i];
  }
  return strides;
}

template <typename T>
T *Tensor::data() const {
  if (dtypeOf<T>() != dtype_) {
    throw Error(fmt::format("tensor of dtype {} (shape {}) accessed as {}",
                            name(dtype_), formatShape(shape_),
                            name(dtypeOf<T>())));
  }
  if (gpu_) {
    throw onGpuError(shape_, dtype_, "read or written");
  }
  return static_cast<T *>(data_);
}

Tensor Tensor::clone() const {
  if (!defined()) {
    return Tensor();
  }
  if (gpu_) {
    throw onGpuError(shape_, dtype_, "cloned");
  }
  Tensor copy = empty(shape_, dtype_);
  std::memcpy(copy.data_, data_, nbytes());
  return copy;
}

Tensor Tensor::reshape(std::vector<int64_t> shape) const {
  if (!defined()) {
    throw Error(fmt::format("cannot reshape an undefined tensor to {}",
                            formatShape(shape)));
  }
  int64_t numel = checkedNumel(shape, dtype_, "Tensor::reshape");
  if (numel != this->numel()) {
    throw Error(fmt::format("cannot reshape a tensor of shape {} ({} "
                            "elements) to {} ({} elements)",
                            formatShape(shape_), this->numel(),
                            formatShape(shape), numel));
  }
  Tensor result = *this;
  result.shape_ = std::move(shape);
  return result;
}

Tensor Tensor::to(DType dtype) const {
  bool floats = (dtype_ == DType::f32 || dtype_ == DType::bf16) &&
                (dtype == DType::f32 || dtype == DType::bf16);
  if (!defined() || gpu_ || !floats) {
    throw Error(fmt::format(
        "Tensor::to: cannot convert {} tensor of dtype {} (shape {}) to {} "
        "(f32 and bf16 host tensors convert)",
        !defined() ? "an undefined"
        : gpu_     ? "a GPU"
                   : "a",
        name(dtype_), formatShape(shape_), name(dtype)));
  }
  if (dtype == dtype_) {
    return clone();
  }
  Tensor result = empty(shape_, dtype);
  int64_t numel = this->numel();
  if (dtype == DType::bf16) {
    const float *from = data<float>();
    BFloat16 *to = result.data<BFloat16>();
    for (int64_t i = 0; i < numel; ++i) {
      to[i] = BFloat16::round(from[i]);
    }
  } else {
    const BFloat16 *from = data<BFloat16>();
    float *to = result.data<float>();
    for (int64_t i = 0; i < numel; ++i) {
      to[i] = from[i].toFloat();
    }
  }
  return result;
}

template <typename T>
std::vector<T> Tensor::toVector() const {
  const T *data = this->data<T>();
  int64_t numel = this->numel();
  std::vector<T> values;
  values.reserve(numel);
  for (int64_t i = 0; i < numel; ++i) {
    values.push_back(data[i]);
  }
  return values;
}

//===----------------------------------------------------------------------===//
// Explicit instantiations
//===----------------------------------------------------------------------===//

namespace kiln {
#define KILN_INSTANTIATE_TENSOR_TEMPLATES(T)                                   \
  template Tensor Tensor::fromVector<T>(std::vector<int64_t>,                  \
                                        const std::vector<T> &);               \
  template T *Tensor::data<T>() const;                                         \
  template std::vector<T> Tensor::toVector<T>() const;
KILN_INSTANTIATE_TENSOR_TEMPLATES(float)
KILN_INSTANTIATE_TENSOR_TEMPLATES(int32_t)
KILN_INSTANTIATE_TENSOR_TEMPLATES(int64_t)
KILN_INSTANTIATE_TENSOR_TEMPLATES(bool)
KILN_INSTANTIATE_TENSOR_TEMPLATES(BFloat16)
#undef KILN_INSTANTIATE_TENSOR_TEMPLATES
} // namespace kiln
