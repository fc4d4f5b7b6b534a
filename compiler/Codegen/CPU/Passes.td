//===- Passes.td - CPU code generation passes --------------*- tablegen -*-===//
//
// CPU code generation (kiln-to-llvm), in pipeline order: the target CPU
// resolved once, buffers written in place and freed early, tiles and vectors
// sized for the target, the loops that run on all cores, noalias kernel
// arguments, the target's vector lowering and function attributes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_CODEGEN_CPU_PASSES_TD
#define KILN_COMPILER_CODEGEN_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnSetTargetPass : Pass<"kiln-set-target", "::mlir::ModuleOp"> {
  let summary = "Resolve the target CPU once and write it on the module";
  let description = [{
    Resolves `cpu` (`host`: this machine's CPU, features and caches; or an
    LLVM CPU name such as `x86-64-v3`, with every feature it implies) and
    attaches it to the module as `kiln.target` (`#kiln.target<...>`),
    replacing any target already there. Every later decision that depends on
    the CPU reads that attribute (kiln-vector-matrix-products,
    kiln-select-cpu-tiles, kiln-tile-and-peel, kiln-convert-vector-to-llvm,
    kiln-llvm-target-attributes, the LLVM target machine), so the name is
    parsed once per compile and a dumped module says what it was generated
    for. An unknown CPU is an error that lists the usual names. The first
    pass of kiln-to-llvm (its `cpu` option). For GPU code, `gpu` names the
    NVIDIA architecture of the kernels (`sm_90`; kiln-attach-gpu-target reads
    it) and `cpu` the host code's CPU: the first pass of kiln-to-gpu (its
    `gpu` and `cpu` options). A `gpu` that is no such architecture is an
    error.
  }];
  let options = [
    Option<"cpu", "cpu", "std::string", /*default=*/"\"host\"",
           "The CPU: host, or an LLVM CPU name (x86-64-v3, znver4, ...)">,
    Option<"gpu", "gpu", "std::string", /*default=*/"\"\"",
           "The NVIDIA GPU architecture of GPU code (sm_80, sm_90); empty: "
           "CPU code">,
  ];
  let dependentDialects = ["::mlir::kiln::KilnDialect"];
}

def KilnPrepareWeightsPass
    : Pass<"kiln-prepare-weights", "::mlir::ModuleOp"> {
  let summary = "Let products read the weights they take transposed from "
                "copies prepared once";
  let description = [{
    A linear layer multiplies by its weight transposed (x·Wᵀ for W
    [out, in], PyTorch's layout), and kiln-tile-and-vectorize copies every
    such weight, transposed, block by block, on every call: a pass over
    every weight, each block a few dozen strided streams from memory (a
    tenth of gpt-small's batch-1 forward pass on a Zen 4). This pass gives
    each public function that reads a 2-D f32 parameter (`kiln.kind =
    "param"`) transposed in a contraction (the parameter, or row blocks of
    it cut by `tensor.extract_slice`, indexed (n, k)) one more argument,
    appended after the others: the parameter's transpose, [in, out],
    `kiln.kind = "prepared"` with the parameter's `kiln.name`; those
    products read it (k, n) instead. The runtime makes the transposes once
    per parameter set (kiln::PreparedWeights, kept by kiln::CompiledModel)
    and passes them in.

    Left as they are: functions that update arguments in place
    (`kiln.updates`: decoding steps, whose products of a few rows stream
    the weights as stored, and training steps, whose parameters change at
    every call), products of at most `max-streamed-rows` static rows
    (kiln-vector-matrix-products streams them), and row blocks with other
    uses. Run on linalg on tensors, before bufferization.
  }];
  let options = [
    Option<"maxStreamedRows", "max-streamed-rows", "int64_t",
           /*default=*/"0",
           "Static row counts up to this keep reading the weight as stored "
           "(0: TargetInfo::maxStreamedRows of the module's kiln.target)">,
  ];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
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

def KilnDeferFillsPass : Pass<"kiln-defer-fills"> {
  let summary = "Let the op after a fill fill each of its tiles itself";
  let description = [{
    A `linalg.fill` of a buffer followed by a linalg op that writes that
    buffer as its one output (an accumulator zeroed for a product, -inf for
    a row maximum) is a pass over the whole buffer before the op's pass:
    for the [B, H, T, T] attention scores, a 64-deep product, as much
    memory traffic as the product itself. This pass erases such a fill and
    marks the op `kiln.fill = <value>`: kiln-tile-and-peel fills each
    register tile of the output right before the tile is computed (or, for
    an op it blocks along its reduction, the whole output first), and
    kiln-hoist-vector-transfers then forwards the filled vector to the
    tile's accumulators, so the fill costs no memory pass at all. The op
    must be the next one in the block with memory effects (allocations and
    pure ops may come between) and must not read the buffer, or a view of
    it, as an input. Run after bufferization, before kernel outlining (the
    mark travels with the op into its kernel).
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

def KilnVectorMatrixProductsPass
    : Pass<"kiln-vector-matrix-products", "::mlir::func::FuncOp"> {
  let summary = "Stream the weight of a product of a few rows";
  let description = [{
    A linear layer decoding one token at a time multiplies one row (or a
    few: a batch of sequences) by a weight stored [N, K]: every element of
    the weight is used once per row, so the product is bound by reading
    the weight from memory, and kiln-tile-and-vectorize's blocked product
    (a copy of each block of the weight into micro-panels, transposed, then
    register tiles of 8 rows of which one is used) reads and writes it
    several times over. This pass rewrites a contraction
    `out[m..., n] += a[m..., k] * b[n, k]` on f32 buffers (k static, a
    multiple of one vector, contiguous in a and b; no batch loop) whose rows
    (the product of the m loops' sizes) are at most `max-rows` into two ops:

      partial[m..., n, l] = sum over j of a[m..., j, l] * b[n, j, l]
      out[m..., n] += sum over l of partial[m..., n, l]

    with k split into j and l of one vector register each. The first, with
    loops (n, m..., j, l), is a vector of FMAs along each row of b into a
    zeroed accumulator (`kiln.fill`): each row of the weight is read once,
    from memory, the rows of a from L1, and the threads share the rows of
    the weight. The second reduces each accumulator's lanes. When the rows
    are dynamic an `scf.if` chooses at run time between this and the op as
    it was. Run after kernel outlining, before kiln-tile-and-vectorize.
    The vector width comes from the module's `kiln.target`
    (kiln-set-target) unless `vector-width` is given.
  }];
  let options = [
    Option<"vectorWidth", "vector-width", "int64_t", /*default=*/"0",
           "Elements per vector (0: from the target)">,
    Option<"maxRows", "max-rows", "int64_t", /*default=*/"0",
           "The most rows a product may have to be streamed (0: "
           "TargetInfo::maxStreamedRows of the module's kiln.target)">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

def KilnBf16ProductsPass
    : Pass<"kiln-bf16-products", "::mlir::func::FuncOp"> {
  let summary = "Matrix products in bf16 with f32 sums (AVX512-BF16)";
  let description = [{
    The bf16 precision policy of CPU code: rewrites every contraction
    `out[batch.., m.., n..] += a * b` on f32 buffers whose operands collapse
    into 2-D ones after their leading batch loops (a indexed (m.., k..) or
    (k.., m..), b (k.., n..) or (n.., k..), out (m.., n..), each run of
    loops in one order wherever it appears: a linear's [batch, sequence]
    rows; the innermost dimension of each with stride 1) into a product of
    bf16
    values with f32 sums: a and b are rounded to bf16 (to nearest, ties to
    even) while they are packed (no separate pass over memory), a as rows
    of k pairs, b as panels of 32 columns of k pairs (the layout
    `vdpbf16ps` reads), and register tiles of 8 rows by 32 columns add one
    pair of k per `x86vector.avx512.dot` into f32 accumulators. The
    result, its initial value (`kiln.fill` or the output's contents) and
    every sum stay f32. Packing and tiles run on all cores
    (`kiln.parallel` loops); a batched product runs its batches on all
    cores instead, each packed and multiplied on one. Products it does not
    match (strided innermost, an output indexed (n, m)) stay f32, as do
    those kiln-vector-matrix-products streamed.
    Run after kiln-vector-matrix-products, before kiln-tile-and-vectorize;
    the module's `kiln.target` (kiln-set-target) must have AVX512-BF16, or
    the pass fails and says so.

    `kernels`: `auto` (the default) multiplies on AMX's tiles where the
    target has AMX (amx-tile, amx-bf16), else with vdpbf16ps; `dot` always
    with vdpbf16ps; `amx` on AMX's tiles (an error on a target without
    AMX); `amx-emulated` runs the AMX kernels with each tile instruction
    computed by vdpbf16ps code (to check their packing, tiling and edges on
    any CPU with AVX512-BF16; slower than `dot`). The AMX kernels pack a in
    blocks of 32 rows, b in the same panels, and sum 2 x 2 tiles of 16 x 16
    (`amx.tile_mulf`, 16 pairs of k each) per 32 x 32 block of out; a
    product asks Linux for the tile state first (arch_prctl) and, where it
    is refused, multiplies with vdpbf16ps on the same packed buffers.
  }];
  let options = [
    Option<"kernels", "kernels", "std::string", /*default=*/"\"auto\"",
           "auto, dot (vdpbf16ps), amx (AMX tiles) or amx-emulated">
  ];
  let dependentDialects = ["::mlir::amx::AMXDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect",
                           "::mlir::x86vector::X86VectorDialect"];
}

def KilnSelectCpuTilesPass
    : Pass<"kiln-select-cpu-tiles", "::mlir::func::FuncOp"> {
  let summary = "Choose the cache blocks, copies, tiles and thread loops of every linalg op";
  let description = [{
    The decision half of CPU tiling: writes `kiln.cpu_tiles =
    #kiln.cpu_tiles<...>` on every linalg op with loops that has none,
    which three mechanism passes then apply, each reading only that:
    kiln-block-for-caches (`blocks`, `block_threads`, `packs`),
    kiln-tile-and-peel (`tile`, `threads`) and kiln-vectorize-tiles.

    - Contractions with a column loop get a register tile (`m x n` with `n`
      two vector registers and `m` the accumulator rows that fit the
      register file: 6 x 16 on AVX2, 8 x 32 on AVX-512; 1 along the
      reduction), any other op one vector along its innermost loop (and a
      transpose a square of vectors), each clamped to static loop ranges;
      the threads share every parallel loop outside the innermost (a
      contraction: outside its columns).
    - A contraction larger than the caches is blocked around its register
      tiles (`nc` columns, `kc` reduction steps) so that a register tile's
      rows of A stay in L1 and a `kc x nc` block of B stays in L2 while
      every row tile reads it (TargetInfo::blockK/blockN: 512 x 256 with a
      48 KiB L1 and 1 MiB L2 on AVX-512; on AVX2, a long or dynamic
      reduction with an operand stored transposed takes 256 x 256 on a
      32 KiB L1 and 512 KiB L2, so that a tile's rows of A and a panel of
      B share L1: TargetInfo::blockKLongReduction). A block of B is copied into
      micro-panels (each register tile's columns contiguous) when at least
      `panelMinReuse` rows read it, or at least `packMinReuse` when its rows
      lie a multiple of 4 KiB apart (a run-time test when the rows are
      dynamic); a linear's weight (B stored transposed) is always copied,
      transposed. When A is stored transposed ([K, M]) with rows 4 KiB
      apart, rows are blocked too (`mc`, TargetInfo::blockM) and each kc x
      mc block of A is copied into one contiguous buffer, by the thread
      that multiplies it when there are enough row blocks. A B stored
      transposed per batch (attention's keys) is copied batch by batch,
      the batches blocked by one and run on all cores.

    Sizes come from the module's `kiln.target` unless given
    (compiler/Codegen/CPU/TileSelection.h holds the rules). A module
    without a target is an error. `kiln-tile-and-vectorize` is the pipeline
    of this pass and the three that apply it.
  }];
  let options = [
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
           "Columns of a contraction's cache block (0: from the target)">,
    Option<"blockM", "block-m", "int64_t", /*default=*/"0",
           "Rows of a contraction's cache block when its A is stored "
           "transposed (0: from the target)">,
  ];
}

def KilnBlockForCachesPass
    : Pass<"kiln-block-for-caches", "::mlir::func::FuncOp"> {
  let summary = "Cut contractions into cache blocks and copy their blocks";
  let description = [{
    Applies the `blocks`, `block_threads` and `packs` of each op's
    `kiln.cpu_tiles` (kiln-select-cpu-tiles, or written by hand): tiles the
    op by its block sizes into loops over batches (outermost), column
    blocks, reduction blocks, then row blocks, marks the `block_threads`
    loops to run on all cores, and copies each block of the packed operands
    into a buffer allocated around the block loops (64-byte aligned, freed
    after them): a row-major block the op then reads, transposed for a B
    stored as Bᵀ, or micro-panels `panel_width` wide along `panel_dim` with
    one row of padding after each panel (panels 4 KiB apart would share
    cache sets). A block of B is copied before the row-block loop, not
    once per row block. With a run-time `reuse` count, an `scf.if` chooses
    between the copy and the op on the operand in place. A deferred fill
    (kiln-defer-fills) of an op blocked along its reduction is done in the
    first reduction block only. The blocked op keeps its tile and thread
    loops; the op that reads micro-panels is linked to their buffer
    (`kiln.panel_reads`, BlockForCaches.h) for kiln-tile-and-peel.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

def KilnTileAndPeelPass
    : Pass<"kiln-tile-and-peel", "::mlir::func::FuncOp"> {
  let summary = "Tile linalg ops on buffers into register tiles and peel the partial ones";
  let description = [{
    Applies the `tile` and `threads` of each op's `kiln.cpu_tiles` (an op
    without one, such as the copies kiln-block-for-caches makes, gets
    kiln-select-cpu-tiles' choice here): the parallel loops are tiled first
    (those in `threads` marked `kiln.parallel` for
    kiln-parallelize-loops), and a tile of an op that reads micro-panels
    reads its own panel. The partial last tile of every tiled loop is
    peeled off, so that the main loops see full tiles of static size, and
    tiled once more, one row by one vector (the M remainder of a 6x16
    register tile becomes 1x16 tiles, its N remainder 6x8 ones), so that
    only the last columns short of a vector stay scalar. A tile whose
    output kiln-defer-fills left unfilled is filled right before it is
    computed. Then the reduction loops are tiled inside, so that a register
    tile's accumulators stay in registers across them. Each tile is marked
    `kiln.tile` with its sizes for kiln-vectorize-tiles. A config that does
    not fit its op is an error; so is a module without a target.
  }];
  let options = [
    Option<"vectorWidth", "vector-width", "int64_t", /*default=*/"0",
           "Elements per vector, the partial tiles' width (0: from the "
           "target)">,
  ];
  let dependentDialects = ["::mlir::affine::AffineDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

def KilnVectorizeTilesPass
    : Pass<"kiln-vectorize-tiles", "::mlir::func::FuncOp"> {
  let summary = "Vectorize the register tiles of static size";
  let description = [{
    Vectorizes every op kiln-tile-and-peel marked `kiln.tile`: a
    contraction's register tile becomes products reduced into the
    accumulator tile (canonicalized into a `vector.contract`, later one
    broadcast-FMA outer product per reduction step), any other tile vectors
    along its innermost loop. A transpose's tile read becomes a read of
    contiguous rows and a `vector.transpose` (shuffles in registers); a
    tile read that broadcasts contiguous elements is read element by
    element (one broadcasting load each); unit dimensions are dropped so
    that vectors lower to plain 1-D registers. A tile stays a scalar loop
    nest when its shape is dynamic (a loop left whole, or a partial tile
    short of a vector), when its reduction combines a value not read from
    an input element (the vectorizer would apply it once per tile), when it
    reads or writes i1 buffers (vectors would read them as packed bits), or
    when the vectorizer refuses it. With `remarks`, each such tile gets a
    remark saying which; `-debug-only=kiln-vectorize-tiles` (a debug build)
    prints them.
  }];
  let options = [
    Option<"remarks", "remarks", "bool", /*default=*/"false",
           "Emit a remark at each tile that stays a scalar loop nest, "
           "saying why">
  ];
  let dependentDialects = ["::mlir::vector::VectorDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
}

def KilnHoistVectorTransfersPass
    : Pass<"kiln-hoist-vector-transfers", "::mlir::func::FuncOp"> {
  let summary = "Keep loop-invariant vector tiles in registers across loops";
  let description = [{
    After bufferization, moves each `vector.transfer_read`/`transfer_write`
    pair of a loop-invariant buffer tile (the accumulator of a contraction
    tile) out of the loop, carrying the vector through the loop instead, so
    that the reduction loop of a register tile neither loads nor stores its
    accumulators. Then forwards each transfer_write to the transfer_reads
    of the same vector that follow it with no interfering write, and drops
    writes that are overwritten before anything reads them
    (`vector::transferOpflowOpt`): a tile filled right before its
    accumulators are read (kiln-defer-fills) starts from the filled vector.
    Last, a loop that reduces one vector per step into a single element
    (a row maximum or sum along the innermost loop: one lane-crossing
    reduction per vector) carries a vector of partial results instead,
    combined lane by lane, and reduces across the lanes once, after the
    loop. Finally, a loop that adds to an accumulator tile read from memory
    right before it starts from zeros instead: the tile is prefetched
    (`memref.prefetch`, one per cache line) before the loop and read and
    added once after it, so that a register tile of a large output does not
    wait for its rows before its first multiply.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::vector::VectorDialect"];
}

def KilnParallelizeLoopsPass
    : Pass<"kiln-parallelize-loops", "::mlir::func::FuncOp"> {
  let summary = "Run the chosen tile loop of each op on all cores";
  let description = [{
    Rewrites the tile loop that kiln-select-cpu-tiles chose for threading
    (the row-tile loop of a contraction, the outermost non-trivial parallel
    loop otherwise) into `scf.parallel`, which convert-scf-to-openmp then
    turns into an OpenMP work-sharing loop. Loops that carry values (the
    reduction loops of register tiles) and loops nested in a parallel loop
    stay serial.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect"];
}

def KilnMergeParallelRegionsPass : Pass<"kiln-merge-parallel-regions"> {
  let summary = "Run each kernel's parallel loops in one OpenMP region";
  let description = [{
    convert-scf-to-openmp gives every parallel loop an `omp.parallel` of its
    own, so a blocked contraction forks its threads twice per cache block
    (its copy of B, then its rows). This pass merges two regions that only
    ops without memory effects separate (those move before the first) into
    one, with a barrier where the first region ended (none when its last
    work-sharing loop already waits), and moves a serial loop whose body is
    one region and such ops into that region: every thread runs the loop,
    the work-sharing loops inside split each iteration, a barrier ends each
    iteration. Regions with clauses (threads, condition, reductions) are
    left alone. Run after kiln-inline-alloca-scopes, before scf-to-cf.
  }];
  let dependentDialects = ["::mlir::omp::OpenMPDialect"];
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

def KilnApplyNoAliasPass : Pass<"kiln-apply-noalias", "::mlir::ModuleOp"> {
  let summary = "Mark the kernel buffers that never overlap as noalias";
  let description = [{
    Runs after func-to-llvm: puts `llvm.noalias` on the aligned pointers that
    kiln-outline-kernels found never to overlap a written buffer at any call
    (recorded in the kernel's `kiln.noalias_args`), so that LLVM may keep
    loaded values in registers across stores.
  }];
}

def KilnConvertVectorToLLVMPass
    : Pass<"kiln-convert-vector-to-llvm", "::mlir::ModuleOp"> {
  let summary = "convert-vector-to-llvm with the target's transpose lowering";
  let description = [{
    Runs MLIR's `convert-vector-to-llvm` with contractions lowered to outer
    products and the register transposes of kiln-tile-and-vectorize's
    transpose tiles (vector-width squares) lowered for the module's
    `kiln.target`: the AVX-512-specific 16x16 shuffle sequence where vectors
    hold 16 f32 (16x16 f32 transposes are kiln-lower-transposes' by then),
    else one 1-D shuffle per tile (the default, extract/insert per element,
    is far slower for 8x8 tiles). Transfers of 0-d vectors
    from and to memrefs become `memref.load` and `memref.store` first
    (fold-memref-alias-ops puts them on views whose innermost stride is not
    1, which convert-vector-to-llvm does not lower). A module without a
    target is an error.
  }];
  let dependentDialects = [
    "::mlir::LLVM::LLVMDialect",
    "::mlir::arith::ArithDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::vector::VectorDialect",
  ];
}

def KilnLowerTransposesPass
    : Pass<"kiln-lower-transposes", "::mlir::ModuleOp"> {
  let summary = "Register transposes as x86 shuffles that folds cannot undo";
  let description = [{
    Where the module's `kiln.target` has 16 f32 in a vector (AVX-512),
    rewrites each `vector.transpose` of a `vector<16x16xf32>` into the 64
    two-input `vector.shuffle`s of a four-stage network (unpack within
    128-bit lanes, shufps, two shuff32x4; each maps to one instruction)
    with an empty `llvm.inline_asm` (no instruction, its operand tied to
    its result) after each of the first three stages. Left as a transpose,
    the canonicalizer after convert-scf-to-cf turns it into
    `vector.to_elements`/`from_elements` before convert-vector-to-llvm
    sees it, 16 single-element inserts per row that compile into partial
    loads, broadcasts and blends.
    Where it has 8 (AVX2), each `vector<8x8xf32>` transpose becomes
    x86vector's 8x8 sequence (unpack, shufps, vblendps as inline asm,
    vperm2f128). Rows of the result read by `vector.extract` take the last
    shuffles directly. Runs right after convert-vector-to-scf; other
    shapes and targets are left as they are. A module without a target is
    an error.
  }];
  let dependentDialects = [
    "::mlir::LLVM::LLVMDialect",
    "::mlir::ub::UBDialect",
    "::mlir::vector::VectorDialect",
  ];
}

def KilnLLVMTargetAttributesPass
    : Pass<"kiln-llvm-target-attributes", "::mlir::ModuleOp"> {
  let summary = "Write the target CPU and features on every LLVM function";
  let description = [{
    Gives every `llvm.func` with a body the module's `kiln.target` as its
    `target_cpu` and `target_features` (LLVM's "target-cpu" and
    "target-features" function attributes), so that the LLVM IR of a
    function says what it was generated for, whichever target machine later
    compiles it. Functions that already name a CPU keep theirs. A module
    without a target is an error.
  }];
}

#endif // KILN_COMPILER_CODEGEN_CPU_PASSES_TD
