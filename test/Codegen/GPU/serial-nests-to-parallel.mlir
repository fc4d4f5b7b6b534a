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
// of the inner loop with that column, and each row only by the positions
// with that id: one parallel loop sorts the positions by row (stably: the
// rank counts smaller rows and earlier positions of the same row), a second
// runs a thread per sorted position and column, where the first position of
// each row adds that row's positions in their order (bit-identical sums).
// CHECK-LABEL: func.func @scatter_rows(
// CHECK-SAME:    %[[G:[^:]*]]: memref<?x8xf32>, %[[IDS:[^:]*]]: memref<?xi64>)
// CHECK:         %[[N:.*]] = memref.dim %[[IDS]]
// CHECK:         %[[TABLE:.*]] = memref.alloc() : memref<10x8xf32>
// CHECK:         %[[ORDER:.*]] = memref.alloc(%[[N]]) : memref<?xi64>
// CHECK:         scf.parallel (%[[I:.*]]) = (%{{.*}}) to (%[[N]])
// CHECK:           %[[IDI:.*]] = memref.load %[[IDS]][%[[I]]]
// CHECK:           %[[ROWI:.*]] = arith.index_cast %[[IDI]]
// CHECK:           %[[RANK:.*]] = scf.for %[[J:.*]] = %{{.*}} to %[[N]] step %{{.*}} iter_args(%[[R:.*]] = %{{.*}})
// CHECK:             %[[IDJ:.*]] = memref.load %[[IDS]][%[[J]]]
// CHECK:             %[[ROWJ:.*]] = arith.index_cast %[[IDJ]]
// CHECK-DAG:         %[[LESS:.*]] = arith.cmpi slt, %[[ROWJ]], %[[ROWI]]
// CHECK-DAG:         %[[SAME:.*]] = arith.cmpi eq, %[[ROWJ]], %[[ROWI]]
// CHECK-DAG:         %[[EARLIER:.*]] = arith.cmpi ult, %[[J]], %[[I]]
// CHECK:             %[[TIE:.*]] = arith.andi %[[SAME]], %[[EARLIER]]
// CHECK:             %[[BEFORE:.*]] = arith.ori %[[LESS]], %[[TIE]]
// CHECK:             arith.select %[[BEFORE]]
// CHECK:           memref.store %{{.*}}, %[[ORDER]][%[[RANK]]]
// CHECK:         scf.parallel (%[[K:.*]], %[[D:.*]]) = (%{{.*}}, %{{.*}}) to (%[[N]], %{{.*}})
// CHECK:           %[[FIRST:.*]] = arith.cmpi eq, %[[K]]
// CHECK:           %[[HEAD:.*]] = scf.if %[[FIRST]] -> (i1) {
// CHECK:           } else {
// CHECK:             memref.load %[[ORDER]]
// CHECK:             arith.cmpi ne
// CHECK:           scf.if %[[HEAD]] {
// CHECK:             scf.while (%[[KK:.*]] = %[[K]])
// CHECK:               arith.cmpi ult, %[[KK]], %[[N]]
// CHECK:               scf.condition
// CHECK:             } do {
// CHECK:               %[[POS:.*]] = memref.load %[[ORDER]]
// CHECK:               %[[NP:.*]] = arith.index_cast %[[POS]]
// CHECK:               %[[ID:.*]] = memref.load %[[IDS]][%[[NP]]]
// CHECK:               %[[ROW:.*]] = arith.index_cast %[[ID]]
// CHECK:               %[[OK:.*]] = arith.cmpi slt, %[[ROW]]
// CHECK:               scf.if %[[OK]] {
// CHECK-NEXT:            memref.load %[[TABLE]][%[[ROW]], %[[D]]]
// CHECK-NEXT:            memref.load %[[G]][%[[NP]], %[[D]]]
// CHECK-NEXT:            arith.addf
// CHECK-NEXT:            memref.store %{{.*}}, %[[TABLE]][%[[ROW]], %[[D]]]
// CHECK:         memref.dealloc %[[ORDER]]
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

// The same scatter over positions from 1 (not from 0): the columns run in
// parallel, each keeping the positions' order.
// CHECK-LABEL: func.func @scatter_rows_from_one(
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
func.func @scatter_rows_from_one(%g: memref<?x8xf32>, %ids: memref<?xi64>) -> memref<10x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c10 = arith.constant 10 : index
  %n = memref.dim %ids, %c0 : memref<?xi64>
  %table = memref.alloc() : memref<10x8xf32>
  scf.for %i = %c1 to %n step %c1 {
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
