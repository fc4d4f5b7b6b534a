// Transformer building blocks lower to a few fused linalg loops (Layers.cpp):
// embedding, positional encoding, layer norm, RMS norm, rotary embedding,
// linear, matmul, feed-forward, dropout.
// RUN: kiln-opt %s -convert-kiln-to-linalg -split-input-file | FileCheck %s

// Embedding: a gather whose row index is clamped into the table.
// CHECK-LABEL: func.func @embedding
// CHECK-SAME: (%[[IDS:.+]]: tensor<?x?xi64>, %[[T:.+]]: tensor<10x4xf32>)
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[IDS]] : tensor<?x?xi64>)
// CHECK: %[[I:.+]] = arith.index_cast
// CHECK: %[[LO:.+]] = arith.maxsi %[[I]]
// CHECK: %[[ROW:.+]] = arith.minsi %[[LO]]
// CHECK: %[[COL:.+]] = linalg.index 2
// CHECK: tensor.extract %[[T]][%[[ROW]], %[[COL]]]
func.func @embedding(%ids: tensor<?x?xi64>, %t: tensor<10x4xf32>) -> tensor<?x?x4xf32> {
  %0 = kiln.embedding %ids, %t : (tensor<?x?xi64>, tensor<10x4xf32>) -> tensor<?x?x4xf32>
  return %0 : tensor<?x?x4xf32>
}

// -----

// Sinusoidal encoding: sin on even, cos on odd columns, from the offset.
// CHECK-LABEL: func.func @pe_sinusoidal
// CHECK: linalg.index 1
// CHECK: linalg.index 2
// CHECK: math.exp
// CHECK: math.cos
// CHECK: math.sin
// CHECK: arith.select
func.func @pe_sinusoidal(%x: tensor<?x?x6xf32>, %off: i64) -> tensor<?x?x6xf32> {
  %0 = kiln.pe sinusoidal %x offset %off : (tensor<?x?x6xf32>, i64) -> tensor<?x?x6xf32>
  return %0 : tensor<?x?x6xf32>
}

// -----

// Learned encoding: a clamped read of the table row offset + t.
// CHECK-LABEL: func.func @pe_learned
// CHECK-SAME: %[[T:[a-z0-9_]+]]: tensor<16x6xf32>
// CHECK: arith.minsi
// CHECK: tensor.extract %[[T]]
func.func @pe_learned(%x: tensor<?x?x6xf32>, %t: tensor<16x6xf32>) -> tensor<?x?x6xf32> {
  %0 = kiln.pe learned %x table %t : (tensor<?x?x6xf32>, tensor<16x6xf32>) -> tensor<?x?x6xf32>
  return %0 : tensor<?x?x6xf32>
}

// -----

// LayerNorm: sum, then a fused squared-deviation reduction, then one
// normalize-scale-shift loop (rsqrt for the standard mode).
// CHECK-LABEL: func.func @layernorm
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK: math.rsqrt
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @layernorm(%x: tensor<?x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<?x8xf32> {
  %0 = kiln.layernorm %x, %g, %b : (tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// The std_eps mode divides by (sqrt(var) + eps) with the unbiased count.
// CHECK-LABEL: func.func @layernorm_std_eps
// CHECK: arith.subf %{{.+}}, %{{.+}} : f32
// CHECK: math.sqrt
// CHECK-NOT: math.rsqrt
func.func @layernorm_std_eps(%x: tensor<?x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<?x8xf32> {
  %0 = kiln.layernorm %x, %g, %b {mode = #kiln<norm_mode std_eps>} : (tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// RMS norm: the sum of squares per row, rsqrt(mean + eps), then one
// elementwise loop x·r·w; no mean is subtracted.
// CHECK-LABEL: func.func @rms_norm
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: arith.divf
// CHECK: math.rsqrt
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel"]
// CHECK-NOT: arith.subf
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @rms_norm(%x: tensor<?x?x8xf32>, %w: tensor<8xf32>) -> tensor<?x?x8xf32> {
  %0 = kiln.rms_norm %x, %w : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}

// -----

// Rotary: the inverse frequencies theta^(-2i/hd) as a constant, cos and sin
// tables of [T, hd/2] at positions offset + t, then one loop that reads each
// element's partner (i + hd/2 in the half style) and the tables.
// CHECK-LABEL: func.func @rotary
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<?x?x12xf32>
// CHECK: %[[F:.+]] = arith.constant dense<[1.000000e+00, 0.0464158{{[0-9]+}}, 0.00215443{{[0-9]+}}]> : tensor<3xf32>
// CHECK: %[[COS:.+]] = linalg.generic {{.*}} ins(%[[F]] : tensor<3xf32>) outs(%{{.+}} : tensor<?x3xf32>)
// CHECK: math.cos
// CHECK: %[[SIN:.+]] = linalg.generic {{.*}} ins(%[[F]] : tensor<3xf32>) outs(%{{.+}} : tensor<?x3xf32>)
// CHECK: math.sin
// CHECK-NOT: arith.negf
// CHECK: linalg.generic {{.*}} ins(%[[X]] : tensor<?x?x12xf32>)
// CHECK: arith.remui %{{.+}}, %c6
// CHECK: arith.cmpi ult, %{{.+}}, %c3
// CHECK: tensor.extract %[[X]]
// CHECK: tensor.extract %[[COS]]
// CHECK: tensor.extract %[[SIN]]
// CHECK: arith.negf
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @rotary(%x: tensor<?x?x12xf32>) -> tensor<?x?x12xf32> {
  %0 = kiln.rotary %x {head_dim = 6 : i64} : (tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  return %0 : tensor<?x?x12xf32>
}

// -----

// The interleaved style pairs 2i with 2i + 1; the inverse negates the sines;
// the offset shifts the positions.
// CHECK-LABEL: func.func @rotary_interleaved_inverse
// CHECK-SAME: %[[POS:[a-z0-9_]+]]: i64
// CHECK: %[[OFF:.+]] = arith.index_cast %[[POS]] : i64 to index
// CHECK: linalg.generic
// CHECK: arith.addi %{{.+}}, %[[OFF]]
// CHECK: math.cos
// CHECK: linalg.generic
// CHECK: math.sin
// CHECK: arith.negf
// CHECK: linalg.generic
// CHECK: arith.andi %{{.+}}, %c1
// CHECK: arith.shrui %{{.+}}, %c1
func.func @rotary_interleaved_inverse(%x: tensor<2x5x8xf32>, %pos: i64) -> tensor<2x5x8xf32> {
  %0 = kiln.rotary %x offset %pos {head_dim = 4 : i64, style = #kiln<rotary_style interleaved>, inverse}
      : (tensor<2x5x8xf32>, i64) -> tensor<2x5x8xf32>
  return %0 : tensor<2x5x8xf32>
}

// -----

// Linear: the bias broadcast into the accumulator, then one contraction
// over every leading dimension at once (no reshapes) that reads a static
// weight as it is stored, [N, K] (kiln-tile-and-vectorize copies it
// transposed, block by block); a weight of dynamic shape is transposed to
// [K, N] first (contiguous rows of outputs).
// CHECK-DAG: #[[X:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-DAG: #[[W:.+]] = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
// CHECK-DAG: #[[WT:.+]] = affine_map<(d0, d1, d2, d3) -> (d3, d2)>
// CHECK-DAG: #[[O:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @linear
// CHECK-SAME: %[[WEIGHT:[a-z0-9_]+]]: tensor<4x8xf32>
// CHECK: %[[ACC:.+]] = linalg.generic
// CHECK-NOT: linalg.transpose
// CHECK: linalg.generic {indexing_maps = [#[[X]], #[[W]], #[[O]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%{{.+}}, %[[WEIGHT]] : tensor<?x?x8xf32>, tensor<4x8xf32>) outs(%[[ACC]] : tensor<?x?x4xf32>)
// CHECK-NOT: tensor.collapse_shape
// CHECK-LABEL: func.func @linear_dynamic_weight
// CHECK-SAME: %[[DW:[a-z0-9_]+]]: tensor<?x8xf32>
// CHECK: %[[T:.+]] = linalg.transpose ins(%[[DW]] : tensor<?x8xf32>) outs(%{{.+}} : tensor<8x?xf32>) permutation = [1, 0]
// CHECK: linalg.generic {indexing_maps = [#[[X]], #[[WT]], #[[O]]]
// CHECK-SAME: ins(%{{.+}}, %[[T]] : tensor<?x?x8xf32>, tensor<8x?xf32>)
func.func @linear(%x: tensor<?x?x8xf32>, %w: tensor<4x8xf32>, %b: tensor<4xf32>) -> tensor<?x?x4xf32> {
  %0 = kiln.linear %x, %w, %b : (tensor<?x?x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
  return %0 : tensor<?x?x4xf32>
}
func.func @linear_dynamic_weight(%x: tensor<?x?x8xf32>, %w: tensor<?x8xf32>) -> tensor<?x?x?xf32> {
  %0 = kiln.linear %x, %w : (tensor<?x?x8xf32>, tensor<?x8xf32>) -> tensor<?x?x?xf32>
  return %0 : tensor<?x?x?xf32>
}

// -----

// Feed-forward: two contractions with the activation (and dropout) fused in
// between.
// CHECK-LABEL: func.func @ffn
// CHECK: iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: math.erf
// CHECK: arith.cmpi uge
// CHECK: iterator_types = ["parallel", "parallel", "reduction"]
func.func @ffn(%x: tensor<?x8xf32>, %w1: tensor<16x8xf32>, %w2: tensor<8x16xf32>, %s: i64) -> tensor<?x8xf32> {
  %0 = kiln.ffn gelu %x, %w1, %w2 seed %s {dropout = 0.1 : f64}
      : (tensor<?x8xf32>, tensor<16x8xf32>, tensor<8x16xf32>, i64) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// A batched product with a transposed right operand ([B, N, K], as scores
// Q·Kᵀ are written): the contraction reads B as it is stored, (b, n, k);
// kiln-tile-and-vectorize copies it transposed batch by batch.
// CHECK-DAG: #[[RHS:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>
// CHECK-LABEL: func.func @matmul_transpose_rhs
// CHECK-SAME: (%[[A:.+]]: tensor<2x5x3xf32>, %[[B:.+]]: tensor<2x4x3xf32>)
// CHECK-NOT: linalg.transpose
// CHECK: linalg.generic {indexing_maps = [#{{.+}}, #[[RHS]], #{{.+}}], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[A]], %[[B]] : tensor<2x5x3xf32>, tensor<2x4x3xf32>)
func.func @matmul_transpose_rhs(%a: tensor<2x5x3xf32>, %b: tensor<2x4x3xf32>) -> tensor<2x5x4xf32> {
  %0 = kiln.matmul %a, %b {transpose_rhs} : (tensor<2x5x3xf32>, tensor<2x4x3xf32>) -> tensor<2x5x4xf32>
  return %0 : tensor<2x5x4xf32>
}

// -----

// A linear of a transposed weight (a linear's input gradient, dx = g·W):
// the contraction reads the weight where it is, (k, n); the transpose, left
// unused, is dead code for canonicalize.
// CHECK-DAG: #[[KN:.+]] = affine_map<(d0, d1, d2, d3) -> (d3, d2)>
// CHECK-LABEL: func.func @linear_transposed_weight
// CHECK-SAME: (%[[X:.+]]: tensor<?x?x3xf32>, %[[W:.+]]: tensor<3x5xf32>)
// CHECK: %[[T:.+]] = linalg.transpose
// CHECK-NOT: %[[T]]
// CHECK: linalg.generic {indexing_maps = [#{{.+}}, #[[KN]], #{{.+}}], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[X]], %[[W]] : tensor<?x?x3xf32>, tensor<3x5xf32>)
func.func @linear_transposed_weight(%x: tensor<?x?x3xf32>, %w: tensor<3x5xf32>) -> tensor<?x?x5xf32> {
  %t = kiln.transpose %w [1, 0] : (tensor<3x5xf32>) -> tensor<5x3xf32>
  %0 = kiln.linear %x, %t : (tensor<?x?x3xf32>, tensor<5x3xf32>) -> tensor<?x?x5xf32>
  return %0 : tensor<?x?x5xf32>
}

// -----

// Dropout hashes (seed, stream, linear index) and scales kept values.
// CHECK-LABEL: func.func @dropout
// CHECK-SAME: %[[S:[a-z0-9_]+]]: i64
// CHECK: linalg.generic
// CHECK: linalg.index 0
// CHECK: linalg.index 1
// CHECK: arith.addi %[[S]]
// CHECK: arith.shrui
// CHECK: arith.cmpi uge
// CHECK: arith.constant 2.000000e+00 : f32
// CHECK: arith.select
func.func @dropout(%x: tensor<?x8xf32>, %s: i64) -> tensor<?x8xf32> {
  %0 = kiln.dropout %x, %s {p = 0.5 : f64, stream = 1 : i64} : (tensor<?x8xf32>, i64) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// A feed-forward whose result type leaves the width dynamic (the verifier
// accepts it): the second linear is computed at w2's width, then cast
// (kiln-fuzz-ir: the generic's result type had not matched its output).
// CHECK-LABEL: func.func @ffn_dynamic_width(
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<?x8xf32>)
// CHECK:         tensor.cast %{{.*}} : tensor<?x8xf32> to tensor<?x?xf32>
func.func @ffn_dynamic_width(%x: tensor<?x?xf32>, %w1: tensor<16x8xf32>, %w2: tensor<8x16xf32>, %seed: i64) -> tensor<?x?xf32> {
  %0 = kiln.ffn gelu %x, %w1, %w2 seed %seed {dropout = 1.000000e-01 : f64, stream = -1 : i64} : (tensor<?x?xf32>, tensor<16x8xf32>, tensor<8x16xf32>, i64) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}
