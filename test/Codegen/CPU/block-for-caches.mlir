// kiln-block-for-caches applies the cache blocks and block copies of each
// op's kiln.cpu_tiles (here written by hand; kiln-select-cpu-tiles chooses
// them, select-cpu-tiles.mlir), leaving the blocked op its register tile.
// RUN: not kiln-opt %s -split-input-file -kiln-block-for-caches 2>/dev/null | FileCheck %s
// RUN: not kiln-opt %s -split-input-file -kiln-block-for-caches 2>&1 >/dev/null | FileCheck %s --check-prefix=ERR

// Column blocks outside reduction blocks; the op keeps only its tile.
// CHECK-LABEL: func.func @blocks
// CHECK: scf.for %[[N:.*]] = %{{.*}} to %{{.*}} step %c128 {
// CHECK-NEXT: scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %c512 {
// CHECK: memref.subview %arg0[0, %[[K]]] [64, 512]
// CHECK: memref.subview %arg1[%[[K]], %[[N]]] [512, 128]
// CHECK: linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0]>}
// CHECK-NOT: kiln.parallel
func.func @blocks(%a: memref<64x1024xf32>, %b: memref<1024x256xf32>, %c: memref<64x256xf32>) {
  linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0], blocks = [0, 128, 512]>} ins(%a, %b : memref<64x1024xf32>, memref<1024x256xf32>) outs(%c : memref<64x256xf32>)
  return
}

// -----

// A transposed B ([n, k]) copied whole into two panels of 32 columns (each
// 64 rows and one row of padding), linked to the op that reads them.
// CHECK-LABEL: func.func @linear
// CHECK: %[[PANELS:.*]] = memref.alloc() {alignment = 64 : i64, kiln.panel_buffer = 0 : i64} : memref<2x65x32xf32>
// CHECK: %[[WINDOW:.*]] = memref.expand_shape {{.*}} into memref<2x32x64xf32
// CHECK: %[[TARGET:.*]] = memref.subview %[[PANELS]][0, 0, 0] [2, 64, 32]
// CHECK: linalg.transpose ins(%[[WINDOW]] {{.*}} outs(%[[TARGET]] {{.*}} permutation = [0, 2, 1]
// CHECK: linalg.generic {{.*}} ins(%arg0, %arg1 {{.*}}kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0]>, kiln.panel_reads = [array<i64: 1, 1, 32, 0>]
// CHECK: memref.dealloc %[[PANELS]]
#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @linear(%x: memref<64x64xf32>, %w: memref<64x64xf32>, %y: memref<64x64xf32>) {
  linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : memref<64x64xf32>, memref<64x64xf32>) outs(%y : memref<64x64xf32>) attrs = {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0], packs = [#kiln.cpu_pack<operand = 1, dims = [1, 2], transpose = true, panel_dim = 1, panel_width = 32>]>} {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Dynamic rows: the panels are made, and read, only when at least 32 rows
// read them (else the op reads B in place); the deferred fill goes to the
// first reduction block.
// CHECK-LABEL: func.func @dynamic_rows
// CHECK: %[[ROWS:.*]] = memref.dim %arg0, %c0
// CHECK: %[[ENOUGH:.*]] = arith.cmpi sge, %[[ROWS]], %c32
// CHECK: memref.alloc() {alignment = 64 : i64, kiln.panel_buffer = 0 : i64} : memref<4x513x32xf32>
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.if %[[ENOUGH]] {
// CHECK: linalg.copy
// CHECK: scf.if %[[ENOUGH]] {
// CHECK-NEXT: linalg.matmul {{{.*}}kiln.panel_reads = [array<i64: 1, 1, 32, 0>]}
// CHECK-NEXT: } else {
// CHECK-NEXT: linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0]>, kiln.fill = 0.000000e+00 : f32} ins
// CHECK: } {kiln.fill_first_block}
func.func @dynamic_rows(%a: memref<?x1024xf32>, %b: memref<1024x2048xf32>, %c: memref<?x2048xf32>) {
  linalg.matmul {kiln.fill = 0.0 : f32, kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0], blocks = [0, 128, 512], packs = [#kiln.cpu_pack<operand = 1, dims = [2, 1], panel_dim = 1, panel_width = 32, reuse = [0], min_reuse = 32>]>} ins(%a, %b : memref<?x1024xf32>, memref<1024x2048xf32>) outs(%c : memref<?x2048xf32>)
  return
}

// -----

// A dynamic reduction with a deferred fill: the first reduction block fills
// the output, and the loop runs a first block even for a reduction of zero
// steps (its bound at least one past the start; the block's size, from the
// length, is then 0), so that an empty reduction fills it too.
// CHECK-LABEL: func.func @dynamic_reduction
// CHECK: %[[K:.*]] = memref.dim %arg0, %[[C0:.*]] :
// CHECK: %[[FIRST:.*]] = arith.addi %[[START:.*]], %[[ONE:.*]] : index
// CHECK: %[[UPPER:.*]] = arith.maxsi %[[K]], %[[FIRST]] : index
// CHECK-NEXT: scf.for %[[KB:.*]] = %[[START]] to %[[UPPER]] step %c512 {
// CHECK: affine.min #{{.*}}(%[[KB]])[%[[K]]]
// CHECK: } {kiln.fill_first_block}
// CHECK-NOT: linalg.fill
#km = affine_map<(m, n, k) -> (k, m)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @dynamic_reduction(%g: memref<?x672xf32>, %x: memref<?x65xf32>, %dw: memref<672x65xf32>) {
  linalg.generic {indexing_maps = [#km, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%g, %x : memref<?x672xf32>, memref<?x65xf32>) outs(%dw : memref<672x65xf32>) attrs = {kiln.fill = 0.0 : f32, kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0], blocks = [88, 0, 512], block_threads = [0], packs = [#kiln.cpu_pack<operand = 0, dims = [2, 0]>]>} {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A weight gradient: rows blocked inside the column and reduction blocks,
// on all cores, each thread copying the block of A it multiplies.
// CHECK-LABEL: func.func @weight_gradient
// CHECK: scf.for {{.*}} step %c128 {
// CHECK: scf.for {{.*}} step %c512 {
// CHECK: scf.for
// CHECK: %[[COPY:.*]] = memref.alloc() {alignment = 64 : i64} : memref<512x128xf32>
// CHECK: linalg.copy
// CHECK: %[[A:.*]] = memref.cast
// CHECK: linalg.generic {{.*}} ins(%[[A]],
// CHECK: memref.dealloc %[[COPY]]
// CHECK: } {kiln.parallel}
#km = affine_map<(m, n, k) -> (k, m)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @weight_gradient(%g: memref<2048x1024xf32>, %x: memref<2048x384xf32>, %dw: memref<1024x384xf32>) {
  linalg.generic {indexing_maps = [#km, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%g, %x : memref<2048x1024xf32>, memref<2048x384xf32>) outs(%dw : memref<1024x384xf32>) attrs = {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0], blocks = [128, 128, 512], block_threads = [0], packs = [#kiln.cpu_pack<operand = 0, dims = [2, 0]>]>} {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The same on AVX2's tiles, A's blocks copied into micro-panels of the
// tile's 6 rows (select-cpu-tiles.mlir says when): each thread allocates
// and fills its own [14, 257, 6] panels (84 rows; a row of padding per
// panel), the last panel of a block apart when the block's rows are not a
// multiple of 6 (the last of 640 rows' 8 blocks has 52), and the op reads
// the panels (kiln.panel_reads, followed by kiln-tile-and-peel).
// CHECK-LABEL: func.func @weight_gradient_panels
// CHECK: scf.for {{.*}} step %c256 {
// CHECK: scf.for {{.*}} step %c84 {
// CHECK: %[[PANELS:.*]] = memref.alloc() {alignment = 64 : i64, kiln.panel_buffer = 0 : i64} : memref<14x257x6xf32>
// CHECK: memref.expand_shape {{.*}} into memref<?x?x6xf32
// CHECK: memref.transpose
// CHECK: linalg.copy
// CHECK: scf.if
// CHECK: memref.subview %[[PANELS]]
// CHECK: linalg.copy
// CHECK: linalg.generic {{.*}} kiln.panel_reads = [array<i64: 0, 0, 6, 0>]
// CHECK: memref.dealloc %[[PANELS]]
// CHECK: } {kiln.parallel}
#km = affine_map<(m, n, k) -> (k, m)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @weight_gradient_panels(%g: memref<?x640xf32>, %x: memref<?x384xf32>, %dw: memref<640x384xf32>) {
  linalg.generic {indexing_maps = [#km, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%g, %x : memref<?x640xf32>, memref<?x384xf32>) outs(%dw : memref<640x384xf32>) attrs = {kiln.fill = 0.0 : f32, kiln.cpu_tiles = #kiln.cpu_tiles<tile = [6, 16, 1], threads = [0], blocks = [84, 0, 256], block_threads = [0], packs = [#kiln.cpu_pack<operand = 0, dims = [2, 0], panel_dim = 0, panel_width = 6>]>} {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// ERR: error: 'linalg.generic' op has a 'kiln.cpu_tiles' with cache blocks, which need a contraction with rows, columns and one reduction loop, and a tile size per loop
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @elementwise_blocks(%a: memref<64x64xf32>, %b: memref<64x64xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : memref<64x64xf32>) outs(%b : memref<64x64xf32>) attrs = {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [1, 16], threads = [0], blocks = [0, 32]>} {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  }
  return
}

// -----

// ERR: error: 'linalg.matmul' op has a 'kiln.cpu_tiles' that packs operand 2, which is no matrix input of the op
func.func @pack_the_output(%a: memref<64x64xf32>, %b: memref<64x64xf32>, %c: memref<64x64xf32>) {
  linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0], blocks = [0, 32, 0], packs = [#kiln.cpu_pack<operand = 2, dims = [0, 1]>]>} ins(%a, %b : memref<64x64xf32>, memref<64x64xf32>) outs(%c : memref<64x64xf32>)
  return
}

// -----

// A transposed copy of a named op's operand (only a linalg.generic can read
// it as (k, n)).
// ERR: error: 'linalg.matmul' op has a 'kiln.cpu_tiles' that packs operand 1 in a way its copies cannot: the operand's last two dimensions must be the pack's loops, its others loops blocked by one, each block of static size, and a transposed or (k, n) panel copy needs a linalg.generic
func.func @transposed_named(%a: memref<64x64xf32>, %b: memref<64x64xf32>, %c: memref<64x64xf32>) {
  linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0], packs = [#kiln.cpu_pack<operand = 1, dims = [2, 1], transpose = true>]>} ins(%a, %b : memref<64x64xf32>, memref<64x64xf32>) outs(%c : memref<64x64xf32>)
  return
}

// -----

// Loops that are not the operand's (B is indexed (k, n)), and a block of
// dynamic size.
// ERR: error: 'linalg.matmul' op has a 'kiln.cpu_tiles' that packs operand 1 in a way its copies cannot
// ERR: error: 'linalg.matmul' op has a 'kiln.cpu_tiles' that packs operand 1 in a way its copies cannot
func.func @pack_other_loops(%a: memref<64x64xf32>, %b: memref<64x64xf32>, %c: memref<64x64xf32>) {
  linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0], blocks = [0, 32, 0], packs = [#kiln.cpu_pack<operand = 1, dims = [1, 2]>]>} ins(%a, %b : memref<64x64xf32>, memref<64x64xf32>) outs(%c : memref<64x64xf32>)
  return
}
func.func @dynamic_block(%a: memref<64x?xf32>, %b: memref<?x?xf32>, %c: memref<64x?xf32>) {
  linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0], blocks = [0, 32, 0], packs = [#kiln.cpu_pack<operand = 1, dims = [2, 1]>]>} ins(%a, %b : memref<64x?xf32>, memref<?x?xf32>) outs(%c : memref<64x?xf32>)
  return
}

// -----

// Threads on the column blocks (which share the copies made around them).
// ERR: error: 'linalg.matmul' op has a 'kiln.cpu_tiles' that shares block loop 1 between threads, which is no batch or row loop
func.func @threads_on_columns(%a: memref<64x64xf32>, %b: memref<64x64xf32>, %c: memref<64x64xf32>) {
  linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0], blocks = [0, 32, 0], block_threads = [1]>} ins(%a, %b : memref<64x64xf32>, memref<64x64xf32>) outs(%c : memref<64x64xf32>)
  return
}
