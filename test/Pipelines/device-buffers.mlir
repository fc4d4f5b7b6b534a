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

memref.global "private" constant @table : memref<4xf32> = dense<1.0>
func.func @global() -> memref<4xf32> {
  // expected-error @+1 {{'memref.get_global' op is host memory, which GPU kernels cannot read}}
  %t = memref.get_global @table : memref<4xf32>
  return %t : memref<4xf32>
}
