//===- CudaTest.cpp - Kiln's GPU runtime without a GPU --------------------===//
//
// Run twice by CTest: against a missing driver ($KILN_CUDA_DRIVER names a
// file that does not exist: the GPU is refused with the reason) and against
// FakeDriver.cpp (a driver on the host: the mgpu* functions that compiled GPU
// code calls allocate, copy, load modules and launch kernels through it).
//
//===----------------------------------------------------------------------===//

#include "runtime/Cuda.h"
#include "runtime/Error.h"
#include "runtime/Function.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <vector>

// The runtime's mgpu* functions, as compiled GPU code declares them.
extern "C" {
void *mgpuModuleLoadJIT(void *data, int optLevel);
void mgpuModuleUnload(void *module);
void *mgpuModuleGetFunction(void *module, const char *name);
void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t smem, void *stream,
                      void **params, void **extra, size_t paramsCount);
void *mgpuStreamCreate();
void mgpuStreamSynchronize(void *stream);
void mgpuStreamDestroy(void *stream);
void *mgpuMemAlloc(uint64_t bytes, void *stream, bool hostShared);
void mgpuMemFree(void *pointer, void *stream);
void mgpuMemcpy(void *dst, void *src, size_t bytes, void *stream);
void mgpuMemset32(void *dst, unsigned value, size_t count, void *stream);
}

TEST(NoDriver, TheGpuIsRefusedWithTheReason) {
  std::string why;
  EXPECT_FALSE(kiln::cuda::available(&why));
  EXPECT_NE(why.find("no NVIDIA driver"), std::string::npos) << why;
  try {
    kiln::cuda::requireDevice();
    FAIL() << "a GPU was accepted without a driver";
  } catch (const kiln::Error &e) {
    EXPECT_NE(std::string(e.what()).find("the GPU target needs an NVIDIA GPU"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(kiln::cuda::deviceName(), kiln::Error);
  EXPECT_THROW(kiln::cuda::architecture(), kiln::Error);
  EXPECT_THROW(kiln::cuda::toDevice(kiln::Tensor::zeros({2}, kiln::DType::f32)),
               kiln::Error);
  // A program with GPU code starts (its constructors register modules) and
  // dies with the reason only when it uses the GPU.
  static char image[] = "kernels";
  void *module = mgpuModuleLoadJIT(image, 3);
  EXPECT_DEATH(mgpuModuleGetFunction(module, "scale"),
               "kiln: a GPU kernel needs a GPU: no NVIDIA driver");
  mgpuModuleUnload(module);
}

TEST(FakeDriver, MemoryCopiesAndLaunchesGoThroughTheDriver) {
  ASSERT_TRUE(kiln::cuda::available());
  EXPECT_EQ(kiln::cuda::deviceName(), "Kiln fake GPU");
  EXPECT_EQ(kiln::cuda::architecture(), "sm_90");

  std::vector<float> host = {1, 2, 3, 4, 5, 6, 7};
  long n = long(host.size());
  void *stream = mgpuStreamCreate();
  void *device = mgpuMemAlloc(n * sizeof(float), stream, false);
  kiln::cuda::copyToDevice(device, host.data(), n * sizeof(float));
  void *copy = mgpuMemAlloc(n * sizeof(float), stream, false);
  mgpuMemcpy(copy, device, n * sizeof(float), stream);

  static char image[] = "kernels";
  void *module = mgpuModuleLoadJIT(image, 3);
  void *scale = mgpuModuleGetFunction(module, "scale");
  float factor = 3.0f;
  void *params[] = {&copy, &n, &factor};
  // 2 blocks of 4 threads cover the 7 elements.
  mgpuLaunchKernel(scale, 2, 1, 1, 4, 1, 1, 0, stream, params, nullptr, 3);
  mgpuStreamSynchronize(stream);

  std::vector<float> back(host.size());
  kiln::cuda::copyToHost(back.data(), copy, n * sizeof(float));
  for (size_t i = 0; i < host.size(); ++i) {
    EXPECT_EQ(back[i], 3.0f * host[i]) << i;
  }
  // A grid without blocks in some dimension (a parallel loop over an empty
  // tensor) runs nothing; a GPU would refuse the launch (as the fake does).
  for (auto [x, y, z] :
       {std::array<intptr_t, 3>{0, 1, 1}, {2, 0, 1}, {2, 1, 0}}) {
    mgpuLaunchKernel(scale, x, y, z, 4, 1, 1, 0, stream, params, nullptr, 3);
  }
  mgpuStreamSynchronize(stream);
  kiln::cuda::copyToHost(back.data(), copy, n * sizeof(float));
  for (size_t i = 0; i < host.size(); ++i) {
    EXPECT_EQ(back[i], 3.0f * host[i]) << i;
  }
  EXPECT_DEATH(mgpuLaunchKernel(scale, 2, 1, 1, 2048, 1, 1, 0, stream, params,
                                nullptr, 3),
               "kiln: cuLaunchKernel failed");
  mgpuMemset32(copy, 0, size_t(n), stream);
  kiln::cuda::copyToHost(back.data(), copy, n * sizeof(float));
  EXPECT_EQ(back, std::vector<float>(host.size(), 0.0f));

  mgpuMemFree(copy, stream);
  mgpuMemFree(device, stream);
  mgpuStreamDestroy(stream);
  EXPECT_DEATH(mgpuModuleGetFunction(module, "missing"),
               "kiln: cuModuleGetFunction failed: named symbol not found");
  mgpuModuleUnload(module);
}

TEST(FakeDriver, FreedMemoryIsReusedOnlyOnceItsStreamIsDone) {
  ASSERT_TRUE(kiln::cuda::available());
  void *a = mgpuStreamCreate(), *b = mgpuStreamCreate();
  void *p = mgpuMemAlloc(1000, a, false);
  mgpuMemFree(p, a);
  // The same stream runs in order: the block is reused at once.
  void *q = mgpuMemAlloc(1000, a, false);
  EXPECT_EQ(q, p);
  mgpuMemFree(q, a);
  // Another stream must wait until stream a has finished with it.
  void *r = mgpuMemAlloc(1000, b, false);
  EXPECT_NE(r, p);
  mgpuStreamSynchronize(a);
  void *s = mgpuMemAlloc(1000, b, false);
  EXPECT_EQ(s, p);
  // Sizes are rounded: 1000 and 600 bytes share a size class, 4096 not.
  mgpuMemFree(s, b);
  mgpuMemFree(r, b);
  mgpuStreamDestroy(b);
  void *t = mgpuMemAlloc(600, a, false);
  EXPECT_TRUE(t == p || t == r);
  void *u = mgpuMemAlloc(4096, a, false);
  EXPECT_NE(u, p);
  EXPECT_NE(u, r);
  mgpuMemFree(t, a);
  mgpuMemFree(u, a);
  int local = 0;
  EXPECT_DEATH(mgpuMemFree(&local, a),
               "kiln: freeing GPU memory that was not allocated");
  mgpuStreamDestroy(a);
}

TEST(FakeDriver, ProfilingTimesEveryLaunchAndCountsCopies) {
  ASSERT_TRUE(kiln::cuda::available());
  std::vector<float> host(33, 1.0f);
  long n = long(host.size());
  size_t bytes = host.size() * sizeof(float);
  void *stream = mgpuStreamCreate();
  void *device = mgpuMemAlloc(bytes, stream, false);
  static char image[] = "kernels";
  void *module = mgpuModuleLoadJIT(image, 3);
  // The handle is made before profiling starts: its name is still known.
  void *scale = mgpuModuleGetFunction(module, "scale");
  float factor = 2.0f;
  void *params[] = {&device, &n, &factor};

  // Not profiled: nothing is counted.
  kiln::cuda::copyToDevice(device, host.data(), bytes);
  mgpuLaunchKernel(scale, 3, 1, 1, 16, 1, 1, 0, stream, params, nullptr, 3);
  mgpuStreamSynchronize(stream);
  kiln::cuda::setProfiling(true);
  kiln::cuda::Profile empty = kiln::cuda::profile();
  EXPECT_TRUE(empty.kernels.empty());
  EXPECT_EQ(empty.toDevice.count, 0);

  mgpuLaunchKernel(scale, 3, 1, 1, 16, 1, 1, 0, stream, params, nullptr, 3);
  mgpuLaunchKernel(scale, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr, 3);
  mgpuLaunchKernel(scale, 5, 1, 1, 8, 1, 1, 0, stream, params, nullptr, 3);
  // Launches are counted once their stream is synchronized.
  EXPECT_TRUE(kiln::cuda::profile().kernels.empty());
  mgpuStreamSynchronize(stream);
  std::vector<float> scaled(host.size()), back(host.size());
  mgpuMemcpy(scaled.data(), device, bytes, stream);   // device to host
  mgpuMemcpy(device, host.data(), bytes - 4, stream); // host to device
  void *second = static_cast<char *>(device) + 8;
  mgpuMemcpy(second, device, 8, stream); // on the device
  kiln::cuda::copyToHost(back.data(), device, bytes);
  kiln::cuda::setProfiling(false);
  mgpuLaunchKernel(scale, 3, 1, 1, 16, 1, 1, 0, stream, params, nullptr, 3);
  mgpuStreamSynchronize(stream);

  kiln::cuda::Profile p = kiln::cuda::profile();
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].name, "scale");
  EXPECT_EQ(p.kernels[0].launches, 3);
  EXPECT_EQ(p.kernels[0].singleThreadLaunches, 1);   // grid and block 1
  EXPECT_DOUBLE_EQ(p.kernels[0].milliseconds, 0.75); // the fake's 0.25 each
  EXPECT_EQ(p.kernels[0].grid[0], 5u);               // the last launch's
  EXPECT_EQ(p.kernels[0].block[0], 8u);
  EXPECT_EQ(p.toHost.count, 2);
  EXPECT_EQ(p.toHost.bytes, double(2 * bytes));
  EXPECT_EQ(p.toDevice.count, 1);
  EXPECT_EQ(p.toDevice.bytes, double(bytes - 4));
  EXPECT_EQ(p.onDevice.count, 1);
  EXPECT_EQ(p.onDevice.bytes, 8.0);
  EXPECT_EQ(p.onHost.count, 0);
  // 1, doubled by one launch before profiling and two during it (element
  // 0 by the one-thread launch too).
  EXPECT_EQ(scaled[0], 16.0f);
  EXPECT_EQ(scaled[1], 8.0f);
  EXPECT_EQ(scaled[32], 8.0f);
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[32], 8.0f);

  mgpuMemFree(device, stream);
  mgpuStreamDestroy(stream);
  mgpuModuleUnload(module);
}

// Compiled code asks for a kernel's function before every launch: the
// driver is asked once per function and module.
TEST(FakeDriver, FunctionsAreLookedUpOncePerModule) {
  ASSERT_TRUE(kiln::cuda::available());
  void *driver =
      dlopen(std::getenv("KILN_CUDA_DRIVER"), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(driver, nullptr);
  auto *lookups =
      static_cast<long *>(dlsym(driver, "kiln_fake_cuda_function_lookups"));
  ASSERT_NE(lookups, nullptr);
  static char image[] = "kernels";
  void *first = mgpuModuleLoadJIT(image, 3);
  void *second = mgpuModuleLoadJIT(image, 3);
  long before = *lookups;
  void *scale = mgpuModuleGetFunction(first, "scale");
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(mgpuModuleGetFunction(first, "scale"), scale);
  }
  EXPECT_EQ(*lookups, before + 1);
  EXPECT_EQ(mgpuModuleGetFunction(second, "scale"), scale);
  EXPECT_EQ(*lookups, before + 2); // a module of its own
  mgpuModuleUnload(first);
  mgpuModuleUnload(second);
  dlclose(driver);
}

/// The message of the kiln::Error `f` throws ("" when it throws none).
template <typename F>
static std::string errorOf(F &&f) {
  try {
    f();
  } catch (const kiln::Error &e) {
    return e.what();
  }
  return "";
}

// GPU tensors: copies each way keep every byte, the host never touches
// their elements (the fake's device addresses would crash it), and every
// misuse is an error that says what to do.
TEST(FakeDriver, GpuTensorsCopyBothWaysAndRefuseHostAccess) {
  using kiln::DType;
  using kiln::Tensor;
  Tensor host = Tensor::fromVector<float>({2, 3}, {1, -2, 3.5f, 4, 5, 6});
  Tensor device = kiln::cuda::toDevice(host);
  EXPECT_TRUE(device.onGpu());
  EXPECT_FALSE(host.onGpu());
  EXPECT_EQ(device.shape(), host.shape());
  EXPECT_NE(device.raw(), host.raw());
  EXPECT_EQ(kiln::cuda::toHost(device).toVector<float>(),
            host.toVector<float>());
  Tensor other = Tensor::fromVector<float>({2, 3}, {0, 0, 0, 0, 0, 7});
  kiln::cuda::copy(other, device); // into the same device storage
  void *storage = device.raw();
  EXPECT_EQ(kiln::cuda::toHost(device).toVector<float>(),
            other.toVector<float>());
  EXPECT_EQ(device.raw(), storage);
  Tensor ids = Tensor::fromVector<int64_t>({3}, {1, 2, 3});
  EXPECT_EQ(kiln::cuda::toHost(kiln::cuda::toDevice(ids)).toVector<int64_t>(),
            ids.toVector<int64_t>());
  Tensor empty = Tensor::empty({0, 4}, DType::f32);
  EXPECT_EQ(kiln::cuda::toHost(kiln::cuda::toDevice(empty)).numel(), 0);

  std::string message = errorOf([&] { device.data<float>(); });
  EXPECT_NE(message.find("in GPU memory cannot be read or written on the "
                         "host; copy it with kiln::cuda::toHost"),
            std::string::npos)
      << message;
  EXPECT_NE(errorOf([&] { device.clone(); }).find("cannot be cloned"),
            std::string::npos);
  EXPECT_NE(errorOf([&] { kiln::cuda::toDevice(device); }).find("host tensor"),
            std::string::npos);
  EXPECT_NE(errorOf([&] { kiln::cuda::toHost(host); }).find("GPU memory"),
            std::string::npos);
  message = errorOf([&] { kiln::cuda::copy(host, host); });
  EXPECT_NE(message.find("between a host and a GPU tensor"), std::string::npos)
      << message;
  message = errorOf([&] {
    kiln::cuda::copy(Tensor::zeros({3, 2}, DType::f32), device);
  });
  EXPECT_NE(message.find("not from host f32 [3, 2] to GPU f32 [2, 3]"),
            std::string::npos)
      << message;

  // A store mirrored on the GPU: added, copied into, replaced on a change of
  // shape.
  kiln::ParameterStore params, mirror;
  params.add("a", host.clone());
  params.add("b", Tensor::full({4}, 2.0f));
  kiln::cuda::mirror(params, mirror);
  ASSERT_EQ(mirror.names(), params.names());
  EXPECT_TRUE(mirror.get("a").onGpu());
  void *a = mirror.get("a").raw();
  params.get("a").data<float>()[0] = 42;
  params.get("b") = Tensor::full({5}, 3.0f);
  kiln::cuda::mirror(params, mirror);
  EXPECT_EQ(mirror.get("a").raw(), a);
  EXPECT_EQ(kiln::cuda::toHost(mirror.get("a")).toVector<float>()[0], 42);
  EXPECT_EQ(kiln::cuda::toHost(mirror.get("b")).toVector<float>(),
            std::vector<float>(5, 3.0f));
}

// A compiled function's arguments in the memory it reads them from: a GPU
// tensor where host memory is read is refused before the code runs.
TEST(FakeDriver, GpuTensorsWhereHostMemoryIsReadAreRefused) {
  kiln::FunctionSpec spec;
  spec.name = "f";
  kiln::ArgSpec x;
  x.name = "x";
  x.shape = {2, 3};
  spec.args.push_back(x);
  kiln::ResultSpec y;
  y.name = "y";
  y.shape = {2, 3};
  spec.results.push_back(y);
  static bool called = false;
  kiln::CompiledFunction f(spec, [](void **) { called = true; });
  kiln::Tensor device =
      kiln::cuda::toDevice(kiln::Tensor::zeros({2, 3}, kiln::DType::f32));
  std::string message = errorOf([&] { f.call({device}); });
  EXPECT_NE(message.find("argument #0 'x' of 'f' is a tensor in GPU memory, "
                         "but the function reads it from host memory"),
            std::string::npos)
      << message;
  EXPECT_FALSE(called);
}
