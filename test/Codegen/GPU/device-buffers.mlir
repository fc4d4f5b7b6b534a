// RUN: kiln-opt %s --kiln-device-buffers --split-input-file --verify-diagnostics | FileCheck %s

// Host allocations, frees and copies become device ones; kernels are left
// alone.
// CHECK-LABEL: func.func @buffers(
// CHECK:         %[[A:.*]] = gpu.alloc  (%{{.*}}) : memref<?x4xf32>
// CHECK:         gpu.memcpy  %[[A]], %{{.*}} : memref<?x4xf32>, memref<?x4xf32>
// CHECK:         gpu.dealloc  %[[A]] : memref<?x4xf32>
// CHECK-NOT:     memref.alloc
// CHECK:       gpu.module @kernels
// CHECK:         memref.alloca
func.func @buffers(%src: memref<?x4xf32>, %n: index) {
  %a = memref.alloc(%n) : memref<?x4xf32>
  memref.copy %src, %a : memref<?x4xf32> to memref<?x4xf32>
  memref.dealloc %a : memref<?x4xf32>
  return
}
gpu.module @kernels {
  gpu.func @k() kernel {
    %s = memref.alloca() : memref<4xf32>
    gpu.return
  }
}

// -----

// A constant is copied into device memory where it is taken, and freed on
// every return.
// CHECK-LABEL: func.func @global(
// CHECK:         %[[H:.*]] = memref.get_global @table : memref<4xf32>
// CHECK:         %[[D:.*]] = gpu.alloc  () : memref<4xf32>
// CHECK:         gpu.memcpy  %[[D]], %[[H]]
// CHECK:         gpu.launch_func @kernels::@use blocks in {{.*}} args(%[[D]] : memref<4xf32>)
// CHECK:         gpu.dealloc  %[[D]]
// CHECK-NEXT:    return
module attributes {gpu.container_module} {
memref.global "private" constant @table : memref<4xf32> = dense<1.0>
func.func @global() {
  %t = memref.get_global @table : memref<4xf32>
  %c1 = arith.constant 1 : index
  gpu.launch_func @kernels::@use blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%t : memref<4xf32>)
  return
}
gpu.module @kernels {
  gpu.func @use(%t: memref<4xf32>) kernel {
    gpu.return
  }
}
}

// -----

// A stack buffer in host code is refused: kernels could not read it.
func.func @stack() {
  // expected-error @+1 {{'memref.alloca' op is host memory, which GPU kernels cannot read}}
  %t = memref.alloca() : memref<4xf32>
  return
}

// -----

// A shape buffer that memref.reshape reads on the host stays host memory.
// CHECK-LABEL: func.func @shape(
// CHECK:         %[[S:.*]] = memref.alloc() : memref<2xindex>
// CHECK:         memref.store %{{.*}}, %[[S]]
// CHECK:         memref.reshape %{{.*}}(%[[S]])
func.func @shape(%x: memref<8xf32>, %n: index) -> memref<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %s = memref.alloc() : memref<2xindex>
  memref.store %c2, %s[%c0] : memref<2xindex>
  memref.store %n, %s[%c1] : memref<2xindex>
  %r = memref.reshape %x(%s) : (memref<8xf32>, memref<2xindex>) -> memref<?x?xf32>
  return %r : memref<?x?xf32>
}

// -----

// Host code reading a buffer is refused: it would read device memory.
func.func @host_load(%n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %a = memref.alloc(%n) : memref<?xf32>
  // expected-error @+1 {{'memref.load' op would access device memory from the host}}
  %v = memref.load %a[%c0] : memref<?xf32>
  return %v : f32
}
