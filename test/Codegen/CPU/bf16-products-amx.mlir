// RUN: kiln-opt %s -split-input-file -kiln-set-target=cpu=sapphirerapids -kiln-bf16-products | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-set-target=cpu=sapphirerapids -kiln-bf16-products=kernels=dot | FileCheck %s --check-prefix=DOT
// RUN: kiln-opt %s -split-input-file -kiln-set-target=cpu=znver4 -kiln-bf16-products=kernels=amx-emulated | FileCheck %s --check-prefix=EMU
// RUN: not kiln-opt %s -split-input-file -kiln-set-target=cpu=znver4 -kiln-bf16-products=kernels=amx 2>&1 | FileCheck %s --check-prefix=NOAMX
// RUN: not kiln-opt %s -split-input-file -kiln-set-target=cpu=sapphirerapids -kiln-bf16-products=kernels=tiles 2>&1 | FileCheck %s --check-prefix=NAME

// NOAMX: kiln-bf16-products: bf16 kernels amx need a CPU with AMX (amx-tile and amx-bf16: Sapphire Rapids and later), and the code is compiled for 'znver4', which lacks it; use auto or dot
// NAME: kiln-bf16-products: bf16 kernels 'tiles' are none: use auto (the default), dot, amx or amx-emulated

// A linear layer on a target with AMX: the tile state asked of Linux, a
// packed by rows of pairs (rows padded to blocks of 32, those past m
// zeros), the weight by panels of 32 columns; where the state was granted,
// per panel and block of 32 rows, a block wholly inside out sums four
// tiles from zero tiles (the deferred fill) over every 16 pairs of k (two
// tiles of a, two of b, four tdpbf16ps) and stores them in place, a block
// on an edge goes through a 32 x 32 buffer; where it was refused, the
// vdpbf16ps tiles on the same packed buffers.
// CHECK-LABEL: func.func @linear
// CHECK: %[[ASKED:.*]] = llvm.inline_asm has_side_effects "syscall", "={rax},{rax},{rdi},{rsi},~{rcx},~{r11},~{memory},~{dirflag},~{fpsr},~{flags}" %{{.*}}, %{{.*}}, %{{.*}} : (i64, i64, i64) -> i64
// CHECK: %[[GRANTED:.*]] = arith.cmpi eq, %[[ASKED]], %{{.*}} : i64
// CHECK: %[[AP:.*]] = memref.alloc(%{{.*}}, %{{.*}}) {alignment = 64 : i64} : memref<?x?xi32>
// CHECK: %[[BP:.*]] = memref.alloc(%{{.*}}, %{{.*}}) {alignment = 64 : i64} : memref<?x?x32xi32>
// CHECK: } {kiln.parallel}
// CHECK: } {kiln.parallel}
// CHECK: scf.if %[[GRANTED]] {
// CHECK: scf.for %[[PANEL:.*]] = {{.*}} {
// CHECK: scf.for %[[BLOCK:.*]] = {{.*}} {
// CHECK: %[[INSIDE:.*]] = arith.andi
// CHECK: scf.if %[[INSIDE]] {
// CHECK-COUNT-4: amx.tile_zero : !amx.tile<16x16xf32>
// CHECK: scf.for {{.*}} iter_args(
// CHECK-COUNT-2: amx.tile_load %[[AP]][%{{.*}}, %{{.*}}] : memref<?x?xi32> into !amx.tile<16x32xbf16>
// CHECK-COUNT-2: amx.tile_load %[[BP]][%[[PANEL]], %{{.*}}, %{{.*}}] : memref<?x?x32xi32> into !amx.tile<16x32xbf16>
// CHECK-COUNT-4: amx.tile_mulf {{.*}} : !amx.tile<16x32xbf16>, !amx.tile<16x32xbf16>, !amx.tile<16x16xf32>
// CHECK: scf.yield
// CHECK-COUNT-4: amx.tile_store %{{.*}} : memref<?x33xf32>, !amx.tile<16x16xf32>
// CHECK: } else {
// CHECK: %[[BUF:.*]] = memref.alloc() {alignment = 64 : i64} : memref<32x32xf32>
// CHECK-COUNT-4: amx.tile_load %[[BUF]]
// CHECK: amx.tile_mulf
// CHECK-COUNT-4: amx.tile_store %[[BUF]]
// CHECK: vector.transfer_write
// CHECK: memref.dealloc %[[BUF]]
// CHECK: } {kiln.parallel}
// CHECK: } {kiln.parallel}
// CHECK: } else {
// CHECK: x86vector.avx512.dot
// CHECK: memref.dealloc %[[AP]]
// DOT-LABEL: func.func @linear
// DOT-NOT: amx.
// DOT: x86vector.avx512.dot
// EMU-LABEL: func.func @linear
// EMU-NOT: amx.
// EMU-NOT: llvm.inline_asm
// EMU: scf.for {{.*}} iter_args({{.*}}) -> (vector<16x16xf32>, vector<16x16xf32>, vector<16x16xf32>, vector<16x16xf32>)
// EMU: scf.for %{{.*}} = %{{.*}} to %c16{{.*}} iter_args(
// EMU: vector.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x?x32xi32>, vector<16xi32>
// EMU-COUNT-16: x86vector.avx512.dot
// EMU: scf.yield
#a = affine_map<(b, t, n, k) -> (b, t, k)>
#w = affine_map<(b, t, n, k) -> (n, k)>
#o = affine_map<(b, t, n, k) -> (b, t, n)>
func.func @linear(%x: memref<?x?x48xf32>, %w: memref<33x48xf32>, %out: memref<?x?x33xf32>) {
  linalg.generic {indexing_maps = [#a, #w, #o], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x?x48xf32>, memref<33x48xf32>) outs(%out : memref<?x?x33xf32>)
      attrs = {kiln.fill = 0.0 : f32} {
  ^bb0(%in: f32, %in_0: f32, %acc: f32):
    %0 = arith.mulf %in, %in_0 : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  }
  return
}

// -----

// Without a fill, a block inside out loads its sums from out.
// CHECK-LABEL: func.func @weight_gradient
// CHECK: scf.if
// CHECK-COUNT-4: amx.tile_load %{{.*}} : memref<?x?xf32> into !amx.tile<16x16xf32>
// CHECK: scf.for
// CHECK-COUNT-4: amx.tile_mulf
#g = affine_map<(m, n, k) -> (k, m)>
#x = affine_map<(m, n, k) -> (k, n)>
#d = affine_map<(m, n, k) -> (m, n)>
func.func @weight_gradient(%g: memref<?x?xf32>, %x: memref<?x?xf32>, %out: memref<?x?xf32>) {
  linalg.generic {indexing_maps = [#g, #x, #d], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%g, %x : memref<?x?xf32>, memref<?x?xf32>) outs(%out : memref<?x?xf32>) {
  ^bb0(%in: f32, %in_0: f32, %acc: f32):
    %0 = arith.mulf %in, %in_0 : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  }
  return
}
