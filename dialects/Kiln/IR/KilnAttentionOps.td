//===- KilnAttentionOps.td - Kiln attention operations -----*- tablegen -*-===//
//
// Multi-head attention, the scaled dot-product attention kiln-autodiff takes
// it apart into, and that attention's gradient. Included by KilnOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNATTENTIONOPS_TD
#define KILN_DIALECT_KILN_IR_KILNATTENTIONOPS_TD

include "dialects/Kiln/IR/KilnBase.td"
include "dialects/Kiln/IR/KilnInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Kiln_MultiHeadAttentionOp
    : Kiln_Op<"mha", [Pure, InferTypeOpAdaptor, AttrSizedOperandSegments,
                      DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let summary = "multi-head scaled dot-product attention with projections";
  let description = [{
    `query` is `[B, Tq, D]`, `key_value` is `[B, Tk, Dkv]`: the same value for
    self-attention, the encoder output for cross-attention (`Tk` may differ
    from `Tq`). With PyTorch's `[out, in]` weights `wq`, `wo`: `[D, D]` and
    `wk`, `wv`: `[D, Dkv]`, and `H = num_heads` heads of width `D / H`:

    ```
    Q = query·wqᵀ + bq,  K = key_value·wkᵀ + bk,  V = key_value·wvᵀ + bv
    per head h: A = softmax(Q_h·K_hᵀ / sqrt(D/H) + mask), O_h = dropout(A)·V_h
    result = concat_h(O_h)·woᵀ + bo
    ```

    The biases are optional (all four or none). `key_padding_mask` (`[B, Tk]`,
    i1/i32/i64) marks the keys to attend to with a non-zero value; zeros are
    padding and get no attention. `causal` lets query `i` see key `j` only
    when `j <= i + (Tk - Tq)` (aligned at the end, so a single new query of
    an incremental decoder sees every cached key); it needs `Tq <= Tk`.
    `dropout` is the attention-dropout probability; when it is non-zero a
    `seed` operand must be given, and `stream` tells this dropout site apart
    from others that share the seed.

    ```mlir
    %y = kiln.mha %x, %x weights(%wq, %wk, %wv, %wo) mask %m
        {num_heads = 8 : i64, causal}
        : (tensor<?x?x512xf32>, tensor<?x?x512xf32>, tensor<512x512xf32>,
           tensor<512x512xf32>, tensor<512x512xf32>, tensor<512x512xf32>,
           tensor<?x?xi1>) -> tensor<?x?x512xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$query, Kiln_FloatTensor:$key_value,
                       Kiln_FloatTensor:$wq, Kiln_FloatTensor:$wk,
                       Kiln_FloatTensor:$wv, Kiln_FloatTensor:$wo,
                       Optional<Kiln_FloatTensor>:$bq,
                       Optional<Kiln_FloatTensor>:$bk,
                       Optional<Kiln_FloatTensor>:$bv,
                       Optional<Kiln_FloatTensor>:$bo,
                       Optional<Kiln_MaskTensor>:$key_padding_mask,
                       Optional<Kiln_Seed>:$seed,
                       I64Attr:$num_heads, UnitAttr:$causal,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout,
                       DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key_value `weights` `(` $wq `,` $wk `,` $wv `,` $wo `)`
    (`biases` `(` $bq^ `,` $bk `,` $bv `,` $bo `)`)?
    (`mask` $key_padding_mask^)? (`seed` $seed^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Kiln_AttentionOp
    : Kiln_Op<"attention", [Pure, InferTypeOpAdaptor, AttrSizedOperandSegments,
                            DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let summary = "scaled dot-product attention on projected inputs";
  let description = [{
    The core of `kiln.mha` without its projections: `query` `[B, Tq, D]`,
    `key` and `value` `[B, Tk, Dkv]` are split into heads of width
    `D / num_heads`, and per head `softmax(Q·Kᵀ/sqrt(D/H) + masks)·V` is
    computed, with the same `key_padding_mask`, `causal`, `dropout`, `seed`
    and `stream` semantics as `kiln.mha`. The heads are concatenated back to
    `[B, Tq, D]`. `kiln-autodiff` uses it to take `kiln.mha` apart.

    Grouped-query attention: with `num_kv_heads` (default `num_heads`), the
    keys and values hold that many heads (`Dkv = num_kv_heads · D /
    num_heads`), and query head `h` attends with key/value head
    `h / (num_heads / num_kv_heads)` (Hugging Face's `repeat_kv`);
    `num_kv_heads` divides `num_heads`. A key/value cache then holds only the
    key/value heads; the lowering reads each of them for its group of
    query heads without copying it.

    Causal attention takes the queries to be the last `Tq` of the `Tk`
    positions. With `offset` (an i64; causal only, keys of static length)
    they are positions `offset .. offset + Tq - 1` instead: query `i` sees
    keys `j <= offset + i`, and keys from `offset + Tq` on are never visible
    (a key/value cache of fixed capacity filled up to there; the code reads
    no whole block of keys past it, and multiplies the rest by a probability
    of 0). The call checks `offset + Tq <= Tk`. No gradient.

    ```mlir
    %o = kiln.attention %q, %k, %v {num_heads = 4 : i64, causal}
        : (tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<?x?x128xf32>)
        -> tensor<?x?x128xf32>
    %d = kiln.attention %q1, %kcache, %vcache offset %pos {num_heads = 4 : i64, causal}
        : (tensor<?x1x128xf32>, tensor<?x256x128xf32>, tensor<?x256x128xf32>, i64)
        -> tensor<?x1x128xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$query, Kiln_FloatTensor:$key,
                       Kiln_FloatTensor:$value,
                       Optional<Kiln_MaskTensor>:$key_padding_mask,
                       Optional<Kiln_Seed>:$seed,
                       Optional<Kiln_Offset>:$offset,
                       I64Attr:$num_heads, UnitAttr:$causal,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout,
                       DefaultValuedAttr<I64Attr, "0">:$stream,
                       OptionalAttr<I64Attr>:$num_kv_heads);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $key_padding_mask^)? (`seed` $seed^)?
    (`offset` $offset^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Kiln_AttentionGradOp
    : Kiln_Op<"attention_grad", [Pure, InferTypeOpAdaptor,
                                 AttrSizedOperandSegments]> {
  let summary = "gradients of scaled dot-product attention";
  let description = [{
    Given the gradient `grad` of `kiln.attention(query, key, value)` (same
    attributes and masks), returns the gradients of the query, the key and
    the value in one fused computation: the attention probabilities are
    recomputed (not stored), the softmax backward
    `P·(dP - Σ dP·P)` is applied per row, masked scores get no gradient, and
    the attention-dropout mask is reproduced from the seed. The optional
    `output` is that attention's result (`[B, Tq, D]`): with it, `Σ dP·P` of
    a row is `grad · output` of that row, which lets CPU code compute the
    gradients block by block (flash attention) without a pass over the
    whole row of scores first; `kiln-autodiff` passes it. With
    `num_kv_heads`, the gradient of each key/value head sums over its group
    of query heads.

    ```mlir
    %dq, %dk, %dv = kiln.attention_grad %g, %q, %k, %v output %o {num_heads = 4 : i64, causal}
        : (tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<?x?x128xf32>,
           tensor<?x?x128xf32>, tensor<?x?x128xf32>)
        -> (tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<?x?x128xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$grad, Kiln_FloatTensor:$query,
                       Kiln_FloatTensor:$key, Kiln_FloatTensor:$value,
                       Optional<Kiln_FloatTensor>:$output,
                       Optional<Kiln_MaskTensor>:$key_padding_mask,
                       Optional<Kiln_Seed>:$seed,
                       I64Attr:$num_heads, UnitAttr:$causal,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout,
                       DefaultValuedAttr<I64Attr, "0">:$stream,
                       OptionalAttr<I64Attr>:$num_kv_heads);
  let results = (outs Kiln_FloatTensor:$query_grad,
                      Kiln_FloatTensor:$key_grad,
                      Kiln_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $grad `,` $query `,` $key `,` $value (`output` $output^)?
    (`mask` $key_padding_mask^)? (`seed` $seed^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention as GPU kernels (kiln-to-gpu)
//===----------------------------------------------------------------------===//

// A float operand of a kernel op: a tensor before bufferization, a buffer
// after it.
def Kiln_FloatShaped : AnyTypeOf<[Kiln_FloatTensor, MemRefOf<[Kiln_Float]>]>;
def Kiln_IntegerShaped : AnyTypeOf<[RankedTensorOf<[AnyInteger]>,
                                    MemRefOf<[AnyInteger]>]>;

// What the kernel ops share: a destination-style op on tensors or buffers
// (`init`s written, nothing else), with the attention's attributes.
class Kiln_KernelOp<string mnemonic, list<Trait> traits = []>
    : Kiln_Op<mnemonic, !listconcat(traits, [
          AttrSizedOperandSegments, DestinationStyleOpInterface,
          DeclareOpInterfaceMethods<MemoryEffectsOpInterface>])> {
  let hasVerifier = 1;
}

def Kiln_FlashAttentionOp : Kiln_KernelOp<"flash_attention"> {
  let summary = "kiln.attention's forward pass as one GPU kernel";
  let description = [{
    What `convert-kiln-to-linalg{attention-kernel}` (the GPU pipeline) makes
    of `kiln.attention` and of `kiln.mha`'s attention core when heads are
    at most 128 wide: the same result (the same masks, `-1e9` for masked
    scores, dropout from `seed` and `stream` at each score's place in
    `[B, H, Tq, Tk]`), written into `init` (`[B, Tq, D]`), with no
    `[B, H, Tq, Tk]` tensor. Queries sit at the end of the keys (causal: query
    `i` sees key `j <= i + Tk - Tq`); a cached decoder's keys are cut to the
    filled prefix before. It bufferizes in place and `kiln-gpu-kernels`
    builds its kernel (compiler/Codegen/GPU/FlashAttention.cpp): a block per
    16 query rows of a head, the keys and values staged 32 at a time in
    shared memory, an online softmax per row. No CPU pipeline makes it.

    ```mlir
    %o = kiln.flash_attention ins(%q, %k, %v : tensor<?x?x128xf32>,
        tensor<?x?x128xf32>, tensor<?x?x128xf32>) outs(%init : tensor<?x?x128xf32>)
        {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal} -> tensor<?x?x128xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatShaped:$query, Kiln_FloatShaped:$key,
                       Kiln_FloatShaped:$value,
                       Optional<Kiln_IntegerShaped>:$key_padding_mask,
                       Optional<Kiln_Seed>:$seed,
                       Kiln_FloatShaped:$init,
                       I64Attr:$num_heads, I64Attr:$num_kv_heads,
                       UnitAttr:$causal,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout,
                       DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs Variadic<Kiln_FloatTensor>:$result);
  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value `:` type($query) `,` type($key) `,`
    type($value) `)` (`mask` `(` $key_padding_mask^ `:`
    type($key_padding_mask) `)`)? (`seed` `(` $seed^ `)`)?
    `outs` `(` $init `:` type($init) `)` attr-dict (`->` type($result)^)?
  }];
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getInitMutable();
    }
    /// The widest head the kernels take (their shared-memory tiles hold
    /// rows of it); convert-kiln-to-linalg{attention-kernel} keeps wider
    /// ones on whole scores.
    static constexpr int64_t kMaxHeadDim = 128;
  }];
}

def Kiln_FlashAttentionGradOp : Kiln_KernelOp<"flash_attention_grad"> {
  let summary = "kiln.attention_grad as GPU kernels";
  let description = [{
    What `convert-kiln-to-linalg{attention-kernel}` makes of
    `kiln.attention_grad` given the forward `output` (which `kiln-autodiff`
    passes) when heads are at most 128 wide: the gradients of the query, the
    key and the value, written into `query_init`, `key_init` and
    `value_init`, with no `[B, H, Tq, Tk]` tensor. `kiln-gpu-kernels` builds
    two kernels (compiler/Codegen/GPU/FlashAttention.cpp): one per 16 query
    rows of a head recomputes each row's maximum and sum, stores them with
    `grad · output`, and computes dQ; one per 16 keys of a key/value head
    computes dK and dV from them, summing over the head's group of query
    heads in order (8 rows or keys a block at heads of 128). No atomics: the
    results do not depend on timing.
  }];
  let arguments = (ins Kiln_FloatShaped:$grad, Kiln_FloatShaped:$query,
                       Kiln_FloatShaped:$key, Kiln_FloatShaped:$value,
                       Kiln_FloatShaped:$output,
                       Optional<Kiln_IntegerShaped>:$key_padding_mask,
                       Optional<Kiln_Seed>:$seed,
                       Kiln_FloatShaped:$query_init, Kiln_FloatShaped:$key_init,
                       Kiln_FloatShaped:$value_init,
                       I64Attr:$num_heads, I64Attr:$num_kv_heads,
                       UnitAttr:$causal,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout,
                       DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs Variadic<Kiln_FloatTensor>:$results);
  let assemblyFormat = [{
    `ins` `(` $grad `,` $query `,` $key `,` $value `,` $output `:`
    type($grad) `,` type($query) `,` type($key) `,` type($value) `,`
    type($output) `)` (`mask` `(` $key_padding_mask^ `:`
    type($key_padding_mask) `)`)? (`seed` `(` $seed^ `)`)?
    `outs` `(` $query_init `,` $key_init `,` $value_init `:` type($query_init)
    `,` type($key_init) `,` type($value_init) `)` attr-dict
    (`->` type($results)^)?
  }];
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return ::mlir::MutableOperandRange(getOperation(),
          getQueryInitMutable().getOperandNumber(), 3);
    }
  }];
}

#endif // KILN_DIALECT_KILN_IR_KILNATTENTIONOPS_TD
