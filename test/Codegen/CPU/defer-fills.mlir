// RUN: kiln-opt %s -split-input-file -kiln-defer-fills | FileCheck %s

// A fill followed by the op that accumulates into the buffer: the fill goes,
// the op is marked with the fill's value (allocations and pure ops may come
// between).
// CHECK-LABEL: func.func @product
// CHECK-NOT: linalg.fill
// CHECK: linalg.generic
// CHECK-SAME: kiln.fill = 0.000000e+00 : f32
func.func @product(%a: memref<4x8xf32>, %b: memref<8x16xf32>) -> memref<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<4x16xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<4x16xf32>)
  %other = memref.alloc() : memref<4xf32>
  %c1 = arith.constant 1 : index
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  memref.dealloc %other : memref<4xf32>
  return %c : memref<4x16xf32>
}

// -----

// A row maximum from -inf; a consumer that never reads its output (a copy)
// makes the fill dead: it goes with no mark.
// CHECK-LABEL: func.func @max_and_copy
// CHECK-NOT: linalg.fill
// CHECK: linalg.generic
// CHECK-SAME: kiln.fill = 0xFF800000 : f32
// CHECK: linalg.copy
// CHECK-NOT: kiln.fill
func.func @max_and_copy(%x: memref<4x8xf32>, %y: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  %inf = arith.constant 0xFF800000 : f32
  %m = memref.alloc() : memref<4xf32>
  linalg.fill ins(%inf : f32) outs(%m : memref<4xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x8xf32>) outs(%m : memref<4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.maximumf %v, %acc : f32
    linalg.yield %s : f32
  }
  %z = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<4xf32>
  linalg.fill ins(%z : f32) outs(%c : memref<4xf32>)
  linalg.copy ins(%y : memref<4xf32>) outs(%c : memref<4xf32>)
  return %m, %c : memref<4xf32>, memref<4xf32>
}

// -----

// Kept: another op touches memory first; the consumer reads the buffer (a
// view of it) as an input; the consumer writes a view, not the buffer.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: linalg.fill
// CHECK-NOT: kiln.fill
func.func @kept(%x: memref<4xf32>, %y: memref<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<4xf32>
  linalg.fill ins(%zero : f32) outs(%a : memref<4xf32>)
  memref.copy %x, %y : memref<4xf32> to memref<4xf32>
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%x : memref<4xf32>) outs(%a : memref<4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %v, %acc : f32
    linalg.yield %s : f32
  }
  %b = memref.alloc() : memref<4xf32>
  linalg.fill ins(%zero : f32) outs(%b : memref<4xf32>)
  %view = memref.subview %b[0] [4] [1] : memref<4xf32> to memref<4xf32, strided<[1]>>
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%view : memref<4xf32, strided<[1]>>) outs(%b : memref<4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %v, %acc : f32
    linalg.yield %s : f32
  }
  %c = memref.alloc() : memref<8xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8xf32>)
  %half = memref.subview %c[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%x : memref<4xf32>) outs(%half : memref<4xf32, strided<[1]>>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %v, %acc : f32
    linalg.yield %s : f32
  }
  return
}
