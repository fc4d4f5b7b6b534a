// RUN: kiln-opt %s -pass-pipeline="builtin.module(func.func(kiln-clone-fills-per-use))" | FileCheck %s

// One zero-filled accumulator shared by two reductions (as CSE leaves it)
// becomes one empty + fill right before each of them, so bufferization
// writes each in place instead of copying a shared zero buffer.
// CHECK-LABEL: func.func @shared_fill
// CHECK-NOT: linalg.fill
// CHECK: %[[E1:.+]] = tensor.empty
// CHECK-NEXT: %[[F1:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%[[E1]]
// CHECK-NEXT: linalg.generic {{.*}} outs(%[[F1]]
// CHECK: %[[E2:.+]] = tensor.empty
// CHECK-NEXT: %[[F2:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%[[E2]]
// CHECK-NEXT: linalg.generic {{.*}} outs(%[[F2]]
// CHECK-NOT: linalg.fill
func.func @shared_fill(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %s1 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                        iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%f : tensor<4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %v, %acc : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %s2 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                        iterator_types = ["parallel", "reduction"]}
      ins(%y : tensor<4x8xf32>) outs(%f : tensor<4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.maximumf %v, %acc : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %s1, %s2 : tensor<4xf32>, tensor<4xf32>
}
