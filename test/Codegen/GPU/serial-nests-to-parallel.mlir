// RUN: kiln-opt %s --pass-pipeline="builtin.module(func.func(kiln-serial-nests-to-parallel))" | FileCheck %s

// A rank-0 fill and a sum over every element, with the mean after it: one
// run of serial code, put in a one-iteration parallel loop (a kernel). The
// parallel loop after it stays as it is.
// CHECK-LABEL: func.func @mean(
// CHECK:         scf.parallel (%{{.*}}) = (%{{.*}}) to (%{{.*}}) step (%{{.*}}) {
// CHECK:           memref.store
// CHECK:           scf.for
// CHECK:           arith.divf
// CHECK:           memref.store
// CHECK:           scf.reduce
// CHECK:         scf.parallel
// CHECK-NOT:     scf.parallel
// CHECK:         return
func.func @mean(%x: memref<8xf32>, %out: memref<f32>, %y: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  %eight = arith.constant 8.0 : f32
  memref.store %zero, %out[] : memref<f32>
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %x[%i] : memref<8xf32>
    %s = memref.load %out[] : memref<f32>
    %t = arith.addf %s, %v : f32
    memref.store %t, %out[] : memref<f32>
  }
  %s = memref.load %out[] : memref<f32>
  %m = arith.divf %s, %eight : f32
  memref.store %m, %out[] : memref<f32>
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %v = memref.load %x[%i] : memref<8xf32>
    memref.store %v, %y[%i] : memref<8xf32>
  }
  return
}
