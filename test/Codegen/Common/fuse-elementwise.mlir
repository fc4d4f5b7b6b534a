// RUN: kiln-opt %s -split-input-file -kiln-fuse-elementwise | FileCheck %s

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// An activation followed by a bias add: the producer fuses into its only
// user, one generic computes both.
// CHECK-LABEL: func.func @activation_into_add
// CHECK:         %[[R:.+]] = linalg.generic
// CHECK-SAME:      ins(%{{.+}}, %{{.+}} : tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK:           arith.maximumf
// CHECK:           arith.addf
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[R]]
func.func @activation_into_add(%x: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %relu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.maximumf %v, %zero : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %add = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%relu, %b : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%v: f32, %w: f32, %o: f32):
    %s = arith.addf %v, %w : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %add : tensor<4x8xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// An activation read by a reduction is not fused into it (it would be
// recomputed once per reduction step): two generics stay.
// CHECK-LABEL: func.func @not_into_reduction
// CHECK:         %[[A:.+]] = linalg.generic
// CHECK-SAME:      iterator_types = ["parallel", "parallel"]
// CHECK:         linalg.generic
// CHECK-SAME:      iterator_types = ["parallel", "reduction"]
// CHECK-SAME:      ins(%[[A]] : tensor<4x8xf32>)
func.func @not_into_reduction(%x: tensor<4x8xf32>, %acc: tensor<4xf32>) -> tensor<4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %relu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.maximumf %v, %zero : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%relu : tensor<4x8xf32>) outs(%acc : tensor<4xf32>) {
  ^bb0(%v: f32, %a: f32):
    %s = arith.addf %v, %a : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %sum : tensor<4xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// A producer that a reduction also reads (a residual stream feeding a
// layer norm) is fused into none of its users, not even the elementwise
// one: it would otherwise be computed twice.
// CHECK-LABEL: func.func @kept_for_another_user
// CHECK:         %[[A:.+]] = linalg.generic
// CHECK-SAME:      ins(%{{.+}} : tensor<4x8xf32>)
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%[[A]], %{{.+}} : tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%[[A]] : tensor<4x8xf32>)
func.func @kept_for_another_user(%x: tensor<4x8xf32>, %b: tensor<4x8xf32>, %acc: tensor<4xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %relu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.maximumf %v, %zero : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %add = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%relu, %b : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%v: f32, %w: f32, %o: f32):
    %s = arith.addf %v, %w : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%relu : tensor<4x8xf32>) outs(%acc : tensor<4xf32>) {
  ^bb0(%v: f32, %a: f32):
    %s = arith.addf %v, %a : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %add, %sum : tensor<4x8xf32>, tensor<4xf32>
}
