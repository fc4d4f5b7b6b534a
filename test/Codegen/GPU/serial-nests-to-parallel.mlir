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

// embedding_grad's scatter-add: rows of %g added into rows of a fresh table
// chosen by the ids. Each column of the table is touched only by iterations
// of the inner loop with that column: the columns run in parallel, each
// keeping the positions' order (bit-identical sums).
// CHECK-LABEL: func.func @scatter_rows(
// CHECK:         %[[TABLE:.*]] = memref.alloc()
// CHECK:         scf.parallel (%[[D:.*]]) = (%{{.*}}) to (%{{.*}}) step (%{{.*}}) {
// CHECK-NEXT:      scf.for %[[N:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:             %[[ID:.*]] = memref.load %{{.*}}[%[[N]]]
// CHECK:             scf.if
// CHECK-NEXT:          memref.load %[[TABLE]][%{{.*}}, %[[D]]]
// CHECK-NEXT:          memref.load %{{.*}}[%[[N]], %[[D]]]
// CHECK-NEXT:          arith.addf
// CHECK-NEXT:          memref.store %{{.*}}, %[[TABLE]][%{{.*}}, %[[D]]]
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:      scf.reduce
// CHECK-NOT:     scf.parallel
// CHECK:         return
func.func @scatter_rows(%g: memref<?x8xf32>, %ids: memref<?xi64>) -> memref<10x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c10 = arith.constant 10 : index
  %n = memref.dim %ids, %c0 : memref<?xi64>
  %table = memref.alloc() : memref<10x8xf32>
  scf.for %i = %c0 to %n step %c1 {
    %id = memref.load %ids[%i] : memref<?xi64>
    %row = arith.index_cast %id : i64 to index
    %ok = arith.cmpi slt, %row, %c10 : index
    scf.if %ok {
      scf.for %d = %c0 to %c8 step %c1 {
        %t = memref.load %table[%row, %d] : memref<10x8xf32>
        %v = memref.load %g[%i, %d] : memref<?x8xf32>
        %s = arith.addf %t, %v : f32
        memref.store %s, %table[%row, %d] : memref<10x8xf32>
      }
    }
  }
  return %table : memref<10x8xf32>
}

// Nests whose inner iterations may touch the same memory stay serial (one
// thread): a store whose last index is not the inner loop's (every column
// into element 0), a written buffer that is an argument (which another
// argument may alias), the written buffer read outside the inner loop, and
// an inner loop whose bounds change with the outer one.
// CHECK-LABEL: func.func @dependent_columns(
// CHECK:         scf.parallel (%{{.*}}) = (%c0_{{[0-9]+}}) to (%c1_{{[0-9]+}}) step
// CHECK-NEXT:      scf.for %[[N0:.*]] = %c0 to %dim step %c1 {
// CHECK-NEXT:        memref.load %{{.*}}[%[[N0]]]
// CHECK:         scf.parallel (%{{.*}}) = (%c0_{{[0-9]+}}) to (%c1_{{[0-9]+}}) step
// CHECK-NEXT:      scf.for %[[N1:.*]] = %c0 to %dim step %c1 {
// CHECK-NEXT:        memref.load %{{.*}}[%[[N1]]]
// CHECK:         scf.parallel (%{{.*}}) = (%c0_{{[0-9]+}}) to (%c1_{{[0-9]+}}) step
// CHECK-NEXT:      scf.for %[[N2:.*]] = %c0 to %dim step %c1 {
// CHECK-NEXT:        memref.load %{{.*}}[%[[N2]]]
// CHECK:         scf.parallel (%{{.*}}) = (%c0_{{[0-9]+}}) to (%c1_{{[0-9]+}}) step
// CHECK-NEXT:      scf.for %[[N3:.*]] = %c0 to %dim step %c1 {
// CHECK-NEXT:        memref.load %{{.*}}[%[[N3]]]
// CHECK-NOT:     scf.parallel
// CHECK:         return
func.func @dependent_columns(%g: memref<?x8xf32>, %ids: memref<?xindex>,
                             %out: memref<10x8xf32>)
    -> (memref<10x8xf32>, memref<10x8xf32>, memref<10x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %n = memref.dim %ids, %c0 : memref<?xindex>
  %a = memref.alloc() : memref<10x8xf32>
  scf.for %i = %c0 to %n step %c1 {
    %row = memref.load %ids[%i] : memref<?xindex>
    scf.for %d = %c0 to %c8 step %c1 {
      %t = memref.load %a[%row, %c0] : memref<10x8xf32>
      %v = memref.load %g[%i, %d] : memref<?x8xf32>
      %s = arith.addf %t, %v : f32
      memref.store %s, %a[%row, %c0] : memref<10x8xf32>
    }
  }
  memref.dealloc %a : memref<10x8xf32>
  scf.for %i = %c0 to %n step %c1 {
    %row = memref.load %ids[%i] : memref<?xindex>
    scf.for %d = %c0 to %c8 step %c1 {
      %t = memref.load %out[%row, %d] : memref<10x8xf32>
      %v = memref.load %g[%i, %d] : memref<?x8xf32>
      %s = arith.addf %t, %v : f32
      memref.store %s, %out[%row, %d] : memref<10x8xf32>
    }
  }
  %b = memref.alloc() : memref<10x8xf32>
  scf.for %i = %c0 to %n step %c1 {
    %row = memref.load %ids[%i] : memref<?xindex>
    %first = memref.load %b[%row, %c0] : memref<10x8xf32>
    scf.for %d = %c0 to %c8 step %c1 {
      %t = memref.load %b[%row, %d] : memref<10x8xf32>
      %s = arith.addf %t, %first : f32
      memref.store %s, %b[%row, %d] : memref<10x8xf32>
    }
  }
  %c = memref.alloc() : memref<10x8xf32>
  scf.for %i = %c0 to %n step %c1 {
    %row = memref.load %ids[%i] : memref<?xindex>
    scf.for %d = %c0 to %row step %c1 {
      %t = memref.load %c[%row, %d] : memref<10x8xf32>
      %v = memref.load %g[%i, %d] : memref<?x8xf32>
      %s = arith.addf %t, %v : f32
      memref.store %s, %c[%row, %d] : memref<10x8xf32>
    }
  }
  return %out, %b, %c : memref<10x8xf32>, memref<10x8xf32>, memref<10x8xf32>
}
