// kiln-hoist-vector-transfers: a register tile's accumulators leave memory
// for the reduction loop; a loop that adds to a tile read from memory sums
// from zeros and adds the tile (prefetched before the loop) after it.
// RUN: kiln-opt %s -split-input-file -pass-pipeline="builtin.module(func.func(kiln-hoist-vector-transfers))" | FileCheck %s

// A 4x32 tile of C read and written in every step of the k loop: the pair
// leaves the loop, which then carries the tile from zeros; C's 4 rows of
// two cache lines each are prefetched before it, and read and added after.
// CHECK-LABEL: func.func @accumulate
// CHECK-SAME: (%[[A:.+]]: memref<64x4xf32>, %[[B:.+]]: memref<64x32xf32>, %[[C:.+]]: memref<8x32xf32> {kiln.noalias}, %[[I:.+]]: index)
// CHECK-NOT: vector.transfer_read %[[C]]
// CHECK: memref.prefetch %[[C]][%[[I]], %c0], write, locality<3>, data
// CHECK: memref.prefetch %[[C]][%[[I]], %{{.+}}], write, locality<3>, data
// CHECK-COUNT-6: memref.prefetch %[[C]]
// CHECK-NOT: memref.prefetch
// CHECK: %[[ZERO:.+]] = arith.constant dense<-0.000000e+00> : vector<4x32xf32>
// CHECK: %[[SUM:.+]] = scf.for {{.*}} iter_args(%[[ACC:.+]] = %[[ZERO]]) -> (vector<4x32xf32>)
// CHECK-NOT: %[[C]]
// CHECK: arith.addf %[[ACC]], %{{.+}} : vector<4x32xf32>
// CHECK: scf.yield
// CHECK: %[[TILE:.+]] = vector.transfer_read %[[C]][%[[I]], %c0]
// CHECK: %[[TOTAL:.+]] = arith.addf %[[TILE]], %[[SUM]] : vector<4x32xf32>
// CHECK: vector.transfer_write %[[TOTAL]], %[[C]][%[[I]], %c0]
func.func @accumulate(%a: memref<64x4xf32>, %b: memref<64x32xf32>,
                      %c: memref<8x32xf32> {kiln.noalias}, %i: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  scf.for %k = %c0 to %c64 step %c1 {
    %x = vector.transfer_read %a[%k, %c0], %pad {in_bounds = [true, true], permutation_map = affine_map<(d0, d1) -> (d1, 0)>} : memref<64x4xf32>, vector<4x32xf32>
    %y = vector.transfer_read %b[%k, %c0], %pad {in_bounds = [true, true], permutation_map = affine_map<(d0, d1) -> (0, d1)>} : memref<64x32xf32>, vector<4x32xf32>
    %acc = vector.transfer_read %c[%i, %c0], %pad {in_bounds = [true, true]} : memref<8x32xf32>, vector<4x32xf32>
    %p = arith.mulf %x, %y : vector<4x32xf32>
    %s = arith.addf %acc, %p : vector<4x32xf32>
    vector.transfer_write %s, %c[%i, %c0] {in_bounds = [true, true]} : vector<4x32xf32>, memref<8x32xf32>
  }
  return
}

// -----

// A tile filled right before the loop starts from the filled vector (the
// fill's write is forwarded): nothing is left to read, or to prefetch.
// CHECK-LABEL: func.func @filled
// CHECK-NOT: memref.prefetch
// CHECK-NOT: vector.transfer_read %{{.+}}[%{{.+}}, %{{.+}}], %{{.+}} {in_bounds = [true, true]} : memref<8x32xf32>
// CHECK: scf.for {{.*}} iter_args(%{{.+}} = %cst{{.*}}) -> (vector<4x32xf32>)
func.func @filled(%b: memref<64x32xf32>, %c: memref<8x32xf32> {kiln.noalias},
                  %i: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  %zero = arith.constant dense<0.0> : vector<4x32xf32>
  vector.transfer_write %zero, %c[%i, %c0] {in_bounds = [true, true]} : vector<4x32xf32>, memref<8x32xf32>
  scf.for %k = %c0 to %c64 step %c1 {
    %y = vector.transfer_read %b[%k, %c0], %pad {in_bounds = [true, true], permutation_map = affine_map<(d0, d1) -> (0, d1)>} : memref<64x32xf32>, vector<4x32xf32>
    %acc = vector.transfer_read %c[%i, %c0], %pad {in_bounds = [true, true]} : memref<8x32xf32>, vector<4x32xf32>
    %s = arith.addf %acc, %y : vector<4x32xf32>
    vector.transfer_write %s, %c[%i, %c0] {in_bounds = [true, true]} : vector<4x32xf32>, memref<8x32xf32>
  }
  return
}

// -----

// A loop that scales its accumulator (no sum: starting from zeros would
// change it) keeps the read before it, and prefetches nothing.
// CHECK-LABEL: func.func @scaled
// CHECK-NOT: memref.prefetch
// CHECK: %[[TILE:.+]] = vector.transfer_read
// CHECK: scf.for {{.*}} iter_args(%{{.+}} = %[[TILE]]) -> (vector<4x32xf32>)
// CHECK: arith.mulf
func.func @scaled(%b: memref<64x32xf32>, %c: memref<8x32xf32> {kiln.noalias},
                  %i: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  scf.for %k = %c0 to %c64 step %c1 {
    %y = vector.transfer_read %b[%k, %c0], %pad {in_bounds = [true, true], permutation_map = affine_map<(d0, d1) -> (0, d1)>} : memref<64x32xf32>, vector<4x32xf32>
    %acc = vector.transfer_read %c[%i, %c0], %pad {in_bounds = [true, true]} : memref<8x32xf32>, vector<4x32xf32>
    %s = arith.mulf %acc, %y : vector<4x32xf32>
    vector.transfer_write %s, %c[%i, %c0] {in_bounds = [true, true]} : vector<4x32xf32>, memref<8x32xf32>
  }
  return
}

// -----

// A loop that adds the accumulator to itself (acc + acc) uses it twice:
// it is no sum of independent terms, and keeps its read.
// CHECK-LABEL: func.func @doubled
// CHECK-NOT: memref.prefetch
// CHECK: %[[TILE:.+]] = vector.transfer_read
// CHECK: scf.for {{.*}} iter_args(%{{.+}} = %[[TILE]]) -> (vector<4x32xf32>)
func.func @doubled(%c: memref<8x32xf32> {kiln.noalias}, %i: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  scf.for %k = %c0 to %c64 step %c1 {
    %acc = vector.transfer_read %c[%i, %c0], %pad {in_bounds = [true, true]} : memref<8x32xf32>, vector<4x32xf32>
    %s = arith.addf %acc, %acc : vector<4x32xf32>
    vector.transfer_write %s, %c[%i, %c0] {in_bounds = [true, true]} : vector<4x32xf32>, memref<8x32xf32>
  }
  return
}
