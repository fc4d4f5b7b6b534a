// Objects with the bf16 precision's AMX kernels, called from C: the object
// compiled for Sapphire Rapids asks Linux for the tile state itself and
// multiplies on the tiles on a CPU with AMX, and on one without (where
// Linux refuses: a Zen 4) falls back to vdpbf16ps; on any CPU with
// AVX512-BF16, the AMX kernels also run emulated (kiln-compile
// --bf16-kernels amx-emulated). Each against sums in double within the
// bf16 bound.
// RUN: rm -rf %t && mkdir -p %t
// RUN: kiln-compile %S/Inputs/linear-bf16.mlir -o %t/amx.o --header %t/lin.h --name lin --cpu sapphirerapids --precision bf16
// RUN: llvm-objdump -d %t/amx.o | FileCheck %s --check-prefix=AMX
// RUN: %clang -std=c99 -Wall -Wextra -Werror -c -I%t %S/Inputs/use_linear_bf16.c -o %t/use.o
// RUN: %clangxx %kiln_sanitize -fuse-ld=lld %t/use.o %t/amx.o %kiln_obj/runtime/libKilnRuntime.a -lfmt -L/usr/lib/llvm-22/lib -Wl,-rpath,/usr/lib/llvm-22/lib -lomp -lm -o %t/use-amx
// RUN: %if avx512bf16 %{ %t/use-amx | FileCheck %s %}
// RUN: %if avx512bf16 %{ kiln-compile %S/Inputs/linear-bf16.mlir -o %t/emu.o --header %t/lin.h --name lin --cpu host --precision bf16 --bf16-kernels amx-emulated %}
// RUN: %if avx512bf16 %{ %clangxx %kiln_sanitize -fuse-ld=lld %t/use.o %t/emu.o %kiln_obj/runtime/libKilnRuntime.a -lfmt -L/usr/lib/llvm-22/lib -Wl,-rpath,/usr/lib/llvm-22/lib -lomp -lm -o %t/use-emu %}
// RUN: %if avx512bf16 %{ %t/use-emu | FileCheck %s %}

// AMX: syscall
// AMX: tdpbf16ps
// CHECK: 74 x 96: 0 outside the bf16 bound, rounded to bf16
