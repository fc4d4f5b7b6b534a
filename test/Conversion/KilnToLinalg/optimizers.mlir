// Optimizer updates (Optimizers.cpp).
// RUN: kiln-opt %s -convert-kiln-to-linalg -split-input-file | FileCheck %s

// Optimizer updates write the new state into the old state's tensors (linalg
// outs), so that a training step can update its arguments in place; with
// `if_finite`, each element keeps its old value unless |loss| < inf.
// The bias corrections 1 / (1 - beta^t) are computed once per call; the
// elements multiply by them, and divide once (m_hat by the denominator).
// CHECK-LABEL: func.func @adam_in_place
// CHECK-SAME: (%[[P:[a-z0-9]+]]: tensor<4x8xf32>, %[[G:[a-z0-9]+]]: tensor<4x8xf32>, %[[M:[a-z0-9]+]]: tensor<4x8xf32>, %[[V:[a-z0-9]+]]: tensor<4x8xf32>, %[[LR:[a-z0-9]+]]: tensor<f32>, %{{.+}}: i64, %[[LOSS:[a-z0-9]+]]: tensor<f32>)
// CHECK: %[[POW1:.+]] = math.powf
// CHECK: %[[C1:.+]] = arith.subf %{{.+}}, %[[POW1]]
// CHECK: %[[BC1:.+]] = arith.divf %{{.+}}, %[[C1]]
// CHECK: %[[POW2:.+]] = math.powf
// CHECK: %[[C2:.+]] = arith.subf %{{.+}}, %[[POW2]]
// CHECK: %[[BC2:.+]] = arith.divf %{{.+}}, %[[C2]]
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[G]], %[[LR]], %[[LOSS]] : tensor<4x8xf32>, tensor<f32>, tensor<f32>)
// CHECK-SAME: outs(%[[P]], %[[M]], %[[V]] : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK: ^bb0(%{{.+}}: f32, %{{.+}}: f32, %[[GUARD:.+]]: f32, %[[OLDP:.+]]: f32, %[[OLDM:.+]]: f32, %[[OLDV:.+]]: f32)
// CHECK: arith.mulf %{{.+}}, %[[BC1]] : f32
// CHECK: arith.mulf %{{.+}}, %[[BC2]] : f32
// CHECK: math.sqrt
// CHECK: arith.divf
// CHECK-NOT: arith.divf
// CHECK: %[[ABS:.+]] = math.absf %[[GUARD]]
// CHECK: %[[FINITE:.+]] = arith.cmpf olt, %[[ABS]], %{{.+}} : f32
// CHECK: %[[NP:.+]] = arith.select %[[FINITE]], %{{.+}}, %[[OLDP]]
// CHECK: %[[NM:.+]] = arith.select %[[FINITE]], %{{.+}}, %[[OLDM]]
// CHECK: %[[NV:.+]] = arith.select %[[FINITE]], %{{.+}}, %[[OLDV]]
// CHECK: linalg.yield %[[NP]], %[[NM]], %[[NV]]
func.func @adam_in_place(%p: tensor<4x8xf32>, %g: tensor<4x8xf32>, %m: tensor<4x8xf32>,
                         %v: tensor<4x8xf32>, %lr: tensor<f32>, %t: i64, %loss: tensor<f32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %0:3 = kiln.adam_update %p, %g, %m, %v, %lr, %t if_finite %loss {decoupled}
      : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>, i64, tensor<f32>)
      -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
  return %0#0, %0#1, %0#2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @sgd_in_place
// CHECK-SAME: (%[[P:[a-z0-9]+]]: tensor<16xf32>, %[[G:[a-z0-9]+]]: tensor<16xf32>, %[[B:[a-z0-9]+]]: tensor<16xf32>, %[[LR:[a-z0-9]+]]: tensor<f32>)
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[G]], %[[LR]] : tensor<16xf32>, tensor<f32>)
// CHECK-SAME: outs(%[[P]], %[[B]] : tensor<16xf32>, tensor<16xf32>)
// CHECK-NOT: arith.select
// CHECK: linalg.yield
func.func @sgd_in_place(%p: tensor<16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>, %lr: tensor<f32>)
    -> (tensor<16xf32>, tensor<16xf32>) {
  %0:2 = kiln.sgd_update %p, %g, %b, %lr {momentum = 0.9 : f64}
      : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>)
  return %0#0, %0#1 : tensor<16xf32>, tensor<16xf32>
}
