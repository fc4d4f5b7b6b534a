// CPU code generation on buffers, sized for the target CPU: contractions
// become register tiles (AVX-512, 32 registers: 8x32; AVX2, 16 registers:
// 6x16; SSE only, 6x8) whose reduction loop carries the accumulators in vector
// registers; elementwise ops become one-register vectors (16, 8, 4 f32);
// partial tiles are peeled off.
// RUN: kiln-opt %s -pass-pipeline="builtin.module(kiln-set-target{cpu=x86-64-v4},func.func(kiln-tile-and-vectorize),canonicalize,fold-memref-alias-ops,func.func(kiln-hoist-vector-transfers))" | FileCheck %s
// RUN: kiln-opt %s -pass-pipeline="builtin.module(kiln-set-target{cpu=x86-64-v3},func.func(kiln-tile-and-vectorize),canonicalize,fold-memref-alias-ops,func.func(kiln-hoist-vector-transfers))" | FileCheck %s --check-prefix=AVX2
// RUN: kiln-opt %s -pass-pipeline="builtin.module(kiln-set-target{cpu=x86-64-v2},func.func(kiln-tile-and-vectorize))" | FileCheck %s --check-prefix=SSE
// RUN: not kiln-opt %s -pass-pipeline="builtin.module(kiln-set-target{cpu=pentium9},func.func(kiln-tile-and-vectorize))" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// AVX2-LABEL: func.func @contraction
// AVX2: scf.for %{{.+}} = %{{.+}} to %c18 step %c6
// AVX2: scf.for %{{.+}} = %{{.+}} to %{{.+}} step %c16
// AVX2: scf.for {{.*}} -> (vector<6x16xf32>)
// AVX2: vector<2x16xf32>
// AVX2-LABEL: func.func @contraction_dynamic
// AVX2: scf.for {{.*}} -> (vector<6x16xf32>)
// AVX2: scf.for {{.*}} -> (vector<6x4xf32>)
// AVX2: scf.for {{.*}} -> (vector<16xf32>)
// AVX2: scf.for {{.*}} -> (vector<4xf32>)
// AVX2-NOT: linalg.generic
// AVX2: return
// AVX2-LABEL: func.func @packed_weight
// AVX2: memref.alloc() {alignment = 64 : i64} : memref<8x513x16xf32>
// AVX2: scf.for {{.*}} -> (vector<6x16xf32>)
// AVX2-LABEL: func.func @packed_lhs_t
// AVX2: memref.alloc() {alignment = 64 : i64} : memref<42x257x6xf32>
// AVX2: scf.for {{.*}} -> (vector<6x16xf32>)
// AVX2-COUNT-6: vector.transfer_read {{.*}} vector<16x1xf32>
// AVX2-LABEL: func.func @batched_keys
// AVX2: memref.alloc() {alignment = 64 : i64} : memref<8x65x16xf32>
// AVX2: vector.transpose {{.*}} : vector<8x8xf32>
// AVX2: vector.transfer_read {{.*}} : memref<8x65x16xf32>, vector<6x16x1xf32>
// AVX2-LABEL: func.func @elementwise
// AVX2: scf.for {{.*}} step %c8
// AVX2: arith.maximumf {{.*}} : vector<8xf32>
// SSE-LABEL: func.func @contraction
// SSE: vector<6x8xf32>
// SSE-LABEL: func.func @elementwise
// SSE: arith.maximumf {{.*}} : vector<4xf32>
// UNKNOWN: error: kiln-set-target: unknown target CPU 'pentium9'

// A [20, 64] x [64, 96] product into a fresh buffer: rows 0..15 in full
// 8-row tiles whose k loop keeps the accumulators in registers, rows 16..19
// in a peeled (here static, 4-row) tile. The k loop sums from zeros; the
// tile of C, prefetched before it (8 rows of two cache lines), is read and
// added after it.
// CHECK-LABEL: func.func @contraction
// CHECK-SAME: (%[[A:.+]]: memref<20x64xf32>, %[[B:.+]]: memref<64x96xf32>)
// CHECK: %[[C:.+]] = memref.alloc() : memref<20x96xf32>
// CHECK-NOT: affine.min
// CHECK: scf.for %[[M:.+]] = %{{.+}} to %{{.+}} step %c8
// CHECK: scf.for %[[N:.+]] = %{{.+}} to %{{.+}} step %c32
// CHECK-NOT: vector.transfer_read %[[C]]
// CHECK-COUNT-16: memref.prefetch %[[C]]
// CHECK-NOT: memref.prefetch
// CHECK: %[[ZERO:.+]] = arith.constant dense<-0.000000e+00> : vector<8x32xf32>
// CHECK: %[[ACC:.+]] = scf.for {{.*}} iter_args(%[[V:.+]] = %[[ZERO]]) -> (vector<8x32xf32>)
// CHECK: vector.transfer_read %[[A]]{{.*}} vector<8x32x1xf32>
// CHECK: vector.transfer_read %[[B]]{{.*}} vector<8x32x1xf32>
// CHECK-NOT: vector.transfer_write
// CHECK: scf.yield
// CHECK: %[[ACC0:.+]] = vector.transfer_read %[[C]][%[[M]], %[[N]]]{{.*}} : memref<20x96xf32>, vector<8x32xf32>
// CHECK: %[[SUM:.+]] = arith.addf %[[ACC0]], %[[ACC]] : vector<8x32xf32>
// CHECK: vector.transfer_write %[[SUM]], %[[C]][%[[M]], %[[N]]]
// CHECK: vector<4x32xf32>
func.func @contraction(%a: memref<20x64xf32>, %b: memref<64x96xf32>) -> memref<20x96xf32> {
  %c = memref.alloc() : memref<20x96xf32>
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<20x64xf32>, memref<64x96xf32>) outs(%c : memref<20x96xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return %c : memref<20x96xf32>
}

// A dynamic number of rows and 100 columns: full 8x32 tiles and a static
// 8x4 remainder; the partial 8-row tile (the last rows % 8) is tiled again
// row by row, each row 1x32 vector tiles whose k loop is innermost, so that
// no scalar loop is left.
// CHECK-LABEL: func.func @contraction_dynamic
// CHECK: scf.for {{.*}} step %c8
// CHECK: scf.for {{.*}} step %c32
// CHECK: scf.for {{.*}} -> (vector<8x32xf32>)
// CHECK: scf.for {{.*}} -> (vector<8x4xf32>)
// The partial rows: one row at a time, k innermost.
// CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c1
// CHECK: scf.for {{.*}} -> (vector<32xf32>)
// CHECK: scf.for {{.*}} -> (vector<4xf32>)
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @contraction_dynamic(%a: memref<?x64xf32>, %b: memref<64x100xf32>, %c: memref<?x100xf32> {kiln.noalias}) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<?x64xf32>, memref<64x100xf32>) outs(%c : memref<?x100xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// A [B, T, 512] x [512, 2048] product (a linear's transposed weight): its
// [512, 128] blocks are rows 8 KiB apart in the weight, which fall into a
// few cache sets, so each block is copied into micro-panels (4 of [512,
// 32]: one register tile's columns, contiguous), allocated around the
// block loops, when the B x T rows are at least 32, a run-time test here.
// The copy reads the block row by row (the panels seen as [512, 4, 32]);
// the register tiles read their panel, and the other branch runs the
// product on the weight in place.
// CHECK-LABEL: func.func @packed_weight
// CHECK-SAME: %[[W:[a-z0-9]+]]: memref<512x2048xf32>
// CHECK: %[[ENOUGH:.+]] = arith.cmpi sge, %{{.+}}, %c32
// CHECK: %[[BUF:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4x513x32xf32>
// CHECK: scf.for {{.*}} step %c128
// CHECK: scf.if %[[ENOUGH]] {
// CHECK: %[[ROWS:.+]] = memref.transpose %{{.+}} (d0, d1, d2) -> (d1, d0, d2) {{.*}} to memref<512x4x32xf32, strided<[32, 16416, 1]>>
// CHECK: %[[V:.+]] = vector.transfer_read %[[W]]{{.*}} vector<16xf32>
// CHECK: vector.transfer_write %[[V]], %[[ROWS]]
// CHECK: scf.for {{.*}} -> (vector<8x32xf32>)
// CHECK: vector.transfer_read %[[BUF]][%{{.+}}, %{{.+}}, %c0]{{.*}} : memref<4x513x32xf32>, vector<8x32x1xf32>
// CHECK: } else {
// CHECK: scf.for {{.*}} -> (vector<8x32xf32>)
// CHECK: vector.transfer_read %[[W]]
// CHECK: memref.dealloc %[[BUF]]
func.func @packed_weight(%x: memref<?x?x512xf32>, %w: memref<512x2048xf32>, %out: memref<?x?x2048xf32> {kiln.noalias}) {
  linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (k, n)>, affine_map<(b, m, n, k) -> (b, m, n)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x?x512xf32>, memref<512x2048xf32>) outs(%out : memref<?x?x2048xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %p = arith.mulf %i, %j : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }
  return
}

// Rows 8000 bytes apart spread over the cache sets: the blocks of B are
// copied into micro-panels only for at least 256 rows (a run-time test
// here), and otherwise read in place. The last block (2000 = 15 x 128 +
// 80) has a partial panel of 16 columns, copied apart.
// CHECK-LABEL: func.func @unpacked_weight
// CHECK: %[[ENOUGH:.+]] = arith.cmpi sge, %{{.+}}, %c256
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<4x513x32xf32>
// CHECK: scf.if %[[ENOUGH]] {
// CHECK: memref.expand_shape {{.*}} into memref<512x?x32xf32, strided<[2000, 32, 1], offset: ?>>
// CHECK: %[[REST:.+]] = arith.cmpi sgt, %{{.+}}, %c0
// CHECK: scf.if %[[REST]] {
// CHECK: linalg.copy {{.*}} outs(%{{.+}} : memref<1x?xf32, strided<[32, 1], offset: ?>>)
// CHECK: } else {
// CHECK: scf.for {{.*}} -> (vector<8x32xf32>)
// CHECK: return
func.func @unpacked_weight(%x: memref<?x512xf32>, %w: memref<512x2000xf32>, %out: memref<?x2000xf32> {kiln.noalias}) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x512xf32>, memref<512x2000xf32>) outs(%out : memref<?x2000xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %p = arith.mulf %i, %j : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }
  return
}

// Too few rows (128 < 256) to repay copying rows that do not alias: B is
// read in place.
// CHECK-LABEL: func.func @few_rows_unpacked
// CHECK-NOT: memref.alloc
// CHECK: scf.for {{.*}} -> (vector<8x32xf32>)
// CHECK-NOT: memref.alloc
// CHECK: return
func.func @few_rows_unpacked(%x: memref<128x512xf32>, %w: memref<512x2000xf32>, %out: memref<128x2000xf32> {kiln.noalias}) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<128x512xf32>, memref<512x2000xf32>) outs(%out : memref<128x2000xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %p = arith.mulf %i, %j : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }
  return
}

// A weight gradient Aᵀ·B with A [K, 4096] stored transposed: rows are
// blocked too (128 on a 512 KiB L2 with AVX-512; with AVX2, whose dynamic
// reduction takes k-blocks of 256 (TargetInfo::blockKLongReduction), 252 -
// a multiple of the register tile's rows), each [512, 128] block of A is
// copied (64 columns reuse it: no run-time test; AVX2 copies each
// [256, 252] block into 42 micro-panels of 6 rows, TargetInfo::
// tileRowsAndPanelInL1), and a register tile's column of A is read element
// by element, each a broadcasting load, instead of one vector whose
// elements would each need a shuffle.
// CHECK-LABEL: func.func @packed_lhs_t
// CHECK: %[[ABUF:.+]] = memref.alloc() {alignment = 64 : i64} : memref<512x128xf32>
// CHECK-NOT: scf.if
// CHECK: vector.transfer_write {{.*}}, %[[ABUF]]
// CHECK: scf.for {{.*}} -> (vector<8x32xf32>)
// CHECK-COUNT-8: vector.transfer_read %[[ABUF]]{{.*}} vector<32x1xf32>
// CHECK: scf.yield
// CHECK: memref.dealloc %[[ABUF]]
func.func @packed_lhs_t(%a: memref<?x4096xf32>, %b: memref<?x64xf32>, %out: memref<4096x64xf32> {kiln.noalias}) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<?x4096xf32>, memref<?x64xf32>) outs(%out : memref<4096x64xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %p = arith.mulf %i, %j : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }
  return
}

// A weight gradient with a transposed A blocked by rows and a B of 4096
// rows (1536 bytes apart): B's micro-panels do not depend on the rows, so
// each [512, 128] block of B is copied once, before the row-block loop.
// The 32 row blocks run on all cores (the loop is marked), each copying its
// [512, 128] block of A into a buffer of its own, allocated inside it; the
// loops of that copy and of the register tiles inside stay serial.
// CHECK-LABEL: func.func @gradient_panels
// CHECK: %[[BBUF:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4x513x32xf32>
// CHECK: scf.for {{.*}} to %c384 step %c128
// CHECK: scf.for {{.*}} to %c2048 step %c512
// CHECK: vector.transfer_write {{.*}} : vector<16xf32>, memref<512x4x32xf32, strided<[32, 16416, 1]>>
// CHECK: scf.for {{.*}} to %c4096 step %c128
// CHECK-NEXT: %[[ABUF:.+]] = memref.alloc() {alignment = 64 : i64} : memref<512x128xf32>
// CHECK: vector.transfer_write {{.*}}, %[[ABUF]]
// CHECK: scf.for {{.*}} -> (vector<8x32xf32>)
// CHECK: vector.transfer_read %[[BBUF]]
// CHECK: memref.dealloc %[[ABUF]]
// CHECK-NEXT: } {kiln.parallel}
func.func @gradient_panels(%a: memref<2048x4096xf32>, %b: memref<2048x384xf32>, %out: memref<4096x384xf32> {kiln.noalias}) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<2048x4096xf32>, memref<2048x384xf32>) outs(%out : memref<4096x384xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %p = arith.mulf %i, %j : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }
  return
}

// Attention scores Q·Kᵀ with the keys read as stored, [B, T, dh] indexed
// (b, n, k): batch by batch (the batch loop outermost, on all cores), each
// [128, 64] block of the keys is copied transposed into micro-panels in a
// buffer allocated inside the batch loop (one per thread), and the
// register tiles read them.
// CHECK-LABEL: func.func @batched_keys
// CHECK-SAME: (%{{[a-z0-9]+}}: memref<?x256x64xf32>, %[[K:[a-z0-9]+]]: memref<?x256x64xf32>
// CHECK: scf.for %[[B:.+]] = %c0 to %{{.+}} step %c1 {
// CHECK-NEXT: %[[BUF:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4x65x32xf32>
// CHECK: scf.for {{.*}} to %c256 step %c128
// CHECK: %[[T:.+]] = vector.transfer_read %[[K]][%[[B]], {{.*}} : memref<?x256x64xf32>, vector<16x16xf32>
// CHECK: %[[TT:.+]] = vector.transpose %[[T]], [1, 0]
// CHECK: vector.transfer_write %[[TT]], %[[BUF]]
// CHECK: scf.for {{.*}} -> (vector<8x32xf32>)
// CHECK: vector.transfer_read %[[BUF]]{{.*}} : memref<4x65x32xf32>, vector<8x32x1xf32>
// CHECK: memref.dealloc %[[BUF]]
// CHECK-NEXT: } {kiln.parallel}
func.func @batched_keys(%q: memref<?x256x64xf32>, %k: memref<?x256x64xf32>, %out: memref<?x256x256xf32> {kiln.noalias}) {
  linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : memref<?x256x64xf32>, memref<?x256x64xf32>) outs(%out : memref<?x256x256xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %p = arith.mulf %i, %j : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }
  return
}

// An elementwise op over a dynamic batch: 16-wide vectors along the row.
// CHECK-LABEL: func.func @elementwise
// CHECK: scf.for
// CHECK: scf.for {{.*}} step %c16
// CHECK: vector.transfer_read {{.*}} vector<16xf32>
// CHECK: arith.maximumf {{.*}} : vector<16xf32>
// CHECK: vector.transfer_write
func.func @elementwise(%x: memref<?x64xf32>, %y: memref<?x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<?x64xf32>) outs(%y : memref<?x64xf32>) {
  ^bb0(%v: f32, %o: f32):
    %z = arith.constant 0.0 : f32
    %r = arith.maximumf %v, %z : f32
    linalg.yield %r : f32
  }
  return
}

// A row sum: each 16-wide tile of the row is read as a vector and reduced
// into the accumulator.
// CHECK-LABEL: func.func @row_sum
// CHECK: vector.transfer_read {{.*}} vector<16xf32>
// CHECK: vector.{{(multi_)?}}reduction <add>
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @row_sum(%x: memref<4x64xf32>, %y: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x64xf32>) outs(%y : memref<4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %v, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// A row-wise dot product (flash attention's D = rowsum(dO * O), a layer norm
// gradient's sum of g * gamma) is a contraction to linalg, but with no column
// loop of its own: it is a row reduction, each row read one contiguous vector
// at a time, never a register tile whose vectors gather a column of rows.
// CHECK-LABEL: func.func @row_dot
// CHECK: scf.for %[[ROW:.+]] = %c0 to %{{.+}} step %c1
// CHECK: scf.for %[[COL:.+]] = %c0 to %c64 step %c16
// CHECK: vector.transfer_read %{{.+}}[%[[ROW]], %[[COL]]]{{.*}} {in_bounds = [true]} : memref<?x64xf32, strided<[512, 1], offset: ?>>, vector<16xf32>
// CHECK-NOT: vector<8x32xf32>
// CHECK: vector.reduction <add>
// CHECK: return
// AVX2-LABEL: func.func @row_dot
// AVX2: vector.transfer_read {{.*}} vector<8xf32>
// AVX2: vector.reduction <add>
func.func @row_dot(%a: memref<?x64xf32, strided<[512, 1], offset: ?>>, %b: memref<?x64xf32, strided<[512, 1], offset: ?>>, %d: memref<?xf32> {kiln.noalias}) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%a, %b : memref<?x64xf32, strided<[512, 1], offset: ?>>, memref<?x64xf32, strided<[512, 1], offset: ?>>) outs(%d : memref<?xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// A matrix-vector product ([B, T, D] x [D] -> [B, T]) likewise.
// CHECK-LABEL: func.func @matvec
// CHECK: vector.transfer_read %{{.+}} {in_bounds = [true]} : memref<?x?x512xf32>, vector<16xf32>
// CHECK: vector.transfer_read %{{.+}} {in_bounds = [true]} : memref<512xf32>, vector<16xf32>
// CHECK-NOT: vector<8x32xf32>
// CHECK: vector.reduction <add>
// CHECK: return
func.func @matvec(%x: memref<?x?x512xf32>, %g: memref<512xf32>, %out: memref<?x?xf32> {kiln.noalias}) {
  linalg.generic {indexing_maps = [affine_map<(b, t, d) -> (b, t, d)>, affine_map<(b, t, d) -> (d)>, affine_map<(b, t, d) -> (b, t)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %g : memref<?x?x512xf32>, memref<512xf32>) outs(%out : memref<?x?xf32>) {
  ^bb0(%a: f32, %w: f32, %acc: f32):
    %p = arith.mulf %a, %w : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// Reductions whose combined value is not computed from an input element are
// never vectorized: MLIR's vectorizer would apply the value once per tile
// instead of once per element (a count of 16 elements came out as 1). They
// stay scalar loops over the tile, which are exact.
// A count: the sum of the constant 1 over the elements.
// CHECK-LABEL: func.func @count
// CHECK-NOT: vector.
// CHECK: linalg.generic
// CHECK: arith.addf %{{.+}}, %{{.+}} : f32
// CHECK-NOT: vector.
// CHECK: return
func.func @count(%t: memref<1x16xi64>, %r: memref<f32>) {
  %one = arith.constant 1.0 : f32
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>],
                  iterator_types = ["reduction", "reduction"]}
      ins(%t : memref<1x16xi64>) outs(%r : memref<f32>) {
  ^bb0(%in: i64, %out: f32):
    %s = arith.addf %out, %one : f32
    linalg.yield %s : f32
  }
  return
}

// The sum of a value from outside the body (a function argument).
// CHECK-LABEL: func.func @sum_of_outside_value
// CHECK-NOT: vector.
// CHECK: linalg.generic
// CHECK-NOT: vector.
// CHECK: return
func.func @sum_of_outside_value(%x: memref<4x64xf32>, %v: f32, %y: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x64xf32>) outs(%y : memref<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  }
  return
}

// The sum of a scalar (not shaped) input operand.
// CHECK-LABEL: func.func @sum_of_scalar_operand
// CHECK-NOT: vector.
// CHECK: linalg.generic
// CHECK-NOT: vector.
// CHECK: return
func.func @sum_of_scalar_operand(%x: memref<4x64xf32>, %v: f32, %y: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x, %v : memref<4x64xf32>, f32) outs(%y : memref<4xf32>) {
  ^bb0(%in: f32, %s: f32, %acc: f32):
    %r = arith.addf %acc, %s : f32
    linalg.yield %r : f32
  }
  return
}

// An index-only body: the sum of the positions.
// CHECK-LABEL: func.func @sum_of_indices
// CHECK-NOT: vector.
// CHECK: linalg.generic
// CHECK: linalg.index 1
// CHECK-NOT: vector.
// CHECK: return
func.func @sum_of_indices(%x: memref<4x64xf32>, %y: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x64xf32>) outs(%y : memref<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %j = linalg.index 1 : index
    %i = arith.index_cast %j : index to i64
    %f = arith.sitofp %i : i64 to f32
    %r = arith.addf %acc, %f : f32
    linalg.yield %r : f32
  }
  return
}

// A combiner the vectorizer does not know (a subtraction).
// CHECK-LABEL: func.func @unknown_combiner
// CHECK-NOT: vector.
// CHECK: linalg.generic
// CHECK: arith.subf
// CHECK-NOT: vector.
// CHECK: return
func.func @unknown_combiner(%x: memref<4x64xf32>, %y: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x64xf32>) outs(%y : memref<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.subf %acc, %in : f32
    linalg.yield %r : f32
  }
  return
}

// Buffers of i1 hold a byte per element, but a vector of i1 is loaded and
// stored as packed bits: an op on an i1 buffer stays scalar.
// CHECK-LABEL: func.func @select_by_i1_mask
// CHECK-NOT: vector.
// CHECK: linalg.generic
// CHECK-NOT: vector.
// CHECK: return
func.func @select_by_i1_mask(%m: memref<4x64xi1>, %x: memref<4x64xf32>, %y: memref<4x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%m, %x : memref<4x64xi1>, memref<4x64xf32>) outs(%y : memref<4x64xf32>) {
  ^bb0(%keep: i1, %v: f32, %o: f32):
    %z = arith.constant 0.0 : f32
    %r = arith.select %keep, %v, %z : f32
    linalg.yield %r : f32
  }
  return
}

// The same with a byte mask is vectorized.
// CHECK-LABEL: func.func @select_by_i8_mask
// CHECK: vector.transfer_read {{.*}} vector<16xi8>
// CHECK: arith.select {{.*}} vector<16xi1>, vector<16xf32>
func.func @select_by_i8_mask(%m: memref<4x64xi8>, %x: memref<4x64xf32>, %y: memref<4x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%m, %x : memref<4x64xi8>, memref<4x64xf32>) outs(%y : memref<4x64xf32>) {
  ^bb0(%keep: i8, %v: f32, %o: f32):
    %z = arith.constant 0.0 : f32
    %c0 = arith.constant 0 : i8
    %k = arith.cmpi ne, %keep, %c0 : i8
    %r = arith.select %k, %v, %z : f32
    linalg.yield %r : f32
  }
  return
}

// A contraction larger than the caches is blocked around its register
// tiles: n-blocks, then k-blocks, then the 8x32 (6x16) tiles. The named CPUs
// assume a 32 KiB L1 and 512 KiB L2: kc = 32 KiB / (2 x 8 x 4 bytes) = 512
// on AVX-512 (32 KiB / (2 x 6 x 4) = 682, capped at 512, on AVX2) and
// nc = 512 KiB / (2 x 512 x 4) = 128.
// CHECK-LABEL: func.func @blocked
// CHECK: scf.for %[[JC:.+]] = %c0 to %c700 step %c128
// CHECK: affine.min
// CHECK: scf.for %[[PC:.+]] = %c0 to %c1000 step %c512
// CHECK: affine.min
// CHECK: scf.for %{{.+}} = %c0 to %c16 step %c8
// CHECK: scf.for %{{.+}} step %c32
// CHECK: vector<8x32xf32>
// AVX2-LABEL: func.func @blocked
// AVX2: scf.for %{{.+}} = %c0 to %c700 step %c128
// AVX2: scf.for %{{.+}} = %c0 to %c1000 step %c512
// AVX2: scf.for %{{.+}} = %c0 to %c12 step %c6
// AVX2: scf.for %{{.+}} step %c16
// AVX2: vector<6x16xf32>
func.func @blocked(%a: memref<16x1000xf32>, %b: memref<1000x700xf32>, %c: memref<16x700xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<16x1000xf32>, memref<1000x700xf32>) outs(%c : memref<16x700xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// A transpose is tiled in square vector-width tiles whose rows are read
// contiguously and transposed in registers (16x16 on AVX-512, 8x8 on AVX2),
// not read one column of scalar loads per output vector: a Linear's weight
// [N, K] -> [K, N], and attention's keys [B, T, H, dh] -> [B, H, dh, T].
// CHECK-LABEL: func.func @weight_transpose
// CHECK: scf.for {{.*}} step %c16
// CHECK: scf.for {{.*}} step %c16
// CHECK: %[[ROWS:.+]] = vector.transfer_read {{.*}} : memref<96x64xf32>, vector<16x16xf32>
// CHECK: vector.transpose %[[ROWS]], [1, 0] : vector<16x16xf32> to vector<16x16xf32>
// AVX2-LABEL: func.func @weight_transpose
// AVX2: vector.transpose %{{.+}}, [1, 0] : vector<8x8xf32> to vector<8x8xf32>
func.func @weight_transpose(%w: memref<96x64xf32>, %o: memref<64x96xf32>) {
  linalg.transpose ins(%w : memref<96x64xf32>) outs(%o : memref<64x96xf32>) permutation = [1, 0]
  return
}

// CHECK-LABEL: func.func @keys_heads_major
// CHECK: %[[ROWS:.+]] = vector.transfer_read {{.*}} permutation_map = #{{.+}}} : memref<2x32x4x32xf32>, vector<16x16xf32>
// CHECK: vector.transpose %[[ROWS]], [1, 0] : vector<16x16xf32> to vector<16x16xf32>
func.func @keys_heads_major(%k: memref<2x32x4x32xf32>, %o: memref<2x4x32x32xf32>) {
  linalg.transpose ins(%k : memref<2x32x4x32xf32>) outs(%o : memref<2x4x32x32xf32>) permutation = [0, 2, 3, 1]
  return
}

// A linear's weight read as it is stored, [N, K] (indexed (n, k)): every
// [nc, kc] block (128 columns on a named CPU's 512 KiB L2) is copied
// transposed into micro-panels [nc / 32, kc, 32] (16 on AVX2), with no
// run-time test, in 16x16 register transposes, and each register tile
// reads its panel: kc rows of 32 contiguous columns.
// CHECK-LABEL: func.func @transposed_weight
// CHECK-SAME: %[[W:[a-z0-9]+]]: memref<2000x512xf32>
// CHECK: %[[BUF:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4x513x32xf32>
// CHECK-NOT: arith.cmpi sge
// CHECK: scf.for {{.*}} step %c128
// CHECK: memref.expand_shape {{.*}} into memref<?x32x512xf32
// CHECK: %[[T:.+]] = vector.transfer_read %[[W]]{{.*}} : memref<2000x512xf32>, vector<16x16xf32>
// CHECK: %[[TT:.+]] = vector.transpose %[[T]], [1, 0]
// CHECK: vector.transfer_write %[[TT]], %[[BUF]][%{{.+}}, %{{.+}}, %{{.+}}] {{.*}} : vector<16x16xf32>, memref<4x513x32xf32>
// The last block's partial panel (80 = 2 x 32 + 16 columns):
// CHECK: scf.if
// CHECK: linalg.transpose {{.*}} outs(%{{.+}} : memref<16x?xf32, strided<[32, 1], offset: ?>>)
// CHECK: scf.for {{.*}} -> (vector<8x32xf32>)
// CHECK: vector.transfer_read %[[BUF]][%{{.+}}, %{{.+}}, %c0]{{.*}} : memref<4x513x32xf32>, vector<8x32x1xf32>
// CHECK: memref.dealloc %[[BUF]]
// AVX2-LABEL: func.func @transposed_weight
// AVX2: memref.alloc() {alignment = 64 : i64} : memref<8x513x16xf32>
// AVX2: vector.transpose {{.*}} : vector<8x8xf32>
// AVX2: scf.for {{.*}} -> (vector<6x16xf32>)
// AVX2: vector.transfer_read {{.*}} : memref<8x513x16xf32>, vector<6x16x1xf32>
func.func @transposed_weight(%x: memref<?x512xf32>, %w: memref<2000x512xf32>, %out: memref<?x2000xf32> {kiln.noalias}) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x512xf32>, memref<2000x512xf32>) outs(%out : memref<?x2000xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %p = arith.mulf %i, %j : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }
  return
}

// A weight within one block is copied transposed whole, right before the op.
// CHECK-LABEL: func.func @transposed_small_weight
// CHECK-SAME: %[[W:[a-z0-9]+]]: memref<96x64xf32>
// CHECK: %[[BUF:.+]] = memref.alloc() {alignment = 64 : i64} : memref<3x65x32xf32>
// CHECK: vector.transfer_read %[[W]]{{.*}} : memref<96x64xf32>, vector<16x16xf32>
// CHECK: vector.transpose
// CHECK: scf.for {{.*}} -> (vector<8x32xf32>)
// CHECK: vector.transfer_read %[[BUF]]
// CHECK: memref.dealloc %[[BUF]]
func.func @transposed_small_weight(%x: memref<?x64xf32>, %w: memref<96x64xf32>, %out: memref<?x96xf32> {kiln.noalias}) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x64xf32>, memref<96x64xf32>) outs(%out : memref<?x96xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %p = arith.mulf %i, %j : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }
  return
}

// A product whose zero fill kiln-defer-fills deferred: each register tile
// (full 8-row tiles, then the 4 rows left) starts its accumulators from the
// filled vector, with no pass over C before the product.
// CHECK-LABEL: func.func @deferred_fill
// CHECK-DAG: %[[Z8:.+]] = arith.constant dense<0.000000e+00> : vector<8x32xf32>
// CHECK-DAG: %[[Z4:.+]] = arith.constant dense<0.000000e+00> : vector<4x32xf32>
// CHECK-NOT: linalg.fill
// CHECK: scf.for {{.*}} iter_args(%{{.+}} = %[[Z8]]) -> (vector<8x32xf32>)
// CHECK: scf.for {{.*}} iter_args(%{{.+}} = %[[Z4]]) -> (vector<4x32xf32>)
func.func @deferred_fill(%a: memref<20x64xf32>, %b: memref<64x96xf32>) -> memref<20x96xf32> {
  %c = memref.alloc() : memref<20x96xf32>
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<20x64xf32>, memref<64x96xf32>) outs(%c : memref<20x96xf32>)
      attrs = {kiln.fill = 0.0 : f32} {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return %c : memref<20x96xf32>
}

// Blocked along its 1024-long reduction, a tile is computed once per
// k-block: each register tile is filled in the first k-block only, right
// before it is computed (no pass over the output before the product); the
// later blocks accumulate onto it.
// CHECK-LABEL: func.func @deferred_fill_blocked
// CHECK-SAME: %[[OUT:[a-z0-9]+]]: memref<?x256xf32> {kiln.noalias})
// CHECK-NOT: vector.transfer_write %{{.+}}, %[[OUT]]
// CHECK: scf.for %[[K:.+]] = %{{.+}} to %c1024 step %c512
// CHECK: %[[FIRST:.+]] = arith.cmpi eq, %[[K]], %c0
// CHECK: scf.for {{.*}} step %c8
// CHECK: scf.if %[[FIRST]] {
// CHECK: vector.transfer_write %{{.+}}, %[[OUT]]
// CHECK: }
// CHECK: vector.transfer_read %[[OUT]]
// CHECK: scf.for {{.*}} -> (vector<8x32xf32>)
// CHECK-NOT: kiln.fill_first_block
func.func @deferred_fill_blocked(%x: memref<?x1024xf32>, %w: memref<1024x256xf32>, %out: memref<?x256xf32> {kiln.noalias}) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x1024xf32>, memref<1024x256xf32>) outs(%out : memref<?x256xf32>)
      attrs = {kiln.fill = 0.0 : f32} {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %p = arith.mulf %i, %j : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }
  return
}

// An op with no loops (a sum into a scalar) fills its output first.
// CHECK-LABEL: func.func @deferred_fill_scalar
// CHECK: linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : memref<f32>)
// CHECK-NOT: kiln.fill
func.func @deferred_fill_scalar(%x: memref<f32>, %out: memref<f32>) {
  linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
      ins(%x : memref<f32>) outs(%out : memref<f32>) attrs = {kiln.fill = 1.0 : f32} {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %v, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// A row reduction along the innermost loop (a softmax's row maximum): the
// loop over the row's vectors carries a whole vector of partial maxima,
// combined lane by lane, and reduces across the lanes once, after the loop
// (it had reduced every vector across its lanes into the element).
// CHECK-LABEL: func.func @row_max
// CHECK: %[[NEG:.+]] = arith.constant dense<0xFF800000> : vector<16xf32>
// CHECK: %[[R:.+]]:2 = scf.for {{.*}} iter_args(%[[E:.+]] = %{{.+}}, %[[P:.+]] = %[[NEG]]) -> (vector<f32>, vector<16xf32>)
// CHECK-NOT: vector.multi_reduction
// CHECK: %[[M:.+]] = arith.maximumf %{{.+}}, %[[P]] : vector<16xf32>
// CHECK: scf.yield %[[E]], %[[M]]
// CHECK: %[[ELEM:.+]] = vector.extract %[[R]]#0[] : f32 from vector<f32>
// CHECK: vector.reduction <maximumf>, %[[R]]#1, %[[ELEM]] : vector<16xf32> into f32
// AVX2-LABEL: func.func @row_max
// AVX2: scf.for {{.*}} -> (vector<f32>, vector<8xf32>)
// AVX2: vector.reduction <maximumf>, %{{.+}}, %{{.+}} : vector<8xf32> into f32
func.func @row_max(%x: memref<?x100xf32>, %out: memref<?xf32> {kiln.noalias}) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<?x100xf32>) outs(%out : memref<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %m = arith.maximumf %v, %acc : f32
    linalg.yield %m : f32
  }
  return
}
