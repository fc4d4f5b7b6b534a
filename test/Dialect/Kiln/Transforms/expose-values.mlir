// kiln-expose-values: a function also returns every f32 value its kiln ops
// compute, in program order, named after the op and its location.
// RUN: kiln-opt %s -kiln-expose-values=function=f | FileCheck %s
// RUN: not kiln-opt %s -kiln-expose-values=function=g 2>&1 | FileCheck %s --check-prefix=MISSING

// The old result keeps its name; the gelu, the add (also the result) and
// the linear follow, named "#<i>:<op>@<file:line:col>" (a space in the
// file name becomes '_').
// CHECK-LABEL: func.func @f
// CHECK-SAME: -> (tensor<4x8xf32> {kiln.name = "out"},
// CHECK-SAME: tensor<4x8xf32> {kiln.name = "#0:kiln.gelu@model.cpp:10:3"},
// CHECK-SAME: tensor<4x8xf32> {kiln.name = "#1:kiln.add@model.cpp:11:3"},
// CHECK-SAME: tensor<4x3xf32> {kiln.name = "#2:kiln.linear@model_with_a_space.cpp:12:3"})
// CHECK: %[[G:.*]] = kiln.gelu
// CHECK: %[[A:.*]] = kiln.add
// CHECK: %[[L:.*]] = kiln.linear
// CHECK: return %[[A]], %[[G]], %[[A]], %[[L]] :
// MISSING: kiln-expose-values: no function 'g'
func.func @f(%x: tensor<4x8xf32>, %w: tensor<3x8xf32>) -> (tensor<4x8xf32> {kiln.name = "out"}) {
  %0 = kiln.gelu %x : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("model.cpp":10:3)
  %1 = kiln.add %0, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("model.cpp":11:3)
  %2 = kiln.linear %1, %w : (tensor<4x8xf32>, tensor<3x8xf32>) -> tensor<4x3xf32> loc("model with a space.cpp":12:3)
  return %1 : tensor<4x8xf32>
}
