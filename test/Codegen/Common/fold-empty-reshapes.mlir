// RUN: kiln-opt %s -kiln-fold-empty-reshapes | FileCheck %s

// A reshape of a tensor with a static 0 size holds no elements: an empty
// tensor of the result's sizes (a collapse's from the products of its
// groups, an expand's from the sizes it names). Bufferized, the collapse of
// 0 x ? into ? had become a memref.collapse_shape to a static 0, which its
// verifier refuses.
// CHECK-LABEL: func.func @collapse(
// CHECK-NOT:     tensor.collapse_shape
// CHECK:         %[[ZERO:.*]] = arith.constant 0 : index
// CHECK:         %[[E:.*]] = tensor.empty(%[[ZERO]]) : tensor<?x32xf32>
// CHECK:         return %[[E]]
func.func @collapse(%x: tensor<0x?x32xf32>) -> tensor<?x32xf32> {
  %0 = tensor.collapse_shape %x [[0, 1], [2]] : tensor<0x?x32xf32> into tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}

// CHECK-LABEL: func.func @expand(
// CHECK-SAME:    %[[N:[a-z0-9]+]]: index
// CHECK-NOT:     tensor.expand_shape
// CHECK:         %[[E:.*]] = tensor.empty(%[[N]]) : tensor<0x?x4xf32>
// CHECK:         return %[[E]]
func.func @expand(%x: tensor<0x?xf32>, %n: index) -> tensor<0x?x4xf32> {
  %0 = tensor.expand_shape %x [[0], [1, 2]] output_shape [0, %n, 4] : tensor<0x?xf32> into tensor<0x?x4xf32>
  return %0 : tensor<0x?x4xf32>
}

// Reshapes of tensors that may hold elements stay.
// CHECK-LABEL: func.func @kept(
// CHECK:         tensor.collapse_shape
// CHECK:         tensor.expand_shape
func.func @kept(%x: tensor<?x?x32xf32>, %y: tensor<2x?xf32>, %n: index) -> (tensor<?x32xf32>, tensor<2x?x4xf32>) {
  %0 = tensor.collapse_shape %x [[0, 1], [2]] : tensor<?x?x32xf32> into tensor<?x32xf32>
  %1 = tensor.expand_shape %y [[0], [1, 2]] output_shape [2, %n, 4] : tensor<2x?xf32> into tensor<2x?x4xf32>
  return %0, %1 : tensor<?x32xf32>, tensor<2x?x4xf32>
}
