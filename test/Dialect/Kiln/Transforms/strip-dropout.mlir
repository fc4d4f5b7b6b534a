// Evaluation mode: kiln-strip-dropout removes every dropout.
// RUN: kiln-opt %s -kiln-strip-dropout | FileCheck %s

// A dropout op is replaced by its input, attention and feed-forward dropout
// are switched off, and the ops around them are untouched.
// CHECK-LABEL: func.func @block
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x8xf32>, %[[W:[^:]+]]: tensor<8x8xf32>, %[[W1:[^:]+]]: tensor<16x8xf32>, %[[W2:[^:]+]]: tensor<8x16xf32>, %[[S:[^:]+]]: i64)
// CHECK-NOT: kiln.dropout
// CHECK: %[[A:.+]] = kiln.mha %[[X]], %[[X]] weights(%[[W]], %[[W]], %[[W]], %[[W]]) seed %[[S]] {causal, num_heads = 2 : i64, stream = 1 : i64}
// CHECK-NOT: kiln.dropout
// CHECK: %[[R:.+]] = kiln.add %[[X]], %[[A]]
// CHECK: %[[F:.+]] = kiln.ffn relu %[[R]], %[[W1]], %[[W2]] seed %[[S]] {stream = 3 : i64} :
// CHECK-NOT: kiln.dropout
// CHECK: return %[[F]]
func.func @block(%x: tensor<?x?x8xf32>, %w: tensor<8x8xf32>, %w1: tensor<16x8xf32>,
                 %w2: tensor<8x16xf32>, %seed: i64) -> tensor<?x?x8xf32> {
  %a = kiln.mha %x, %x weights(%w, %w, %w, %w) seed %seed
      {num_heads = 2 : i64, causal, dropout = 0.1 : f64, stream = 1 : i64}
      : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>,
         tensor<8x8xf32>, tensor<8x8xf32>, i64) -> tensor<?x?x8xf32>
  %ad = kiln.dropout %a, %seed {p = 0.1 : f64, stream = 2 : i64} : (tensor<?x?x8xf32>, i64) -> tensor<?x?x8xf32>
  %r = kiln.add %x, %ad : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %f = kiln.ffn relu %r, %w1, %w2 seed %seed {dropout = 0.3 : f64, stream = 3 : i64}
      : (tensor<?x?x8xf32>, tensor<16x8xf32>, tensor<8x16xf32>, i64) -> tensor<?x?x8xf32>
  %fd = kiln.dropout %f, %seed {p = 0.1 : f64, stream = 4 : i64} : (tensor<?x?x8xf32>, i64) -> tensor<?x?x8xf32>
  return %fd : tensor<?x?x8xf32>
}
