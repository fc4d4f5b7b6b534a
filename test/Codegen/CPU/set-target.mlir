// kiln-set-target resolves the CPU once and writes it on the module: an
// LLVM CPU name with every feature it implies and the default caches; the
// host resolved to its own name; an existing target replaced; an unknown
// CPU refused with the usual names. For GPU code, the NVIDIA architecture
// too (the CPU is the host code's); one that is not such an architecture is
// refused.
// RUN: kiln-opt %s -kiln-set-target=cpu=x86-64-v3 | FileCheck %s --check-prefix=V3
// RUN: kiln-opt %s -kiln-set-target=cpu=x86-64-v4 | FileCheck %s --check-prefix=V4
// RUN: kiln-opt %s -kiln-set-target=cpu=x86-64-v3 | not grep avx512
// RUN: kiln-opt %s -kiln-set-target=cpu=x86-64-v2 | FileCheck %s --check-prefix=V2
// RUN: kiln-opt %s -kiln-set-target=cpu=x86-64-v2 | not grep +avx
// RUN: kiln-opt %s -kiln-set-target | FileCheck %s --check-prefix=HOST
// RUN: not kiln-opt %s -kiln-set-target=cpu=pentium9 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: kiln-opt %s -kiln-set-target="cpu=x86-64-v3 gpu=sm_80" | FileCheck %s --check-prefix=GPU
// RUN: kiln-opt %s -kiln-set-target=cpu=x86-64-v3 | FileCheck %s --check-prefix=NOGPU
// RUN: not kiln-opt %s -kiln-set-target=gpu=sm80 2>&1 | FileCheck %s --check-prefix=BADGPU
// RUN: not kiln-opt %s -kiln-set-target=gpu=sm_30 2>&1 | FileCheck %s --check-prefix=OLDGPU

// V3: module attributes {kiln.target = #kiln.target<cpu = "x86-64-v3", features = "{{[^"]*}}+avx2,{{[^"]*}}+fma,{{[^"]*}}", l1DataBytes = 32768, l2Bytes = 524288>}
// V4: #kiln.target<cpu = "x86-64-v4", features = "{{[^"]*}}+avx2,{{[^"]*}}+avx512f,{{[^"]*}}"
// V2: #kiln.target<cpu = "x86-64-v2", features = "{{[^"]*}}+sse4.2,{{[^"]*}}"
// HOST: #kiln.target<cpu = "{{[a-z0-9-]+}}"
// HOST-NOT: cpu = "host"
// GPU: #kiln.target<cpu = "x86-64-v3", features = "{{[^"]*}}", l1DataBytes = 32768, l2Bytes = 524288, gpu = "sm_80">
// NOGPU-NOT: gpu =
// BADGPU: error: kiln-set-target: 'sm80' is not an NVIDIA GPU architecture (sm_80, sm_90, ...)
// OLDGPU: error: kiln-set-target: 'sm_30' is not an NVIDIA GPU architecture (sm_80, sm_90, ...)
// UNKNOWN: error: kiln-set-target: unknown target CPU 'pentium9' (use host, or an LLVM CPU name such as x86-64, x86-64-v2, x86-64-v3, x86-64-v4, znver4)
module attributes {kiln.target = #kiln.target<cpu = "znver4", features = "+avx512f", l1DataBytes = 32768, l2Bytes = 1048576>} {
  func.func @f() {
    return
  }
}
