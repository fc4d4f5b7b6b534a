// Cross-entropy and NLL losses: per-position losses, then their sum or mean
// (Losses.cpp).
// RUN: kiln-opt %s -convert-kiln-to-linalg -split-input-file | FileCheck %s

// Cross-entropy: log-sum-exp per row, a per-position loss loop with the
// clamped target read and the ignore_index test, the sum of the losses, and
// the mean over the positions not ignored (a sum of the mask, computed from
// the targets).
// CHECK-LABEL: func.func @cross_entropy
// CHECK: math.log
// CHECK: %[[LOSSES:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK: arith.minsi
// CHECK: tensor.extract
// CHECK: arith.cmpi eq
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]{{.*}} ins(%[[LOSSES]]
// CHECK: %[[COUNT:.+]] = linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]{{.*}} ins(%arg1 : tensor<?x?xi64>)
// CHECK: ^bb0(%[[T:.+]]: i64, %[[ACC:.+]]: f32):
// CHECK: %[[IGNORED:.+]] = arith.cmpi eq, %[[T]], %c0_i64
// CHECK: %[[ONE:.+]] = arith.select %[[IGNORED]]
// CHECK: arith.addf %[[ONE]], %[[ACC]]
// CHECK: arith.divf
func.func @cross_entropy(%x: tensor<?x?x7xf32>, %t: tensor<?x?xi64>) -> tensor<f32> {
  %0 = kiln.cross_entropy %x, %t {ignore_index = 0 : i64, label_smoothing = 0.1 : f64}
      : (tensor<?x?x7xf32>, tensor<?x?xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// A mean without ignore_index divides by the number of positions: the
// product of the sizes, in integers, not a reduction of the constant 1
// (which the vectorizer applied once per 16-wide tile).
// CHECK-LABEL: func.func @cross_entropy_mean
// CHECK-SAME: (%[[X:.+]]: tensor<?x?x7xf32>, %[[T:.+]]: tensor<?x?xi64>)
// CHECK: %[[N0:.+]] = arith.muli %{{.+}}, %[[D0:[a-z0-9_]+]] : index
// CHECK-NEXT: %{{.+}} = arith.constant 1 : index
// CHECK-NEXT: %[[D1:.+]] = tensor.dim %[[T]], %{{.+}} : tensor<?x?xi64>
// CHECK-NEXT: %[[N:.+]] = arith.muli %[[N0]], %[[D1]] : index
// CHECK-NEXT: %[[I:.+]] = arith.index_cast %[[N]] : index to i64
// CHECK-NEXT: %[[F:.+]] = arith.sitofp %[[I]] : i64 to f32
// CHECK: %[[COUNT:.+]] = linalg.fill ins(%[[F]] : f32)
// CHECK: linalg.generic {{.*}}ins(%{{.+}}, %[[COUNT]] : tensor<f32>, tensor<f32>)
// CHECK: arith.divf
// CHECK-NOT: iterator_types = ["reduction", "reduction"]
// CHECK: return
func.func @cross_entropy_mean(%x: tensor<?x?x7xf32>, %t: tensor<?x?xi64>) -> tensor<f32> {
  %0 = kiln.cross_entropy %x, %t : (tensor<?x?x7xf32>, tensor<?x?xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// NLL with reduction none: no log-sum-exp and no final sum.
// CHECK-LABEL: func.func @nll_none
// CHECK-NOT: math.log
// CHECK: tensor.extract
// CHECK-NOT: iterator_types = ["reduction"
// CHECK: return
func.func @nll_none(%x: tensor<?x7xf32>, %t: tensor<?xi32>) -> tensor<?xf32> {
  %0 = kiln.nll_loss %x, %t {reduction = #kiln<loss_reduction none>}
      : (tensor<?x7xf32>, tensor<?xi32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
