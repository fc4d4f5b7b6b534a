// Which loops run on all cores (kiln-parallelize-loops after
// kiln-tile-and-vectorize): every parallel loop but the innermost, as one
// collapsed scf.parallel (batch, heads and rows of a contraction; batch and
// rows of an elementwise op, so that a batch of 1 still splits), and the
// columns of a reduction whose reduced dimensions come first (a bias gradient
// [B, T, D] -> [D]): tiled outside the reduction loops, so the threads start
// once, each summing its columns over every row.
// RUN: kiln-opt %s -pass-pipeline="builtin.module(kiln-set-target{cpu=x86-64-v4},func.func(kiln-tile-and-vectorize),canonicalize,func.func(kiln-parallelize-loops))" | FileCheck %s

// CHECK-LABEL: func.func @elementwise
// CHECK: scf.parallel (%{{.+}}, %{{.+}}) = (%c0, %c0) to (%{{.+}}, %{{.+}}) step (%c1, %c1)
// CHECK-NEXT: scf.for %{{.+}} = %c0 to %c128 step %c16
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
// CHECK: scf.parallel (%{{.+}}) = (%c0) to (%c128) step (%c16)
// CHECK: scf.for
// CHECK: scf.for
// CHECK: vector.transfer_read {{.*}} vector<16xf32>
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

// Attention-style batched products [B, H, T, dh] x [B, H, dh, T]: batch,
// heads and the full 8-row tiles share one 3-D parallel loop; the peeled
// partial row tile gets its own over batch and heads (the loops are split,
// as their iterations are independent). Column tiles stay inside.
// CHECK-LABEL: func.func @batched_contraction
// CHECK: scf.parallel (%{{.+}}, %{{.+}}, %{{.+}}) = (%c0, %c0, %c0) to (%{{.+}}, %c6, %c16) step (%c1, %c1, %c8)
// CHECK-NEXT: scf.for {{.*}} to %c96 step %c32
// CHECK: scf.parallel (%{{.+}}, %{{.+}}) = (%c0, %c0) to (%{{.+}}, %c6) step (%c1, %c1)
// CHECK-NEXT: scf.for {{.*}} to %c96 step %c32
func.func @batched_contraction(%q: memref<?x6x20x64xf32>, %k: memref<?x6x64x96xf32>, %s: memref<?x6x20x96xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, d, j)>, affine_map<(b, h, i, j, d) -> (b, h, i, j)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : memref<?x6x20x64xf32>, memref<?x6x64x96xf32>) outs(%s : memref<?x6x20x96xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  return
}

// A kernel that runs inside a parallel loop (kiln.serial, from
// kiln-outline-kernels) keeps its loops serial, unmarked.
// CHECK-LABEL: func.func @serial_kernel
// CHECK-NOT: scf.parallel
// CHECK-NOT: kiln.parallel
// CHECK: scf.for
// CHECK-NOT: scf.parallel
// CHECK-NOT: kiln.parallel
// CHECK: return
func.func @serial_kernel(%x: memref<?x?x128xf32>, %y: memref<?x?x128xf32>) attributes {kiln.serial} {
  linalg.generic {indexing_maps = [affine_map<(b, t, d) -> (b, t, d)>, affine_map<(b, t, d) -> (b, t, d)>],
                  iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : memref<?x?x128xf32>) outs(%y : memref<?x?x128xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  return
}

// A peeled partial column tile (dynamic width: empty when it is a multiple
// of the tile) starts the threads only when it has columns; the full
// tiles' loop, from 0, is guarded the same way.
// CHECK-LABEL: func.func @dynamic_width
// CHECK: %[[FULL:.*]] = arith.cmpi slt, %c0, %[[END:.*]] : index
// CHECK: scf.if %[[FULL]] {
// CHECK-NEXT: scf.parallel
// CHECK-NEXT: scf.for %{{.+}} = %c0 to %[[END]] step %c16
// CHECK: %[[PARTIAL:.*]] = arith.cmpi slt, %[[START:.*]], %[[DIM:.*]] : index
// CHECK: scf.if %[[PARTIAL]] {
// CHECK-NEXT: scf.parallel
// CHECK-NEXT: scf.for %{{.+}} = %[[START]] to %[[DIM]]
// CHECK: return
func.func @dynamic_width(%x: memref<64x?xf32>, %y: memref<64x?xf32>) {
  linalg.generic {indexing_maps = [affine_map<(t, d) -> (t, d)>, affine_map<(t, d) -> (t, d)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<64x?xf32>) outs(%y : memref<64x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  return
}
