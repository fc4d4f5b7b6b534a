// kiln-training-step refuses a loss without trainable arguments (arguments
// marked, none of them "param"): it had emitted a kiln.global_norm_scale of
// no gradients, which does not verify (found by kiln-fuzz-ir).
// RUN: kiln-opt %s -verify-diagnostics -kiln-training-step=clip-norm=1

module {
  // expected-error @+1 {{has no trainable arguments for kiln-training-step (none marked kiln.kind = "param")}}
  func.func @loss(%x: tensor<4xf32> {kiln.kind = "input"}) -> tensor<f32> {
    %0 = kiln.reduce sum %x {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
