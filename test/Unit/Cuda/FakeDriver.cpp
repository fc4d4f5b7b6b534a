//===- FakeDriver.cpp - A CUDA driver on the host, for the runtime's tests ===//
//
// Exports the driver entry points Kiln's GPU runtime looks up, backed by host
// memory. A "module" is the text "kernels"; its functions are the host
// functions below, run once per thread of the launch grid, so that the
// runtime's launches (grid, block, arguments) can be checked without a GPU.
//
//===----------------------------------------------------------------------===//

#include <cstdlib>
#include <cstring>

extern "C" {

using CUresult = int;
constexpr CUresult kNotFound = 500; // CUDA_ERROR_NOT_FOUND

struct Launch {
  unsigned grid[3], block[3];
};
using HostKernel = void (*)(const Launch &, unsigned blockIndex,
                            unsigned threadIndex, void **params);

/// scale(float *data, long n, float factor): data[i] *= factor for the
/// global thread index i < n.
static void scale(const Launch &l, unsigned b, unsigned t, void **params) {
  float *data = *static_cast<float **>(params[0]);
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
CUresult cuModuleLoadData(void **module, const void *image) {
  if (std::strcmp(static_cast<const char *>(image), "kernels") != 0) {
    return 200; // CUDA_ERROR_INVALID_IMAGE
  }
  *module = const_cast<void *>(image);
  return 0;
}
CUresult cuModuleUnload(void *) { return 0; }
CUresult cuModuleGetFunction(void **function, void *, const char *name) {
  if (std::strcmp(name, "scale") != 0) {
    return kNotFound;
  }
  *function = reinterpret_cast<void *>(&scale);
  return 0;
}
CUresult cuLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz,
                        unsigned bx, unsigned by, unsigned bz, unsigned, void *,
                        void **params, void **) {
  Launch l{{gx, gy, gz}, {bx, by, bz}};
  auto kernel = reinterpret_cast<HostKernel>(function);
  for (unsigned b = 0; b < gx; ++b) {
    for (unsigned t = 0; t < bx; ++t) {
      kernel(l, b, t, params);
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
CUresult cuMemAlloc_v2(unsigned long long *pointer, size_t bytes) {
  *pointer = reinterpret_cast<unsigned long long>(std::malloc(bytes));
  return 0;
}
CUresult cuMemFree_v2(unsigned long long pointer) {
  std::free(reinterpret_cast<void *>(pointer));
  return 0;
}
CUresult cuMemcpyAsync(unsigned long long dst, unsigned long long src,
                       size_t bytes, void *) {
  std::memcpy(reinterpret_cast<void *>(dst), reinterpret_cast<void *>(src),
              bytes);
  return 0;
}
CUresult cuMemcpyHtoD_v2(unsigned long long dst, const void *src,
                         size_t bytes) {
  std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
  return 0;
}
CUresult cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t bytes) {
  std::memcpy(dst, reinterpret_cast<void *>(src), bytes);
  return 0;
}
CUresult cuMemsetD32Async(unsigned long long dst, unsigned value, size_t count,
                          void *) {
  auto *p = reinterpret_cast<unsigned *>(dst);
  for (size_t i = 0; i < count; ++i) {
    p[i] = value;
  }
  return 0;
}
CUresult cuGetErrorString(CUresult result, const char **text) {
  *text = result == kNotFound ? "named symbol not found (fake)"
                              : "invalid image (fake)";
  return 0;
}
}
