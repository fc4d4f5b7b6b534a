//===- Communicator.cpp - The processes of a data-parallel run ------------===//
//
// Implements the world of one process and the helpers built on the
// Communicator interface.
//
//===----------------------------------------------------------------------===//

#include "runtime/Communicator.h"

#include "base/SplitMix64.h"
#include "runtime/Error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kiln {

Communicator::~Communicator() = default;

namespace {
class SingleProcess final : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allReduceSum(float *, size_t) override {}
  void broadcast(void *, size_t, int root) override {
    if (root != 0) {
      throw Error(
          fmt::format("kiln: no rank {} in a world of one process", root));
    }
  }
  std::vector<uint64_t> allGather(uint64_t value) override { return {value}; }
  void barrier() override {}
  [[noreturn]] void abort(const std::string &message, int code) override {
    fmt::print(stderr, "{}\n", message);
    std::fflush(stderr);
    std::exit(code);
  }
};
} // namespace

std::shared_ptr<Communicator> singleProcess() {
  return std::make_shared<SingleProcess>();
}

std::map<std::string, Arg> shardBatch(const std::map<std::string, Arg> &inputs,
                                      int rank, int size) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw Error(
        fmt::format("kiln: shardBatch: rank {} of {} processes", rank, size));
  }
  if (size == 1) {
    return inputs;
  }
  int64_t rows = -1;
  std::string first;
  for (const auto &[name, arg] : inputs) {
    if (arg.isScalar) {
      continue;
    }
    if (arg.tensor.rank() == 0) {
      throw Error(fmt::format("kiln: cannot split the batch input '{}' over "
                              "processes: it is a scalar tensor",
                              name));
    }
    if (rows < 0) {
      rows = arg.tensor.dim(0);
      first = name;
    } else if (arg.tensor.dim(0) != rows) {
      throw Error(fmt::format(
          "kiln: cannot split a batch over processes: input '{}' has {} rows "
          "and '{}' has {} (every tensor input is split along its first "
          "dimension)",
          first, rows, name, arg.tensor.dim(0)));
    }
  }
  if (rows >= 0 && rows < size) {
    throw Error(fmt::format("kiln: a global batch of {} rows cannot be split "
                            "over {} processes (each needs at least one row)",
                            rows, size));
  }
  int64_t begin = rows * rank / size, end = rows * (rank + 1) / size;
  std::map<std::string, Arg> shard;
  for (const auto &[name, arg] : inputs) {
    if (arg.isScalar) {
      shard.emplace(name, arg);
      continue;
    }
    std::vector<int64_t> shape = arg.tensor.shape();
    size_t rowBytes = arg.tensor.nbytes() / size_t(rows);
    shape[0] = end - begin;
    Tensor part = Tensor::empty(shape, arg.tensor.dtype());
    if (part.nbytes() > 0) {
      std::memcpy(part.raw(),
                  static_cast<const char *>(arg.tensor.raw()) +
                      size_t(begin) * rowBytes,
                  part.nbytes());
    }
    shard.emplace(name, Arg(part));
  }
  return shard;
}

void broadcastStore(Communicator &communicator, ParameterStore &store,
                    int root) {
  std::vector<uint64_t> layouts =
      communicator.allGather(hashStoreLayout(store));
  std::vector<std::string> differ;
  for (size_t r = 0; r < layouts.size(); ++r) {
    if (layouts[r] != layouts[size_t(root)]) {
      differ.push_back(std::to_string(r));
    }
  }
  if (!differ.empty()) {
    throw Error(fmt::format(
        "kiln: the processes do not hold the same model: the parameters of "
        "rank{} {} differ from rank {}'s in names, dtypes or shapes (this is "
        "rank {}, with {} parameters); build every process's model from the "
        "same data and settings",
        differ.size() == 1 ? "" : "s", fmt::join(differ, ", "), root,
        communicator.rank(), store.size()));
  }
  for (const auto &[name, tensor] : store.namedTensors()) {
    communicator.broadcast(tensor.raw(), tensor.nbytes(), root);
  }
}

uint64_t hashStoreLayout(const ParameterStore &store) {
  ParameterStore layout;
  for (const auto &[name, tensor] : store.namedTensors()) {
    std::vector<int64_t> shape = tensor.shape();
    shape.push_back(int64_t(tensor.dtype()));
    layout.add(name, Tensor::fromVector<int64_t>(
                         {int64_t(shape.size())}, std::move(shape)));
  }
  return hashStore(layout);
}

uint64_t hashStore(const ParameterStore &store) {
  constexpr uint64_t kMultiplier = splitmix64::kIncrement;
  uint64_t h = 0;
  auto add = [&](const void *data, size_t bytes) {
    const auto *p = static_cast<const unsigned char *>(data);
    size_t words = bytes / 8;
    for (size_t i = 0; i < words; ++i) {
      uint64_t w;
      std::memcpy(&w, p + 8 * i, 8);
      h = (((h << 5) | (h >> 59)) ^ w) * kMultiplier;
    }
    uint64_t tail = 0;
    if (bytes > 8 * words) {
      std::memcpy(&tail, p + 8 * words, bytes - 8 * words);
    }
    h = (((h << 5) | (h >> 59)) ^ tail ^ bytes) * kMultiplier;
  };
  for (const auto &[name, tensor] : store.namedTensors()) {
    add(name.data(), name.size());
    add(tensor.raw(), tensor.nbytes());
  }
  return h ^ (h >> 29);
}

} // namespace kiln
