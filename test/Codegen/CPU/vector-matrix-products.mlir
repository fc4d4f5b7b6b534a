// RUN: kiln-opt %s -split-input-file -kiln-vector-matrix-products="vector-width=16 max-rows=4" | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-vector-matrix-products="vector-width=8 max-rows=1" | FileCheck %s --check-prefix=AVX2

#a = affine_map<(b, t, n, k) -> (b, t, k)>
#w = affine_map<(b, t, n, k) -> (n, k)>
#o = affine_map<(b, t, n, k) -> (b, t, n)>

// A linear layer on dynamic rows: the rows decide at run time between the
// streamed product (k = 48 split into 3 x 16, the loops (n, b, t, j, l), a
// zeroed accumulator, then a sum of its lanes into the output, which takes
// the deferred fill) and the product as it was.
// CHECK-LABEL: func.func @linear
// CHECK: memref.dim %arg0, %c0
// CHECK: memref.dim %arg0, %c1
// CHECK: %[[ROWS:.*]] = arith.muli
// CHECK: %[[MAX:.*]] = arith.constant 4 : index
// CHECK: %[[FEW:.*]] = arith.cmpi ule, %[[ROWS]], %[[MAX]]
// CHECK: scf.if %[[FEW]] {
// CHECK: %[[A:.*]] = memref.expand_shape %arg0 {{\[\[}}0], [1], [2, 3]] output_shape [%{{.*}}, %{{.*}}, 3, 16] : memref<?x?x48xf32> into memref<?x?x3x16xf32>
// CHECK: %[[W:.*]] = memref.expand_shape %arg1 {{\[\[}}0], [1, 2]] output_shape [33, 3, 16] : memref<33x48xf32> into memref<33x3x16xf32>
// CHECK: %[[P:.*]] = memref.alloc(%{{.*}}, %{{.*}}) {alignment = 64 : i64} : memref<?x?x33x16xf32>
// CHECK: linalg.generic {indexing_maps = [#[[$A:.*]], #[[$W:.*]], #[[$P:.*]]], iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
// CHECK-SAME: ins(%[[A]], %[[W]] : memref<?x?x3x16xf32>, memref<33x3x16xf32>) outs(%[[P]] : memref<?x?x33x16xf32>) attrs = {kiln.fill = 0.000000e+00 : f32}
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[P]] : memref<?x?x33x16xf32>) outs(%arg2 : memref<?x?x33xf32>) attrs = {kiln.fill = 0.000000e+00 : f32}
// CHECK: memref.dealloc %[[P]]
// CHECK: } else {
// CHECK: linalg.generic
// CHECK-SAME: ins(%arg0, %arg1 : memref<?x?x48xf32>, memref<33x48xf32>)
// CHECK: }
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @linear(%x: memref<?x?x48xf32>, %w: memref<33x48xf32>, %out: memref<?x?x33xf32>) {
  linalg.generic {indexing_maps = [#a, #w, #o], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x?x48xf32>, memref<33x48xf32>) outs(%out : memref<?x?x33xf32>)
      attrs = {kiln.fill = 0.0 : f32} {
  ^bb0(%in: f32, %in_w: f32, %acc: f32):
    %p = arith.mulf %in, %in_w : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// AVX2-LABEL: func.func @linear
// AVX2: arith.constant 1 : index
// AVX2: memref.expand_shape %arg0 {{\[\[}}0], [1], [2, 3]] output_shape [%{{.*}}, %{{.*}}, 6, 8]

// -----

// One static row (the last position's logits through the tied head, a
// weight slice with rows 64 apart): no run-time test; the weight's rows
// keep their stride.
// CHECK-LABEL: func.func @one_row
// CHECK-NOT: scf.if
// CHECK: memref.expand_shape %arg1 {{\[\[}}0], [1, 2]] output_shape [5, 2, 16] : memref<5x32xf32, strided<[64, 1], offset: 32>> into memref<5x2x16xf32, strided<[64, 16, 1], offset: 32>>
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<1x5x16xf32>
// CHECK-NOT: linalg.generic {{.*}}ins(%arg0, %arg1
// CHECK: return
func.func @one_row(%x: memref<1x32xf32>, %w: memref<5x32xf32, strided<[64, 1], offset: 32>>, %out: memref<1x5xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<1x32xf32>, memref<5x32xf32, strided<[64, 1], offset: 32>>) outs(%out : memref<1x5xf32>) {
  ^bb0(%in: f32, %in_w: f32, %acc: f32):
    %p = arith.mulf %in, %in_w : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Left as they are: more static rows than max-rows; a k that is not a
// multiple of the vector; a weight stored [k, n]; a weight whose k is
// strided.
// CHECK-LABEL: func.func @untouched
// CHECK-NOT: scf.if
// CHECK-NOT: memref.expand_shape
// CHECK-NOT: memref.alloc
// CHECK: return
func.func @untouched(%x8: memref<8x32xf32>, %w: memref<5x32xf32>, %o8: memref<8x5xf32>,
                     %x: memref<?x24xf32>, %w24: memref<5x24xf32>, %o: memref<?x5xf32>,
                     %x32: memref<?x32xf32>, %wkn: memref<32x5xf32>,
                     %ws: memref<5x32xf32, strided<[1, 5]>>) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x8, %w : memref<8x32xf32>, memref<5x32xf32>) outs(%o8 : memref<8x5xf32>) {
  ^bb0(%in: f32, %in_w: f32, %acc: f32):
    %p = arith.mulf %in, %in_w : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w24 : memref<?x24xf32>, memref<5x24xf32>) outs(%o : memref<?x5xf32>) {
  ^bb0(%in: f32, %in_w: f32, %acc: f32):
    %p = arith.mulf %in, %in_w : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x32, %wkn : memref<?x32xf32>, memref<32x5xf32>) outs(%o : memref<?x5xf32>) {
  ^bb0(%in: f32, %in_w: f32, %acc: f32):
    %p = arith.mulf %in, %in_w : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x32, %ws : memref<?x32xf32>, memref<5x32xf32, strided<[1, 5]>>) outs(%o : memref<?x5xf32>) {
  ^bb0(%in: f32, %in_w: f32, %acc: f32):
    %p = arith.mulf %in, %in_w : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}
