// RUN: kiln-opt %s --kiln-strided-copies-to-linalg --split-input-file | FileCheck %s --check-prefix=COPY
// RUN: kiln-opt %s --pass-pipeline="builtin.module(func.func(kiln-serial-nests-to-parallel))" --split-input-file | FileCheck %s --check-prefix=SERIAL

// A copy into a view becomes linalg.copy (a kernel); a whole-buffer copy
// stays (gpu.memcpy).
// COPY-LABEL: func.func @copies(
// COPY:         linalg.copy ins(%{{.*}} : memref<4xf32>) outs(%{{.*}} : memref<4xf32, strided<[1], offset: 4>>)
// COPY:         memref.copy %{{.*}}, %{{.*}} : memref<8xf32> to memref<8xf32>
func.func @copies(%a: memref<4xf32>, %b: memref<8xf32>, %c: memref<8xf32>) {
  %v = memref.subview %b[4] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 4>>
  memref.copy %a, %v : memref<4xf32> to memref<4xf32, strided<[1], offset: 4>>
  memref.copy %b, %c : memref<8xf32> to memref<8xf32>
  return
}

// -----

// A rank-0 fill and a sum over every element, with the mean after it: one
// run of serial code, put in a one-iteration parallel loop (a kernel). The
// parallel loop after it stays as it is.
// SERIAL-LABEL: func.func @mean(
// SERIAL:         scf.parallel (%{{.*}}) = (%{{.*}}) to (%{{.*}}) step (%{{.*}}) {
// SERIAL:           memref.store
// SERIAL:           scf.for
// SERIAL:           arith.divf
// SERIAL:           memref.store
// SERIAL:           scf.reduce
// SERIAL:         scf.parallel
// SERIAL-NOT:     scf.parallel
// SERIAL:         return
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
