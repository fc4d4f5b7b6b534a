// The backward ops lower to fused loops (and a scatter-add loop nest for the
// embedding table) (Gradients.cpp).
// RUN: kiln-opt %s -convert-kiln-to-linalg -split-input-file | FileCheck %s

// The embedding gradient: a zero table, then in order over the positions, a
// guarded row update that skips the padding row and ids outside the table.
// CHECK-LABEL: func.func @embedding_grad
// CHECK: linalg.fill
// CHECK: scf.for {{.*}} iter_args
// CHECK: arith.cmpi sge
// CHECK: arith.cmpi slt
// CHECK: arith.cmpi ne
// CHECK: scf.if
// CHECK: scf.for
// CHECK: tensor.extract
// CHECK: arith.addf
// CHECK: tensor.insert
func.func @embedding_grad(%g: tensor<?x?x4xf32>, %ids: tensor<?x?xi64>) -> tensor<9x4xf32> {
  %0 = kiln.embedding_grad %g, %ids {num_embeddings = 9 : i64, padding_idx = 0 : i64}
      : (tensor<?x?x4xf32>, tensor<?x?xi64>) -> tensor<9x4xf32>
  return %0 : tensor<9x4xf32>
}

// -----

// relu's gradient passes the incoming gradient where the input is positive.
// CHECK-LABEL: func.func @relu_grad
// CHECK: arith.cmpf ogt
// CHECK: arith.select
func.func @relu_grad(%g: tensor<?x4xf32>, %x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %0 = kiln.activation_grad relu %g, %x : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// The layer-norm gradient: row statistics, row sums of dxhat and dxhat·(x-μ),
// one elementwise loop for dx, and column sums for dgamma and dbeta.
// CHECK-LABEL: func.func @layernorm_grad
// CHECK: math.rsqrt
// CHECK: iterator_types = ["reduction", "parallel"]
// CHECK: iterator_types = ["reduction", "parallel"]
func.func @layernorm_grad(%g: tensor<?x8xf32>, %x: tensor<?x8xf32>, %gamma: tensor<8xf32>)
    -> (tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %0:3 = kiln.layernorm_grad %g, %x, %gamma : (tensor<?x8xf32>, tensor<?x8xf32>, tensor<8xf32>)
      -> (tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %0#0, %0#1, %0#2 : tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// The RMS norm gradient: the row scale, the row sums of g·w·x, one
// elementwise loop for dx and a column sum for dw.
// CHECK-LABEL: func.func @rms_norm_grad
// CHECK: math.rsqrt
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK: arith.subf
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK: iterator_types = ["reduction", "parallel"]
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @rms_norm_grad(%g: tensor<?x8xf32>, %x: tensor<?x8xf32>, %w: tensor<8xf32>)
    -> (tensor<?x8xf32>, tensor<8xf32>) {
  %0:2 = kiln.rms_norm_grad %g, %x, %w : (tensor<?x8xf32>, tensor<?x8xf32>, tensor<8xf32>)
      -> (tensor<?x8xf32>, tensor<8xf32>)
  return %0#0, %0#1 : tensor<?x8xf32>, tensor<8xf32>
}

// -----

// SiLU's derivative σ·(1 + x·(1 - σ)).
// CHECK-LABEL: func.func @silu_grad
// CHECK: arith.negf
// CHECK: math.exp
// CHECK: arith.divf
// CHECK: arith.subf
// CHECK: arith.mulf
func.func @silu_grad(%g: tensor<?x4xf32>, %x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %0 = kiln.activation_grad silu %g, %x : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// The cross-entropy gradient: log-sum-exp per row, the count of positions
// not ignored, then softmax - smoothed one-hot, scaled, zero where ignored.
// CHECK-LABEL: func.func @loss_grad
// CHECK: math.log
// CHECK: iterator_types = ["reduction", "reduction"]
// CHECK: arith.divf
// CHECK: linalg.index 2
// CHECK: arith.cmpi eq
// CHECK: math.exp
// CHECK: arith.select
func.func @loss_grad(%x: tensor<?x?x5xf32>, %t: tensor<?x?xi64>, %g: tensor<f32>) -> tensor<?x?x5xf32> {
  %0 = kiln.loss_grad %x, %t, %g {from_logits, ignore_index = 4 : i64, label_smoothing = 0.1 : f64}
      : (tensor<?x?x5xf32>, tensor<?x?xi64>, tensor<f32>) -> tensor<?x?x5xf32>
  return %0 : tensor<?x?x5xf32>
}

// -----

// Without ignore_index the mean's gradient divides by the number of
// positions, the product of the sizes (not a reduction of the constant 1).
// CHECK-LABEL: func.func @loss_grad_mean
// CHECK-SAME: (%{{.+}}: tensor<?x?x5xf32>, %[[T:.+]]: tensor<?x?xi64>, %[[G:.+]]: tensor<f32>)
// CHECK: %[[N0:.+]] = arith.muli %{{.+}}, %[[D0:[a-z0-9_]+]] : index
// CHECK-NEXT: %{{.+}} = arith.constant 1 : index
// CHECK-NEXT: %[[D1:.+]] = tensor.dim %[[T]], %{{.+}} : tensor<?x?xi64>
// CHECK-NEXT: %[[N:.+]] = arith.muli %[[N0]], %[[D1]] : index
// CHECK: arith.sitofp
// CHECK: %[[COUNT:.+]] = linalg.fill
// CHECK: linalg.generic {{.*}}ins(%[[G]], %[[COUNT]] : tensor<f32>, tensor<f32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.divf
// CHECK-NOT: "reduction", "reduction"
// CHECK: return
func.func @loss_grad_mean(%x: tensor<?x?x5xf32>, %t: tensor<?x?xi64>, %g: tensor<f32>) -> tensor<?x?x5xf32> {
  %0 = kiln.loss_grad %x, %t, %g {from_logits}
      : (tensor<?x?x5xf32>, tensor<?x?xi64>, tensor<f32>) -> tensor<?x?x5xf32>
  return %0 : tensor<?x?x5xf32>
}

// -----

// The gradient of max: the maxima and the number of ties per slice in two
// reductions, then grad / count where the input equals its slice's maximum.
// CHECK-LABEL: func.func @reduce_max_grad
// CHECK: iterator_types = ["parallel", "reduction"]
// CHECK: arith.maximumf
// CHECK: iterator_types = ["parallel", "reduction"]
// CHECK: arith.cmpf oeq
// CHECK: iterator_types = ["parallel", "parallel"]
// CHECK: arith.divf
// CHECK: arith.cmpf oeq
// CHECK: arith.select
func.func @reduce_max_grad(%g: tensor<?x1xf32>, %x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %0 = kiln.reduce_max_grad %g, %x {axes = array<i64: 1>, keep_dims} : (tensor<?x1xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}
