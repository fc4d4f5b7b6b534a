// RUN: kiln-opt %s -split-input-file -kiln-drop-in-place-results -verify-diagnostics | FileCheck %s

// A result computed in its argument's buffer is dropped; one computed
// elsewhere is copied into the argument first; other results stay.
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[P:.+]]: memref<4xf32>, %[[Q:.+]]: memref<4xf32>) -> memref<f32>
// CHECK: %[[LOSS:.+]] = memref.alloc() : memref<f32>
// CHECK: %[[NEW:.+]] = memref.alloc() : memref<4xf32>
// CHECK-NOT: memref.copy %{{.+}}, %[[P]]
// CHECK: memref.copy %[[NEW]], %[[Q]]
// CHECK-NEXT: return %[[LOSS]] : memref<f32>
func.func @step(%p: memref<4xf32>, %q: memref<4xf32>)
    -> (memref<f32>, memref<4xf32> {kiln.updates = 0 : i64},
        memref<4xf32> {kiln.updates = 1 : i64}) {
  %loss = memref.alloc() : memref<f32>
  %new = memref.alloc() : memref<4xf32>
  %cast = memref.cast %p : memref<4xf32> to memref<4xf32>
  return %loss, %cast, %new : memref<f32>, memref<4xf32>, memref<4xf32>
}

// -----

// Its callers would lose the results: refused.
// expected-error @+1 {{'func.func' op updates arguments in place (kiln.updates) and is called from the module}}
func.func @called(%p: memref<4xf32>) -> (memref<4xf32> {kiln.updates = 0 : i64}) {
  return %p : memref<4xf32>
}
func.func @caller(%p: memref<4xf32>) -> memref<4xf32> {
  %0 = call @called(%p) : (memref<4xf32>) -> memref<4xf32>
  return %0 : memref<4xf32>
}

// -----

// Before bufferization there is no buffer to write: refused.
// expected-error @+1 {{'func.func' op result #0 updates argument #0, which is not a buffer argument (run after one-shot-bufferize)}}
func.func @tensors(%p: tensor<4xf32>) -> (tensor<4xf32> {kiln.updates = 0 : i64}) {
  return %p : tensor<4xf32>
}
