// One pre-LN GPT-2 block of gpt-tiny (d = 128, 4 heads, d_ff = 512) with its
// embeddings, tied output head and loss, written by hand in kiln IR. Batch
// and sequence sizes are dynamic. Dropout is on (training mode): run
// `kiln-opt --kiln-strip-dropout --canonicalize` to get the evaluation model.
func.func @gpt_tiny_loss(
    %idx: tensor<?x?xi64>, %targets: tensor<?x?xi64>, %seed: i64,
    %wte: tensor<65x128xf32>, %wpe: tensor<128x128xf32>,
    %ln1_g: tensor<128xf32>, %ln1_b: tensor<128xf32>,
    %w_qkv: tensor<384x128xf32>, %b_qkv: tensor<384xf32>,
    %w_proj: tensor<128x128xf32>, %b_proj: tensor<128xf32>,
    %ln2_g: tensor<128xf32>, %ln2_b: tensor<128xf32>,
    %w_fc1: tensor<512x128xf32>, %b_fc1: tensor<512xf32>,
    %w_fc2: tensor<128x512xf32>, %b_fc2: tensor<128xf32>,
    %lnf_g: tensor<128xf32>, %lnf_b: tensor<128xf32>) -> tensor<f32> {
  // x = wte[idx] + wpe[0:T]
  %tok = kiln.embedding %idx, %wte : (tensor<?x?xi64>, tensor<65x128xf32>) -> tensor<?x?x128xf32>
  %pos = kiln.pe learned %tok table %wpe : (tensor<?x?x128xf32>, tensor<128x128xf32>) -> tensor<?x?x128xf32>
  %x0 = kiln.dropout %pos, %seed {p = 0.1 : f64, stream = 0 : i64} : (tensor<?x?x128xf32>, i64) -> tensor<?x?x128xf32>

  // x += proj(causal_mha(ln1(x))), the fused QKV weight split into q|k|v.
  %h1 = kiln.layernorm %x0, %ln1_g, %ln1_b : (tensor<?x?x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
  %wq = kiln.slice %w_qkv {axis = 0 : i64, start = 0 : i64, end = 128 : i64} : (tensor<384x128xf32>) -> tensor<128x128xf32>
  %wk = kiln.slice %w_qkv {axis = 0 : i64, start = 128 : i64, end = 256 : i64} : (tensor<384x128xf32>) -> tensor<128x128xf32>
  %wv = kiln.slice %w_qkv {axis = 0 : i64, start = 256 : i64} : (tensor<384x128xf32>) -> tensor<128x128xf32>
  %bq = kiln.slice %b_qkv {axis = 0 : i64, start = 0 : i64, end = 128 : i64} : (tensor<384xf32>) -> tensor<128xf32>
  %bk = kiln.slice %b_qkv {axis = 0 : i64, start = 128 : i64, end = 256 : i64} : (tensor<384xf32>) -> tensor<128xf32>
  %bv = kiln.slice %b_qkv {axis = 0 : i64, start = 256 : i64} : (tensor<384xf32>) -> tensor<128xf32>
  %att = kiln.mha %h1, %h1 weights(%wq, %wk, %wv, %w_proj) biases(%bq, %bk, %bv, %b_proj) seed %seed
      {num_heads = 4 : i64, causal, dropout = 0.1 : f64, stream = 1 : i64}
      : (tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<128x128xf32>, tensor<128x128xf32>,
         tensor<128x128xf32>, tensor<128x128xf32>, tensor<128xf32>, tensor<128xf32>,
         tensor<128xf32>, tensor<128xf32>, i64) -> tensor<?x?x128xf32>
  %att_d = kiln.dropout %att, %seed {p = 0.1 : f64, stream = 2 : i64} : (tensor<?x?x128xf32>, i64) -> tensor<?x?x128xf32>
  %x1 = kiln.add %x0, %att_d : (tensor<?x?x128xf32>, tensor<?x?x128xf32>) -> tensor<?x?x128xf32>

  // x += fc2(gelu(fc1(ln2(x))))
  %h2 = kiln.layernorm %x1, %ln2_g, %ln2_b : (tensor<?x?x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
  %mlp = kiln.ffn gelu %h2, %w_fc1, %w_fc2 biases(%b_fc1, %b_fc2)
      : (tensor<?x?x128xf32>, tensor<512x128xf32>, tensor<128x512xf32>, tensor<512xf32>, tensor<128xf32>)
      -> tensor<?x?x128xf32>
  %mlp_d = kiln.dropout %mlp, %seed {p = 0.1 : f64, stream = 3 : i64} : (tensor<?x?x128xf32>, i64) -> tensor<?x?x128xf32>
  %x2 = kiln.add %x1, %mlp_d : (tensor<?x?x128xf32>, tensor<?x?x128xf32>) -> tensor<?x?x128xf32>

  // logits = ln_f(x) · wteᵀ (tied head), mean cross-entropy over B·T targets.
  %hf = kiln.layernorm %x2, %lnf_g, %lnf_b : (tensor<?x?x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
  %logits = kiln.linear %hf, %wte : (tensor<?x?x128xf32>, tensor<65x128xf32>) -> tensor<?x?x65xf32>
  %loss = kiln.cross_entropy %logits, %targets : (tensor<?x?x65xf32>, tensor<?x?xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
