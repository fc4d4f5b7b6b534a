//===- HostKernelImage.h - The layout of a host-kernel image ----*- C++ -*-===//
//
// What kiln-gpu-modules-to-host writes into a gpu.binary and a CUDA driver
// that emulates the GPU (test/Unit/Cuda's fake driver) reads: these 16
// bytes, the object's size (8 bytes, little-endian), then the ELF object.
// Plain C++, so that the driver can include it without MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_CODEGEN_GPU_HOSTKERNELIMAGE_H
#define KILN_COMPILER_CODEGEN_GPU_HOSTKERNELIMAGE_H

namespace kiln {

inline constexpr char kHostKernelImageMagic[16] = "KILNHOSTKERNELS";

} // namespace kiln

#endif // KILN_COMPILER_CODEGEN_GPU_HOSTKERNELIMAGE_H
