//===- KilnOps.td - Kiln dialect operations ----------------*- tablegen -*-===//
//
// Every op infers its result type from its operands (the DSL never spells a
// result type) and has a verifier that names the offending values.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNOPS_TD
#define KILN_DIALECT_KILN_IR_KILNOPS_TD

include "dialects/Kiln/IR/KilnBase.td"
include "dialects/Kiln/IR/KilnInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

//===----------------------------------------------------------------------===//
// Building blocks
//===----------------------------------------------------------------------===//

def Kiln_EmbeddingOp : Kiln_Op<"embedding", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let summary = "token embedding lookup";
  let description = [{
    Looks up one row of `table` (`[V, D]`, PyTorch's `nn.Embedding.weight`)
    per id: the result has the shape of `ids` followed by `D`. Ids may have
    any rank and be i32 or i64. `padding_idx`, when present, names a row that
    reads normally but receives no gradient.

    ```mlir
    %e = kiln.embedding %ids, %wte {padding_idx = 0 : i64}
        : (tensor<?x?xi64>, tensor<30522x768xf32>) -> tensor<?x?x768xf32>
    ```
  }];
  let arguments = (ins Kiln_IndexTensor:$ids, Kiln_FloatTensor:$table,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat =
      "$ids `,` $table attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Kiln_PositionalEncodingOp
    : Kiln_Op<"pe", [Pure, InferTypeOpAdaptor, AttrSizedOperandSegments,
                     DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let summary = "add a positional encoding";
  let description = [{
    Adds a positional encoding to `input` (`[..., T, D]`): position `p` of the
    sequence (the second-to-last dimension) gets row `offset + p`.

    - `sinusoidal`: the fixed encoding of "Attention is all you need",
      `PE(p, 2i) = sin(p / 10000^(2i/D))`, `PE(p, 2i+1) = cos(p / 10000^(2i/D))`;
      an odd `D` is allowed (the last column is a sine). It has no parameters
      and takes no `table`.
    - `learned`: absolute positions read from `table` (`[max_len, D]`, GPT-2's
      `wpe`). A sequence longer than `max_len` is rejected by the verifier when
      the sizes are static and reported at run time otherwise.

    `offset` (an i64, default 0) is the position of the first element, for
    incremental decoding.

    ```mlir
    %x1 = kiln.pe sinusoidal %x : (tensor<?x?x512xf32>) -> tensor<?x?x512xf32>
    %x2 = kiln.pe learned %x table %wpe offset %pos
        : (tensor<1x1x768xf32>, tensor<1024x768xf32>, i64) -> tensor<1x1x768xf32>
    ```
  }];
  let arguments = (ins Kiln_PEKindAttr:$kind, Kiln_FloatTensor:$input,
                       Optional<Kiln_FloatTensor>:$table,
                       Optional<Kiln_Offset>:$offset);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    `` $kind $input (`table` $table^)? (`offset` $offset^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Kiln_LayerNormOp : Kiln_Op<"layernorm", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let summary = "layer normalization over the last dimension";
  let description = [{
    Normalizes every vector along the last dimension of `input` (`[..., D]`)
    and applies the affine `gamma * x_hat + beta` (`gamma`, `beta`: `[D]`).

    - `mode = standard` (the default, `torch.nn.LayerNorm`):
      `x_hat = (x - mean) / sqrt(var + eps)` with the biased variance.
    - `mode = std_eps` (the from-scratch LayerNorm of seed document 002):
      `x_hat = (x - mean) / (std + eps)` with the unbiased standard deviation.

    ```mlir
    %y = kiln.layernorm %x, %gamma, %beta {eps = 1.0e-05 : f64}
        : (tensor<?x?x768xf32>, tensor<768xf32>, tensor<768xf32>)
        -> tensor<?x?x768xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$gamma,
                       Kiln_FloatTensor:$beta,
                       DefaultValuedAttr<F64Attr, "1e-5">:$eps,
                       DefaultValuedAttr<Kiln_NormModeAttr,
                                         "NormMode::standard">:$mode);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma `,` $beta attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

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

def Kiln_FeedForwardOp
    : Kiln_Op<"ffn", [Pure, InferTypeOpAdaptor, AttrSizedOperandSegments,
                      DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let summary = "position-wise feed-forward block";
  let description = [{
    `input` is `[..., D]`, `w1` is `[F, D]`, `w2` is `[D, F]`:

    ```
    result = dropout(act(input·w1ᵀ + b1))·w2ᵀ + b2
    ```

    `activation` is `relu`, `gelu` (exact, erf) or `gelu_tanh`. The biases
    are optional (both or none). A non-zero `dropout` needs a `seed` operand;
    `stream` tells this dropout site apart from others that share the seed.

    ```mlir
    %y = kiln.ffn gelu %x, %w1, %w2 biases(%b1, %b2)
        : (tensor<?x?x128xf32>, tensor<512x128xf32>, tensor<128x512xf32>,
           tensor<512xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
    ```
  }];
  let arguments = (ins Kiln_ActivationAttr:$activation,
                       Kiln_FloatTensor:$input, Kiln_FloatTensor:$w1,
                       Kiln_FloatTensor:$w2, Optional<Kiln_FloatTensor>:$b1,
                       Optional<Kiln_FloatTensor>:$b2,
                       Optional<Kiln_Seed>:$seed,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout,
                       DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    `` $activation $input `,` $w1 `,` $w2 (`biases` `(` $b1^ `,` $b2 `)`)?
    (`seed` $seed^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def Kiln_LinearOp : Kiln_Op<"linear", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let summary = "affine map over the last dimension (torch.nn.Linear)";
  let description = [{
    `result = input·weightᵀ + bias` with `input` `[..., In]`, `weight`
    `[Out, In]` and the optional `bias` `[Out]`; the result is `[..., Out]`.
    A tied output head is a linear without bias whose weight is the
    embedding table.

    ```mlir
    %y = kiln.linear %x, %w, %b
        : (tensor<?x?x128xf32>, tensor<384x128xf32>, tensor<384xf32>)
        -> tensor<?x?x384xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$weight,
                       Optional<Kiln_FloatTensor>:$bias);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Kiln_MatmulOp : Kiln_Op<"matmul", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let summary = "batched matrix product";
  let description = [{
    Multiplies the last two dimensions of `lhs` (`[..., M, K]`) and `rhs`
    (`[..., K, N]`); the leading (batch) dimensions must agree. `transpose_lhs`
    and `transpose_rhs` swap the last two dimensions of an operand first.

    ```mlir
    %s = kiln.matmul %q, %k {transpose_rhs}
        : (tensor<?x8x?x64xf32>, tensor<?x8x?x64xf32>) -> tensor<?x8x?x?xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$lhs, Kiln_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Kiln_BinaryOp<string mnemonic, string expr, list<Trait> traits = []>
    : Kiln_Op<mnemonic, !listconcat([Pure, InferTypeOpAdaptor], traits)> {
  let summary = "elementwise " # expr # " with broadcasting";
  let description = [{
    Computes `}] # expr # [{` elementwise. The operands broadcast as in NumPy
    and PyTorch: shapes are aligned at the last dimension, and a dimension of
    size 1 stretches to match the other operand.

    ```mlir
    %y = kiln.}] # mnemonic # [{ %a, %b
        : (tensor<?x?x128xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$lhs, Kiln_FloatTensor:$rhs);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Kiln_AddOp : Kiln_BinaryOp<"add", "lhs + rhs", [Commutative, DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]>;
def Kiln_SubOp : Kiln_BinaryOp<"sub", "lhs - rhs", [DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]>;
def Kiln_MulOp : Kiln_BinaryOp<"mul", "lhs * rhs", [Commutative, DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]>;
def Kiln_DivOp : Kiln_BinaryOp<"div", "lhs / rhs", [DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]>;

class Kiln_UnaryOp<string mnemonic, string expr, list<Trait> traits = []>
    : Kiln_Op<mnemonic, !listconcat([Pure, InferTypeOpAdaptor], traits)> {
  let summary = "elementwise " # expr;
  let description = [{
    Computes `}] # expr # [{` for every element.

    ```mlir
    %y = kiln.}] # mnemonic # [{ %x : (tensor<?x512xf32>) -> tensor<?x512xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Kiln_ReluOp : Kiln_UnaryOp<"relu", "max(x, 0)", [DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]>;
def Kiln_TanhOp : Kiln_UnaryOp<"tanh", "tanh(x)", [DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]>;
def Kiln_ExpOp : Kiln_UnaryOp<"exp", "exp(x)", [DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]>;
def Kiln_LogOp : Kiln_UnaryOp<"log", "log(x)", [DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]>;
def Kiln_AbsOp : Kiln_UnaryOp<"abs", "|x|", [DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let description = [{
    Computes `|x|` for every element. The gradient is `g * sign(x)`, with 0
    at `x == 0` (as PyTorch's `torch.abs`).

    ```mlir
    %y = kiln.abs %x : (tensor<?x512xf32>) -> tensor<?x512xf32>
    ```
  }];
}

def Kiln_GeluOp : Kiln_Op<"gelu", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let summary = "elementwise GELU";
  let description = [{
    `x * Phi(x)` with the exact erf form, or with `approximate_tanh` the
    tanh approximation `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`
    (PyTorch's `approximate='tanh'`).

    ```mlir
    %y = kiln.gelu %x {approximate_tanh} : (tensor<?x512xf32>) -> tensor<?x512xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, UnitAttr:$approximate_tanh);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Kiln_ScaleOp : Kiln_Op<"scale", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let summary = "multiply by a constant";
  let description = [{
    Multiplies every element by the constant `factor` (the `sqrt(d_model)`
    scaling of token embeddings, for instance).

    ```mlir
    %y = kiln.scale %x {factor = 22.627417 : f64}
        : (tensor<?x?x512xf32>) -> tensor<?x?x512xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, F64Attr:$factor);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def Kiln_DropoutOp : Kiln_Op<"dropout", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let summary = "inverted dropout";
  let description = [{
    In training, zeroes each element with probability `p` and scales the
    others by `1 / (1 - p)`; the mask is a pure function of (`seed`, `stream`,
    element index), so the same seed reproduces it exactly (for the backward
    pass and for resumed runs). `stream` tells dropout sites that share one
    seed apart. In evaluation mode (`kiln-strip-dropout`) it is the identity,
    and with `p = 0` it folds away.

    ```mlir
    %y = kiln.dropout %x, %seed {p = 1.000000e-01 : f64, stream = 3 : i64}
        : (tensor<?x?x512xf32>, i64) -> tensor<?x?x512xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_Seed:$seed, F64Attr:$p,
                       DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat =
      "$input `,` $seed attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Normalizations and reductions
//===----------------------------------------------------------------------===//

class Kiln_SoftmaxLikeOp<string mnemonic, string what>
    : Kiln_Op<mnemonic, [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let summary = what # " along one axis";
  let description = [{
    Computes a numerically stable }] # what # [{ along `axis` (negative
    values count from the end; the default is the last axis).

    ```mlir
    %y = kiln.}] # mnemonic # [{ %x {axis = -1 : i64}
        : (tensor<?x?x65xf32>) -> tensor<?x?x65xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input,
                       DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Kiln_SoftmaxOp : Kiln_SoftmaxLikeOp<"softmax", "softmax">;
def Kiln_LogSoftmaxOp : Kiln_SoftmaxLikeOp<"log_softmax", "log-softmax">;

def Kiln_ReduceOp : Kiln_Op<"reduce", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let summary = "sum, mean or max over axes";
  let description = [{
    Reduces `input` over the distinct, non-empty set of `axes` (negative
    values count from the end). The reduced axes are dropped, or kept with
    size 1 when `keep_dims` is set.

    ```mlir
    %m = kiln.reduce mean %x {axes = array<i64: -1>, keep_dims}
        : (tensor<?x?x128xf32>) -> tensor<?x?x1xf32>
    ```
  }];
  let arguments = (ins Kiln_ReduceKindAttr:$kind, Kiln_FloatTensor:$input,
                       DenseI64ArrayAttr:$axes, UnitAttr:$keep_dims);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat =
      "`` $kind $input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

def Kiln_ReshapeOp : Kiln_Op<"reshape", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let summary = "reshape to a new shape with the same number of elements";
  let description = [{
    Each entry of `shape` is a size, `0` to keep the input's dimension at the
    same index (so dynamic batch and sequence sizes carry through), or `-1`
    (at most once) for the size that keeps the element count.

    ```mlir
    // [B, T, 512] -> [B, T, 8, 64]: split the model width into heads.
    %h = kiln.reshape %x [0, 0, 8, 64]
        : (tensor<?x?x512xf32>) -> tensor<?x?x8x64xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, DenseI64ArrayAttr:$shape);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat =
      "$input $shape attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Kiln_TransposeOp : Kiln_Op<"transpose", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let summary = "permute dimensions";
  let description = [{
    Result dimension `i` is input dimension `permutation[i]`.

    ```mlir
    %t = kiln.transpose %h [0, 2, 1, 3]
        : (tensor<?x?x8x64xf32>) -> tensor<?x8x?x64xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input,
                       DenseI64ArrayAttr:$permutation);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat =
      "$input $permutation attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Kiln_SliceOp : Kiln_Op<"slice", [Pure, InferTypeOpAdaptor,
                                   DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let summary = "contiguous slice along one axis";
  let description = [{
    Keeps `input[..., start:end, ...]` along `axis`, with Python's meaning:
    negative `start`/`end` count from the end of the dimension, and a missing
    `end` means "to the end". `start:end` must select at least one element.

    ```mlir
    // The q third of a fused QKV projection.
    %q = kiln.slice %qkv {axis = -1 : i64, start = 0 : i64, end = 128 : i64}
        : (tensor<?x?x384xf32>) -> tensor<?x?x128xf32>
    // The last position of a sequence of any length.
    %l = kiln.slice %logits {axis = 1 : i64, start = -1 : i64}
        : (tensor<?x?x65xf32>) -> tensor<?x1x65xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, I64Attr:$axis, I64Attr:$start,
                       OptionalAttr<I64Attr>:$end);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Kiln_ConcatOp : Kiln_Op<"concat", [Pure, InferTypeOpAdaptor,
                                   DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let summary = "concatenate along one axis";
  let description = [{
    Joins the inputs along `axis`; all other dimensions must agree.

    ```mlir
    %c = kiln.concat %a, %b {axis = 1 : i64}
        : (tensor<?x3x64xf32>, tensor<?x5x64xf32>) -> tensor<?x8x64xf32>
    ```
  }];
  let arguments = (ins Variadic<Kiln_FloatTensor>:$inputs, I64Attr:$axis);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat =
      "$inputs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Kiln_UpdateSliceOp : Kiln_Op<"update_slice", [Pure, InferTypeOpAdaptor]> {
  let summary = "write a tensor into another at an offset along one axis";
  let description = [{
    `dest` with `source` written at positions `[offset, offset +
    source[axis])` along `axis` (`offset` an i64); every other dimension of
    the two is the same. `dest` has a static length along `axis` (a buffer of
    fixed capacity: a key/value cache), and the call checks that the
    positions lie within it. When a function result marked `kiln.updates`
    returns it in place of the argument `dest` is, compiled CPU code writes
    `source` into the caller's buffer and copies nothing else. No gradient.

    ```mlir
    %k = kiln.update_slice %cache, %new, %pos {axis = 1 : i64}
        : (tensor<?x1024x768xf32>, tensor<?x?x768xf32>, i64)
        -> tensor<?x1024x768xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$dest, Kiln_FloatTensor:$source,
                       Kiln_Offset:$offset, I64Attr:$axis);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$dest `,` $source `,` $offset attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Kiln_ConstantOp
    : Kiln_Op<"constant", [ConstantLike, Pure, InferTypeOpAdaptor]> {
  let summary = "constant tensor";
  let description = [{
    A tensor given by its elements.

    ```mlir
    %c = kiln.constant dense<[1.0, 2.0]> : tensor<2xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

class Kiln_LossOp<string mnemonic, string what, string input>
    : Kiln_Op<mnemonic, [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let summary = what # " loss with ignore_index and label smoothing";
  let description = [{
    `}] # input # [{` is `[..., C]` (classes last, as a language model
    produces them) and `targets` is the matching `[...]` of class ids (i32 or
    i64). Per position the loss is `-(1 - s)·logp[target] - s·mean_c(logp[c])`
    with `s = label_smoothing` and `logp` the log-probabilities}] #
    !if(!eq(mnemonic, "cross_entropy"),
        " (log_softmax of the logits)", " given as input") # [{.
    Positions whose target equals `ignore_index` contribute nothing.
    `reduction` is `mean` (over the positions not ignored, as PyTorch does),
    `sum` (both give a rank-0 tensor) or `none` (one loss per position).

    ```mlir
    %l = kiln.}] # mnemonic # [{ %x, %t {ignore_index = 0 : i64,
        label_smoothing = 1.000000e-01 : f64}
        : (tensor<?x?x8000xf32>, tensor<?x?xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_IndexTensor:$targets,
                       OptionalAttr<I64Attr>:$ignore_index,
                       DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing,
                       DefaultValuedAttr<Kiln_LossReductionAttr,
                                         "LossReduction::mean">:$reduction);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat =
      "$input `,` $targets attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Kiln_CrossEntropyOp
    : Kiln_LossOp<"cross_entropy", "cross-entropy", "input (logits)">;
def Kiln_NLLLossOp
    : Kiln_LossOp<"nll_loss", "negative log-likelihood", "input (log-probabilities)">;

//===----------------------------------------------------------------------===//
// Backward ops (built by kiln-autodiff)
//===----------------------------------------------------------------------===//

def Kiln_EmbeddingGradOp
    : Kiln_Op<"embedding_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "gradient of an embedding table (scatter-add)";
  let description = [{
    The gradient of `kiln.embedding` with respect to its `[num_embeddings,
    D]` table: row `v` is the sum of the output gradients `grad` (`[ids...,
    D]`) at the positions whose id is `v`. The `padding_idx` row, when
    given, is exactly zero. Ids outside the table contribute nothing.

    ```mlir
    %dt = kiln.embedding_grad %g, %ids {num_embeddings = 65 : i64, padding_idx = 0 : i64}
        : (tensor<?x?x128xf32>, tensor<?x?xi64>) -> tensor<65x128xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$grad, Kiln_IndexTensor:$ids,
                       I64Attr:$num_embeddings,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat =
      "$grad `,` $ids attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Kiln_ActivationGradOp
    : Kiln_Op<"activation_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "gradient of relu, gelu or gelu_tanh";
  let description = [{
    `grad · act'(input)` elementwise, where `act` is the activation of
    `kiln.relu` (`relu`, derivative 0 at 0), `kiln.gelu` (`gelu`,
    `Φ(x) + x·φ(x)`) or `kiln.gelu {approximate_tanh}` (`gelu_tanh`).

    ```mlir
    %dx = kiln.activation_grad gelu %g, %x
        : (tensor<?x512xf32>, tensor<?x512xf32>) -> tensor<?x512xf32>
    ```
  }];
  let arguments = (ins Kiln_ActivationAttr:$activation, Kiln_FloatTensor:$grad,
                       Kiln_FloatTensor:$input);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    `` $activation $grad `,` $input attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Kiln_ReduceMaxGradOp
    : Kiln_Op<"reduce_max_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "gradient of a max reduction";
  let description = [{
    Given the gradient `grad` of `kiln.reduce max %input` (same `axes` and
    `keep_dims`), returns the input's gradient: `grad` at the positions that
    hold the maximum of their slice, shared equally when several do (as
    PyTorch's `amax`), zero elsewhere. The maxima are recomputed.

    ```mlir
    %dx = kiln.reduce_max_grad %g, %x {axes = array<i64: -1>}
        : (tensor<?x?xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$grad, Kiln_FloatTensor:$input,
                       DenseI64ArrayAttr:$axes, UnitAttr:$keep_dims);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $input attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Kiln_LayerNormGradOp
    : Kiln_Op<"layernorm_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "gradients of a layer normalization";
  let description = [{
    Given the output gradient `grad` of `kiln.layernorm` applied to `input`
    with `gamma`, `eps` and `mode`, returns the gradients of the input, of
    `gamma` and of `beta`, computed row by row in one fused pass (the
    row statistics are recomputed rather than stored).

    ```mlir
    %dx, %dg, %db = kiln.layernorm_grad %g, %x, %gamma {eps = 1.0e-05 : f64}
        : (tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<128xf32>)
        -> (tensor<?x?x128xf32>, tensor<128xf32>, tensor<128xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$grad, Kiln_FloatTensor:$input,
                       Kiln_FloatTensor:$gamma,
                       DefaultValuedAttr<F64Attr, "1e-5">:$eps,
                       DefaultValuedAttr<Kiln_NormModeAttr,
                                         "NormMode::standard">:$mode);
  let results = (outs Kiln_FloatTensor:$input_grad,
                      Kiln_FloatTensor:$gamma_grad,
                      Kiln_FloatTensor:$beta_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $gamma attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Kiln_LossGradOp : Kiln_Op<"loss_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "gradient of cross-entropy or NLL with respect to its input";
  let description = [{
    The gradient of `kiln.cross_entropy` (`from_logits`) or `kiln.nll_loss`
    with respect to `input` (`[..., C]`), given the gradient `loss_grad` of
    the loss (rank 0 for `mean`/`sum`, the targets' shape for `none`) and
    the same `targets`, `ignore_index`, `label_smoothing` and `reduction`.
    Per position, with `q = (1 - s)·onehot(target) + s/C` and `w = 0` for
    ignored positions: from logits `(softmax(x) - q)·w·g`, from
    log-probabilities `-q·w·g`; `mean` divides by the number of positions
    not ignored.

    ```mlir
    %dx = kiln.loss_grad %logits, %t, %g {from_logits, ignore_index = 0 : i64}
        : (tensor<?x?x65xf32>, tensor<?x?xi64>, tensor<f32>) -> tensor<?x?x65xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_IndexTensor:$targets,
                       Kiln_FloatTensor:$loss_grad, UnitAttr:$from_logits,
                       OptionalAttr<I64Attr>:$ignore_index,
                       DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing,
                       DefaultValuedAttr<Kiln_LossReductionAttr,
                                         "LossReduction::mean">:$reduction);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $targets `,` $loss_grad attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Kiln_AttentionOp
    : Kiln_Op<"attention", [Pure, InferTypeOpAdaptor, AttrSizedOperandSegments,
                            DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let summary = "scaled dot-product attention on projected inputs";
  let description = [{
    The core of `kiln.mha` without its projections: `query` `[B, Tq, D]`,
    `key` and `value` `[B, Tk, D]` are split into `num_heads` heads, and per
    head `softmax(Q·Kᵀ/sqrt(D/H) + masks)·V` is computed, with the same
    `key_padding_mask`, `causal`, `dropout`, `seed` and `stream` semantics as
    `kiln.mha`. The heads are concatenated back to `[B, Tq, D]`.
    `kiln-autodiff` uses it to take `kiln.mha` apart.

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
                       DefaultValuedAttr<I64Attr, "0">:$stream);
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
    whole row of scores first; `kiln-autodiff` passes it.

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
                       DefaultValuedAttr<I64Attr, "0">:$stream);
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

def Kiln_PositionalEncodingGradOp
    : Kiln_Op<"pe_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "gradient of a learned position table";
  let description = [{
    The gradient of `kiln.pe learned` with respect to its `[max_len, D]`
    table: row `offset + p` is the sum over the leading (batch) dimensions
    of the output gradient `grad` (`[..., T, D]`) at position `p`; the rows
    no position reached are zero.

    ```mlir
    %dt = kiln.pe_grad %g offset %pos {max_len = 128 : i64}
        : (tensor<?x?x64xf32>, i64) -> tensor<128x64xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$grad, Optional<Kiln_Offset>:$offset,
                       I64Attr:$max_len);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $grad (`offset` $offset^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Optimizer updates (the last part of a compiled training step)
//===----------------------------------------------------------------------===//

def Kiln_AdamUpdateOp : Kiln_Op<"adam_update", [Pure, InferTypeOpAdaptor]> {
  let summary = "one Adam or AdamW step of a parameter";
  let description = [{
    PyTorch's `torch.optim.Adam` / `AdamW` update of `param` from `grad` and
    the moments `m`, `v`, at step `step` (1 for the first step) with learning
    rate `lr` (rank 0, so that a schedule changes it without recompiling):

    ```
    AdamW (decoupled): p = p - lr·weight_decay·p      Adam: g = g + weight_decay·p
    m = beta1·m + (1 - beta1)·g;   v = beta2·v + (1 - beta2)·g²
    p = p - lr·(m / (1 - beta1^step)) / (sqrt(v / (1 - beta2^step)) + eps)
    ```

    Returns the new parameter and moments. With `if_finite %loss` (a rank-0
    tensor), the update applies only when `%loss` is finite; otherwise the
    results equal `param`, `m` and `v` (a training step whose loss is NaN or
    infinite changes nothing).

    ```mlir
    %p1, %m1, %v1 = kiln.adam_update %p, %g, %m, %v, %lr, %step
        if_finite %loss {decoupled, weight_decay = 0.01 : f64}
        : (tensor<128x64xf32>, tensor<128x64xf32>, tensor<128x64xf32>,
           tensor<128x64xf32>, tensor<f32>, i64, tensor<f32>)
        -> (tensor<128x64xf32>, tensor<128x64xf32>, tensor<128x64xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$param, Kiln_FloatTensor:$grad,
                       Kiln_FloatTensor:$m, Kiln_FloatTensor:$v,
                       Kiln_FloatTensor:$lr, I64:$step,
                       Optional<Kiln_FloatTensor>:$guard,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, "1e-8">:$eps,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       UnitAttr:$decoupled);
  let results = (outs Kiln_FloatTensor:$new_param, Kiln_FloatTensor:$new_m,
                      Kiln_FloatTensor:$new_v);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `,` $lr `,` $step
    (`if_finite` $guard^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Kiln_SgdUpdateOp : Kiln_Op<"sgd_update", [Pure, InferTypeOpAdaptor]> {
  let summary = "one SGD step of a parameter, with momentum and weight decay";
  let description = [{
    PyTorch's `torch.optim.SGD` (no dampening, no Nesterov): with
    `g = grad + weight_decay·param`, `buf = momentum·buf + g` (a zero buffer
    on the first step gives PyTorch's `buf = g`) and
    `param = param - lr·buf`; without momentum, `param - lr·g`. Returns the
    new parameter and buffer; with `if_finite %loss`, only when `%loss` is
    finite (otherwise `param` and `buf` unchanged), as `kiln.adam_update`.

    ```mlir
    %p1, %b1 = kiln.sgd_update %p, %g, %buf, %lr {momentum = 0.9 : f64}
        : (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<f32>)
        -> (tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$param, Kiln_FloatTensor:$grad,
                       Kiln_FloatTensor:$buf, Kiln_FloatTensor:$lr,
                       Optional<Kiln_FloatTensor>:$guard,
                       DefaultValuedAttr<F64Attr, "0.0">:$momentum,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay);
  let results = (outs Kiln_FloatTensor:$new_param, Kiln_FloatTensor:$new_buf);
  let assemblyFormat = [{
    $param `,` $grad `,` $buf `,` $lr (`if_finite` $guard^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Kiln_GlobalNormScaleOp
    : Kiln_Op<"global_norm_scale", [Pure, InferTypeOpAdaptor]> {
  let summary = "the factor that clips gradients to a global norm";
  let description = [{
    `min(1, max_norm / (‖(g₁, g₂, …)‖₂ + 1e-6))` over every element of every
    input, as `torch.nn.utils.clip_grad_norm_` computes it: multiplying each
    gradient by it clips their global norm to `max_norm`.

    ```mlir
    %s = kiln.global_norm_scale %g1, %g2 {max_norm = 1.0 : f64}
        : (tensor<64x32xf32>, tensor<32xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<Kiln_FloatTensor>:$inputs, F64Attr:$max_norm);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat =
      "$inputs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // KILN_DIALECT_KILN_IR_KILNOPS_TD
