func.func @twice(%x: tensor<?x3xbf16>) -> tensor<?x3xbf16> {
  %0 = kiln.scale %x {factor = 2.0 : f64} : (tensor<?x3xbf16>) -> tensor<?x3xbf16>
  return %0 : tensor<?x3xbf16>
}
