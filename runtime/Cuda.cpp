//===- Cuda.cpp - Kiln's GPU runtime over the CUDA driver API -------------===//
//
// The driver is loaded with dlopen on first use and its entry points looked up
// by name; no CUDA header or library is needed to build Kiln. The mgpu*
// functions are called by compiled code, which cannot unwind an exception: a
// driver error there prints the call and the driver's message and aborts.
//
//===----------------------------------------------------------------------===//

#include "runtime/Cuda.h"

#include "runtime/Error.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <type_traits>

#include <dlfcn.h>

namespace {

// The few driver types Kiln needs (cuda.h's definitions).
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using Handle = void *; // CUcontext, CUmodule, CUfunction, CUstream

struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetName)(char *, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(Handle *, CUdevice);
  CUresult (*cuCtxSetCurrent)(Handle);
  CUresult (*cuModuleLoadData)(Handle *, const void *);
  CUresult (*cuModuleUnload)(Handle);
  CUresult (*cuModuleGetFunction)(Handle *, Handle, const char *);
  CUresult (*cuLaunchKernel)(Handle, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, unsigned, Handle, void **,
                             void **);
  CUresult (*cuStreamCreate)(Handle *, unsigned);
  CUresult (*cuStreamDestroy)(Handle);
  CUresult (*cuStreamSynchronize)(Handle);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, Handle);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, Handle);
  CUresult (*cuGetErrorString)(CUresult, const char **);

  Handle context = nullptr;
  std::string error; ///< Why the driver cannot be used ("" when it can).
};

std::string describe(const Driver &d, CUresult result) {
  const char *text = nullptr;
  if (d.cuGetErrorString) {
    d.cuGetErrorString(result, &text);
  }
  return text ? std::string(text) : "CUDA error " + std::to_string(result);
}

/// Loads the driver and makes device 0's primary context current, once.
Driver &driver() {
  // Never destroyed: modules are unloaded by global destructors.
  static Driver &d = *new Driver;
  static std::once_flag once;
  std::call_once(once, [] {
    const char *override = std::getenv("KILN_CUDA_DRIVER");
    const char *path = override && *override ? override : "libcuda.so.1";
    void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      const char *why = dlerror();
      d.error = std::string("no NVIDIA driver: ") + path +
                " cannot be loaded (" + (why ? why : "unknown reason") + ")";
      return;
    }
    bool complete = true;
    auto bind = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
          dlsym(library, name));
      if (!fn && complete) {
        complete = false;
        d.error = std::string("the NVIDIA driver ") + path + " has no " + name;
      }
    };
    bind(d.cuInit, "cuInit");
    bind(d.cuDeviceGetCount, "cuDeviceGetCount");
    bind(d.cuDeviceGet, "cuDeviceGet");
    bind(d.cuDeviceGetName, "cuDeviceGetName");
    bind(d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    bind(d.cuCtxSetCurrent, "cuCtxSetCurrent");
    bind(d.cuModuleLoadData, "cuModuleLoadData");
    bind(d.cuModuleUnload, "cuModuleUnload");
    bind(d.cuModuleGetFunction, "cuModuleGetFunction");
    bind(d.cuLaunchKernel, "cuLaunchKernel");
    bind(d.cuStreamCreate, "cuStreamCreate");
    bind(d.cuStreamDestroy, "cuStreamDestroy_v2");
    bind(d.cuStreamSynchronize, "cuStreamSynchronize");
    bind(d.cuMemAlloc, "cuMemAlloc_v2");
    bind(d.cuMemFree, "cuMemFree_v2");
    bind(d.cuMemcpyAsync, "cuMemcpyAsync");
    bind(d.cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    bind(d.cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    bind(d.cuMemsetD32Async, "cuMemsetD32Async");
    bind(d.cuGetErrorString, "cuGetErrorString");
    if (!complete) {
      return;
    }
    int count = 0;
    CUdevice device = 0;
    if (CUresult r = d.cuInit(0)) {
      d.error = "the NVIDIA driver does not start: " + describe(d, r);
    } else if (CUresult r = d.cuDeviceGetCount(&count)) {
      d.error = "cannot count the GPUs: " + describe(d, r);
    } else if (count == 0) {
      d.error = "the NVIDIA driver sees no GPU";
    } else if (CUresult r = d.cuDeviceGet(&device, 0)) {
      d.error = "cannot open GPU 0: " + describe(d, r);
    } else if (CUresult r = d.cuDevicePrimaryCtxRetain(&d.context, device)) {
      d.error = "cannot make a context on GPU 0: " + describe(d, r);
    }
  });
  return d;
}

/// The driver with device 0's context current on this thread, or abort: for
/// the mgpu* functions, whose callers cannot handle an exception.
Driver &driverOrAbort(const char *caller) {
  Driver &d = driver();
  if (!d.error.empty()) {
    std::fprintf(stderr, "kiln: %s needs a GPU: %s\n", caller, d.error.c_str());
    std::abort();
  }
  d.cuCtxSetCurrent(d.context);
  return d;
}

void check(const Driver &d, CUresult result, const char *call) {
  if (result != 0) {
    std::fprintf(stderr, "kiln: %s failed: %s\n", call,
                 describe(d, result).c_str());
    std::abort();
  }
}

} // namespace

namespace kiln::cuda {

bool available(std::string *why) {
  const Driver &d = driver();
  if (why) {
    *why = d.error;
  }
  return d.error.empty();
}

void requireDevice() {
  std::string why;
  if (!available(&why)) {
    throw Error("kiln: the GPU target needs an NVIDIA GPU, but " + why);
  }
}

std::string deviceName() {
  requireDevice();
  Driver &d = driver();
  char name[256] = {0};
  CUdevice device = 0;
  d.cuDeviceGet(&device, 0);
  if (CUresult r = d.cuDeviceGetName(name, sizeof(name) - 1, device)) {
    throw Error("kiln: cannot read the GPU's name: " + describe(d, r));
  }
  return name;
}

void copyToDevice(void *device, const void *host, size_t bytes) {
  requireDevice();
  Driver &d = driver();
  d.cuCtxSetCurrent(d.context);
  if (CUresult r =
          d.cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(device), host, bytes)) {
    throw Error("kiln: copying to the GPU failed: " + describe(d, r));
  }
}

void copyToHost(void *host, const void *device, size_t bytes) {
  requireDevice();
  Driver &d = driver();
  d.cuCtxSetCurrent(d.context);
  if (CUresult r =
          d.cuMemcpyDtoH(host, reinterpret_cast<CUdeviceptr>(device), bytes)) {
    throw Error("kiln: copying from the GPU failed: " + describe(d, r));
  }
}

} // namespace kiln::cuda

//===----------------------------------------------------------------------===//
// The mgpu* functions (the ABI of MLIR 22's gpu-to-llvm)
//===----------------------------------------------------------------------===//

namespace {
/// A module handle: the PTX, loaded on first use, so that a program with GPU
/// code starts (its constructors register the modules) on a machine without
/// a GPU, and fails with a clear message only if it launches a kernel.
struct LazyModule {
  explicit LazyModule(const void *image) : image(image) {}
  const void *image;
  Handle module = nullptr;
  std::once_flag loaded;
};
} // namespace

extern "C" void *mgpuModuleLoadJIT(void *data, int /*optLevel*/) {
  return new LazyModule(data);
}

extern "C" void *mgpuModuleLoad(void *data, size_t /*size*/) {
  return new LazyModule(data);
}

extern "C" void mgpuModuleUnload(void *handle) {
  auto *lazy = static_cast<LazyModule *>(handle);
  if (lazy->module) {
    Driver &d = driver();
    d.cuModuleUnload(lazy->module);
  }
  delete lazy;
}

extern "C" void *mgpuModuleGetFunction(void *handle, const char *name) {
  auto *lazy = static_cast<LazyModule *>(handle);
  Driver &d = driverOrAbort("a GPU kernel");
  std::call_once(lazy->loaded, [&] {
    check(d, d.cuModuleLoadData(&lazy->module, lazy->image),
          "cuModuleLoadData (loading GPU kernels)");
  });
  Handle function = nullptr;
  check(d, d.cuModuleGetFunction(&function, lazy->module, name),
        "cuModuleGetFunction");
  return function;
}

extern "C" void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                                 intptr_t gridZ, intptr_t blockX,
                                 intptr_t blockY, intptr_t blockZ, int32_t smem,
                                 void *stream, void **params, void **extra,
                                 size_t /*paramsCount*/) {
  Driver &d = driverOrAbort("a GPU kernel launch");
  check(d,
        d.cuLaunchKernel(function, unsigned(gridX), unsigned(gridY),
                         unsigned(gridZ), unsigned(blockX), unsigned(blockY),
                         unsigned(blockZ), unsigned(smem), stream, params,
                         extra),
        "cuLaunchKernel");
}

extern "C" void *mgpuStreamCreate() {
  Driver &d = driverOrAbort("a GPU stream");
  Handle stream = nullptr;
  // A blocking stream: it orders with the synchronous copies of
  // copyToDevice/copyToHost (the legacy default stream).
  check(d, d.cuStreamCreate(&stream, /*CU_STREAM_DEFAULT=*/0),
        "cuStreamCreate");
  return stream;
}

extern "C" void mgpuStreamDestroy(void *stream) {
  Driver &d = driverOrAbort("a GPU stream");
  check(d, d.cuStreamDestroy(stream), "cuStreamDestroy");
}

extern "C" void mgpuStreamSynchronize(void *stream) {
  Driver &d = driverOrAbort("a GPU stream");
  check(d, d.cuStreamSynchronize(stream), "cuStreamSynchronize");
}

extern "C" void *mgpuMemAlloc(uint64_t bytes, void * /*stream*/,
                              bool /*isHostShared*/) {
  Driver &d = driverOrAbort("GPU memory");
  CUdeviceptr pointer = 0;
  // A zero-size buffer still gets a distinct address.
  check(d, d.cuMemAlloc(&pointer, bytes ? bytes : 1), "cuMemAlloc");
  return reinterpret_cast<void *>(pointer);
}

extern "C" void mgpuMemFree(void *pointer, void * /*stream*/) {
  Driver &d = driverOrAbort("GPU memory");
  check(d, d.cuMemFree(reinterpret_cast<CUdeviceptr>(pointer)), "cuMemFree");
}

extern "C" void mgpuMemcpy(void *dst, void *src, size_t bytes, void *stream) {
  Driver &d = driverOrAbort("a GPU copy");
  check(d,
        d.cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst),
                        reinterpret_cast<CUdeviceptr>(src), bytes, stream),
        "cuMemcpyAsync");
}

extern "C" void mgpuMemset32(void *dst, unsigned value, size_t count,
                             void *stream) {
  Driver &d = driverOrAbort("a GPU memset");
  check(d,
        d.cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(dst), value, count,
                           stream),
        "cuMemsetD32Async");
}
