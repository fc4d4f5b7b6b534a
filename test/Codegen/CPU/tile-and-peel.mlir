// kiln-tile-and-peel applies the tile and thread loops of each op's
// kiln.cpu_tiles (written by hand here): the parallel loops tiled (those in
// `threads` marked kiln.parallel), the partial tiles peeled off, deferred
// fills done tile by tile, the reduction loops tiled inside, each tile
// marked kiln.tile for kiln-vectorize-tiles; a tile of an op linked to
// micro-panels (kiln-block-for-caches) reads its own panel.
// RUN: not kiln-opt %s -split-input-file -kiln-tile-and-peel 2>/dev/null | FileCheck %s
// RUN: not kiln-opt %s -split-input-file -kiln-tile-and-peel 2>&1 >/dev/null | FileCheck %s --check-prefix=ERR

// 13 x 20 by 6 x 16 tiles: two full row tiles on the threads, then the
// last row; 16 columns, then 4. Each tile fills its output, then runs over
// the 7 reduction steps.
// CHECK-LABEL: func.func @matmul
// CHECK: scf.for %[[ROW:.*]] = %c0 to %c12 step %c6 {
// CHECK: linalg.fill {kiln.tile = array<i64: 6, 16>} ins(%cst : f32) outs(%{{.*}} : memref<6x16xf32
// CHECK-NEXT: scf.for %{{.*}} = %c0 to %c7 step %c1 {
// CHECK: linalg.matmul {kiln.tile = array<i64: 6, 16, 1>} {{.*}} outs(%{{.*}} : memref<6x16xf32
// CHECK: linalg.matmul {kiln.tile = array<i64: 6, 16, 1>} {{.*}} outs(%{{.*}} : memref<6x4xf32
// CHECK: } {kiln.parallel}
// CHECK: linalg.matmul {kiln.tile = array<i64: 6, 16, 1>} {{.*}} outs(%{{.*}} : memref<1x16xf32
// CHECK: linalg.matmul {kiln.tile = array<i64: 6, 16, 1>} {{.*}} outs(%{{.*}} : memref<1x4xf32
// CHECK-NOT: kiln.cpu_tiles
// CHECK-NOT: kiln.fill =
// CHECK: return
module attributes {kiln.target = #kiln.target<cpu = "x86-64-v3", features = "+avx,+avx2,+fma", l1DataBytes = 32768, l2Bytes = 524288>} {
func.func @matmul(%a: memref<13x7xf32>, %b: memref<7x20xf32>, %c: memref<13x20xf32>) {
  linalg.matmul {kiln.fill = 0.0 : f32, kiln.cpu_tiles = #kiln.cpu_tiles<tile = [6, 16, 1], threads = [0]>} ins(%a, %b : memref<13x7xf32>, memref<7x20xf32>) outs(%c : memref<13x20xf32>)
  return
}
}

// -----

// Each 16-column tile reads the panel of its columns (column / 16), not
// the weight; the link is gone.
// CHECK-DAG: #[[PANEL:.*]] = affine_map<(d0) -> (d0 floordiv 16)>
// CHECK-LABEL: func.func @panels
// CHECK: %[[PANELS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x9x16xf32>
// CHECK: scf.for
// CHECK: scf.for %[[COL:.*]] = %c0 to %c32 step %c16 {
// CHECK: %[[P:.*]] = affine.apply #[[PANEL]](%[[COL]])
// CHECK: %[[B:.*]] = memref.subview %[[PANELS]][%[[P]], 0, 0] [1, 8, 16]
// CHECK: scf.for %[[K:.*]] = %c0 to %c8 step %c1 {
// CHECK: %[[BK:.*]] = memref.subview %[[B]][%[[K]], 0] [1, 16]
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[BK]] :
// CHECK-NOT: kiln.panel
#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
module attributes {kiln.target = #kiln.target<cpu = "x86-64-v3", features = "+avx,+avx2,+fma", l1DataBytes = 32768, l2Bytes = 524288>} {
func.func @panels(%x: memref<12x8xf32>, %w: memref<32x8xf32>, %y: memref<12x32xf32>) {
  %panels = memref.alloc() {alignment = 64 : i64, kiln.panel_buffer = 0 : i64} : memref<2x9x16xf32>
  linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : memref<12x8xf32>, memref<32x8xf32>) outs(%y : memref<12x32xf32>) attrs = {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [6, 16, 1], threads = [0]>, kiln.panel_reads = [array<i64: 1, 1, 16, 0>]} {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  memref.dealloc %panels : memref<2x9x16xf32>
  return
}
}

// -----

// ERR: error: 'linalg.matmul' op has a 'kiln.panel_reads' entry array<i64: 1, 1, 16, 7> that names no input, loop or panel buffer ('kiln.panel_buffer', a static [panels, rows, width])
module attributes {kiln.target = #kiln.target<cpu = "x86-64-v3", features = "+avx,+avx2,+fma", l1DataBytes = 32768, l2Bytes = 524288>} {
func.func @no_panel_buffer(%a: memref<12x8xf32>, %b: memref<8x32xf32>, %c: memref<12x32xf32>) {
  linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [6, 16, 1], threads = [0]>, kiln.panel_reads = [array<i64: 1, 1, 16, 7>]} ins(%a, %b : memref<12x8xf32>, memref<8x32xf32>) outs(%c : memref<12x32xf32>)
  return
}
}

// -----

// A panel buffer of another width than the link says.
// ERR: error: 'linalg.matmul' op has a 'kiln.panel_reads' entry array<i64: 1, 1, 16, 0> that names no input, loop or panel buffer
module attributes {kiln.target = #kiln.target<cpu = "x86-64-v3", features = "+avx,+avx2,+fma", l1DataBytes = 32768, l2Bytes = 524288>} {
func.func @panel_width_mismatch(%a: memref<12x8xf32>, %b: memref<8x32xf32>, %c: memref<12x32xf32>) {
  %panels = memref.alloc() {kiln.panel_buffer = 0 : i64} : memref<4x9x8xf32>
  linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [6, 16, 1], threads = [0]>, kiln.panel_reads = [array<i64: 1, 1, 16, 0>]} ins(%a, %b : memref<12x8xf32>, memref<8x32xf32>) outs(%c : memref<12x32xf32>)
  memref.dealloc %panels : memref<4x9x8xf32>
  return
}
}
