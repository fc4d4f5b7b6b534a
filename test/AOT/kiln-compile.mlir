// kiln-compile: an object and a header that plain C and C++ programs use,
// linked with the runtime alone; portable CPU levels; clear errors.
// RUN: rm -rf %t && mkdir -p %t
// RUN: kiln-compile %S/Inputs/relu2.mlir -o %t/relu2.o --header %t/relu2.h --name relu2 --cpu x86-64-v2 | FileCheck %s --check-prefix=COMPILE
// RUN: FileCheck %s --check-prefix=HEADER < %t/relu2.h
// RUN: %clang -std=c99 -Wall -Wextra -Werror -pedantic -fsyntax-only -I%t %S/Inputs/use_relu2.c
// RUN: %clangxx -std=c++17 -Wall -Wextra -Werror -fsyntax-only -x c++ -I%t %S/Inputs/use_relu2.c
// RUN: %clang -c -I%t %S/Inputs/use_relu2.c -o %t/use.o
// RUN: %clangxx %kiln_sanitize -fuse-ld=lld %t/use.o %t/relu2.o %kiln_obj/runtime/libKilnRuntime.a -lfmt -L/usr/lib/llvm-22/lib -Wl,-rpath,/usr/lib/llvm-22/lib -lomp -lm -o %t/use
// RUN: %t/use | FileCheck %s --check-prefix=OUT
// x86-64-v2 has no AVX: no ymm or zmm register in the code.
// RUN: llvm-objdump -d %t/relu2.o | FileCheck %s --check-prefix=V2 --implicit-check-not=ymm --implicit-check-not=zmm
// A static library, for the host CPU.
// RUN: kiln-compile %S/Inputs/relu2.mlir -o %t/librelu2.a --header %t/relu2a.h --name relu2
// RUN: llvm-nm %t/librelu2.a | FileCheck %s --check-prefix=ARCHIVE
// Chosen entry points only.
// RUN: kiln-compile %S/Inputs/two.mlir -o %t/two.o --header %t/two.h --name two --functions second
// RUN: FileCheck %s --check-prefix=CHOSEN --implicit-check-not=two_first < %t/two.h
// The GPU target: PTX kernels in the object, loaded by a constructor and
// launched through the runtime's mgpu* functions. Without a driver the
// program stops with the reason; with the test's fake driver it gets as far
// as loading the kernels, which the fake refuses.
// RUN: kiln-compile %S/Inputs/relu2.mlir -o %t/relu2gpu.o --header %t/relu2gpu.h --name relu2 --gpu sm_90 | FileCheck %s --check-prefix=GPUCOMPILE
// RUN: llvm-nm %t/relu2gpu.o | FileCheck %s --check-prefix=GPUSYMS
// RUN: llvm-objdump -h %t/relu2gpu.o | FileCheck %s --check-prefix=INIT
// RUN: %clangxx %kiln_sanitize -fuse-ld=lld %t/use.o %t/relu2gpu.o %kiln_obj/runtime/libKilnRuntime.a -lfmt -L/usr/lib/llvm-22/lib -Wl,-rpath,/usr/lib/llvm-22/lib -lomp -lm -o %t/usegpu
// RUN: env KILN_CUDA_DRIVER=%t/no-such-libcuda.so not --crash %t/usegpu 2>&1 | FileCheck %s --check-prefix=NOGPU
// RUN: env KILN_CUDA_DRIVER=%kiln_obj/test/Unit/Cuda/libkiln-fake-cuda.so not --crash %t/usegpu 2>&1 | FileCheck %s --check-prefix=FAKEGPU
// Errors: nothing is written.
// RUN: not kiln-compile %S/Inputs/relu2.mlir -o %t/bad.o --header %t/bad.h --name relu2 --gpu sm_x 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: not kiln-compile %S/Inputs/relu2.mlir -o %t/bad.o --header %t/bad.h --name relu2 --gpu '' 2>&1 | FileCheck %s --check-prefix=NOCHIP
// RUN: not kiln-opt --kiln-to-gpu=gpu= %S/Inputs/relu2.mlir 2>&1 | FileCheck %s --check-prefix=OPTCHIP
// RUN: not kiln-compile %S/Inputs/relu2.mlir -o %t/bad.o --header %t/bad.h --name relu2 --gpu sm_75 --gpu-math tf32 2>&1 | FileCheck %s --check-prefix=TF32CHIP
// RUN: not kiln-compile %S/Inputs/relu2.mlir -o %t/bad.o --header %t/bad.h --name relu2 --gpu-math tf32 2>&1 | FileCheck %s --check-prefix=TF32CPU
// RUN: not kiln-compile %S/Inputs/relu2.mlir -o %t/bad.o --header %t/bad.h --name relu2 --gpu sm_90 --gpu-math fp16 2>&1 | FileCheck %s --check-prefix=MATH
// RUN: not kiln-opt --kiln-to-gpu="gpu=sm_70 math=tf32" %S/Inputs/relu2.mlir 2>&1 | FileCheck %s --check-prefix=OPTTF32
// RUN: not kiln-compile %S/Inputs/two.mlir -o %t/bad.o --header %t/bad.h --name two --functions second,third 2>&1 | FileCheck %s --check-prefix=NOFUNC
// RUN: not kiln-compile %S/Inputs/relu2.mlir -o %t/bad.o --header %t/bad.h --name relu2 --cpu pentium9 2>&1 | FileCheck %s --check-prefix=CPU
// RUN: not kiln-compile %S/Inputs/relu2.mlir -o %t/bad.o --header %t/bad.h --name 2fast 2>&1 | FileCheck %s --check-prefix=NAME
// RUN: not kiln-compile %t/nothere.mlir -o %t/bad.o --header %t/bad.h --name relu2 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not kiln-compile %s -o %t/bad.o --header %t/bad.h --name relu2 2>&1 | FileCheck %s --check-prefix=PARSE
// RUN: not kiln-compile %S/Inputs/named-model.mlir -o %t/bad.o --header %t/bad.h --name relu2 2>&1 | FileCheck %s --check-prefix=RESERVED
// RUN: not kiln-compile %S/Inputs/relu2.mlir -o %t/bad.o --header %t/bad.h --name kiln 2>&1 | FileCheck %s --check-prefix=KILNNAME
// RUN: not kiln-compile %S/Inputs/reserved-symbol.mlir -o %t/bad.o --header %t/bad.h --name ok 2>&1 | FileCheck %s --check-prefix=SYMBOL
// RUN: not kiln-compile %S/Inputs/rank9.mlir -o %t/bad.o --header %t/bad.h --name rank9 2>&1 | FileCheck %s --check-prefix=RANK
// RUN: not test -e %t/bad.o
// RUN: not ls %t/bad.o %t/bad.h
// Names and paths that reach the header's comments are escaped: a "*/"
// there would put code into every program that includes the header.
// RUN: mkdir -p '%t/evil*' && cp %S/Inputs/injection.mlir '%t/evil*/in.mlir'
// RUN: kiln-compile '%t/evil*/in.mlir' -o %t/inj.o --header %t/inj.h --name inj
// RUN: FileCheck %s --check-prefix=INJECT < %t/inj.h
// RUN: %clang -std=c99 -Wall -Wextra -Werror -pedantic -fsyntax-only -x c %t/inj.h
// The outputs never overwrite the input or each other, and a header that
// cannot be written leaves no object.
// RUN: cp %S/Inputs/relu2.mlir %t/in.mlir
// RUN: not kiln-compile %t/in.mlir -o %t/in.mlir --header %t/in.h --name relu2 2>&1 | FileCheck %s --check-prefix=SELF
// RUN: not kiln-compile %t/in.mlir -o %t/in.o --header %t/../%basename_t.tmp/in.mlir --name relu2 2>&1 | FileCheck %s --check-prefix=SELFH
// An IR dump over the input (<dir>/<name>.kiln.mlir): refused, nothing written.
// RUN: cp %S/Inputs/relu2.mlir %t/in.kiln.mlir
// RUN: not kiln-compile %t/in.kiln.mlir -o %t/in.o --header %t/in.h --name in --dump-dir %t 2>&1 | FileCheck %s --check-prefix=SELFDUMP
// RUN: diff %S/Inputs/relu2.mlir %t/in.kiln.mlir
// RUN: not ls %t/in.linalg.mlir
// RUN: diff %S/Inputs/relu2.mlir %t/in.mlir
// RUN: not kiln-compile %t/in.mlir -o %t/same.o --header %t/same.o --name relu2 2>&1 | FileCheck %s --check-prefix=SAME
// RUN: mkdir -p %t/adir
// RUN: not kiln-compile %t/in.mlir -o %t/nohdr.o --header %t/adir --name relu2 2>&1 | FileCheck %s --check-prefix=HDRDIR
// RUN: not ls %t/in.o %t/in.h %t/same.o %t/nohdr.o %t/nohdr.o.tmp %t/adir.tmp

this is not IR

// GPUCOMPILE: kiln-compile: relu2 (1 functions, cpu host, gpu sm_90)
// GPUSYMS: U mgpuLaunchKernel
// GPUSYMS: U mgpuModuleLoadJIT
// INIT: .init_array
// NOGPU: kiln: a GPU stream needs a GPU: no NVIDIA driver
// FAKEGPU: kiln: cuModuleLoadData (loading GPU kernels) failed: invalid image (fake)
// CHIP: kiln: 'sm_x' is not an NVIDIA GPU architecture (sm_80, sm_90, ...)
// NOCHIP: kiln-compile: --gpu needs an NVIDIA GPU architecture (sm_80, sm_90, ...); leave it out for the CPU
// OPTCHIP: error: kiln-to-gpu: gpu '' is not an NVIDIA GPU architecture (sm_80, sm_90, ...)
// TF32CHIP: kiln: math tf32 (tensor cores, mma.sync) needs an NVIDIA GPU of sm_80 or newer, and the code is compiled for 'sm_75'
// TF32CPU: kiln: GPU math 'tf32' without a GPU: it applies to GPU code only
// MATH: kiln: math 'fp16' is not a GPU math mode: use fp32 (the default), tf32, tf32x3 or bf16
// OPTTF32: error: kiln-to-gpu: math tf32 (tensor cores, mma.sync) needs an NVIDIA GPU of sm_80 or newer, and the code is compiled for 'sm_70'

// COMPILE: kiln-compile: relu2 (1 functions, cpu x86-64-v2) in {{.*}} s (MLIR {{.*}} s, LLVM {{.*}} s) -> {{.*}}relu2.o, {{.*}}relu2.h

// HEADER: #ifndef RELU2_KILN_H
// HEADER: typedef struct kiln_tensor {
// HEADER: int kiln_call(
// HEADER: extern const kiln_model relu2_model;
// HEADER: /* double_relu
// HEADER-NEXT:  * Arguments, in this order (args[i]):
// HEADER-NEXT:  *   [0] x: f32 [?, 3]
// HEADER-NEXT:  * Results (results[i]; release each with kiln_tensor_release):
// HEADER-NEXT:  *   [0] result0: f32 [?, 3]
// HEADER: #define RELU2_DOUBLE_RELU_NUM_ARGS 1
// HEADER: #define RELU2_DOUBLE_RELU_NUM_RESULTS 1
// HEADER: int relu2_double_relu(const kiln_tensor *args, size_t num_args,

// OUT: shape 2 [2, 3]: 0 0 3 4 0 8
// OUT: refused: kiln: argument #0 'x' of 'double_relu' must have shape [?, 3] (?: any size), got [3, 2]

// V2: <relu2_double_relu>:

// ARCHIVE: relu2.o:
// ARCHIVE: T relu2_double_relu
// ARCHIVE: D relu2_model

// CHOSEN: int two_second(

// NOFUNC: kiln: no function 'third' to compile (the module has: first, second)

// INJECT: /* Generated by kiln-compile from '{{.*}}/evil\x2a/in.mlir'.
// INJECT: *   [0] x\x2a/typedef/\x2a\x2a/int/\x2a\x2a/injected;/\x2a: f32 [?, 3]
// SELF: kiln-compile: -o '{{.*}}in.mlir' names the input: it would be overwritten
// SELFH: kiln-compile: --header '{{.*}}in.mlir' names the input: it would be overwritten
// SELFDUMP: kiln: the IR dump '{{.*}}/in.kiln.mlir' would overwrite the input '{{.*}}in.kiln.mlir'
// SAME: kiln: the object '{{.*}}same.o' and the header '{{.*}}same.o' are the same file
// HDRDIR: kiln: cannot write '{{.*}}adir': it is a directory

// CPU: kiln: unknown target CPU 'pentium9'
// NAME: kiln: the model name '2fast' must be a C identifier
// MISSING: kiln-compile: cannot read '{{.*}}nothere.mlir'
// RESERVED: kiln: a function cannot be called 'model' (the symbol relu2_model is the model's own)
// KILNNAME: kiln: the model name 'kiln' would give symbols of the C interface's or the compiler's own ('kiln_...', '_...'): choose another
// SYMBOL: kiln: a function cannot be called 'memrefCopy': compiled code or the C runtime calls a function of that name
// RANK: kiln: argument 'arg0' of function 'grow' has rank 9, more than the C interface's KILN_MAX_RANK (8)
// PARSE: kiln: '{{.*}}kiln-compile.mlir' does not parse:
