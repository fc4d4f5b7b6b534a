//===- FakeDriver.cpp - A CUDA driver on the host, for the runtime's tests ===//
//
// Exports the driver entry points Kiln's GPU runtime looks up, backed by host
// memory. A "module" is the text "kernels"; its functions are the host
// functions below, run once per thread of the launch grid, so that the
// runtime's launches (grid, block, arguments) can be checked without a GPU.
// A module may also be kernels compiled for the host
// (kiln-gpu-modules-to-host), which run as a GPU would run their PTX
// (HostKernels.h): this driver exports kiln_cuda_runs_host_kernels, so the
// JIT compiles such kernels for it, unless KILN_FAKE_CUDA_PTX=1.
//
// Device pointers are host allocations moved by kDeviceOffset into
// non-canonical addresses, as unusable from the host as a GPU's: host code
// that reads, writes or free()s device memory crashes here as it would on a
// GPU. With KILN_FAKE_CUDA_PTX=1 a PTX image (compiled kernels) is accepted
// too and its kernels do nothing, so that the host side of compiled GPU code
// (allocations, copies, launches, frees) runs end to end; results are
// garbage, but finite: memory starts zeroed and holds only what was copied
// in.
//
//===----------------------------------------------------------------------===//

#include "HostKernels.h"

#ifndef KILN_FAKE_CUDA_EMULATION
#define KILN_FAKE_CUDA_EMULATION 1
#endif

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <string>

extern "C" {

using CUresult = int;
constexpr CUresult kNotFound = 500; // CUDA_ERROR_NOT_FOUND

using kiln::fake::kDeviceSpace;
using kiln::fake::onDevice;
using kiln::fake::onHost;

struct Launch {
  unsigned grid[3], block[3];
};
using HostKernel = void (*)(const Launch &, unsigned blockIndex,
                            unsigned threadIndex, void **params);
/// A function handle: a host function run per thread, or a compiled
/// kernel's entry run by the emulator.
struct Function {
  HostKernel perThread = nullptr;
  kiln::fake::HostKernelEntry entry = nullptr;
  std::string name;
  kiln::fake::PoisonShared poison = nullptr;
};

/// scale(float *data, long n, float factor): data[i] *= factor for the
/// global thread index i < n.
static void scale(const Launch &l, unsigned b, unsigned t, void **params) {
  auto *data = static_cast<float *>(
      onHost(*static_cast<unsigned long long *>(params[0])));
  long n = *static_cast<long *>(params[1]);
  float factor = *static_cast<float *>(params[2]);
  long i = long(b) * l.block[0] + t;
  if (i < n) {
    data[i] *= factor;
  }
}

CUresult cuInit(unsigned) { return 0; }
CUresult cuDeviceGetCount(int *count) {
  *count = 1;
  return 0;
}
CUresult cuDeviceGet(int *device, int) {
  *device = 0;
  return 0;
}
CUresult cuDeviceGetName(char *name, int length, int) {
  std::strncpy(name, "Kiln fake GPU", size_t(length));
  return 0;
}
CUresult cuDeviceGetAttribute(int *value, int attribute, int) {
  // Compute capability 9.0, like an H100.
  *value = attribute == 75 ? 9 : 0;
  return 0;
}
CUresult cuDevicePrimaryCtxRetain(void **context, int) {
  static int primary;
  *context = &primary;
  return 0;
}
CUresult cuCtxSetCurrent(void *) { return 0; }
static char ptxModule; // the module of every accepted PTX image

/// A compiled kernel under KILN_FAKE_CUDA_PTX: does nothing.
static void noKernel(const Launch &, unsigned, unsigned, void **) {}
static const Function noFunction{&noKernel, nullptr, "(PTX)"};
static const Function scaleFunction{&scale, nullptr, "scale"};

static bool acceptsPtx() {
  const char *ptx = std::getenv("KILN_FAKE_CUDA_PTX");
  return ptx && std::strcmp(ptx, "1") == 0;
}

/// Whether the JIT should compile kernels for the host (Kiln's runtime
/// asks: kiln::cuda::runsHostKernels).
/// Built without the emulated GPU (KILN_FAKE_CUDA_EMULATION 0: the GPU
/// bundle's copy, for machines without LLVM), it takes PTX only.
int kiln_cuda_runs_host_kernels() {
  return KILN_FAKE_CUDA_EMULATION && !acceptsPtx() ? 1 : 0;
}

/// Loaded host-kernel modules, and their functions' handles.
static std::mutex modulesMutex;
static std::map<void *, std::map<std::string, Function>> hostModules;
/// Why the last host-kernel module failed to load or run.
static std::string hostKernelError;
constexpr CUresult kInvalidImage = 200; // CUDA_ERROR_INVALID_IMAGE
constexpr CUresult kLaunchFailed = 719; // CUDA_ERROR_LAUNCH_FAILED

CUresult cuModuleLoadData(void **module, const void *image) {
  const char *text = static_cast<const char *>(image);
  if (kiln::fake::isHostKernelImage(image)) {
#if !KILN_FAKE_CUDA_EMULATION
    std::fprintf(stderr, "fake CUDA driver: kernels compiled for the host, "
                         "but this copy was built without the emulated GPU\n");
    return kInvalidImage;
#else
    std::lock_guard<std::mutex> lock(modulesMutex);
    void *loaded = kiln::fake::loadHostKernels(image, hostKernelError);
    if (!loaded) {
      std::fprintf(stderr, "fake CUDA driver: %s\n", hostKernelError.c_str());
      return kInvalidImage;
    }
    hostModules[loaded];
    *module = loaded;
    return 0;
#endif
  }
  if (acceptsPtx() && std::strstr(text, ".entry")) {
    *module = &ptxModule;
    return 0;
  }
  if (std::strcmp(text, "kernels") != 0) {
    return kInvalidImage;
  }
  *module = const_cast<void *>(image);
  return 0;
}
CUresult cuModuleUnload(void *module) {
  std::lock_guard<std::mutex> lock(modulesMutex);
#if KILN_FAKE_CUDA_EMULATION
  if (hostModules.erase(module)) {
    kiln::fake::unloadHostKernels(module);
  }
#endif
  return 0;
}
/// How many times the runtime looked a function up (tests read it with
/// dlsym).
long kiln_fake_cuda_function_lookups = 0;
CUresult cuModuleGetFunction(void **function, void *module, const char *name) {
  ++kiln_fake_cuda_function_lookups;
  if (module == &ptxModule) {
    *function = const_cast<Function *>(&noFunction);
    return 0;
  }
#if KILN_FAKE_CUDA_EMULATION
  {
    std::lock_guard<std::mutex> lock(modulesMutex);
    auto host = hostModules.find(module);
    if (host != hostModules.end()) {
      Function &f = host->second[name];
      if (!f.entry) {
        f.entry = kiln::fake::hostKernel(module, name);
        f.name = name;
        f.poison = kiln::fake::poisonShared(module);
      }
      if (!f.entry) {
        return kNotFound;
      }
      *function = &f;
      return 0;
    }
  }
#endif
  if (std::strcmp(name, "scale") != 0) {
    return kNotFound;
  }
  *function = const_cast<Function *>(&scaleFunction);
  return 0;
}
CUresult cuLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz,
                        unsigned bx, unsigned by, unsigned bz, unsigned, void *,
                        void **params, void **) {
  // What a GPU refuses with CUDA_ERROR_INVALID_VALUE: an empty grid or
  // block, a grid past 2^31 - 1 x 65535 x 65535, a block of more than 1024
  // threads or past 1024 x 1024 x 64.
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 ||
      gx > 0x7fffffffu || gy > 65535 || gz > 65535 || bx > 1024 || by > 1024 ||
      bz > 64 || uint64_t(bx) * by * bz > 1024) {
    std::fprintf(stderr, "fake cuda: launch of grid %ux%ux%u, block %ux%ux%u\n",
                 gx, gy, gz, bx, by, bz);
    return 1;
  }
  Launch l{{gx, gy, gz}, {bx, by, bz}};
  const auto *f = static_cast<const Function *>(function);
#if KILN_FAKE_CUDA_EMULATION
  if (f->entry) {
    // One launch at a time: a module's shared memory is its globals.
    std::lock_guard<std::mutex> lock(modulesMutex);
    if (!kiln::fake::runHostKernel(f->entry, f->poison, l.grid, l.block, params,
                                   hostKernelError)) {
      std::fprintf(stderr,
                   "fake CUDA driver: kernel %s, grid %ux%ux%u, block "
                   "%ux%ux%u: %s\n",
                   f->name.c_str(), gx, gy, gz, bx, by, bz,
                   hostKernelError.c_str());
      return kLaunchFailed;
    }
    return 0;
  }
#endif
  for (unsigned b = 0; b < gx; ++b) {
    for (unsigned t = 0; t < bx; ++t) {
      f->perThread(l, b, t, params);
    }
  }
  return 0;
}
CUresult cuStreamCreate(void **stream, unsigned) {
  *stream = new int; // a distinct handle per stream
  return 0;
}
CUresult cuStreamDestroy_v2(void *stream) {
  delete static_cast<int *>(stream);
  return 0;
}
CUresult cuStreamSynchronize(void *) { return 0; }
/// Live device allocations (start -> bytes): every access is checked
/// against them, as a GPU would fault outside its own.
static std::mutex allocationsMutex;
static std::map<unsigned long long, size_t> allocations;

/// The host address of device bytes [pointer, pointer + bytes), which must
/// lie in one live allocation; aborts with `what` otherwise.
static void *deviceBytes(unsigned long long pointer, size_t bytes,
                         const char *what) {
  std::lock_guard<std::mutex> lock(allocationsMutex);
  auto next = allocations.upper_bound(pointer);
  if (next == allocations.begin() ||
      pointer + bytes > std::prev(next)->first + std::prev(next)->second) {
    std::fprintf(stderr,
                 "fake CUDA driver: %s of %zu bytes at device address %#llx "
                 "outside every allocation\n",
                 what, bytes, pointer);
    std::abort();
  }
  return onHost(pointer);
}

/// Zeroed: with KILN_FAKE_CUDA_PTX the kernels write nothing, so what the
/// host reads back (a training step's loss, which the trainer refuses when
/// it is not finite) is what the memory held before; malloc's leftovers made
/// that a NaN now and then.
CUresult cuMemAlloc_v2(unsigned long long *pointer, size_t bytes) {
  *pointer = onDevice(std::calloc(bytes ? bytes : 1, 1));
  std::lock_guard<std::mutex> lock(allocationsMutex);
  allocations[*pointer] = bytes;
  return 0;
}
CUresult cuMemFree_v2(unsigned long long pointer) {
  {
    std::lock_guard<std::mutex> lock(allocationsMutex);
    if (allocations.erase(pointer) != 1) {
      std::fprintf(stderr, "fake CUDA driver: freeing %#llx, not allocated\n",
                   pointer);
      std::abort();
    }
  }
  std::free(onHost(pointer));
  return 0;
}
/// cuMemcpyAsync's pointers may be either (unified addressing): device ones
/// are the non-canonical ones, at kDeviceSpace and above.
static void *either(unsigned long long pointer, size_t bytes,
                    const char *what) {
  return pointer >= kDeviceSpace ? deviceBytes(pointer, bytes, what)
                                 : reinterpret_cast<void *>(pointer);
}
CUresult cuMemcpyAsync(unsigned long long dst, unsigned long long src,
                       size_t bytes, void *) {
  std::memcpy(either(dst, bytes, "a copy's destination"),
              either(src, bytes, "a copy's source"), bytes);
  return 0;
}
CUresult cuMemcpyHtoD_v2(unsigned long long dst, const void *src,
                         size_t bytes) {
  std::memcpy(deviceBytes(dst, bytes, "a copy to the device"), src, bytes);
  return 0;
}
CUresult cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t bytes) {
  std::memcpy(dst, deviceBytes(src, bytes, "a copy from the device"), bytes);
  return 0;
}
CUresult cuMemsetD32Async(unsigned long long dst, unsigned value, size_t count,
                          void *) {
  auto *p = static_cast<unsigned *>(
      deviceBytes(dst, count * sizeof(unsigned), "a memset"));
  for (size_t i = 0; i < count; ++i) {
    p[i] = value;
  }
  return 0;
}
/// Events: every launch between two of them takes kFakeEventMilliseconds.
constexpr float kFakeEventMilliseconds = 0.25f;
CUresult cuEventCreate(void **event, unsigned) {
  *event = new int(0);
  return 0;
}
CUresult cuEventRecord(void *event, void *) {
  *static_cast<int *>(event) = 1; // recorded
  return 0;
}
CUresult cuEventElapsedTime(float *milliseconds, void *start, void *end) {
  if (*static_cast<int *>(start) != 1 || *static_cast<int *>(end) != 1) {
    return 600; // CUDA_ERROR_NOT_READY
  }
  *milliseconds = kFakeEventMilliseconds;
  return 0;
}
CUresult cuEventDestroy_v2(void *event) {
  delete static_cast<int *>(event);
  return 0;
}
CUresult cuGetErrorString(CUresult result, const char **text) {
  *text = result == kNotFound       ? "named symbol not found (fake)"
          : result == kLaunchFailed ? "unspecified launch failure (fake)"
                                    : "invalid image (fake)";
  return 0;
}
}
