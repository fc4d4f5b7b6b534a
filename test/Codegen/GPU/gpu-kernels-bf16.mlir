// RUN: kiln-opt %s --pass-pipeline="builtin.module(func.func(kiln-gpu-kernels{math=bf16},canonicalize))" | FileCheck %s
// RUN: kiln-opt %s --pass-pipeline="builtin.module(func.func(kiln-gpu-kernels{math=bf16}),gpu-kernel-outlining,lower-affine,nvvm-attach-target{chip=sm_80},gpu.module(kiln-align-workgroup-memory,convert-scf-to-cf,convert-nvgpu-to-nvvm,convert-gpu-to-nvvm,reconcile-unrealized-casts),gpu-module-to-binary{format=isa})" | FileCheck %s --check-prefix=PTX
// RUN: sed 's/"sm_80"/"sm_75"/' %s | not kiln-opt --pass-pipeline="builtin.module(func.func(kiln-gpu-kernels{math=bf16}))" 2>&1 | FileCheck %s --check-prefix=SM75

// kiln-gpu-kernels{math=bf16}: the TF32 kernels' block, warps, tiles and
// cp.async stages, with the operands rounded to bf16 (to nearest even:
// cvt.rn.bf16.f32) in place by the thread that copied them, and
// mma.sync.m16n8k16 on tiles 16 steps of k deep: each step reads B's 8
// registers (two staged rows, 2t and 2t + 1, or 2t + 8 and 2t + 9, packed
// into one: the even row's upper half low), then per m-tile A's 4
// registers followed by its 4 products (16 mma.sync a step). The module is
// compiled for sm_80.
// CHECK-LABEL: func.func @matmul(
// CHECK:         gpu.launch {{.*}} workgroup(%[[A:.*]] : memref<2x16x132xf32, #gpu.address_space<workgroup>>, %[[B:.*]] : memref<2x16x132xf32, #gpu.address_space<workgroup>>)
// CHECK:           scf.for %{{.*}} = %c0 to %c64 step %c16 iter_args(
// CHECK:             nvvm.cp.async.wait.group 0
// CHECK:             memref.load %[[A]]
// CHECK-NEXT:        arith.truncf %{{.*}} : f32 to bf16
// CHECK-NEXT:        arith.extf %{{.*}} : bf16 to f32
// CHECK-NEXT:        memref.store %{{.*}}, %[[A]]
// CHECK:             memref.store %{{.*}}, %[[B]]
// CHECK:             gpu.barrier
// CHECK:             nvvm.cp.async.commit.group
// CHECK-COUNT-16:    memref.load %[[B]]
// CHECK-NOT:         math.fma
// CHECK-COUNT-8:     memref.load %[[A]]
// CHECK-COUNT-4:     nvvm.mma.sync A[{{.*}}, {{.*}}, {{.*}}, {{.*}}] B[{{.*}}, {{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK-COUNT-8:     memref.load %[[A]]
// CHECK-COUNT-4:     nvvm.mma.sync
// CHECK-COUNT-8:     memref.load %[[A]]
// CHECK-COUNT-4:     nvvm.mma.sync
// CHECK-COUNT-8:     memref.load %[[A]]
// CHECK-COUNT-4:     nvvm.mma.sync
// CHECK-NOT:         nvvm.mma.sync
// CHECK-NOT:         gpu.barrier
// CHECK:             scf.yield
// CHECK:         return
// PTX-LABEL: gpu.binary @matmul_kernel
// PTX-SAME: cp.async.ca.shared.global
// PTX-SAME: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX-SAME: cp.async.wait_group
// PTX-SAME: cvt.rn.bf16.f32
// SM75: math bf16 (tensor cores, mma.sync) needs an NVIDIA GPU of sm_80 or newer
module attributes {kiln.target = #kiln.target<cpu = "x86-64", features = "", l1DataBytes = 32768, l2Bytes = 1048576, gpu = "sm_80">} {
  func.func @matmul(%a: memref<?x64xf32>, %b: memref<64x32xf32>, %c: memref<?x32xf32>) {
    linalg.matmul ins(%a, %b : memref<?x64xf32>, memref<64x32xf32>) outs(%c : memref<?x32xf32>)
    return
  }
}
