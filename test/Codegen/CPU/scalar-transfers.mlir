// kiln-convert-vector-to-llvm lowers transfers of 0-d vectors to scalar
// loads and stores first: fold-memref-alias-ops leaves them on views whose
// innermost stride is not 1 (a head of width 1 in a [B, K, D] tensor), which
// convert-vector-to-llvm does not lower. The second RUN line compiles the
// attention that had stopped with "'vector.transfer_write' op was not lowered
// to llvm" (heads of width 1, one causal query over 33 keys, static).
// RUN: kiln-opt %s -kiln-set-target=cpu=x86-64-v3 -kiln-convert-vector-to-llvm --split-input-file | FileCheck %s
// RUN: kiln-opt %s --kiln-to-llvm=cpu=x86-64-v3 --split-input-file | FileCheck %s --check-prefix=LLVM

// CHECK-LABEL: func.func @strided_scalars(
// CHECK-NOT:     vector.transfer
// CHECK:         %[[X:.*]] = memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<1x1xf32, strided<[2, 2], offset: ?>>
// CHECK:         memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<1x1xf32, strided<[2, 2], offset: ?>>
// CHECK-NOT:     vector.transfer
// LLVM-LABEL: llvm.func @strided_scalars(
// LLVM-NOT:     vector.transfer
func.func @strided_scalars(%m: memref<1x1xf32, strided<[2, 2], offset: ?>>) {
  %c0 = arith.constant 0 : index
  %pad = arith.constant 0.0 : f32
  %v = vector.transfer_read %m[%c0, %c0], %pad : memref<1x1xf32, strided<[2, 2], offset: ?>>, vector<f32>
  %w = arith.addf %v, %v : vector<f32>
  vector.transfer_write %w, %m[%c0, %c0] : vector<f32>, memref<1x1xf32, strided<[2, 2], offset: ?>>
  return
}

// -----

// LLVM-LABEL: llvm.func @f(
func.func @f(%a0: tensor<2x1x2xf32>, %a1: tensor<2x33x2xf32>, %a2: tensor<2x33x2xf32>, %a3: tensor<2x33xi1>) -> (tensor<2x1x2xf32>) {
  %y = kiln.attention %a0, %a1, %a2 mask %a3 {num_heads = 2 : i64, causal} : (tensor<2x1x2xf32>, tensor<2x33x2xf32>, tensor<2x33x2xf32>, tensor<2x33xi1>) -> tensor<2x1x2xf32>
  return %y : tensor<2x1x2xf32>
}
