// kiln-select-cpu-tiles writes each linalg op's tile and thread loops, and
// a large contraction's cache blocks and block copies, as kiln.cpu_tiles,
// from the module's target: a contraction gets a register tile (8 x 32 on
// x86-64-v4, 6 x 16 on x86-64-v3; 1 along the reduction) clamped to static
// ranges, with the threads on the rows (and batches); an elementwise op one
// vector along its innermost loop, the threads on the loops outside it; a
// transpose a square of vectors; a reduction into a vector its parallel
// loop on the threads. A config already there stays.
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

// Its columns may exceed a cache block (128 for a named CPU's 512 KiB L2):
// blocked by 128, and each [64, 128] block of B, whose rows may alias in the
// caches (a dynamic stride), copied into micro-panels one register tile
// wide when at least 32 rows read it (a run-time test: the rows are
// dynamic).
// V4-LABEL: func.func @matmul
// V4: linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0], blocks = [0, 128, 0], packs = [#kiln.cpu_pack<operand = 1, dims = [2, 1], panel_dim = 1, panel_width = 32, reuse = [0], min_reuse = 32>]>}
// V3-LABEL: func.func @matmul
// V3: linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [6, 16, 1], threads = [0], blocks = [0, 128, 0], packs = [#kiln.cpu_pack<operand = 1, dims = [2, 1], panel_dim = 1, panel_width = 16, reuse = [0], min_reuse = 32>]>}
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

// A batched product: threads on the batch and the rows; its columns blocked
// (a batched B is read in place).
// V4-LABEL: func.func @batch_matmul
// V4: linalg.batch_matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [1, 8, 32, 1], threads = [0, 1], blocks = [0, 0, 128, 0]>}
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

// A linear layer, [64, 1024] x [1024, 1024]ᵀ: blocked by 128 columns and
// 512 reduction steps; its weight (B stored transposed, [n, k]) always
// copied, transposed, into micro-panels one register tile wide.
// V4-LABEL: func.func @linear
// V4: kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0], blocks = [0, 128, 512], packs = [#kiln.cpu_pack<operand = 1, dims = [1, 2], transpose = true, panel_dim = 1, panel_width = 32>]>
// V3-LABEL: func.func @linear
// V3: kiln.cpu_tiles = #kiln.cpu_tiles<tile = [6, 16, 1], threads = [0], blocks = [0, 128, 512], packs = [#kiln.cpu_pack<operand = 1, dims = [1, 2], transpose = true, panel_dim = 1, panel_width = 16>]>
#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @linear(%x: memref<64x1024xf32>, %w: memref<1024x1024xf32>, %y: memref<64x1024xf32>) {
  linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : memref<64x1024xf32>, memref<1024x1024xf32>) outs(%y : memref<64x1024xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A linear whose reduction (2049) is longer than two k-blocks: AVX2 takes
// k-blocks of 256, the most for which a register tile's rows of A and one
// panel of B ((6 + 16) x 256 floats) fit in the 32 KiB L1 together, and
// blocks of 256 columns (TargetInfo::blockKLongReduction); AVX-512 keeps 512
// and 128. A dynamic reduction takes them too; the linear above (1024 steps,
// two k-blocks) and a product without a transposed operand (below) do not.
// V4-LABEL: func.func @long_linear
// V4: kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0], blocks = [0, 128, 512], packs = [#kiln.cpu_pack<operand = 1, dims = [1, 2], transpose = true, panel_dim = 1, panel_width = 32>]>
// V4: kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0], blocks = [0, 128, 512], packs = [#kiln.cpu_pack<operand = 1, dims = [1, 2], transpose = true, panel_dim = 1, panel_width = 32>]>
// V4: linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0], blocks = [0, 128, 512], packs = [#kiln.cpu_pack<operand = 1, dims = [2, 1], panel_dim = 1, panel_width = 32>]>}
// V3-LABEL: func.func @long_linear
// V3: kiln.cpu_tiles = #kiln.cpu_tiles<tile = [6, 16, 1], threads = [0], blocks = [0, 256, 256], packs = [#kiln.cpu_pack<operand = 1, dims = [1, 2], transpose = true, panel_dim = 1, panel_width = 16>]>
// V3: kiln.cpu_tiles = #kiln.cpu_tiles<tile = [6, 16, 1], threads = [0], blocks = [0, 256, 256], packs = [#kiln.cpu_pack<operand = 1, dims = [1, 2], transpose = true, panel_dim = 1, panel_width = 16>]>
// V3: linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [6, 16, 1], threads = [0], blocks = [0, 128, 512], packs = [#kiln.cpu_pack<operand = 1, dims = [2, 1], panel_dim = 1, panel_width = 16>]>}
#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @long_linear(%x: memref<512x2049xf32>, %w: memref<384x2049xf32>, %y: memref<512x384xf32>,
                       %xd: memref<512x?xf32>, %wd: memref<384x?xf32>,
                       %b: memref<2049x384xf32>) {
  linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : memref<512x2049xf32>, memref<384x2049xf32>) outs(%y : memref<512x384xf32>) {
  ^bb0(%a: f32, %bb: f32, %c: f32):
    %p = arith.mulf %a, %bb : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%xd, %wd : memref<512x?xf32>, memref<384x?xf32>) outs(%y : memref<512x384xf32>) {
  ^bb0(%a: f32, %bb: f32, %c: f32):
    %p = arith.mulf %a, %bb : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  linalg.matmul ins(%x, %b : memref<512x2049xf32>, memref<2049x384xf32>) outs(%y : memref<512x384xf32>)
  return
}

// -----

// A weight gradient gᵀ·x with g [2048, 1024] (rows 4 KiB apart): rows blocked
// too (128 on AVX-512; on AVX2, whose reduction of 2048 takes k-blocks of 256
// and blocks of 256 columns (TargetInfo::blockKLongReduction), 132 = 22
// register tiles, so that there are 8), each block of A copied (384 columns
// read it); 8 or more row blocks run on all cores. B's rows (1,536 bytes
// apart) do not alias, but 1,024 rows read each block: micro-panels. On
// AVX2 A's blocks are copied into micro-panels of the tile's 6 rows too
// (TargetInfo::tileRowsAndPanelInL1).
// V4-LABEL: func.func @weight_gradient
// V4: kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0], blocks = [128, 128, 512], block_threads = [0], packs = [#kiln.cpu_pack<operand = 1, dims = [2, 1], panel_dim = 1, panel_width = 32>, #kiln.cpu_pack<operand = 0, dims = [2, 0]>]>
// V3-LABEL: func.func @weight_gradient
// V3: kiln.cpu_tiles = #kiln.cpu_tiles<tile = [6, 16, 1], threads = [0], blocks = [132, 256, 256], block_threads = [0], packs = [#kiln.cpu_pack<operand = 1, dims = [2, 1], panel_dim = 1, panel_width = 16>, #kiln.cpu_pack<operand = 0, dims = [2, 0], panel_dim = 0, panel_width = 6>]>
#km = affine_map<(m, n, k) -> (k, m)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @weight_gradient(%g: memref<2048x1024xf32>, %x: memref<2048x384xf32>, %dw: memref<1024x384xf32>) {
  linalg.generic {indexing_maps = [#km, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%g, %x : memref<2048x1024xf32>, memref<2048x384xf32>) outs(%dw : memref<1024x384xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// g [1030, 672]: rows 2,688 bytes apart fall into 32 of the L1's 64 sets,
// which hold 256 of a k-block's 512 rows, and the k-block (1.3 MiB) does not
// fit in the 512 KiB L2 of a named CPU: A copied block by block, rows in 8
// blocks (88 = 11 tiles of 8) so that every core takes whole blocks, where
// the L2's 128 rows would make 6. On AVX2 the reduction of 1030 takes
// k-blocks of 256 (TargetInfo::blockKLongReduction), whose 256 rows the 32
// sets would hold, but a tile's column of A in place is 256 lines of L1
// beside a 16 KiB panel of B: A is copied into micro-panels of 6 rows, in
// 8 blocks of 84 rows on all cores (TargetInfo::tileRowsAndPanelInL1).
// V4-LABEL: func.func @rows_leave_the_caches
// V4: kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0], blocks = [88, 0, 512], block_threads = [0], packs = [#kiln.cpu_pack<operand = 0, dims = [2, 0]>]>
// V3-LABEL: func.func @rows_leave_the_caches
// V3: kiln.cpu_tiles = #kiln.cpu_tiles<tile = [6, 16, 1], threads = [0], blocks = [84, 0, 256], block_threads = [0], packs = [#kiln.cpu_pack<operand = 0, dims = [2, 0], panel_dim = 0, panel_width = 6>]>
#km = affine_map<(m, n, k) -> (k, m)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @rows_leave_the_caches(%g: memref<1030x672xf32>, %x: memref<1030x65xf32>, %dw: memref<672x65xf32>) {
  linalg.generic {indexing_maps = [#km, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%g, %x : memref<1030x672xf32>, memref<1030x65xf32>) outs(%dw : memref<672x65xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// g [?, 640]: rows 2,560 bytes apart fall into 8 sets, which hold 64 rows:
// fewer than a k-block's 512 (AVX-512) or 256 (AVX2, whose dynamic reduction
// takes k-blocks of 256), and a k-block does not fit in L2: A copied on both,
// in 8 row blocks (80 = 10 tiles of 8; 84 = 14 tiles of 6, the last of 52),
// on AVX2 into micro-panels of 6 rows.
// V4-LABEL: func.func @rows_leave_the_caches_dynamic
// V4: kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0], blocks = [80, 0, 512], block_threads = [0], packs = [#kiln.cpu_pack<operand = 0, dims = [2, 0]>]>
// V3-LABEL: func.func @rows_leave_the_caches_dynamic
// V3: kiln.cpu_tiles = #kiln.cpu_tiles<tile = [6, 16, 1], threads = [0], blocks = [84, 0, 256], block_threads = [0], packs = [#kiln.cpu_pack<operand = 0, dims = [2, 0], panel_dim = 0, panel_width = 6>]>
#km = affine_map<(m, n, k) -> (k, m)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @rows_leave_the_caches_dynamic(%g: memref<?x640xf32>, %x: memref<?x65xf32>, %dw: memref<640x65xf32>) {
  linalg.generic {indexing_maps = [#km, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%g, %x : memref<?x640xf32>, memref<?x65xf32>) outs(%dw : memref<640x65xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The same g with 16 columns of x: too few reads of a block of g (fewer than
// 32) to repay its copy, on AVX2 too (no panels): rows blocked, read in
// place.
// V4-LABEL: func.func @few_columns
// V4: kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 16, 1], threads = [0], blocks = [80, 0, 512]>}
// V3-LABEL: func.func @few_columns
// V3: kiln.cpu_tiles = #kiln.cpu_tiles<tile = [6, 16, 1], threads = [0], blocks = [84, 0, 256]>}
#km = affine_map<(m, n, k) -> (k, m)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @few_columns(%g: memref<?x640xf32>, %x: memref<?x16xf32>, %dw: memref<640x16xf32>) {
  linalg.generic {indexing_maps = [#km, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%g, %x : memref<?x640xf32>, memref<?x16xf32>) outs(%dw : memref<640x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// g [256, 384]: its rows share 8 sets too, but the k-block (384 KiB) stays
// in L2: read in place, unblocked. AVX2 copies it into micro-panels of 6
// rows in 8 blocks of 48 rows, on all cores.
// V4-LABEL: func.func @block_fits_in_l2
// V4: kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0]>}
// V3-LABEL: func.func @block_fits_in_l2
// V3: kiln.cpu_tiles = #kiln.cpu_tiles<tile = [6, 16, 1], threads = [0], blocks = [48, 0, 0], block_threads = [0], packs = [#kiln.cpu_pack<operand = 0, dims = [2, 0], panel_dim = 0, panel_width = 6>]>}
#km = affine_map<(m, n, k) -> (k, m)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @block_fits_in_l2(%g: memref<256x384xf32>, %x: memref<256x33xf32>, %dw: memref<384x33xf32>) {
  linalg.generic {indexing_maps = [#km, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%g, %x : memref<256x384xf32>, memref<256x33xf32>) outs(%dw : memref<384x33xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// g [2048, 200]: rows 800 bytes apart spread over every set: read in place,
// only the reduction blocked. AVX2 too: its 200 rows make too few blocks
// for the threads to copy their own panels (blocks of at least 8 tiles),
// and a block's copy shared by both cores cost more than it saved.
// V4-LABEL: func.func @rows_spread_over_the_sets
// V4: kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 17, 1], threads = [0], blocks = [0, 0, 512]>}
// V3-LABEL: func.func @rows_spread_over_the_sets
// V3: kiln.cpu_tiles = #kiln.cpu_tiles<tile = [6, 16, 1], threads = [0], blocks = [0, 0, 256]>}
#km = affine_map<(m, n, k) -> (k, m)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @rows_spread_over_the_sets(%g: memref<2048x200xf32>, %x: memref<2048x17xf32>, %dw: memref<200x17xf32>) {
  linalg.generic {indexing_maps = [#km, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%g, %x : memref<2048x200xf32>, memref<2048x17xf32>) outs(%dw : memref<200x17xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Attention scores Q·Kᵀ per batch: the keys (B stored transposed per batch)
// copied batch by batch, the batches blocked by one and run on all cores.
// V4-LABEL: func.func @scores
// V4: kiln.cpu_tiles = #kiln.cpu_tiles<tile = [1, 8, 32, 1], threads = [0, 1], blocks = [1, 0, 0, 0], block_threads = [0], packs = [#kiln.cpu_pack<operand = 1, dims = [2, 3], transpose = true, panel_dim = 2, panel_width = 32>]>
#q = affine_map<(b, i, j, d) -> (b, i, d)>
#k = affine_map<(b, i, j, d) -> (b, j, d)>
#s = affine_map<(b, i, j, d) -> (b, i, j)>
func.func @scores(%q: memref<8x64x32xf32>, %k: memref<8x64x32xf32>, %s: memref<8x64x64xf32>) {
  linalg.generic {indexing_maps = [#q, #k, #s], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : memref<8x64x32xf32>, memref<8x64x32xf32>) outs(%s : memref<8x64x64xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %t = arith.addf %c, %p : f32
    linalg.yield %t : f32
  }
  return
}

// -----

// 8 rows read a block of B (rows 8 KiB apart) too few times to repay a
// copy: blocked, read in place.
// V4-LABEL: func.func @few_rows
// V4: linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [8, 32, 1], threads = [0], blocks = [0, 128, 512]>}
func.func @few_rows(%a: memref<8x1024xf32>, %b: memref<1024x2048xf32>, %c: memref<8x2048xf32>) {
  linalg.matmul ins(%a, %b : memref<8x1024xf32>, memref<1024x2048xf32>) outs(%c : memref<8x2048xf32>)
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
