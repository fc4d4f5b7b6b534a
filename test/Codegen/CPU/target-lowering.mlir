// The passes that read the module's kiln.target: without one (and without
// the options that stand in for it) they fail and say how to set it; kiln-convert-vector-to-llvm lowers a transpose tile of
// 16 f32 rows with AVX-512's 16x16 shuffle sequence (vectors of 16) for
// x86-64-v4 and with one 1-D shuffle (a vector of 256) for x86-64-v3;
// kiln-llvm-target-attributes writes the CPU and its features on
// every LLVM function with a body.
// RUN: not kiln-opt %s -kiln-convert-vector-to-llvm 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not kiln-opt %s -kiln-llvm-target-attributes 2>&1 | FileCheck %s --check-prefix=NONE-ATTRS
// RUN: not kiln-opt %s -pass-pipeline="builtin.module(func.func(kiln-tile-and-vectorize))" 2>&1 | FileCheck %s --check-prefix=NONE-TILES
// RUN: not kiln-opt %s -pass-pipeline="builtin.module(func.func(kiln-tile-and-peel))" 2>&1 | FileCheck %s --check-prefix=NONE-PEEL
// RUN: not kiln-opt %s -kiln-prepare-weights 2>&1 | FileCheck %s --check-prefix=NONE-PREPARE
// RUN: not kiln-opt %s -kiln-vector-matrix-products=vector-width=8 2>&1 | FileCheck %s --check-prefix=NONE-STREAM
// RUN: kiln-opt %s -kiln-set-target=cpu=x86-64-v4 -kiln-convert-vector-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts -kiln-llvm-target-attributes | FileCheck %s --check-prefix=V4
// RUN: kiln-opt %s -kiln-set-target=cpu=x86-64-v3 -kiln-convert-vector-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | FileCheck %s --check-prefix=V3

// NONE: error: kiln-convert-vector-to-llvm needs the target CPU: the module's 'kiln.target' attribute, set by kiln-set-target{cpu=...}
// NONE-ATTRS: error: kiln-llvm-target-attributes needs the target CPU: the module's 'kiln.target' attribute, set by kiln-set-target{cpu=...}
// NONE-TILES: error: kiln-select-cpu-tiles needs the target CPU: the module's 'kiln.target' attribute, set by kiln-set-target{cpu=...}
// NONE-PEEL: error: kiln-tile-and-peel needs the target CPU: the module's 'kiln.target' attribute, set by kiln-set-target{cpu=...}
// NONE-PREPARE: error: kiln-prepare-weights needs the target CPU: the module's 'kiln.target' attribute, set by kiln-set-target{cpu=...}
// NONE-STREAM: error: kiln-vector-matrix-products needs the target CPU: the module's 'kiln.target' attribute, set by kiln-set-target{cpu=...}

// V4-LABEL: llvm.func @transpose16
// V4-SAME: target_cpu = "x86-64-v4"
// V4-SAME: target_features = #llvm.target_features<[{{.*}}"+avx512f"
// V4: llvm.shufflevector {{.*}} : vector<16xf32>
// V4-NOT: vector<256xf32>
// V4-LABEL: llvm.func @external
// V4-NOT: target_cpu
// V3-LABEL: llvm.func @transpose16
// V3: llvm.shufflevector {{.*}} : vector<256xf32>
// V3-NOT: target_cpu
func.func @transpose16(%v: vector<16x16xf32>) -> vector<16x16xf32> {
  %t = vector.transpose %v, [1, 0] : vector<16x16xf32> to vector<16x16xf32>
  return %t : vector<16x16xf32>
}
llvm.func @external(i64)
