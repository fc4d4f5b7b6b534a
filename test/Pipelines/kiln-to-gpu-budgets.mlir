// Resource budgets of the GPU kernels, held by ptxas -v for sm_90 and sm_80:
// at most 128 registers per thread (the tiled contractions' 8 x 8 outputs
// per thread and the next tiles' elements take 79-128; two blocks of 256
// threads fit a multiprocessor's 65536 registers), at most 48 KiB of static
// shared memory per block (what a block may declare statically: the
// contractions' two padded 8 x 132 fp32 tiles take 8448 bytes, the attention
// kernels' tiles 10372 at heads of 32, 41-48 KiB at heads of 128:
// test/Codegen/GPU/flash-attention.mlir), no stack frame and no spills. Run
// on a GPT block's forward pass and on the AdamW training step (clipping
// included) of an embedding, layer norm, linear and cross-entropy model.
// Layer norm's gradient sums x * gamma over D = 32, a product with no n
// dimension: as a 64 x 64 tiled contraction it took 251 registers a thread;
// it is a block reduction. The same budgets hold with the contractions on
// the tensor cores (math=tf32: the same tiles and accumulators, mma.sync
// for the FMAs).
// RUN: kiln-opt %kiln_src/examples/gpt/gpt_tiny_block.mlir --kiln-to-gpu | %python %S/Inputs/ptxas-all.py %ptxas sm_90 --budget 128,49152 | FileCheck %s --check-prefix=BLOCK
// RUN: kiln-opt %kiln_src/examples/gpt/gpt_tiny_block.mlir --kiln-to-gpu="math=tf32" | %python %S/Inputs/ptxas-all.py %ptxas sm_90 --budget 128,49152 | FileCheck %s --check-prefix=BLOCK
// RUN: kiln-opt %kiln_src/examples/gpt/gpt_tiny_block.mlir --kiln-to-gpu="math=bf16" | %python %S/Inputs/ptxas-all.py %ptxas sm_90 --budget 128,49152 | FileCheck %s --check-prefix=BLOCK
// RUN: kiln-opt %s -kiln-training-step="optimizer=adamw clip-norm=1.0" --kiln-to-gpu="gpu=sm_80 math=tf32" | %python %S/Inputs/ptxas-all.py %ptxas sm_80 --budget 128,49152 | FileCheck %s --check-prefix=STEP80
// With math=tf32x3 a thread holds both TF32 parts of its fragments; with
// the operands staged by cp.async (no values carried through registers)
// its products fit the same 128 registers (they took about 175 staged
// through registers).
// RUN: kiln-opt %kiln_src/examples/gpt/gpt_tiny_block.mlir --kiln-to-gpu="math=tf32x3" | %python %S/Inputs/ptxas-all.py %ptxas sm_90 --budget 128,49152 | FileCheck %s --check-prefix=BLOCK
// RUN: kiln-opt %s -kiln-training-step="optimizer=adamw clip-norm=1.0" --kiln-to-gpu | %python %S/Inputs/ptxas-all.py %ptxas sm_90 --budget 128,49152 | FileCheck %s --check-prefix=STEP
// RUN: kiln-opt %s -kiln-training-step="optimizer=adamw clip-norm=1.0" --kiln-to-gpu="gpu=sm_80" | %python %S/Inputs/ptxas-all.py %ptxas sm_80 --budget 128,49152 | FileCheck %s --check-prefix=STEP80
// REQUIRES: ptxas

// BLOCK: {{[0-9]+}} kernels within the budget: registers at most 128 (largest {{[0-9]+}}), shared memory at most 49152 bytes (largest {{[0-9]+}}), no stack, no spills
// STEP: {{[0-9]+}} kernels within the budget: registers at most 128
// STEP80: {{[0-9]+}} kernels within the budget: registers at most 128

func.func @loss(%ids: tensor<?x?xi64> {kiln.kind = "input", kiln.name = "ids"},
                %t: tensor<?x?xi64> {kiln.kind = "input", kiln.name = "targets"},
                %wte: tensor<65x32xf32> {kiln.kind = "param", kiln.name = "wte"},
                %g: tensor<32xf32> {kiln.kind = "param", kiln.name = "ln.weight"},
                %b: tensor<32xf32> {kiln.kind = "param", kiln.name = "ln.bias"},
                %w: tensor<65x32xf32> {kiln.kind = "param", kiln.name = "head"}) -> tensor<f32> {
  %x = kiln.embedding %ids, %wte : (tensor<?x?xi64>, tensor<65x32xf32>) -> tensor<?x?x32xf32>
  %n = kiln.layernorm %x, %g, %b : (tensor<?x?x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
  %y = kiln.linear %n, %w : (tensor<?x?x32xf32>, tensor<65x32xf32>) -> tensor<?x?x65xf32>
  %l = kiln.cross_entropy %y, %t : (tensor<?x?x65xf32>, tensor<?x?xi64>) -> tensor<f32>
  return %l : tensor<f32>
}
