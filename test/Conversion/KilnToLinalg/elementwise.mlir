// Elementwise kiln ops become one parallel linalg.generic with broadcasting
// indexing maps; dynamic sizes come from tensor.dim (Elementwise.cpp).
// RUN: kiln-opt %s -convert-kiln-to-linalg -split-input-file | FileCheck %s

// A lower-rank operand broadcasts through a projected indexing map.
// CHECK-DAG: #[[ID3:.+]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[LAST:.+]] = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-LABEL: func.func @add_broadcast
// CHECK-SAME: (%[[A:.+]]: tensor<?x?x4xf32>, %[[B:.+]]: tensor<4xf32>)
// CHECK: %[[D0:.+]] = tensor.dim %[[A]], %{{.+}} : tensor<?x?x4xf32>
// CHECK: %[[D1:.+]] = tensor.dim %[[A]], %{{.+}} : tensor<?x?x4xf32>
// CHECK: %[[E:.+]] = tensor.empty(%[[D0]], %[[D1]]) : tensor<?x?x4xf32>
// CHECK: linalg.generic {indexing_maps = [#[[ID3]], #[[LAST]], #[[ID3]]], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK-SAME: ins(%[[A]], %[[B]] : tensor<?x?x4xf32>, tensor<4xf32>) outs(%[[E]] : tensor<?x?x4xf32>)
// CHECK: arith.addf
// CHECK-NOT: kiln.
func.func @add_broadcast(%a: tensor<?x?x4xf32>, %b: tensor<4xf32>) -> tensor<?x?x4xf32> {
  %0 = kiln.add %a, %b : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
  return %0 : tensor<?x?x4xf32>
}

// -----

// Static unit dimensions are collapsed away before broadcasting.
// CHECK-LABEL: func.func @mul_unit_dims
// CHECK: %[[C:.+]] = tensor.collapse_shape %{{.+}} {{\[\[}}0, 1, 2]] : tensor<?x1x1xf32> into tensor<?xf32>
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.+}}, %[[C]] : tensor<?x?x4xf32>, tensor<?xf32>)
// CHECK: arith.mulf
func.func @mul_unit_dims(%a: tensor<?x?x4xf32>, %c: tensor<?x1x1xf32>) -> tensor<?x?x4xf32> {
  %0 = kiln.mul %a, %c : (tensor<?x?x4xf32>, tensor<?x1x1xf32>) -> tensor<?x?x4xf32>
  return %0 : tensor<?x?x4xf32>
}

// -----

// sub and div keep their operand order.
// CHECK-LABEL: func.func @sub_div
// CHECK: ^bb0(%[[X:.+]]: f32, %[[Y:.+]]: f32, %{{.+}}: f32):
// CHECK-NEXT: arith.subf %[[X]], %[[Y]]
// CHECK: ^bb0(%[[P:.+]]: f32, %[[Q:.+]]: f32, %{{.+}}: f32):
// CHECK-NEXT: arith.divf %[[P]], %[[Q]]
func.func @sub_div(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = kiln.sub %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = kiln.div %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Unary math and scale.
// CHECK-LABEL: func.func @unary
// CHECK: arith.maximumf
// CHECK: math.erf
// CHECK: math.tanh
// CHECK: math.tanh
// CHECK: math.exp
// CHECK: math.log
// CHECK: arith.constant 1.250000e-01 : f32
// CHECK: arith.mulf
func.func @unary(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = kiln.relu %x : (tensor<8xf32>) -> tensor<8xf32>
  %1 = kiln.gelu %0 : (tensor<8xf32>) -> tensor<8xf32>
  %2 = kiln.gelu %1 {approximate_tanh} : (tensor<8xf32>) -> tensor<8xf32>
  %3 = kiln.tanh %2 : (tensor<8xf32>) -> tensor<8xf32>
  %4 = kiln.exp %3 : (tensor<8xf32>) -> tensor<8xf32>
  %5 = kiln.log %4 : (tensor<8xf32>) -> tensor<8xf32>
  %6 = kiln.scale %5 {factor = 0.125 : f64} : (tensor<8xf32>) -> tensor<8xf32>
  return %6 : tensor<8xf32>
}

// -----

// Abs is math.absf.
// CHECK-LABEL: func.func @abs
// CHECK-SAME: (%[[X:.+]]: tensor<?x8xf32>)
// CHECK: %[[D:.+]] = tensor.dim %[[X]], %{{.+}}
// CHECK: %[[E:.+]] = tensor.empty(%[[D]]) : tensor<?x8xf32>
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[X]] : tensor<?x8xf32>) outs(%[[E]] : tensor<?x8xf32>)
// CHECK: ^bb0(%[[IN:.+]]: f32, %{{.+}}: f32)
// CHECK: %[[A:.+]] = math.absf %[[IN]] : f32
// CHECK: linalg.yield %[[A]]
func.func @abs(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %0 = kiln.abs %x : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// SiLU is x / (1 + exp(-x)); with kiln.mul it is SwiGLU's gate.
// CHECK-LABEL: func.func @silu
// CHECK: linalg.generic
// CHECK: ^bb0(%[[IN:.+]]: f32, %{{.+}}: f32)
// CHECK: %[[N:.+]] = arith.negf %[[IN]] : f32
// CHECK: %[[E:.+]] = math.exp %[[N]] : f32
// CHECK: %[[D:.+]] = arith.addf %{{.+}}, %[[E]] : f32
// CHECK: %[[S:.+]] = arith.divf %[[IN]], %[[D]] : f32
// CHECK: linalg.yield %[[S]]
func.func @silu(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %0 = kiln.silu %x : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// kiln.cast: one generic, arith.truncf (round to nearest even) to bf16 and
// arith.extf back.
// CHECK-LABEL: func.func @casts
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.+}} : tensor<?x8xf32>) outs(%{{.+}} : tensor<?x8xbf16>)
// CHECK: arith.truncf %{{.+}} : f32 to bf16
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.+}} : tensor<?x8xbf16>) outs(%{{.+}} : tensor<?x8xf32>)
// CHECK: arith.extf %{{.+}} : bf16 to f32
func.func @casts(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %0 = kiln.cast %x : (tensor<?x8xf32>) -> tensor<?x8xbf16>
  %1 = kiln.cast %0 : (tensor<?x8xbf16>) -> tensor<?x8xf32>
  return %1 : tensor<?x8xf32>
}
