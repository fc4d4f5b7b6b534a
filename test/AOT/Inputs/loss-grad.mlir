// The gradient of a mean cross-entropy over [1, 16] positions (static: one
// full 16-wide tile), without ignore_index: the case whose count of
// positions came out as 1, not 16.
func.func @grad(%x: tensor<1x16x5xf32>, %t: tensor<1x16xi64>, %g: tensor<f32>) -> tensor<1x16x5xf32> {
  %0 = kiln.loss_grad %x, %t, %g {from_logits}
      : (tensor<1x16x5xf32>, tensor<1x16xi64>, tensor<f32>) -> tensor<1x16x5xf32>
  return %0 : tensor<1x16x5xf32>
}
