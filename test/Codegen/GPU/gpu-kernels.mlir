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
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}} = %[[GY]], {{.*}} = %c1) threads({{.*}}) in ({{.*}} = %c16, {{.*}} = %c16, {{.*}} = %c1) workgroup(%[[A:.*]] : memref<8x132xf32, #gpu.address_space<workgroup>>, %[[B:.*]] : memref<8x132xf32, #gpu.address_space<workgroup>>)
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
