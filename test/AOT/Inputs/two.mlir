// Two entry points, to pick from with --functions.
func.func @first(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = kiln.relu %x : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
func.func @second(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = kiln.tanh %x : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
