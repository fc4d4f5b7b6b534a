// kiln-select-cpu-tiles writes each linalg op's tile and thread loops as
// kiln.cpu_tiles, from the module's target: a contraction gets a register
// tile (8 x 32 on x86-64-v4, 6 x 16 on x86-64-v3; 1 along the reduction)
// clamped to static ranges, with the threads on the rows (and batches);
// an elementwise op one vector along its innermost loop, the threads on
// the loops outside it; a transpose a square of vectors; a reduction into
// a vector its parallel loop on the threads. A config already there stays.
// RUN: kiln-opt %s -split-input-file -kiln-set-target=cpu=x86-64-v4 -kiln-select-cpu-tiles | FileCheck %s --check-prefix=V4
// RUN: kiln-opt %s -split-input-file -kiln-set-target=cpu=x86-64-v3 -kiln-select-cpu-tiles | FileCheck %s --check-prefix=V3
// Without a target (and without the sizes as options) it says how to set one:
// RUN: not kiln-opt %s -split-input-file -kiln-select-cpu-tiles 2>&1 | FileCheck %s --check-prefix=NONE
// kiln-tile-and-vectorize applies a config written by hand (a 2 x 8
// register tile), and refuses one that does not fit the op:
// RUN: not kiln-opt %s -split-input-file -kiln-set-target=cpu=x86-64-v3 -kiln-tile-and-vectorize 2>/dev/null | FileCheck %s --check-prefix=APPLY
// RUN: not kiln-opt %s -split-input-file -kiln-set-target=cpu=x86-64-v3 -kiln-select-cpu-tiles -kiln-tile-and-vectorize 2>/dev/null | FileCheck %s --check-prefix=APPLY
// RUN: not kiln-opt %s -split-input-file -kiln-set-target=cpu=x86-64-v3 -kiln-tile-and-vectorize 2>&1 >/dev/null | FileCheck %s --check-prefix=ERR

// NONE: error: kiln-select-cpu-tiles needs the target CPU: the module's 'kiln.target' attribute, set by kiln-set-target{cpu=...}

// V4-LABEL: func.func @matmul
// V4: linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0]>}
// V3-LABEL: func.func @matmul
// V3: linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [6, 16, 1], threads = [0]>}
func.func @matmul(%a: memref<?x64xf32>, %b: memref<64x?xf32>, %c: memref<?x?xf32>) {
  linalg.matmul ins(%a, %b : memref<?x64xf32>, memref<64x?xf32>) outs(%c : memref<?x?xf32>)
  return
}

// -----

// Ranges below the tile clamp it: 3 rows, 5 columns.
// V4-LABEL: func.func @small_matmul
// V4: linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [3, 5, 1], threads = [0]>}
// V3-LABEL: func.func @small_matmul
// V3: linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [3, 5, 1], threads = [0]>}
func.func @small_matmul(%a: memref<3x7xf32>, %b: memref<7x5xf32>, %c: memref<3x5xf32>) {
  linalg.matmul ins(%a, %b : memref<3x7xf32>, memref<7x5xf32>) outs(%c : memref<3x5xf32>)
  return
}

// -----

// A batched product: threads on the batch and the rows.
// V4-LABEL: func.func @batch_matmul
// V4: linalg.batch_matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [1, 8, 32, 1], threads = [0, 1]>}
func.func @batch_matmul(%a: memref<?x?x64xf32>, %b: memref<?x64x?xf32>, %c: memref<?x?x?xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<?x?x64xf32>, memref<?x64x?xf32>) outs(%c : memref<?x?x?xf32>)
  return
}

// -----

// Elementwise: one vector along the innermost loop, threads outside it.
// V4-LABEL: func.func @elementwise
// V4: linalg.generic {{.*}}kiln.cpu_tiles = #kiln.cpu_tiles<tile = [1, 1, 16], threads = [0, 1]>
// V3-LABEL: func.func @elementwise
// V3: linalg.generic {{.*}}kiln.cpu_tiles = #kiln.cpu_tiles<tile = [1, 1, 8], threads = [0, 1]>
#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @elementwise(%a: memref<?x?x?xf32>, %b: memref<?x?x?xf32>) {
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%a : memref<?x?x?xf32>) outs(%b : memref<?x?x?xf32>) {
  ^bb0(%x: f32, %y: f32):
    %e = math.exp %x : f32
    linalg.yield %e : f32
  }
  return
}

// -----

// A transpose: a square of vectors, read along one loop, written along
// the other.
// V4-LABEL: func.func @transpose
// V4: linalg.transpose {{.*}}kiln.cpu_tiles = #kiln.cpu_tiles<tile = [16, 16], threads = [0]>
func.func @transpose(%a: memref<?x?xf32>, %b: memref<?x?xf32>) {
  linalg.transpose ins(%a : memref<?x?xf32>) outs(%b : memref<?x?xf32>) permutation = [1, 0]
  return
}

// -----

// A bias gradient (sum over rows into a vector): its one parallel loop goes
// to the threads.
// V4-LABEL: func.func @column_sums
// V4: linalg.generic {{.*}}kiln.cpu_tiles = #kiln.cpu_tiles<tile = [1, 16], threads = [1]>
#rows = affine_map<(d0, d1) -> (d0, d1)>
#cols = affine_map<(d0, d1) -> (d1)>
func.func @column_sums(%a: memref<?x?xf32>, %b: memref<?xf32>) {
  linalg.generic {indexing_maps = [#rows, #cols], iterator_types = ["reduction", "parallel"]} ins(%a : memref<?x?xf32>) outs(%b : memref<?xf32>) {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A config written by hand stays, and is applied.
// V4-LABEL: func.func @hand_written
// V4: linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [2, 8, 1], threads = []>}
// APPLY-LABEL: func.func @hand_written
// APPLY-NOT: kiln.cpu_tiles
// APPLY: vector.transfer_read {{.*}} : memref<2x8xf32, {{.*}}>, vector<2x8xf32>
// APPLY: arith.mulf {{.*}} : vector<2x8xf32>
// APPLY-NOT: vector<6x16xf32>
// APPLY-NOT: kiln.parallel
// APPLY: return
func.func @hand_written(%a: memref<64x64xf32>, %b: memref<64x64xf32>, %c: memref<64x64xf32>) {
  linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [2, 8, 1], threads = []>} ins(%a, %b : memref<64x64xf32>, memref<64x64xf32>) outs(%c : memref<64x64xf32>)
  return
}

// -----

// ERR: error: 'linalg.matmul' op has a 'kiln.cpu_tiles' of 2 tile sizes for 3 loops
func.func @too_few_sizes(%a: memref<64x64xf32>, %b: memref<64x64xf32>, %c: memref<64x64xf32>) {
  linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [2, 8], threads = []>} ins(%a, %b : memref<64x64xf32>, memref<64x64xf32>) outs(%c : memref<64x64xf32>)
  return
}

// -----

// ERR: error: 'linalg.matmul' op has a 'kiln.cpu_tiles' that shares loop 2 between threads, which is no parallel loop
func.func @threads_on_the_reduction(%a: memref<64x64xf32>, %b: memref<64x64xf32>, %c: memref<64x64xf32>) {
  linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [2, 8, 1], threads = [2]>} ins(%a, %b : memref<64x64xf32>, memref<64x64xf32>) outs(%c : memref<64x64xf32>)
  return
}
