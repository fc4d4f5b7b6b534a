// Attention forward and backward with heads of 128 (grouped, causal,
// dropout) and of 32 (a padding mask): test/Codegen/GPU/flash-attention.mlir
// compiles it for the GPU and holds its kernels to resource budgets.
func.func @wide(%q: tensor<?x?x512xf32>, %k: tensor<?x?x256xf32>, %g: tensor<?x?x512xf32>, %s: i64)
    -> (tensor<?x?x512xf32>, tensor<?x?x256xf32>) {
  %o = kiln.attention %q, %k, %k seed %s {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal, dropout = 0.1 : f64}
      : (tensor<?x?x512xf32>, tensor<?x?x256xf32>, tensor<?x?x256xf32>, i64) -> tensor<?x?x512xf32>
  %d:3 = kiln.attention_grad %g, %q, %k, %k output %o seed %s {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal, dropout = 0.1 : f64}
      : (tensor<?x?x512xf32>, tensor<?x?x512xf32>, tensor<?x?x256xf32>, tensor<?x?x256xf32>, tensor<?x?x512xf32>, i64)
      -> (tensor<?x?x512xf32>, tensor<?x?x256xf32>, tensor<?x?x256xf32>)
  return %d#0, %d#1 : tensor<?x?x512xf32>, tensor<?x?x256xf32>
}

func.func @narrow(%q: tensor<?x?x128xf32>, %m: tensor<?x?xi1>) -> tensor<?x?x128xf32> {
  %o = kiln.attention %q, %q, %q mask %m {num_heads = 4 : i64}
      : (tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<?x?xi1>) -> tensor<?x?x128xf32>
  return %o : tensor<?x?x128xf32>
}
