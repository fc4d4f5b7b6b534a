// Softmax, reductions, shape ops and constants (ReductionsAndShapes.cpp).
// RUN: kiln-opt %s -convert-kiln-to-linalg -split-input-file | FileCheck %s

// Softmax: max, sum of exp(x - max), then exp / sum.
// CHECK-LABEL: func.func @softmax
// CHECK: arith.constant 0xFF800000 : f32
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: arith.addf
// CHECK: math.exp
// CHECK: arith.divf
func.func @softmax(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %0 = kiln.softmax %x : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// log_softmax on axis 0: x - max - log(sum).
// CHECK-LABEL: func.func @log_softmax
// CHECK: iterator_types = ["reduction", "parallel"]
// CHECK: math.log
// CHECK: arith.subf
func.func @log_softmax(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %0 = kiln.log_softmax %x {axis = 0 : i64} : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// mean with keep_dims: a sum, a division by the count, an expand_shape.
// CHECK-LABEL: func.func @reduce_mean
// CHECK: iterator_types = ["parallel", "reduction"]
// CHECK: arith.divf
// CHECK: tensor.expand_shape {{.*}} {{\[\[}}0, 1]]
func.func @reduce_mean(%x: tensor<?x8xf32>) -> tensor<?x1xf32> {
  %0 = kiln.reduce mean %x {axes = array<i64: 1>, keep_dims} : (tensor<?x8xf32>) -> tensor<?x1xf32>
  return %0 : tensor<?x1xf32>
}

// -----

// Reshape computes its sizes (0 keeps, -1 divides) and uses tensor.reshape.
// CHECK-LABEL: func.func @reshape
// CHECK: arith.divui
// CHECK: %[[S:.+]] = tensor.from_elements
// CHECK: tensor.reshape %{{.+}}(%[[S]])
func.func @reshape(%x: tensor<?x?x6xf32>) -> tensor<?x?x2x3xf32> {
  %0 = kiln.reshape %x [0, 0, 2, -1] : (tensor<?x?x6xf32>) -> tensor<?x?x2x3xf32>
  return %0 : tensor<?x?x2x3xf32>
}

// -----

// Transpose is linalg.transpose.
// CHECK-LABEL: func.func @transpose
// CHECK: linalg.transpose ins(%{{.+}} : tensor<?x?x2xf32>) outs(%{{.+}} : tensor<2x?x?xf32>) permutation = [2, 0, 1]
func.func @transpose(%x: tensor<?x?x2xf32>) -> tensor<2x?x?xf32> {
  %0 = kiln.transpose %x [2, 0, 1] : (tensor<?x?x2xf32>) -> tensor<2x?x?xf32>
  return %0 : tensor<2x?x?xf32>
}

// -----

// A slice from the end of a dynamic dimension: offset dim - 1, clamped.
// CHECK-LABEL: func.func @slice_last
// CHECK: %[[D:.+]] = tensor.dim
// CHECK: arith.addi %[[D]]
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK: tensor.extract_slice {{.*}} [1, 1, 1] : tensor<?x?x4xf32> to tensor<?x1x4xf32>
func.func @slice_last(%x: tensor<?x?x4xf32>) -> tensor<?x1x4xf32> {
  %0 = kiln.slice %x {axis = 1 : i64, start = -1 : i64} : (tensor<?x?x4xf32>) -> tensor<?x1x4xf32>
  return %0 : tensor<?x1x4xf32>
}

// -----

// Concatenation inserts each input at its running offset.
// CHECK-LABEL: func.func @concat
// CHECK: tensor.empty
// CHECK: tensor.insert_slice
// CHECK: tensor.insert_slice
func.func @concat(%a: tensor<?x3xf32>, %b: tensor<?x5xf32>) -> tensor<?x8xf32> {
  %0 = kiln.concat %a, %b {axis = 1 : i64} : (tensor<?x3xf32>, tensor<?x5xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// A result with no elements is just made (an insert_slice at offset 0 of a
// dimension of size 0 had been out of bounds to its verifier), and a piece
// with no elements adds nothing (it would sit at offset == size).
// CHECK-LABEL: func.func @concat_empty
// CHECK-NOT: tensor.insert_slice
// CHECK: return
// CHECK-LABEL: func.func @concat_empty_piece
// CHECK-COUNT-1: tensor.insert_slice
// CHECK-NOT: tensor.insert_slice
// CHECK: return
func.func @concat_empty(%a: tensor<0x3xf32>, %b: tensor<0x3xf32>) -> tensor<0x6xf32> {
  %0 = kiln.concat %a, %b {axis = 1 : i64} : (tensor<0x3xf32>, tensor<0x3xf32>) -> tensor<0x6xf32>
  return %0 : tensor<0x6xf32>
}
func.func @concat_empty_piece(%a: tensor<2x3xf32>, %b: tensor<2x0xf32>) -> tensor<2x3xf32> {
  %0 = kiln.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x0xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Likewise a slice whose result has no elements (kiln-fuzz-ir found it: an
// extract_slice at offset 0 of the static 0 dimension did not verify): an
// empty tensor of the result's sizes, a slice where no size is a static 0.
// CHECK-LABEL: func.func @slice_empty(
// CHECK-NOT: tensor.extract_slice
// CHECK: tensor.empty() : tensor<0x1x4xf32>
// CHECK-LABEL: func.func @slice_empty_axis(
// CHECK: tensor.extract_slice
func.func @slice_empty(%x: tensor<0x?x4xf32>) -> tensor<0x1x4xf32> {
  %0 = kiln.slice %x {axis = 1 : i64, start = -1 : i64} : (tensor<0x?x4xf32>) -> tensor<0x1x4xf32>
  return %0 : tensor<0x1x4xf32>
}
func.func @slice_empty_axis(%x: tensor<2x?x4xf32>) -> tensor<2x?x4xf32> {
  %0 = kiln.slice %x {axis = 1 : i64, start = 3 : i64} : (tensor<2x?x4xf32>) -> tensor<2x?x4xf32>
  return %0 : tensor<2x?x4xf32>
}

// -----

// A large splat is a fill, not an array of every element (4e9 elements had
// made kiln-compile allocate 16 GB).
// CHECK-LABEL: func.func @big_splat
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[EMPTY:.*]] = tensor.empty() : tensor<4000000000xf32>
// CHECK: linalg.fill ins(%[[ONE]] : f32) outs(%[[EMPTY]] : tensor<4000000000xf32>)
func.func @big_splat() -> tensor<4000000000xf32> {
  %0 = kiln.constant dense<1.0> : tensor<4000000000xf32>
  return %0 : tensor<4000000000xf32>
}

// -----

// A constant becomes arith.constant.
// CHECK-LABEL: func.func @constant
// CHECK: arith.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
func.func @constant() -> tensor<2xf32> {
  %0 = kiln.constant dense<[1.0, 2.0]> : tensor<2xf32>
  return %0 : tensor<2xf32>
}
