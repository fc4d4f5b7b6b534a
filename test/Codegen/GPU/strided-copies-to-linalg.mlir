// RUN: kiln-opt %s --kiln-strided-copies-to-linalg | FileCheck %s

// A copy into a view becomes linalg.copy (a kernel); a whole-buffer copy
// stays (gpu.memcpy).
// CHECK-LABEL: func.func @copies(
// CHECK:         linalg.copy ins(%{{.*}} : memref<4xf32>) outs(%{{.*}} : memref<4xf32, strided<[1], offset: 4>>)
// CHECK:         memref.copy %{{.*}}, %{{.*}} : memref<8xf32> to memref<8xf32>
func.func @copies(%a: memref<4xf32>, %b: memref<8xf32>, %c: memref<8xf32>) {
  %v = memref.subview %b[4] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 4>>
  memref.copy %a, %v : memref<4xf32> to memref<4xf32, strided<[1], offset: 4>>
  memref.copy %b, %c : memref<8xf32> to memref<8xf32>
  return
}
