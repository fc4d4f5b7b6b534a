// The bf16 precision (kiln-bf16-products) in kiln-compile and kiln-to-llvm:
// code for a CPU with AVX512-BF16 multiplies with vdpbf16ps, and for one
// with AMX on AMX's tiles (or vdpbf16ps when asked), on any host; a CPU
// without it, a GPU, or a name that is no precision or no kernels is an
// error that says why, before anything is written.
// RUN: rm -rf %t && mkdir -p %t
// RUN: kiln-compile %S/Inputs/linear-bf16.mlir -o %t/lin.o --header %t/lin.h --name lin --cpu znver4 --precision bf16
// RUN: llvm-objdump -d %t/lin.o | FileCheck %s --check-prefix=ASM
// RUN: kiln-opt %S/Inputs/linear-bf16.mlir --kiln-to-llvm="cpu=sapphirerapids precision=bf16 bf16-kernels=dot" | FileCheck %s --check-prefix=LLVM
// RUN: kiln-opt %S/Inputs/linear-bf16.mlir --kiln-to-llvm="cpu=sapphirerapids precision=bf16" | FileCheck %s --check-prefix=LLVMAMX
// RUN: kiln-compile %S/Inputs/linear-bf16.mlir -o %t/spr.o --header %t/spr.h --name lin --cpu sapphirerapids --precision bf16
// RUN: llvm-objdump -d %t/spr.o | FileCheck %s --check-prefix=AMX
// RUN: kiln-compile %S/Inputs/linear-bf16.mlir -o %t/spr-dot.o --header %t/spr-dot.h --name lin --cpu sapphirerapids --precision bf16 --bf16-kernels dot
// RUN: llvm-objdump -d %t/spr-dot.o | FileCheck %s --check-prefix=ASM --implicit-check-not=tdpbf16ps
// RUN: not kiln-compile %S/Inputs/linear-bf16.mlir -o %t/bad.o --header %t/bad.h --name lin --cpu znver4 --precision bf16 --bf16-kernels amx 2>&1 | FileCheck %s --check-prefix=NOAMX
// RUN: not kiln-compile %S/Inputs/linear-bf16.mlir -o %t/bad.o --header %t/bad.h --name lin --cpu znver4 --bf16-kernels dot 2>&1 | FileCheck %s --check-prefix=FP32KERNELS
// RUN: not kiln-opt %S/Inputs/linear-bf16.mlir --kiln-to-llvm="cpu=znver4 precision=bf16 bf16-kernels=tiles" 2>&1 | FileCheck %s --check-prefix=OPTKERNELS
// RUN: kiln-opt %S/Inputs/linear-bf16.mlir --kiln-to-llvm="cpu=znver4" | FileCheck %s --check-prefix=FP32
// RUN: not kiln-compile %S/Inputs/linear-bf16.mlir -o %t/bad.o --header %t/bad.h --name lin --cpu x86-64-v3 --precision bf16 2>&1 | FileCheck %s --check-prefix=V3
// RUN: not kiln-compile %S/Inputs/linear-bf16.mlir -o %t/bad.o --header %t/bad.h --name lin --gpu sm_90 --precision bf16 2>&1 | FileCheck %s --check-prefix=GPU
// RUN: not kiln-compile %S/Inputs/linear-bf16.mlir -o %t/bad.o --header %t/bad.h --name lin --precision fp16 2>&1 | FileCheck %s --check-prefix=NAME
// RUN: not kiln-opt %S/Inputs/linear-bf16.mlir --kiln-to-llvm="precision=fp16" 2>&1 | FileCheck %s --check-prefix=OPTNAME
// RUN: not kiln-opt %S/Inputs/linear-bf16.mlir --kiln-to-llvm="cpu=znver3 precision=bf16" 2>&1 | FileCheck %s --check-prefix=OPTZEN3
// RUN: not ls %t/bad.o %t/bad.h

// ASM: vcvtneps2bf16
// ASM: vdpbf16ps
// LLVM: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
// LLVMAMX: llvm.inline_asm has_side_effects "syscall"
// LLVMAMX: llvm.call_intrinsic "llvm.x86.tdpbf16ps.internal"
// AMX: syscall
// AMX: ldtilecfg
// AMX: tileloadd
// AMX: tdpbf16ps
// AMX: tilestored
// NOAMX: kiln: bf16 kernels amx need a CPU with AMX (amx-tile and amx-bf16: Sapphire Rapids and later), and the code is compiled for 'znver4', which lacks it; use auto or dot
// FP32KERNELS: kiln: bf16 kernels 'dot' with precision 'fp32': they choose how the bf16 precision multiplies
// OPTKERNELS: kiln-to-llvm: bf16 kernels 'tiles' are none
// FP32-NOT: dpbf16ps
// V3: kiln: precision bf16 needs a CPU with AVX512-BF16 (vdpbf16ps: Zen 4 and later, Sapphire Rapids and later), and the code is compiled for 'x86-64-v3', which lacks it; use precision fp32
// GPU: precision 'bf16' with a GPU: it applies to CPU code only
// NAME: precision 'fp16' is not a CPU precision: use fp32 (the default) or bf16
// OPTNAME: kiln-to-llvm: precision 'fp16' is not a CPU precision
// OPTZEN3: kiln-bf16-products: precision bf16 needs a CPU with AVX512-BF16{{.*}}'znver3'
