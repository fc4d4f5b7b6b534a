//===- Passes.td - Passes of Kiln's named pipelines --------*- tablegen -*-===//
//
// Passes that Kiln's pipelines need beyond the upstream ones.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_PIPELINES_PASSES_TD
#define KILN_COMPILER_PIPELINES_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnCheckLoweredPass : Pass<"kiln-check-lowered", "::mlir::ModuleOp"> {
  let summary = "Fail when anything is left above the pipeline's target level";
  let description = [{
    The last pass of every Kiln pipeline. With `stage=linalg` it rejects any
    remaining `kiln` op; with `stage=llvm` it rejects any op outside the
    `llvm` dialect (besides the module and OpenMP regions, which are translated
    to LLVM IR with it). Each leftover op gets an error
    naming it, so a missing lowering is a diagnostic, never a crash later.

    ```mlir
    // kiln-opt --kiln-check-lowered=stage=linalg on:
    %0 = kiln.relu %x : (tensor<4xf32>) -> tensor<4xf32>
    // error: 'kiln.relu' op was not lowered to linalg
    ```
  }];
  let options = [
    Option<"stage", "stage", "std::string", /*default=*/"\"llvm\"",
           "The level everything must have reached: linalg or llvm">
  ];
}

def KilnApproximateMathPass : Pass<"kiln-approximate-math"> {
  let summary = "Replace transcendental math ops with vectorizable polynomials";
  let description = [{
    Rewrites `math.exp`, `math.log`, `math.tanh`, `math.erf`, `math.sin`,
    `math.cos` and friends on f32 into polynomial approximations made of
    arithmetic (MLIR's approximations, accurate to a few ulp), so that they
    vectorize instead of calling libm one element at a time.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def KilnTileAndVectorizePass
    : Pass<"kiln-tile-and-vectorize", "::mlir::func::FuncOp"> {
  let summary = "Tile linalg ops on buffers into register tiles and vectorize them";
  let description = [{
    CPU code generation for the linalg ops that kiln-to-linalg produces, with
    sizes derived from the target CPU (`target-cpu`: `host` or an LLVM CPU
    name; see compiler/Codegen/CPU/TargetInfo.h):

    - contractions (matrix products, attention scores) are tiled into
      `m x n x 1` register tiles (`n` = two vector registers of f32, `m` the
      rows of accumulators that fit the register file, at most 8: 6 x 16 on
      AVX2, 8 x 32 on AVX-512) and vectorized into `vector.contract`, which
      later becomes one broadcast-FMA outer product per reduction step.
      Around the register tiles, a contraction larger than the caches is
      blocked (`nc` columns, `kc` reduction steps; loops n-block, k-block,
      then the tiles) so that a register tile's rows of A stay in L1 and a
      `kc x nc` block of B stays in L2 while every row tile reads it
      (TargetInfo::blockK/blockN: 512 x 256 with a 48 KiB L1 and 1 MiB L2 on
      AVX-512);
    - every other op is tiled along its innermost loop by one vector
      register (8 f32 on AVX2, 16 on AVX-512) and vectorized.

    Partial tiles stay scalar loop nests, and so do tiles the vectorizer
    would get wrong: reductions whose combined value is not read from an
    input element, and ops on i1 buffers. An unknown CPU is an error.
  }];
  let options = [
    Option<"targetCpu", "target-cpu", "std::string", /*default=*/"\"host\"",
           "The CPU the tiles are sized for: host, or an LLVM CPU name">,
    Option<"tileM", "tile-m", "int64_t", /*default=*/"0",
           "Rows of a contraction register tile (0: from the target)">,
    Option<"tileN", "tile-n", "int64_t", /*default=*/"0",
           "Columns of a contraction register tile (0: from the target)">,
    Option<"vectorWidth", "vector-width", "int64_t", /*default=*/"0",
           "Elements per vector for elementwise ops and reductions (0: from "
           "the target)">,
    Option<"blockK", "block-k", "int64_t", /*default=*/"0",
           "Reduction steps of a contraction's cache block (0: from the "
           "target)">,
    Option<"blockN", "block-n", "int64_t", /*default=*/"0",
           "Columns of a contraction's cache block (0: from the target)">
  ];
  let dependentDialects = [
    "::mlir::scf::SCFDialect", "::mlir::vector::VectorDialect",
    "::mlir::tensor::TensorDialect", "::mlir::arith::ArithDialect"
  ];
}

def KilnHoistVectorTransfersPass
    : Pass<"kiln-hoist-vector-transfers", "::mlir::func::FuncOp"> {
  let summary = "Keep loop-invariant vector tiles in registers across loops";
  let description = [{
    After bufferization, moves each `vector.transfer_read`/`transfer_write`
    pair of a loop-invariant buffer tile (the accumulator of a contraction
    tile) out of the loop, carrying the vector through the loop instead, so
    that the reduction loop of a register tile neither loads nor stores its
    accumulators.
  }];
  let dependentDialects = ["::mlir::vector::VectorDialect"];
}

def KilnParallelizeLoopsPass
    : Pass<"kiln-parallelize-loops", "::mlir::func::FuncOp"> {
  let summary = "Run the chosen tile loop of each op on all cores";
  let description = [{
    Rewrites the tile loop that kiln-tile-and-vectorize chose for threading
    (the row-tile loop of a contraction, the outermost non-trivial parallel
    loop otherwise) into `scf.parallel`, which convert-scf-to-openmp then
    turns into an OpenMP work-sharing loop. Loops that carry values (the
    reduction loops of register tiles) and loops nested in a parallel loop
    stay serial.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect"];
}

def KilnInlineAllocaScopesPass : Pass<"kiln-inline-alloca-scopes"> {
  let summary = "Inline memref.alloca_scope regions that allocate nothing";
  let description = [{
    convert-scf-to-openmp wraps every parallel loop body in a
    `memref.alloca_scope`; when the body allocates nothing on the stack (Kiln
    unrolls vector transfers fully, so it never does), the scope is
    inlined, so that lowering the loops inside to basic blocks stays valid.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def KilnFuseElementwisePass : Pass<"kiln-fuse-elementwise"> {
  let summary = "Fuse elementwise producers into elementwise consumers";
  let description = [{
    linalg's elementwise fusion, restricted to consumers whose loops are all
    parallel, and to producers all of whose users are such consumers: an
    activation fuses with the bias add or the residual add that follows it,
    but is never fused into a contraction or a reduction, where it would be
    recomputed once per reduction step, nor into one consumer while it is
    kept for another (along a residual stream, every layer would recompute
    all the ones before it).
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def KilnOutlineKernelsPass : Pass<"kiln-outline-kernels", "::mlir::ModuleOp"> {
  let summary = "Move each linalg op on buffers into a private kernel function, "
                "one per distinct op";
  let description = [{
    After bufferization, replaces every linalg op (with the constants its
    body uses) by a call to a private, never-inlined function that holds
    only that op, and gives identical ops (same op, attributes, body and
    operand types) the same function. The layers of a model repeat, so the
    number of kernels, and with it the time spent vectorizing and optimizing
    them, stops growing with the depth; and no function handed to LLVM is
    larger than one op's loop nest.

    ```mlir
    // Two identical linalg.generic ops on memref<4x8xf32> become
    func.call @kiln_kernel_0(%a, %b) : (memref<4x8xf32>, memref<4x8xf32>) -> ()
    func.call @kiln_kernel_0(%b, %c) : (memref<4x8xf32>, memref<4x8xf32>) -> ()
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def KilnApplyNoAliasPass : Pass<"kiln-apply-noalias", "::mlir::ModuleOp"> {
  let summary = "Mark the kernel buffers that never overlap as noalias";
  let description = [{
    Runs after func-to-llvm: puts `llvm.noalias` on the aligned pointers that
    kiln-outline-kernels found never to overlap a written buffer at any call
    (recorded in the kernel's `kiln.noalias_args`), so that LLVM may keep
    loaded values in registers across stores.
  }];
}

def KilnDeviceBuffersPass : Pass<"kiln-device-buffers", "::mlir::ModuleOp"> {
  let summary = "Allocate the buffers of GPU code in device memory";
  let description = [{
    For kiln-to-gpu, after the linalg ops have become GPU kernels: the host
    code's `memref.alloc`/`dealloc`/`copy` become `gpu.alloc`/`dealloc`/
    `memcpy`, so parameters, activations and temporaries live in device
    memory. Host memory the kernels would read (a stack buffer, a global), and
    a load or store left in host code, are errors naming the op.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def KilnHostInterfacePass : Pass<"kiln-host-interface", "::mlir::ModuleOp"> {
  let summary = "Public functions of GPU code take and return host memory";
  let description = [{
    For kiln-to-gpu, after kiln-device-buffers: each public function copies
    its buffer arguments into device memory on entry, and its results back
    into new host buffers before it returns, freeing the device buffers it
    owned. A compiled GPU function is then called exactly like a CPU one,
    by the JIT or from an ahead-of-time object.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::memref::MemRefDialect"];
}

def KilnStridedCopiesToLinalgPass
    : Pass<"kiln-strided-copies-to-linalg", "::mlir::ModuleOp"> {
  let summary = "Turn copies between views into linalg.copy";
  let description = [{
    For kiln-to-gpu: a `memref.copy` whose source or target is a view (not an
    identity layout) becomes `linalg.copy`, which becomes a kernel like any
    linalg op; whole-buffer copies stay, for `gpu.memcpy`.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def KilnSerialNestsToParallelPass
    : Pass<"kiln-serial-nests-to-parallel", "::mlir::func::FuncOp"> {
  let summary = "Put loop nests without parallel loops in a one-iteration scf.parallel";
  let description = [{
    For kiln-to-gpu, after convert-linalg-to-parallel-loops: a run of ops
    between allocations, calls and parallel loops that touches memory (a
    rank-0 fill, a reduction over every element, the mean that follows) is
    wrapped in a one-iteration `scf.parallel`, so that it becomes a kernel
    (of one thread) instead of host code touching device memory. A load whose
    value only parallel loops use (a learning rate) moves into each of them.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::arith::ArithDialect"];
}

def KilnGpuKernelsPass : Pass<"kiln-gpu-kernels", "::mlir::func::FuncOp"> {
  let summary = "Turn contractions and long reductions into tuned GPU kernels";
  let description = [{
    For kiln-to-gpu, on linalg ops on buffers, before the others become
    parallel loops: a contraction (any loop order, any number of batch, m, n
    and k dimensions; f32) becomes a `gpu.launch` that computes 64 x 64
    outputs per block of 16 x 16 threads, 4 x 4 per thread in registers,
    staging 64 x 16 tiles of both operands through shared memory. A reduction
    over at least 64 elements (or a dynamic number) whose outputs each
    accumulate with one commutative combiner (add, mul, max, min) becomes a
    `gpu.launch` with one block per output: the threads stride over the
    reduced elements and combine their partial results with
    `gpu.all_reduce`. Other ops are left as they are.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::affine::AffineDialect",
                           "::mlir::memref::MemRefDialect"];
}

#endif // KILN_COMPILER_PIPELINES_PASSES_TD
