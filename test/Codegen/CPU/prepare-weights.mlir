// RUN: kiln-opt %s -split-input-file -kiln-prepare-weights="max-streamed-rows=4" | FileCheck %s
// The target's threshold (TargetInfo::maxStreamedRows) is the same 4 rows:
// RUN: kiln-opt %s -split-input-file -kiln-set-target=cpu=x86-64-v3 -kiln-prepare-weights | FileCheck %s

// A linear's weight read (n, k) by a product of dynamic rows: the function
// gains the weight's transpose [K, N] after its other arguments, and the
// product reads it (k, n). The parameter stays an argument.
#x = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#w = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#y = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-DAG: #[[X:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-DAG: #[[WT:.+]] = affine_map<(d0, d1, d2, d3) -> (d3, d2)>
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[W:[^:]+]]: tensor<17x33xf32> {kiln.kind = "param", kiln.name = "fc.weight"}
// CHECK-SAME: %[[P:[^:]+]]: tensor<33x17xf32> {kiln.kind = "prepared", kiln.name = "fc.weight"}
// CHECK: linalg.generic {indexing_maps = [#[[X]], #[[WT]], {{.+}}]
// CHECK-SAME: ins(%{{.+}}, %[[P]] : tensor<?x?x33xf32>, tensor<33x17xf32>)
func.func @forward(%x: tensor<?x?x33xf32> {kiln.kind = "input", kiln.name = "x"},
                   %w: tensor<17x33xf32> {kiln.kind = "param", kiln.name = "fc.weight"},
                   %acc: tensor<?x?x17xf32> {kiln.kind = "input", kiln.name = "acc"})
    -> tensor<?x?x17xf32> {
  %0 = linalg.generic {indexing_maps = [#x, #w, #y],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<?x?x33xf32>, tensor<17x33xf32>)
      outs(%acc : tensor<?x?x17xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<?x?x17xf32>
  return %0 : tensor<?x?x17xf32>
}

// -----

// Row blocks of one weight (a query/key/value weight [3d, d]) become column
// blocks of its transpose; a block with another use, and a product of 4
// static rows (streamed by kiln-vector-matrix-products), keep reading the
// parameter; a product of 5 static rows reads the transpose.
#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d1, d2)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @blocks
// CHECK-SAME: %[[W:[^:]+]]: tensor<12x4xf32> {kiln.kind = "param", kiln.name = "qkv"}
// CHECK-SAME: %[[P:[^:]+]]: tensor<4x12xf32> {kiln.kind = "prepared", kiln.name = "qkv"}
// CHECK-DAG: %[[Q:.+]] = tensor.extract_slice %[[P]][0, 0] [4, 4] [1, 1] : tensor<4x12xf32> to tensor<4x4xf32>
// CHECK-DAG: %[[K:.+]] = tensor.extract_slice %[[P]][0, 4] [4, 4] [1, 1] : tensor<4x12xf32> to tensor<4x4xf32>
// CHECK-DAG: %[[V:.+]] = tensor.extract_slice %[[W]][8, 0] [4, 4] [1, 1] : tensor<12x4xf32> to tensor<4x4xf32>
// CHECK: linalg.generic {{.+}} ins(%{{.+}}, %[[Q]] : tensor<5x4xf32>, tensor<4x4xf32>)
// CHECK: linalg.generic {{.+}} ins(%{{.+}}, %[[K]] : tensor<5x4xf32>, tensor<4x4xf32>)
// CHECK: linalg.generic {{.+}} ins(%{{.+}}, %[[V]] : tensor<5x4xf32>, tensor<4x4xf32>)
// CHECK: linalg.generic {{.+}} ins(%{{.+}}, %[[W]] : tensor<4x4xf32>, tensor<12x4xf32>)
func.func @blocks(%x: tensor<5x4xf32> {kiln.kind = "input", kiln.name = "x"},
                  %x4: tensor<4x4xf32> {kiln.kind = "input", kiln.name = "x4"},
                  %w: tensor<12x4xf32> {kiln.kind = "param", kiln.name = "qkv"})
    -> (tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<4x4xf32>, tensor<4x12xf32>) {
  %zero = arith.constant 0.0 : f32
  %e5 = tensor.empty() : tensor<5x4xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e5 : tensor<5x4xf32>) -> tensor<5x4xf32>
  %q = tensor.extract_slice %w[0, 0] [4, 4] [1, 1] : tensor<12x4xf32> to tensor<4x4xf32>
  %k = tensor.extract_slice %w[4, 0] [4, 4] [1, 1] : tensor<12x4xf32> to tensor<4x4xf32>
  %v = tensor.extract_slice %w[8, 0] [4, 4] [1, 1] : tensor<12x4xf32> to tensor<4x4xf32>
  %0 = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %q : tensor<5x4xf32>, tensor<4x4xf32>) outs(%acc : tensor<5x4xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %m = arith.mulf %i, %j : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<5x4xf32>
  %1 = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %k : tensor<5x4xf32>, tensor<4x4xf32>) outs(%acc : tensor<5x4xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %m = arith.mulf %i, %j : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<5x4xf32>
  %2 = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %v : tensor<5x4xf32>, tensor<4x4xf32>) outs(%acc : tensor<5x4xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %m = arith.mulf %i, %j : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<5x4xf32>
  // 4 static rows: streamed, reading the parameter as stored.
  %e4 = tensor.empty() : tensor<4x12xf32>
  %acc4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<4x12xf32>) -> tensor<4x12xf32>
  %3 = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x4, %w : tensor<4x4xf32>, tensor<12x4xf32>) outs(%acc4 : tensor<4x12xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %m = arith.mulf %i, %j : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x12xf32>
  return %0, %1, %2, %v, %3 : tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<4x4xf32>, tensor<4x12xf32>
}

// -----

// A function that updates an argument in place (a decoding or training
// step) keeps its signature; a parameter read as stored (k, n), and one
// that is no parameter, are not prepared.
#x = affine_map<(d0, d1, d2) -> (d0, d2)>
#w = affine_map<(d0, d1, d2) -> (d1, d2)>
#wkn = affine_map<(d0, d1, d2) -> (d2, d1)>
#y = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%{{[^:]+}}: tensor<?x8xf32>, %{{[^:]+}}: tensor<8x8xf32> {kiln.kind = "param", kiln.name = "w"}, %{{[^:]+}}: tensor<?x8xf32> {kiln.kind = "input", kiln.name = "cache"})
// CHECK-NOT: prepared
func.func @step(%x: tensor<?x8xf32>, %w: tensor<8x8xf32> {kiln.kind = "param", kiln.name = "w"},
                %cache: tensor<?x8xf32> {kiln.kind = "input", kiln.name = "cache"})
    -> (tensor<?x8xf32> {kiln.updates = 2 : i64}) {
  %0 = linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<?x8xf32>, tensor<8x8xf32>) outs(%cache : tensor<?x8xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %m = arith.mulf %i, %j : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}
// CHECK-LABEL: func.func @stored
// CHECK-SAME: (%{{[^:]+}}: tensor<?x8xf32>, %{{[^:]+}}: tensor<8x8xf32> {kiln.kind = "param", kiln.name = "w"}, %{{[^:]+}}: tensor<8x8xf32> {kiln.kind = "input", kiln.name = "v"}, %{{[^:]+}}: tensor<?x8xf32>) -> tensor<?x8xf32> {
func.func @stored(%x: tensor<?x8xf32>, %w: tensor<8x8xf32> {kiln.kind = "param", kiln.name = "w"},
                  %v: tensor<8x8xf32> {kiln.kind = "input", kiln.name = "v"},
                  %acc: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %0 = linalg.generic {indexing_maps = [#x, #wkn, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<?x8xf32>, tensor<8x8xf32>) outs(%acc : tensor<?x8xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %m = arith.mulf %i, %j : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  %1 = linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%0, %v : tensor<?x8xf32>, tensor<8x8xf32>) outs(%acc : tensor<?x8xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %m = arith.mulf %i, %j : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %1 : tensor<?x8xf32>
}
