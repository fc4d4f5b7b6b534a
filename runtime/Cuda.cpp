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

#include <algorithm>
#include <atomic>
#include <iterator>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

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
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
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
  CUresult (*cuEventCreate)(Handle *, unsigned);
  CUresult (*cuEventRecord)(Handle, Handle);
  CUresult (*cuEventElapsedTime)(float *, Handle, Handle);
  CUresult (*cuEventDestroy)(Handle);

  /// Optional: the fake driver's kiln_cuda_runs_host_kernels.
  int (*runsHostKernels)() = nullptr;

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
    bind(d.cuDeviceGetAttribute, "cuDeviceGetAttribute");
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
    bind(d.cuEventCreate, "cuEventCreate");
    bind(d.cuEventRecord, "cuEventRecord");
    bind(d.cuEventElapsedTime, "cuEventElapsedTime");
    bind(d.cuEventDestroy, "cuEventDestroy_v2");
    d.runsHostKernels = reinterpret_cast<int (*)()>(
        dlsym(library, "kiln_cuda_runs_host_kernels"));
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

/// Counts a copy while profiling (kiln::cuda::setProfiling).
void countCopy(bool toDevice, bool fromDevice, size_t bytes);

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

bool runsHostKernels() {
  const Driver &d = driver();
  return d.error.empty() && d.runsHostKernels && d.runsHostKernels() != 0;
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

std::string architecture() {
  requireDevice();
  Driver &d = driver();
  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR and _MINOR.
  constexpr int kMajor = 75, kMinor = 76;
  int major = 0, minor = 0;
  CUdevice device = 0;
  d.cuDeviceGet(&device, 0);
  if (CUresult r = d.cuDeviceGetAttribute(&major, kMajor, device)) {
    throw Error("kiln: cannot read the GPU's architecture: " + describe(d, r));
  }
  if (CUresult r = d.cuDeviceGetAttribute(&minor, kMinor, device)) {
    throw Error("kiln: cannot read the GPU's architecture: " + describe(d, r));
  }
  return "sm_" + std::to_string(major * 10 + minor);
}

void copyToDevice(void *device, const void *host, size_t bytes) {
  requireDevice();
  Driver &d = driver();
  d.cuCtxSetCurrent(d.context);
  if (CUresult r =
          d.cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(device), host, bytes)) {
    throw Error("kiln: copying to the GPU failed: " + describe(d, r));
  }
  countCopy(true, false, bytes);
}

void copyToHost(void *host, const void *device, size_t bytes) {
  requireDevice();
  Driver &d = driver();
  d.cuCtxSetCurrent(d.context);
  if (CUresult r =
          d.cuMemcpyDtoH(host, reinterpret_cast<CUdeviceptr>(device), bytes)) {
    throw Error("kiln: copying from the GPU failed: " + describe(d, r));
  }
  countCopy(false, true, bytes);
}

} // namespace kiln::cuda

namespace {
/// GPU memory for a tensor of the runtime's, from the pool compiled code
/// allocates from; throws kiln::Error when there is none.
void *allocateForTensor(size_t bytes);
/// Returns a block of allocateForTensor() or of compiled code's (a result
/// handed over) to the pool. Every call that used it has finished: each
/// compiled GPU function synchronizes its stream before it returns.
void releaseFromTensor(void *pointer);
} // namespace

namespace kiln::cuda {

Tensor toDevice(const Tensor &host) {
  if (!host.defined() || host.onGpu()) {
    throw Error("kiln: cuda::toDevice needs a defined host tensor");
  }
  requireDevice();
  void *pointer = allocateForTensor(host.nbytes());
  Tensor device = Tensor::adoptGpu(pointer, host.shape(), host.dtype(),
                                   [pointer] { releaseFromTensor(pointer); });
  copy(host, device);
  return device;
}

Tensor adopt(void *block, void *data, std::vector<int64_t> shape,
             DType dtype) {
  return Tensor::adoptGpu(data, std::move(shape), dtype,
                          [block] { releaseFromTensor(block); });
}

void mirror(const ParameterStore &host, ParameterStore &device) {
  for (const Parameter &p : host) {
    if (!device.contains(p.name)) {
      device.add(p.name, toDevice(p.tensor), p.init);
      continue;
    }
    Tensor &d = device.get(p.name);
    if (d.shape() == p.tensor.shape() && d.dtype() == p.tensor.dtype()) {
      copy(p.tensor, d);
    } else {
      d = toDevice(p.tensor);
    }
  }
}

Tensor toHost(const Tensor &device) {
  if (!device.defined() || !device.onGpu()) {
    throw Error("kiln: cuda::toHost needs a tensor in GPU memory");
  }
  Tensor host = Tensor::empty(device.shape(), device.dtype());
  copy(device, host);
  return host;
}

void copy(const Tensor &from, const Tensor &to) {
  if (!from.defined() || !to.defined() || from.onGpu() == to.onGpu() ||
      from.shape() != to.shape() || from.dtype() != to.dtype()) {
    throw Error(
        "kiln: cuda::copy copies between a host and a GPU tensor of the same "
        "shape and dtype, not from " +
        std::string(from.onGpu() ? "GPU " : "host ") + name(from.dtype()) +
        " " + formatShape(from.shape()) + " to " +
        (to.onGpu() ? "GPU " : "host ") + name(to.dtype()) + " " +
        formatShape(to.shape()));
  }
  if (from.nbytes() == 0) {
    return;
  }
  if (to.onGpu()) {
    copyToDevice(to.raw(), from.raw(), from.nbytes());
  } else {
    copyToHost(to.raw(), from.raw(), from.nbytes());
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
  /// Functions by name, resolved once: compiled code asks before every
  /// launch.
  std::mutex mutex;
  std::map<std::string, Handle, std::less<>> functions;
};
} // namespace

namespace {
/// Device memory is cached: cuMemFree waits for the whole device, and a
/// training step frees hundreds of temporaries. A freed block goes back to
/// the pool only once the stream it was freed on has finished (work queued
/// there may still use it); until then only that stream, which runs in
/// order, may reuse it. Blocks are reused for requests of the same rounded
/// size; when the driver runs out of memory, the pool is emptied and the
/// allocation tried again.
struct MemoryPool {
  std::mutex mutex;
  std::multimap<size_t, CUdeviceptr> free;
  std::map<void *, std::multimap<size_t, CUdeviceptr>> pending; // by stream
  std::map<CUdeviceptr, size_t> sizes;

  static size_t round(uint64_t bytes) {
    constexpr size_t kGranule = 512;
    return std::max<size_t>((bytes + kGranule - 1) / kGranule, 1) * kGranule;
  }
  static bool take(std::multimap<size_t, CUdeviceptr> &from, size_t bytes,
                   CUdeviceptr &pointer) {
    auto it = from.find(bytes);
    if (it == from.end()) {
      return false;
    }
    pointer = it->second;
    from.erase(it);
    return true;
  }
  /// The blocks freed on `stream` are free for all (it has finished).
  void settle(void *stream) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = pending.find(stream);
    if (it != pending.end()) {
      free.insert(it->second.begin(), it->second.end());
      pending.erase(it);
    }
  }
  /// Returns every free block to the driver.
  void release(Driver &d) {
    for (auto [bytes, pointer] : free) {
      d.cuMemFree(pointer);
      sizes.erase(pointer);
    }
    free.clear();
  }
  /// A block of at least `bytes` for work on `stream` (which may reuse the
  /// blocks freed on it), or for the runtime's own tensors (`stream`
  /// unset: blocks free for all only); 0 with the driver's error when there
  /// is no memory even with the free blocks released. Called with `mutex`
  /// held.
  CUdeviceptr allocate(Driver &d, uint64_t bytes,
                       std::optional<void *> stream, CUresult &error) {
    size_t size = round(bytes);
    CUdeviceptr pointer = 0;
    auto own = stream ? pending.find(*stream) : pending.end();
    if (take(free, size, pointer) ||
        (own != pending.end() && take(own->second, size, pointer))) {
      return pointer;
    }
    if (d.cuMemAlloc(&pointer, size) != 0) {
      release(d);
      if ((error = d.cuMemAlloc(&pointer, size)) != 0) {
        return 0;
      }
    }
    sizes[pointer] = size;
    return pointer;
  }
  /// The size of block `pointer`; aborts when the pool did not allocate it
  /// (`what` the caller was doing).
  size_t blockSize(CUdeviceptr pointer, const char *what) {
    auto it = sizes.find(pointer);
    if (it == sizes.end()) {
      std::fprintf(stderr, "kiln: %s GPU memory that was not allocated\n",
                   what);
      std::abort();
    }
    return it->second;
  }
};

MemoryPool &pool() {
  static MemoryPool &p = *new MemoryPool; // used by global destructors
  return p;
}

/// What the GPU did while profiling is on (kiln::cuda::setProfiling): each
/// kernel's launches and time, from a pair of CUDA events around every
/// launch, read once the launch's stream is synchronized; and the bytes
/// copied each way. Kernel names are kept for every function handle, so
/// that profiling can start after the handles were made.
struct Profiler {
  struct Timing {
    Handle function, start, end;
    void *stream;
    unsigned grid[3], block[3];
  };
  std::mutex mutex;
  std::atomic<bool> on{false};
  std::map<Handle, std::string> names;
  std::vector<Timing> pending;
  std::vector<Handle> spareEvents;
  kiln::cuda::Profile profile;
  std::map<std::string, size_t> index; // kernel name -> profile.kernels slot

  Handle event(Driver &d) {
    if (!spareEvents.empty()) {
      Handle e = spareEvents.back();
      spareEvents.pop_back();
      return e;
    }
    Handle e = nullptr;
    check(d, d.cuEventCreate(&e, /*CU_EVENT_DEFAULT=*/0), "cuEventCreate");
    return e;
  }
  /// Reads the times of the launches on `stream`, which has finished.
  void settle(Driver &d, void *stream) {
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<Timing> waiting;
    for (const Timing &t : pending) {
      if (t.stream != stream) {
        waiting.push_back(t);
        continue;
      }
      float ms = 0;
      check(d, d.cuEventElapsedTime(&ms, t.start, t.end),
            "cuEventElapsedTime");
      auto name = names.find(t.function);
      std::string kernel = name == names.end() ? "?" : name->second;
      auto [slot, added] = index.try_emplace(kernel, profile.kernels.size());
      if (added) {
        profile.kernels.push_back({kernel, 0, 0, 0, {}, {}});
      }
      kiln::cuda::KernelProfile &k = profile.kernels[slot->second];
      ++k.launches;
      k.singleThreadLaunches += t.grid[0] * t.grid[1] * t.grid[2] *
                                    t.block[0] * t.block[1] * t.block[2] ==
                                1;
      k.milliseconds += ms;
      std::copy(std::begin(t.grid), std::end(t.grid), k.grid);
      std::copy(std::begin(t.block), std::end(t.block), k.block);
      spareEvents.push_back(t.start);
      spareEvents.push_back(t.end);
    }
    pending = std::move(waiting);
  }
  void copied(bool toDevice, bool fromDevice, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex);
    kiln::cuda::Profile::Copies &c =
        toDevice ? (fromDevice ? profile.onDevice : profile.toDevice)
                 : (fromDevice ? profile.toHost : profile.onHost);
    ++c.count;
    c.bytes += bytes;
  }
};

Profiler &profiler() {
  static Profiler &p = *new Profiler; // used by global destructors
  return p;
}

void countCopy(bool toDevice, bool fromDevice, size_t bytes) {
  if (profiler().on) {
    profiler().copied(toDevice, fromDevice, bytes);
  }
}

void *allocateForTensor(size_t bytes) {
  Driver &d = driver();
  d.cuCtxSetCurrent(d.context);
  MemoryPool &p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  CUresult error = 0;
  CUdeviceptr pointer = p.allocate(d, bytes, std::nullopt, error);
  if (!pointer) {
    throw kiln::Error("kiln: cannot allocate " + std::to_string(bytes) +
                      " bytes of GPU memory for a tensor: " +
                      describe(d, error));
  }
  return reinterpret_cast<void *>(pointer);
}

void releaseFromTensor(void *pointer) {
  MemoryPool &p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  auto device = reinterpret_cast<CUdeviceptr>(pointer);
  p.free.emplace(p.blockSize(device, "releasing"), device);
}

/// Whether `pointer` lies in a block of device memory from the pool.
bool onDevice(const void *pointer) {
  MemoryPool &p = pool();
  auto address = reinterpret_cast<CUdeviceptr>(pointer);
  std::lock_guard<std::mutex> lock(p.mutex);
  auto next = p.sizes.upper_bound(address);
  return next != p.sizes.begin() &&
         address < std::prev(next)->first + std::prev(next)->second;
}
} // namespace

namespace kiln::cuda {

void setProfiling(bool on) {
  Profiler &p = profiler();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (on && !p.on) {
    p.profile = Profile();
    p.index.clear();
  }
  p.on = on;
}

Profile profile() {
  Profiler &p = profiler();
  std::lock_guard<std::mutex> lock(p.mutex);
  Profile result = p.profile;
  std::sort(result.kernels.begin(), result.kernels.end(),
            [](const KernelProfile &a, const KernelProfile &b) {
              return a.milliseconds != b.milliseconds
                         ? a.milliseconds > b.milliseconds
                         : a.name < b.name;
            });
  return result;
}

} // namespace kiln::cuda

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
  std::lock_guard<std::mutex> functions(lazy->mutex);
  auto known = lazy->functions.find(std::string_view(name));
  if (known != lazy->functions.end()) {
    return known->second;
  }
  Handle function = nullptr;
  check(d, d.cuModuleGetFunction(&function, lazy->module, name),
        "cuModuleGetFunction");
  lazy->functions.emplace(name, function);
  Profiler &p = profiler();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.names.try_emplace(function, name);
  return function;
}

extern "C" void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                                 intptr_t gridZ, intptr_t blockX,
                                 intptr_t blockY, intptr_t blockZ, int32_t smem,
                                 void *stream, void **params, void **extra,
                                 size_t /*paramsCount*/) {
  // A grid with no blocks (a parallel loop over an empty tensor) has
  // nothing to run; the driver would refuse it as an invalid argument.
  if (gridX <= 0 || gridY <= 0 || gridZ <= 0) {
    return;
  }
  Driver &d = driverOrAbort("a GPU kernel launch");
  Profiler &p = profiler();
  Profiler::Timing timing{function,
                          nullptr,
                          nullptr,
                          stream,
                          {unsigned(gridX), unsigned(gridY), unsigned(gridZ)},
                          {unsigned(blockX), unsigned(blockY), unsigned(blockZ)}};
  if (p.on) {
    std::lock_guard<std::mutex> lock(p.mutex);
    timing.start = p.event(d);
    timing.end = p.event(d);
    check(d, d.cuEventRecord(timing.start, stream), "cuEventRecord");
  }
  check(d,
        d.cuLaunchKernel(function, unsigned(gridX), unsigned(gridY),
                         unsigned(gridZ), unsigned(blockX), unsigned(blockY),
                         unsigned(blockZ), unsigned(smem), stream, params,
                         extra),
        "cuLaunchKernel");
  if (timing.start) {
    check(d, d.cuEventRecord(timing.end, stream), "cuEventRecord");
    std::lock_guard<std::mutex> lock(p.mutex);
    p.pending.push_back(timing);
  }
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
  check(d, d.cuStreamSynchronize(stream), "cuStreamSynchronize");
  pool().settle(stream);
  profiler().settle(d, stream);
  check(d, d.cuStreamDestroy(stream), "cuStreamDestroy");
}

extern "C" void mgpuStreamSynchronize(void *stream) {
  Driver &d = driverOrAbort("a GPU stream");
  check(d, d.cuStreamSynchronize(stream), "cuStreamSynchronize");
  pool().settle(stream);
  profiler().settle(d, stream);
}

extern "C" void *mgpuMemAlloc(uint64_t bytes, void *stream,
                              bool /*isHostShared*/) {
  Driver &d = driverOrAbort("GPU memory");
  MemoryPool &p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  CUresult error = 0;
  CUdeviceptr pointer = p.allocate(d, bytes, stream, error);
  check(d, error, "cuMemAlloc");
  return reinterpret_cast<void *>(pointer);
}

extern "C" void mgpuMemFree(void *pointer, void *stream) {
  driverOrAbort("GPU memory");
  MemoryPool &p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  auto device = reinterpret_cast<CUdeviceptr>(pointer);
  p.pending[stream].emplace(p.blockSize(device, "freeing"), device);
}

extern "C" void mgpuMemcpy(void *dst, void *src, size_t bytes, void *stream) {
  Driver &d = driverOrAbort("a GPU copy");
  if (profiler().on) {
    countCopy(onDevice(dst), onDevice(src), bytes);
  }
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

const std::vector<std::pair<const char *, void *>> &
kiln::cuda::runtimeSymbols() {
  static const std::vector<std::pair<const char *, void *>> symbols = {
      {"mgpuModuleLoadJIT", reinterpret_cast<void *>(&mgpuModuleLoadJIT)},
      {"mgpuModuleLoad", reinterpret_cast<void *>(&mgpuModuleLoad)},
      {"mgpuModuleUnload", reinterpret_cast<void *>(&mgpuModuleUnload)},
      {"mgpuModuleGetFunction",
       reinterpret_cast<void *>(&mgpuModuleGetFunction)},
      {"mgpuLaunchKernel", reinterpret_cast<void *>(&mgpuLaunchKernel)},
      {"mgpuStreamCreate", reinterpret_cast<void *>(&mgpuStreamCreate)},
      {"mgpuStreamDestroy", reinterpret_cast<void *>(&mgpuStreamDestroy)},
      {"mgpuStreamSynchronize",
       reinterpret_cast<void *>(&mgpuStreamSynchronize)},
      {"mgpuMemAlloc", reinterpret_cast<void *>(&mgpuMemAlloc)},
      {"mgpuMemFree", reinterpret_cast<void *>(&mgpuMemFree)},
      {"mgpuMemcpy", reinterpret_cast<void *>(&mgpuMemcpy)},
      {"mgpuMemset32", reinterpret_cast<void *>(&mgpuMemset32)},
  };
  return symbols;
}
