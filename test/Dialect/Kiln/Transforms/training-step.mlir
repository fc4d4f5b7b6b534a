// kiln-training-step: loss, gradients, clipping and optimizer updates in one
// function that takes the optimizer state, lr and step and returns the new
// parameters and state, each marked with the argument it replaces
// (kiln.updates), the updates guarded by the loss being finite.
// RUN: kiln-opt %s -kiln-training-step="optimizer=adamw clip-norm=1.0" | FileCheck %s
// RUN: kiln-opt %s -kiln-training-step="optimizer=sgd momentum=0.9" | FileCheck %s --check-prefix=SGD

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<3x4xf32> {kiln.kind = "param", kiln.name = "w"}
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<3x4xf32> {kiln.kind = "state", kiln.name = "w.m"}
// CHECK-SAME: %[[V:[a-z0-9]+]]: tensor<3x4xf32> {kiln.kind = "state", kiln.name = "w.v"}
// CHECK-SAME: %[[LR:[a-z0-9]+]]: tensor<f32> {kiln.kind = "lr", kiln.name = "lr", kiln.require = "finite-nonnegative"}
// CHECK-SAME: %[[STEP:[a-z0-9]+]]: i64 {kiln.kind = "step", kiln.name = "step", kiln.require = "positive"}
// CHECK-SAME: -> (tensor<f32>, tensor<3x4xf32> {kiln.name = "param.w", kiln.updates = 2 : i64}, tensor<3x4xf32> {kiln.name = "state.w.m", kiln.updates = 3 : i64}, tensor<3x4xf32> {kiln.name = "state.w.v", kiln.updates = 4 : i64})
// CHECK: %[[LOSS:.+]] = kiln.cross_entropy
// CHECK: %[[SCALE:.+]] = kiln.global_norm_scale
// CHECK: %[[G:.+]] = kiln.mul %{{.+}}, %[[SCALE]]
// CHECK: kiln.adam_update %[[W]], %[[G]], %[[M]], %[[V]], %[[LR]], %[[STEP]] if_finite %[[LOSS]] {decoupled}

// SGD-LABEL: func.func @train_step
// SGD-SAME: tensor<3x4xf32> {kiln.kind = "state", kiln.name = "w.momentum"}
// SGD-SAME: tensor<3x4xf32> {kiln.name = "param.w", kiln.updates = 2 : i64}, tensor<3x4xf32> {kiln.name = "state.w.momentum", kiln.updates = 3 : i64}
// SGD-NOT: global_norm_scale
// SGD: %[[LOSS:.+]] = kiln.cross_entropy
// SGD: kiln.sgd_update {{.*}} if_finite %[[LOSS]] {momentum = 9.000000e-01 : f64}
func.func @loss(%x: tensor<?x4xf32> {kiln.kind = "input"}, %t: tensor<?xi64> {kiln.kind = "input"},
                %w: tensor<3x4xf32> {kiln.kind = "param", kiln.name = "w"}) -> tensor<f32> {
  %0 = kiln.linear %x, %w : (tensor<?x4xf32>, tensor<3x4xf32>) -> tensor<?x3xf32>
  %1 = kiln.cross_entropy %0, %t : (tensor<?x3xf32>, tensor<?xi64>) -> tensor<f32>
  return %1 : tensor<f32>
}
