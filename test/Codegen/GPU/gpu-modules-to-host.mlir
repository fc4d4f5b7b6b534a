// kiln-gpu-modules-to-host: a kernel module in the LLVM and NVVM dialects
// becomes a gpu.binary holding an object for the host CPU behind the
// KILNHOSTKERNELS header; the NVVM operations are calls into the driver
// (their names are in the object's symbol table) and the kernel is entered
// through `k(void **params)`. What the calls compute is tested against the
// emulating driver (test/Unit/Cuda/HostKernelsTest.cpp) and by running
// GpuTest's GPU tests on it.
// RUN: kiln-opt %s --split-input-file --kiln-gpu-modules-to-host | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kiln-gpu-modules-to-host | FileCheck %s --check-prefix=SREG
// RUN: kiln-opt %s --split-input-file --kiln-gpu-modules-to-host | FileCheck %s --check-prefix=SHFL
// RUN: kiln-opt %s --split-input-file --kiln-gpu-modules-to-host | FileCheck %s --check-prefix=MMA
// RUN: kiln-opt %s --split-input-file --kiln-gpu-modules-to-host | FileCheck %s --check-prefix=CVT
// RUN: kiln-opt %s --split-input-file --kiln-gpu-modules-to-host | FileCheck %s --check-prefix=ADDR
// RUN: kiln-opt %s --split-input-file --kiln-gpu-modules-to-host | FileCheck %s --check-prefix=POISON
// RUN: kiln-opt %S/Inputs/host-kernels-invalid.mlir --split-input-file --kiln-gpu-modules-to-host --verify-diagnostics

// CHECK-NOT: gpu.module
// CHECK: gpu.binary @m  [#gpu.object<#nvvm.target<chip = "sm_90">, properties = {kiln.host_kernels}, bin = "KILNHOSTKERNELS
// CHECK-SAME: kiln_emu_barrier
// SREG: kiln_emu_sreg
// SHFL: kiln_emu_shfl
// MMA: kiln_emu_mma_m16n8k8_tf32
// CVT: kiln_emu_cvt_rna_tf32
// ADDR: kiln_emu_host_address
// POISON: kiln_emu_poison_shared
gpu.module @m [#nvvm.target<chip = "sm_90">] {
  llvm.func @k(%p: !llvm.ptr, %v: f32) attributes {gpu.kernel, nvvm.kernel} {
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    nvvm.barrier0
    %mask = llvm.mlir.constant(-1 : i32) : i32
    %one = llvm.mlir.constant(1 : i32) : i32
    %clamp = llvm.mlir.constant(31 : i32) : i32
    %s = nvvm.shfl.sync bfly %mask, %v, %one, %clamp {return_value_and_is_valid} : f32 -> !llvm.struct<(f32, i1)>
    %x = llvm.extractvalue %s[0] : !llvm.struct<(f32, i1)>
    %t = nvvm.convert.float.to.tf32 %x {rnd = #nvvm.fp_rnd_mode<rna>}
    %d = nvvm.mma.sync A[%t, %t, %t, %t] B[%t, %t] C[%x, %x, %x, %x]
        {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>,
         multiplicandAPtxType = #nvvm.mma_type<tf32>,
         multiplicandBPtxType = #nvvm.mma_type<tf32>,
         shape = #nvvm.shape<m = 16, n = 8, k = 8>}
        : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
    %y = llvm.extractvalue %d[3] : !llvm.struct<(f32, f32, f32, f32)>
    %at = llvm.getelementptr %p[%tid] : (!llvm.ptr, i32) -> !llvm.ptr, f32
    llvm.store %y, %at : f32, !llvm.ptr
    llvm.return
  }
}
