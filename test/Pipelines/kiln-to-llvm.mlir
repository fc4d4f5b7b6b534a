// The named pipelines: kiln-to-linalg leaves no kiln op (and fuses
// elementwise producers), kiln-to-llvm leaves nothing but the LLVM dialect.
// RUN: kiln-opt %s --kiln-to-linalg | FileCheck %s --check-prefix=LINALG
// RUN: kiln-opt %s --kiln-to-llvm | FileCheck %s --check-prefix=LLVM
// The pipeline sizes its tiles for the CPU it is given: AVX2 rows of 8 f32
// (contraction tiles of 6 x 16, two registers a row), AVX-512 rows of 16
// (tiles of 8 x 32).
// RUN: kiln-opt %s --kiln-to-llvm="cpu=x86-64-v3" | FileCheck %s --check-prefix=AVX2 --implicit-check-not="vector<32xf32>"
// RUN: kiln-opt %s --kiln-to-llvm="cpu=x86-64-v4" | FileCheck %s --check-prefix=AVX512
// AVX2: llvm.fmul {{.*}} : vector<8xf32>
// AVX512: vector<32xf32>
// AVX512: llvm.fmul {{.*}} : vector<16xf32>

// LINALG-LABEL: func.func @block
// LINALG-NOT: kiln.
// The relu and the add fuse into one elementwise loop.
// LINALG: %[[R:.+]] = arith.maximumf %{{[a-z_0-9]+}}, %cst
// LINALG-NEXT: arith.addf %[[R]]
// LINALG: return

// LLVM-LABEL: llvm.func @block
// LLVM-NOT: linalg.
// LLVM-NOT: memref.
// LLVM-NOT: scf.
// LLVM: llvm.return
func.func @block(%x: tensor<?x?x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>, %w: tensor<8x8xf32>) -> tensor<?x?x8xf32> {
  %0 = kiln.layernorm %x, %g, %b : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %1 = kiln.mha %0, %0 weights(%w, %w, %w, %w) {num_heads = 2 : i64, causal}
      : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>,
         tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %2 = kiln.relu %1 : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %3 = kiln.add %2, %x : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return %3 : tensor<?x?x8xf32>
}
