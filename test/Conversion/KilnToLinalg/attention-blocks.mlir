// Attention block by block (flash attention, CPU code): no [B, H, Tq, Tk]
// tensor; an online softmax over blocks of keys; causal blocks past the last
// visible key are not visited.
// RUN: kiln-opt %s -convert-kiln-to-linalg="attention-block=64" | FileCheck %s
// RUN: kiln-opt %s -convert-kiln-to-linalg | FileCheck %s --check-prefix=SCORES

// CHECK-LABEL: func.func @causal_masked_dropout(
// The first key each batch row keeps, for rows that see no key at all.
// CHECK:         %[[FIRST:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : tensor<?x?xi8>) outs(%{{.*}} : tensor<?xi64>)
// CHECK:           arith.minsi
// One parallel iteration per (batch, head, block of 64 query rows).
// CHECK:         %[[QBLOCKS:.*]] = arith.ceildivsi %{{.*}}, %c64
// CHECK:         scf.forall (%[[B:.*]], %[[H:.*]], %[[QB:.*]]) in (%{{.*}}, 2, %[[QBLOCKS]]) shared_outs(%[[OUT:.*]] = %{{.*}}) -> (tensor<?x?x2x64xf32>)
// CHECK:           %[[Q0:.*]] = arith.muli %[[QB]], %c64
// CHECK:           %[[ROWS:.*]] = arith.minsi %c64{{.*}}, %{{.*}} : index
// Causal: keys up to the block's last visible one, unless a row sees none.
// CHECK:           %[[LIMIT:.*]] = arith.minsi
// CHECK:           tensor.extract %[[FIRST]][%[[B]]]
// CHECK:           %[[SEES:.*]] = arith.cmpi sge
// CHECK:           %[[KEND:.*]] = arith.select %[[SEES]], %[[LIMIT]], %{{.*}} : index
// CHECK:           tensor.extract_slice %{{.*}}[%[[B]], %[[Q0]], %[[H]], 0] [1, %[[ROWS]], 1, 64] [1, 1, 1, 1] : tensor<?x?x2x64xf32> to tensor<?x64xf32>
// The output block accumulates in its place in the result.
// CHECK:           %[[SLICE:.*]] = tensor.extract_slice %[[OUT]][%[[B]], %[[Q0]], %[[H]], 0] [1, %[[ROWS]], 1, 64]
// CHECK:           %[[ACC0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[SLICE]] : tensor<?x64xf32>)
// CHECK:           %[[KBLOCKS:.*]] = arith.ceildivsi %[[KEND]], %c64
// CHECK:           scf.for %{{.*}} = %{{.*}} to %[[KBLOCKS]] step %{{.*}} iter_args(%[[M:.*]] = %{{.*}}, %[[L:.*]] = %{{.*}}, %[[ACC:.*]] = %[[ACC0]])
// Scores of the block: Q rows times the transposed key block.
// CHECK:             tensor.extract_slice %{{.*}} : tensor<?x2x64x?xf32> to tensor<64x?xf32>
// CHECK:             %[[RAW:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.*}}, %{{.*}} : tensor<?x64xf32>, tensor<64x?xf32>) outs(%{{.*}} : tensor<?x?xf32>)
// CHECK:             %[[S:.*]] = linalg.generic {{.*}} ins(%[[RAW]], %{{.*}} : tensor<?x?xf32>, tensor<?xi8>)
// CHECK:               arith.cmpi sle
// CHECK:               arith.select %{{.*}}, %{{.*}}, %cst{{.*}} : f32
// Row maxima, the new maximum, the rescale exp(m - m_new), the weights.
// CHECK:             %[[ROWMAX:.*]] = linalg.generic {{.*}} ins(%[[S]] : tensor<?x?xf32>) outs(%{{.*}} : tensor<?xf32>)
// CHECK:               arith.maximumf
// CHECK:             %[[MNEW:.*]] = linalg.generic {{.*}} ins(%[[M]], %[[ROWMAX]] : tensor<?xf32>, tensor<?xf32>)
// CHECK:             %[[ALPHA:.*]] = linalg.generic {{.*}} ins(%[[M]], %[[MNEW]] : tensor<?xf32>, tensor<?xf32>)
// CHECK:               math.exp
// CHECK:             %[[W:.*]] = linalg.generic {{.*}} ins(%[[S]], %[[MNEW]] : tensor<?x?xf32>, tensor<?xf32>)
// CHECK:               math.exp
// l = l·alpha + Σ weights, in place.
// CHECK:             %[[LS:.*]] = linalg.generic {{.*}} ins(%[[ALPHA]] : tensor<?xf32>) outs(%[[L]] : tensor<?xf32>)
// CHECK:             %[[LNEW:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[W]] : tensor<?x?xf32>) outs(%[[LS]] : tensor<?xf32>)
// Dropout of the weights at their place in [B, H, Tq, Tk].
// CHECK:             %[[DROPPED:.*]] = linalg.generic {{.*}} ins(%[[W]] : tensor<?x?xf32>)
// CHECK:               arith.shrui
// acc = acc·alpha + weights·V, in place.
// CHECK:             %[[AS:.*]] = linalg.generic {{.*}} ins(%[[ALPHA]] : tensor<?xf32>) outs(%[[ACC]] : tensor<?x64xf32>)
// CHECK:             %[[ACCNEW:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[DROPPED]], %{{.*}} : tensor<?x?xf32>, tensor<?x64xf32>) outs(%[[AS]] : tensor<?x64xf32>)
// m becomes m_new last.
// CHECK:             %[[MOUT:.*]] = linalg.generic {{.*}} ins(%[[ROWMAX]] : tensor<?xf32>) outs(%[[M]] : tensor<?xf32>)
// CHECK:             scf.yield %[[MOUT]], %[[LNEW]], %[[ACCNEW]]
// CHECK:           %[[O:.*]] = linalg.generic {{.*}} ins(%{{.*}}#1 : tensor<?xf32>) outs(%{{.*}}#2 : tensor<?x64xf32>)
// CHECK:             arith.divf
// CHECK:           scf.forall.in_parallel
// CHECK:             tensor.parallel_insert_slice %[[O]] into %[[OUT]][%[[B]], %[[Q0]], %[[H]], 0] [1, %[[ROWS]], 1, 64]
// CHECK:         tensor.collapse_shape
// CHECK-NOT:     tensor<?x2x?x?xf32>

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
// CHECK-LABEL: func.func @cross(
// CHECK-NOT:     arith.minsi %{{.*}}, %{{.*}} : i64
// CHECK:         scf.forall
// CHECK-NOT:     arith.cmpi sge
// CHECK:           arith.ceildivsi %{{.*}}, %c64
// CHECK:           scf.for
func.func @cross(%q: tensor<2x17x32xf32>, %kv: tensor<2x?x32xf32>) -> tensor<2x17x32xf32> {
  %o = kiln.attention %q, %kv, %kv {num_heads = 4 : i64}
      : (tensor<2x17x32xf32>, tensor<2x?x32xf32>, tensor<2x?x32xf32>) -> tensor<2x17x32xf32>
  return %o : tensor<2x17x32xf32>
}

// The backward pass given the forward output: one parallel iteration per
// (batch, head); per query block a pass over the key blocks for the row
// maxima and sums, D = Σ dO·O per row, then a pass for the gradients.
// Without the output (or the blocks) it is lowered on whole score tensors.
// CHECK-LABEL: func.func @backward(
// CHECK:         scf.forall (%[[B:.*]], %[[H:.*]]) in (%{{.*}}, 2) shared_outs(%[[DQ:.*]] = %{{.*}}, %[[DK:.*]] = %{{.*}}, %[[DV:.*]] = %{{.*}})
// CHECK:           scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[DQALL:.*]] = %{{.*}}, %[[DKALL:.*]] = %{{.*}}, %[[DVALL:.*]] = %{{.*}}) -> (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>)
// CHECK:             %[[STATS:.*]]:2 = scf.for
// CHECK:               arith.maximumf
// CHECK:               scf.yield
// CHECK:             %[[D:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%{{.*}}, %{{.*}} : tensor<?x64xf32>, tensor<?x64xf32>) outs(%{{.*}} : tensor<?xf32>)
// CHECK:             scf.for {{.*}} iter_args(%[[DQB:.*]] = %{{.*}}, %[[DKB:.*]] = %[[DKALL]], %[[DVB:.*]] = %[[DVALL]])
// CHECK:               %[[P:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[STATS]]#0, %[[STATS]]#1 : tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>)
// CHECK:                 math.exp
// CHECK:                 arith.divf
// CHECK:               %[[DS:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[P]], %[[D]] : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>)
// CHECK:                 arith.cmpi sle
// CHECK:               %[[DQN:.*]] = linalg.generic {{.*}} ins(%[[DS]], %{{.*}} : tensor<?x?xf32>, tensor<?x64xf32>) outs(%[[DQB]] : tensor<?x64xf32>)
// CHECK:               %[[DKROWS:.*]] = tensor.extract_slice %[[DKB]]
// CHECK:               %[[DKN:.*]] = linalg.generic {{.*}} ins(%[[DS]], %{{.*}} : tensor<?x?xf32>, tensor<?x64xf32>) outs(%[[DKROWS]] : tensor<?x64xf32>)
// CHECK:               tensor.insert_slice %[[DKN]] into %[[DKB]]
// CHECK:               %[[DVROWS:.*]] = tensor.extract_slice %[[DVB]]
// CHECK:               %[[DVN:.*]] = linalg.generic {{.*}} ins(%[[P]], %{{.*}} : tensor<?x?xf32>, tensor<?x64xf32>) outs(%[[DVROWS]] : tensor<?x64xf32>)
// CHECK:               tensor.insert_slice %[[DVN]] into %[[DVB]]
// CHECK:           scf.forall.in_parallel
// CHECK-COUNT-3:     tensor.parallel_insert_slice
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

// CHECK-LABEL: func.func @backward_without_output(
// CHECK-NOT:     scf.forall
// CHECK:         tensor<?x2x?x?xf32>
func.func @backward_without_output(%g: tensor<?x?x128xf32>, %q: tensor<?x?x128xf32>, %k: tensor<?x?x128xf32>)
    -> tensor<?x?x128xf32> {
  %r:3 = kiln.attention_grad %g, %q, %k, %k {num_heads = 2 : i64, causal}
      : (tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<?x?x128xf32>)
      -> (tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<?x?x128xf32>)
  return %r#0 : tensor<?x?x128xf32>
}
