// kiln-training-step with split refuses a module that already has one of
// the functions it adds.
// RUN: kiln-opt %s -split-input-file -verify-diagnostics -kiln-training-step="split=1"

// expected-error @+1 {{kiln-training-step: 'grad_step' already exists}}
module {
  func.func @loss(%w: tensor<4xf32>) -> tensor<f32> {
    %0 = kiln.reduce sum %w {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
  func.func @grad_step() {
    return
  }
}

// -----

// expected-error @+1 {{kiln-training-step: 'update_step' already exists}}
module {
  func.func @loss(%w: tensor<4xf32>) -> tensor<f32> {
    %0 = kiln.reduce sum %w {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
  func.func @update_step() {
    return
  }
}
