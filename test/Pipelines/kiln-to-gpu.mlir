// RUN: kiln-opt %s --kiln-to-gpu | FileCheck %s
// RUN: kiln-opt %s --kiln-to-gpu="gpu=sm_80" | FileCheck %s --check-prefix=SM80
// RUN: kiln-opt %s --kiln-to-gpu | %python %S/Inputs/ptxas-all.py %ptxas sm_90 | FileCheck %s --check-prefix=PTXAS
// RUN: kiln-opt %s --kiln-to-gpu="gpu=sm_80" | %python %S/Inputs/ptxas-all.py %ptxas sm_80 | FileCheck %s --check-prefix=PTXAS80
// RUN: kiln-opt %kiln_src/examples/gpt/gpt_tiny_block.mlir --kiln-to-gpu | %python %S/Inputs/ptxas-all.py %ptxas sm_90 | FileCheck %s --check-prefix=BLOCK
// REQUIRES: ptxas

// A linear layer, an activation and a softmax: every loop nest becomes a
// kernel launched on the function's one stream, every buffer is device
// memory, and the kernels are PTX that ptxas accepts.
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xf32>, %b: tensor<128xf32>) -> tensor<?x128xf32> {
  %y = kiln.linear %x, %w, %b : (tensor<?x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<?x128xf32>
  %r = kiln.gelu %y : (tensor<?x128xf32>) -> tensor<?x128xf32>
  %s = kiln.softmax %r {axis = -1 : i64} : (tensor<?x128xf32>) -> tensor<?x128xf32>
  return %s : tensor<?x128xf32>
}

// The target is resolved once, on the module: the kernels' architecture and
// the host code's CPU.
// CHECK:       module attributes {{{.*}}kiln.target = #kiln.target<cpu = "{{[a-z0-9-]+}}", {{.*}}gpu = "sm_90">
// SM80:        module attributes {{{.*}}kiln.target = #kiln.target<cpu = "{{[a-z0-9-]+}}", {{.*}}gpu = "sm_80">
// CHECK-NOT:   llvm.func @malloc
// CHECK-LABEL: llvm.func @f(
// CHECK:         %[[STREAM:.*]] = llvm.call @mgpuStreamCreate()
// CHECK:         llvm.call @mgpuMemAlloc(%{{.*}}, %[[STREAM]], %{{.*}})
// CHECK:         gpu.launch_func <%[[STREAM]] : !llvm.ptr> @kiln_kernel_0_kernel::@kiln_kernel_0_kernel blocks in
// CHECK-NOT:     llvm.call @_mlir_memref_to_llvm_aligned_alloc
// CHECK:         gpu.launch_func <%[[STREAM]] : !llvm.ptr> @kiln_kernel_1_kernel::@kiln_kernel_1_kernel
// CHECK:         gpu.launch_func <%[[STREAM]] : !llvm.ptr> @kiln_kernel_2_kernel::@kiln_kernel_2_kernel
// CHECK-NOT:     gpu.launch_func
// CHECK:         llvm.call @mgpuStreamSynchronize(%[[STREAM]])
// CHECK:         llvm.call @mgpuStreamDestroy(%[[STREAM]])
// The result is copied into a new host buffer from Kiln's allocator (the
// runtime releases results through it); the device buffers are freed.
// CHECK:         llvm.call @_mlir_memref_to_llvm_aligned_alloc
// CHECK:         %[[S2:.*]] = llvm.call @mgpuStreamCreate()
// CHECK:         llvm.call @mgpuMemcpy(%{{.*}}, %{{.*}}, %{{.*}}, %[[S2]])
// CHECK:         llvm.call @mgpuMemFree(%{{.*}}, %[[S2]])
// CHECK:         llvm.call @mgpuStreamSynchronize(%[[S2]])
// CHECK:         llvm.call @mgpuStreamDestroy(%[[S2]])
// CHECK:       gpu.binary @kiln_kernel_0_kernel  [#gpu.object<#nvvm.target<O = 3, chip = "sm_90">
// CHECK-SAME:    .target sm_90
// CHECK-SAME:    .entry kiln_kernel_0_kernel(
// The matmul (reading the [N, K] weight as it is stored, along k) is tiled
// through 16-byte aligned shared memory (kiln-gpu-kernels,
// kiln-align-workgroup-memory): two stages of each tile, filled by cp.async
// on this sm_90, read from it 128 bits at a time. GELU and
// softmax (its two fills, the max and the sum over rows of 128, the
// normalization) are one row-group kernel: a block per row, the reductions
// with warp shuffles, barriers between the steps (three launches in all: the
// bias, the product, the rest).
// CHECK:       gpu.binary @kiln_kernel_1_kernel
// CHECK-SAME:    .shared .align 16 .b8 __wg_kiln_kernel_1_kernel_0[8448]
// CHECK-SAME:    cp.async.ca.shared.global
// CHECK-SAME:    ld.shared.v4.{{[bf]}}32
// CHECK-SAME:    fma.rn.f32
// CHECK:       gpu.binary @kiln_kernel_2_kernel
// CHECK-SAME:    shfl.sync.bfly.b32
// CHECK-SAME:    bar.sync
// CHECK-SAME:    shfl.sync.bfly.b32
// CHECK-SAME:    bar.sync

// SM80: gpu.binary @kiln_kernel_0_kernel  [#gpu.object<#nvvm.target<O = 3, chip = "sm_80">
// SM80-SAME: .target sm_80

// PTXAS: ptxas accepted {{[0-9]+}} modules for sm_90
// PTXAS80: ptxas accepted {{[0-9]+}} modules for sm_80

// A whole GPT block with its loss (attention with a causal mask, dropout,
// layer norms, GELU, cross-entropy): every kernel is valid PTX.
// BLOCK: ptxas accepted {{[0-9]+}} modules for sm_90
