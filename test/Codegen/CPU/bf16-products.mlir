// RUN: kiln-opt %s -split-input-file -kiln-set-target=cpu=znver4 -kiln-bf16-products | FileCheck %s
// RUN: not kiln-opt %s -split-input-file -kiln-set-target=cpu=x86-64-v4 -kiln-bf16-products 2>&1 | FileCheck %s --check-prefix=NOBF16

// NOBF16: kiln-bf16-products: precision bf16 needs a CPU with AVX512-BF16 (vdpbf16ps{{.*}}compiled for 'x86-64-v4', which lacks it

// A linear layer on [batch, sequence] rows, its weight [n, k] read
// transposed: rows and the output collapsed to 2-D; a packed by rows of
// pairs of k (32 values rounded to bf16, 16 pairs, one store), the weight
// by panels of 32 columns, 16 columns' pairs transposed in registers; 8 x
// 32 register tiles of vdpbf16ps over the pairs, starting from the
// deferred fill (the bias is not read: kiln.fill); the rows in range
// stored, unmasked in a panel inside n and masked past it. The tiles go
// by blocks of rows whose packed a fills half of L2 (znver4 names no
// caches: 512 KiB, so 262144 bytes of 32 bytes per pair of a tile's 8
// rows), one block after another; packing and tiles run on all cores.
// CHECK-LABEL: func.func @linear
// CHECK-DAG: %[[A:.*]] = memref.collapse_shape %arg0 {{\[\[}}0, 1], [2]] : memref<?x?x48xf32> into memref<?x48xf32>
// CHECK-DAG: %[[O:.*]] = memref.collapse_shape %arg2 {{\[\[}}0, 1], [2]] : memref<?x?x33xf32> into memref<?x33xf32>
// CHECK: %[[AP:.*]] = memref.alloc(%{{.*}}, %{{.*}}) {alignment = 64 : i64} : memref<?x?xi32>
// CHECK: %[[BP:.*]] = memref.alloc(%{{.*}}, %{{.*}}) {alignment = 64 : i64} : memref<?x?x32xi32>
// CHECK: scf.for
// CHECK: vector.transfer_read %[[A]]{{.*}} : memref<?x48xf32>, vector<32xf32>
// CHECK-NEXT: arith.truncf %{{.*}} : vector<32xf32> to vector<32xbf16>
// CHECK-NEXT: vector.bitcast %{{.*}} : vector<32xbf16> to vector<16xi32>
// CHECK: vector.store %{{.*}}, %[[AP]]
// CHECK: } {kiln.parallel}
// CHECK: scf.for
// CHECK-COUNT-16: vector.transfer_read %arg1{{.*}} : memref<33x48xf32>, vector<32xf32>
// CHECK: vector.transpose %{{.*}}, [1, 0] : vector<16x16xi32> to vector<16x16xi32>
// CHECK: } {kiln.parallel}
// CHECK: %[[TILES:.*]] = arith.divui
// CHECK: %[[TILEBYTES:.*]] = arith.muli %{{.*}}, %c32
// CHECK: %[[NONZERO:.*]] = arith.maxui %[[TILEBYTES]], %c1
// CHECK: %[[FIT:.*]] = arith.divui %c262144, %[[NONZERO]]
// CHECK: %[[PER:.*]] = arith.maxui %[[FIT]], %c1
// CHECK: scf.for %[[BLOCK:.*]] = {{.*}} {
// CHECK-NEXT: %[[FIRST:.*]] = arith.muli %[[BLOCK]], %[[PER]]
// CHECK-NEXT: %[[LEFT:.*]] = arith.subi %[[TILES]], %[[FIRST]]
// CHECK-NEXT: %[[COUNT:.*]] = arith.minui %[[PER]], %[[LEFT]]
// CHECK: scf.for %[[PANEL:.*]] = {{.*}} {
// CHECK: %[[END:.*]] = arith.addi %{{.*}}, %c32
// CHECK: %[[INSIDE:.*]] = arith.cmpi ule, %[[END]], %[[N:.*]] : index
// CHECK: scf.for %[[TILE:.*]] = %{{.*}} to %[[COUNT]]
// CHECK-NEXT: arith.addi %[[FIRST]], %[[TILE]]
// CHECK-NOT: vector.transfer_read %[[O]]
// CHECK: arith.constant dense<0.000000e+00> : vector<16xf32>
// CHECK: scf.for {{.*}} iter_args(
// CHECK-COUNT-2: vector.load %[[BP]][%[[PANEL]], %{{.*}}, %{{.*}}] : memref<?x?x32xi32>, vector<16xi32>
// CHECK: memref.load %[[AP]]
// CHECK: vector.broadcast %{{.*}} : i32 to vector<16xi32>
// CHECK: x86vector.avx512.dot %{{.*}} : vector<32xbf16> -> vector<16xf32>
// CHECK-NEXT: x86vector.avx512.dot %{{.*}} : vector<32xbf16> -> vector<16xf32>
// CHECK-COUNT-14: x86vector.avx512.dot
// CHECK: scf.yield
// CHECK: arith.cmpi ult
// CHECK: scf.if
// CHECK-NEXT: scf.if %[[INSIDE]] {
// CHECK-NEXT: vector.store %{{.*}}, %[[O]]
// CHECK-NEXT: vector.store %{{.*}}, %[[O]]
// CHECK-NEXT: } else {
// CHECK-NEXT: vector.transfer_write %{{.*}}, %[[O]]
// CHECK-NEXT: vector.transfer_write %{{.*}}, %[[O]]
// CHECK: } {kiln.parallel}
// CHECK-NEXT: } {kiln.parallel}
// CHECK-NEXT: }
// CHECK-NEXT: memref.dealloc %[[AP]]
// CHECK: memref.dealloc %[[BP]]
// CHECK-NOT: linalg.generic
// CHECK: return
#a = affine_map<(b, t, n, k) -> (b, t, k)>
#w = affine_map<(b, t, n, k) -> (n, k)>
#o = affine_map<(b, t, n, k) -> (b, t, n)>
func.func @linear(%x: memref<?x?x48xf32>, %w: memref<33x48xf32>, %out: memref<?x?x33xf32>) {
  linalg.generic {indexing_maps = [#a, #w, #o], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x?x48xf32>, memref<33x48xf32>) outs(%out : memref<?x?x33xf32>)
      attrs = {kiln.fill = 0.0 : f32} {
  ^bb0(%in: f32, %in_0: f32, %acc: f32):
    %0 = arith.mulf %in, %in_0 : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  }
  return
}

// -----

// A weight gradient gᵀ·x: a stored [k, m] (16 rows of a by 32 values of k:
// rows k and k + 1 interleaved into pairs, then transposed), b stored [k, n]
// (pair rows of a panel interleaved from two rows of b); no fill: the tiles
// start from the output (unmasked loads in a panel inside n, masked past).
// CHECK-LABEL: func.func @weight_gradient
// CHECK: %[[AP:.*]] = memref.alloc
// CHECK: %[[BP:.*]] = memref.alloc
// CHECK: scf.for
// CHECK: arith.minui
// CHECK: vector.transfer_read %arg0{{.*}} : memref<?x?xf32>, vector<16xf32>
// CHECK: arith.select %{{.*}}, %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK: vector.interleave %{{.*}}, %{{.*}} : vector<16xbf16> -> vector<32xbf16>
// CHECK: vector.transpose
// CHECK-COUNT-16: vector.store %{{.*}}, %[[AP]]
// CHECK: } {kiln.parallel}
// CHECK: scf.for
// CHECK: vector.transfer_read %arg1{{.*}} : memref<?x?xf32>, vector<32xf32>
// CHECK: vector.interleave %{{.*}}, %{{.*}} : vector<32xbf16> -> vector<64xbf16>
// CHECK: vector.bitcast %{{.*}} : vector<64xbf16> to vector<32xi32>
// CHECK: vector.store %{{.*}}, %[[BP]]
// CHECK: } {kiln.parallel}
// CHECK: scf.for
// CHECK: scf.for
// CHECK: %[[INSIDE:.*]] = arith.cmpi ule
// CHECK: scf.for
// CHECK: scf.if %[[INSIDE]] -> (vector<16xf32>, vector<16xf32>) {
// CHECK-NEXT: vector.load %arg2{{.*}} : memref<?x?xf32>, vector<16xf32>
// CHECK-NEXT: vector.load %arg2{{.*}} : memref<?x?xf32>, vector<16xf32>
// CHECK-NEXT: scf.yield
// CHECK-NEXT: } else {
// CHECK: vector.transfer_read %arg2{{.*}} : memref<?x?xf32>, vector<16xf32>
// CHECK: vector.transfer_read %arg2{{.*}} : memref<?x?xf32>, vector<16xf32>
// CHECK-NEXT: scf.yield
// CHECK: x86vector.avx512.dot
#ga = affine_map<(m, n, k) -> (k, m)>
#gb = affine_map<(m, n, k) -> (k, n)>
#go = affine_map<(m, n, k) -> (m, n)>
func.func @weight_gradient(%g: memref<?x?xf32>, %x: memref<?x?xf32>, %out: memref<?x?xf32>) {
  linalg.generic {indexing_maps = [#ga, #gb, #go], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%g, %x : memref<?x?xf32>, memref<?x?xf32>) outs(%out : memref<?x?xf32>) {
  ^bb0(%in: f32, %in_0: f32, %acc: f32):
    %0 = arith.mulf %in, %in_0 : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  }
  return
}

// -----

// A batched product (attention's scores, whole): packed buffers for every
// batch at once, then a loop over the batch on all cores whose iterations
// pack and multiply 2-D slices on one core (no inner loop marked).
// CHECK-LABEL: func.func @batched
// CHECK: %[[AP:.*]] = memref.alloc(%{{.*}}, %{{.*}}, %{{.*}}) {alignment = 64 : i64} : memref<?x?x?xi32>
// CHECK: %[[BP:.*]] = memref.alloc(%{{.*}}, %{{.*}}, %{{.*}}) {alignment = 64 : i64} : memref<?x?x?x32xi32>
// CHECK: scf.for %[[B:.*]] =
// CHECK: memref.subview %arg0[%[[B]], 0, 0] [1, 8, 8] [1, 1, 1] : memref<2x8x8xf32> to memref<8x8xf32, strided<[8, 1], offset: ?>>
// CHECK: memref.subview %[[AP]][%[[B]], 0, 0]
// CHECK-NOT: kiln.parallel
// CHECK: x86vector.avx512.dot
// CHECK-NOT: kiln.parallel
// CHECK: } {kiln.parallel}
// CHECK: memref.dealloc %[[AP]]
func.func @batched(%a: memref<2x8x8xf32>, %b: memref<2x8x8xf32>, %c: memref<2x8x8xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<2x8x8xf32>, memref<2x8x8xf32>) outs(%c : memref<2x8x8xf32>)
  return
}

// -----

// Left as they are: a product whose output is indexed (n, m), one whose
// innermost stride is not 1.
// CHECK-LABEL: func.func @left
// CHECK-NOT: x86vector
// CHECK: linalg.generic
// CHECK: linalg.matmul
// CHECK-NOT: x86vector
#ta = affine_map<(m, n, k) -> (m, k)>
#tb = affine_map<(m, n, k) -> (k, n)>
#to = affine_map<(m, n, k) -> (n, m)>
func.func @left(%x: memref<8x8xf32>, %y: memref<8x8xf32>, %z: memref<8x8xf32>,
                %s: memref<8x8xf32, strided<[1, 8]>>) {
  linalg.generic {indexing_maps = [#ta, #tb, #to], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %y : memref<8x8xf32>, memref<8x8xf32>) outs(%z : memref<8x8xf32>) {
  ^bb0(%in: f32, %in_0: f32, %acc: f32):
    %0 = arith.mulf %in, %in_0 : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  }
  linalg.matmul ins(%s, %y : memref<8x8xf32, strided<[1, 8]>>, memref<8x8xf32>) outs(%z : memref<8x8xf32>)
  return
}
