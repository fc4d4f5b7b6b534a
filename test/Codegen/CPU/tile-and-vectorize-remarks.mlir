// kiln-tile-and-vectorize{remarks}: a remark at each tile that stays a scalar
// loop nest, saying why; none without the option.
// RUN: kiln-opt %s -split-input-file -verify-diagnostics -pass-pipeline="builtin.module(kiln-set-target{cpu=x86-64-v4},func.func(kiln-tile-and-vectorize{remarks=true}))" -o /dev/null
// RUN: kiln-opt %s -split-input-file -pass-pipeline="builtin.module(kiln-set-target{cpu=x86-64-v4},func.func(kiln-tile-and-vectorize))" -o /dev/null 2>&1 | FileCheck %s --check-prefix=QUIET --allow-empty
// QUIET-NOT: remark: stays

// An i1 buffer: one 16-wide tile, kept scalar.
func.func @mask(%a: memref<16xi1>, %out: memref<16xi1>) {
  // expected-remark @below {{stays a scalar loop nest: it reads or writes i1 buffers}}
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%a : memref<16xi1>) outs(%out : memref<16xi1>) {
  ^bb0(%in: i1, %o: i1):
    %n = arith.xori %in, %o : i1
    linalg.yield %n : i1
  }
  return
}

// -----

// A count (acc + 1 per element): vectorized, it would add 1 per tile.
func.func @count(%x: memref<16xf32>, %out: memref<f32>) {
  %one = arith.constant 1.0 : f32
  // expected-remark @below {{stays a scalar loop nest: its reduction combines a value not read from an input element}}
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>], iterator_types = ["reduction"]}
      ins(%x : memref<16xf32>) outs(%out : memref<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %one : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Dynamic length: the full 16-wide tiles are vectors, the partial tile
// after them is not (one remark, at the op the partial tile came from).
func.func @dynamic(%x: memref<?xf32>, %out: memref<?xf32>) {
  // expected-remark @below {{stays a scalar loop nest: its tile has a dynamic size}}
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%x : memref<?xf32>) outs(%out : memref<?xf32>) {
  ^bb0(%in: f32, %o: f32):
    %s = arith.addf %in, %in : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Static and a multiple of the vector: vectorized, no remark.
func.func @vectorized(%x: memref<32xf32>, %out: memref<32xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%x : memref<32xf32>) outs(%out : memref<32xf32>) {
  ^bb0(%in: f32, %o: f32):
    %s = arith.addf %in, %in : f32
    linalg.yield %s : f32
  }
  return
}
