// A cache-blocked product (512 x 512 x 512, blocks of B of 256 columns on
// AVX-512) forks its threads once: kiln-merge-parallel-regions puts the
// block loop, the copy of each block of B and the rows in one omp.parallel,
// and adds no barrier (the rows' work-sharing loop waits).
// RUN: kiln-opt %s --kiln-to-llvm="cpu=x86-64-v4" --mlir-print-ir-after=kiln-merge-parallel-regions -o /dev/null 2>&1 | FileCheck %s --check-prefix=V4
// V4-LABEL: func.func private @kiln_kernel_0
// V4:         omp.parallel {
// V4-NEXT:      scf.for
// V4:             omp.wsloop {
// V4:             omp.wsloop {
// V4-NOT:     omp.barrier
// V4-NOT:     omp.parallel
// V4:         return
// AVX2's 6-row tiles leave 512 mod 6 = 2 rows to a serial loop after the
// rows' region in each block, which the master alone runs: the copy and the
// rows still share one region, the block loop stays outside.
// RUN: kiln-opt %s --kiln-to-llvm="cpu=x86-64-v3" --mlir-print-ir-after=kiln-merge-parallel-regions -o /dev/null 2>&1 | FileCheck %s --check-prefix=V3
// V3-LABEL: func.func private @kiln_kernel_0
// V3:         scf.for
// V3:           omp.parallel {
// V3:             omp.wsloop {
// V3:             omp.wsloop {
// V3:             omp.terminator
// V3-NEXT:      }
// V3-NEXT:      scf.for
// V3-NOT:     omp.parallel
// V3:         return
func.func @gemm(%x: tensor<512x512xf32>, %w: tensor<512x512xf32>) -> tensor<512x512xf32> {
  %0 = kiln.linear %x, %w : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  return %0 : tensor<512x512xf32>
}
