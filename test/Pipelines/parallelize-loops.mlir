// Which loops run on all cores (kiln-parallelize-loops after
// kiln-tile-and-vectorize): the row loop of a contraction, the outermost
// parallel loop of an elementwise op, and no loop of a reduction whose
// reduced dimensions come first (a bias gradient [B, T, D] -> [D] would
// otherwise start the threads once per reduced row).
// RUN: kiln-opt %s -pass-pipeline="builtin.module(func.func(kiln-tile-and-vectorize),canonicalize,func.func(kiln-parallelize-loops))" | FileCheck %s

// CHECK-LABEL: func.func @elementwise
// CHECK: scf.parallel
// CHECK-NOT: scf.parallel
// CHECK: return
func.func @elementwise(%x: memref<?x?x128xf32>, %y: memref<?x?x128xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, t, d) -> (b, t, d)>, affine_map<(b, t, d) -> (b, t, d)>],
                  iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : memref<?x?x128xf32>) outs(%y : memref<?x?x128xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  return
}

// CHECK-LABEL: func.func @bias_gradient
// CHECK-NOT: scf.parallel
// CHECK: scf.for
// CHECK-NOT: scf.parallel
// CHECK: return
func.func @bias_gradient(%g: memref<?x?x128xf32>, %db: memref<128xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, t, d) -> (b, t, d)>, affine_map<(b, t, d) -> (d)>],
                  iterator_types = ["reduction", "reduction", "parallel"]}
      ins(%g : memref<?x?x128xf32>) outs(%db : memref<128xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}

// The rows of a row-wise reduction ([B, D] -> [B]) are still spread.
// CHECK-LABEL: func.func @row_sums
// CHECK: scf.parallel
// CHECK: return
func.func @row_sums(%x: memref<?x128xf32>, %s: memref<?xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, d) -> (b, d)>, affine_map<(b, d) -> (b)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<?x128xf32>) outs(%s : memref<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  }
  return
}
