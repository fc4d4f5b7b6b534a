//===- KilnBase.td - Kiln dialect, types and attributes ----*- tablegen -*-===//
//
// The `kiln` dialect: transformer building blocks on ranked tensors.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNBASE_TD
#define KILN_DIALECT_KILN_IR_KILNBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "dialects/Kiln/IR/KilnInterfaces.td"

//===----------------------------------------------------------------------===//
// Dialect
//===----------------------------------------------------------------------===//

def Kiln_Dialect : Dialect {
  let name = "kiln";
  let cppNamespace = "::mlir::kiln";
  let summary = "Transformer building blocks: embeddings, attention, norms, losses";
  let description = [{
    The `kiln` dialect describes transformer models at the level of their
    building blocks (token embeddings, positional encodings, layer norm,
    multi-head attention, feed-forward blocks, losses) plus the small set of
    tensor ops needed to glue them together and to express gradients.

    All ops work on ranked tensors. Batch and sequence dimensions may be
    dynamic (`tensor<?x?x128xf32>`); every shape check treats a dynamic
    dimension as compatible with any size, and the result types of every op
    are inferred from its operands. Weight layouts follow PyTorch: a linear
    weight is `[out, in]`, an embedding table is `[vocab, dim]`.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
  // The function boundary's attributes (KilnDialect.h).
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let hasOperationAttrVerify = 1;
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

// The floating-point element types of Kiln's tensors. Every op takes f32 or
// bf16, one of them for all its floating-point operands and results (the
// ShapeContract interface's verify; kiln.cast converts); kiln-widen-bf16
// computes bf16 ops in f32 between casts.
def Kiln_Float : AnyTypeOf<[F32, BF16], "floating-point (f32 or bf16)">;
def Kiln_FloatTensor : RankedTensorOf<[Kiln_Float]>;

// Token ids and class targets.
def Kiln_IndexTensor : RankedTensorOf<[I32, I64]>;

// Key-padding masks: non-zero means "attend", zero means "padding".
def Kiln_MaskTensor : RankedTensorOf<[I1, I32, I64]>;

// A run-time random seed for dropout (one per training step, say).
def Kiln_Seed : TypeAlias<I64, "64-bit signless integer seed">;

// A run-time start position (incremental decoding).
def Kiln_Offset : TypeAlias<I64, "64-bit signless integer position">;

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Kiln_PEKind : I32EnumAttr<"PEKind", "positional encoding kind", [
    I32EnumAttrCase<"sinusoidal", 0>,
    I32EnumAttrCase<"learned", 1>]> {
  let cppNamespace = "::mlir::kiln";
  let genSpecializedAttr = 0;
}
def Kiln_PEKindAttr : EnumAttr<Kiln_Dialect, Kiln_PEKind, "pe_kind">;

def Kiln_NormMode : I32EnumAttr<"NormMode", "layer normalization formula", [
    // (x - mean) / sqrt(biased_var + eps): torch.nn.LayerNorm.
    I32EnumAttrCase<"standard", 0>,
    // (x - mean) / (unbiased_std + eps): the from-scratch LayerNorm of seed
    // document 002 (x.std() then adding eps).
    I32EnumAttrCase<"std_eps", 1>]> {
  let cppNamespace = "::mlir::kiln";
  let genSpecializedAttr = 0;
}
def Kiln_NormModeAttr : EnumAttr<Kiln_Dialect, Kiln_NormMode, "norm_mode">;

def Kiln_Activation : I32EnumAttr<"Activation", "feed-forward activation", [
    I32EnumAttrCase<"relu", 0>,
    // x * Phi(x) with the exact erf form.
    I32EnumAttrCase<"gelu", 1>,
    // The tanh approximation used by GPT-2.
    I32EnumAttrCase<"gelu_tanh", 2>,
    // x * sigmoid(x) (SiLU, Swish): the gate of Llama's SwiGLU.
    I32EnumAttrCase<"silu", 3>]> {
  let cppNamespace = "::mlir::kiln";
  let genSpecializedAttr = 0;
}
def Kiln_ActivationAttr : EnumAttr<Kiln_Dialect, Kiln_Activation, "activation">;

def Kiln_RotaryStyle : I32EnumAttr<"RotaryStyle", "rotary embedding layout", [
    // Hugging Face Llama's rotate_half: feature i of a head pairs with
    // feature i + head_dim/2.
    I32EnumAttrCase<"half", 0>,
    // The original paper's (RoFormer, GPT-J, Meta's Llama): features 2i and
    // 2i + 1 of a head form a pair.
    I32EnumAttrCase<"interleaved", 1>]> {
  let cppNamespace = "::mlir::kiln";
  let genSpecializedAttr = 0;
}
def Kiln_RotaryStyleAttr
    : EnumAttr<Kiln_Dialect, Kiln_RotaryStyle, "rotary_style">;

def Kiln_ReduceKind : I32EnumAttr<"ReduceKind", "reduction kind", [
    I32EnumAttrCase<"sum", 0>,
    I32EnumAttrCase<"mean", 1>,
    I32EnumAttrCase<"max", 2>]> {
  let cppNamespace = "::mlir::kiln";
  let genSpecializedAttr = 0;
}
def Kiln_ReduceKindAttr : EnumAttr<Kiln_Dialect, Kiln_ReduceKind, "reduce_kind">;

def Kiln_LossReduction : I32EnumAttr<"LossReduction", "loss reduction", [
    I32EnumAttrCase<"mean", 0>,
    I32EnumAttrCase<"sum", 1>,
    I32EnumAttrCase<"none", 2>]> {
  let cppNamespace = "::mlir::kiln";
  let genSpecializedAttr = 0;
}
def Kiln_LossReductionAttr
    : EnumAttr<Kiln_Dialect, Kiln_LossReduction, "loss_reduction">;

//===----------------------------------------------------------------------===//
// Base op class
//===----------------------------------------------------------------------===//

// Every kiln op states its shape contract (KilnInterfaces.td).
class Kiln_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kiln_Dialect, mnemonic,
         !listconcat(traits,
                     [DeclareOpInterfaceMethods<Kiln_ShapeContractOpInterface>])>;

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

def Kiln_TargetAttr : AttrDef<Kiln_Dialect, "Target"> {
  let mnemonic = "target";
  let summary = "The CPU (and GPU) code is generated for, resolved once";
  let description = [{
    What CPU code generation may assume of the machine, attached to the
    module as `kiln.target` by `kiln-set-target` (the lowering of the JIT
    and of `kiln-compile` resolves the requested CPU the same way): an LLVM
    CPU name (`host` resolved to this machine's, e.g. `znver4`), the LLVM
    features it has (`+avx2,+avx512f,...`; for a named CPU, its own and
    every feature they imply), and the per-core data cache sizes that the
    block sizes derive from. kiln-select-cpu-tiles, kiln-tile-and-peel,
    kiln-vector-matrix-products, kiln-convert-vector-to-llvm and the LLVM
    target machine read it, so a dumped module says what it was tiled for:

    ```mlir
    module attributes {kiln.target = #kiln.target<cpu = "x86-64-v3",
        features = "+avx,+avx2,+fma,...", l1DataBytes = 32768,
        l2Bytes = 524288>} { ... }
    ```

    Code for an NVIDIA GPU also names the architecture its kernels are
    compiled for (`gpu = "sm_90"`, read by kiln-attach-gpu-target); the CPU
    is then the host code's. Without `gpu`, the module is CPU code.
  }];
  let parameters = (ins
    StringRefParameter<"LLVM CPU name">:$cpu,
    StringRefParameter<"LLVM features, comma-separated">:$features,
    "int64_t":$l1DataBytes,
    "int64_t":$l2Bytes,
    StringRefParameter<"NVIDIA GPU architecture (sm_90), empty for CPU code",
                       "\"\"">:$gpu
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Kiln_CpuPackAttr : AttrDef<Kiln_Dialect, "CpuPack"> {
  let mnemonic = "cpu_pack";
  let summary = "One operand of a cache-blocked product to copy block by block";
  let description = [{
    Part of a `#kiln.cpu_tiles` (its `packs`): kiln-block-for-caches copies
    each block of input `operand` (a matrix indexed by the op's loops `dims`,
    outer first) into a contiguous buffer before the block is multiplied.
    `transpose`: the operand is stored as B transposed ([n, k]) and copied
    as [k, n]. `panel_dim` and `panel_width` (when set): the copy is cut into
    micro-panels `panel_width` wide along loop `panel_dim` (a register
    tile's columns), each panel's rows contiguous. `reuse` (when set): the
    loops whose trip counts' product is how often a copied block is read;
    the copy is made only when that product reaches `min_reuse` at run time
    (when absent, the block is always copied).

    ```mlir
    #kiln.cpu_pack<operand = 1, dims = [2, 1], transpose = true,
        panel_dim = 1, panel_width = 16>
    ```
  }];
  let parameters = (ins
    "int64_t":$operand,
    "::mlir::DenseI64ArrayAttr":$dims,
    DefaultValuedParameter<"bool", "false">:$transpose,
    DefaultValuedParameter<"int64_t", "-1">:$panel_dim,
    DefaultValuedParameter<"int64_t", "0">:$panel_width,
    OptionalParameter<"::mlir::DenseI64ArrayAttr">:$reuse,
    DefaultValuedParameter<"int64_t", "0">:$min_reuse
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Kiln_CpuTilesAttr : AttrDef<Kiln_Dialect, "CpuTiles"> {
  let mnemonic = "cpu_tiles";
  let summary = "The tiles, cache blocks and copies CPU code generation chose for one linalg op";
  let description = [{
    The decision kiln-select-cpu-tiles writes on each linalg op with loops,
    as `kiln.cpu_tiles`, and the mechanism passes apply:

    - `blocks`, `block_threads`, `packs` (a contraction larger than the
      caches; kiln-block-for-caches): the cache block size of each loop (0
      leaves a loop whole), the block loops that run on all cores, and the
      operands copied block by block (`#kiln.cpu_pack`);
    - `tile`, `threads` (kiln-tile-and-peel): one size per loop (a
      contraction's register tile, `m x n x 1`; one vector along the
      innermost loop of any other op; 0 leaves a loop whole), and the tile
      loops the threads share (ascending).

    A config written by hand is applied as it is:

    ```mlir
    linalg.matmul {kiln.cpu_tiles = #kiln.cpu_tiles<tile = [6, 16, 1],
        threads = [0], blocks = [0, 256, 512]>} ins(...) outs(...)
    ```
  }];
  let parameters = (ins
    "::mlir::DenseI64ArrayAttr":$tile,
    "::mlir::DenseI64ArrayAttr":$threads,
    OptionalParameter<"::mlir::DenseI64ArrayAttr">:$blocks,
    OptionalParameter<"::mlir::DenseI64ArrayAttr">:$block_threads,
    OptionalParameter<"::mlir::ArrayAttr">:$packs
  );
  let builders = [
    AttrBuilder<(ins "::mlir::DenseI64ArrayAttr":$tile,
                     "::mlir::DenseI64ArrayAttr":$threads), [{
      return $_get($_ctxt, tile, threads, ::mlir::DenseI64ArrayAttr(),
                   ::mlir::DenseI64ArrayAttr(), ::mlir::ArrayAttr());
    }]>
  ];
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // KILN_DIALECT_KILN_IR_KILNBASE_TD
