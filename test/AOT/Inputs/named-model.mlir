// A function whose entry point would take the model's own symbol.
func.func @model(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = kiln.relu %x : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
