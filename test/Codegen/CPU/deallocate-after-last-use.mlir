// RUN: kiln-opt %s -pass-pipeline="builtin.module(func.func(kiln-deallocate-after-last-use))" | FileCheck %s

func.func private @kernel(memref<?xf32>, memref<?xf32>)
func.func private @kernel2(memref<4x?xf32>)

// Each buffer is freed right after the last call that uses it, or a view
// of it, instead of at the end of the function.
// CHECK-LABEL: func.func @frees_early
// CHECK: %[[A:.+]] = memref.alloc
// CHECK: %[[B:.+]] = memref.alloc
// CHECK: call @kernel(%[[A]], %[[B]])
// CHECK: %[[V:.+]] = memref.expand_shape %[[A]]
// CHECK: call @kernel2(%[[V]])
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK: %[[C:.+]] = memref.alloc
// CHECK: call @kernel(%[[B]], %[[C]])
// CHECK-NEXT: memref.dealloc %[[B]]
// CHECK-NEXT: return %[[C]]
func.func @frees_early(%n: index) -> memref<?xf32> {
  %a = memref.alloc(%n) : memref<?xf32>
  %b = memref.alloc(%n) : memref<?xf32>
  call @kernel(%a, %b) : (memref<?xf32>, memref<?xf32>) -> ()
  %c4 = arith.constant 4 : index
  %q = arith.divui %n, %c4 : index
  %v = memref.expand_shape %a [[0, 1]] output_shape [4, %q] : memref<?xf32> into memref<4x?xf32>
  call @kernel2(%v) : (memref<4x?xf32>) -> ()
  %c = memref.alloc(%n) : memref<?xf32>
  call @kernel(%b, %c) : (memref<?xf32>, memref<?xf32>) -> ()
  memref.dealloc %a : memref<?xf32>
  memref.dealloc %b : memref<?xf32>
  return %c : memref<?xf32>
}

// A use inside a loop: freed after the loop.
// CHECK-LABEL: func.func @loop_use
// CHECK: %[[A:.+]] = memref.alloc
// CHECK: scf.for
// CHECK: call @kernel(%[[A]]
// CHECK: }
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK: call @kernel
func.func @loop_use(%n: index, %out: memref<?xf32>) {
  %a = memref.alloc(%n) : memref<?xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    func.call @kernel(%a, %out) : (memref<?xf32>, memref<?xf32>) -> ()
  }
  call @kernel(%out, %out) : (memref<?xf32>, memref<?xf32>) -> ()
  memref.dealloc %a : memref<?xf32>
  return
}

// A buffer that a loop yields (so its result may alias it) is freed after
// the last use of that result.
// CHECK-LABEL: func.func @yielded_keeps_place
// CHECK: scf.for
// CHECK: scf.yield
// CHECK: call @kernel
// CHECK-NEXT: memref.dealloc
// CHECK-NEXT: return
func.func @yielded_keeps_place(%n: index, %out: memref<?xf32>) {
  %a = memref.alloc(%n) : memref<?xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%x = %a) -> (memref<?xf32>) {
    scf.yield %x : memref<?xf32>
  }
  call @kernel(%r, %out) : (memref<?xf32>, memref<?xf32>) -> ()
  memref.dealloc %a : memref<?xf32>
  return
}
