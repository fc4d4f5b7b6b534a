// Folds and canonicalization patterns of the kiln dialect.
// RUN: kiln-opt %s -canonicalize -split-input-file | FileCheck %s

// Dropout with p = 0 is the identity.
// CHECK-LABEL: func.func @dropout_zero
// CHECK-SAME: (%[[X:.+]]: tensor<?x8xf32>, %{{.+}}: i64)
// CHECK-NOT: kiln.dropout
// CHECK: return %[[X]]
func.func @dropout_zero(%x: tensor<?x8xf32>, %s: i64) -> tensor<?x8xf32> {
  %0 = kiln.dropout %x, %s {p = 0.0 : f64} : (tensor<?x8xf32>, i64) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// Dropout with p > 0 stays.
// CHECK-LABEL: func.func @dropout_kept
// CHECK: kiln.dropout
func.func @dropout_kept(%x: tensor<?x8xf32>, %s: i64) -> tensor<?x8xf32> {
  %0 = kiln.dropout %x, %s {p = 0.5 : f64} : (tensor<?x8xf32>, i64) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// Scaling by 1 is the identity.
// CHECK-LABEL: func.func @scale_one
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>)
// CHECK-NOT: kiln.scale
// CHECK: return %[[X]]
func.func @scale_one(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.scale %x {factor = 1.0 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Reshape of reshape becomes one reshape; kept sizes come from the inner one.
// CHECK-LABEL: func.func @reshape_reshape
// CHECK-SAME: (%[[X:.+]]: tensor<?x?x512xf32>)
// CHECK: %[[R:.+]] = kiln.reshape %[[X]] [0, 0, 8, 4, 16] : (tensor<?x?x512xf32>) -> tensor<?x?x8x4x16xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_reshape(%x: tensor<?x?x512xf32>) -> tensor<?x?x8x4x16xf32> {
  %0 = kiln.reshape %x [0, 0, 8, 64] : (tensor<?x?x512xf32>) -> tensor<?x?x8x64xf32>
  %1 = kiln.reshape %0 [0, 0, 0, 4, 16] : (tensor<?x?x8x64xf32>) -> tensor<?x?x8x4x16xf32>
  return %1 : tensor<?x?x8x4x16xf32>
}

// -----

// Splitting heads and merging them back is the identity.
// CHECK-LABEL: func.func @reshape_round_trip
// CHECK-SAME: (%[[X:.+]]: tensor<?x?x512xf32>)
// CHECK-NOT: kiln.reshape
// CHECK: return %[[X]]
func.func @reshape_round_trip(%x: tensor<?x?x512xf32>) -> tensor<?x?x512xf32> {
  %0 = kiln.reshape %x [0, 0, 8, 64] : (tensor<?x?x512xf32>) -> tensor<?x?x8x64xf32>
  %1 = kiln.reshape %0 [0, 0, 512] : (tensor<?x?x8x64xf32>) -> tensor<?x?x512xf32>
  return %1 : tensor<?x?x512xf32>
}

// -----

// An inner size known only at run time cannot be composed: both stay.
// CHECK-LABEL: func.func @reshape_inferred_dynamic
// CHECK-COUNT-2: kiln.reshape
func.func @reshape_inferred_dynamic(%x: tensor<?x8xf32>) -> tensor<?x2x2xf32> {
  %0 = kiln.reshape %x [-1, 4] : (tensor<?x8xf32>) -> tensor<?x4xf32>
  %1 = kiln.reshape %0 [0, 2, 2] : (tensor<?x4xf32>) -> tensor<?x2x2xf32>
  return %1 : tensor<?x2x2xf32>
}

// -----

// Transposes compose; a pair of inverse transposes disappears.
// CHECK-LABEL: func.func @transpose_transpose
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[T:.+]] = kiln.transpose %[[X]] [2, 0, 1] : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
// CHECK-NEXT: return %[[T]], %[[X]]
func.func @transpose_transpose(%x: tensor<2x3x4xf32>) -> (tensor<4x2x3xf32>, tensor<2x3x4xf32>) {
  %0 = kiln.transpose %x [1, 0, 2] : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %1 = kiln.transpose %0 [2, 1, 0] : (tensor<3x2x4xf32>) -> tensor<4x2x3xf32>
  %2 = kiln.transpose %x [0, 2, 1] : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
  %3 = kiln.transpose %2 [0, 2, 1] : (tensor<2x4x3xf32>) -> tensor<2x3x4xf32>
  return %1, %3 : tensor<4x2x3xf32>, tensor<2x3x4xf32>
}

// -----

// Unused constants disappear; used ones stay.
// CHECK-LABEL: func.func @constants
// CHECK: %[[C:.+]] = kiln.constant dense<2.000000e+00> : tensor<4xf32>
// CHECK-NOT: kiln.constant
// CHECK: kiln.add %{{.+}}, %[[C]]
func.func @constants(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = kiln.constant dense<2.0> : tensor<4xf32>
  %d = kiln.constant dense<3.0> : tensor<4xf32>
  %0 = kiln.add %x, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
