//===- PreparedWeights.h - Parameters in the layout products read -*- C++
//-*-===//
//
// CPU code compiled with JitOptions::prepareWeights reads each 2-D
// parameter that a product takes transposed from a copy in the layout it
// multiplies by (kiln-prepare-weights adds such arguments:
// ArgSpec::Role::prepared). The copies are made here, once per parameter
// set, instead of inside every call.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_PREPAREDWEIGHTS_H
#define KILN_RUNTIME_PREPAREDWEIGHTS_H

#include "runtime/ParameterStore.h"
#include "runtime/Tensor.h"

#include <cstddef>
#include <map>
#include <mutex>
#include <string>

namespace kiln {

/// `matrix`, a 2-D f32 tensor [rows, columns], transposed into a new
/// [columns, rows] tensor. Throws kiln::Error for any other tensor.
Tensor transposeMatrix(const Tensor &matrix);

/// The prepared layouts of a parameter store's parameters (each 2-D
/// parameter's transpose), made on first use and kept until clear().
/// Whoever keeps one clears it when the parameters change: CompiledModel
/// does when it hands its parameters out for writing (parameters() on a
/// non-const model). A parameter replaced by another tensor is noticed (its
/// copy is made again); a write into a parameter's elements is not.
/// Thread-safe.
class PreparedWeights {
public:
  /// The transpose of parameter `name` of `parameters`: the kept copy, or
  /// one made now. Throws kiln::Error when there is no such parameter or
  /// it is not a 2-D f32 tensor.
  Tensor get(const ParameterStore &parameters, const std::string &name);
  /// Forgets every copy (they are made again when next asked for).
  void clear();
  /// The bytes the kept copies hold.
  size_t bytes() const;

private:
  struct Copy {
    /// The parameter it was made of (held, so that a parameter replaced by
    /// another tensor cannot be mistaken for it at the same address).
    Tensor source;
    Tensor tensor;
  };
  mutable std::mutex mutex_;
  std::map<std::string, Copy> copies_;
};

} // namespace kiln

#endif // KILN_RUNTIME_PREPAREDWEIGHTS_H
