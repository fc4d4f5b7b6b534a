// kiln-training-step with split: grad_step (the loss and its gradients, the
// loss's tokens recorded when it is a mean cross-entropy or NLL over an
// argument) and update_step (clipping and the optimizer on gradients given
// as arguments, parameters and state updated in place).
// RUN: kiln-opt %s -split-input-file -kiln-training-step="optimizer=adamw clip-norm=1.0 split=1" | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-training-step="optimizer=sgd momentum=0.9 split=1" | FileCheck %s --check-prefix=SGD

// CHECK-LABEL: func.func @grad_step
// CHECK-SAME: (%{{.+}}: tensor<?x4xf32> {kiln.kind = "input"}, %{{.+}}: tensor<?xi64> {kiln.kind = "input", kiln.name = "t"}, %{{.+}}: tensor<3x4xf32> {kiln.kind = "param", kiln.name = "w"})
// CHECK-SAME: -> (tensor<f32>, tensor<3x4xf32> {kiln.name = "grad.w"})
// CHECK-SAME: attributes {kiln.loss_tokens = {arg = 1 : i64, ignore_index = 0 : i64}}
// CHECK: kiln.cross_entropy
// CHECK-NOT: adam_update
// CHECK: return
// CHECK-LABEL: func.func @update_step
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<3x4xf32> {kiln.kind = "param", kiln.name = "w"}
// CHECK-SAME: %[[G:[a-z0-9]+]]: tensor<3x4xf32> {kiln.kind = "input", kiln.name = "grad.w"}
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<3x4xf32> {kiln.kind = "state", kiln.name = "w.m"}
// CHECK-SAME: %[[V:[a-z0-9]+]]: tensor<3x4xf32> {kiln.kind = "state", kiln.name = "w.v"}
// CHECK-SAME: %[[LR:[a-z0-9]+]]: tensor<f32> {kiln.kind = "lr", kiln.name = "lr", kiln.require = "finite-nonnegative"}
// CHECK-SAME: %[[STEP:[a-z0-9]+]]: i64 {kiln.kind = "step", kiln.name = "step", kiln.require = "positive"}
// CHECK-SAME: %[[LOSS:[a-z0-9]+]]: tensor<f32> {kiln.kind = "input", kiln.name = "loss"}
// CHECK-SAME: -> (tensor<3x4xf32> {kiln.name = "param.w", kiln.updates = 0 : i64}, tensor<3x4xf32> {kiln.name = "state.w.m", kiln.updates = 2 : i64}, tensor<3x4xf32> {kiln.name = "state.w.v", kiln.updates = 3 : i64})
// CHECK: %[[SCALE:.+]] = kiln.global_norm_scale %[[G]]
// CHECK: %[[C:.+]] = kiln.mul %[[G]], %[[SCALE]]
// CHECK: kiln.adam_update %[[W]], %[[C]], %[[M]], %[[V]], %[[LR]], %[[STEP]] if_finite %[[LOSS]] {decoupled}
// CHECK-NOT: train_step

// SGD-LABEL: func.func @update_step
// SGD-SAME: tensor<3x4xf32> {kiln.kind = "state", kiln.name = "w.momentum"}
// SGD-SAME: -> (tensor<3x4xf32> {kiln.name = "param.w", kiln.updates = 0 : i64}, tensor<3x4xf32> {kiln.name = "state.w.momentum", kiln.updates = 2 : i64})
// SGD-NOT: global_norm_scale
// SGD: kiln.sgd_update {{.*}} {momentum = 9.000000e-01 : f64}
func.func @loss(%x: tensor<?x4xf32> {kiln.kind = "input"}, %t: tensor<?xi64> {kiln.kind = "input", kiln.name = "t"},
                %w: tensor<3x4xf32> {kiln.kind = "param", kiln.name = "w"}) -> tensor<f32> {
  %0 = kiln.linear %x, %w : (tensor<?x4xf32>, tensor<3x4xf32>) -> tensor<?x3xf32>
  %1 = kiln.cross_entropy %0, %t {ignore_index = 0 : i64} : (tensor<?x3xf32>, tensor<?xi64>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// A summed loss: recorded, so the processes' sums add up.
// CHECK-LABEL: func.func @grad_step
// CHECK-SAME: attributes {kiln.loss_tokens = {arg = 1 : i64, reduction = "sum"}}
// CHECK: return
func.func @loss(%x: tensor<?x4xf32> {kiln.kind = "input"}, %t: tensor<?xi64> {kiln.kind = "input"},
                %w: tensor<3x4xf32> {kiln.kind = "param", kiln.name = "w"}) -> tensor<f32> {
  %0 = kiln.linear %x, %w : (tensor<?x4xf32>, tensor<3x4xf32>) -> tensor<?x3xf32>
  %1 = kiln.cross_entropy %0, %t {reduction = #kiln<loss_reduction sum>} : (tensor<?x3xf32>, tensor<?xi64>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// A loss computed after the loss op: no kiln.loss_tokens (the runtime takes
// it as a mean over rows).
// CHECK-LABEL: func.func @grad_step
// CHECK-NOT: kiln.loss_tokens
// CHECK: return
func.func @loss(%x: tensor<?x4xf32> {kiln.kind = "input"}, %t: tensor<?xi64> {kiln.kind = "input"},
                %w: tensor<3x4xf32> {kiln.kind = "param", kiln.name = "w"}) -> tensor<f32> {
  %0 = kiln.linear %x, %w : (tensor<?x4xf32>, tensor<3x4xf32>) -> tensor<?x3xf32>
  %1 = kiln.cross_entropy %0, %t : (tensor<?x3xf32>, tensor<?xi64>) -> tensor<f32>
  %2 = kiln.scale %1 {factor = 5.000000e-01 : f64} : (tensor<f32>) -> tensor<f32>
  return %2 : tensor<f32>
}
