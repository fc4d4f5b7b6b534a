// RUN: kiln-opt %s -split-input-file -kiln-merge-parallel-regions | FileCheck %s

// Two regions with only a constant between them: one region, the constant
// before it, no extra barrier (the first work-sharing loop already waits).
// CHECK-LABEL: func.func @adjacent
// CHECK:         %[[G:.+]] = arith.constant 2.0
// CHECK-NEXT:    omp.parallel {
// CHECK-NEXT:      omp.wsloop {
// CHECK:           arith.constant 1.0
// CHECK:           omp.yield
// CHECK-NOT:       omp.barrier
// CHECK:           omp.wsloop {
// CHECK:           arith.addf %{{.+}}, %[[G]]
// CHECK-NOT:     omp.parallel
// CHECK:         return
func.func @adjacent(%m: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
        %f = arith.constant 1.0 : f32
        memref.store %f, %m[%i] : memref<?xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  %g = arith.constant 2.0 : f32
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
        %v = memref.load %m[%i] : memref<?xf32>
        %s = arith.addf %v, %g : f32
        memref.store %s, %m[%i] : memref<?xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  return
}

// -----

// A first loop that does not wait (nowait): a barrier keeps the second
// region's threads from starting before the first's all finished.
// CHECK-LABEL: func.func @nowait
// CHECK:         omp.parallel {
// CHECK:           omp.wsloop nowait {
// CHECK:           omp.barrier
// CHECK-NEXT:      omp.wsloop {
// CHECK-NOT:     omp.parallel
func.func @nowait(%m: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %f = arith.constant 1.0 : f32
  omp.parallel {
    omp.wsloop nowait {
      omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
        memref.store %f, %m[%i] : memref<?xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
        %v = memref.load %m[%i] : memref<?xf32>
        %s = arith.addf %v, %f : f32
        memref.store %s, %m[%i] : memref<?xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  return
}

// -----

// What runs between the regions reads memory (a reduction's result, say):
// it must run once, after the first region; nothing merges.
// CHECK-LABEL: func.func @load_between
// CHECK:         omp.parallel {
// CHECK:           omp.terminator
// CHECK:         memref.load
// CHECK:         omp.parallel {
func.func @load_between(%m: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %f = arith.constant 1.0 : f32
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
        memref.store %f, %m[%i] : memref<?xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  %first = memref.load %m[%c0] : memref<?xf32>
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
        memref.store %first, %m[%i] : memref<?xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  return
}

// -----

// A region with a clause (its own thread count) stays as it is.
// CHECK-LABEL: func.func @clause
// CHECK:         omp.parallel num_threads
// CHECK:         omp.parallel {
func.func @clause(%m: memref<?xf32>, %n: index, %t: i32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %f = arith.constant 1.0 : f32
  omp.parallel num_threads(%t : i32) {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
        memref.store %f, %m[%i] : memref<?xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
        memref.store %f, %m[%i] : memref<?xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  return
}

// -----

// A contraction's cache blocks: for each column block, for each k block,
// copy B (one region), then the rows (another). One region holds both
// loops; every thread runs them, the work-sharing loops split each block,
// and no barrier is added: the rows' loop, last in each block, waits.
// CHECK-LABEL: func.func @blocks
// CHECK:         omp.parallel {
// CHECK-NEXT:      scf.for
// CHECK-NEXT:        scf.for
// CHECK:               arith.muli
// CHECK:               omp.wsloop {
// CHECK:               omp.wsloop {
// CHECK-NOT:       omp.barrier
// CHECK:           omp.terminator
// CHECK-NOT:     omp.parallel
// CHECK:         return
func.func @blocks(%a: memref<?xf32>, %b: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %f = arith.constant 1.0 : f32
  scf.for %nb = %c0 to %c2 step %c1 {
    scf.for %kb = %c0 to %c2 step %c1 {
      %base = arith.muli %nb, %kb : index
      omp.parallel {
        omp.wsloop {
          omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
            %j = arith.addi %i, %base : index
            %v = memref.load %b[%j] : memref<?xf32>
            memref.store %v, %a[%i] : memref<?xf32>
            omp.yield
          }
        }
        omp.terminator
      }
      omp.parallel {
        omp.wsloop {
          omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
            %v = memref.load %a[%i] : memref<?xf32>
            %s = arith.addf %v, %f : f32
            memref.store %s, %b[%i] : memref<?xf32>
            omp.yield
          }
        }
        omp.terminator
      }
    }
  }
  return
}

// -----

// A loop that carries a value, or does more than one region and pure ops
// (a store here), keeps its region inside.
// CHECK-LABEL: func.func @stays_serial
// CHECK:         scf.for
// CHECK:           omp.parallel {
// CHECK:         scf.for
// CHECK:           memref.store
// CHECK:           omp.parallel {
func.func @stays_serial(%a: memref<?xf32>, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %f = arith.constant 1.0 : f32
  %sum = scf.for %k = %c0 to %c2 step %c1 iter_args(%acc = %f) -> (f32) {
    omp.parallel {
      omp.wsloop {
        omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
          memref.store %acc, %a[%i] : memref<?xf32>
          omp.yield
        }
      }
      omp.terminator
    }
    %next = arith.addf %acc, %f : f32
    scf.yield %next : f32
  }
  scf.for %k = %c0 to %c2 step %c1 {
    memref.store %f, %a[%k] : memref<?xf32>
    omp.parallel {
      omp.wsloop {
        omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
          memref.store %f, %a[%i] : memref<?xf32>
          omp.yield
        }
      }
      omp.terminator
    }
  }
  return %sum : f32
}
