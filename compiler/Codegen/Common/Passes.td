//===- Passes.td - Common code generation passes -----------*- tablegen -*-===//
//
// Code generation shared by the CPU and GPU pipelines, in pipeline order:
// fusion on tensors, in-place arguments, kernel outlining, math
// approximations, and the check that ends every pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_CODEGEN_COMMON_PASSES_TD
#define KILN_COMPILER_CODEGEN_COMMON_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnFuseElementwisePass : Pass<"kiln-fuse-elementwise"> {
  let summary = "Fuse elementwise producers into elementwise consumers";
  let description = [{
    linalg's elementwise fusion, restricted to consumers whose loops are all
    parallel, and to producers all of whose users are such consumers: an
    activation fuses with the bias add or the residual add that follows it,
    but is never fused into a contraction or a reduction, where it would be
    recomputed once per reduction step, nor into one consumer while it is
    kept for another (along a residual stream, every layer would recompute
    all the ones before it). For bf16 values (kiln-widen-bf16's casts): a
    widening (bf16 to f32, one load and a shift per element) also fuses into
    consumers that read each of its elements once (an operand map that is a
    permutation: a layer norm's or softmax's reductions over a bf16 row),
    never into a contraction, which reads each element many times; and a
    producer with several users never fuses into conversions, so that a
    rounded residual sum is stored once in bf16 rather than recomputed in
    each layer that widens it.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def KilnFoldEmptyReshapesPass : Pass<"kiln-fold-empty-reshapes"> {
  let summary = "Make reshapes of tensors with no elements empty tensors";
  let description = [{
    A `tensor.collapse_shape` or `tensor.expand_shape` whose source has a
    static 0 among its sizes holds no elements: it becomes a `tensor.empty`
    of the result's sizes. Canonicalization refines sizes (a `0 x ?` operand
    of a loss with a static 0) after kiln ops are lowered, and one-shot
    bufferization turns a collapse of `0 x ?` into `?` into a
    `memref.collapse_shape` to a static 0, which its verifier refuses
    (kiln-fuzz-ir found it). Runs before bufferization, in both pipelines.
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
}

def KilnMarkInPlaceArgumentsPass
    : Pass<"kiln-mark-in-place-arguments", "::mlir::ModuleOp"> {
  let summary = "Let bufferization write only the arguments results update";
  let description = [{
    A function result marked `kiln.updates = <i>` (kiln-training-step's new
    parameters and optimizer state) replaces argument `i`. This pass marks
    each such argument `bufferization.writable = true` and every other
    argument of every function `bufferization.writable = false`, so that
    one-shot bufferization may compute the update in the argument's own
    buffer and never writes a buffer the caller did not hand over for
    writing (an input, or a parameter of a forward pass). With
    `in-place=false` (the GPU pipeline, whose host code stages arguments
    through device buffers) no argument is writable and every result is a
    fresh buffer. Run before one-shot-bufferize; kiln-drop-in-place-results
    finishes the job after it.
  }];
  let options = [
    Option<"inPlace", "in-place", "bool", /*default=*/"true",
           "Make the arguments that results update writable">
  ];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect"];
}

def KilnCloneFillsPerUsePass : Pass<"kiln-clone-fills-per-use"> {
  let summary = "Give every user of a constant-filled tensor its own fill";
  let description = [{
    CSE merges the zero-filled accumulators of identical ops (every layer's
    scores, sums and maxima start from the same `linalg.fill`), and
    one-shot bufferization then allocates that tensor once, at the top of
    the function, and copies it into a fresh buffer for each op that writes
    into it: 122 `memref.copy`s in the encoder-decoder's forward pass, each
    a read and a write of a buffer that stayed allocated all along. This
    pass gives each user in the fill's block its own `tensor.empty` +
    `linalg.fill` right before it, so that the fill writes the user's buffer
    in place and lives no longer than that buffer. Run before
    bufferization, in both pipelines; kernel outlining folds the identical
    fills back into one kernel (on the GPU, into the kernel of their user).
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
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

    With `group-fills` (the GPU pipeline), a `linalg.fill` of a buffer that
    the next linalg op takes as its init (nothing between them touching
    that buffer) goes into the kernel of that op, before it, so that
    kiln-gpu-kernels can start a reduction or a product from the fill's
    value instead of launching a kernel for the fill.

    With `group-rows` (the GPU pipeline), a run of consecutive linalg ops
    that form a row group (`compiler/Codegen/Common/RowGroups.h`: softmax's
    max, sum and normalization, layer norm's statistics and normalization,
    a loss's per-row terms, a mean's division after its sum) goes into one
    kernel, at the place of its last op, when the ops between them touch
    none of the buffers of the ops moved past them and no buffer the group
    writes shares memory with another of its buffers; kiln-gpu-kernels runs
    it with a block per row. At most 16 ops form a group; the longest run
    that forms one from each op is taken.
  }];
  let options = [
    Option<"groupFills", "group-fills", "bool", /*default=*/"false",
           "Put a fill into the kernel of the op it initializes">,
    Option<"groupRows", "group-rows", "bool", /*default=*/"false",
           "Put a run of ops that a GPU block per row can run into one "
           "kernel">
  ];
  let dependentDialects = ["::mlir::func::FuncDialect"];
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

def KilnCheckLoweredPass : Pass<"kiln-check-lowered", "::mlir::ModuleOp"> {
  let summary = "Fail when anything is left above the pipeline's target level";
  let description = [{
    The last pass of every Kiln pipeline. With `stage=linalg` it rejects any
    remaining `kiln` op but the GPU kernel ops (`kiln.flash_attention`,
    `kiln.flash_attention_grad`) in a module whose `kiln.target` names a GPU,
    which kiln-gpu-kernels lowers; with `stage=llvm` it rejects any op outside the
    `llvm` dialect (besides the module, OpenMP regions, GPU binaries and the
    `gpu.launch_func` ops that launch their kernels on LLVM values, which
    are translated to LLVM IR with it). Each leftover op gets an error
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

#endif // KILN_COMPILER_CODEGEN_COMMON_PASSES_TD
