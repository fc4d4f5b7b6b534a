// RUN: kiln-opt %s --pass-pipeline="builtin.module(func.func(kiln-gpu-kernels{math=tf32},canonicalize))" --split-input-file | FileCheck %s
// RUN: kiln-opt %s --pass-pipeline="builtin.module(func.func(kiln-gpu-kernels{math=tf32}),gpu-kernel-outlining,lower-affine,nvvm-attach-target{chip=sm_80},gpu.module(kiln-align-workgroup-memory,convert-scf-to-cf,convert-nvgpu-to-nvvm,convert-gpu-to-nvvm,reconcile-unrealized-casts),gpu-module-to-binary{format=isa})" --split-input-file | FileCheck %s --check-prefix=PTX
// RUN: kiln-opt %s --pass-pipeline="builtin.module(func.func(kiln-gpu-kernels))" --split-input-file | FileCheck %s --check-prefix=FP32
// RUN: kiln-opt %S/Inputs/tf32-invalid.mlir --pass-pipeline="builtin.module(func.func(kiln-gpu-kernels{math=tf32}))" --split-input-file --verify-diagnostics
// RUN: not kiln-opt %s --pass-pipeline="builtin.module(func.func(kiln-gpu-kernels{math=fp16}))" --split-input-file 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: kiln-opt %s --pass-pipeline="builtin.module(func.func(kiln-gpu-kernels{math=tf32x3},canonicalize))" --split-input-file | FileCheck %s --check-prefix=X3
// RUN: kiln-opt %s --pass-pipeline="builtin.module(func.func(kiln-gpu-kernels{math=tf32x3}),gpu-kernel-outlining,lower-affine,nvvm-attach-target{chip=sm_80},gpu.module(kiln-align-workgroup-memory,convert-scf-to-cf,convert-nvgpu-to-nvvm,convert-gpu-to-nvvm,reconcile-unrealized-casts),gpu-module-to-binary{format=isa})" --split-input-file | FileCheck %s --check-prefix=X3PTX

// kiln-gpu-kernels{math=tf32}: a contraction's block of 16 x 16 threads
// (8 warps) computes the same 128 x 128 outputs from the same staged 8 x
// 132 tiles, each warp 64 x 32 of them as 4 x 4 tiles of mma.sync.m16n8k8
// (TF32 inputs, fp32 accumulators). The module is compiled for sm_80, so
// the tiles are copied by cp.async into two stages (gpu-kernels-async.mlir);
// once its copies have landed, each thread rounds the elements it copied
// to TF32 (to nearest, ties away: cvt.rna) in place, before the step's one
// barrier; each step then reads B's 8 fragment elements, then each
// m-tile's 4 of A followed by its 4 products (16 mma.sync in place of 64
// FMAs a thread); the 64 accumulators are added to the output as in fp32.
// CHECK-LABEL: func.func @matmul(
// CHECK-NOT:     linalg.matmul
// CHECK:         gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c16, {{.*}} = %c16, {{.*}} = %c1) workgroup(%[[A:.*]] : memref<2x8x132xf32, #gpu.address_space<workgroup>>, %[[B:.*]] : memref<2x8x132xf32, #gpu.address_space<workgroup>>)
// CHECK-COUNT-8:   nvgpu.device_async_copy
// CHECK:           nvvm.cp.async.commit.group
// CHECK:           scf.for %{{.*}} = %c0 to %c64 step %c8 iter_args(
// CHECK:             nvvm.cp.async.wait.group 0
// CHECK-COUNT-4:     nvvm.convert.float.to.tf32 {{.*}} {rnd = #nvvm.fp_rnd_mode<rna>}
// CHECK:             memref.store %{{.*}}, %[[A]]
// CHECK:             nvvm.convert.float.to.tf32
// CHECK:             memref.store %{{.*}}, %[[B]]
// CHECK:             gpu.barrier
// CHECK:             scf.if
// CHECK-COUNT-8:       nvgpu.device_async_copy
// CHECK:               nvvm.cp.async.commit.group
// CHECK-COUNT-8:     memref.load %[[B]]
// CHECK-NOT:         math.fma
// CHECK-COUNT-4:     memref.load %[[A]]
// CHECK-COUNT-4:     nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<tf32>, multiplicandBPtxType = #nvvm.mma_type<tf32>, shape = #nvvm.shape<m = 16, n = 8, k = 8>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK-COUNT-4:     memref.load %[[A]]
// CHECK-COUNT-4:     nvvm.mma.sync
// CHECK-COUNT-4:     memref.load %[[A]]
// CHECK-COUNT-4:     nvvm.mma.sync
// CHECK-COUNT-4:     memref.load %[[A]]
// CHECK-COUNT-4:     nvvm.mma.sync
// CHECK-NOT:         nvvm.mma.sync
// CHECK-NOT:         math.fma
// CHECK-NOT:         gpu.barrier
// CHECK:             scf.yield
// CHECK-COUNT-64:  arith.addf
// CHECK:           gpu.terminator
// CHECK:         return
// PTX-LABEL: gpu.binary @matmul_kernel
// PTX-SAME: cp.async.ca.shared.global
// PTX-SAME: cp.async.commit_group
// PTX-SAME: mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
// PTX-SAME: cp.async.wait_group
// PTX-SAME: cvt.rna.tf32.f32
// PTX-SAME: bar.sync
// kiln-gpu-kernels{math=tf32x3}: the operands are staged in fp32 (no
// rounding as they are stored), each of the 24 fragment elements a step is
// split into big = tf32(x) and small = tf32(x - big) as it is read (0 where
// big is infinite), and
// each of the 16 tiles takes three mma.sync: small_a big_b, big_a small_b,
// then big_a big_b into the accumulators.
// X3-LABEL: func.func @matmul(
// X3:           scf.for %{{.*}} = %c0 to %c64 step %c8 iter_args(
// X3-NOT:         nvvm.convert.float.to.tf32
// X3:             gpu.barrier
// X3:             nvvm.cp.async.commit.group
// X3-COUNT-8:     memref.load %{{.*}} : memref<2x8x132xf32, #gpu.address_space<workgroup>>
// X3-NEXT:        nvvm.convert.float.to.tf32 {{.*}} {rnd = #nvvm.fp_rnd_mode<rna>}
// X3-NEXT:        arith.bitcast
// X3-NEXT:        arith.subf
// X3-NEXT:        math.absf
// X3-NEXT:        arith.cmpf olt
// X3-NEXT:        arith.select
// X3-NEXT:        nvvm.convert.float.to.tf32 {{.*}} {rnd = #nvvm.fp_rnd_mode<rna>}
// X3-COUNT-4:     memref.load %{{.*}} : memref<2x8x132xf32, #gpu.address_space<workgroup>>
// X3-COUNT-12:    nvvm.mma.sync
// X3-COUNT-4:     memref.load %{{.*}} : memref<2x8x132xf32, #gpu.address_space<workgroup>>
// X3-COUNT-12:    nvvm.mma.sync
// X3-COUNT-4:     memref.load %{{.*}} : memref<2x8x132xf32, #gpu.address_space<workgroup>>
// X3-COUNT-12:    nvvm.mma.sync
// X3-COUNT-4:     memref.load %{{.*}} : memref<2x8x132xf32, #gpu.address_space<workgroup>>
// X3-COUNT-12:    nvvm.mma.sync
// X3-NOT:         nvvm.mma.sync
// X3-NOT:         gpu.barrier
// X3:             scf.yield
// X3PTX-LABEL: gpu.binary @matmul_kernel
// X3PTX-SAME: cvt.rna.tf32.f32
// X3PTX-SAME: mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
// FP32-LABEL: func.func @matmul(
// FP32-NOT:     nvvm.{{mma|convert}}
// FP32:         math.fma
// FP32-NOT:     nvvm.{{mma|convert}}
// FP32:         return
module attributes {kiln.target = #kiln.target<cpu = "x86-64", features = "", l1DataBytes = 32768, l2Bytes = 1048576, gpu = "sm_80">} {
  func.func @matmul(%a: memref<?x64xf32>, %b: memref<64x32xf32>, %c: memref<?x32xf32>) {
    linalg.matmul ins(%a, %b : memref<?x64xf32>, memref<64x32xf32>) outs(%c : memref<?x32xf32>)
    return
  }
}

// -----

// A weight gradient split over k: the parts' sums go to the partial buffer
// from the same TF32 accumulators; the sum kernel is the fp32 one.
// CHECK-LABEL: func.func @weight_grad(
// CHECK:         gpu.launch
// CHECK-COUNT-16:  nvvm.mma.sync
// CHECK:           scf.if
// CHECK-COUNT-64:    memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<?x1536xf32>
// CHECK:         gpu.launch
// CHECK-NOT:       nvvm.mma.sync
// CHECK:         return
module attributes {kiln.target = #kiln.target<cpu = "x86-64", features = "", l1DataBytes = 32768, l2Bytes = 1048576, gpu = "sm_90">} {
  func.func @weight_grad(%x: memref<?x?x32xf32>, %g: memref<?x?x48xf32>, %w: memref<32x48xf32>) {
    linalg.generic {indexing_maps = [affine_map<(b, t, d, e) -> (b, t, d)>, affine_map<(b, t, d, e) -> (b, t, e)>, affine_map<(b, t, d, e) -> (d, e)>], iterator_types = ["reduction", "reduction", "parallel", "parallel"]} ins(%x, %g : memref<?x?x32xf32>, memref<?x?x48xf32>) outs(%w : memref<32x48xf32>) {
    ^bb0(%xv: f32, %gv: f32, %acc: f32):
      %p = arith.mulf %xv, %gv : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
    }
    return
  }
}

// UNKNOWN: kiln-gpu-kernels: math 'fp16' is not a GPU math mode: use fp32 (the default), tf32, tf32x3 or bf16
