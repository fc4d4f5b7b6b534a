// kiln-training-step refuses an unknown optimizer.
// RUN: kiln-opt %s -verify-diagnostics -kiln-training-step=optimizer=lamb

// expected-error @+1 {{kiln-training-step: unknown optimizer 'lamb' (expected adamw, adam or sgd)}}
module {
  func.func @loss(%w: tensor<4xf32>) -> tensor<f32> {
    %0 = kiln.reduce sum %w {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
