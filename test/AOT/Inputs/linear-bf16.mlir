func.func @linear(%x: tensor<?x?x64xf32>, %w: tensor<96x64xf32>, %b: tensor<96xf32>) -> tensor<?x?x96xf32> {
  %0 = kiln.linear %x, %w, %b : (tensor<?x?x64xf32>, tensor<96x64xf32>, tensor<96xf32>) -> tensor<?x?x96xf32>
  return %0 : tensor<?x?x96xf32>
}
