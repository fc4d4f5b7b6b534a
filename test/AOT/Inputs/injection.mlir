// A name that would close the header's comment and declare code if copied
// verbatim (kiln-compile.mlir checks it is escaped).
func.func @double_relu(%x: tensor<?x3xf32> {kiln.name = "x*/typedef/**/int/**/injected;/*"}) -> tensor<?x3xf32> {
  %r = kiln.relu %x : (tensor<?x3xf32>) -> tensor<?x3xf32>
  return %r : tensor<?x3xf32>
}
