// kiln-vectorize-tiles vectorizes the tiles kiln-tile-and-peel marked
// kiln.tile (written by hand here), and leaves every other op alone; a tile
// that stays scalar gets a remark saying why (with remarks=true).
// RUN: kiln-opt %s -split-input-file -kiln-vectorize-tiles=remarks=true -verify-diagnostics | FileCheck %s

// A 6 x 16 register tile: A broadcast along the columns, B along the rows,
// products reduced into the accumulator tile.
// CHECK-LABEL: func.func @register_tile
// CHECK: vector.transfer_read %arg0{{.*}} vector<6x16x1xf32>
// CHECK: vector.transfer_read %arg1{{.*}} vector<6x16x1xf32>
// CHECK: %[[ACC:.*]] = vector.transfer_read %arg2{{.*}} vector<6x16xf32>
// CHECK: arith.mulf {{.*}} : vector<6x16xf32>
// CHECK: %[[SUM:.*]] = vector.multi_reduction <add>, %{{.*}}, %[[ACC]] [2]
// CHECK: vector.transfer_write %[[SUM]], %arg2
// CHECK-NOT: linalg.matmul
func.func @register_tile(%a: memref<6x1xf32, strided<[8, 1], offset: ?>>, %b: memref<1x16xf32, strided<[16, 1], offset: ?>>, %c: memref<6x16xf32, strided<[32, 1], offset: ?>>) {
  linalg.matmul {kiln.tile = array<i64: 6, 16, 1>} ins(%a, %b : memref<6x1xf32, strided<[8, 1], offset: ?>>, memref<1x16xf32, strided<[16, 1], offset: ?>>) outs(%c : memref<6x16xf32, strided<[32, 1], offset: ?>>)
  return
}

// -----

// A transpose tile: rows read contiguously, transposed in registers.
// CHECK-LABEL: func.func @transpose_tile
// CHECK: %[[ROWS:.*]] = vector.transfer_read %arg0{{.*}} {in_bounds = [true, true]} : {{.*}}, vector<8x8xf32>
// CHECK: %[[T:.*]] = vector.transpose %[[ROWS]], [1, 0]
// CHECK: vector.transfer_write %[[T]], %arg1
func.func @transpose_tile(%a: memref<8x8xf32, strided<[64, 1], offset: ?>>, %b: memref<8x8xf32, strided<[64, 1], offset: ?>>) {
  linalg.transpose {kiln.tile = array<i64: 8, 8>} ins(%a : memref<8x8xf32, strided<[64, 1], offset: ?>>) outs(%b : memref<8x8xf32, strided<[64, 1], offset: ?>>) permutation = [1, 0]
  return
}

// -----

// An op that is no tile stays as it is.
// CHECK-LABEL: func.func @untagged
// CHECK-NEXT: linalg.copy ins(%arg0 : memref<8x8xf32>) outs(%arg1 : memref<8x8xf32>)
func.func @untagged(%a: memref<8x8xf32>, %b: memref<8x8xf32>) {
  linalg.copy ins(%a : memref<8x8xf32>) outs(%b : memref<8x8xf32>)
  return
}

// -----

// CHECK-LABEL: func.func @dynamic_tile
// CHECK-NEXT: linalg.copy ins(%arg0 : memref<?xf32>) outs(%arg1 : memref<?xf32>)
func.func @dynamic_tile(%a: memref<?xf32>, %b: memref<?xf32>) {
  // expected-remark @+1 {{stays a scalar loop nest: its tile has a dynamic size (a loop left whole, or a partial tile short of a vector)}}
  linalg.copy {kiln.tile = array<i64: 8>} ins(%a : memref<?xf32>) outs(%b : memref<?xf32>)
  return
}

// -----

// CHECK-LABEL: func.func @mask_tile
// CHECK-NEXT: linalg.copy ins(%arg0 : memref<8xi1>) outs(%arg1 : memref<8xi1>)
func.func @mask_tile(%a: memref<8xi1>, %b: memref<8xi1>) {
  // expected-remark @+1 {{stays a scalar loop nest: it reads or writes i1 buffers, which vectors would read as packed bits}}
  linalg.copy {kiln.tile = array<i64: 8>} ins(%a : memref<8xi1>) outs(%b : memref<8xi1>)
  return
}
