// RUN: kiln-opt --kiln-outline-kernels --split-input-file %s | FileCheck %s
// RUN: kiln-opt --kiln-outline-kernels=group-fills --split-input-file %s | FileCheck %s --check-prefix=GROUP
// RUN: kiln-opt --kiln-outline-kernels="group-fills group-rows" --split-input-file %s | FileCheck %s --check-prefix=ROWS
// RUN: kiln-opt --kiln-outline-kernels --convert-linalg-to-loops --convert-scf-to-cf --finalize-memref-to-llvm --convert-arith-to-llvm --convert-cf-to-llvm --convert-func-to-llvm --kiln-apply-noalias --reconcile-unrealized-casts --split-input-file %s | FileCheck %s --check-prefix=LLVM

// Identical ops share one kernel; a different one gets its own. Buffers that
// never overlap a written buffer are noalias; two views of one buffer are not.
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @layers(%a: memref<4x8xf32>) -> memref<4x8xf32> {
  %b = memref.alloc() : memref<4x8xf32>
  %c = memref.alloc() : memref<4x8xf32>
  %one = arith.constant 1.0 : f32
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x8xf32>) outs(%b : memref<4x8xf32>) {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %one : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%b : memref<4x8xf32>) outs(%c : memref<4x8xf32>) {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %one : f32
    linalg.yield %s : f32
  }
  // Reads one half of %c and writes the other: two views of one buffer.
  %top = memref.subview %c[0, 0] [2, 8] [1, 1] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1]>>
  %bottom = memref.subview %c[2, 0] [2, 8] [1, 1] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1], offset: 16>>
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%top : memref<2x8xf32, strided<[8, 1]>>) outs(%bottom : memref<2x8xf32, strided<[8, 1], offset: 16>>) {
  ^bb0(%x: f32, %y: f32):
    %s = arith.mulf %x, %x : f32
    linalg.yield %s : f32
  }
  memref.dealloc %b : memref<4x8xf32>
  return %c : memref<4x8xf32>
}

// CHECK-LABEL: func.func @layers(
// CHECK:         call @kiln_kernel_0(%{{.*}}, %[[B:.*]]) : (memref<4x8xf32>, memref<4x8xf32>) -> ()
// CHECK:         call @kiln_kernel_0(%[[B]], %[[C:.*]]) : (memref<4x8xf32>, memref<4x8xf32>) -> ()
// CHECK:         call @kiln_kernel_1(
// CHECK-NOT:     linalg.generic
// CHECK:       func.func private @kiln_kernel_0(%{{.*}}: memref<4x8xf32> {kiln.noalias}, %{{.*}}: memref<4x8xf32> {kiln.noalias})
// CHECK-SAME:      kiln.noalias_args = array<i64: 1, 8>
// CHECK-SAME:      passthrough = ["noinline"]
// CHECK:         arith.constant 1.000000e+00 : f32
// CHECK:         linalg.generic
// CHECK:       func.func private @kiln_kernel_1(%{{.*}}: memref<2x8xf32, strided<[8, 1]>>, %{{.*}}: memref<2x8xf32, strided<[8, 1], offset: 16>>)
// CHECK-SAME:      attributes {passthrough = ["noinline"]}
// CHECK:         arith.mulf

// LLVM: llvm.func @kiln_kernel_0(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr {llvm.noalias},
// LLVM-NOT: kiln.noalias_args

// -----

// A buffer that is written and whose origin is unknown (a function
// argument) keeps every argument of that call aliasable.
#map = affine_map<(d0) -> (d0)>
func.func @unknown(%a: memref<8xf32>, %b: memref<8xf32>) {
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%a : memref<8xf32>) outs(%b : memref<8xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  }
  return
}

// CHECK-LABEL: func.func @unknown(
// CHECK:         call @kiln_kernel_0(
// CHECK:       func.func private @kiln_kernel_0(%{{.*}}: memref<8xf32>, %{{.*}}: memref<8xf32>)
// CHECK-NOT:     noalias

// -----

// A parallel loop (flash attention's loop over blocks) becomes one kernel
// that calls a serial kernel per op inside it (kiln-parallelize-loops keeps
// their loops serial). What those ops write through views (a block of a
// fresh buffer) is known, so the arguments are noalias.
#map = affine_map<(d0) -> (d0)>
func.func @blocks(%a: memref<64xf32>, %n: index) -> memref<64xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %out = memref.alloc() : memref<64xf32>
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %offset = arith.muli %i, %c16 : index
    %src = memref.subview %a[%offset] [16] [1] : memref<64xf32> to memref<16xf32, strided<[1], offset: ?>>
    %dst = memref.subview %out[%offset] [16] [1] : memref<64xf32> to memref<16xf32, strided<[1], offset: ?>>
    %tmp = memref.alloc() : memref<16xf32>
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
        ins(%src : memref<16xf32, strided<[1], offset: ?>>) outs(%tmp : memref<16xf32>) {
    ^bb0(%x: f32, %y: f32):
      %s = arith.mulf %x, %x : f32
      linalg.yield %s : f32
    }
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
        ins(%tmp : memref<16xf32>) outs(%dst : memref<16xf32, strided<[1], offset: ?>>) {
    ^bb0(%x: f32, %y: f32):
      linalg.yield %x : f32
    }
    memref.dealloc %tmp : memref<16xf32>
    scf.reduce
  }
  return %out : memref<64xf32>
}

// CHECK-LABEL: func.func @blocks(
// CHECK:         %[[OUT:.*]] = memref.alloc()
// CHECK-NEXT:    call @[[LOOP:kiln_kernel_[0-9]+]](%{{.*}}, %{{.*}}, %[[OUT]]) : (index, memref<64xf32>, memref<64xf32>) -> ()
// CHECK-NOT:     scf.parallel
// CHECK:       func.func private @[[SQUARE:kiln_kernel_[0-9]+]](%{{.*}}: memref<16xf32, strided<[1], offset: ?>> {kiln.noalias}, %{{.*}}: memref<16xf32> {kiln.noalias})
// CHECK-SAME:      kiln.serial
// CHECK:         arith.mulf
// CHECK:       func.func private @[[COPY:kiln_kernel_[0-9]+]](%{{.*}}: memref<16xf32> {kiln.noalias}, %{{.*}}: memref<16xf32, strided<[1], offset: ?>> {kiln.noalias})
// CHECK-SAME:      kiln.serial
// CHECK:       func.func private @[[LOOP]](%{{.*}}: index, %{{.*}}: memref<64xf32> {kiln.noalias}, %{{.*}}: memref<64xf32> {kiln.noalias})
// CHECK-NOT:       kiln.serial
// CHECK:         scf.parallel
// CHECK:           memref.alloc() : memref<16xf32>
// CHECK:           func.call @[[SQUARE]](
// CHECK:           func.call @[[COPY]](
// CHECK:           memref.dealloc
// CHECK-NOT:     linalg.generic

// -----

// With group-fills (the GPU pipeline), a fill goes into the kernel of the
// op that takes its buffer as an init, before it, when nothing between
// them uses the buffer; without it, each is a kernel of its own. The second
// fill is read by a copy first, so it stays apart even with group-fills.
#in = affine_map<(i, j) -> (i, j)>
#out = affine_map<(i, j) -> (i)>
func.func @fills(%x: memref<4x8xf32>, %other: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %sums = memref.alloc() : memref<4xf32>
  linalg.fill ins(%zero : f32) outs(%sums : memref<4xf32>)
  %unrelated = memref.alloc() : memref<4xf32>
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x8xf32>) outs(%sums : memref<4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %v, %acc : f32
    linalg.yield %s : f32
  }
  %seen = memref.alloc() : memref<4xf32>
  linalg.fill ins(%zero : f32) outs(%seen : memref<4xf32>)
  memref.copy %seen, %other : memref<4xf32> to memref<4xf32>
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x8xf32>) outs(%seen : memref<4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %v, %acc : f32
    linalg.yield %s : f32
  }
  memref.dealloc %unrelated : memref<4xf32>
  return %sums, %seen : memref<4xf32>, memref<4xf32>
}

// CHECK-LABEL: func.func @fills(
// CHECK-COUNT-4: call @kiln_kernel_
// CHECK-NOT:     call @kiln_kernel_

// GROUP-LABEL: func.func @fills(
// GROUP:         %[[SUMS:.*]] = memref.alloc()
// GROUP-NEXT:    %[[UNRELATED:.*]] = memref.alloc()
// GROUP-NEXT:    call @[[FILLED:kiln_kernel_[0-9]+]](%[[SUMS]], %{{.*}})
// GROUP:         %[[SEEN:.*]] = memref.alloc()
// GROUP-NEXT:    call @[[FILL:kiln_kernel_[0-9]+]](%[[SEEN]])
// GROUP-NEXT:    memref.copy %[[SEEN]]
// GROUP-NEXT:    call @[[SUM:kiln_kernel_[0-9]+]](%{{.*}}, %[[SEEN]])
// GROUP-NOT:     call @kiln_kernel_
// GROUP:       func.func private @[[FILLED]](
// GROUP:         linalg.fill
// GROUP-NEXT:    linalg.generic
// GROUP-NEXT:    ^bb0
// GROUP:         return
// GROUP:       func.func private @[[FILL]](
// GROUP-NEXT:    arith.constant
// GROUP-NEXT:    linalg.fill
// GROUP-NEXT:    return
// GROUP:       func.func private @[[SUM]](
// GROUP-NOT:     linalg.fill
// GROUP:         linalg.generic

// -----

// group-rows: softmax over rows (two fills, a max, a sum, the division) is
// one kernel, called where its last op was: the allocation and the copy
// between its ops touch none of the buffers of the ops before them.
#x = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
func.func @softmax(%x: memref<4x8xf32>, %a: memref<4xf32>, %b: memref<4xf32>) -> memref<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %low = arith.constant 0xFF800000 : f32
  %max = memref.alloc() : memref<4xf32>
  %sum = memref.alloc() : memref<4xf32>
  linalg.fill ins(%low : f32) outs(%max : memref<4xf32>)
  linalg.generic {indexing_maps = [#x, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x8xf32>) outs(%max : memref<4xf32>) {
  ^bb0(%v: f32, %m: f32):
    %r = arith.maximumf %v, %m : f32
    linalg.yield %r : f32
  }
  memref.copy %a, %b : memref<4xf32> to memref<4xf32>
  linalg.fill ins(%zero : f32) outs(%sum : memref<4xf32>)
  linalg.generic {indexing_maps = [#x, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x, %max : memref<4x8xf32>, memref<4xf32>) outs(%sum : memref<4xf32>) {
  ^bb0(%v: f32, %m: f32, %s: f32):
    %d = arith.subf %v, %m : f32
    %e = math.exp %d : f32
    %r = arith.addf %e, %s : f32
    linalg.yield %r : f32
  }
  %y = memref.alloc() : memref<4x8xf32>
  linalg.generic {indexing_maps = [#x, #row, #row, #x], iterator_types = ["parallel", "parallel"]}
      ins(%x, %max, %sum : memref<4x8xf32>, memref<4xf32>, memref<4xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%v: f32, %m: f32, %s: f32, %o: f32):
    %d = arith.subf %v, %m : f32
    %e = math.exp %d : f32
    %r = arith.divf %e, %s : f32
    linalg.yield %r : f32
  }
  return %y : memref<4x8xf32>
}

// CHECK-LABEL: func.func @softmax(
// ROWS-LABEL: func.func @softmax(
// ROWS:         memref.copy
// ROWS-NEXT:    %[[Y:.*]] = memref.alloc()
// ROWS-NEXT:    call @[[K:kiln_kernel_[0-9]+]]({{.*}}%[[Y]]
// ROWS-NOT:     call @kiln_kernel_
// ROWS:       func.func private @[[K]](
// ROWS-SAME:    {kiln.noalias}
// ROWS:         linalg.fill
// ROWS:         linalg.generic
// ROWS:         linalg.fill
// ROWS:         linalg.generic
// ROWS:         linalg.generic
// ROWS:         return

// -----

// A copy that writes what a reduction before it reads stops the group: the
// reduction cannot move past it. The division after it reads the max and
// the sum row by row and joins the sum.
#x = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
func.func @stopped(%x: memref<4x8xf32>, %in: memref<4x8xf32>) -> memref<4x8xf32> {
  %max = memref.alloc() : memref<4xf32>
  linalg.generic {indexing_maps = [#x, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x8xf32>) outs(%max : memref<4xf32>) {
  ^bb0(%v: f32, %m: f32):
    %r = arith.maximumf %v, %m : f32
    linalg.yield %r : f32
  }
  memref.copy %in, %x : memref<4x8xf32> to memref<4x8xf32>
  %sum = memref.alloc() : memref<4xf32>
  linalg.generic {indexing_maps = [#x, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x8xf32>) outs(%sum : memref<4xf32>) {
  ^bb0(%v: f32, %s: f32):
    %r = arith.addf %v, %s : f32
    linalg.yield %r : f32
  }
  %y = memref.alloc() : memref<4x8xf32>
  linalg.generic {indexing_maps = [#x, #row, #row, #x], iterator_types = ["parallel", "parallel"]}
      ins(%x, %max, %sum : memref<4x8xf32>, memref<4xf32>, memref<4xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%v: f32, %m: f32, %s: f32, %o: f32):
    %d = arith.subf %v, %m : f32
    %r = arith.divf %d, %s : f32
    linalg.yield %r : f32
  }
  return %y : memref<4x8xf32>
}

// CHECK-LABEL: func.func @stopped(
// ROWS-LABEL: func.func @stopped(
// ROWS:         call @[[MAX:kiln_kernel_[0-9]+]](
// ROWS-NEXT:    memref.copy
// ROWS:         call @[[REST:kiln_kernel_[0-9]+]](
// ROWS-NOT:     call @kiln_kernel_
// ROWS:       func.func private @[[MAX]](
// ROWS-COUNT-1: linalg.generic
// ROWS-NOT:     linalg.generic
// ROWS:       func.func private @[[REST]](
// ROWS-COUNT-2: linalg.generic
// ROWS-NOT:     linalg.generic

// -----

// What a block per row could not run stays apart:
//  - a product: its operands are indexed by loops other than its rows'
//    (the sum over its rows after it is a kernel of its own);
//  - a sum over the rows into a buffer indexed by the column (every block
//    would add to every element);
//  - a row-wise op that reads a buffer the group writes transposed;
//  - a reduction into a buffer the caller passed (it may overlap the input).
#a = affine_map<(i, j, k) -> (i, k)>
#b = affine_map<(i, j, k) -> (k, j)>
#c = affine_map<(i, j, k) -> (i, j)>
#x = affine_map<(i, j) -> (i, j)>
#t = affine_map<(i, j) -> (j, i)>
#row = affine_map<(i, j) -> (i)>
#col = affine_map<(i, j) -> (j)>
func.func @apart(%p: memref<8x8xf32>, %q: memref<8x8xf32>, %out: memref<8xf32>) -> (memref<8x8xf32>, memref<8xf32>, memref<8x8xf32>) {
  %c = memref.alloc() : memref<8x8xf32>
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%p, %q : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>) {
  ^bb0(%u: f32, %v: f32, %acc: f32):
    %m = arith.mulf %u, %v : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  %cols = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [#x, #col], iterator_types = ["parallel", "reduction"]}
      ins(%c : memref<8x8xf32>) outs(%cols : memref<8xf32>) {
  ^bb0(%v: f32, %s: f32):
    %r = arith.addf %v, %s : f32
    linalg.yield %r : f32
  }
  %t = memref.alloc() : memref<8x8xf32>
  linalg.generic {indexing_maps = [#x, #row, #x], iterator_types = ["parallel", "parallel"]}
      ins(%p, %cols : memref<8x8xf32>, memref<8xf32>) outs(%t : memref<8x8xf32>) {
  ^bb0(%v: f32, %s: f32, %o: f32):
    %r = arith.mulf %v, %s : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#t, #row], iterator_types = ["parallel", "reduction"]}
      ins(%t : memref<8x8xf32>) outs(%out : memref<8xf32>) {
  ^bb0(%v: f32, %s: f32):
    %r = arith.addf %v, %s : f32
    linalg.yield %r : f32
  }
  return %c, %cols, %t : memref<8x8xf32>, memref<8xf32>, memref<8x8xf32>
}

// CHECK-LABEL: func.func @apart(
// ROWS-LABEL: func.func @apart(
// ROWS-COUNT-4: call @kiln_kernel_
// ROWS-NOT:     call @kiln_kernel_

// -----

// A mean: the sum of every element (no rows) and the division of the scalar
// after it are one kernel (one block); an op over a whole tensor after such a
// sum is not taken in (one block would do all of its work).
#all = affine_map<(i, j) -> (i, j)>
#none = affine_map<(i, j) -> ()>
#scalar = affine_map<() -> ()>
func.func @mean(%x: memref<4x8xf32>, %n: f32) -> (memref<f32>, memref<4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %sum = memref.alloc() : memref<f32>
  linalg.fill ins(%zero : f32) outs(%sum : memref<f32>)
  linalg.generic {indexing_maps = [#all, #none], iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<4x8xf32>) outs(%sum : memref<f32>) {
  ^bb0(%v: f32, %s: f32):
    %r = arith.addf %v, %s : f32
    linalg.yield %r : f32
  }
  %mean = memref.alloc() : memref<f32>
  linalg.generic {indexing_maps = [#scalar, #scalar], iterator_types = []}
      ins(%sum : memref<f32>) outs(%mean : memref<f32>) {
  ^bb0(%s: f32, %o: f32):
    %r = arith.divf %s, %n : f32
    linalg.yield %r : f32
  }
  %scaled = memref.alloc() : memref<4x8xf32>
  linalg.generic {indexing_maps = [#all, #none, #all], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mean : memref<4x8xf32>, memref<f32>) outs(%scaled : memref<4x8xf32>) {
  ^bb0(%v: f32, %m: f32, %o: f32):
    %r = arith.subf %v, %m : f32
    linalg.yield %r : f32
  }
  return %mean, %scaled : memref<f32>, memref<4x8xf32>
}

// CHECK-LABEL: func.func @mean(
// ROWS-LABEL: func.func @mean(
// ROWS:         call @[[MEAN:kiln_kernel_[0-9]+]](
// ROWS-NEXT:    %[[SCALED:.*]] = memref.alloc()
// ROWS-NEXT:    call @[[SUB:kiln_kernel_[0-9]+]](
// ROWS-NOT:     call @kiln_kernel_
// ROWS:       func.func private @[[MEAN]](
// ROWS:         linalg.fill
// ROWS-NEXT:    linalg.generic
// ROWS:         linalg.generic
// ROWS-SAME:      iterator_types = []
// ROWS:       func.func private @[[SUB]](
// ROWS-NOT:     linalg.fill
// ROWS:         linalg.generic
// ROWS-NOT:     linalg.generic
