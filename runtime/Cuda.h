//===- Cuda.h - Kiln's GPU runtime over the CUDA driver API -----*- C++ -*-===//
//
// Code from kiln-to-gpu calls the mgpu* functions (module load, kernel
// launch, streams, device memory, copies); this runtime implements them over
// the CUDA driver API, which it loads with dlopen when first needed. Kiln
// therefore builds and runs without a GPU or a CUDA driver; asking for the
// GPU where there is none is a clear error.
//
// The driver is libcuda.so.1, or the library named by $KILN_CUDA_DRIVER.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CUDA_H
#define KILN_RUNTIME_CUDA_H

#include "runtime/ParameterStore.h"
#include "runtime/Tensor.h"

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace kiln::cuda {

/// Whether a CUDA device can be used here. When not, `why` (if given) says
/// why: no driver library, no device, or the driver's error.
bool available(std::string *why = nullptr);

/// Throws kiln::Error with the reason when no CUDA device can be used.
void requireDevice();

/// Whether the loaded driver emulates a GPU on the host and runs kernels
/// compiled for the host CPU (kiln-gpu-modules-to-host) rather than PTX: a
/// driver that exports `int kiln_cuda_runs_host_kernels(void)` returning
/// non-zero (test/Unit/Cuda's fake driver). False without a driver.
bool runsHostKernels();

/// The name of device 0 ("NVIDIA H100 80GB HBM3"). Throws like
/// requireDevice().
std::string deviceName();

/// Device 0's architecture as nvvm names it ("sm_90" for an H100). Throws
/// like requireDevice().
std::string architecture();

/// The mgpu* functions compiled GPU code calls, by name, for a JIT to
/// resolve them.
const std::vector<std::pair<const char *, void *>> &runtimeSymbols();

/// Copies between host and device memory (synchronously). Throw
/// kiln::Error when the driver fails.
void copyToDevice(void *device, const void *host, size_t bytes);
void copyToHost(void *host, const void *device, size_t bytes);

/// A copy of host tensor `host` in GPU memory (Tensor::onGpu()), from the
/// cache compiled GPU code allocates from. Throws kiln::Error without a
/// GPU, when `host` is a GPU tensor or undefined, or when the GPU is out of
/// memory.
Tensor toDevice(const Tensor &host);
/// Takes a block of GPU memory that compiled GPU code allocated and handed
/// over (a result in device memory: ResultSpec::onDevice) as a GPU tensor
/// whose elements start at `data` within it; the block goes back to the
/// cache when the last tensor sharing it is gone.
Tensor adopt(void *block, void *data, std::vector<int64_t> shape,
             DType dtype);
/// A host copy of GPU tensor `device`. Throws kiln::Error when it is not
/// one.
Tensor toHost(const Tensor &device);
/// Copies the elements of `from` into `to`, one on the host and the other
/// on the GPU, of the same shape and dtype (the storage of `to` is kept).
/// Throws kiln::Error otherwise.
void copy(const Tensor &from, const Tensor &to);

/// Makes `device` a GPU copy of `host`: each tensor of `host` is copied into
/// `device`'s tensor of that name, which is added (or replaced, when its
/// shape or dtype differs) as needed. Throws like toDevice().
void mirror(const ParameterStore &host, ParameterStore &device);

/// One kernel's share of a profile: its launches, their total time on the
/// GPU, and the grid and block of its last launch.
struct KernelProfile {
  std::string name;
  long launches = 0;
  /// Launches of one thread (grid and block 1 x 1 x 1): serial code.
  long singleThreadLaunches = 0;
  double milliseconds = 0;
  unsigned grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
};

/// What the GPU did since profiling was turned on.
struct Profile {
  struct Copies {
    long count = 0;
    double bytes = 0;
  };
  /// By time on the GPU, most first. Launches whose stream has not been
  /// synchronized yet are not counted.
  std::vector<KernelProfile> kernels;
  Copies toDevice, toHost, onDevice, onHost;
};

/// Turns profiling on (starting a fresh profile) or off. While it is on,
/// every kernel launch is timed with a pair of CUDA events (a few
/// microseconds each: profile apart from timed runs) and every copy between
/// host and device memory is counted.
void setProfiling(bool on);
/// The profile so far.
Profile profile();

} // namespace kiln::cuda

#endif // KILN_RUNTIME_CUDA_H
