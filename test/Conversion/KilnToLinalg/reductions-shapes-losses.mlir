// Softmax, reductions, shape ops, constants and losses.
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

// -----

// Cross-entropy: log-sum-exp per row, a per-position loss loop with the
// clamped target read and the ignore_index test, the sum of the losses, and
// the mean over the positions not ignored (a sum of the mask, computed from
// the targets).
// CHECK-LABEL: func.func @cross_entropy
// CHECK: math.log
// CHECK: %[[LOSSES:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK: arith.minsi
// CHECK: tensor.extract
// CHECK: arith.cmpi eq
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]{{.*}} ins(%[[LOSSES]]
// CHECK: %[[COUNT:.+]] = linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]{{.*}} ins(%arg1 : tensor<?x?xi64>)
// CHECK: ^bb0(%[[T:.+]]: i64, %[[ACC:.+]]: f32):
// CHECK: %[[IGNORED:.+]] = arith.cmpi eq, %[[T]], %c0_i64
// CHECK: %[[ONE:.+]] = arith.select %[[IGNORED]]
// CHECK: arith.addf %[[ONE]], %[[ACC]]
// CHECK: arith.divf
func.func @cross_entropy(%x: tensor<?x?x7xf32>, %t: tensor<?x?xi64>) -> tensor<f32> {
  %0 = kiln.cross_entropy %x, %t {ignore_index = 0 : i64, label_smoothing = 0.1 : f64}
      : (tensor<?x?x7xf32>, tensor<?x?xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// A mean without ignore_index divides by the number of positions: the
// product of the sizes, in integers, not a reduction of the constant 1
// (which the vectorizer applied once per 16-wide tile).
// CHECK-LABEL: func.func @cross_entropy_mean
// CHECK-SAME: (%[[X:.+]]: tensor<?x?x7xf32>, %[[T:.+]]: tensor<?x?xi64>)
// CHECK: %[[N0:.+]] = arith.muli %{{.+}}, %[[D0:[a-z0-9_]+]] : index
// CHECK-NEXT: %{{.+}} = arith.constant 1 : index
// CHECK-NEXT: %[[D1:.+]] = tensor.dim %[[T]], %{{.+}} : tensor<?x?xi64>
// CHECK-NEXT: %[[N:.+]] = arith.muli %[[N0]], %[[D1]] : index
// CHECK-NEXT: %[[I:.+]] = arith.index_cast %[[N]] : index to i64
// CHECK-NEXT: %[[F:.+]] = arith.sitofp %[[I]] : i64 to f32
// CHECK: %[[COUNT:.+]] = linalg.fill ins(%[[F]] : f32)
// CHECK: linalg.generic {{.*}}ins(%{{.+}}, %[[COUNT]] : tensor<f32>, tensor<f32>)
// CHECK: arith.divf
// CHECK-NOT: iterator_types = ["reduction", "reduction"]
// CHECK: return
func.func @cross_entropy_mean(%x: tensor<?x?x7xf32>, %t: tensor<?x?xi64>) -> tensor<f32> {
  %0 = kiln.cross_entropy %x, %t : (tensor<?x?x7xf32>, tensor<?x?xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// NLL with reduction none: no log-sum-exp and no final sum.
// CHECK-LABEL: func.func @nll_none
// CHECK-NOT: math.log
// CHECK: tensor.extract
// CHECK-NOT: iterator_types = ["reduction"
// CHECK: return
func.func @nll_none(%x: tensor<?x7xf32>, %t: tensor<?xi32>) -> tensor<?xf32> {
  %0 = kiln.nll_loss %x, %t {reduction = #kiln<loss_reduction none>}
      : (tensor<?x7xf32>, tensor<?xi32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
