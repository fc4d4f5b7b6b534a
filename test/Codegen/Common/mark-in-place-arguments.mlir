// RUN: kiln-opt %s -split-input-file -kiln-mark-in-place-arguments -verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-mark-in-place-arguments="in-place=false" -verify-diagnostics | FileCheck %s --check-prefix=GPU

// Only the argument a result updates is writable; every other tensor
// argument is not (scalars get no attribute). Without in-place updates (GPU)
// none is.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<4xf32> {bufferization.writable = false}
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<4xf32> {bufferization.writable = true}
// CHECK-SAME: %{{[a-z0-9]+}}: i64)
// GPU-LABEL: func.func @step
// GPU-SAME: %{{[a-z0-9]+}}: tensor<4xf32> {bufferization.writable = false}
// GPU-SAME: %{{[a-z0-9]+}}: tensor<4xf32> {bufferization.writable = false}
func.func @step(%g: tensor<4xf32>, %p: tensor<4xf32>, %n: i64)
    -> (tensor<4xf32> {kiln.updates = 1 : i64}) {
  %0 = kiln.add %p, %g : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// The dialect refuses what names no argument of the result's type.
// expected-error @+1 {{'func.func' op result #0 of type 'tensor<4xf32>' updates argument #1 of type 'tensor<5xf32>': it must be an f32 tensor of the same type}}
func.func @wrong_type(%g: tensor<4xf32>, %p: tensor<5xf32>)
    -> (tensor<4xf32> {kiln.updates = 1 : i64}) {
  return %g : tensor<4xf32>
}

// -----

// expected-error @+1 {{'func.func' op result #0: 'kiln.updates' = 7 names no argument}}
func.func @no_such_argument(%g: tensor<4xf32>)
    -> (tensor<4xf32> {kiln.updates = 7 : i64}) {
  return %g : tensor<4xf32>
}
