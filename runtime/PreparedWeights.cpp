//===- PreparedWeights.cpp - Parameters in the layout products read -------===//
//
// Implements kiln::PreparedWeights and kiln::transposeMatrix.
//
//===----------------------------------------------------------------------===//

#include "runtime/PreparedWeights.h"

#include "runtime/Error.h"

#include <algorithm>

namespace kiln {

Tensor transposeMatrix(const Tensor &matrix) {
  if (!matrix.defined() || matrix.onGpu() || matrix.dtype() != DType::f32 ||
      matrix.rank() != 2) {
    throw Error("kiln: only a 2-D f32 tensor in host memory can be "
                "transposed, not " +
                (matrix.defined() ? formatShape(matrix.shape()) +
                                        std::string(" ") + name(matrix.dtype())
                                  : std::string("an empty tensor")));
  }
  int64_t rows = matrix.dim(0), columns = matrix.dim(1);
  Tensor result = Tensor::empty({columns, rows}, DType::f32);
  const float *in = matrix.data<float>();
  float *out = result.data<float>();
  // Square blocks of 64 (16 KiB read, 16 KiB written): each row of a block
  // read and written a cache line at a time.
  constexpr int64_t kBlock = 64;
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock) {
    int64_t r1 = std::min(rows, r0 + kBlock);
    for (int64_t c0 = 0; c0 < columns; c0 += kBlock) {
      int64_t c1 = std::min(columns, c0 + kBlock);
      for (int64_t c = c0; c < c1; ++c) {
        for (int64_t r = r0; r < r1; ++r) {
          out[c * rows + r] = in[r * columns + c];
        }
      }
    }
  }
  return result;
}

Tensor PreparedWeights::get(const ParameterStore &parameters,
                            const std::string &name) {
  const Tensor &parameter = parameters.get(name); // throws naming neighbours
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = copies_.find(name);
  if (found != copies_.end() && found->second.source.raw() == parameter.raw() &&
      found->second.tensor.dim(0) == parameter.dim(1) &&
      found->second.tensor.dim(1) == parameter.dim(0)) {
    return found->second.tensor;
  }
  Tensor copy = transposeMatrix(parameter);
  copies_[name] = Copy{parameter, copy};
  return copy;
}

void PreparedWeights::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  copies_.clear();
}

size_t PreparedWeights::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t total = 0;
  for (const auto &[name, copy] : copies_) {
    total += copy.tensor.nbytes();
  }
  return total;
}

} // namespace kiln
