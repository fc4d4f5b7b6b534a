// RUN: kiln-opt %s --pass-pipeline="builtin.module(func.func(kiln-gpu-loop-tiles))" | FileCheck %s

// An elementwise nest over [B, T, D]: D (contiguous) becomes the first
// dimension, which gpu-map-parallel-loops puts on threadIdx.x, then the
// first two (D, T) are tiled by 16; the body indexes the buffers as before.
// CHECK-LABEL: func.func @add(
// CHECK:         %[[C16:.*]] = arith.constant 16 : index
// CHECK:         %[[SD:.*]] = arith.muli %c1, %[[C16]]
// CHECK:         %[[ST:.*]] = arith.muli %c1, %[[C16]]
// CHECK:         %[[SB:.*]] = arith.muli %c1, %c1
// CHECK:         scf.parallel (%[[D:.*]], %[[T:.*]], %[[B:.*]]) = (%c0, %c0, %c0) to (%c768, %c128, %c8) step (%[[SD]], %[[ST]], %[[SB]]) {
// CHECK-NEXT:      scf.parallel (%[[DI:.*]], %[[TI:.*]], %[[BI:.*]]) = ({{.*}}) to (%[[SD]], %[[ST]], %[[SB]]) step (%c1, %c1, %c1) {
// CHECK-NEXT:        %[[DD:.*]] = arith.addi %[[DI]], %[[D]]
// CHECK-NEXT:        %[[TT:.*]] = arith.addi %[[TI]], %[[T]]
// CHECK-NEXT:        %[[BB:.*]] = arith.addi %[[BI]], %[[B]]
// CHECK-NEXT:        memref.load %{{.*}}[%[[BB]], %[[TT]], %[[DD]]]
// CHECK:             memref.store %{{.*}}, %{{.*}}[%[[BB]], %[[TT]], %[[DD]]]
func.func @add(%a: memref<8x128x768xf32>, %out: memref<8x128x768xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c128 = arith.constant 128 : index
  %c768 = arith.constant 768 : index
  scf.parallel (%b, %t, %d) = (%c0, %c0, %c0) to (%c8, %c128, %c768) step (%c1, %c1, %c1) {
    %x = memref.load %a[%b, %t, %d] : memref<8x128x768xf32>
    %y = arith.addf %x, %x : f32
    memref.store %y, %out[%b, %t, %d] : memref<8x128x768xf32>
    scf.reduce
  }
  return
}

// A loop of one dimension is tiled by 256 (8 warps a block), with a guard
// for its dynamic trip count, or by its constant trip count when smaller (8;
// 1 for serial code: a kernel of one thread). Left as they are: a loop with
// a reduction; of a nest, the outer loop is reversed and only the inner one
// tiled; a loop already mapped.
// CHECK-LABEL: func.func @alone(
// CHECK:         %[[C256:.*]] = arith.constant 256 : index
// CHECK:         %[[S:.*]] = arith.muli %c1, %[[C256]]
// CHECK:         scf.parallel (%{{.*}}) = (%c0) to (%{{.*}}) step (%[[S]]) {
// CHECK-NEXT:      scf.parallel (%{{.*}}) = (%{{.*}}) to (%[[S]]) step (%c1) {
// CHECK:             scf.if
// CHECK:         %[[C8:.*]] = arith.constant 8 : index
// CHECK:         %[[S8:.*]] = arith.muli %c1, %[[C8]]
// CHECK:         scf.parallel (%{{.*}}) = (%c0) to (%c8) step (%[[S8]]) {
// CHECK-NEXT:      scf.parallel (%{{.*}}) = (%{{.*}}) to (%[[S8]]) step (%c1) {
// CHECK:         %[[C1:.*]] = arith.constant 1 : index
// CHECK:         %[[S1:.*]] = arith.muli %c1, %[[C1]]
// CHECK:         scf.parallel (%{{.*}}) = (%c0) to (%c1) step (%[[S1]]) {
// CHECK-NEXT:      scf.parallel (%{{.*}}) = (%{{.*}}) to (%[[S1]]) step (%c1) {
// CHECK:         scf.parallel (%{{.*}}, %{{.*}}) = (%c0, %c0) to (%c8, %c4) step (%c1, %c1) init
// CHECK:         scf.parallel (%{{.*}}, %{{.*}}) = (%c0, %c0) to (%c8, %c4) step (%c1, %c1) {
// CHECK:           scf.parallel (%{{.*}}, %{{.*}}) = (%c0, %c0) to (%c8, %c4) step (%{{.*}}, %{{.*}}) {
// CHECK-NEXT:        scf.parallel
// CHECK:         scf.parallel (%{{.*}}, %{{.*}}) = (%c0, %c0) to (%c8, %c4) step (%c1, %c1) {
// CHECK-NEXT:      memref.store
// CHECK:         } {mapping = [
func.func @alone(%a: memref<8x4xf32>, %v: memref<8xf32>, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %zero, %v[%i] : memref<8xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    memref.store %zero, %v[%i] : memref<8xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c1) step (%c1) {
    memref.store %zero, %v[%i] : memref<8xf32>
    scf.reduce
  }
  %sum = scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c4) step (%c1, %c1) init (%zero) -> f32 {
    %x = memref.load %a[%i, %j] : memref<8x4xf32>
    scf.reduce(%x : f32) {
    ^bb0(%l: f32, %r: f32):
      %s = arith.addf %l, %r : f32
      scf.reduce.return %s : f32
    }
  }
  scf.parallel (%o, %p) = (%c0, %c0) to (%c4, %c8) step (%c1, %c1) {
    scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c4) step (%c1, %c1) {
      memref.store %zero, %a[%i, %j] : memref<8x4xf32>
      scf.reduce
    }
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c4) step (%c1, %c1) {
    memref.store %zero, %a[%i, %j] : memref<8x4xf32>
    scf.reduce
  } {mapping = [#gpu.loop_dim_map<processor = block_x, map = (d0) -> (d0), bound = (d0) -> (d0)>, #gpu.loop_dim_map<processor = block_y, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
  return %sum : f32
}
