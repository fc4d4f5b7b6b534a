// A result written into its argument in place, of rank 9: more than the C
// interface's kiln_tensor holds (KILN_MAX_RANK).
func.func @grow(%x: tensor<1x1x1x1x1x1x1x1x2xf32>) -> (tensor<1x1x1x1x1x1x1x1x2xf32> {kiln.updates = 0 : i64}) {
  %0 = kiln.relu %x : (tensor<1x1x1x1x1x1x1x1x2xf32>) -> tensor<1x1x1x1x1x1x1x1x2xf32>
  return %0 : tensor<1x1x1x1x1x1x1x1x2xf32>
}
