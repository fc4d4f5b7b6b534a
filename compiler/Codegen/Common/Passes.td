//===- Passes.td - Common code generation passes -----------*- tablegen -*-===//
//
// Code generation shared by the CPU and GPU pipelines.
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
    all the ones before it).
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def KilnDeallocateAfterLastUsePass : Pass<"kiln-deallocate-after-last-use"> {
  let summary = "Free each buffer right after its last use";
  let description = [{
    MLIR's ownership-based buffer deallocation frees the buffers a block
    allocates at the end of that block: in a model's function, one block of
    hundreds of kernel calls, every activation and temporary stayed
    allocated until the function returned (the gpt-small forward pass held
    271 MiB at once). This pass moves each `memref.dealloc` of a buffer
    allocated in the same block to right after the last op of the block
    that uses the buffer or anything derived from it (views, reshapes,
    casts, loop results, whatever a user returns). A buffer a terminator
    passes on, or whose raw pointer is taken, keeps its place. Run after
    deallocation is lowered to `memref.dealloc` (and after outlining, so
    that the uses are kernel calls).
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
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
    bufferization; kernel outlining folds the identical fills back into one
    kernel.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
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

def KilnDropInPlaceResultsPass
    : Pass<"kiln-drop-in-place-results", "::mlir::ModuleOp"> {
  let summary = "Return updated arguments by writing them, not as results";
  let description = [{
    After one-shot bufferization, each result of a public function marked
    `kiln.updates = <i>` is removed from the function's results: the value
    is stored in argument `i`'s buffer instead (nothing to do when
    bufferization already computed it there, a `memref.copy` otherwise). A
    training step then updates the parameters and the optimizer state in
    the caller's buffers, with no second copy of either alive during the
    step; the runtime (FunctionSpec::results[k].updates) hands the
    arguments back as those results. A function with such results must
    not be called from the module. Run right after one-shot-bufferize,
    before the deallocation pipeline (which would otherwise copy every
    returned argument).
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

#endif // KILN_COMPILER_CODEGEN_COMMON_PASSES_TD
