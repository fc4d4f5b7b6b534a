//===- ParameterStore.h - A model's named parameters ------------*- C++ -*-===//
//
// The parameters of a model, by hierarchical dotted name
// ("encoder.layers.0.attn.wq", PyTorch's state_dict convention), kept in the
// order they were added so that reports and checkpoints are stable.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_PARAMETERSTORE_H
#define KILN_RUNTIME_PARAMETERSTORE_H

#include "runtime/Init.h"
#include "runtime/Tensor.h"

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln {

/// Tensors by name, in a meaningful order (a checkpoint's, a store's).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// One parameter: its name, its tensor and how it was initialized.
struct Parameter {
  std::string name;
  Tensor tensor;
  Init init;
};

/// Named parameters in insertion order. References returned by add() and
/// get() stay valid for the lifetime of the store.
class ParameterStore {
public:
  using const_iterator = std::deque<Parameter>::const_iterator;

  /// Creates an f32 parameter of `shape` filled by `init` from `rng`. Throws
  /// kiln::Error when `name` is already taken or is not a dotted name (empty
  /// or with an empty component, like "a..b").
  Tensor &add(const std::string &name, const std::vector<int64_t> &shape,
              const Init &init, Rng &rng);
  /// Adds an existing tensor (shared, not copied) under `name`; `init` is only
  /// recorded for describe(). Throws like the other add().
  Tensor &add(const std::string &name, Tensor tensor,
              const Init &init = Init::zeros());

  /// The parameter called `name`; throws kiln::Error naming the nearest
  /// existing names when there is none.
  Tensor &get(const std::string &name);
  /// The parameter called `name`; throws kiln::Error naming the nearest
  /// existing names when there is none.
  const Tensor &get(const std::string &name) const;
  /// Whether a parameter is called `name`.
  bool contains(const std::string &name) const;

  /// Every name, in insertion order.
  std::vector<std::string> names() const;
  /// The parameters whose name is `prefix` or starts with `prefix` + ".", in
  /// insertion order (`under("encoder.layers.0")`).
  NamedTensors under(const std::string &prefix) const;
  /// Every (name, tensor), in insertion order (the tensors are shared).
  NamedTensors namedTensors() const;

  /// The number of parameters (tensors).
  size_t size() const { return parameters_.size(); }
  bool empty() const { return parameters_.empty(); }
  /// The total number of elements over all parameters.
  int64_t numParameters() const;

  const_iterator begin() const { return parameters_.begin(); }
  const_iterator end() const { return parameters_.end(); }

  /// Copies `values` into the parameters (the tensors keep their storage, so
  /// pointers held by compiled code stay valid). Every parameter must be
  /// given exactly once with its shape and dtype, and nothing else: otherwise
  /// a kiln::Error lists every problem (missing, wrong shape or dtype,
  /// unexpected, repeated) and no parameter is changed.
  void setFrom(const NamedTensors &values);
  /// Throws the error setFrom() would throw for `values`, and changes
  /// nothing.
  void check(const NamedTensors &values) const;
  /// The same, from a map.
  void setFrom(const std::map<std::string, Tensor> &values);

  /// One line per parameter: name, shape, dtype, initializer; then the total.
  std::string describe() const;

private:
  Tensor &insert(const std::string &name, Tensor tensor, const Init &init);
  [[noreturn]] void throwMissing(const std::string &name) const;

  std::deque<Parameter> parameters_;
  std::unordered_map<std::string, size_t> index_;
};

} // namespace kiln

#endif // KILN_RUNTIME_PARAMETERSTORE_H
