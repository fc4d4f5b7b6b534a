// The same numbers from objects compiled for x86-64-v3 (AVX2) and x86-64-v4
// (AVX-512): the mean cross-entropy gradient over one full 16-wide tile of
// positions divides by 16 (it divided by 1 when the count was a vectorized
// reduction of the constant 1). Each object runs where the host has its
// instructions; both are compiled and disassembled everywhere.
// RUN: rm -rf %t && mkdir -p %t
// RUN: kiln-compile %S/Inputs/loss-grad.mlir -o %t/v3.o --header %t/lossgrad.h --name lossgrad --cpu x86-64-v3
// RUN: kiln-compile %S/Inputs/loss-grad.mlir -o %t/v4.o --header %t/lossgrad.h --name lossgrad --cpu x86-64-v4
// RUN: llvm-objdump -d %t/v3.o | FileCheck %s --check-prefix=V3 --implicit-check-not=zmm
// RUN: llvm-objdump -d %t/v4.o | FileCheck %s --check-prefix=V4
// RUN: %clang -c -I%t %S/Inputs/use_loss_grad.c -o %t/use.o
// RUN: %clangxx %kiln_sanitize -fuse-ld=lld %t/use.o %t/v3.o %kiln_obj/runtime/libKilnRuntime.a -lfmt -L/usr/lib/llvm-22/lib -Wl,-rpath,/usr/lib/llvm-22/lib -lomp -lm -o %t/use-v3
// RUN: %clangxx %kiln_sanitize -fuse-ld=lld %t/use.o %t/v4.o %kiln_obj/runtime/libKilnRuntime.a -lfmt -L/usr/lib/llvm-22/lib -Wl,-rpath,/usr/lib/llvm-22/lib -lomp -lm -o %t/use-v4
// RUN: %if x86-64-v3 %{ %t/use-v3 | FileCheck %s %}
// RUN: %if x86-64-v4 %{ %t/use-v4 | FileCheck %s %}

// V3: ymm
// V4: zmm
// CHECK: targets -0.05: 16, others 0.0125: 64, wrong: 0
