// Round-trip of every kiln op: print -> parse -> print, in the custom and the
// generic form.
// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// RUN: kiln-opt %s --mlir-print-op-generic | kiln-opt | FileCheck %s

// Ids of any rank and either integer width; padding_idx kept.
// CHECK-LABEL: func.func @embedding
func.func @embedding(%ids: tensor<?x?xi64>, %ids32: tensor<7xi32>,
                     %table: tensor<100x64xf32>) -> (tensor<?x?x64xf32>, tensor<7x64xf32>) {
  // CHECK: kiln.embedding %{{.*}}, %{{.*}} {padding_idx = 0 : i64} : (tensor<?x?xi64>, tensor<100x64xf32>) -> tensor<?x?x64xf32>
  %0 = kiln.embedding %ids, %table {padding_idx = 0 : i64}
      : (tensor<?x?xi64>, tensor<100x64xf32>) -> tensor<?x?x64xf32>
  // CHECK: kiln.embedding %{{.*}}, %{{.*}} : (tensor<7xi32>, tensor<100x64xf32>) -> tensor<7x64xf32>
  %1 = kiln.embedding %ids32, %table : (tensor<7xi32>, tensor<100x64xf32>) -> tensor<7x64xf32>
  return %0, %1 : tensor<?x?x64xf32>, tensor<7x64xf32>
}

// Sinusoidal (odd width) and learned encodings, with and without an offset.
// CHECK-LABEL: func.func @pe
func.func @pe(%x: tensor<?x?x5xf32>, %y: tensor<2x1x64xf32>, %wpe: tensor<16x64xf32>,
              %pos: i64) -> (tensor<?x?x5xf32>, tensor<2x1x64xf32>, tensor<2x1x64xf32>) {
  // CHECK: kiln.pe sinusoidal %{{.*}} : (tensor<?x?x5xf32>) -> tensor<?x?x5xf32>
  %0 = kiln.pe sinusoidal %x : (tensor<?x?x5xf32>) -> tensor<?x?x5xf32>
  // CHECK: kiln.pe learned %{{.*}} table %{{.*}} : (tensor<2x1x64xf32>, tensor<16x64xf32>) -> tensor<2x1x64xf32>
  %1 = kiln.pe learned %y table %wpe : (tensor<2x1x64xf32>, tensor<16x64xf32>) -> tensor<2x1x64xf32>
  // CHECK: kiln.pe learned %{{.*}} table %{{.*}} offset %{{.*}} : (tensor<2x1x64xf32>, tensor<16x64xf32>, i64) -> tensor<2x1x64xf32>
  %2 = kiln.pe learned %y table %wpe offset %pos
      : (tensor<2x1x64xf32>, tensor<16x64xf32>, i64) -> tensor<2x1x64xf32>
  return %0, %1, %2 : tensor<?x?x5xf32>, tensor<2x1x64xf32>, tensor<2x1x64xf32>
}

// Both normalization formulas; the default eps and mode are elided.
// CHECK-LABEL: func.func @layernorm
func.func @layernorm(%x: tensor<?x?x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>)
    -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>) {
  // CHECK: kiln.layernorm %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %0 = kiln.layernorm %x, %g, %b : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  // CHECK: kiln.layernorm %{{.*}}, %{{.*}}, %{{.*}} {eps = 9.9999999999999998E-13 : f64, mode = #kiln<norm_mode std_eps>}
  %1 = kiln.layernorm %x, %g, %b {eps = 1.0e-12 : f64, mode = #kiln<norm_mode std_eps>}
      : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  return %0, %1 : tensor<?x?x8xf32>, tensor<?x?x8xf32>
}

// RMS norm with the default eps (elided) and another.
// CHECK-LABEL: func.func @rms_norm
func.func @rms_norm(%x: tensor<?x?x8xf32>, %w: tensor<8xf32>)
    -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>) {
  // CHECK: kiln.rms_norm %{{.*}}, %{{.*}} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %0 = kiln.rms_norm %x, %w : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  // CHECK: kiln.rms_norm %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64}
  %1 = kiln.rms_norm %x, %w {eps = 1.0e-5 : f64} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  return %0, %1 : tensor<?x?x8xf32>, tensor<?x?x8xf32>
}

// Rotary embeddings: both styles, an offset, the inverse rotation.
// CHECK-LABEL: func.func @rotary
func.func @rotary(%x: tensor<?x?x12xf32>, %pos: i64)
    -> (tensor<?x?x12xf32>, tensor<?x?x12xf32>) {
  // CHECK: kiln.rotary %{{.*}} {head_dim = 6 : i64} : (tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  %0 = kiln.rotary %x {head_dim = 6 : i64} : (tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  // CHECK: kiln.rotary %{{.*}} offset %{{.*}} {head_dim = 4 : i64, inverse, style = #kiln<rotary_style interleaved>, theta = 5.000000e+05 : f64} : (tensor<?x?x12xf32>, i64) -> tensor<?x?x12xf32>
  %1 = kiln.rotary %x offset %pos {head_dim = 4 : i64, theta = 5.0e5 : f64, style = #kiln<rotary_style interleaved>, inverse}
      : (tensor<?x?x12xf32>, i64) -> tensor<?x?x12xf32>
  return %0, %1 : tensor<?x?x12xf32>, tensor<?x?x12xf32>
}

// CHECK-LABEL: func.func @silu
func.func @silu(%x: tensor<?x5xf32>) -> tensor<?x5xf32> {
  // CHECK: kiln.silu %{{.*}} : (tensor<?x5xf32>) -> tensor<?x5xf32>
  %0 = kiln.silu %x : (tensor<?x5xf32>) -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// Self-attention with every option, and cross-attention with a different
// key length and width.
// CHECK-LABEL: func.func @mha
func.func @mha(%x: tensor<?x?x16xf32>, %w: tensor<16x16xf32>, %b: tensor<16xf32>,
               %m: tensor<?x?xi1>, %seed: i64, %enc: tensor<?x9x24xf32>,
               %wkv: tensor<16x24xf32>, %im: tensor<?x9xi64>)
    -> (tensor<?x?x16xf32>, tensor<?x?x16xf32>) {
  // CHECK: kiln.mha %{{.*}}, %{{.*}} weights(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) biases(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) mask %{{.*}} seed %{{.*}} {causal, dropout = 1.000000e-01 : f64, num_heads = 4 : i64, stream = 2 : i64}
  %0 = kiln.mha %x, %x weights(%w, %w, %w, %w) biases(%b, %b, %b, %b) mask %m seed %seed
      {num_heads = 4 : i64, causal, dropout = 0.1 : f64, stream = 2 : i64}
      : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>,
         tensor<16x16xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16xf32>,
         tensor<16xf32>, tensor<16xf32>, tensor<?x?xi1>, i64) -> tensor<?x?x16xf32>
  // CHECK: kiln.mha %{{.*}}, %{{.*}} weights(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) mask %{{.*}} {num_heads = 2 : i64} : (tensor<?x?x16xf32>, tensor<?x9x24xf32>, tensor<16x16xf32>, tensor<16x24xf32>, tensor<16x24xf32>, tensor<16x16xf32>, tensor<?x9xi64>) -> tensor<?x?x16xf32>
  %1 = kiln.mha %0, %enc weights(%w, %wkv, %wkv, %w) mask %im {num_heads = 2 : i64}
      : (tensor<?x?x16xf32>, tensor<?x9x24xf32>, tensor<16x16xf32>, tensor<16x24xf32>,
         tensor<16x24xf32>, tensor<16x16xf32>, tensor<?x9xi64>) -> tensor<?x?x16xf32>
  return %0, %1 : tensor<?x?x16xf32>, tensor<?x?x16xf32>
}

// The three activations, with and without biases and dropout.
// CHECK-LABEL: func.func @ffn
func.func @ffn(%x: tensor<?x8xf32>, %w1: tensor<32x8xf32>, %w2: tensor<8x32xf32>,
               %b1: tensor<32xf32>, %b2: tensor<8xf32>, %seed: i64)
    -> (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>) {
  // CHECK: kiln.ffn relu %{{.*}}, %{{.*}}, %{{.*}} biases(%{{.*}}, %{{.*}}) seed %{{.*}} {dropout = 1.000000e-01 : f64}
  %0 = kiln.ffn relu %x, %w1, %w2 biases(%b1, %b2) seed %seed {dropout = 0.1 : f64}
      : (tensor<?x8xf32>, tensor<32x8xf32>, tensor<8x32xf32>, tensor<32xf32>, tensor<8xf32>, i64)
      -> tensor<?x8xf32>
  // CHECK: kiln.ffn gelu %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x8xf32>, tensor<32x8xf32>, tensor<8x32xf32>) -> tensor<?x8xf32>
  %1 = kiln.ffn gelu %0, %w1, %w2 : (tensor<?x8xf32>, tensor<32x8xf32>, tensor<8x32xf32>) -> tensor<?x8xf32>
  // CHECK: kiln.ffn gelu_tanh
  %2 = kiln.ffn gelu_tanh %1, %w1, %w2 : (tensor<?x8xf32>, tensor<32x8xf32>, tensor<8x32xf32>) -> tensor<?x8xf32>
  return %0, %1, %2 : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}

// Linear with and without bias (a tied output head), batched matmul with
// transposes.
// CHECK-LABEL: func.func @linear_algebra
func.func @linear_algebra(%x: tensor<?x?x8xf32>, %w: tensor<12x8xf32>, %b: tensor<12xf32>,
                          %q: tensor<?x2x?x4xf32>, %k: tensor<?x2x?x4xf32>)
    -> (tensor<?x?x12xf32>, tensor<?x?x12xf32>, tensor<?x2x?x?xf32>, tensor<?x2x4x4xf32>) {
  // CHECK: kiln.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x?x8xf32>, tensor<12x8xf32>, tensor<12xf32>) -> tensor<?x?x12xf32>
  %0 = kiln.linear %x, %w, %b : (tensor<?x?x8xf32>, tensor<12x8xf32>, tensor<12xf32>) -> tensor<?x?x12xf32>
  // CHECK: kiln.linear %{{.*}}, %{{.*}} : (tensor<?x?x8xf32>, tensor<12x8xf32>) -> tensor<?x?x12xf32>
  %1 = kiln.linear %x, %w : (tensor<?x?x8xf32>, tensor<12x8xf32>) -> tensor<?x?x12xf32>
  // CHECK: kiln.matmul %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x?xf32>
  %2 = kiln.matmul %q, %k {transpose_rhs} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x?xf32>
  // CHECK: kiln.matmul %{{.*}}, %{{.*}} {transpose_lhs} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x4x4xf32>
  %3 = kiln.matmul %q, %k {transpose_lhs} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x4x4xf32>
  return %0, %1, %2, %3 : tensor<?x?x12xf32>, tensor<?x?x12xf32>, tensor<?x2x?x?xf32>, tensor<?x2x4x4xf32>
}

// Broadcasting binary ops, unary ops, scale and dropout.
// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%x: tensor<?x?x8xf32>, %v: tensor<8xf32>, %c: tensor<?x1x1xf32>,
                       %seed: i64) -> tensor<?x?x8xf32> {
  // CHECK: kiln.add %{{.*}}, %{{.*}} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %0 = kiln.add %x, %v : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  // CHECK: kiln.sub %{{.*}}, %{{.*}} : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %1 = kiln.sub %v, %0 : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: kiln.mul %{{.*}}, %{{.*}} : (tensor<?x?x8xf32>, tensor<?x1x1xf32>) -> tensor<?x?x8xf32>
  %2 = kiln.mul %1, %c : (tensor<?x?x8xf32>, tensor<?x1x1xf32>) -> tensor<?x?x8xf32>
  // CHECK: kiln.div
  %3 = kiln.div %2, %x : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: kiln.relu
  %4 = kiln.relu %3 : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: kiln.gelu %{{.*}} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %5 = kiln.gelu %4 : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: kiln.gelu %{{.*}} {approximate_tanh}
  %6 = kiln.gelu %5 {approximate_tanh} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: kiln.tanh
  %7 = kiln.tanh %6 : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: kiln.exp
  %8 = kiln.exp %7 : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: kiln.log
  %l = kiln.log %8 : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: kiln.abs %{{.*}} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %9 = kiln.abs %l : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: kiln.scale %{{.*}} {factor = 2.500000e-01 : f64}
  %10 = kiln.scale %9 {factor = 0.25 : f64} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: kiln.dropout %{{.*}}, %{{.*}} {p = 1.000000e-01 : f64, stream = 7 : i64} : (tensor<?x?x8xf32>, i64) -> tensor<?x?x8xf32>
  %11 = kiln.dropout %10, %seed {p = 0.1 : f64, stream = 7 : i64}
      : (tensor<?x?x8xf32>, i64) -> tensor<?x?x8xf32>
  return %11 : tensor<?x?x8xf32>
}

// Softmax on the default and an explicit axis, reductions of every kind.
// CHECK-LABEL: func.func @normalizations
func.func @normalizations(%x: tensor<?x4x8xf32>)
    -> (tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?x4xf32>, tensor<?x1x1xf32>, tensor<8xf32>) {
  // CHECK: kiln.softmax %{{.*}} : (tensor<?x4x8xf32>) -> tensor<?x4x8xf32>
  %0 = kiln.softmax %x : (tensor<?x4x8xf32>) -> tensor<?x4x8xf32>
  // CHECK: kiln.log_softmax %{{.*}} {axis = 1 : i64}
  %1 = kiln.log_softmax %x {axis = 1 : i64} : (tensor<?x4x8xf32>) -> tensor<?x4x8xf32>
  // CHECK: kiln.reduce sum %{{.*}} {axes = array<i64: -1>} : (tensor<?x4x8xf32>) -> tensor<?x4xf32>
  %2 = kiln.reduce sum %x {axes = array<i64: -1>} : (tensor<?x4x8xf32>) -> tensor<?x4xf32>
  // CHECK: kiln.reduce mean %{{.*}} {axes = array<i64: 1, 2>, keep_dims} : (tensor<?x4x8xf32>) -> tensor<?x1x1xf32>
  %3 = kiln.reduce mean %x {axes = array<i64: 1, 2>, keep_dims} : (tensor<?x4x8xf32>) -> tensor<?x1x1xf32>
  // CHECK: kiln.reduce max %{{.*}} {axes = array<i64: 0, 1>} : (tensor<?x4x8xf32>) -> tensor<8xf32>
  %4 = kiln.reduce max %x {axes = array<i64: 0, 1>} : (tensor<?x4x8xf32>) -> tensor<8xf32>
  return %0, %1, %2, %3, %4 : tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?x4xf32>, tensor<?x1x1xf32>, tensor<8xf32>
}

// Head split and merge, slices from both ends, concatenation, constants.
// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<?x?x24xf32>, %y: tensor<?x?x8xf32>)
    -> (tensor<?x?x8xf32>, tensor<?x1x24xf32>, tensor<?x?x32xf32>, tensor<2xf32>) {
  // CHECK: kiln.reshape %{{.*}} [0, 0, 3, 8] : (tensor<?x?x24xf32>) -> tensor<?x?x3x8xf32>
  %0 = kiln.reshape %x [0, 0, 3, 8] : (tensor<?x?x24xf32>) -> tensor<?x?x3x8xf32>
  // CHECK: kiln.transpose %{{.*}} [0, 2, 1, 3] : (tensor<?x?x3x8xf32>) -> tensor<?x3x?x8xf32>
  %1 = kiln.transpose %0 [0, 2, 1, 3] : (tensor<?x?x3x8xf32>) -> tensor<?x3x?x8xf32>
  // CHECK: kiln.slice %{{.*}} {axis = -1 : i64, end = 8 : i64, start = 0 : i64} : (tensor<?x?x24xf32>) -> tensor<?x?x8xf32>
  %2 = kiln.slice %x {axis = -1 : i64, start = 0 : i64, end = 8 : i64}
      : (tensor<?x?x24xf32>) -> tensor<?x?x8xf32>
  // CHECK: kiln.slice %{{.*}} {axis = 1 : i64, start = -1 : i64} : (tensor<?x?x24xf32>) -> tensor<?x1x24xf32>
  %3 = kiln.slice %x {axis = 1 : i64, start = -1 : i64} : (tensor<?x?x24xf32>) -> tensor<?x1x24xf32>
  // CHECK: kiln.concat %{{.*}}, %{{.*}} {axis = 2 : i64} : (tensor<?x?x24xf32>, tensor<?x?x8xf32>) -> tensor<?x?x32xf32>
  %4 = kiln.concat %x, %y {axis = 2 : i64} : (tensor<?x?x24xf32>, tensor<?x?x8xf32>) -> tensor<?x?x32xf32>
  // CHECK: kiln.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
  %5 = kiln.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %6 = kiln.reshape %1 [0, 0, -1] : (tensor<?x3x?x8xf32>) -> tensor<?x3x?xf32>
  return %2, %3, %4, %5 : tensor<?x?x8xf32>, tensor<?x1x24xf32>, tensor<?x?x32xf32>, tensor<2xf32>
}

// Losses with each reduction, ignore_index and label smoothing.
// CHECK-LABEL: func.func @losses
func.func @losses(%logits: tensor<?x?x10xf32>, %t: tensor<?x?xi64>, %t32: tensor<?x?xi32>)
    -> (tensor<f32>, tensor<f32>, tensor<?x?xf32>) {
  // CHECK: kiln.cross_entropy %{{.*}}, %{{.*}} {ignore_index = 0 : i64, label_smoothing = 1.000000e-01 : f64} : (tensor<?x?x10xf32>, tensor<?x?xi64>) -> tensor<f32>
  %0 = kiln.cross_entropy %logits, %t {ignore_index = 0 : i64, label_smoothing = 0.1 : f64}
      : (tensor<?x?x10xf32>, tensor<?x?xi64>) -> tensor<f32>
  %lp = kiln.log_softmax %logits : (tensor<?x?x10xf32>) -> tensor<?x?x10xf32>
  // CHECK: kiln.nll_loss %{{.*}}, %{{.*}} {reduction = #kiln<loss_reduction sum>} : (tensor<?x?x10xf32>, tensor<?x?xi32>) -> tensor<f32>
  %1 = kiln.nll_loss %lp, %t32 {reduction = #kiln<loss_reduction sum>}
      : (tensor<?x?x10xf32>, tensor<?x?xi32>) -> tensor<f32>
  // CHECK: kiln.nll_loss %{{.*}}, %{{.*}} {reduction = #kiln<loss_reduction none>} : (tensor<?x?x10xf32>, tensor<?x?xi64>) -> tensor<?x?xf32>
  %2 = kiln.nll_loss %lp, %t {reduction = #kiln<loss_reduction none>}
      : (tensor<?x?x10xf32>, tensor<?x?xi64>) -> tensor<?x?xf32>
  return %0, %1, %2 : tensor<f32>, tensor<f32>, tensor<?x?xf32>
}

// The backward ops that kiln-autodiff builds.
// CHECK-LABEL: func.func @backward
func.func @backward(%g: tensor<?x?x8xf32>, %x: tensor<?x?x8xf32>, %ids: tensor<?x?xi64>,
                    %gamma: tensor<8xf32>, %t: tensor<?x?xi64>, %dl: tensor<f32>)
    -> (tensor<10x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>, tensor<?x?x8xf32>) {
  // CHECK: kiln.embedding_grad %{{.*}}, %{{.*}} {num_embeddings = 10 : i64, padding_idx = 0 : i64} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<10x8xf32>
  %0 = kiln.embedding_grad %g, %ids {num_embeddings = 10 : i64, padding_idx = 0 : i64}
      : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<10x8xf32>
  // CHECK: kiln.activation_grad gelu_tanh %{{.*}}, %{{.*}} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %1 = kiln.activation_grad gelu_tanh %g, %x : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: kiln.layernorm_grad %{{.*}}, %{{.*}}, %{{.*}} {mode = #kiln<norm_mode std_eps>} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>) -> (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %2:3 = kiln.layernorm_grad %g, %x, %gamma {mode = #kiln<norm_mode std_eps>}
      : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>) -> (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>)
  // CHECK: kiln.loss_grad %{{.*}}, %{{.*}}, %{{.*}} {from_logits, ignore_index = 0 : i64} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<f32>) -> tensor<?x?x8xf32>
  %3 = kiln.loss_grad %x, %t, %dl {from_logits, ignore_index = 0 : i64}
      : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<f32>) -> tensor<?x?x8xf32>
  return %0, %1, %2#0, %2#1, %3 : tensor<10x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>, tensor<?x?x8xf32>
}

// The backward ops of the Llama blocks.
// CHECK-LABEL: func.func @backward_llama
func.func @backward_llama(%g: tensor<?x?x8xf32>, %x: tensor<?x?x8xf32>, %w: tensor<8xf32>)
    -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>) {
  // CHECK: kiln.activation_grad silu %{{.*}}, %{{.*}} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %0 = kiln.activation_grad silu %g, %x : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: kiln.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>) -> (tensor<?x?x8xf32>, tensor<8xf32>)
  %1:2 = kiln.rms_norm_grad %g, %x, %w {eps = 1.0e-5 : f64}
      : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>) -> (tensor<?x?x8xf32>, tensor<8xf32>)
  return %0, %1#0, %1#1 : tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>
}

// Grouped-query attention: 4 query heads of width 2 over 2 key/value heads,
// and its gradient.
// CHECK-LABEL: func.func @attention_gqa
func.func @attention_gqa(%q: tensor<?x?x8xf32>, %k: tensor<?x?x4xf32>)
    -> (tensor<?x?x8xf32>, tensor<?x?x4xf32>) {
  // CHECK: kiln.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>) -> tensor<?x?x8xf32>
  %0 = kiln.attention %q, %k, %k {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal}
      : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>) -> tensor<?x?x8xf32>
  // CHECK: kiln.attention_grad {{.*}} {num_heads = 4 : i64, num_kv_heads = 2 : i64}
  %1:3 = kiln.attention_grad %q, %q, %k, %k {num_heads = 4 : i64, num_kv_heads = 2 : i64}
      : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>)
      -> (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>)
  return %0, %1#1 : tensor<?x?x8xf32>, tensor<?x?x4xf32>
}

// The attention core and its fused backward op.
// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<?x?x8xf32>, %k: tensor<?x?x8xf32>, %m: tensor<?x?xi1>, %s: i64)
    -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>) {
  // CHECK: kiln.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} seed %{{.*}} {causal, dropout = 1.000000e-01 : f64, num_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi1>, i64) -> tensor<?x?x8xf32>
  %0 = kiln.attention %q, %k, %k mask %m seed %s {num_heads = 2 : i64, causal, dropout = 0.1 : f64}
      : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi1>, i64) -> tensor<?x?x8xf32>
  // CHECK: kiln.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {num_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  %1:3 = kiln.attention_grad %0, %q, %k, %k {num_heads = 2 : i64}
      : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
      -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  // With the forward output (what kiln-autodiff passes).
  // CHECK: kiln.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} output %{{.*}} mask %{{.*}} seed %{{.*}} {causal, dropout = 1.000000e-01 : f64, num_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi1>, i64) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  %2:3 = kiln.attention_grad %0, %q, %k, %k output %0 mask %m seed %s {num_heads = 2 : i64, causal, dropout = 0.1 : f64}
      : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi1>, i64)
      -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  return %0, %1#1 : tensor<?x?x8xf32>, tensor<?x?x8xf32>
}

// Optimizer updates.
// CHECK-LABEL: func.func @optimizers
func.func @optimizers(%p: tensor<4x2xf32>, %g: tensor<4x2xf32>, %lr: tensor<f32>, %t: i64)
    -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<f32>) {
  // CHECK: kiln.adam_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {decoupled, weight_decay = 1.000000e-02 : f64} : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<f32>, i64) -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>)
  %0:3 = kiln.adam_update %p, %g, %g, %g, %lr, %t {decoupled, weight_decay = 0.01 : f64}
      : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<f32>, i64)
      -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>)
  // CHECK: kiln.sgd_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {momentum = 9.000000e-01 : f64}
  %1:2 = kiln.sgd_update %p, %g, %g, %lr {momentum = 0.9 : f64}
      : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<f32>) -> (tensor<4x2xf32>, tensor<4x2xf32>)
  // CHECK: kiln.global_norm_scale %{{.*}}, %{{.*}} {max_norm = 1.000000e+00 : f64} : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<f32>
  %2 = kiln.global_norm_scale %g, %g {max_norm = 1.0 : f64} : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<f32>
  // CHECK: kiln.adam_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} if_finite %{{.*}} : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<f32>, i64, tensor<f32>) -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>)
  %3:3 = kiln.adam_update %p, %g, %g, %g, %lr, %t if_finite %2
      : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<f32>, i64, tensor<f32>)
      -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>)
  // CHECK: kiln.sgd_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} if_finite %{{.*}} : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x2xf32>, tensor<4x2xf32>)
  %4:2 = kiln.sgd_update %p, %g, %g, %lr if_finite %2
      : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x2xf32>, tensor<4x2xf32>)
  return %0#0, %1#0, %2 : tensor<4x2xf32>, tensor<4x2xf32>, tensor<f32>
}

// CHECK-LABEL: func.func @reduce_max_grad
func.func @reduce_max_grad(%g: tensor<?x4x1xf32>, %h: tensor<8xf32>, %x: tensor<?x4x8xf32>)
    -> (tensor<?x4x8xf32>, tensor<?x4x8xf32>) {
  // CHECK: kiln.reduce_max_grad %{{.*}}, %{{.*}} {axes = array<i64: -1>, keep_dims} : (tensor<?x4x1xf32>, tensor<?x4x8xf32>) -> tensor<?x4x8xf32>
  %0 = kiln.reduce_max_grad %g, %x {axes = array<i64: -1>, keep_dims} : (tensor<?x4x1xf32>, tensor<?x4x8xf32>) -> tensor<?x4x8xf32>
  // CHECK: kiln.reduce_max_grad %{{.*}}, %{{.*}} {axes = array<i64: 0, 1>} : (tensor<8xf32>, tensor<?x4x8xf32>) -> tensor<?x4x8xf32>
  %1 = kiln.reduce_max_grad %h, %x {axes = array<i64: 0, 1>} : (tensor<8xf32>, tensor<?x4x8xf32>) -> tensor<?x4x8xf32>
  return %0, %1 : tensor<?x4x8xf32>, tensor<?x4x8xf32>
}
