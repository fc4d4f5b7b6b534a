// RUN: kiln-opt %s --pass-pipeline="builtin.module(func.func(kiln-gpu-kernels,canonicalize))" --split-input-file | FileCheck %s
// RUN: kiln-opt %s --pass-pipeline="builtin.module(func.func(kiln-gpu-kernels),gpu-kernel-outlining,lower-affine,nvvm-attach-target{chip=sm_90},gpu.module(kiln-align-workgroup-memory,convert-scf-to-cf,convert-gpu-to-nvvm,reconcile-unrealized-casts),gpu-module-to-binary{format=isa})" --split-input-file | FileCheck %s --check-prefix=PTX

// A matmul becomes one launch: blocks of 16 x 16 threads, each block 128 x
// 128 outputs (the grid is ceil(N / 128) x ceil(M / 128)), the operands
// staged through two padded 8 x 132 shared-memory tiles, each thread's next
// elements of them read from global memory (carried in the k loop) while the
// block multiplies the current ones: 8 + 8 tile reads and 64 FMAs per thread
// per step. A reduction of 64 never splits: no partial sums, no second
// kernel. In the PTX, the tiles are 16-byte aligned and read 128 bits at a
// time.
// CHECK-LABEL: func.func @matmul(
// CHECK-NOT:     linalg.matmul
// CHECK:         %[[M:.*]] = memref.dim %{{.*}}, %c0
// CHECK:         %[[TM:.*]] = arith.ceildivui %[[M]], %c128
// CHECK:         %[[GY:.*]] = arith.maxui %[[TM]], %c1
// CHECK-NOT:     memref.alloc
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}} = %[[GY]], {{.*}} = %c1) threads({{.*}}) in ({{.*}} = %c16, {{.*}} = %c16, {{.*}} = %c1) workgroup(%[[A:.*]] : memref<1x8x132xf32, #gpu.address_space<workgroup>>, %[[B:.*]] : memref<1x8x132xf32, #gpu.address_space<workgroup>>)
// CHECK-COUNT-8:   scf.if {{.*}} -> (f32)
// CHECK:           scf.for %{{.*}} = %c0 to %c64 step %c8 iter_args(%{{.*}} = %cst,
// CHECK-COUNT-4:     memref.store %{{.*}}, %[[A]]
// CHECK-COUNT-4:     memref.store %{{.*}}, %[[B]]
// CHECK:             gpu.barrier
// CHECK-COUNT-8:     scf.if {{.*}} -> (f32)
// CHECK:             scf.for %{{.*}} = %c0 to %c8 step %c1
// CHECK-COUNT-16:      memref.load %{{.*}}
// CHECK-COUNT-64:      math.fma
// CHECK:             gpu.barrier
// CHECK-COUNT-64:  arith.addf
// CHECK:           gpu.terminator
// CHECK-NOT:     gpu.launch
// CHECK:         return
// PTX-LABEL: gpu.binary @matmul_kernel
// PTX-SAME: .shared .align 16 .b8 __wg_matmul_kernel_0[4224]
// PTX-SAME: bar.sync
// PTX-SAME: ld.shared.v4.{{[bf]}}32
// PTX-SAME: fma.rn.f32
func.func @matmul(%a: memref<?x64xf32>, %b: memref<64x32xf32>, %c: memref<?x32xf32>) {
  linalg.matmul ins(%a, %b : memref<?x64xf32>, memref<64x32xf32>) outs(%c : memref<?x32xf32>)
  return
}

// -----

// A weight gradient, dW[d, e] = sum over (b, t) of x[b, t, d] g[b, t, e]: two
// reduction dimensions, linearized into one k. Its one block would leave
// the GPU idle, so a long k is split (at run time: k is dynamic) into up to
// 264 / blocks parts, at most k / 128 of them, one block each (grid z); each
// part stores its sums in a [parts, 32 * 48] buffer (empty when k does not
// split), and a second kernel adds them to dW in order, one thread per
// element (a grid of no blocks, which the runtime does not launch, when k
// does not split).
// CHECK-LABEL: func.func @weight_grad(
// CHECK-NOT:     linalg.generic
// CHECK:         %[[K:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// CHECK:         arith.divui %[[K]], %c128
// CHECK:         %[[CHUNK:.*]] = arith.maxui %{{.*}}, %c8 : index
// CHECK:         %[[Q:.*]] = arith.ceildivui %[[K]], %[[CHUNK]]
// CHECK:         %[[PARTS:.*]] = arith.maxui %[[Q]], %c1 : index
// CHECK:         %[[SPLIT:.*]] = arith.cmpi ugt, %[[PARTS]], %c1 : index
// CHECK:         %[[ROWS:.*]] = arith.select %[[SPLIT]], %[[PARTS]], %c0 : index
// CHECK:         %[[SUMS:.*]] = memref.alloc(%[[ROWS]]) : memref<?x1536xf32>
// CHECK:         gpu.launch blocks(%{{.*}}, %{{.*}}, %[[PART:.*]]) in ({{.*}} = %c1, {{.*}} = %c1, {{.*}} = %[[PARTS]]) {{.*}} workgroup(
// CHECK:           math.fma
// CHECK:           scf.if %[[SPLIT]] {
// CHECK-COUNT-64:    memref.store %{{.*}}, %[[SUMS]][%[[PART]], %{{.*}}]
// CHECK:           } else {
// CHECK-COUNT-64:    arith.addf
// CHECK:           gpu.terminator
// CHECK:         %[[N:.*]] = arith.select %[[SPLIT]], %{{.*}}, %c0 : index
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %[[N]], {{.*}} = %c1, {{.*}} = %c1) threads(%{{.*}}) in ({{.*}} = %c256, {{.*}} = %c1, {{.*}} = %c1)
// CHECK:           %[[ACTIVE:.*]] = arith.andi %[[SPLIT]], %{{.*}} : i1
// CHECK:           scf.if %[[ACTIVE]] {
// CHECK:           scf.for %[[P:.*]] = %c0 to %[[PARTS]] step %c1
// CHECK:             memref.load %[[SUMS]][%[[P]], %{{.*}}]
// CHECK:           memref.load %{{.*}} : memref<32x48xf32>
// CHECK:           arith.addf
// CHECK:           memref.store %{{.*}} : memref<32x48xf32>
// CHECK:         memref.dealloc %[[SUMS]]
#x = affine_map<(d, e, b, t) -> (b, t, d)>
#g = affine_map<(d, e, b, t) -> (b, t, e)>
#w = affine_map<(d, e, b, t) -> (d, e)>
func.func @weight_grad(%x: memref<?x?x32xf32>, %g: memref<?x?x48xf32>, %w: memref<32x48xf32>) {
  linalg.generic {indexing_maps = [#x, #g, #w], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%x, %g : memref<?x?x32xf32>, memref<?x?x48xf32>) outs(%w : memref<32x48xf32>) {
  ^bb0(%xv: f32, %gv: f32, %acc: f32):
    %p = arith.mulf %xv, %gv : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A sum over rows of 128: one block of 128 threads per row; each thread adds
// its elements (the exp of the input here), then the block adds the partial
// sums and thread 0 adds the total to the output.
// CHECK-LABEL: func.func @row_sum(
// CHECK-NOT:     linalg.generic
// CHECK:         gpu.launch blocks(%[[ROW:.*]], %{{.*}}, %{{.*}}) in ({{.*}}) threads(%[[T:.*]], %{{.*}}, %{{.*}}) in (%[[BD:.*]] = %c128, {{.*}})
// CHECK:           scf.if
// CHECK:             %[[PART:.*]] = scf.for %[[I:.*]] = %[[T]] to %c128 step %[[BD]] iter_args(%[[ACC:.*]] = %cst
// CHECK:               %[[V:.*]] = memref.load %{{.*}}[%[[ROW]], %[[I]]]
// CHECK:               %[[E:.*]] = math.exp %[[V]]
// CHECK:               %[[S:.*]] = arith.addf %[[E]], %[[ACC]]
// CHECK:               scf.yield %[[S]]
// CHECK:             %[[TOTAL:.*]] = gpu.all_reduce {{ *}}add %[[PART]] uniform
// CHECK:             arith.cmpi eq, %[[T]], %c0
// CHECK:             %[[OLD:.*]] = memref.load %{{.*}}[%[[ROW]]]
// CHECK:             %[[NEW:.*]] = arith.addf %[[TOTAL]], %[[OLD]]
// CHECK:             memref.store %[[NEW]], %{{.*}}[%[[ROW]]]
// PTX-LABEL: gpu.binary @row_sum_kernel
// PTX-SAME: shfl.sync.bfly.b32
#rows = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
func.func @row_sum(%x: memref<?x128xf32>, %s: memref<?xf32>) {
  linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<?x128xf32>) outs(%s : memref<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %e = math.exp %v : f32
    %r = arith.addf %e, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A max over rows of dynamic length: 256 threads, -inf to start with.
// CHECK-LABEL: func.func @row_max(
// CHECK:         %[[NEG:.*]] = arith.constant 0xFF800000 : f32
// CHECK:         gpu.launch {{.*}} threads({{.*}}) in (%{{.*}} = %c256
// CHECK:           scf.for {{.*}} iter_args(%{{.*}} = %[[NEG]])
// CHECK:           gpu.all_reduce {{ *}}maximumf
#rows = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
func.func @row_max(%x: memref<?x?xf32>, %s: memref<?xf32>) {
  linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<?x?xf32>) outs(%s : memref<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.maximumf %v, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Left to the generic mapping: a reduction over 16 elements (too short to
// share), and one whose combiner is not a single commutative op.
// CHECK-LABEL: func.func @left_alone(
// CHECK-NOT:     gpu.launch
// CHECK:         linalg.generic
// CHECK:         linalg.generic
// CHECK-NOT:     gpu.launch
#rows = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
func.func @left_alone(%x: memref<?x16xf32>, %y: memref<?x?xf32>, %s: memref<?xf32>) {
  linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<?x16xf32>) outs(%s : memref<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.addf %v, %acc : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%y : memref<?x?xf32>) outs(%s : memref<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %gt = arith.cmpf ogt, %v, %acc : f32
    %r = arith.select %gt, %v, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A fill that kiln-outline-kernels{group-fills} put before the op it
// initializes costs no kernel: the block reduction combines its total with
// the fill's value, the product adds its sums to it, and neither reads the
// output first.
// CHECK-LABEL: func.func @filled(
// CHECK-NOT:     linalg.fill
// CHECK-NOT:     memref.load %{{.*}} : memref<4xf32>
// CHECK:         gpu.all_reduce maximumf
// CHECK-NOT:     memref.load %{{.*}} : memref<4xf32>
// CHECK:         memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<4xf32>
// CHECK:         gpu.launch
// CHECK-NOT:     memref.load %{{.*}} : memref<8x8xf32>
// CHECK:         memref.store %{{.*}} : memref<8x8xf32>
// CHECK-NOT:     memref.load %{{.*}} : memref<8x8xf32>
// CHECK-NOT:     linalg.
// CHECK:         return
#rows = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
func.func @filled(%x: memref<4x64xf32>, %m: memref<4xf32>, %a: memref<8x16xf32>, %b: memref<16x8xf32>, %c: memref<8x8xf32>) {
  %lowest = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%lowest : f32) outs(%m : memref<4xf32>)
  linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x64xf32>) outs(%m : memref<4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.maximumf %v, %acc : f32
    linalg.yield %r : f32
  }
  linalg.fill ins(%zero : f32) outs(%c : memref<8x8xf32>)
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x8xf32>) outs(%c : memref<8x8xf32>)
  return
}

// -----

// A fill of a buffer the op also reads stays: the op needs it filled.
// CHECK-LABEL: func.func @filled_and_read(
// CHECK:         linalg.fill
// CHECK:         gpu.all_reduce
#rows2 = affine_map<(i, j) -> (i, j)>
#row2 = affine_map<(i, j) -> (i)>
func.func @filled_and_read(%x: memref<4x64xf32>, %m: memref<4xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%m : memref<4xf32>)
  linalg.generic {indexing_maps = [#rows2, #row2, #row2], iterator_types = ["parallel", "reduction"]}
      ins(%x, %m : memref<4x64xf32>, memref<4xf32>) outs(%m : memref<4xf32>) {
  ^bb0(%v: f32, %r: f32, %acc: f32):
    %p = arith.mulf %v, %r : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A row group (kiln-outline-kernels{group-rows}: every buffer it writes an
// argument that overlaps no other): one launch, a block per row of the first
// two dimensions (rows of 40: 64 threads), the ops one after the other with
// a barrier between two. The max starts from its fill's value (no fill, no
// load of the max before its store); every thread holds the row's max and
// sum (gpu.all_reduce gives each the total), so the ops after them read
// neither from memory; the last op's threads stride over the row, its
// linalg.index becoming the column.
// CHECK-LABEL: func.func @row_group(
// CHECK-NOT:     linalg.
// CHECK:         %[[D0:.*]] = memref.dim %{{.*}}, %c0
// CHECK:         %[[ROWS:.*]] = arith.muli %[[D0]], %c3
// CHECK:         gpu.launch blocks(%[[B:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %{{.*}}, {{.*}}) threads(%[[T:.*]], %{{.*}}, %{{.*}}) in (%[[BD:.*]] = %c64, {{.*}})
// CHECK:           arith.cmpi ult, %[[B]], %[[ROWS]]
// CHECK:           %[[J:.*]] = arith.remui %[[B]], %c3
// CHECK:           %[[I:.*]] = arith.divui %[[B]], %c3
// CHECK-NOT:       memref.load %arg1
// CHECK:           scf.for %{{.*}} = %[[T]] to %c40 step %[[BD]] iter_args(%{{.*}} = %cst{{.*}}) -> (f32)
// CHECK:           %[[MAX:.*]] = gpu.all_reduce maximumf
// (max(total, -inf) folds to the total)
// CHECK:           scf.if
// CHECK-NEXT:        memref.store %[[MAX]], %arg1[%[[I]], %[[J]]]
// CHECK:           gpu.barrier
// CHECK-NOT:       memref.load %arg1
// CHECK:           scf.for
// CHECK:             arith.subf %{{.*}}, %[[MAX]]
// CHECK:             math.exp
// CHECK:           %[[ALL:.*]] = gpu.all_reduce add
// CHECK:           %[[SUM:.*]] = arith.addf %[[ALL]], %cst
// CHECK:           memref.store %[[SUM]], %arg2[%[[I]], %[[J]]]
// CHECK:           gpu.barrier
// CHECK-NOT:       memref.load %arg{{[12]}}
// CHECK:           scf.for %[[K:.*]] = %[[T]] to %c40 step %[[BD]] {
// CHECK:             arith.cmpi ult, %[[K]], %c20
// CHECK:             arith.subf %{{.*}}, %[[MAX]]
// CHECK:             arith.divf %{{.*}}, %[[SUM]]
// CHECK:             memref.store %{{.*}}, %arg3[%[[I]], %[[J]], %[[K]]]
// CHECK-NOT:     gpu.barrier
// CHECK-NOT:     gpu.launch
// CHECK:         return
// PTX-LABEL: gpu.binary @row_group_kernel
// PTX-SAME: shfl.sync.bfly.b32
// PTX-SAME: bar.sync
#x3 = affine_map<(i, j, k) -> (i, j, k)>
#r3 = affine_map<(i, j, k) -> (i, j)>
func.func @row_group(%x: memref<?x3x40xf32> {kiln.noalias}, %max: memref<?x3xf32> {kiln.noalias}, %sum: memref<?x3xf32> {kiln.noalias}, %y: memref<?x3x40xf32> {kiln.noalias}) attributes {kiln.noalias_args = array<i64: 1, 10, 17, 24>} {
  %low = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %c20 = arith.constant 20 : index
  linalg.fill ins(%low : f32) outs(%max : memref<?x3xf32>)
  linalg.generic {indexing_maps = [#x3, #r3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : memref<?x3x40xf32>) outs(%max : memref<?x3xf32>) {
  ^bb0(%v: f32, %m: f32):
    %r = arith.maximumf %v, %m : f32
    linalg.yield %r : f32
  }
  linalg.fill ins(%zero : f32) outs(%sum : memref<?x3xf32>)
  linalg.generic {indexing_maps = [#x3, #r3, #r3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %max : memref<?x3x40xf32>, memref<?x3xf32>) outs(%sum : memref<?x3xf32>) {
  ^bb0(%v: f32, %m: f32, %s: f32):
    %d = arith.subf %v, %m : f32
    %e = math.exp %d : f32
    %r = arith.addf %e, %s : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#x3, #r3, #r3, #x3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %max, %sum : memref<?x3x40xf32>, memref<?x3xf32>, memref<?x3xf32>) outs(%y : memref<?x3x40xf32>) {
  ^bb0(%v: f32, %m: f32, %s: f32, %o: f32):
    %k = linalg.index 2 : index
    %keep = arith.cmpi ult, %k, %c20 : index
    %d = arith.subf %v, %m : f32
    %e = math.exp %d : f32
    %q = arith.divf %e, %s : f32
    %r = arith.select %keep, %q, %zero : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// The same ops where a written buffer may overlap another (no kiln.noalias
// on it): a kernel per op, the reductions as blocks of their own.
// CHECK-LABEL: func.func @row_group_may_alias(
// CHECK:         gpu.launch
// CHECK:         gpu.launch
// CHECK-NOT:     gpu.launch
// CHECK:         linalg.generic
#x4 = affine_map<(i, j) -> (i, j)>
#r4 = affine_map<(i, j) -> (i)>
func.func @row_group_may_alias(%x: memref<?x40xf32> {kiln.noalias}, %max: memref<?xf32>, %sum: memref<?xf32> {kiln.noalias}, %y: memref<?x40xf32> {kiln.noalias}) attributes {kiln.noalias_args = array<i64: 1, 15, 20>} {
  linalg.generic {indexing_maps = [#x4, #r4], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<?x40xf32>) outs(%max : memref<?xf32>) {
  ^bb0(%v: f32, %m: f32):
    %r = arith.maximumf %v, %m : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#x4, #r4, #r4], iterator_types = ["parallel", "reduction"]}
      ins(%x, %max : memref<?x40xf32>, memref<?xf32>) outs(%sum : memref<?xf32>) {
  ^bb0(%v: f32, %m: f32, %s: f32):
    %d = arith.subf %v, %m : f32
    %r = arith.addf %d, %s : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#x4, #r4, #x4], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum : memref<?x40xf32>, memref<?xf32>) outs(%y : memref<?x40xf32>) {
  ^bb0(%v: f32, %s: f32, %o: f32):
    %r = arith.divf %v, %s : f32
    linalg.yield %r : f32
  }
  return
}
