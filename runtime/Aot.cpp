//===- Aot.cpp - Load and call ahead-of-time compiled models --------------===//
//
// Implements kiln::AotModule and the C interface of runtime/AotAbi.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/Aot.h"

#include "runtime/Error.h"
#include "runtime/SpecText.h"

#include <map>
#include <mutex>
#include <string>

namespace kiln {

AotModule::AotModule(const kiln_model &model) {
  if (model.abi_version != KILN_ABI_VERSION) {
    throw Error("kiln: the compiled model was made for runtime interface " +
                std::to_string(model.abi_version) + ", this runtime has " +
                std::to_string(KILN_ABI_VERSION) +
                ": compile it again with this Kiln");
  }
  if (!model.params || (model.num_functions && !model.functions)) {
    throw Error("kiln: the compiled model is malformed");
  }
  for (size_t i = 0; i < model.num_functions; ++i) {
    const kiln_function &fn = model.functions[i];
    add(CompiledFunction(parseFunctionSpec(fn.spec ? fn.spec : ""), fn.packed));
  }
  setParams(parseParamSpecs(model.params));
}

} // namespace kiln

using namespace kiln;

namespace {

thread_local std::string lastError;

/// The parsed function of each kiln_function, made on first use.
const CompiledFunction &compiledFor(const kiln_function *fn) {
  static std::mutex mutex;
  struct Cached {
    const char *spec;
    void (*packed)(void **);
    CompiledFunction function;
  };
  static std::map<const kiln_function *, Cached> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(fn);
  // The entry's address may be reused (a model unloaded and another loaded):
  // the cached function must still be the entry's.
  if (it == cache.end() || it->second.spec != fn->spec ||
      it->second.packed != fn->packed) {
    Cached fresh{fn->spec, fn->packed,
                 CompiledFunction(parseFunctionSpec(fn->spec), fn->packed)};
    it = cache.insert_or_assign(fn, std::move(fresh)).first;
  }
  return it->second.function;
}

int32_t codeOf(DType dtype) {
  switch (dtype) {
  case DType::f32:
    return KILN_F32;
  case DType::i32:
    return KILN_I32;
  case DType::i64:
    return KILN_I64;
  case DType::i1:
    return KILN_BOOL;
  case DType::bf16:
    return KILN_BF16;
  }
  return KILN_F32;
}

DType dtypeOf(int32_t code, size_t index) {
  switch (code) {
  case KILN_F32:
    return DType::f32;
  case KILN_I32:
    return DType::i32;
  case KILN_I64:
    return DType::i64;
  case KILN_BOOL:
    return DType::i1;
  case KILN_BF16:
    return DType::bf16;
  default:
    throw Error("kiln: argument #" + std::to_string(index) +
                " has an unknown dtype code " + std::to_string(code));
  }
}

} // namespace

extern "C" int kiln_call(const kiln_function *function, const kiln_tensor *args,
                         size_t num_args, kiln_tensor *results,
                         size_t num_results) {
  try {
    if (!function || !function->spec || !function->packed) {
      throw Error("kiln: kiln_call needs a compiled function");
    }
    const CompiledFunction &fn = compiledFor(function);
    const FunctionSpec &spec = fn.spec();
    if (num_args != spec.args.size() || (num_args && !args)) {
      throw Error("kiln: '" + spec.name + "' takes " +
                  std::to_string(spec.args.size()) + " arguments, got " +
                  std::to_string(num_args));
    }
    if (num_results != spec.results.size() || (num_results && !results)) {
      throw Error("kiln: '" + spec.name + "' returns " +
                  std::to_string(spec.results.size()) + " results, room for " +
                  std::to_string(num_results) + " given");
    }
    // Before anything is written (a spec from another compiler may hold
    // what kiln-compile refuses).
    for (const ResultSpec &r : spec.results) {
      if (r.shape.size() > KILN_MAX_RANK) {
        throw Error("kiln: result '" + r.name + "' of '" + spec.name +
                    "' has rank " + std::to_string(r.shape.size()) +
                    ", more than KILN_MAX_RANK");
      }
    }
    std::vector<Arg> in;
    for (size_t i = 0; i < num_args; ++i) {
      const kiln_tensor &t = args[i];
      if (t.rank < 0 || t.rank > KILN_MAX_RANK || !t.data) {
        throw Error("kiln: argument #" + std::to_string(i) + " of '" +
                    spec.name + "' has no data or a rank outside [0, " +
                    std::to_string(KILN_MAX_RANK) + "]");
      }
      DType dtype = dtypeOf(t.dtype, i);
      if (spec.args[i].isScalar) {
        if (dtype != DType::i64 || t.rank != 0) {
          throw Error("kiln: argument #" + std::to_string(i) + " '" +
                      spec.args[i].name + "' of '" + spec.name +
                      "' must be an i64 scalar (a rank-0 KILN_I64 tensor)");
        }
        in.emplace_back(*static_cast<const int64_t *>(t.data));
        continue;
      }
      std::vector<int64_t> shape(t.shape, t.shape + t.rank);
      for (int64_t size : shape) {
        if (size < 0) {
          throw Error("kiln: argument #" + std::to_string(i) + " of '" +
                      spec.name + "' has a negative size");
        }
      }
      // A view of the caller's memory: the compiled code writes only the
      // arguments that a result updates in place (ResultSpec::updates).
      in.emplace_back(Tensor::adopt(t.data, shape, dtype, [] {}));
    }
    std::vector<Tensor> out = fn.call(in);
    for (size_t i = 0; i < out.size(); ++i) {
      kiln_tensor &r = results[i];
      r.data = out[i].raw();
      r.dtype = codeOf(out[i].dtype());
      r.rank = int32_t(out[i].rank());
      for (int64_t d = 0; d < out[i].rank(); ++d) {
        r.shape[d] = out[i].shape()[d];
      }
      r.owner = new Tensor(out[i]);
    }
    return 0;
  } catch (const std::exception &e) {
    lastError = e.what();
    return 1;
  }
}

extern "C" const char *kiln_last_error(void) { return lastError.c_str(); }

extern "C" void kiln_tensor_release(kiln_tensor *tensor) {
  if (!tensor || !tensor->owner) {
    return;
  }
  delete static_cast<Tensor *>(tensor->owner);
  tensor->owner = nullptr;
  tensor->data = nullptr;
  tensor->rank = 0;
}
