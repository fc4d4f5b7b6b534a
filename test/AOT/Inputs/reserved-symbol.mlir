// A public function named like a symbol compiled code calls.
func.func @memrefCopy(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = kiln.relu %x : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
