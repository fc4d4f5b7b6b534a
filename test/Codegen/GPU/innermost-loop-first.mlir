// RUN: kiln-opt %s --pass-pipeline="builtin.module(func.func(kiln-innermost-loop-first))" | FileCheck %s

// An elementwise nest over [B, T, D]: D (contiguous) becomes the first
// dimension, which tiling and mapping put on threadIdx.x; the body indexes
// the buffers as before.
// CHECK-LABEL: func.func @add(
// CHECK:         scf.parallel (%[[D:.*]], %[[T:.*]], %[[B:.*]]) = (%c0, %c0, %c0) to (%c768, %c128, %c8) step (%c1, %c1, %c1) {
// CHECK:           memref.load %{{.*}}[%[[B]], %[[T]], %[[D]]]
// CHECK:           memref.store %{{.*}}, %{{.*}}[%[[B]], %[[T]], %[[D]]]
// CHECK:           scf.reduce
// CHECK-NEXT:    } {tag = 1 : i64}
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
  } {tag = 1 : i64}
  return
}

// Left alone: one dimension; a loop with a reduction; a loop nested in
// another (whose outermost is reversed: it is the one the blocks and
// threads are mapped to); a loop already mapped.
// CHECK-LABEL: func.func @alone(
// CHECK:         scf.parallel (%{{.*}}) = (%c0) to (%c8)
// CHECK:         scf.parallel (%{{.*}}, %{{.*}}) = (%c0, %c0) to (%c8, %c4) {{.*}} init
// CHECK:         scf.parallel (%{{.*}}, %{{.*}}) = (%c0, %c0) to (%c8, %c4)
// CHECK-NEXT:      scf.parallel (%{{.*}}, %{{.*}}) = (%c0, %c0) to (%c8, %c4)
// CHECK:         scf.parallel (%{{.*}}, %{{.*}}) = (%c0, %c0) to (%c8, %c4) {{.*}} {
// CHECK:         } {mapping = [
func.func @alone(%a: memref<8x4xf32>, %v: memref<8xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
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
