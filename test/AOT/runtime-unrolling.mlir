// LLVM unrolls at run time only the loops whose own blocks multiply and add
// vectors (a contraction's k loops); every other loop Kiln emits carries
// llvm.loop.unroll.runtime.disable (the JIT and ahead-of-time objects share
// the step). znver3's scheduling model asks for runtime unrolling, which
// LLVM would otherwise also apply to this product's block copies.
// RUN: rm -rf %t && mkdir -p %t
// RUN: kiln-compile %s -o %t/m.o --header %t/m.h --name m --cpu znver3 --dump-dir %t
// RUN: FileCheck %s < %t/m.ll

func.func @product(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = kiln.matmul %a, %b : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// The k loops: unrolled, with remainder loops.
// CHECK-LABEL: define internal fastcc void @kiln_kernel_0(
// CHECK: unr-lcssa:
// CHECK: .epil.preheader
// A block copy (vector loads and stores, no arithmetic): one loop.
// CHECK-LABEL: define internal void @kiln_kernel_0..omp_par.2(
// CHECK-NOT: unr-lcssa
// CHECK-NOT: .epil
// CHECK: store <8 x float>
// CHECK-NOT: unr-lcssa
// CHECK-NOT: .epil
// CHECK: ret void
// CHECK: !{!"llvm.loop.unroll.runtime.disable", i32 0}
