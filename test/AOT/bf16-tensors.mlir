// Functions on bf16 tensors compile for every CPU: the conversions are
// vcvtneps2bf16 where the CPU has AVX512-BF16, integer arithmetic (round to
// nearest even) where it does not, never a call per element
// (__truncsfbf2); the header's spec says which arguments and results are
// bf16.
// RUN: rm -rf %t && mkdir -p %t
// RUN: kiln-compile %s -o %t/z4.o --header %t/z4.h --name gelu16 --cpu znver4
// RUN: llvm-objdump -d %t/z4.o | FileCheck %s --check-prefix=ZEN4
// RUN: llvm-nm %t/z4.o | FileCheck %s --check-prefix=NOCALL
// RUN: kiln-compile %s -o %t/v3.o --header %t/v3.h --name gelu16 --cpu x86-64-v3
// RUN: llvm-objdump -d %t/v3.o | FileCheck %s --check-prefix=V3
// RUN: llvm-nm %t/v3.o | FileCheck %s --check-prefix=NOCALL

// ZEN4: vcvtneps2bf16
// V3-NOT: vcvtneps2bf16
// V3: vpsrld
// NOCALL-NOT: truncsfbf2

func.func @gelu16(%x: tensor<?x64xbf16>, %w: tensor<32x64xf32>) -> tensor<?x32xbf16> {
  %wb = kiln.cast %w : (tensor<32x64xf32>) -> tensor<32x64xbf16>
  %h = kiln.linear %x, %wb : (tensor<?x64xbf16>, tensor<32x64xbf16>) -> tensor<?x32xbf16>
  %g = kiln.gelu %h : (tensor<?x32xbf16>) -> tensor<?x32xbf16>
  return %g : tensor<?x32xbf16>
}

// RUN: FileCheck %s --check-prefix=HEADER < %t/z4.h
// HEADER: KILN_BF16 = 4
// HEADER: [0] arg0: bf16 [?, 64]
// HEADER-NEXT: *   [1] arg1: f32 [32, 64]
// HEADER: [0] result0: bf16 [?, 32]

// A C program passes bf16 elements in and reads bf16 results back (2 * x,
// exact), and an f32 tensor in their place is refused.
// RUN: kiln-compile %S/Inputs/twice-bf16.mlir -o %t/twice.o --header %t/twice.h --name twice --cpu x86-64-v3
// RUN: %clang -std=c99 -Wall -Wextra -Werror -pedantic -c -I%t %S/Inputs/use_bf16.c -o %t/use.o
// RUN: %clangxx %kiln_sanitize -fuse-ld=lld %t/use.o %t/twice.o %kiln_obj/runtime/libKilnRuntime.a -lfmt -L/usr/lib/llvm-22/lib -Wl,-rpath,/usr/lib/llvm-22/lib -lomp -lm -o %t/use
// RUN: %t/use | FileCheck %s --check-prefix=OUT
// OUT: dtype bf16: 4000 c0a0 3f80 40c0 0000 c000
// OUT: refused: {{.*}}must have dtype bf16, got f32

// The GPU compile takes bf16 tensors too (PTX through ptxas).
// RUN: kiln-compile %s -o %t/gpu.o --header %t/gpu.h --name gelu16 --gpu sm_90 | FileCheck %s --check-prefix=GPU
// GPU: kiln-compile: gelu16 (1 functions, cpu host, gpu sm_90)
