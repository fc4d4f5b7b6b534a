// A tiny model for the kiln-compile tests: y = 2 * relu(x).
func.func @double_relu(%x: tensor<?x3xf32> {kiln.name = "x"}) -> tensor<?x3xf32> {
  %r = kiln.relu %x : (tensor<?x3xf32>) -> tensor<?x3xf32>
  %y = kiln.scale %r {factor = 2.0 : f64} : (tensor<?x3xf32>) -> tensor<?x3xf32>
  return %y : tensor<?x3xf32>
}
