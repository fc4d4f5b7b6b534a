// RUN: kiln-opt %s --pass-pipeline="builtin.module(func.func(kiln-gpu-kernels,canonicalize))" --split-input-file | FileCheck %s
// RUN: kiln-opt %s --pass-pipeline="builtin.module(func.func(kiln-gpu-kernels),gpu-kernel-outlining,lower-affine,nvvm-attach-target{chip=sm_80},gpu.module(kiln-align-workgroup-memory,convert-scf-to-cf,convert-nvgpu-to-nvvm,convert-gpu-to-nvvm,reconcile-unrealized-casts),gpu-module-to-binary{format=isa})" --split-input-file | FileCheck %s --check-prefix=PTX
// RUN: sed 's/"sm_80"/"sm_75"/' %s | kiln-opt --pass-pipeline="builtin.module(func.func(kiln-gpu-kernels,canonicalize))" --split-input-file | FileCheck %s --check-prefix=SM75

// kiln-gpu-kernels on a module compiled for sm_80: a contraction's operand
// tiles are copied by cp.async (nvgpu.device_async_copy) into two stages
// of shared memory. Before the loop, the first step's copies (when this
// block's part of the reduction is not empty: k is dynamic here, and may
// split) go to stage 0, one group; each step s waits for its thread's
// copies (wait_group 0), meets the others at the step's one barrier,
// issues the copies of step s + 1 into the other stage (1 - s % 2) if
// there is one, and multiplies stage s % 2. a ([m, k], read along k) is
// copied one f32 at a time; b ([k, n], read along n, n innermost) 16 bytes
// at a time (4 floats of a tile row, one copy a thread, L1 bypassed) where
// its first element is 16-byte aligned, its rows' stride a multiple of 4
// and n a multiple of 4 (checked once a block, before the loop), else the
// same 4 floats one at a time. An element outside the operand copies no bytes
// (srcElements 0: zero-filled) from indices clamped to 0.
// CHECK-LABEL: func.func @matmul(
// CHECK:         gpu.launch {{.*}} workgroup(%[[A:.*]] : memref<2x8x132xf32, #gpu.address_space<workgroup>>, %[[B:.*]] : memref<2x8x132xf32, #gpu.address_space<workgroup>>)
// CHECK:           %[[KE:.*]] = arith.minui
// CHECK:           %{{.*}}, %{{.*}}, %[[SIZES:.*]]:2, %[[STRIDES:.*]]:2 = memref.extract_strided_metadata %arg1
// CHECK-NEXT:      %[[PTR:.*]] = memref.extract_aligned_pointer_as_index %arg1
// CHECK-NEXT:      %[[P16:.*]] = arith.remui %[[PTR]], %c16
// CHECK-NEXT:      %[[ALIGNED:.*]] = arith.cmpi eq, %[[P16]], %c0
// CHECK-NEXT:      %[[S4:.*]] = arith.remui %[[STRIDES]]#0, %c4
// CHECK-NEXT:      %[[ROWS:.*]] = arith.cmpi eq, %[[S4]], %c0
// CHECK-NEXT:      %[[BOTH:.*]] = arith.andi %[[ALIGNED]], %[[ROWS]]
// CHECK-NEXT:      %[[N4:.*]] = arith.remui %[[SIZES]]#1, %c4
// CHECK-NEXT:      %[[WIDE:.*]] = arith.cmpi eq, %[[N4]], %c0
// CHECK-NEXT:      %[[FIT:.*]] = arith.andi %[[BOTH]], %[[WIDE]]
// CHECK-NEXT:      %[[ANY:.*]] = arith.cmpi ult, %[[KB:.*]], %[[KE]] : index
// CHECK-NEXT:      scf.if %[[ANY]] {
// CHECK:             %[[GK:.*]] = arith.select %[[IN:.*]], %{{.*}}, %c0 : index
// CHECK-NEXT:        %[[GX:.*]] = arith.select %[[IN]], %{{.*}}, %c0 : index
// CHECK-NEXT:        %[[N:.*]] = arith.select %[[IN]], %c1, %c0 : index
// CHECK-NEXT:        nvgpu.device_async_copy %arg0[%[[GX]], %[[GK]]], %[[A]][%c0, %{{.*}}, %{{.*}}], 1, %[[N]] : memref<?x?xf32> to memref<2x8x132xf32, #gpu.address_space<workgroup>>
// CHECK-COUNT-3:     nvgpu.device_async_copy %arg0{{.*}}, %[[A]][%c0, {{.*}}], 1,
// CHECK:             scf.if %[[FIT]] {
// CHECK:               %[[VK:.*]] = arith.select %[[VIN:.*]], %{{.*}}, %c0 : index
// CHECK-NEXT:          %[[VX:.*]] = arith.select %[[VIN]], %{{.*}}, %c0 : index
// CHECK:               %[[COUNT:.*]] = arith.select %[[VIN]], %{{.*}}, %c0 : index
// CHECK-NEXT:          nvgpu.device_async_copy %arg1[%[[VK]], %[[VX]]], %[[B]][%c0, %[[ROW:.*]], %[[COL:.*]]], 4, %[[COUNT]] {bypassL1}
// CHECK-NEXT:        } else {
// The same run one element at a time (each read where it lies inside).
// CHECK:               %[[SK:.*]] = arith.select %[[SIN:.*]], %{{.*}}, %c0 : index
// CHECK-NEXT:          %[[SX:.*]] = arith.select %[[SIN]], %{{.*}}, %c0 : index
// CHECK:               nvgpu.device_async_copy %arg1[%[[SK]], %[[SX]]], %[[B]][%c0, %[[ROW2:.*]], %{{.*}}], 1,
// CHECK:               %[[SX1:.*]] = arith.addi %[[SX]], %c1
// CHECK:               nvgpu.device_async_copy %arg1[%[[SK]], %[[SX1]]], %[[B]][%c0, %[[ROW2]], %{{.*}}], 1,
// CHECK-COUNT-2:       nvgpu.device_async_copy %arg1{{.*}}, %[[B]][%c0, %[[ROW2]], {{.*}}], 1,
// CHECK:             }
// CHECK-NEXT:        nvvm.cp.async.commit.group
// CHECK-NEXT:      }
// CHECK:           scf.for %[[K0:.*]] = %[[KB]] to %[[KE]] step %c8 iter_args(
// CHECK:             %[[DONE:.*]] = arith.subi %[[K0]], %[[KB]]
// CHECK-NEXT:        %[[STEP:.*]] = arith.divui %[[DONE]], %c8
// CHECK:             %[[STAGE:.*]] = arith.remui %[[STEP]], %c2
// CHECK-NEXT:        nvvm.cp.async.wait.group 0
// CHECK-NEXT:        gpu.barrier
// CHECK-NEXT:        %[[NEXT:.*]] = arith.addi %[[K0]], %c8
// CHECK-NEXT:        %[[MORE:.*]] = arith.cmpi ult, %[[NEXT]], %[[KE]]
// CHECK-NEXT:        scf.if %[[MORE]] {
// CHECK-NEXT:          %[[OTHER:.*]] = arith.subi %c1, %[[STAGE]]
// CHECK-COUNT-4:       nvgpu.device_async_copy %arg0{{.*}}, %[[A]][%[[OTHER]],
// CHECK:               scf.if %[[FIT]] {
// CHECK:                 nvgpu.device_async_copy %arg1{{.*}}, %[[B]][%[[OTHER]], {{.*}}], 4,
// CHECK:               } else {
// CHECK-COUNT-4:         nvgpu.device_async_copy %arg1{{.*}}, %[[B]][%[[OTHER]], {{.*}}], 1,
// CHECK:               }
// CHECK-NEXT:          nvvm.cp.async.commit.group
// CHECK-NEXT:        }
// CHECK:             scf.for %{{.*}} = %c0 to %c8 step %c1
// CHECK-COUNT-8:       memref.load %[[A]][%[[STAGE]],
// CHECK-COUNT-64:      math.fma
// CHECK-NOT:         gpu.barrier
// CHECK:             scf.yield
// CHECK-NOT:       nvgpu.device_async_copy
// CHECK-COUNT-64:  arith.addf
// CHECK:           gpu.terminator

// In the PTX code: 4-byte cp.async (cached in L1) and 16-byte ones (not),
// each with a source size, groups committed and waited for, 8,448 bytes of
// shared memory a tile (two stages), one bar.sync in the loop.
// PTX-LABEL: gpu.binary @matmul_kernel
// PTX-SAME: .shared .align 16 .b8 __wg_matmul_kernel_0[8448]
// PTX-SAME: cp.async.ca.shared.global [%rd{{[0-9]+}}], [%rd{{[0-9]+}}], 4, %r{{[0-9]+}};
// PTX-SAME: cp.async.cg.shared.global [%rd{{[0-9]+}}], [%rd{{[0-9]+}}], 16, %r{{[0-9]+}};
// PTX-SAME: cp.async.commit_group;
// PTX-SAME: cp.async.wait_group \090;
// PTX-SAME: bar.sync \090;
// PTX-SAME: cp.async.ca.shared.global
// PTX-SAME: cp.async.commit_group;
// PTX-SAME: ld.shared.v4.{{[bf]}}32
// PTX-SAME: fma.rn.f32
// PTX-NOT:  bar.sync

// Compiled for sm_75 (no cp.async), the tiles go through registers into
// one stage, with a barrier before and after the block's products.
// SM75-LABEL: func.func @matmul(
// SM75-NOT:     nvgpu.
// SM75:         gpu.launch {{.*}} workgroup(%{{.*}} : memref<1x8x132xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<1x8x132xf32, #gpu.address_space<workgroup>>)
// SM75-NOT:     nvgpu.
// SM75-NOT:     nvvm.cp.async
// SM75:           gpu.barrier
// SM75:           math.fma
// SM75:           gpu.barrier
// SM75:         return
module attributes {kiln.target = #kiln.target<cpu = "x86-64", features = "", l1DataBytes = 32768, l2Bytes = 1048576, gpu = "sm_80">} {
  func.func @matmul(%a: memref<?x?xf32>, %b: memref<?x?xf32>, %c: memref<?x?xf32>) {
    linalg.matmul ins(%a, %b : memref<?x?xf32>, memref<?x?xf32>) outs(%c : memref<?x?xf32>)
    return
  }
}

// -----

// An operand whose innermost stride is not 1 by its type is no source for
// cp.async (nvgpu.device_async_copy's rule): the contraction stages its
// tiles through registers, one stage, as on older GPUs.
// CHECK-LABEL: func.func @strided(
// CHECK-NOT:     nvgpu.
// CHECK:         gpu.launch {{.*}} workgroup(%{{.*}} : memref<1x8x132xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<1x8x132xf32, #gpu.address_space<workgroup>>)
// CHECK-NOT:     nvgpu.
// CHECK-NOT:     nvvm.cp.async
// CHECK:         return
// PTX-LABEL: gpu.binary @strided_kernel
module attributes {kiln.target = #kiln.target<cpu = "x86-64", features = "", l1DataBytes = 32768, l2Bytes = 1048576, gpu = "sm_80">} {
  func.func @strided(%a: memref<?x?xf32, strided<[?, ?], offset: ?>>, %b: memref<?x?xf32>, %c: memref<?x?xf32>) {
    linalg.matmul ins(%a, %b : memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32>) outs(%c : memref<?x?xf32>)
    return
  }
}

// -----

// b at an offset known only at run time: its first element, offset * 4
// bytes past the aligned pointer, must be 16-byte aligned for its 16-byte
// copies; its row stride a multiple of 4 floats, n too.
// CHECK-LABEL: func.func @offset(
// CHECK:         %{{.*}}, %[[OFF:.*]], %[[SIZES:.*]]:2, %[[STRIDES:.*]]:2 = memref.extract_strided_metadata %arg1
// CHECK-NEXT:    %[[PTR:.*]] = memref.extract_aligned_pointer_as_index %arg1
// CHECK-NEXT:    %[[BYTES:.*]] = arith.muli %[[OFF]], %c4
// CHECK-NEXT:    %[[FIRST:.*]] = arith.addi %[[PTR]], %[[BYTES]]
// CHECK-NEXT:    %[[P16:.*]] = arith.remui %[[FIRST]], %c16
// CHECK-NEXT:    %[[ALIGNED:.*]] = arith.cmpi eq, %[[P16]], %c0
// CHECK-NEXT:    %[[S4:.*]] = arith.remui %[[STRIDES]]#0, %c4
// CHECK-NEXT:    %[[ROWS:.*]] = arith.cmpi eq, %[[S4]], %c0
// CHECK-NEXT:    %[[BOTH:.*]] = arith.andi %[[ALIGNED]], %[[ROWS]]
// CHECK-NEXT:    %[[N4:.*]] = arith.remui %[[SIZES]]#1, %c4
// CHECK-NEXT:    %[[WIDE:.*]] = arith.cmpi eq, %[[N4]], %c0
// CHECK-NEXT:    %[[FIT:.*]] = arith.andi %[[BOTH]], %[[WIDE]]
// CHECK:         scf.if %[[FIT]] {
// CHECK:           nvgpu.device_async_copy %arg1{{.*}}, 4, %{{.*}} {bypassL1}
// PTX-LABEL: gpu.binary @offset_kernel
// PTX-SAME: cp.async.cg.shared.global
module attributes {kiln.target = #kiln.target<cpu = "x86-64", features = "", l1DataBytes = 32768, l2Bytes = 1048576, gpu = "sm_80">} {
  func.func @offset(%a: memref<?x?xf32>, %b: memref<?x?xf32, strided<[?, 1], offset: ?>>, %c: memref<?x?xf32>) {
    linalg.matmul ins(%a, %b : memref<?x?xf32>, memref<?x?xf32, strided<[?, 1], offset: ?>>) outs(%c : memref<?x?xf32>)
    return
  }
}
