// RUN: kiln-opt %s --kiln-host-interface --split-input-file --verify-diagnostics | FileCheck %s

// A public function of GPU code copies its buffer arguments into device
// memory, and its results back into new host buffers; it frees the device
// buffers it owned (the result computed on the device, the arguments'
// copies) but not twice a buffer returned twice, and not what it already
// frees. Private functions (kernels' callers) are left alone.
// CHECK-LABEL: func.func @f(
// CHECK-SAME:      %[[X:.*]]: memref<?x4xf32>, %[[N:.*]]: i64)
// CHECK:         %[[DIM:.*]] = memref.dim %[[X]], %c0
// CHECK:         %[[DX:.*]] = gpu.alloc  (%[[DIM]]) : memref<?x4xf32>
// CHECK:         gpu.memcpy  %[[DX]], %[[X]]
// CHECK:         %[[R:.*]] = gpu.alloc  (%{{.*}}) : memref<?x4xf32>
// CHECK:         gpu.launch_func @kernels::@k blocks in {{.*}} args(%[[DX]] : memref<?x4xf32>, %[[R]] : memref<?x4xf32>)
// CHECK:         %[[H1:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x4xf32>
// CHECK:         gpu.memcpy  %[[H1]], %[[R]]
// CHECK:         %[[H2:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x4xf32>
// CHECK:         gpu.memcpy  %[[H2]], %[[R]]
// CHECK:         %[[H3:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x4xf32>
// CHECK:         gpu.memcpy  %[[H3]], %[[DX]]
// CHECK:         gpu.dealloc  %[[R]]
// CHECK-NOT:     gpu.dealloc  %[[R]]
// CHECK:         gpu.dealloc  %[[DX]]
// CHECK-NOT:     gpu.dealloc
// CHECK:         return %[[H1]], %[[H2]], %[[H3]], %[[N]]
module attributes {gpu.container_module} {
func.func @f(%x: memref<?x4xf32>, %n: i64) -> (memref<?x4xf32>, memref<?x4xf32>, memref<?x4xf32>, i64) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d = memref.dim %x, %c0 : memref<?x4xf32>
  %r = gpu.alloc (%d) : memref<?x4xf32>
  gpu.launch_func @kernels::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%x : memref<?x4xf32>, %r : memref<?x4xf32>)
  return %r, %r, %x, %n : memref<?x4xf32>, memref<?x4xf32>, memref<?x4xf32>, i64
}
// CHECK-LABEL: func.func private @helper(
// CHECK-NOT:     gpu.memcpy
func.func private @helper(%x: memref<4xf32>) -> memref<4xf32> {
  return %x : memref<4xf32>
}
gpu.module @kernels {
  gpu.func @k(%x: memref<?x4xf32>, %r: memref<?x4xf32>) kernel {
    gpu.return
  }
}
}

// -----

// A result whose buffer cannot be traced to a device allocation is refused.
func.func @unknown(%a: memref<4xf32>, %b: memref<4xf32>, %c: i1) -> memref<4xf32> {
  %s = arith.select %c, %a, %b : memref<4xf32>
  // expected-error @+1 {{'func.return' op returns a buffer of unknown origin from GPU code}}
  return %s : memref<4xf32>
}
