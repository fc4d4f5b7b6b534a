// The attention kernels of kiln-gpu-kernels (FlashAttention.cpp), from
// kiln.flash_attention and kiln.flash_attention_grad on buffers.
// RUN: kiln-opt %s --pass-pipeline="builtin.module(func.func(kiln-gpu-kernels,canonicalize))" --split-input-file | FileCheck %s
// Identical attention ops (layers) share one kernel function:
// RUN: kiln-opt %s --kiln-outline-kernels --split-input-file | FileCheck %s --check-prefix=OUTLINE
// Their resources through the whole pipeline, for sm_90 and sm_80: heads of
// 128 (the widest: the forward kernel's tiles take 41 KiB, the backward
// kernels handle 8 rows a block to stay within 48 KiB) and of 32, grouped
// heads, masks and dropout, within 128 registers a thread, no stack, no
// spills.
// RUN: kiln-opt %S/Inputs/flash-attention-model.mlir --kiln-to-gpu | %python %S/../../Pipelines/Inputs/ptxas-all.py %ptxas sm_90 --budget 128,49152 | FileCheck %s --check-prefix=PTX
// RUN: kiln-opt %S/Inputs/flash-attention-model.mlir --kiln-to-gpu="gpu=sm_80" | %python %S/../../Pipelines/Inputs/ptxas-all.py %ptxas sm_80 --budget 128,49152 | FileCheck %s --check-prefix=PTX
// REQUIRES: ptxas

// PTX: ptxas accepted 4 modules
// PTX: 4 kernels within the budget: registers at most 128 (largest {{[0-9]+}}), shared memory at most 49152 bytes (largest 41220), no stack, no spills

// Forward: a launch of ceil(Tq / 16) x H x B blocks of 128 threads (4 warps
// of 4 query rows), the block's queries staged once, then per tile of 32
// keys: a barrier, the keys (rows padded to 33 floats) and values staged,
// a barrier, the lane's key's scores (the mask read at the lane's key),
// each row's maximum and sum by butterfly shuffles, and the weights
// broadcast lane by lane (shuffle idx) into the output columns the lanes
// own. Causal: the block's tiles up to its last visible key, then, if a
// row saw no key (a flag in shared memory), the rest.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME:    %[[Q:[^:]*]]: memref<?x?x64xf32>, %[[K:[^:]*]]: memref<?x?x32xf32>, %[[V:[^:]*]]: memref<?x?x32xf32>, %[[M:[^:]*]]: memref<?x?xi1>, %[[S:[^:]*]]: i64, %[[O:[^:]*]]: memref<?x?x64xf32>)
// CHECK-NOT:     kiln.flash_attention
// CHECK-DAG:     %[[B:.*]] = memref.dim %[[Q]], %c0
// CHECK-DAG:     %[[TQ:.*]] = memref.dim %[[Q]], %c1
// CHECK-DAG:     %[[TK:.*]] = memref.dim %[[K]], %c1
// CHECK:         %[[QB:.*]] = arith.ceildivui %[[TQ]], %c16
// CHECK:         %[[GX:.*]] = arith.maxui %[[QB]], %c1
// CHECK:         %[[GZ:.*]] = arith.maxui %[[B]], %c1
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %[[GX]], {{.*}} = %c2, {{.*}} = %[[GZ]]) threads({{.*}}) in ({{.*}} = %c128, {{.*}} = %c1, {{.*}} = %c1) workgroup(%[[QT:.*]] : memref<16x32xf32, #gpu.address_space<workgroup>>, %[[KT:.*]] : memref<32x33xf32, #gpu.address_space<workgroup>>, %[[VT:.*]] : memref<32x32xf32, #gpu.address_space<workgroup>>, %[[FLAG:.*]] : memref<1xi32, #gpu.address_space<workgroup>>)
// CHECK:           %[[TILES:.*]] = arith.ceildivui %[[TK]], %c32
// CHECK:           %[[VISITED:.*]] = arith.select %{{.*}}, %c0, %{{.*}} : index
// CHECK:           memref.load %[[Q]]
// CHECK:           memref.store %{{.*}}, %[[QT]]
// CHECK:           memref.store %c0_i32, %[[FLAG]][%c0]
// CHECK:           gpu.barrier
// CHECK:           scf.for %{{.*}} = %c0 to %[[VISITED]] step %c1 iter_args(
// CHECK:             gpu.barrier
// CHECK:             memref.load %[[K]]
// CHECK:             memref.store %{{.*}}, %[[KT]]
// CHECK:             memref.load %[[V]]
// CHECK:             memref.store %{{.*}}, %[[VT]]
// CHECK:             gpu.barrier
// CHECK:             memref.load %[[M]]
// CHECK:             scf.for %{{.*}} = %c0 to %c32 step %c1 iter_args({{.*}}) -> (f32, f32, f32, f32)
// CHECK-COUNT-4:       memref.load %[[QT]]
// CHECK:             gpu.shuffle  xor %{{.*}}, %c16_i32, %c32_i32 : f32
// CHECK:             math.exp
// CHECK:             scf.for %{{.*}} = %c0 to %c32 step %c1 iter_args(
// CHECK:               memref.load %[[VT]]
// CHECK:               gpu.shuffle  idx
// CHECK:           memref.store %c1_i32, %[[FLAG]][%c0]
// CHECK:           gpu.barrier
// CHECK:           memref.load %[[FLAG]][%c0]
// CHECK:           %[[REST:.*]] = arith.select %{{.*}}, %[[TILES]], %[[VISITED]] : index
// CHECK:           scf.for %{{.*}} = %[[VISITED]] to %[[REST]] step %c1 iter_args(
// CHECK:           arith.divf
// CHECK:           memref.store %{{.*}}, %[[O]]
func.func @forward(%q: memref<?x?x64xf32>, %k: memref<?x?x32xf32>, %v: memref<?x?x32xf32>, %m: memref<?x?xi1>, %s: i64, %o: memref<?x?x64xf32>) {
  kiln.flash_attention ins(%q, %k, %v : memref<?x?x64xf32>, memref<?x?x32xf32>, memref<?x?x32xf32>) mask(%m : memref<?x?xi1>) seed(%s) outs(%o : memref<?x?x64xf32>) {num_heads = 2 : i64, num_kv_heads = 1 : i64, causal, dropout = 0.1 : f64, stream = 2 : i64}
  return
}

// -----

// Not causal: every key tile, no flag.
// CHECK-LABEL: func.func @cross(
// CHECK:         gpu.launch {{.*}} workgroup({{.*}} : memref<16x8xf32, #gpu.address_space<workgroup>>, {{.*}} : memref<32x9xf32, #gpu.address_space<workgroup>>, {{.*}} : memref<32x8xf32, #gpu.address_space<workgroup>>, {{.*}} : memref<1xi32, #gpu.address_space<workgroup>>)
// CHECK:           %[[TILES:.*]] = arith.ceildivui %{{.*}}, %c32
// CHECK:           scf.for %{{.*}} = %c0 to %[[TILES]] step %c1
// CHECK-NOT:       arith.select %{{.*}}, %[[TILES]],
// CHECK:         return
func.func @cross(%q: memref<?x?x16xf32>, %k: memref<?x?x16xf32>, %o: memref<?x?x16xf32>) {
  kiln.flash_attention ins(%q, %k, %k : memref<?x?x16xf32>, memref<?x?x16xf32>, memref<?x?x16xf32>) outs(%o : memref<?x?x16xf32>) {num_heads = 2 : i64, num_kv_heads = 2 : i64}
  return
}

// -----

// Backward: statistics per query row of each head ([B·H·Tq, 3]: maximum,
// sum, dO·O), a kernel per 16 query rows (dQ) and one per 16 keys of each
// key/value head (dK and dV, its 2 query heads in turn), then the
// statistics freed. Heads of 128: 8 rows a block (tiles of 8 x 128, and 32
// x 129 padded).
// CHECK-LABEL: func.func @backward(
// CHECK-SAME:    %[[G:[^:]*]]: memref<?x?x256xf32>, %[[Q:[^:]*]]: memref<?x?x256xf32>, %[[K:[^:]*]]: memref<?x?x128xf32>, %[[V:[^:]*]]: memref<?x?x128xf32>, %[[O:[^:]*]]: memref<?x?x256xf32>, %[[DQ:[^:]*]]: memref<?x?x256xf32>, %[[DK:[^:]*]]: memref<?x?x128xf32>, %[[DV:[^:]*]]: memref<?x?x128xf32>)
// CHECK:         %[[STATS:.*]] = memref.alloc(%{{.*}}) : memref<?x3xf32>
// CHECK:         gpu.launch {{.*}} in ({{.*}}, {{.*}} = %c2, {{.*}}) threads({{.*}} = %c128, {{.*}}) workgroup({{.*}} : memref<8x128xf32, #gpu.address_space<workgroup>>, {{.*}} : memref<8x128xf32, #gpu.address_space<workgroup>>, {{.*}} : memref<32x129xf32, #gpu.address_space<workgroup>>, {{.*}} : memref<32x129xf32, #gpu.address_space<workgroup>>, {{.*}} : memref<1xi32, #gpu.address_space<workgroup>>)
// CHECK:           memref.load %[[O]]
// CHECK:           memref.store %{{.*}}, %[[STATS]]
// CHECK:           memref.store %{{.*}}, %[[DQ]]
// CHECK:         gpu.launch {{.*}} in ({{.*}}, {{.*}} = %c1, {{.*}}) threads({{.*}} = %c128, {{.*}}) workgroup({{.*}} : memref<8x128xf32, #gpu.address_space<workgroup>>, {{.*}} : memref<8x128xf32, #gpu.address_space<workgroup>>, {{.*}} : memref<32x129xf32, #gpu.address_space<workgroup>>, {{.*}} : memref<32x129xf32, #gpu.address_space<workgroup>>)
// CHECK:           scf.for %{{.*}} = %c0 to %c2 step %c1
// CHECK:             memref.load %[[STATS]]
// CHECK:           memref.store %{{.*}}, %[[DK]]
// CHECK:           memref.store %{{.*}}, %[[DV]]
// CHECK:         memref.dealloc %[[STATS]]
func.func @backward(%g: memref<?x?x256xf32>, %q: memref<?x?x256xf32>, %k: memref<?x?x128xf32>, %v: memref<?x?x128xf32>, %o: memref<?x?x256xf32>, %dq: memref<?x?x256xf32>, %dk: memref<?x?x128xf32>, %dv: memref<?x?x128xf32>) {
  kiln.flash_attention_grad ins(%g, %q, %k, %v, %o : memref<?x?x256xf32>, memref<?x?x256xf32>, memref<?x?x128xf32>, memref<?x?x128xf32>, memref<?x?x256xf32>) outs(%dq, %dk, %dv : memref<?x?x256xf32>, memref<?x?x128xf32>, memref<?x?x128xf32>) {num_heads = 2 : i64, num_kv_heads = 1 : i64, causal}
  return
}

// -----

// Two layers' attention: one kernel, called twice.
// OUTLINE-LABEL: func.func @two_layers(
// OUTLINE:         call @[[KERNEL:.*]](%{{.*}}, %{{.*}}, %{{.*}}) : (memref<?x?x16xf32>, memref<?x?x16xf32>, memref<?x?x16xf32>) -> ()
// OUTLINE:         call @[[KERNEL]](%{{.*}}, %{{.*}}, %{{.*}})
// OUTLINE:       func.func private @[[KERNEL]](
// OUTLINE:         kiln.flash_attention
// OUTLINE-NOT:   kiln.flash_attention
// CHECK-LABEL: func.func @two_layers(
// CHECK-COUNT-2: gpu.launch
func.func @two_layers(%q: memref<?x?x16xf32>, %k: memref<?x?x16xf32>, %o: memref<?x?x16xf32>, %p: memref<?x?x16xf32>) {
  kiln.flash_attention ins(%q, %k, %k : memref<?x?x16xf32>, memref<?x?x16xf32>, memref<?x?x16xf32>) outs(%o : memref<?x?x16xf32>) {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal}
  kiln.flash_attention ins(%o, %k, %k : memref<?x?x16xf32>, memref<?x?x16xf32>, memref<?x?x16xf32>) outs(%p : memref<?x?x16xf32>) {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal}
  return
}
