// CPU code generation on buffers: contractions become 8x32 register tiles
// whose reduction loop carries the accumulators in vector registers;
// elementwise ops become 16-wide vectors; partial tiles are peeled off.
// RUN: kiln-opt %s -pass-pipeline="builtin.module(func.func(kiln-tile-and-vectorize),canonicalize,fold-memref-alias-ops,func.func(kiln-hoist-vector-transfers))" | FileCheck %s

// A [20, 64] x [64, 96] product into a fresh buffer: rows 0..15 in full
// 8-row tiles whose k loop keeps the accumulators in registers, rows 16..19
// in a peeled (here static, 4-row) tile.
// CHECK-LABEL: func.func @contraction
// CHECK-SAME: (%[[A:.+]]: memref<20x64xf32>, %[[B:.+]]: memref<64x96xf32>)
// CHECK: %[[C:.+]] = memref.alloc() : memref<20x96xf32>
// CHECK: scf.for %[[M:.+]] = %{{.+}} to %{{.+}} step %c8
// CHECK: scf.for %[[N:.+]] = %{{.+}} to %{{.+}} step %c32
// CHECK: %[[ACC0:.+]] = vector.transfer_read %[[C]][%[[M]], %[[N]]]{{.*}} : memref<20x96xf32>, vector<8x32xf32>
// CHECK: %[[ACC:.+]] = scf.for {{.*}} iter_args(%[[V:.+]] = %[[ACC0]]) -> (vector<8x32xf32>)
// CHECK: vector.transfer_read %[[A]]{{.*}} vector<8x32x1xf32>
// CHECK: vector.transfer_read %[[B]]{{.*}} vector<8x32x1xf32>
// CHECK-NOT: vector.transfer_write
// CHECK: scf.yield
// CHECK: vector.transfer_write %[[ACC]], %[[C]][%[[M]], %[[N]]]
// CHECK: vector<4x32xf32>
func.func @contraction(%a: memref<20x64xf32>, %b: memref<64x96xf32>) -> memref<20x96xf32> {
  %c = memref.alloc() : memref<20x96xf32>
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<20x64xf32>, memref<64x96xf32>) outs(%c : memref<20x96xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return %c : memref<20x96xf32>
}

// A dynamic number of rows: the partial 8-row tile stays a scalar loop nest.
// CHECK-LABEL: func.func @contraction_dynamic
// CHECK: vector<8x32xf32>
// CHECK: linalg.generic
func.func @contraction_dynamic(%a: memref<?x64xf32>, %b: memref<64x96xf32>, %c: memref<?x96xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<?x64xf32>, memref<64x96xf32>) outs(%c : memref<?x96xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// An elementwise op over a dynamic batch: 16-wide vectors along the row.
// CHECK-LABEL: func.func @elementwise
// CHECK: scf.for
// CHECK: scf.for {{.*}} step %c16
// CHECK: vector.transfer_read {{.*}} vector<16xf32>
// CHECK: arith.maximumf {{.*}} : vector<16xf32>
// CHECK: vector.transfer_write
func.func @elementwise(%x: memref<?x64xf32>, %y: memref<?x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<?x64xf32>) outs(%y : memref<?x64xf32>) {
  ^bb0(%v: f32, %o: f32):
    %z = arith.constant 0.0 : f32
    %r = arith.maximumf %v, %z : f32
    linalg.yield %r : f32
  }
  return
}
