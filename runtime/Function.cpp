//===- Function.cpp - Call compiled kiln functions ------------------------===//
//
// The packed calling convention and adoption of the results. The argument
// checks are in ArgumentChecks.cpp, the text forms of specs embedded in
// ahead-of-time objects in SpecText.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/Function.h"

#include "runtime/Allocator.h"
#include "runtime/ArgumentChecks.h"
#include "runtime/Cuda.h"

#include "runtime/Error.h"
#include "runtime/PreparedWeights.h"

#include <algorithm>
#include <cstring>
#include <set>

namespace kiln {

//===----------------------------------------------------------------------===//
// Calls
//===----------------------------------------------------------------------===//

int64_t countTokens(const LossTokens &tokens, const Tensor &targets) {
  auto count = [&](const auto *ids) {
    int64_t kept = 0;
    for (int64_t i = 0, n = targets.numel(); i < n; ++i) {
      kept += !tokens.ignoreIndex || int64_t(ids[i]) != *tokens.ignoreIndex;
    }
    return kept;
  };
  switch (targets.dtype()) {
  case DType::i64:
    return count(targets.data<int64_t>());
  case DType::i32:
    return count(targets.data<int32_t>());
  default:
    throw Error("kiln: loss targets must be an i32 or i64 tensor, got " +
                std::string(name(targets.dtype())));
  }
}

CompiledFunction::CompiledFunction(FunctionSpec spec, PackedFunction fn)
    : spec_(std::move(spec)), fn_(fn), plans_(memory::makeCallPlans()) {
  if (!fn_) {
    throw Error("kiln: function '" + spec_.name + "' has no code");
  }
}

namespace {
/// Where a memref descriptor's words live in the packed argument list.
struct Descriptor {
  void *allocated;
  void *aligned;
  int64_t offset;
  std::vector<int64_t> sizes, strides;
};
} // namespace

/// The MLIR marker of a memref that points into a global (not malloc'ed).
static constexpr uintptr_t kGlobalMarker = 0xdeadbeef;

std::vector<Tensor>
CompiledFunction::run(const ParameterStore &parameters,
                      const std::map<std::string, Arg> &inputs,
                      PreparedWeights *prepared) const {
  const FunctionSpec &fs = spec_;
  const std::string &name = fs.name;
  std::vector<Arg> args;
  size_t used = 0;
  for (const ArgSpec &arg : fs.args) {
    if (arg.role == ArgSpec::Role::param) {
      args.emplace_back(parameters.get(arg.name));
      continue;
    }
    if (arg.role == ArgSpec::Role::prepared) {
      args.emplace_back(prepared ? prepared->get(parameters, arg.name)
                                 : transposeMatrix(parameters.get(arg.name)));
      continue;
    }
    auto it = inputs.find(arg.name);
    if (it == inputs.end()) {
      throw Error("kiln: '" + name + "' needs the input '" + arg.name + "'");
    }
    args.push_back(it->second);
    ++used;
  }
  if (used != inputs.size()) {
    for (const auto &[input, _] : inputs) {
      bool known = false;
      for (const ArgSpec &arg : fs.args) {
        known |= arg.role != ArgSpec::Role::param &&
                 arg.role != ArgSpec::Role::prepared && arg.name == input;
      }
      if (!known) {
        throw Error("kiln: '" + name + "' has no input '" + input + "'");
      }
    }
  }
  return call(args);
}

/// `args` with each argument in the memory `spec` reads it from: a host
/// tensor for an argument read from device memory (ArgSpec::onDevice) is
/// copied to the GPU for the call, into `placed`, which is then returned
/// (`args` itself when nothing moves: no copy on the CPU's calls). Throws
/// kiln::Error for a GPU tensor where host memory is read.
static const std::vector<Arg> &placeArguments(const FunctionSpec &spec,
                                              const std::vector<Arg> &args,
                                              std::vector<Arg> &placed) {
  for (size_t i = 0; i < std::min(args.size(), spec.args.size()); ++i) {
    const Arg &arg = args[i];
    if (arg.isScalar || !arg.tensor.defined()) {
      continue;
    }
    if (arg.tensor.onGpu() && !spec.args[i].onDevice) {
      throw Error("kiln: " + describeArg(spec, i) +
                  " is a tensor in GPU memory, but the function reads it "
                  "from host memory; copy it with kiln::cuda::toHost");
    }
    if (spec.args[i].onDevice && !arg.tensor.onGpu()) {
      if (placed.empty()) {
        placed = args;
      }
      placed[i] = Arg(cuda::toDevice(arg.tensor));
    }
  }
  return placed.empty() ? args : placed;
}

std::vector<Tensor> CompiledFunction::call(const std::vector<Arg> &given) const {
  const FunctionSpec &fs = spec_;
  checkArguments(fs, given);
  std::vector<Arg> placed;
  const std::vector<Arg> &args = placeArguments(fs, given, placed);

  // Lay the arguments out as the expanded LLVM arguments of the function:
  // a memref is (allocated, aligned, offset, sizes..., strides...), an i64 is
  // itself. The packed list points at each of those words.
  std::vector<uint64_t> words;
  std::vector<size_t> starts;
  for (const Arg &arg : args) {
    starts.push_back(words.size());
    if (arg.isScalar) {
      continue;
    }
    const Tensor &t = arg.tensor;
    words.push_back(reinterpret_cast<uint64_t>(t.raw()));
    words.push_back(reinterpret_cast<uint64_t>(t.raw()));
    words.push_back(0);
    for (int64_t s : t.shape()) {
      words.push_back(uint64_t(s));
    }
    for (int64_t s : t.strides()) {
      words.push_back(uint64_t(s));
    }
  }
  std::vector<void *> packed;
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg &arg = args[i];
    if (arg.isScalar) {
      packed.push_back(const_cast<int64_t *>(&arg.scalar));
      continue;
    }
    size_t count = 3 + 2 * arg.tensor.rank();
    for (size_t k = 0; k < count; ++k) {
      packed.push_back(&words[starts[i] + k]);
    }
  }
  // The descriptors of the results the function returns (those it writes
  // into arguments are not among them).
  size_t resultWords = 0, returned = 0;
  for (const ResultSpec &r : fs.results) {
    if (r.updates < 0) {
      resultWords += 3 + 2 * r.shape.size();
      ++returned;
    }
  }
  std::vector<uint64_t> results(std::max<size_t>(resultWords, 1));
  if (returned) {
    packed.push_back(results.data());
  }
  // The large buffers the call allocates and frees come from the arena
  // planned for these input shapes (runtime/Allocator.h).
  std::string shapes;
  for (const Arg &arg : args) {
    if (!arg.isScalar) {
      for (int64_t s : arg.tensor.shape()) {
        shapes += std::to_string(s) + ",";
      }
    }
    shapes += ";";
  }
  memory::PlannedCall planned(*plans_, shapes);
  fn_(packed.data());
  planned.finish();

  // Adopt the results (or copy those that alias an input, a global, or an
  // earlier result, or are not contiguous).
  std::set<uintptr_t> inputs;
  for (const Arg &arg : args) {
    if (!arg.isScalar) {
      inputs.insert(reinterpret_cast<uintptr_t>(arg.tensor.raw()));
    }
  }
  std::vector<Tensor> out;
  std::set<uintptr_t> adopted;
  std::vector<void *> toFree;
  size_t at = 0;
  for (const ResultSpec &r : fs.results) {
    if (r.updates >= 0) {
      out.push_back(args[r.updates].tensor); // written in place
      continue;
    }
    size_t rank = r.shape.size();
    Descriptor d;
    d.allocated = reinterpret_cast<void *>(results[at]);
    d.aligned = reinterpret_cast<void *>(results[at + 1]);
    d.offset = int64_t(results[at + 2]);
    for (size_t k = 0; k < rank; ++k) {
      d.sizes.push_back(int64_t(results[at + 3 + k]));
      d.strides.push_back(int64_t(results[at + 3 + rank + k]));
    }
    at += 3 + 2 * rank;
    size_t elementSize = sizeOf(r.dtype);
    char *data = static_cast<char *>(d.aligned) + d.offset * elementSize;
    if (r.onDevice) {
      // kiln-host-interface hands over a contiguous device buffer of the
      // result's own.
      out.push_back(cuda::adopt(d.allocated, data, d.sizes, r.dtype));
      continue;
    }
    auto allocated = reinterpret_cast<uintptr_t>(d.allocated);
    bool owned = allocated != kGlobalMarker && !inputs.count(allocated) &&
                 !inputs.count(reinterpret_cast<uintptr_t>(d.aligned)) &&
                 !planned.inArena(d.allocated); // never outlives the call
    bool contiguous = true;
    int64_t expect = 1;
    for (size_t k = rank; k-- > 0;) {
      if (d.sizes[k] != 1 && d.strides[k] != expect) {
        contiguous = false;
      }
      expect *= d.sizes[k];
    }
    if (owned && contiguous && !adopted.count(allocated)) {
      adopted.insert(allocated);
      void *toRelease = d.allocated;
      out.push_back(Tensor::adopt(data, d.sizes, r.dtype,
                                  [toRelease] { memory::release(toRelease); }));
      continue;
    }
    Tensor copy = Tensor::empty(d.sizes, r.dtype);
    char *dst = static_cast<char *>(copy.raw());
    int64_t n = copy.numel();
    std::vector<int64_t> index(rank, 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t src = 0;
      for (size_t k = 0; k < rank; ++k) {
        src += index[k] * d.strides[k];
      }
      std::memcpy(dst + i * elementSize, data + src * elementSize, elementSize);
      for (size_t k = rank; k-- > 0;) {
        if (++index[k] < d.sizes[k]) {
          break;
        }
        index[k] = 0;
      }
    }
    out.push_back(copy);
    if (owned && !adopted.count(allocated)) {
      adopted.insert(allocated);
      toFree.push_back(d.allocated);
    }
  }
  for (void *p : toFree) {
    memory::release(p);
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Executable
//===----------------------------------------------------------------------===//

Executable::~Executable() = default;

void Executable::add(CompiledFunction function) {
  std::string name = function.spec().name;
  functions_.insert_or_assign(name, std::move(function));
}

const CompiledFunction &Executable::function(const std::string &name) const {
  auto it = functions_.find(name);
  if (it == functions_.end()) {
    std::string known;
    for (const auto &[fn, _] : functions_) {
      known += (known.empty() ? "" : ", ") + fn;
    }
    throw Error("kiln: no function '" + name +
                "' in the compiled module (it has: " + known + ")");
  }
  return it->second;
}

bool Executable::contains(const std::string &name) const {
  return functions_.count(name) != 0;
}

std::vector<std::string> Executable::functions() const {
  std::vector<std::string> names;
  for (const auto &[name, _] : functions_) {
    names.push_back(name);
  }
  return names;
}

std::vector<Tensor> Executable::call(const std::string &name,
                                     const std::vector<Arg> &args) const {
  return function(name).call(args);
}

std::vector<Tensor> Executable::run(const std::string &name,
                                    const ParameterStore &parameters,
                                    const std::map<std::string, Arg> &inputs,
                                    PreparedWeights *prepared) const {
  return function(name).run(parameters, inputs, prepared);
}

ParameterStore Executable::initParameters(uint64_t seed) const {
  ParameterStore store;
  Rng rng(seed);
  for (const ParamSpec &p : params_) {
    store.add(p.name, p.shape, p.init, rng);
  }
  return store;
}

} // namespace kiln
