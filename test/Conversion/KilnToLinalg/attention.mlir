// Attention (Attention.cpp). Without the `attention-block` option, the scores
// are whole [B, H, Tq, Tk] tensors (CHECK, SCORES). With it, attention runs
// block by block (flash attention, CPU code; BLOCKS): no [B, H, Tq, Tk]
// tensor; an online softmax over blocks of keys; causal blocks past the last
// visible key are not visited.
// RUN: kiln-opt %s -convert-kiln-to-linalg -split-input-file | FileCheck %s
// RUN: kiln-opt %s -convert-kiln-to-linalg="attention-block=64" -split-input-file | FileCheck %s --check-prefix=BLOCKS
// RUN: kiln-opt %s -convert-kiln-to-linalg -split-input-file | FileCheck %s --check-prefix=SCORES

// Attention: q/k/v projections, the i1 padding mask widened to bytes once
// (vectors of i1 are bit-packed; buffers of i1 are not), heads split by
// expand_shape, a score contraction over (b, h, i, j, d), masking, softmax,
// the weighted sum, heads merged by collapse_shape, and the output
// projection.
// CHECK-LABEL: func.func @mha
// CHECK-COUNT-3: iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK: %[[MASK:.+]] = linalg.generic {{.*}} ins(%arg2 : tensor<?x?xi1>) outs(%{{.+}} : tensor<?x?xi8>)
// CHECK: arith.extui %{{.+}} : i1 to i8
// CHECK: tensor.expand_shape {{.*}} {{\[\[}}0], [1], [2, 3]]
// CHECK: iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]
// CHECK: ins(%{{.+}}, %[[MASK]] : tensor<?x2x?x?xf32>, tensor<?x?xi8>)
// CHECK: arith.cmpi ne
// CHECK: arith.cmpi sle
// CHECK: arith.constant -1.000000e+09 : f32
// CHECK: math.exp
// CHECK: iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]
// CHECK: tensor.collapse_shape {{.*}} {{\[\[}}0], [1], [2, 3]]
// CHECK: iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK-NOT: kiln.
func.func @mha(%x: tensor<?x?x8xf32>, %w: tensor<8x8xf32>, %m: tensor<?x?xi1>) -> tensor<?x?x8xf32> {
  %0 = kiln.mha %x, %x weights(%w, %w, %w, %w) mask %m {num_heads = 2 : i64, causal}
      : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>,
         tensor<8x8xf32>, tensor<8x8xf32>, tensor<?x?xi1>) -> tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}

// -----

// Multi-head attention with a weight of dynamic shape: the weight takes the
// size the verifier implies, so every projection has the type it claims
// (the output projection had been a tensor<2x3x?xf32> result of a
// tensor<2x3x8xf32> op: invalid IR).
// CHECK-LABEL: func.func @mha_dynamic_weight
// CHECK: tensor.cast %{{.*}} : tensor<?x?xf32> to tensor<8x8xf32>
func.func @mha_dynamic_weight(%x: tensor<2x3x8xf32>, %w: tensor<8x8xf32>, %wo: tensor<?x?xf32>) -> tensor<2x3x8xf32> {
  %0 = kiln.mha %x, %x weights(%w, %w, %w, %wo) {num_heads = 2 : i64} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<?x?xf32>) -> tensor<2x3x8xf32>
  return %0 : tensor<2x3x8xf32>
}

// -----

// The attention backward pass: probabilities recomputed (max, exp, sum),
// dP, the softmax backward with masked scores zeroed, then dQ, dK, dV.
// CHECK-LABEL: func.func @attention_grad
// CHECK: arith.constant -1.000000e+09 : f32
// CHECK: math.exp
// CHECK: arith.cmpi sle
// CHECK-COUNT-3: tensor.collapse_shape
func.func @attention_grad(%g: tensor<?x?x8xf32>, %q: tensor<?x?x8xf32>, %k: tensor<?x?x8xf32>)
    -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) {
  %0:3 = kiln.attention_grad %g, %q, %k, %k {num_heads = 2 : i64, causal}
      : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
      -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  return %0#0, %0#1, %0#2 : tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>
}

// -----

// BLOCKS-LABEL: func.func @causal_masked_dropout(
// The first key each batch row keeps, for rows that see no key at all.
// BLOCKS:         %[[FIRST:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : tensor<?x?xi8>) outs(%{{.*}} : tensor<?xi64>)
// BLOCKS:           arith.minsi
// One parallel iteration per (batch, head, block of 64 query rows).
// BLOCKS:         %[[QBLOCKS:.*]] = arith.ceildivsi %{{.*}}, %c64
// BLOCKS:         scf.forall (%[[B:.*]], %[[H:.*]], %[[QB:.*]]) in (%{{.*}}, 2, %[[QBLOCKS]]) shared_outs(%[[OUT:.*]] = %{{.*}}) -> (tensor<?x?x2x64xf32>)
// BLOCKS:           %[[Q0:.*]] = arith.muli %[[QB]], %c64
// BLOCKS:           %[[ROWS:.*]] = arith.minsi %c64{{.*}}, %{{.*}} : index
// Causal: keys up to the block's last visible one, unless a row sees none.
// BLOCKS:           %[[LIMIT:.*]] = arith.minsi
// BLOCKS:           tensor.extract %[[FIRST]][%[[B]]]
// BLOCKS:           %[[SEES:.*]] = arith.cmpi sge
// BLOCKS:           %[[KEND:.*]] = arith.select %[[SEES]], %[[LIMIT]], %{{.*}} : index
// BLOCKS:           tensor.extract_slice %{{.*}}[%[[B]], %[[Q0]], %[[H]], 0] [1, %[[ROWS]], 1, 64] [1, 1, 1, 1] : tensor<?x?x2x64xf32> to tensor<?x64xf32>
// The output block accumulates in its place in the result.
// BLOCKS:           %[[SLICE:.*]] = tensor.extract_slice %[[OUT]][%[[B]], %[[Q0]], %[[H]], 0] [1, %[[ROWS]], 1, 64]
// BLOCKS:           %[[ACC0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[SLICE]] : tensor<?x64xf32>)
// BLOCKS:           %[[KBLOCKS:.*]] = arith.ceildivsi %[[KEND]], %c64
// BLOCKS:           scf.for %{{.*}} = %{{.*}} to %[[KBLOCKS]] step %{{.*}} iter_args(%[[M:.*]] = %{{.*}}, %[[L:.*]] = %{{.*}}, %[[ACC:.*]] = %[[ACC0]])
// Scores of the block: Q rows times the transposed key block.
// BLOCKS:             tensor.extract_slice %{{.*}} : tensor<?x2x64x?xf32> to tensor<64x?xf32>
// BLOCKS:             %[[RAW:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.*}}, %{{.*}} : tensor<?x64xf32>, tensor<64x?xf32>) outs(%{{.*}} : tensor<?x?xf32>)
// BLOCKS:             %[[S:.*]] = linalg.generic {{.*}} ins(%[[RAW]], %{{.*}} : tensor<?x?xf32>, tensor<?xi8>)
// BLOCKS:               arith.cmpi sle
// BLOCKS:               arith.select %{{.*}}, %{{.*}}, %cst{{.*}} : f32
// Row maxima, the new maximum, the rescale exp(m - m_new), the weights.
// BLOCKS:             %[[ROWMAX:.*]] = linalg.generic {{.*}} ins(%[[S]] : tensor<?x?xf32>) outs(%{{.*}} : tensor<?xf32>)
// BLOCKS:               arith.maximumf
// BLOCKS:             %[[MNEW:.*]] = linalg.generic {{.*}} ins(%[[M]], %[[ROWMAX]] : tensor<?xf32>, tensor<?xf32>)
// BLOCKS:             %[[ALPHA:.*]] = linalg.generic {{.*}} ins(%[[M]], %[[MNEW]] : tensor<?xf32>, tensor<?xf32>)
// BLOCKS:               math.exp
// BLOCKS:             %[[W:.*]] = linalg.generic {{.*}} ins(%[[S]], %[[MNEW]] : tensor<?x?xf32>, tensor<?xf32>)
// BLOCKS:               math.exp
// l = l·alpha + Σ weights, in place.
// BLOCKS:             %[[LS:.*]] = linalg.generic {{.*}} ins(%[[ALPHA]] : tensor<?xf32>) outs(%[[L]] : tensor<?xf32>)
// BLOCKS:             %[[LNEW:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[W]] : tensor<?x?xf32>) outs(%[[LS]] : tensor<?xf32>)
// Dropout of the weights at their place in [B, H, Tq, Tk].
// BLOCKS:             %[[DROPPED:.*]] = linalg.generic {{.*}} ins(%[[W]] : tensor<?x?xf32>)
// BLOCKS:               arith.shrui
// acc = acc·alpha + weights·V, in place.
// BLOCKS:             %[[AS:.*]] = linalg.generic {{.*}} ins(%[[ALPHA]] : tensor<?xf32>) outs(%[[ACC]] : tensor<?x64xf32>)
// BLOCKS:             %[[ACCNEW:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[DROPPED]], %{{.*}} : tensor<?x?xf32>, tensor<?x64xf32>) outs(%[[AS]] : tensor<?x64xf32>)
// m becomes m_new last.
// BLOCKS:             %[[MOUT:.*]] = linalg.generic {{.*}} ins(%[[ROWMAX]] : tensor<?xf32>) outs(%[[M]] : tensor<?xf32>)
// BLOCKS:             scf.yield %[[MOUT]], %[[LNEW]], %[[ACCNEW]]
// BLOCKS:           %[[O:.*]] = linalg.generic {{.*}} ins(%{{.*}}#1 : tensor<?xf32>) outs(%{{.*}}#2 : tensor<?x64xf32>)
// BLOCKS:             arith.divf
// BLOCKS:           scf.forall.in_parallel
// BLOCKS:             tensor.parallel_insert_slice %[[O]] into %[[OUT]][%[[B]], %[[Q0]], %[[H]], 0] [1, %[[ROWS]], 1, 64]
// BLOCKS:         tensor.collapse_shape
// BLOCKS-NOT:     tensor<?x2x?x?xf32>

// Without blocks, the scores are one [B, H, Tq, Tk] tensor.
// SCORES-LABEL: func.func @causal_masked_dropout(
// SCORES-NOT:     scf.forall
// SCORES:         tensor<?x2x?x?xf32>
func.func @causal_masked_dropout(%q: tensor<?x?x128xf32>, %k: tensor<?x?x128xf32>,
                                 %v: tensor<?x?x128xf32>, %m: tensor<?x?xi1>,
                                 %s: i64) -> tensor<?x?x128xf32> {
  %o = kiln.attention %q, %k, %v mask %m seed %s {num_heads = 2 : i64, causal, dropout = 0.1 : f64}
      : (tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<?x?xi1>, i64) -> tensor<?x?x128xf32>
  return %o : tensor<?x?x128xf32>
}

// Not causal, no mask: every key block, no first-key search.
// BLOCKS-LABEL: func.func @cross(
// BLOCKS-NOT:     arith.minsi %{{.*}}, %{{.*}} : i64
// BLOCKS:         scf.forall
// BLOCKS-NOT:     arith.cmpi sge
// BLOCKS:           arith.ceildivsi %{{.*}}, %c64
// BLOCKS:           scf.for
func.func @cross(%q: tensor<2x17x32xf32>, %kv: tensor<2x?x32xf32>) -> tensor<2x17x32xf32> {
  %o = kiln.attention %q, %kv, %kv {num_heads = 4 : i64}
      : (tensor<2x17x32xf32>, tensor<2x?x32xf32>, tensor<2x?x32xf32>) -> tensor<2x17x32xf32>
  return %o : tensor<2x17x32xf32>
}

// The backward pass given the forward output: one parallel iteration per
// (batch, head); per query block a pass over the key blocks for the row
// maxima and sums (no iteration when there is one key block: the pass for
// the gradients then takes them from the scores it computes), D = Σ dO·O
// per row, then a pass for the gradients.
// Without the output (or the blocks) it is lowered on whole score tensors.
// BLOCKS-LABEL: func.func @backward(
// BLOCKS:         scf.forall (%[[B:.*]], %[[H:.*]]) in (%{{.*}}, 2) shared_outs(%[[DQ:.*]] = %{{.*}}, %[[DK:.*]] = %{{.*}}, %[[DV:.*]] = %{{.*}})
// BLOCKS:           scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[DQALL:.*]] = %{{.*}}, %[[DKALL:.*]] = %{{.*}}, %[[DVALL:.*]] = %{{.*}}) -> (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>)
// BLOCKS:             %[[NB:.*]] = arith.ceildivsi %{{.*}}, %c64{{.*}} : index
// BLOCKS:             %[[ONE:.*]] = arith.cmpi eq, %[[NB]], %c1{{.*}} : index
// BLOCKS:             %[[PASS1:.*]] = arith.select %[[ONE]], %c0{{.*}}, %[[NB]] : index
// BLOCKS:             %[[STATS:.*]]:2 = scf.for %{{.*}} = %c0{{.*}} to %[[PASS1]] step
// BLOCKS:               arith.maximumf
// BLOCKS:               scf.yield
// BLOCKS:             %[[D:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%{{.*}}, %{{.*}} : tensor<?x64xf32>, tensor<?x64xf32>) outs(%{{.*}} : tensor<?xf32>)
// BLOCKS:             scf.for %{{.*}} = %c0{{.*}} to %[[NB]] {{.*}} iter_args(%[[DQB:.*]] = %{{.*}}, %[[DKB:.*]] = %[[DKALL]], %[[DVB:.*]] = %[[DVALL]])
// BLOCKS:               %[[ML:.*]]:2 = scf.if %[[ONE]]
// BLOCKS:                 arith.maximumf
// BLOCKS:                 scf.yield
// BLOCKS:               } else {
// BLOCKS-NEXT:            scf.yield %[[STATS]]#0, %[[STATS]]#1
// BLOCKS:               %[[P:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[ML]]#0, %[[ML]]#1 : tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>)
// BLOCKS:                 math.exp
// BLOCKS:                 arith.divf
// BLOCKS:               %[[DS:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[P]], %[[D]] : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>)
// BLOCKS:                 arith.cmpi sle
// BLOCKS:               %[[DQN:.*]] = linalg.generic {{.*}} ins(%[[DS]], %{{.*}} : tensor<?x?xf32>, tensor<?x64xf32>) outs(%[[DQB]] : tensor<?x64xf32>)
// BLOCKS:               %[[DKROWS:.*]] = tensor.extract_slice %[[DKB]]
// BLOCKS:               %[[DKN:.*]] = linalg.generic {{.*}} ins(%[[DS]], %{{.*}} : tensor<?x?xf32>, tensor<?x64xf32>) outs(%[[DKROWS]] : tensor<?x64xf32>)
// BLOCKS:               tensor.insert_slice %[[DKN]] into %[[DKB]]
// BLOCKS:               %[[DVROWS:.*]] = tensor.extract_slice %[[DVB]]
// BLOCKS:               %[[DVN:.*]] = linalg.generic {{.*}} ins(%[[P]], %{{.*}} : tensor<?x?xf32>, tensor<?x64xf32>) outs(%[[DVROWS]] : tensor<?x64xf32>)
// BLOCKS:               tensor.insert_slice %[[DVN]] into %[[DVB]]
// BLOCKS:           scf.forall.in_parallel
// BLOCKS-COUNT-3:     tensor.parallel_insert_slice
// SCORES-LABEL: func.func @backward(
// SCORES-NOT:     scf.forall
// SCORES:         tensor<?x2x?x?xf32>
func.func @backward(%g: tensor<?x?x128xf32>, %q: tensor<?x?x128xf32>, %k: tensor<?x?x128xf32>,
                    %v: tensor<?x?x128xf32>, %o: tensor<?x?x128xf32>)
    -> (tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<?x?x128xf32>) {
  %r:3 = kiln.attention_grad %g, %q, %k, %v output %o {num_heads = 2 : i64, causal}
      : (tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<?x?x128xf32>)
      -> (tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<?x?x128xf32>)
  return %r#0, %r#1, %r#2 : tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<?x?x128xf32>
}

// BLOCKS-LABEL: func.func @backward_without_output(
// BLOCKS-NOT:     scf.forall
// BLOCKS:         tensor<?x2x?x?xf32>
func.func @backward_without_output(%g: tensor<?x?x128xf32>, %q: tensor<?x?x128xf32>, %k: tensor<?x?x128xf32>)
    -> tensor<?x?x128xf32> {
  %r:3 = kiln.attention_grad %g, %q, %k, %k {num_heads = 2 : i64, causal}
      : (tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<?x?x128xf32>)
      -> (tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<?x?x128xf32>)
  return %r#0 : tensor<?x?x128xf32>
}

// -----

// Keys and values whose width is dynamic have the query's (the call checks
// it): cast to it before their heads are split (kiln-fuzz-ir: the
// expand_shape of a dynamic width into static heads did not verify).
// CHECK-LABEL: func.func @dynamic_key_width(
// CHECK:         %[[K:.+]] = tensor.cast %arg2 : tensor<?x?x?xf32> to tensor<?x?x128xf32>
// CHECK:         tensor.expand_shape %[[K]] {{\[\[}}0], [1], [2, 3]]{{.*}} : tensor<?x?x128xf32> into tensor<?x?x2x64xf32>
// BLOCKS-LABEL: func.func @dynamic_key_width(
// BLOCKS:         tensor.cast %arg2 : tensor<?x?x?xf32> to tensor<?x?x128xf32>
func.func @dynamic_key_width(%g: tensor<?x?x128xf32>, %q: tensor<?x?x128xf32>, %k: tensor<?x?x?xf32>)
    -> tensor<?x?x128xf32> {
  %r:3 = kiln.attention_grad %g, %q, %k, %k {num_heads = 2 : i64, causal}
      : (tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<?x?x?xf32>, tensor<?x?x?xf32>)
      -> (tensor<?x?x128xf32>, tensor<?x?x?xf32>, tensor<?x?x?xf32>)
  return %r#0 : tensor<?x?x128xf32>
}

// -----

// Queries at positions [offset, offset + Tq) of a cache of 256 positions:
// the keys and values are the cache's first offset + Tq positions (a
// dynamic slice), then causal attention as usual; the new keys are written
// into the cache with one insert_slice at the offset.
// CHECK-LABEL: func.func @cached(
// CHECK:         %[[OFF:.+]] = arith.index_cast %arg3 : i64 to index
// CHECK:         %[[K:.+]] = tensor.insert_slice %arg1 into %arg2[0, %[[OFF]], 0] [%{{.+}}, %{{.+}}, 128] [1, 1, 1] : tensor<?x?x128xf32> into tensor<?x256x128xf32>
// CHECK:         %[[LEN:.+]] = arith.addi %{{.+}}, %{{.+}} : index
// CHECK:         tensor.extract_slice %[[K]][0, 0, 0] [%{{.+}}, %[[LEN]], 128] [1, 1, 1] : tensor<?x256x128xf32> to tensor<?x?x128xf32>
// BLOCKS-LABEL: func.func @cached(
// BLOCKS:         tensor.insert_slice
// BLOCKS:         tensor.extract_slice
// BLOCKS:         scf.forall
func.func @cached(%q: tensor<?x?x128xf32>, %new: tensor<?x?x128xf32>, %cache: tensor<?x256x128xf32>, %pos: i64)
    -> (tensor<?x?x128xf32>, tensor<?x256x128xf32>) {
  %k = kiln.update_slice %cache, %new, %pos {axis = 1 : i64}
      : (tensor<?x256x128xf32>, tensor<?x?x128xf32>, i64) -> tensor<?x256x128xf32>
  %o = kiln.attention %q, %k, %k offset %pos {num_heads = 2 : i64, causal}
      : (tensor<?x?x128xf32>, tensor<?x256x128xf32>, tensor<?x256x128xf32>, i64) -> tensor<?x?x128xf32>
  return %o, %k : tensor<?x?x128xf32>, tensor<?x256x128xf32>
}

// -----

// Grouped-query attention, 4 query heads over 2 key/value heads of 32. On
// whole scores, the key/value heads are repeated for their groups
// ([B, T, 2, 2, 32] folded to 4 heads, Hugging Face's repeat_kv); block by
// block, no copy: query head h reads key/value head h / 2 in place.
// CHECK-LABEL: func.func @grouped_query(
// CHECK:         tensor.expand_shape %arg1 {{\[\[}}0], [1], [2, 3]]{{.*}} : tensor<?x?x64xf32> into tensor<?x?x2x32xf32>
// CHECK:         %[[REP:.+]] = linalg.generic {{.*}} ins(%{{.+}} : tensor<?x?x2x32xf32>) outs(%{{.+}} : tensor<?x?x2x2x32xf32>)
// CHECK:         tensor.collapse_shape %[[REP]] {{\[\[}}0], [1], [2, 3], [4]] : tensor<?x?x2x2x32xf32> into tensor<?x?x4x32xf32>
// BLOCKS-LABEL: func.func @grouped_query(
// BLOCKS-NOT:     tensor<?x?x2x2x32xf32>
// BLOCKS:         scf.forall (%{{.+}}, %[[H:.+]], %{{.+}}) in
// BLOCKS:         %[[KVH:.+]] = arith.divui %[[H]], %c2 : index
// BLOCKS:         tensor.extract_slice %{{.+}}[%{{.+}}, %[[KVH]], 0, %{{.+}}] [1, 1, 32, %{{.+}}]
func.func @grouped_query(%q: tensor<?x?x128xf32>, %k: tensor<?x?x64xf32>)
    -> tensor<?x?x128xf32> {
  %o = kiln.attention %q, %k, %k {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal}
      : (tensor<?x?x128xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x128xf32>
  return %o : tensor<?x?x128xf32>
}

// -----

// Its gradient: each query head's dK and dV, summed over its group into the
// key/value heads (a reduction over the group axis), in both forms.
// CHECK-LABEL: func.func @grouped_query_grad(
// CHECK:         tensor.expand_shape %{{.+}} {{\[\[}}0], [1], [2, 3], [4]]{{.*}} : tensor<?x?x4x32xf32> into tensor<?x?x2x2x32xf32>
// CHECK:         linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]{{.*}} ins(%{{.+}} : tensor<?x?x2x2x32xf32>) outs(%{{.+}} : tensor<?x?x2x32xf32>)
// BLOCKS-LABEL: func.func @grouped_query_grad(
// BLOCKS:         scf.forall
// BLOCKS:         arith.divui
// BLOCKS:         tensor.expand_shape %{{.+}} {{\[\[}}0], [1], [2, 3], [4]]{{.*}} : tensor<?x?x4x32xf32> into tensor<?x?x2x2x32xf32>
// BLOCKS:         iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]
func.func @grouped_query_grad(%g: tensor<?x?x128xf32>, %q: tensor<?x?x128xf32>, %k: tensor<?x?x64xf32>)
    -> (tensor<?x?x128xf32>, tensor<?x?x64xf32>) {
  %r:3 = kiln.attention_grad %g, %q, %k, %k output %g {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal}
      : (tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x128xf32>)
      -> (tensor<?x?x128xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>)
  return %r#0, %r#1 : tensor<?x?x128xf32>, tensor<?x?x64xf32>
}
