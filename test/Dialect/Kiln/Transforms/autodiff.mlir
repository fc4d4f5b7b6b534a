// kiln-autodiff adds <function>_grad returning the loss and the gradient of
// every parameter.
// RUN: kiln-opt %s -kiln-autodiff=function=loss | FileCheck %s
// RUN: kiln-opt %s -kiln-autodiff=function=twice | FileCheck %s --check-prefix=TWICE
// RUN: kiln-opt %s -kiln-autodiff=function=max_loss | FileCheck %s --check-prefix=MAX
// RUN: kiln-opt %s -kiln-autodiff=function=middle_sum | FileCheck %s --check-prefix=SPREAD
// RUN: kiln-opt %s -kiln-autodiff=function=dynamic_width | kiln-opt | FileCheck %s --check-prefix=DYNAMIC
// RUN: kiln-opt %s -kiln-autodiff=function=abs_loss | FileCheck %s --check-prefix=ABS

// A linear layer with a summed loss: the seed gradient 1 is spread over the
// output, then dW = gᵀ·x and db = Σ g; the input (not a parameter) gets no
// result; the forward function is kept.
// CHECK-LABEL: func.func @loss(
// CHECK-LABEL: func.func @loss_grad
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<?x4xf32> {kiln.kind = "input"}, %[[W:[a-z0-9]+]]: tensor<3x4xf32> {kiln.kind = "param", kiln.name = "w"}, %[[B:[a-z0-9]+]]: tensor<3xf32> {kiln.kind = "param", kiln.name = "b"})
// CHECK-SAME: -> (tensor<f32>, tensor<3x4xf32> {kiln.name = "grad.w"}, tensor<3xf32> {kiln.name = "grad.b"})
// CHECK: %[[Y:.+]] = kiln.linear %[[X]], %[[W]], %[[B]]
// CHECK: %[[LOSS:.+]] = kiln.reduce sum %[[Y]]
// CHECK: %[[ONE:.+]] = kiln.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[G1:.+]] = kiln.reshape %[[ONE]] [1, 1]
// CHECK: %[[ZERO:.+]] = kiln.scale %[[Y]] {factor = 0.000000e+00 : f64}
// CHECK: %[[G:.+]] = kiln.add %[[ZERO]], %[[G1]]
// CHECK: %[[DW:.+]] = kiln.matmul %[[G]], %[[X]] {transpose_lhs}
// CHECK: %[[DB:.+]] = kiln.reduce sum %[[G]] {axes = array<i64: 0>}
// CHECK: return %[[LOSS]], %[[DW]], %[[DB]]
func.func @loss(%x: tensor<?x4xf32> {kiln.kind = "input"},
                %w: tensor<3x4xf32> {kiln.kind = "param", kiln.name = "w"},
                %b: tensor<3xf32> {kiln.kind = "param", kiln.name = "b"}) -> tensor<f32> {
  %0 = kiln.linear %x, %w, %b : (tensor<?x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  %1 = kiln.reduce sum %0 {axes = array<i64: 0, 1>} : (tensor<?x3xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// A parameter the loss does not use gets a zero gradient; a value used
// twice gets the sum of both contributions.
// TWICE-LABEL: func.func @twice_grad
// TWICE: kiln.constant dense<1.000000e+00> : tensor<f32>
// TWICE: %[[A:.+]] = kiln.mul %{{.+}}, %{{.+}}
// TWICE-NEXT: %[[B:.+]] = kiln.mul %{{.+}}, %{{.+}}
// TWICE-NEXT: %[[SUM:.+]] = kiln.add %[[A]], %[[B]]
// TWICE: %[[Z:.+]] = kiln.constant dense<0.000000e+00> : tensor<2xf32>
// TWICE: return %{{.+}}, %[[SUM]], %[[Z]]
func.func @twice(%p: tensor<4xf32> {kiln.kind = "param"},
                 %unused: tensor<2xf32> {kiln.kind = "param"}) -> tensor<f32> {
  %0 = kiln.mul %p, %p : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = kiln.reduce sum %0 {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// The gradient of a max reduction is one fused op with the same axes.
// MAX-LABEL: func.func @max_loss_grad
// MAX: kiln.reduce max
// MAX: kiln.reduce_max_grad %{{.+}}, %arg0 {axes = array<i64: 1>, keep_dims} : (tensor<?x1xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
func.func @max_loss(%x: tensor<?x8xf32> {kiln.kind = "param"}) -> tensor<f32> {
  %0 = kiln.reduce max %x {axes = array<i64: 1>, keep_dims} : (tensor<?x8xf32>) -> tensor<?x1xf32>
  %1 = kiln.reduce sum %0 {axes = array<i64: 0, 1>} : (tensor<?x1xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// The gradient of a sum over a middle axis, without keep_dims, with several
// dynamic kept sizes: the reduced axis comes back as a trailing 1 (each kept
// size copied with 0), moved into place by a transpose, and broadcast.
// SPREAD-LABEL: func.func @middle_sum_grad
// SPREAD: %[[R:.+]] = kiln.reshape %{{.+}} [0, 0, 0, 1] : (tensor<?x?x?xf32>) -> tensor<?x?x?x1xf32>
// SPREAD-NEXT: %[[T:.+]] = kiln.transpose %[[R]] [0, 3, 1, 2] : (tensor<?x?x?x1xf32>) -> tensor<?x1x?x?xf32>
// SPREAD: kiln.add %{{.+}}, %[[T]] : (tensor<?x3x?x?xf32>, tensor<?x1x?x?xf32>) -> tensor<?x3x?x?xf32>
func.func @middle_sum(%x: tensor<?x3x?x?xf32> {kiln.kind = "param"}) -> tensor<f32> {
  %0 = kiln.reduce sum %x {axes = array<i64: 1>} : (tensor<?x3x?x?xf32>) -> tensor<?x?x?xf32>
  %1 = kiln.reduce sum %0 {axes = array<i64: 0, 1, 2>} : (tensor<?x?x?xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// A linear over [B, T, K] whose output width is dynamic: the weight's
// gradient cannot reshape to [-1, width] (that had emitted an invalid
// reshape); it moves the width first and keeps it.
// DYNAMIC-LABEL: func.func @dynamic_width_grad
// DYNAMIC: kiln.transpose %{{.*}} [2, 0, 1] : (tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
// DYNAMIC: kiln.reshape %{{.*}} [0, -1] : (tensor<?x?x?xf32>) -> tensor<?x?xf32>
// DYNAMIC: kiln.transpose %{{.*}} [2, 0, 1] : (tensor<?x?x4xf32>) -> tensor<4x?x?xf32>
// DYNAMIC: kiln.reshape %{{.*}} [0, -1] : (tensor<4x?x?xf32>) -> tensor<4x?xf32>
// DYNAMIC: kiln.matmul %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<?x?xf32>, tensor<4x?xf32>) -> tensor<?x4xf32>
func.func @dynamic_width(%x: tensor<?x?x4xf32>, %w: tensor<?x4xf32> {kiln.kind = "param"}) -> tensor<f32> {
  %0 = kiln.linear %x, %w : (tensor<?x?x4xf32>, tensor<?x4xf32>) -> tensor<?x?x?xf32>
  %1 = kiln.reduce sum %0 {axes = array<i64: 0, 1, 2>} : (tensor<?x?x?xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// abs: g·sign(x) as relu's gradient at x minus relu's gradient at -x, so that
// x == 0 gets 0 (as PyTorch).
// ABS-LABEL: func.func @abs_loss_grad
// ABS-SAME: (%[[X:[a-z0-9]+]]: tensor<?x4xf32>
// ABS: %[[P:.+]] = kiln.activation_grad relu %[[G:.+]], %[[X]]
// ABS: %[[NEG:.+]] = kiln.scale %[[X]] {factor = -1.000000e+00 : f64}
// ABS: %[[N:.+]] = kiln.activation_grad relu %[[G]], %[[NEG]]
// ABS: %[[DX:.+]] = kiln.sub %[[P]], %[[N]]
// ABS: return %{{.+}}, %[[DX]]
func.func @abs_loss(%x: tensor<?x4xf32> {kiln.kind = "param", kiln.name = "x"}) -> tensor<f32> {
  %0 = kiln.abs %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %1 = kiln.reduce sum %0 {axes = array<i64: 0, 1>} : (tensor<?x4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
