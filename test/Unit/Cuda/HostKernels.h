//===- HostKernels.h - The fake driver's emulated GPU -----------*- C++ -*-===//
//
// Kernels compiled for the host CPU (kiln-gpu-modules-to-host), loaded and
// run by the fake CUDA driver: each block's threads run as fibers on the
// launching thread, switching where a thread waits for others (a barrier, a
// warp's shuffle or tensor-core product).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_CUDA_HOSTKERNELS_H
#define KILN_TEST_UNIT_CUDA_HOSTKERNELS_H

#include "compiler/Codegen/GPU/HostKernelImage.h"

#include <cstdint>
#include <cstring>
#include <string>

namespace kiln::fake {

/// 2^46 past a user-space address (below 2^47) is at kDeviceSpace or
/// above: non-canonical on x86-64, as unusable from the host as a GPU's.
constexpr unsigned long long kDeviceOffset = 1ull << 46;
constexpr unsigned long long kDeviceSpace = 1ull << 47;
inline void *onHost(unsigned long long device) {
  return reinterpret_cast<void *>(device - kDeviceOffset);
}
inline unsigned long long onDevice(void *host) {
  return reinterpret_cast<uintptr_t>(host) + kDeviceOffset;
}

/// A kernel's entry: `void name(void **params)`, which reads its arguments
/// as cuLaunchKernel passes them.
using HostKernelEntry = void (*)(void **params);

/// Whether `image` starts with kiln-gpu-modules-to-host's header
/// (compiler/Codegen/GPU/HostKernelImage.h).
inline bool isHostKernelImage(const void *image) {
  return std::memcmp(image, kHostKernelImageMagic,
                     sizeof(kHostKernelImageMagic)) == 0;
}

/// Loads a host-kernel image; nullptr (with `error` set) when it is
/// malformed or its object does not link (a function the driver lacks).
void *loadHostKernels(const void *image, std::string &error);
void unloadHostKernels(void *module);

/// Kernel `name` of a loaded module, or nullptr.
HostKernelEntry hostKernel(void *module, const char *name);
/// The module's function that fills its shared memory with 0xff bytes.
using PoisonShared = void (*)();
PoisonShared poisonShared(void *module);

/// Runs `entry` over the grid, one block after another, calling `poison`
/// (if any) before each; in a block of odd index the threads start in
/// reverse order, so that a read of another thread's write that no barrier
/// orders sees the value before the write in some blocks, and cp.async
/// copies land as they are issued (in even blocks: at their thread's
/// wait_group), so that both a read before the wait and a copy into what
/// another thread still reads go wrong in some blocks. False (with
/// `error` set) when the threads of a block wait for each other in a way
/// that can never resolve (a barrier or a warp operation some threads never
/// reach).
bool runHostKernel(HostKernelEntry entry, PoisonShared poison,
                   const unsigned grid[3], const unsigned block[3],
                   void **params, std::string &error);

} // namespace kiln::fake

#endif // KILN_TEST_UNIT_CUDA_HOSTKERNELS_H
