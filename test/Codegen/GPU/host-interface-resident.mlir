// RUN: kiln-opt %s --kiln-host-interface="resident=true" | FileCheck %s
// RUN: kiln-opt %s --kiln-host-interface | FileCheck %s --check-prefix=STAGED

// With `resident`, parameters, optimizer state and what a result updates (a
// decoder's cache) are the caller's device buffers: used in place, never
// staged. Only the input is copied in. A
// result that updates an argument (kiln.updates) is handed over in device
// memory: the buffer computed for it when it is one of its own (%r, not
// freed), else a device copy (the same buffer returned again, an argument
// returned as it is). Other results go to host buffers as before, a
// resident argument's included.
// CHECK-LABEL: func.func @step(
// CHECK-SAME:      %[[W:[a-z0-9]+]]: memref<8xf32> {kiln.kind = "param"
// CHECK-SAME:      %[[M:[a-z0-9]+]]: memref<8xf32> {kiln.kind = "state"
// CHECK-SAME:      %[[C:[a-z0-9]+]]: memref<8xf32> {kiln.kind = "input", kiln.name = "cache"
// CHECK-SAME:      %[[X:[a-z0-9]+]]: memref<8xf32> {kiln.kind = "input", kiln.name = "x"
// CHECK-NOT:     gpu.memcpy {{.*}}%[[W]]
// CHECK-NOT:     gpu.memcpy {{.*}}%[[M]]
// CHECK-NOT:     gpu.memcpy {{.*}}%[[C]]
// CHECK:         %[[DX:.*]] = gpu.alloc  () : memref<8xf32>
// CHECK-NEXT:    gpu.memcpy  %[[DX]], %[[X]]
// CHECK:         %[[R:.*]] = gpu.alloc  () : memref<8xf32>
// CHECK:         gpu.launch_func @kernels::@k {{.*}} args(%[[W]] : memref<8xf32>, %[[M]] : memref<8xf32>, %[[C]] : memref<8xf32>, %[[DX]] : memref<8xf32>, %[[R]] : memref<8xf32>)
// CHECK:         %[[LOSS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8xf32>
// CHECK-NEXT:    gpu.memcpy  %[[LOSS]], %[[R]]
// CHECK-NEXT:    %[[AGAIN:.*]] = gpu.alloc  () : memref<8xf32>
// CHECK-NEXT:    gpu.memcpy  %[[AGAIN]], %[[R]]
// CHECK-NEXT:    %[[SAME:.*]] = gpu.alloc  () : memref<8xf32>
// CHECK-NEXT:    gpu.memcpy  %[[SAME]], %[[C]]
// CHECK-NEXT:    %[[HOSTW:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8xf32>
// CHECK-NEXT:    gpu.memcpy  %[[HOSTW]], %[[W]]
// CHECK-NEXT:    gpu.dealloc  %[[DX]]
// CHECK-NOT:     gpu.dealloc
// CHECK:         return %[[LOSS]], %[[R]], %[[AGAIN]], %[[SAME]], %[[HOSTW]]

// Without it, every buffer argument is staged.
// STAGED-LABEL: func.func @step(
// STAGED-COUNT-4: gpu.memcpy  %{{.*}}, %arg
module attributes {gpu.container_module} {
func.func @step(%w: memref<8xf32> {kiln.kind = "param", kiln.name = "w"},
                %m: memref<8xf32> {kiln.kind = "state", kiln.name = "m"},
                %c: memref<8xf32> {kiln.kind = "input", kiln.name = "cache"},
                %x: memref<8xf32> {kiln.kind = "input", kiln.name = "x"})
    -> (memref<8xf32>,
        memref<8xf32> {kiln.updates = 0 : i64},
        memref<8xf32> {kiln.updates = 1 : i64},
        memref<8xf32> {kiln.updates = 2 : i64},
        memref<8xf32>) {
  %c1 = arith.constant 1 : index
  %r = gpu.alloc () : memref<8xf32>
  gpu.launch_func @kernels::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%w : memref<8xf32>, %m : memref<8xf32>, %c : memref<8xf32>, %x : memref<8xf32>, %r : memref<8xf32>)
  return %r, %r, %r, %c, %w : memref<8xf32>, memref<8xf32>, memref<8xf32>, memref<8xf32>, memref<8xf32>
}
gpu.module @kernels {
  gpu.func @k(%w: memref<8xf32>, %m: memref<8xf32>, %c: memref<8xf32>, %x: memref<8xf32>, %r: memref<8xf32>) kernel {
    gpu.return
  }
}
}
