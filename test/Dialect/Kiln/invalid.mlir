// Every verifier error of the kiln dialect, one per split.
// RUN: kiln-opt %s -split-input-file -verify-diagnostics

// Embedding table of the wrong rank.
func.func @embedding_table_rank(%ids: tensor<4xi64>, %t: tensor<10xf32>) {
  // expected-error @+1 {{'kiln.embedding' op expects 'table' to be [vocab, dim], got [10]}}
  %0 = kiln.embedding %ids, %t : (tensor<4xi64>, tensor<10xf32>) -> tensor<4x?xf32>
  return
}

// -----

// padding_idx past the last row.
func.func @embedding_padding_idx(%ids: tensor<4xi64>, %t: tensor<10x3xf32>) {
  // expected-error @+1 {{'kiln.embedding' op expects 'padding_idx' (10) to be a row of the table [10, 3]}}
  %0 = kiln.embedding %ids, %t {padding_idx = 10 : i64} : (tensor<4xi64>, tensor<10x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

// A table without rows: no id is in range (kiln-fuzz-ir: its gradient had
// num_embeddings 0).
func.func @embedding_empty_table(%ids: tensor<4xi64>, %t: tensor<0x3xf32>) {
  // expected-error @+1 {{'kiln.embedding' op expects 'table' to have at least one row, got [0, 3]}}
  %0 = kiln.embedding %ids, %t : (tensor<4xi64>, tensor<0x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

// Negative padding_idx.
func.func @embedding_negative_padding_idx(%ids: tensor<4xi64>, %t: tensor<?x3xf32>) {
  // expected-error @+1 {{'kiln.embedding' op expects 'padding_idx' (-1) to be a row of the table [?, 3]}}
  %0 = kiln.embedding %ids, %t {padding_idx = -1 : i64} : (tensor<4xi64>, tensor<?x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

// Float ids are rejected by the type constraint.
func.func @embedding_float_ids(%ids: tensor<4xf32>, %t: tensor<10x3xf32>) {
  // expected-error @+1 {{'kiln.embedding' op operand #0 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = kiln.embedding %ids, %t : (tensor<4xf32>, tensor<10x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

// A result type that is not the inferred one (MLIR's own message).
func.func @wrong_result_type(%ids: tensor<4xi64>, %t: tensor<10x3xf32>) {
  // expected-error @+2 {{'kiln.embedding' op inferred type(s) 'tensor<4x3xf32>' are incompatible with return type(s) of operation 'tensor<4x5xf32>'}}
  // expected-error @+1 {{'kiln.embedding' op failed to infer returned types}}
  %0 = kiln.embedding %ids, %t : (tensor<4xi64>, tensor<10x3xf32>) -> tensor<4x5xf32>
  return
}

// -----

// f16 is not admitted: Kiln's floats are f32 and bf16.
func.func @f16_not_admitted(%x: tensor<4xf16>) {
  // expected-error @+1 {{'kiln.relu' op operand #0 must be ranked tensor of floating-point (f32 or bf16) values}}
  %0 = kiln.relu %x : (tensor<4xf16>) -> tensor<4xf16>
  return
}

// -----

// One floating-point element type per op: bf16 activations with an f32
// weight need a kiln.cast.
func.func @mixed_floats(%x: tensor<?x8xbf16>, %w: tensor<4x8xf32>) {
  // expected-error @+1 {{'kiln.linear' op expects one floating-point element type for all its operands and results (kiln.cast converts), but operand #1 has 'f32' where 'bf16' came first}}
  %0 = kiln.linear %x, %w : (tensor<?x8xbf16>, tensor<4x8xf32>) -> tensor<?x4xbf16>
  return
}

// -----

// A result of another float type than the operands.
func.func @mixed_result(%x: tensor<8xbf16>) {
  // expected-error @+2 {{'kiln.relu' op inferred type(s) 'tensor<8xbf16>' are incompatible with return type(s) of operation 'tensor<8xf32>'}}
  // expected-error @+1 {{'kiln.relu' op failed to infer returned types}}
  %0 = kiln.relu %x : (tensor<8xbf16>) -> tensor<8xf32>
  return
}

// -----

// A cast keeps the shape.
func.func @cast_shape(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{'kiln.cast' op expects the result to have the input's shape [?, 8], got [?, 4]}}
  %0 = kiln.cast %x : (tensor<?x8xf32>) -> tensor<?x4xbf16>
  return
}

// -----

// A cast converts floats only.
func.func @cast_ids(%x: tensor<8xi64>) {
  // expected-error @+1 {{'kiln.cast' op operand #0 must be ranked tensor of floating-point (f32 or bf16) values}}
  %0 = kiln.cast %x : (tensor<8xi64>) -> tensor<8xbf16>
  return
}

// -----

// Positional encodings need a sequence and a model dimension.
func.func @pe_rank(%x: tensor<8xf32>) {
  // expected-error @+1 {{'kiln.pe' op expects 'input' to be [..., seq, dim], got [8]}}
  %0 = kiln.pe sinusoidal %x : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

// The sinusoidal encoding has no parameters.
func.func @pe_sinusoidal_table(%x: tensor<2x4x8xf32>, %t: tensor<16x8xf32>) {
  // expected-error @+1 {{'kiln.pe' op expects no 'table' for the sinusoidal encoding, which has no parameters}}
  %0 = kiln.pe sinusoidal %x table %t : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

// The learned encoding needs its table.
func.func @pe_learned_without_table(%x: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'kiln.pe' op expects a 'table' [max_len, dim] for the learned encoding}}
  %0 = kiln.pe learned %x : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

// Learned table of another width.
func.func @pe_table_width(%x: tensor<2x4x8xf32>, %t: tensor<16x6xf32>) {
  // expected-error @+1 {{'kiln.pe' op expects 'table' to be [max_len, dim] = [?, 8], got [16, 6]}}
  %0 = kiln.pe learned %x table %t : (tensor<2x4x8xf32>, tensor<16x6xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

// A static sequence longer than the learned table.
func.func @pe_too_long(%x: tensor<2x20x8xf32>, %t: tensor<16x8xf32>) {
  // expected-error @+1 {{'kiln.pe' op expects the sequence length (20) to be at most the learned table's max_len (16)}}
  %0 = kiln.pe learned %x table %t : (tensor<2x20x8xf32>, tensor<16x8xf32>) -> tensor<2x20x8xf32>
  return
}

// -----

// LayerNorm of a scalar.
func.func @layernorm_rank(%x: tensor<f32>, %g: tensor<1xf32>) {
  // expected-error @+1 {{'kiln.layernorm' op expects 'input' to have rank >= 1, got []}}
  %0 = kiln.layernorm %x, %g, %g : (tensor<f32>, tensor<1xf32>, tensor<1xf32>) -> tensor<f32>
  return
}

// -----

// gamma of the wrong size.
func.func @layernorm_gamma(%x: tensor<?x8xf32>, %g: tensor<6xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'kiln.layernorm' op expects 'gamma' to be [dim] = [8], got [6]}}
  %0 = kiln.layernorm %x, %g, %b : (tensor<?x8xf32>, tensor<6xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  return
}

// -----

// beta of the wrong rank.
func.func @layernorm_beta(%x: tensor<?x8xf32>, %g: tensor<8xf32>, %b: tensor<1x8xf32>) {
  // expected-error @+1 {{'kiln.layernorm' op expects 'beta' to be [dim] = [8], got [1, 8]}}
  %0 = kiln.layernorm %x, %g, %b : (tensor<?x8xf32>, tensor<8xf32>, tensor<1x8xf32>) -> tensor<?x8xf32>
  return
}

// -----

// Negative eps.
func.func @layernorm_eps(%x: tensor<?x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'kiln.layernorm' op expects 'eps' to be finite and >= 0, got -1.000000e-05}}
  %0 = kiln.layernorm %x, %g, %g {eps = -1.0e-5 : f64} : (tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  return
}

// -----

// An RMS norm weight of the wrong width.
func.func @rms_norm_weight(%x: tensor<?x8xf32>, %w: tensor<6xf32>) {
  // expected-error @+1 {{'kiln.rms_norm' op expects 'weight' to be [dim] = [8], got [6]}}
  %0 = kiln.rms_norm %x, %w : (tensor<?x8xf32>, tensor<6xf32>) -> tensor<?x8xf32>
  return
}

// -----

// RMS norm of a scalar.
func.func @rms_norm_rank(%x: tensor<f32>, %w: tensor<1xf32>) {
  // expected-error @+1 {{'kiln.rms_norm' op expects 'input' to have rank >= 1, got []}}
  %0 = kiln.rms_norm %x, %w : (tensor<f32>, tensor<1xf32>) -> tensor<f32>
  return
}

// -----

// A NaN eps.
func.func @rms_norm_eps(%x: tensor<?x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'kiln.rms_norm' op expects 'eps' to be finite and >= 0, got nan}}
  %0 = kiln.rms_norm %x, %w {eps = 0x7FF8000000000000 : f64} : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  return
}

// -----

// An RMS norm gradient whose weight does not match.
func.func @rms_norm_grad_weight(%g: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<7xf32>) {
  // expected-error @+1 {{'kiln.rms_norm_grad' op expects 'weight' to be [dim] = [8], got [7]}}
  %0:2 = kiln.rms_norm_grad %g, %x, %w : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<7xf32>) -> (tensor<4x8xf32>, tensor<7xf32>)
  return
}

// -----

// A rotary head of odd width has a feature without a partner.
func.func @rotary_odd_head(%x: tensor<?x?x12xf32>) {
  // expected-error @+1 {{'kiln.rotary' op expects 'head_dim' to be positive and even, got 3}}
  %0 = kiln.rotary %x {head_dim = 3 : i64} : (tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  return
}

// -----

// A negative head width (an i64 attribute written as such).
func.func @rotary_negative_head(%x: tensor<?x?x12xf32>) {
  // expected-error @+1 {{'kiln.rotary' op expects 'head_dim' to be positive and even, got -4}}
  %0 = kiln.rotary %x {head_dim = -4 : i64} : (tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  return
}

// -----

// A head wider than any model's (the lowering keeps head_dim / 2 constants).
func.func @rotary_huge_head(%x: tensor<?x?x262144xf32>) {
  // expected-error @+1 {{'kiln.rotary' op expects 'head_dim' to be at most 65536, got 262144}}
  %0 = kiln.rotary %x {head_dim = 262144 : i64} : (tensor<?x?x262144xf32>) -> tensor<?x?x262144xf32>
  return
}

// -----

// Heads that do not tile the width.
func.func @rotary_head_divides(%x: tensor<?x?x12xf32>) {
  // expected-error @+1 {{'kiln.rotary' op expects 'head_dim' (8) to divide the last dimension (12)}}
  %0 = kiln.rotary %x {head_dim = 8 : i64} : (tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  return
}

// -----

// The width of the heads must be known.
func.func @rotary_dynamic_width(%x: tensor<?x?x?xf32>) {
  // expected-error @+1 {{'kiln.rotary' op expects a static last dimension (the heads' width), got [?, ?, ?]}}
  %0 = kiln.rotary %x {head_dim = 4 : i64} : (tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  return
}

// -----

// No sequence dimension.
func.func @rotary_rank(%x: tensor<8xf32>) {
  // expected-error @+1 {{'kiln.rotary' op expects 'input' to be [..., T, D] (rank >= 2), got [8]}}
  %0 = kiln.rotary %x {head_dim = 4 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

// theta must be a positive base.
func.func @rotary_theta(%x: tensor<?x?x8xf32>) {
  // expected-error @+1 {{'kiln.rotary' op expects 'theta' to be finite and > 0, got 0.000000e+00}}
  %0 = kiln.rotary %x {head_dim = 4 : i64, theta = 0.0 : f64} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return
}

// -----

// A theta so small that the frequencies overflow f32.
func.func @rotary_tiny_theta(%x: tensor<?x?x64xf32>) {
  // expected-error @+1 {{'kiln.rotary' op expects 'theta' to give f32 frequencies theta^(-2i/head_dim), got 1.000000e-300 (infinite for i = 31)}}
  %0 = kiln.rotary %x {head_dim = 64 : i64, theta = 1.0e-300 : f64} : (tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return
}

// -----

// The unbiased standard deviation of one feature is undefined.
func.func @layernorm_std_eps_one_feature(%x: tensor<?x1xf32>, %g: tensor<1xf32>) {
  // expected-error @+1 {{'kiln.layernorm' op expects at least 2 features for the unbiased standard deviation of mode std_eps, got 1}}
  %0 = kiln.layernorm %x, %g, %g {mode = #kiln<norm_mode std_eps>} : (tensor<?x1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<?x1xf32>
  return
}

// -----

// Attention needs [batch, seq, dim] queries.
func.func @mha_query_rank(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) {
  // expected-error @+1 {{'kiln.mha' op expects 'query' to be [batch, seq, dim], got [4, 8]}}
  %0 = kiln.mha %x, %x weights(%w, %w, %w, %w) {num_heads = 2 : i64}
      : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

// ... and [batch, seq, dim] keys/values.
func.func @mha_kv_rank(%x: tensor<2x4x8xf32>, %kv: tensor<4x8xf32>, %w: tensor<8x8xf32>) {
  // expected-error @+1 {{'kiln.mha' op expects 'key_value' to be [batch, seq, dim], got [4, 8]}}
  %0 = kiln.mha %x, %kv weights(%w, %w, %w, %w) {num_heads = 2 : i64}
      : (tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

// Cross-attention over another batch.
func.func @mha_batch(%x: tensor<2x4x8xf32>, %kv: tensor<3x5x8xf32>, %w: tensor<8x8xf32>) {
  // expected-error @+1 {{'kiln.mha' op expects 'query' [2, 4, 8] and 'key_value' [3, 5, 8] to have the same batch size}}
  %0 = kiln.mha %x, %kv weights(%w, %w, %w, %w) {num_heads = 2 : i64}
      : (tensor<2x4x8xf32>, tensor<3x5x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

// Zero heads.
func.func @mha_zero_heads(%x: tensor<2x4x8xf32>, %w: tensor<8x8xf32>) {
  // expected-error @+1 {{'kiln.mha' op expects 'num_heads' to be positive, got 0}}
  %0 = kiln.mha %x, %x weights(%w, %w, %w, %w) {num_heads = 0 : i64}
      : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

// The model width must be static to split it into heads.
func.func @mha_dynamic_width(%x: tensor<2x4x?xf32>, %w: tensor<8x8xf32>) {
  // expected-error @+1 {{'kiln.mha' op expects a static model dimension, got 'query' [2, 4, ?]}}
  %0 = kiln.mha %x, %x weights(%w, %w, %w, %w) {num_heads = 2 : i64}
      : (tensor<2x4x?xf32>, tensor<2x4x?xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<2x4x?xf32>
  return
}

// -----

// Heads that do not divide the width.
func.func @mha_heads_divide(%x: tensor<?x?x128xf32>, %w: tensor<128x128xf32>) {
  // expected-error @+1 {{'kiln.mha' op expects 'num_heads' (6) to divide the model dimension (128)}}
  %0 = kiln.mha %x, %x weights(%w, %w, %w, %w) {num_heads = 6 : i64}
      : (tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<128x128xf32>, tensor<128x128xf32>, tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<?x?x128xf32>
  return
}

// -----

// wq of the wrong shape.
func.func @mha_wq(%x: tensor<2x4x8xf32>, %w: tensor<8x8xf32>, %bad: tensor<8x6xf32>) {
  // expected-error @+1 {{'kiln.mha' op expects 'wq' to be [dim, dim] = [8, 8], got [8, 6]}}
  %0 = kiln.mha %x, %x weights(%bad, %w, %w, %w) {num_heads = 2 : i64}
      : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8x6xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

// wk must read the key/value width.
func.func @mha_wk(%x: tensor<2x4x8xf32>, %kv: tensor<2x5x6xf32>, %w: tensor<8x8xf32>, %wkv: tensor<8x6xf32>) {
  // expected-error @+1 {{'kiln.mha' op expects 'wk' to be [dim, kv_dim] = [8, 6], got [8, 8]}}
  %0 = kiln.mha %x, %kv weights(%w, %w, %wkv, %w) {num_heads = 2 : i64}
      : (tensor<2x4x8xf32>, tensor<2x5x6xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x6xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

// wv likewise.
func.func @mha_wv(%x: tensor<2x4x8xf32>, %kv: tensor<2x5x6xf32>, %w: tensor<8x8xf32>, %wkv: tensor<8x6xf32>) {
  // expected-error @+1 {{'kiln.mha' op expects 'wv' to be [dim, kv_dim] = [8, 6], got [8, 8]}}
  %0 = kiln.mha %x, %kv weights(%w, %wkv, %w, %w) {num_heads = 2 : i64}
      : (tensor<2x4x8xf32>, tensor<2x5x6xf32>, tensor<8x8xf32>, tensor<8x6xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

// wo of the wrong shape.
func.func @mha_wo(%x: tensor<2x4x8xf32>, %w: tensor<8x8xf32>, %bad: tensor<4x8xf32>) {
  // expected-error @+1 {{'kiln.mha' op expects 'wo' to be [dim, dim] = [8, 8], got [4, 8]}}
  %0 = kiln.mha %x, %x weights(%w, %w, %w, %bad) {num_heads = 2 : i64}
      : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

// Only some of the biases (generic form: the custom form cannot say it).
func.func @mha_some_biases(%x: tensor<2x4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'kiln.mha' op expects all four biases (bq, bk, bv, bo) or none, got 1}}
  %0 = "kiln.mha"(%x, %x, %w, %w, %w, %w, %b) <{num_heads = 2 : i64,
      operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0>}>
      : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

// A bias of the wrong size.
func.func @mha_bias(%x: tensor<2x4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>, %bad: tensor<6xf32>) {
  // expected-error @+1 {{'kiln.mha' op expects 'bv' to be [dim] = [8], got [6]}}
  %0 = kiln.mha %x, %x weights(%w, %w, %w, %w) biases(%b, %b, %bad, %b) {num_heads = 2 : i64}
      : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>,
         tensor<8xf32>, tensor<8xf32>, tensor<6xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

// A padding mask over the queries instead of the keys.
func.func @mha_mask(%x: tensor<2x4x8xf32>, %kv: tensor<2x5x8xf32>, %w: tensor<8x8xf32>, %m: tensor<2x4xi1>) {
  // expected-error @+1 {{'kiln.mha' op expects 'key_padding_mask' to be [batch, key_seq] = [2, 5], got [2, 4]}}
  %0 = kiln.mha %x, %kv weights(%w, %w, %w, %w) mask %m {num_heads = 2 : i64}
      : (tensor<2x4x8xf32>, tensor<2x5x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<2x4xi1>) -> tensor<2x4x8xf32>
  return
}

// -----

// A float mask is rejected by the type constraint.
func.func @mha_float_mask(%x: tensor<2x4x8xf32>, %w: tensor<8x8xf32>, %m: tensor<2x4xf32>) {
  // expected-error @+1 {{'kiln.mha' op operand #6 must be ranked tensor of 1-bit signless integer or 32-bit signless integer or 64-bit signless integer values}}
  %0 = kiln.mha %x, %x weights(%w, %w, %w, %w) mask %m {num_heads = 2 : i64}
      : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<2x4xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

// Causal attention with more queries than keys leaves rows with nothing.
func.func @mha_causal(%x: tensor<2x6x8xf32>, %kv: tensor<2x4x8xf32>, %w: tensor<8x8xf32>) {
  // expected-error @+1 {{'kiln.mha' op expects causal attention to have no more queries (6) than keys (4)}}
  %0 = kiln.mha %x, %kv weights(%w, %w, %w, %w) {num_heads = 2 : i64, causal}
      : (tensor<2x6x8xf32>, tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<2x6x8xf32>
  return
}

// -----

// Attention dropout needs a seed.
func.func @mha_dropout_seed(%x: tensor<2x4x8xf32>, %w: tensor<8x8xf32>) {
  // expected-error @+1 {{'kiln.mha' op expects a 'seed' operand when 'dropout' (1.000000e-01) is non-zero}}
  %0 = kiln.mha %x, %x weights(%w, %w, %w, %w) {num_heads = 2 : i64, dropout = 0.1 : f64}
      : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

// ... and a probability below 1.
func.func @mha_dropout_range(%x: tensor<2x4x8xf32>, %w: tensor<8x8xf32>, %s: i64) {
  // expected-error @+1 {{'kiln.mha' op expects 'dropout' to be a probability in [0, 1), got 1.000000e+00}}
  %0 = kiln.mha %x, %x weights(%w, %w, %w, %w) seed %s {num_heads = 2 : i64, dropout = 1.0 : f64}
      : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, i64) -> tensor<2x4x8xf32>
  return
}

// -----

// Feed-forward of a scalar.
func.func @ffn_rank(%x: tensor<f32>, %w: tensor<4x1xf32>, %w2: tensor<1x4xf32>) {
  // expected-error @+1 {{'kiln.ffn' op expects 'input' to have rank >= 1, got []}}
  %0 = kiln.ffn relu %x, %w, %w2 : (tensor<f32>, tensor<4x1xf32>, tensor<1x4xf32>) -> tensor<f32>
  return
}

// -----

// w1 reading another width.
func.func @ffn_w1(%x: tensor<?x8xf32>, %w1: tensor<32x6xf32>, %w2: tensor<8x32xf32>) {
  // expected-error @+1 {{'kiln.ffn' op expects 'w1' to be [ffn_dim, dim] = [32, 8], got [32, 6]}}
  %0 = kiln.ffn relu %x, %w1, %w2 : (tensor<?x8xf32>, tensor<32x6xf32>, tensor<8x32xf32>) -> tensor<?x8xf32>
  return
}

// -----

// w2 not the transpose shape of w1.
func.func @ffn_w2(%x: tensor<?x8xf32>, %w1: tensor<32x8xf32>, %w2: tensor<32x8xf32>) {
  // expected-error @+1 {{'kiln.ffn' op expects 'w2' to be [dim, ffn_dim] = [8, 32], got [32, 8]}}
  %0 = kiln.ffn relu %x, %w1, %w2 : (tensor<?x8xf32>, tensor<32x8xf32>, tensor<32x8xf32>) -> tensor<?x8xf32>
  return
}

// -----

// One bias only (generic form).
func.func @ffn_one_bias(%x: tensor<?x8xf32>, %w1: tensor<32x8xf32>, %w2: tensor<8x32xf32>, %b1: tensor<32xf32>) {
  // expected-error @+1 {{'kiln.ffn' op expects both biases (b1, b2) or none}}
  %0 = "kiln.ffn"(%x, %w1, %w2, %b1) <{activation = #kiln<activation relu>,
      operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0>}>
      : (tensor<?x8xf32>, tensor<32x8xf32>, tensor<8x32xf32>, tensor<32xf32>) -> tensor<?x8xf32>
  return
}

// -----

// b1 of the model width instead of the hidden width.
func.func @ffn_b1(%x: tensor<?x8xf32>, %w1: tensor<32x8xf32>, %w2: tensor<8x32xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'kiln.ffn' op expects 'b1' to be [ffn_dim] = [32], got [8]}}
  %0 = kiln.ffn gelu %x, %w1, %w2 biases(%b, %b)
      : (tensor<?x8xf32>, tensor<32x8xf32>, tensor<8x32xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  return
}

// -----

// b2 of the hidden width instead of the model width.
func.func @ffn_b2(%x: tensor<?x8xf32>, %w1: tensor<32x8xf32>, %w2: tensor<8x32xf32>, %b: tensor<32xf32>) {
  // expected-error @+1 {{'kiln.ffn' op expects 'b2' to be [dim] = [8], got [32]}}
  %0 = kiln.ffn gelu %x, %w1, %w2 biases(%b, %b)
      : (tensor<?x8xf32>, tensor<32x8xf32>, tensor<8x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<?x8xf32>
  return
}

// -----

// Feed-forward dropout needs a seed.
func.func @ffn_dropout_seed(%x: tensor<?x8xf32>, %w1: tensor<32x8xf32>, %w2: tensor<8x32xf32>) {
  // expected-error @+1 {{'kiln.ffn' op expects a 'seed' operand when 'dropout' (2.000000e-01) is non-zero}}
  %0 = kiln.ffn relu %x, %w1, %w2 {dropout = 0.2 : f64} : (tensor<?x8xf32>, tensor<32x8xf32>, tensor<8x32xf32>) -> tensor<?x8xf32>
  return
}

// -----

// Linear of a scalar.
func.func @linear_rank(%x: tensor<f32>, %w: tensor<4x1xf32>) {
  // expected-error @+1 {{'kiln.linear' op expects 'input' to have rank >= 1, got []}}
  %0 = kiln.linear %x, %w : (tensor<f32>, tensor<4x1xf32>) -> tensor<4xf32>
  return
}

// -----

// A weight in [in, out] layout instead of PyTorch's [out, in].
func.func @linear_weight(%x: tensor<?x?x128xf32>, %w: tensor<128x384xf32>) {
  // expected-error @+1 {{'kiln.linear' op expects 'weight' to be [out_features, in_features] = [128, 128], got [128, 384]}}
  %0 = kiln.linear %x, %w : (tensor<?x?x128xf32>, tensor<128x384xf32>) -> tensor<?x?x128xf32>
  return
}

// -----

// A bias of the input width.
func.func @linear_bias(%x: tensor<?x8xf32>, %w: tensor<4x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'kiln.linear' op expects 'bias' to be [out_features] = [4], got [8]}}
  %0 = kiln.linear %x, %w, %b : (tensor<?x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<?x4xf32>
  return
}

// -----

// Matmul of different ranks.
func.func @matmul_rank(%a: tensor<2x3x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{'kiln.matmul' op expects operands of the same rank >= 2, got 'lhs' [2, 3, 4] and 'rhs' [4, 5]}}
  %0 = kiln.matmul %a, %b : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  return
}

// -----

// Different batches.
func.func @matmul_batch(%a: tensor<2x3x4xf32>, %b: tensor<3x4x5xf32>) {
  // expected-error @+1 {{'kiln.matmul' op expects equal batch dimensions, got 'lhs' [2, 3, 4] and 'rhs' [3, 4, 5]}}
  %0 = kiln.matmul %a, %b : (tensor<2x3x4xf32>, tensor<3x4x5xf32>) -> tensor<2x3x5xf32>
  return
}

// -----

// Contracted sizes that differ once rhs is transposed.
func.func @matmul_contraction(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{'kiln.matmul' op expects the contracted sizes to match, got [4] from 'lhs' [3, 4] and [5] from 'rhs' [4, 5]}}
  %0 = kiln.matmul %a, %b {transpose_rhs} : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x4xf32>
  return
}

// -----

// Shapes that do not broadcast.
func.func @add_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'kiln.add' op expects broadcast-compatible operands: shapes [2, 3] and [4] do not broadcast: size 3 vs 4 at dimension 1 of the result}}
  %0 = kiln.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x?xf32>
  return
}

// -----

// Dropout probability 1 would divide by zero.
func.func @dropout_p(%x: tensor<4xf32>, %s: i64) {
  // expected-error @+1 {{'kiln.dropout' op expects 'p' to be a probability in [0, 1), got 1.000000e+00}}
  %0 = kiln.dropout %x, %s {p = 1.0 : f64} : (tensor<4xf32>, i64) -> tensor<4xf32>
  return
}

// -----

// Softmax over an axis the input does not have.
func.func @softmax_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'kiln.softmax' op expects 'axis' (2) to be in [-2, 2) for an input of rank 2}}
  %0 = kiln.softmax %x {axis = 2 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Likewise for log_softmax, counting from the end.
func.func @log_softmax_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'kiln.log_softmax' op expects 'axis' (-3) to be in [-2, 2) for an input of rank 2}}
  %0 = kiln.log_softmax %x {axis = -3 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// A reduction over nothing.
func.func @reduce_no_axes(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'kiln.reduce' op expects at least one axis to reduce}}
  %0 = kiln.reduce sum %x {axes = array<i64>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// The same axis twice.
func.func @reduce_duplicate_axes(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'kiln.reduce' op expects distinct axes, axis 1 is named twice}}
  %0 = kiln.reduce max %x {axes = array<i64: 1, -1>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

// An axis out of range.
func.func @reduce_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'kiln.reduce' op expects 'axis' (5) to be in [-2, 2) for an input of rank 2}}
  %0 = kiln.reduce mean %x {axes = array<i64: 5>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// A reshape that changes the element count.
func.func @reshape_count(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'kiln.reshape' op has an invalid shape [5]: cannot reshape [2, 3] into [5]: the element counts differ (6 vs 5 outside the kept dimensions)}}
  %0 = kiln.reshape %x [5] : (tensor<2x3xf32>) -> tensor<5xf32>
  return
}

// -----

// A reshape whose rows change size, with dynamic rows.
func.func @reshape_count_dynamic(%x: tensor<?x2x2xf32>) {
  // expected-error @+1 {{'kiln.reshape' op has an invalid shape [0, 0, 4]: cannot reshape [?, 2, 2] into [?, 2, 4]: the element counts differ (2 vs 4 outside the kept dimensions)}}
  %0 = kiln.reshape %x [0, 0, 4] : (tensor<?x2x2xf32>) -> tensor<?x2x4xf32>
  return
}

// -----

// Two inferred sizes.
func.func @reshape_two_inferred(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{'kiln.reshape' op has an invalid shape [-1, -1]: at most one size may be -1, found -1 at indices 0 and 1}}
  %0 = kiln.reshape %x [-1, -1] : (tensor<?x8xf32>) -> tensor<?x?xf32>
  return
}

// -----

// An inferred size that does not divide.
func.func @reshape_not_divisible(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'kiln.reshape' op has an invalid shape [4, -1]: cannot infer the size at index 1: 6 elements of [2, 3] are not a multiple of 4}}
  %0 = kiln.reshape %x [4, -1] : (tensor<2x3xf32>) -> tensor<4x?xf32>
  return
}

// -----

// Keeping a dimension the input does not have.
func.func @reshape_keep_missing(%x: tensor<6xf32>) {
  // expected-error @+1 {{'kiln.reshape' op has an invalid shape [6, 0]: size 0 at index 1 keeps an input dimension, but the input has rank 1}}
  %0 = kiln.reshape %x [6, 0] : (tensor<6xf32>) -> tensor<6x?xf32>
  return
}

// -----

// A negative size other than -1.
func.func @reshape_negative(%x: tensor<6xf32>) {
  // expected-error @+1 {{'kiln.reshape' op has an invalid shape [-6]: sizes must be positive, 0 (keep) or -1 (infer), found -6 at index 0}}
  %0 = kiln.reshape %x [-6] : (tensor<6xf32>) -> tensor<?xf32>
  return
}

// -----

// A permutation that repeats a dimension.
func.func @transpose_not_permutation(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'kiln.transpose' op expects 'permutation' [0, 1, 1] to be a permutation of [0, 3)}}
  %0 = kiln.transpose %x [0, 1, 1] : (tensor<2x3x4xf32>) -> tensor<2x3x3xf32>
  return
}

// -----

// A permutation of the wrong length.
func.func @transpose_length(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'kiln.transpose' op expects 'permutation' [1, 0] to be a permutation of [0, 3)}}
  %0 = kiln.transpose %x [1, 0] : (tensor<2x3x4xf32>) -> tensor<3x2xf32>
  return
}

// -----

// A slice past the end.
func.func @slice_bounds(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'kiln.slice' op expects a non-empty slice along axis 1 of [2, 8]: slice [4:12] selects nothing valid in a dimension of size 8}}
  %0 = kiln.slice %x {axis = 1 : i64, start = 4 : i64, end = 12 : i64} : (tensor<2x8xf32>) -> tensor<2x?xf32>
  return
}

// -----

// An empty slice of a dynamic dimension.
func.func @slice_empty(%x: tensor<2x?xf32>) {
  // expected-error @+1 {{'kiln.slice' op expects a non-empty slice along axis 1 of [2, ?]: slice [3:3] is empty}}
  %0 = kiln.slice %x {axis = 1 : i64, start = 3 : i64, end = 3 : i64} : (tensor<2x?xf32>) -> tensor<2x?xf32>
  return
}

// -----

// A slice axis out of range.
func.func @slice_axis(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'kiln.slice' op expects 'axis' (2) to be in [-2, 2) for an input of rank 2}}
  %0 = kiln.slice %x {axis = 2 : i64, start = 0 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Concatenating tensors that differ outside the axis.
func.func @concat_mismatch(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) {
  // expected-error @+1 {{'kiln.concat' op expects every input to match input #0 [2, 3] outside axis 1, input #1 is [4, 3]}}
  %0 = kiln.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

// Concatenating tensors of different ranks.
func.func @concat_rank(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'kiln.concat' op expects every input to match input #0 [2, 3] outside axis 0, input #1 is [3]}}
  %0 = kiln.concat %a, %b {axis = 0 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  return
}

// -----

// Concatenation along an axis out of range.
func.func @concat_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'kiln.concat' op expects 'axis' (-3) to be in [-2, 2) for an input of rank 2}}
  %0 = kiln.concat %a, %a {axis = -3 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Concatenation of nothing (fails while inferring the result type).
func.func @concat_empty() {
  // expected-error @+1 {{'kiln.concat' op expects at least one input}}
  %0 = kiln.concat {axis = 0 : i64} : () -> tensor<2xf32>
  return
}

// -----

// Integer constants are not kiln tensors.
func.func @constant_int() {
  // expected-error @+1 {{'kiln.constant' op result #0 must be ranked tensor of floating-point (f32 or bf16) values}}
  %0 = kiln.constant dense<1> : tensor<2xi32>
  return
}

// -----

// Targets that keep the class dimension.
func.func @loss_targets(%l: tensor<?x?x10xf32>, %t: tensor<?x?x10xi64>) {
  // expected-error @+1 {{'kiln.cross_entropy' op expects 'targets' to be the shape of 'input' without its last (class) dimension: 'input' is [?, ?, 10], 'targets' is [?, ?, 10]}}
  %0 = kiln.cross_entropy %l, %t : (tensor<?x?x10xf32>, tensor<?x?x10xi64>) -> tensor<f32>
  return
}

// -----

// Targets of another batch.
func.func @loss_batch(%l: tensor<4x10xf32>, %t: tensor<3xi64>) {
  // expected-error @+1 {{'kiln.nll_loss' op expects 'targets' to be the shape of 'input' without its last (class) dimension: 'input' is [4, 10], 'targets' is [3]}}
  %0 = kiln.nll_loss %l, %t : (tensor<4x10xf32>, tensor<3xi64>) -> tensor<f32>
  return
}

// -----

// No class for a target (all of them ignored, their logits are still read).
func.func @loss_no_classes(%l: tensor<1x0xf32>, %t: tensor<?xi32>) {
  // expected-error @+1 {{'kiln.cross_entropy' op expects at least one class, got 'input' of shape [1, 0]}}
  %0 = kiln.cross_entropy %l, %t {ignore_index = 0 : i64} : (tensor<1x0xf32>, tensor<?xi32>) -> tensor<f32>
  return
}

// -----

func.func @nll_no_classes(%l: tensor<?x0xf32>, %t: tensor<?xi64>) {
  // expected-error @+1 {{'kiln.nll_loss' op expects at least one class, got 'input' of shape [?, 0]}}
  %0 = kiln.nll_loss %l, %t : (tensor<?x0xf32>, tensor<?xi64>) -> tensor<f32>
  return
}

// -----

// Sizes that agree with a dynamic one each but not with each other: the
// gradient's batch 0 and the key's 15 through the query's dynamic batch
// (kiln-fuzz-ir: the lowering built a linalg.generic that did not verify).
func.func @attention_grad_batches(%g: tensor<0x2x8xf32>, %q: tensor<?x?x8xf32>, %k: tensor<15x17x8xf32>) {
  // expected-error @+1 {{'kiln.attention_grad' op expects dimension 0 of operand #2 (15) and dimension 0 of operand #0 (0) to be one size}}
  %0:3 = kiln.attention_grad %g, %q, %k, %k {num_heads = 2 : i64} : (tensor<0x2x8xf32>, tensor<?x?x8xf32>, tensor<15x17x8xf32>, tensor<15x17x8xf32>) -> (tensor<?x?x8xf32>, tensor<15x17x8xf32>, tensor<15x17x8xf32>)
  return
}

// -----

// Label smoothing above 1.
func.func @loss_smoothing(%l: tensor<4x10xf32>, %t: tensor<4xi64>) {
  // expected-error @+1 {{'kiln.cross_entropy' op expects 'label_smoothing' to be in [0, 1], got 1.500000e+00}}
  %0 = kiln.cross_entropy %l, %t {label_smoothing = 1.5 : f64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  return
}

// -----

// An embedding gradient whose positions do not match the ids.
func.func @embedding_grad_shape(%g: tensor<2x3x4xf32>, %ids: tensor<2x5xi64>) {
  // expected-error @+1 {{'kiln.embedding_grad' op expects 'grad' to be the shape of 'ids' plus the embedding width: 'ids' is [2, 5], 'grad' is [2, 3, 4]}}
  %0 = kiln.embedding_grad %g, %ids {num_embeddings = 9 : i64} : (tensor<2x3x4xf32>, tensor<2x5xi64>) -> tensor<9x4xf32>
  return
}

// -----

// A padding row outside the table.
func.func @embedding_grad_padding(%g: tensor<5x4xf32>, %ids: tensor<5xi64>) {
  // expected-error @+1 {{'kiln.embedding_grad' op expects 'padding_idx' (9) to be in [0, 9)}}
  %0 = kiln.embedding_grad %g, %ids {num_embeddings = 9 : i64, padding_idx = 9 : i64} : (tensor<5x4xf32>, tensor<5xi64>) -> tensor<9x4xf32>
  return
}

// -----

// An activation gradient of another shape than the activation's input.
func.func @activation_grad_shape(%g: tensor<4x8xf32>, %x: tensor<4x6xf32>) {
  // expected-error @+1 {{'kiln.activation_grad' op expects 'grad' [4, 8] and 'input' [4, 6] to have the same shape}}
  %0 = kiln.activation_grad relu %g, %x : (tensor<4x8xf32>, tensor<4x6xf32>) -> tensor<4x8xf32>
  return
}

// -----

// A layer-norm gradient with gamma of the wrong width.
func.func @layernorm_grad_gamma(%g: tensor<4x8xf32>, %x: tensor<4x8xf32>, %gamma: tensor<6xf32>) {
  // expected-error @+1 {{'kiln.layernorm_grad' op expects 'gamma' to be [dim] = [8], got [6]}}
  %0:3 = kiln.layernorm_grad %g, %x, %gamma : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<6xf32>) -> (tensor<4x8xf32>, tensor<6xf32>, tensor<6xf32>)
  return
}

// -----

// A per-position loss gradient for a reduced loss.
func.func @loss_grad_rank(%x: tensor<4x8xf32>, %t: tensor<4xi64>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'kiln.loss_grad' op expects a rank-0 'loss_grad' for a reduced loss, got [4] (targets [4])}}
  %0 = kiln.loss_grad %x, %t, %g : (tensor<4x8xf32>, tensor<4xi64>, tensor<4xf32>) -> tensor<4x8xf32>
  return
}

// -----

// Attention whose keys and values differ in shape.
func.func @attention_kv(%q: tensor<2x3x8xf32>, %k: tensor<2x5x8xf32>, %v: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'kiln.attention' op expects 'key' [2, 5, 8] and 'value' [2, 4, 8] to have the same shape}}
  %0 = kiln.attention %q, %k, %v {num_heads = 2 : i64} : (tensor<2x3x8xf32>, tensor<2x5x8xf32>, tensor<2x4x8xf32>) -> tensor<2x3x8xf32>
  return
}

// -----

// Attention gradients for a gradient of another shape than the queries.
func.func @attention_grad_shape(%g: tensor<2x4x8xf32>, %q: tensor<2x3x8xf32>, %k: tensor<2x5x8xf32>) {
  // expected-error @+1 {{'kiln.attention_grad' op expects 'grad' [2, 4, 8] and 'query' [2, 3, 8] to have the same shape}}
  %0:3 = kiln.attention_grad %g, %q, %k, %k {num_heads = 2 : i64}
      : (tensor<2x4x8xf32>, tensor<2x3x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>)
  return
}

// -----

// Attention gradients given a forward output of another shape.
func.func @attention_grad_output_shape(%g: tensor<2x3x8xf32>, %q: tensor<2x3x8xf32>, %k: tensor<2x5x8xf32>, %o: tensor<2x5x8xf32>) {
  // expected-error @+1 {{'kiln.attention_grad' op expects 'output' [2, 5, 8] and 'query' [2, 3, 8] to have the same shape}}
  %0:3 = kiln.attention_grad %g, %q, %k, %k output %o {num_heads = 2 : i64}
      : (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>)
  return
}

// -----

// Adam with a moment of another shape.
func.func @adam_shape(%p: tensor<4xf32>, %m: tensor<5xf32>, %lr: tensor<f32>, %t: i64) {
  // expected-error @+1 {{'kiln.adam_update' op expects 'param' [4] and 'm' [5] to have the same shape}}
  %0:3 = kiln.adam_update %p, %p, %m, %p, %lr, %t : (tensor<4xf32>, tensor<4xf32>, tensor<5xf32>, tensor<4xf32>, tensor<f32>, i64) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// Adam with beta1 = 1.
func.func @adam_beta(%p: tensor<4xf32>, %lr: tensor<f32>, %t: i64) {
  // expected-error @+1 {{'kiln.adam_update' op expects betas in [0, 1), got 1.000000e+00 and 9.990000e-01}}
  %0:3 = kiln.adam_update %p, %p, %p, %p, %lr, %t {beta1 = 1.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, i64) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// A NaN weight decay (it made every parameter NaN at the first step).
func.func @adam_decay(%p: tensor<4xf32>, %lr: tensor<f32>, %t: i64) {
  // expected-error @+1 {{'kiln.adam_update' op expects a finite 'weight_decay' >= 0, got nan}}
  %0:3 = kiln.adam_update %p, %p, %p, %p, %lr, %t {weight_decay = 0x7FF8000000000000 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, i64) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// An epsilon that is infinite in f32.
func.func @adam_eps(%p: tensor<4xf32>, %lr: tensor<f32>, %t: i64) {
  // expected-error @+1 {{'kiln.adam_update' op expects a positive, finite 'eps', got 1.000000e+39}}
  %0:3 = kiln.adam_update %p, %p, %p, %p, %lr, %t {eps = 1.0e39 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, i64) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// A weight decay finite as a double, infinite as a float.
func.func @sgd_decay(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'kiln.sgd_update' op expects a finite 'weight_decay' >= 0, got 1.000000e+39}}
  %0:2 = kiln.sgd_update %p, %p, %p, %lr {weight_decay = 1.0e39 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// A finiteness guard per element.
func.func @adam_guard(%p: tensor<4xf32>, %lr: tensor<f32>, %t: i64) {
  // expected-error @+1 {{'kiln.adam_update' op expects the 'if_finite' value to be a rank-0 tensor, got [4]}}
  %0:3 = kiln.adam_update %p, %p, %p, %p, %lr, %t if_finite %p : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, i64, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// A learning rate per element.
func.func @sgd_lr(%p: tensor<4xf32>) {
  // expected-error @+1 {{'kiln.sgd_update' op expects 'lr' to be a rank-0 tensor, got [4]}}
  %0:2 = kiln.sgd_update %p, %p, %p, %p : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// A clipping threshold of zero.
func.func @clip(%g: tensor<4xf32>) {
  // expected-error @+1 {{'kiln.global_norm_scale' op expects a positive 'max_norm', got 0.000000e+00}}
  %0 = kiln.global_norm_scale %g {max_norm = 0.0 : f64} : (tensor<4xf32>) -> tensor<f32>
  return
}

// -----

// The gradient of a max reduction must have the reduction's result shape.
func.func @reduce_max_grad_shape(%g: tensor<3xf32>, %x: tensor<2x3xf32>) {
  // expected-error @+1 {{'kiln.reduce_max_grad' op expects 'grad' to have the shape of the reduction's result 'tensor<2xf32>', got 'tensor<3xf32>'}}
  %0 = kiln.reduce_max_grad %g, %x {axes = array<i64: 1>} : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @reduce_max_grad_axes(%g: tensor<2xf32>, %x: tensor<2x3xf32>) {
  // expected-error @+1 {{'kiln.reduce_max_grad' op expects distinct axes, axis 1 is named twice}}
  %0 = kiln.reduce_max_grad %g, %x {axes = array<i64: 1, -1>} : (tensor<2xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// An element count that overflows 64 bits (it had wrapped to 0).
func.func @reshape_overflow(%x: tensor<4294967296x4294967296xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{'kiln.reshape' op has an invalid shape [-1]: the element count of [4294967296, 4294967296] or [?] overflows 64 bits}}
  %0 = kiln.reshape %x [-1] : (tensor<4294967296x4294967296xf32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// A fill of 2^62 floats: 2^64 bytes, which an allocation's size computed in
// 64 bits had wrapped to 0.
func.func @constant_bytes_overflow() -> tensor<4611686018427387904xf32> {
  // expected-error @+1 {{'kiln.constant' op result #0 of type 'tensor<4611686018427387904xf32>' has more bytes than a 64-bit size can count}}
  %0 = kiln.constant dense<1.0> : tensor<4611686018427387904xf32>
  return %0 : tensor<4611686018427387904xf32>
}

// -----

func.func @embedding_grad_bytes_overflow(%g: tensor<2x4xf32>, %ids: tensor<2xi64>) {
  // expected-error @+1 {{'kiln.embedding_grad' op result #0 of type 'tensor<4611686018427387904x4xf32>' has more bytes than a 64-bit size can count}}
  %0 = kiln.embedding_grad %g, %ids {num_embeddings = 4611686018427387904 : i64} : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<4611686018427387904x4xf32>
  return
}

// -----

// Concatenated lengths whose sum passes 2^63 (it had wrapped to the dynamic
// marker).
func.func @concat_length_overflow(%a: tensor<0x4611686018427387904xf32>, %b: tensor<0x4611686018427387904xf32>) {
  // expected-error @+2 {{'kiln.concat' op expects the lengths of its inputs along axis 1 to add up to less than 2^63}}
  // expected-error @+1 {{'kiln.concat' op failed to infer returned types}}
  %0 = kiln.concat %a, %b {axis = 1 : i64} : (tensor<0x4611686018427387904xf32>, tensor<0x4611686018427387904xf32>) -> tensor<0x?xf32>
  return
}

// -----

// An empty tensor with huge sizes has no bytes.
func.func @empty_with_huge_sizes(%a: tensor<1099511627776x1099511627776x0xf32>) -> tensor<1099511627776x1099511627776x0xf32> {
  %0 = kiln.relu %a : (tensor<1099511627776x1099511627776x0xf32>) -> tensor<1099511627776x1099511627776x0xf32>
  return %0 : tensor<1099511627776x1099511627776x0xf32>
}

// -----

// 2^32 + 1 compared as an i32 is 1: every target 1 had been dropped.
func.func @ignore_index_fits_targets(%l: tensor<3x4xf32>, %t: tensor<3xi32>) {
  // expected-error @+1 {{'kiln.cross_entropy' op expects 'ignore_index' to fit the targets' i32, got 4294967297}}
  %0 = kiln.cross_entropy %l, %t {ignore_index = 4294967297 : i64} : (tensor<3x4xf32>, tensor<3xi32>) -> tensor<f32>
  return
}

// -----

// The function boundary's attributes (KilnDialect.h), verified by the
// dialect: kinds, requirements, names, in-place updates, loss tokens.
// expected-error @+1 {{'func.func' op argument #0: 'kiln.kind' must be one of input, param, state, lr, step, seed, prepared}}
func.func @bad_kind(%x: tensor<2xf32> {kiln.kind = "weight"}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument #0 of kind 'lr' has type 'tensor<2xf32>' (an f32 scalar tensor expected)}}
func.func @lr_not_scalar(%x: tensor<2xf32> {kiln.kind = "lr"}) {
  return
}

// -----

// A prepared parameter (kiln-prepare-weights) is a transposed 2-D weight.
// expected-error @+1 {{'func.func' op argument #0 of kind 'prepared' has type 'tensor<2x3x4xf32>' (a 2-D f32 tensor expected)}}
func.func @prepared_not_matrix(%x: tensor<2x3x4xf32> {kiln.kind = "prepared"}) {
  return
}

// -----

// A requirement the JIT had ignored and whose AOT object failed every call.
// expected-error @+1 {{'func.func' op argument #0: 'kiln.require' = "positive" needs an i64 scalar, not 'tensor<2xf32>'}}
func.func @require_positive_tensor(%x: tensor<2xf32> {kiln.require = "positive"}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument #0: 'kiln.require' must be "positive" or "finite-nonnegative"}}
func.func @require_unknown(%x: i64 {kiln.require = "odd"}) {
  return
}

// -----

// A NUL or a vertical tab in a name had cut the AOT spec text.
// expected-error @+1 {{'func.func' op result #0: 'kiln.name' has byte 11 at 1: names are printable ASCII without spaces}}
func.func @name_with_vertical_tab(%x: tensor<2xf32>) -> (tensor<2xf32> {kiln.name = "a\0Bb"}) {
  return %x : tensor<2xf32>
}

// -----

// expected-error @+1 {{'func.func' op argument #0: 'kiln.name' is empty}}
func.func @empty_name(%x: tensor<2xf32> {kiln.name = ""}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument #0 has an unknown attribute 'kiln.udpates'}}
func.func @typo(%x: tensor<2xf32> {kiln.udpates = 0 : i64}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op result #0 of type 'tensor<3xf32>' updates argument #0 of type 'tensor<2xf32>': it must be an f32 tensor of the same type}}
func.func @updates_other_type(%x: tensor<2xf32>, %y: tensor<3xf32>) -> (tensor<3xf32> {kiln.updates = 0 : i64}) {
  return %y : tensor<3xf32>
}

// -----

// expected-error @+1 {{'func.func' op result #0: 'kiln.updates' = 2 names no argument}}
func.func @updates_nothing(%x: tensor<2xf32>) -> (tensor<2xf32> {kiln.updates = 2 : i64}) {
  return %x : tensor<2xf32>
}

// -----

// expected-error @+1 {{'func.func' op results #0 and #1 both update argument #0}}
func.func @updates_twice(%x: tensor<2xf32>) -> (tensor<2xf32> {kiln.updates = 0 : i64}, tensor<2xf32> {kiln.updates = 0 : i64}) {
  return %x, %x : tensor<2xf32>, tensor<2xf32>
}

// -----

// expected-error @+1 {{'func.func' op 'kiln.loss_tokens' names argument #0, which is not an i32 or i64 tensor}}
func.func @loss_tokens_not_ids(%x: tensor<2xf32>) attributes {kiln.loss_tokens = {arg = 0 : i64}} {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'kiln.loss_tokens' has a bad field 'reduction'}}
func.func @loss_tokens_reduction(%t: tensor<2xi64>) attributes {kiln.loss_tokens = {arg = 0 : i64, reduction = "max"}} {
  return
}

// -----

// Heads of width 0 (the blocked attention lowering built a slice that did
// not verify).
func.func @attention_width_zero(%q: tensor<1x2x0xf32>) {
  // expected-error @+1 {{'kiln.attention' op expects a model dimension of at least 1 (heads of width 0 attend to nothing), got 'query' [1, 2, 0]}}
  %0 = kiln.attention %q, %q, %q {num_heads = 1 : i64} : (tensor<1x2x0xf32>, tensor<1x2x0xf32>, tensor<1x2x0xf32>) -> tensor<1x2x0xf32>
  return
}

// -----

// An update_slice source of another rank than its destination.
func.func @update_slice_rank(%d: tensor<2x8x4xf32>, %s: tensor<2x4xf32>, %p: i64) {
  // expected-error @+1 {{'kiln.update_slice' op expects the source to have the destination's rank 3, got 'tensor<2x4xf32>'}}
  %0 = kiln.update_slice %d, %s, %p {axis = 1 : i64} : (tensor<2x8x4xf32>, tensor<2x4xf32>, i64) -> tensor<2x8x4xf32>
  return
}

// -----

// An update_slice into a destination of dynamic length along the axis.
func.func @update_slice_dynamic(%d: tensor<2x?x4xf32>, %s: tensor<2x1x4xf32>, %p: i64) {
  // expected-error @+1 {{'kiln.update_slice' op expects the destination's length along axis 1 to be static (a buffer of fixed capacity), got 'tensor<2x?x4xf32>'}}
  %0 = kiln.update_slice %d, %s, %p {axis = 1 : i64} : (tensor<2x?x4xf32>, tensor<2x1x4xf32>, i64) -> tensor<2x?x4xf32>
  return
}

// -----

// An update_slice source longer than the destination, or of another width.
func.func @update_slice_fit(%d: tensor<2x8x4xf32>, %s: tensor<2x9x4xf32>, %p: i64) {
  // expected-error @+1 {{'kiln.update_slice' op expects the source 'tensor<2x9x4xf32>' to fit in the destination 'tensor<2x8x4xf32>' (dimension 1)}}
  %0 = kiln.update_slice %d, %s, %p {axis = 1 : i64} : (tensor<2x8x4xf32>, tensor<2x9x4xf32>, i64) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @update_slice_width(%d: tensor<2x8x4xf32>, %s: tensor<2x1x5xf32>, %p: i64) {
  // expected-error @+1 {{'kiln.update_slice' op expects the source 'tensor<2x1x5xf32>' to fit in the destination 'tensor<2x8x4xf32>' (dimension 2)}}
  %0 = kiln.update_slice %d, %s, %p {axis = 1 : i64} : (tensor<2x8x4xf32>, tensor<2x1x5xf32>, i64) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @update_slice_axis(%d: tensor<2x8x4xf32>, %s: tensor<2x1x4xf32>, %p: i64) {
  // expected-error @+1 {{'kiln.update_slice' op expects an axis in [0, 3), got 3}}
  %0 = kiln.update_slice %d, %s, %p {axis = 3 : i64} : (tensor<2x8x4xf32>, tensor<2x1x4xf32>, i64) -> tensor<2x8x4xf32>
  return
}

// -----

// A query offset without causal attention.
func.func @attention_offset_causal(%q: tensor<2x1x8xf32>, %k: tensor<2x16x8xf32>, %p: i64) {
  // expected-error @+1 {{'kiln.attention' op expects 'offset' only with causal attention}}
  %0 = kiln.attention %q, %k, %k offset %p {num_heads = 2 : i64} : (tensor<2x1x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, i64) -> tensor<2x1x8xf32>
  return
}

// -----

// A query offset into keys of dynamic length.
func.func @attention_offset_static(%q: tensor<2x1x8xf32>, %k: tensor<2x?x8xf32>, %p: i64) {
  // expected-error @+1 {{'kiln.attention' op expects keys of static length with 'offset' (a cache of fixed capacity), got 'tensor<2x?x8xf32>'}}
  %0 = kiln.attention %q, %k, %k offset %p {num_heads = 2 : i64, causal} : (tensor<2x1x8xf32>, tensor<2x?x8xf32>, tensor<2x?x8xf32>, i64) -> tensor<2x1x8xf32>
  return
}

// -----

// The target on something other than a module.
// expected-error @+1 {{'func.func' op 'kiln.target' must be a #kiln.target<...> on a module}}
func.func @target_on_function() attributes {kiln.target = #kiln.target<cpu = "znver4", features = "+avx2", l1DataBytes = 32768, l2Bytes = 1048576>} {
  return
}

// -----

// The target as a string.
// expected-error @+1 {{'builtin.module' op 'kiln.target' must be a #kiln.target<...> on a module}}
module attributes {kiln.target = "znver4"} {
}

// -----

// A target whose CPU is not resolved.
// expected-error @+1 {{expects a resolved LLVM CPU name, got 'host'}}
module attributes {kiln.target = #kiln.target<cpu = "host", features = "", l1DataBytes = 32768, l2Bytes = 1048576>} {
}

// -----

// A feature without its sign.
// expected-error @+1 {{expects features as +name or -name separated by commas, got 'avx2'}}
module attributes {kiln.target = #kiln.target<cpu = "znver4", features = "+avx,avx2", l1DataBytes = 32768, l2Bytes = 1048576>} {
}

// -----

// A GPU that is no NVIDIA architecture.
// expected-error @+1 {{expects 'gpu' to be an NVIDIA GPU architecture (sm_80, sm_90, ...), got 'gfx90a'}}
module attributes {kiln.target = #kiln.target<cpu = "znver4", features = "+avx2", l1DataBytes = 32768, l2Bytes = 1048576, gpu = "gfx90a">} {
}

// -----

// A cache too small to be real.
// expected-error @+1 {{expects 'l1DataBytes' in [1024, 1073741824], got 0}}
module attributes {kiln.target = #kiln.target<cpu = "znver4", features = "+avx2", l1DataBytes = 0, l2Bytes = 1048576>} {
}

// -----

// A tile config on a module.
// expected-error @+1 {{'builtin.module' op 'kiln.cpu_tiles' must be a #kiln.cpu_tiles<...> on a linalg op}}
module attributes {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8], threads = []>} {
}

// -----

// A negative tile size.
func.func @negative_tile(%a: memref<4x4xf32>, %b: memref<4x4xf32>) {
  // expected-error @+1 {{expects tile sizes >= 0, got -1}}
  linalg.copy {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [1, -1], threads = [0]>} ins(%a : memref<4x4xf32>) outs(%b : memref<4x4xf32>)
  return
}

// -----

// Thread loops out of order.
func.func @threads_out_of_order(%a: memref<4x4xf32>, %b: memref<4x4xf32>) {
  // expected-error @+1 {{expects the thread loops ascending, each one of the 2 loops, got 0}}
  linalg.copy {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [1, 8], threads = [1, 0]>} ins(%a : memref<4x4xf32>) outs(%b : memref<4x4xf32>)
  return
}

// -----

// A thread loop past the op's loops.
func.func @thread_loop_past_the_loops(%a: memref<4x4xf32>, %b: memref<4x4xf32>) {
  // expected-error @+1 {{expects the thread loops ascending, each one of the 2 loops, got 2}}
  linalg.copy {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [1, 8], threads = [2]>} ins(%a : memref<4x4xf32>) outs(%b : memref<4x4xf32>)
  return
}

// -----

// Block sizes for fewer loops than the tile's.
func.func @blocks_per_loop(%a: memref<4x4xf32>, %b: memref<4x4xf32>, %c: memref<4x4xf32>) {
  // expected-error @+1 {{expects a block size for each of the 3 loops, got 2}}
  linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [2, 4, 1], threads = [0], blocks = [0, 4]>} ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  return
}

// -----

// A negative block size.
func.func @negative_block(%a: memref<4x4xf32>, %b: memref<4x4xf32>, %c: memref<4x4xf32>) {
  // expected-error @+1 {{expects block sizes >= 0, got -4}}
  linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [2, 4, 1], threads = [0], blocks = [0, -4, 0]>} ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  return
}

// -----

// Block thread loops past the op's loops.
func.func @block_threads_past_the_loops(%a: memref<4x4xf32>, %b: memref<4x4xf32>, %c: memref<4x4xf32>) {
  // expected-error @+1 {{expects the block thread loops ascending, each one of the 3 loops, got 3}}
  linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [2, 4, 1], threads = [0], blocks = [0, 4, 0], block_threads = [3]>} ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  return
}

// -----

// Something other than a #kiln.cpu_pack among the packs.
func.func @packs_not_packs(%a: memref<4x4xf32>, %b: memref<4x4xf32>, %c: memref<4x4xf32>) {
  // expected-error @+1 {{expects 'packs' of #kiln.cpu_pack<...>, got 1 : i64}}
  linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [2, 4, 1], threads = [0], packs = [1]>} ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  return
}

// -----

// A pack along a loop the op does not have.
func.func @pack_past_the_loops(%a: memref<4x4xf32>, %b: memref<4x4xf32>, %c: memref<4x4xf32>) {
  // expected-error @+1 {{expects a pack's dims among the 3 loops, got 5}}
  linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [2, 4, 1], threads = [0], packs = [#kiln.cpu_pack<operand = 1, dims = [2, 5]>]>} ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  return
}

// -----

// A pack whose two loops are one.
func.func @pack_one_loop(%a: memref<4x4xf32>, %b: memref<4x4xf32>, %c: memref<4x4xf32>) {
  // expected-error @+2 {{expects 'dims' to be two different loops}}
  // expected-error @+1 {{failed to parse Kiln_CpuTilesAttr parameter 'packs'}}
  linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [2, 4, 1], threads = [0], packs = [#kiln.cpu_pack<operand = 1, dims = [2, 2]>]>} ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  return
}

// -----

// Micro-panels without their width.
func.func @panel_without_width(%a: memref<4x4xf32>, %b: memref<4x4xf32>, %c: memref<4x4xf32>) {
  // expected-error @+2 {{expects 'panel_dim' (one of 'dims') and a 'panel_width' > 0 together, or neither}}
  // expected-error @+1 {{failed to parse Kiln_CpuTilesAttr parameter 'packs'}}
  linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [2, 4, 1], threads = [0], packs = [#kiln.cpu_pack<operand = 1, dims = [2, 1], panel_dim = 1>]>} ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  return
}

// -----

// A run-time reuse test without the reuse it needs.
func.func @reuse_without_minimum(%a: memref<4x4xf32>, %b: memref<4x4xf32>, %c: memref<4x4xf32>) {
  // expected-error @+2 {{expects 'reuse' loops with a 'min_reuse' > 0}}
  // expected-error @+1 {{failed to parse Kiln_CpuTilesAttr parameter 'packs'}}
  linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [2, 4, 1], threads = [0], packs = [#kiln.cpu_pack<operand = 1, dims = [2, 1], reuse = [0]>]>} ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  return
}

// -----

// Key/value heads that do not group the query heads.
func.func @attention_kv_heads_divide(%q: tensor<?x?x12xf32>, %k: tensor<?x?x3xf32>) {
  // expected-error @+1 {{'kiln.attention' op expects 'num_kv_heads' (3) to divide 'num_heads' (4)}}
  %0 = kiln.attention %q, %k, %k {num_heads = 4 : i64, num_kv_heads = 3 : i64}
      : (tensor<?x?x12xf32>, tensor<?x?x3xf32>, tensor<?x?x3xf32>) -> tensor<?x?x12xf32>
  return
}

// -----

// Zero key/value heads.
func.func @attention_kv_heads_zero(%q: tensor<?x?x12xf32>, %k: tensor<?x?x3xf32>) {
  // expected-error @+1 {{'kiln.attention' op expects 'num_kv_heads' (0) to divide 'num_heads' (4)}}
  %0 = kiln.attention %q, %k, %k {num_heads = 4 : i64, num_kv_heads = 0 : i64}
      : (tensor<?x?x12xf32>, tensor<?x?x3xf32>, tensor<?x?x3xf32>) -> tensor<?x?x12xf32>
  return
}

// -----

// Keys as wide as the queries, but two key/value heads of width 3 declared.
func.func @attention_kv_width(%q: tensor<?x?x12xf32>, %k: tensor<?x?x12xf32>) {
  // expected-error @+1 {{'kiln.attention_grad' op expects 'key' [?, ?, 12] to match the batch of 'query' [?, ?, 12] and have 2 heads of width 3 (6)}}
  %0:3 = kiln.attention_grad %q, %q, %k, %k {num_heads = 4 : i64, num_kv_heads = 2 : i64}
      : (tensor<?x?x12xf32>, tensor<?x?x12xf32>, tensor<?x?x12xf32>, tensor<?x?x12xf32>)
      -> (tensor<?x?x12xf32>, tensor<?x?x12xf32>, tensor<?x?x12xf32>)
  return
}

// -----

// The attention kernel ops (kiln-to-gpu): tensors and buffers mixed.
func.func @flash_mixed(%q: tensor<?x?x8xf32>, %o: memref<?x?x8xf32>) {
  // expected-error @+1 {{'kiln.flash_attention' op expects tensors only or buffers only}}
  kiln.flash_attention ins(%q, %q, %q : tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) outs(%o : memref<?x?x8xf32>) {num_heads = 2 : i64, num_kv_heads = 2 : i64}
  return
}

// -----

// Heads wider than the kernels' tiles.
func.func @flash_wide_heads(%q: memref<?x?x258xf32>) {
  // expected-error @+1 {{'kiln.flash_attention' op expects heads 1 to 128 wide, got 129}}
  kiln.flash_attention ins(%q, %q, %q : memref<?x?x258xf32>, memref<?x?x258xf32>, memref<?x?x258xf32>) outs(%q : memref<?x?x258xf32>) {num_heads = 2 : i64, num_kv_heads = 2 : i64}
  return
}

// -----

// Key/value heads that do not divide the query heads.
func.func @flash_kv_heads(%q: memref<?x?x12xf32>, %k: memref<?x?x9xf32>) {
  // expected-error @+1 {{'kiln.flash_attention' op expects 'num_kv_heads' (3) to divide 'num_heads' (4), both positive}}
  kiln.flash_attention ins(%q, %k, %k : memref<?x?x12xf32>, memref<?x?x9xf32>, memref<?x?x9xf32>) outs(%q : memref<?x?x12xf32>) {num_heads = 4 : i64, num_kv_heads = 3 : i64}
  return
}

// -----

// Keys of the wrong width for two key/value heads of 3.
func.func @flash_key_width(%q: memref<?x?x12xf32>, %k: memref<?x?x12xf32>) {
  // expected-error @+1 {{'kiln.flash_attention' op expects 'key' [?, ?, 12] to match the batch of 'query' [?, ?, 12] and have 2 heads of width 3}}
  kiln.flash_attention ins(%q, %k, %k : memref<?x?x12xf32>, memref<?x?x12xf32>, memref<?x?x12xf32>) outs(%q : memref<?x?x12xf32>) {num_heads = 4 : i64, num_kv_heads = 2 : i64}
  return
}

// -----

// An output that is not shaped like the queries.
func.func @flash_init_shape(%q: tensor<2x3x8xf32>, %o: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'kiln.flash_attention' op expects [2, 4, 8] shaped like 'query' [2, 3, 8]}}
  %0 = kiln.flash_attention ins(%q, %q, %q : tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>) outs(%o : tensor<2x4x8xf32>) {num_heads = 2 : i64, num_kv_heads = 2 : i64} -> tensor<2x4x8xf32>
  return
}

// -----

// A padding mask of the wrong length.
func.func @flash_mask(%q: memref<2x3x8xf32>, %m: memref<2x4xi1>) {
  // expected-error @+1 {{'kiln.flash_attention' op expects 'key_padding_mask' to be [batch, key_seq] = [2, 3], got [2, 4]}}
  kiln.flash_attention ins(%q, %q, %q : memref<2x3x8xf32>, memref<2x3x8xf32>, memref<2x3x8xf32>) mask(%m : memref<2x4xi1>) outs(%q : memref<2x3x8xf32>) {num_heads = 2 : i64, num_kv_heads = 2 : i64}
  return
}

// -----

// Dropout without a seed.
func.func @flash_dropout_seed(%q: memref<?x?x8xf32>) {
  // expected-error @+1 {{'kiln.flash_attention' op expects a 'seed' operand when 'dropout' (5.000000e-01) is non-zero}}
  kiln.flash_attention ins(%q, %q, %q : memref<?x?x8xf32>, memref<?x?x8xf32>, memref<?x?x8xf32>) outs(%q : memref<?x?x8xf32>) {num_heads = 2 : i64, num_kv_heads = 2 : i64, dropout = 0.5 : f64}
  return
}

// -----

// Causal attention with more queries than keys.
func.func @flash_causal_lengths(%q: memref<2x5x8xf32>, %k: memref<2x3x8xf32>) {
  // expected-error @+1 {{'kiln.flash_attention' op expects causal attention to have no more queries (5) than keys (3)}}
  kiln.flash_attention ins(%q, %k, %k : memref<2x5x8xf32>, memref<2x3x8xf32>, memref<2x3x8xf32>) outs(%q : memref<2x5x8xf32>) {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal}
  return
}

// -----

// A key gradient not shaped like the keys.
func.func @flash_grad_key_init(%q: memref<?x?x8xf32>, %dk: memref<?x?x4xf32>) {
  // expected-error @+1 {{'kiln.flash_attention_grad' op expects [?, ?, 4] shaped like 'key' [?, ?, 8]}}
  kiln.flash_attention_grad ins(%q, %q, %q, %q, %q : memref<?x?x8xf32>, memref<?x?x8xf32>, memref<?x?x8xf32>, memref<?x?x8xf32>, memref<?x?x8xf32>) outs(%q, %dk, %q : memref<?x?x8xf32>, memref<?x?x4xf32>, memref<?x?x8xf32>) {num_heads = 2 : i64, num_kv_heads = 2 : i64}
  return
}
