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

// -----

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// A widening of bf16 (kiln.cast's) fuses into a row reduction that reads
// each element once (and into the elementwise op beside it): the reduction
// reads the bf16 row, no f32 copy is made.
// CHECK-LABEL: func.func @widening_into_reduction
// CHECK:         linalg.generic
// CHECK-SAME:      iterator_types = ["parallel", "reduction"]
// CHECK-SAME:      ins(%{{.+}} : tensor<4x8xbf16>)
// CHECK:           arith.extf
// CHECK:           arith.addf
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%{{.+}} : tensor<4x8xbf16>)
// CHECK:           arith.extf
// CHECK:           arith.mulf
// CHECK-NOT:     linalg.generic
func.func @widening_into_reduction(%x: tensor<4x8xbf16>, %acc: tensor<4xf32>) -> (tensor<4xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %w = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xbf16>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%v: bf16, %o: f32):
    %f = arith.extf %v : bf16 to f32
    linalg.yield %f : f32
  } -> tensor<4x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%w : tensor<4x8xf32>) outs(%acc : tensor<4xf32>) {
  ^bb0(%v: f32, %a: f32):
    %s = arith.addf %v, %a : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %sq = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.mulf %v, %v : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  return %sum, %sq : tensor<4xf32>, tensor<4x8xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// A rounded sum with two users (a residual stream widened for a layer
// norm and for the next add) is stored once in bf16: the add fuses into
// its rounding, the rounding is not duplicated into the widenings.
// CHECK-LABEL: func.func @rounded_sum_stored_once
// CHECK:         %[[R:.+]] = linalg.generic
// CHECK-SAME:      outs(%{{.+}} : tensor<4x8xbf16>)
// CHECK:           arith.addf
// CHECK:           arith.truncf
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%[[R]] : tensor<4x8xbf16>)
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%[[R]] : tensor<4x8xbf16>)
func.func @rounded_sum_stored_once(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %e16 = tensor.empty() : tensor<4x8xbf16>
  %add = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%v: f32, %w: f32, %o: f32):
    %s = arith.addf %v, %w : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %round = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%add : tensor<4x8xf32>) outs(%e16 : tensor<4x8xbf16>) {
  ^bb0(%v: f32, %o: bf16):
    %t = arith.truncf %v : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x8xbf16>
  %w1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%round : tensor<4x8xbf16>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%v: bf16, %o: f32):
    %f = arith.extf %v : bf16 to f32
    linalg.yield %f : f32
  } -> tensor<4x8xf32>
  %w2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%round : tensor<4x8xbf16>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%v: bf16, %o: f32):
    %f = arith.extf %v : bf16 to f32
    %m = arith.mulf %f, %f : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  return %w1, %w2 : tensor<4x8xf32>, tensor<4x8xf32>
}
