// kiln-gpu-cost-model through kiln-to-gpu{cost-sizes}: the launches of a
// function at given argument sizes, counted and priced for an H200, no GPU
// needed.
// RUN: kiln-opt %s --kiln-to-gpu="cost-sizes=0=100x64" -o /dev/null | FileCheck %s
// RUN: kiln-opt %s --kiln-to-gpu="cost-sizes=a=100x64 math=tf32" -o /dev/null | FileCheck %s --check-prefix=TF32
// RUN: kiln-opt %s --kiln-to-gpu="cost-sizes=0=100x64 cost-device=a100" -o /dev/null | FileCheck %s --check-prefix=A100
// RUN: not kiln-opt %s --kiln-to-gpu="cost-sizes=1=100x64" -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATIC
// RUN: not kiln-opt %s --kiln-to-gpu="cost-sizes=0=100" -o /dev/null 2>&1 | FileCheck %s --check-prefix=RANK
// RUN: not kiln-opt %s --kiln-to-gpu="cost-sizes=0=ax64" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SYNTAX
// RUN: not kiln-opt %s --kiln-to-gpu="cost-sizes=b=64x32" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not kiln-opt %s --kiln-to-gpu="cost-sizes=0=100x64 cost-device=v100" -o /dev/null 2>&1 | FileCheck %s --check-prefix=DEVICE
// RUN: not kiln-opt %s --kiln-to-gpu="cost-sizes=0=100x64,c=4" -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNUSED
// RUN: kiln-opt %s --kiln-to-gpu="cost-sizes=a=100x64 resident=true" -o /dev/null | FileCheck %s --check-prefix=RESIDENT

// A [100, 64] x [64, 32] product is one block of 16 x 16 threads (one
// 128 x 128 tile, k = 64 too short to split). Each thread: 8 steps of 8 x
// 8 x 8 FMAs (1024 flops a step) and 64 additions into the output: 8256
// flops, 2,113,536 for the block (the padded tile's). Bytes: the 8 operand
// elements it copies (cp.async) before the loop and in each of the 8 steps (the last
// step's guarded copies counted too), 9 x 8 x 4 = 288, and 64 stores of the
// output (its zero fill is the product's starting value: no loads): 544,
// 139,264 for the block. One block of the 264 an H200 holds: 0.34 x 67
// TFLOP/s / 264 = 86.3 GFLOP/s, 24.49 us; memory, 139,264 B at 0.6 x 4.8
// TB/s / 132 multiprocessors: 6.4 us; a thread's 136 accesses x 30 ns: 4.1
// us; plus 2 us of latency: 26.49 us. The function adds three copies over
// the host link (a in, b in, the result out: 25,600, 8,192 and 12,800 B, 10
// us each plus 8 GB/s): 62.3 us.
// CHECK: COST function=mm kernel=kiln_kernel_0_kernel launches=1 us=26.49 flops=2113536 bytes=139264 grid=1x1x1 block=16x16x1 filled=0.004 tensor=0
// CHECK: COST function=mm total device=h200 launches=1 copies=3 gflop=0.002 gbytes=0.000 kernel_ms=0.026 ms=0.062

// With math=tf32, the same counts on the tensor cores (0.1 x 495 TFLOP/s /
// 264 per block): 11.27 + 2 us.
// TF32: COST function=mm kernel=kiln_kernel_0_kernel launches=1 us=13.27 flops=2113536 bytes=139264 grid=1x1x1 block=16x16x1 filled=0.004 tensor=1

// An A100 has 108 multiprocessors and 19.5 TFLOP/s fp32; 0.34 x 19.5 / 216 =
// 30.7 GFLOP/s a block, 68.86 + 2 us.
// A100: COST function=mm kernel=kiln_kernel_0_kernel launches=1 us=70.86
// A100: COST function=mm total device=a100

// With the parameter b resident on the device (kiln-host-interface{resident},
// as the JIT compiles), it is not copied: two copies, 51.3 us.
// RESIDENT: COST function=mm total device=h200 launches=1 copies=2 gflop=0.002 gbytes=0.000 kernel_ms=0.026 ms=0.051

// STATIC: error: kiln-gpu-cost-model: '1' has size 64 in dimension 0, not 100
// RANK: error: kiln-gpu-cost-model: sizes of '0' have 1 dimensions, the argument 2
// SYNTAX: error: kiln-gpu-cost-model: sizes '0=ax64' are not name=AxB,... with sizes from 0 to 2^40
// MISSING: error: kiln-gpu-cost-model: the size of this copy is unknown at the given argument sizes (give every dynamic size in 'sizes')
// DEVICE: error: kiln-gpu-cost-model: no device 'v100': use h200, h100 or a100
// UNUSED: error: kiln-gpu-cost-model: sizes name 'c', which is no buffer argument of a function (kiln.name or number)
func.func @mm(%a: tensor<?x64xf32> {kiln.kind = "input", kiln.name = "a"}, %b: tensor<64x32xf32> {kiln.kind = "param", kiln.name = "b"}) -> tensor<?x32xf32> {
  %0 = kiln.matmul %a, %b : (tensor<?x64xf32>, tensor<64x32xf32>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}
