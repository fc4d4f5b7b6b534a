//===- ParameterStore.cpp - A model's named parameters -------------------===//
//
// Insertion order lives in a deque (stable references), lookup in a hash map
// from name to position.
//
//===----------------------------------------------------------------------===//

#include "runtime/ParameterStore.h"

#include "runtime/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>

using namespace kiln;

/// Throws unless `name` is a dotted name: non-empty components separated by
/// single dots.
static void checkName(const std::string &name) {
  bool valid = !name.empty() && name.front() != '.' && name.back() != '.' &&
               name.find("..") == std::string::npos;
  if (!valid) {
    throw Error(fmt::format("invalid parameter name '{}': expected non-empty "
                            "components separated by single dots, like "
                            "'encoder.layers.0.attn.wq'",
                            name));
  }
}

/// Levenshtein distance, to suggest names close to a misspelled one.
static size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) {
    row[j] = j;
  }
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                         diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

Tensor &ParameterStore::insert(const std::string &name, Tensor tensor,
                               const Init &init) {
  checkName(name);
  if (contains(name)) {
    throw Error(fmt::format("parameter '{}' is already defined (shape {})",
                            name, formatShape(get(name).shape())));
  }
  parameters_.push_back({name, std::move(tensor), init});
  index_.emplace(name, parameters_.size() - 1);
  return parameters_.back().tensor;
}

Tensor &ParameterStore::add(const std::string &name,
                            const std::vector<int64_t> &shape, const Init &init,
                            Rng &rng) {
  checkName(name);
  if (contains(name)) {
    throw Error(fmt::format("parameter '{}' is already defined (shape {})",
                            name, formatShape(get(name).shape())));
  }
  Tensor tensor;
  try {
    tensor = Tensor::empty(shape, DType::f32);
    initialize(tensor, init, rng);
  } catch (const Error &error) {
    throw Error(fmt::format("parameter '{}': {}", name, error.what()));
  }
  return insert(name, std::move(tensor), init);
}

Tensor &ParameterStore::add(const std::string &name, Tensor tensor,
                            const Init &init) {
  if (!tensor.defined()) {
    throw Error(
        fmt::format("parameter '{}': cannot add an undefined tensor", name));
  }
  return insert(name, std::move(tensor), init);
}

void ParameterStore::throwMissing(const std::string &name) const {
  if (parameters_.empty()) {
    throw Error(fmt::format("no parameter '{}': the store is empty", name));
  }
  std::vector<std::pair<size_t, size_t>> ranked; // (distance, position)
  ranked.reserve(parameters_.size());
  for (size_t i = 0; i < parameters_.size(); ++i) {
    ranked.emplace_back(editDistance(name, parameters_[i].name), i);
  }
  size_t shown = std::min<size_t>(3, ranked.size());
  std::partial_sort(ranked.begin(), ranked.begin() + shown, ranked.end());
  std::vector<std::string> nearest;
  for (size_t i = 0; i < shown; ++i) {
    nearest.push_back(fmt::format("'{}'", parameters_[ranked[i].second].name));
  }
  throw Error(fmt::format("no parameter '{}' among {} parameters; nearest: {}",
                          name, parameters_.size(), fmt::join(nearest, ", ")));
}

Tensor &ParameterStore::get(const std::string &name) {
  auto it = index_.find(name);
  if (it == index_.end()) {
    throwMissing(name);
  }
  return parameters_[it->second].tensor;
}

const Tensor &ParameterStore::get(const std::string &name) const {
  auto it = index_.find(name);
  if (it == index_.end()) {
    throwMissing(name);
  }
  return parameters_[it->second].tensor;
}

bool ParameterStore::contains(const std::string &name) const {
  return index_.count(name) != 0;
}

std::vector<std::string> ParameterStore::names() const {
  std::vector<std::string> names;
  names.reserve(parameters_.size());
  for (const Parameter &parameter : parameters_) {
    names.push_back(parameter.name);
  }
  return names;
}

NamedTensors ParameterStore::under(const std::string &prefix) const {
  NamedTensors result;
  for (const Parameter &parameter : parameters_) {
    const std::string &name = parameter.name;
    if (name == prefix || (name.size() > prefix.size() &&
                           name.compare(0, prefix.size(), prefix) == 0 &&
                           name[prefix.size()] == '.')) {
      result.emplace_back(name, parameter.tensor);
    }
  }
  return result;
}

NamedTensors ParameterStore::namedTensors() const {
  NamedTensors result;
  result.reserve(parameters_.size());
  for (const Parameter &parameter : parameters_) {
    result.emplace_back(parameter.name, parameter.tensor);
  }
  return result;
}

int64_t ParameterStore::numParameters() const {
  int64_t total = 0;
  for (const Parameter &parameter : parameters_) {
    total += parameter.tensor.numel();
  }
  return total;
}

void ParameterStore::check(const NamedTensors &values) const {
  std::vector<std::string> problems;
  std::set<std::string> seen;
  for (const auto &[name, value] : values) {
    if (!seen.insert(name).second) {
      problems.push_back(fmt::format("'{}' is given more than once", name));
      continue;
    }
    auto it = index_.find(name);
    if (it == index_.end()) {
      problems.push_back(fmt::format("unexpected tensor '{}' (shape {}): the "
                                     "model has no such parameter",
                                     name, formatShape(value.shape())));
      continue;
    }
    const Tensor &target = parameters_[it->second].tensor;
    if (!value.defined()) {
      problems.push_back(fmt::format("'{}' is an undefined tensor", name));
    } else if (value.shape() != target.shape()) {
      problems.push_back(fmt::format("'{}' has shape {} but the model expects "
                                     "{}",
                                     name, formatShape(value.shape()),
                                     formatShape(target.shape())));
    } else if (value.dtype() != target.dtype()) {
      problems.push_back(fmt::format("'{}' has dtype {} but the model expects "
                                     "{}",
                                     name, kiln::name(value.dtype()),
                                     kiln::name(target.dtype())));
    }
  }
  for (const Parameter &parameter : parameters_) {
    if (!seen.count(parameter.name)) {
      problems.push_back(fmt::format("missing tensor '{}' (shape {})",
                                     parameter.name,
                                     formatShape(parameter.tensor.shape())));
    }
  }
  if (problems.empty()) {
    return;
  }
  // A wrong checkpoint can produce hundreds of problems: show the first.
  constexpr size_t kShown = 8;
  std::string more;
  if (problems.size() > kShown) {
    more = fmt::format("; and {} more", problems.size() - kShown);
    problems.resize(kShown);
  }
  throw Error(fmt::format("cannot set {} parameters from {} tensors: {}{}",
                          parameters_.size(), values.size(),
                          fmt::join(problems, "; "), more));
}

void ParameterStore::setFrom(const NamedTensors &values) {
  check(values);
  for (const auto &[name, value] : values) {
    Tensor &target = parameters_[index_.at(name)].tensor;
    if (target.raw() != value.raw()) {
      std::memmove(target.raw(), value.raw(), target.nbytes());
    }
  }
}

void ParameterStore::setFrom(const std::map<std::string, Tensor> &values) {
  setFrom(NamedTensors(values.begin(), values.end()));
}

std::string ParameterStore::describe() const {
  size_t width = 0;
  for (const Parameter &parameter : parameters_) {
    width = std::max(width, parameter.name.size());
  }
  std::string result;
  for (const Parameter &parameter : parameters_) {
    result += fmt::format("{:<{}}  {} {}  {}\n", parameter.name, width,
                          name(parameter.tensor.dtype()),
                          formatShape(parameter.tensor.shape()),
                          parameter.init.describe());
  }
  result += fmt::format("{} tensors, {} parameters\n", parameters_.size(),
                        numParameters());
  return result;
}
