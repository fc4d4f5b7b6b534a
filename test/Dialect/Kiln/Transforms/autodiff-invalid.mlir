// What kiln-autodiff refuses, with the reason.
// RUN: kiln-opt %s -split-input-file -verify-diagnostics -kiln-autodiff=function=loss

// The loss must be a scalar.
// expected-error @+1 {{'func.func' op must return a scalar loss (tensor<f32>) as its first result to be differentiated}}
func.func @loss(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// A backward op has no gradient itself (no second derivatives).
func.func @loss(%g: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<f32> {
  // expected-error @+1 {{'kiln.activation_grad' op cannot be differentiated yet: it has no gradient}}
  %0 = kiln.activation_grad relu %g, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = kiln.reduce sum %0 {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// A missing function.
// expected-error @+1 {{kiln-autodiff: no function 'loss'}}
module {
  func.func @other() {
    return
  }
}

// -----

// Multi-head attention's backward pass splits heads of the projections'
// widths: weights of dynamic shape are refused (it had emitted invalid IR).
func.func @loss(%x: tensor<2x3x8xf32>, %w: tensor<8x8xf32> {kiln.kind = "param"}, %wo: tensor<?x?xf32> {kiln.kind = "param"}) -> tensor<f32> {
  // expected-error @+1 {{'kiln.mha' op has no gradient with weights of dynamic shape ('tensor<?x?xf32>'): give the weights static shapes}}
  %0 = kiln.mha %x, %x weights(%w, %w, %w, %wo) {num_heads = 2 : i64} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<?x?xf32>) -> tensor<2x3x8xf32>
  %1 = kiln.reduce sum %0 {axes = array<i64: 0, 1, 2>} : (tensor<2x3x8xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// Decoding ops have no gradient: a write into a cache, and attention over it.
func.func @loss(%c: tensor<1x8x4xf32>, %x: tensor<1x1x4xf32>, %p: i64) -> tensor<f32> {
  // expected-error @+1 {{'kiln.update_slice' op cannot be differentiated yet: it has no gradient}}
  %0 = kiln.update_slice %c, %x, %p {axis = 1 : i64} : (tensor<1x8x4xf32>, tensor<1x1x4xf32>, i64) -> tensor<1x8x4xf32>
  %1 = kiln.reduce sum %0 {axes = array<i64: 0, 1, 2>} : (tensor<1x8x4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

func.func @loss(%q: tensor<1x1x4xf32>, %c: tensor<1x8x4xf32>, %p: i64) -> tensor<f32> {
  // expected-error @+1 {{'kiln.attention' op has no gradient with a query 'offset' (attention over a key/value cache is for inference)}}
  %0 = kiln.attention %q, %c, %c offset %p {num_heads = 2 : i64, causal} : (tensor<1x1x4xf32>, tensor<1x8x4xf32>, tensor<1x8x4xf32>, i64) -> tensor<1x1x4xf32>
  %1 = kiln.reduce sum %0 {axes = array<i64: 0, 1, 2>} : (tensor<1x1x4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
