//===- KilnLayerOps.td - Kiln layer operations -------------*- tablegen -*-===//
//
// The building blocks of a transformer (embedding, positional encoding, layer
// normalization, feed-forward block) and its linear algebra (linear, matmul).
// Included by KilnOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNLAYEROPS_TD
#define KILN_DIALECT_KILN_IR_KILNLAYEROPS_TD

include "dialects/Kiln/IR/KilnBase.td"
include "dialects/Kiln/IR/KilnInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

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

def Kiln_RmsNormOp : Kiln_Op<"rms_norm", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let summary = "root-mean-square normalization over the last dimension";
  let description = [{
    Scales every vector along the last dimension of `input` (`[..., D]`) by
    the reciprocal of its root mean square and multiplies by `weight` (`[D]`):

    ```
    result = input * rsqrt(mean(input²) + eps) * weight
    ```

    as Hugging Face's `LlamaRMSNorm` and `torch.nn.RMSNorm` compute it (no
    mean is subtracted, no bias). The statistics are computed in f32.

    ```mlir
    %y = kiln.rms_norm %x, %w {eps = 1.0e-06 : f64}
        : (tensor<?x?x768xf32>, tensor<768xf32>) -> tensor<?x?x768xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$weight,
                       DefaultValuedAttr<F64Attr, "1e-6">:$eps);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Kiln_RotaryOp
    : Kiln_Op<"rotary", [Pure, InferTypeOpAdaptor,
                         DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let summary = "rotary position embedding (RoPE) of projected heads";
  let description = [{
    Rotates the query or key heads of `input` (`[..., T, D]`, the heads of
    width `head_dim` side by side along `D`, as a projection writes them) by
    their position: position `t` of the sequence (the second-to-last
    dimension) is `offset + t` (`offset` an i64, default 0: the first new
    position of a cached decoder). In each head, features `a` and `b` of
    pair `i` (`0 <= i < head_dim / 2`) turn by the angle
    `p · theta^(-2i / head_dim)`:

    ```
    out_a = x_a·cos(angle) - x_b·sin(angle)
    out_b = x_b·cos(angle) + x_a·sin(angle)
    ```

    - `style = half` (the default, Hugging Face Llama's `rotate_half`):
      `a = i`, `b = i + head_dim / 2`.
    - `style = interleaved` (the RoFormer paper, GPT-J, Meta's original
      Llama code): `a = 2i`, `b = 2i + 1`.

    `head_dim` must be even and divide `D`; it need not be a multiple of
    the vector width. `inverse` turns by the negated angle (the rotation's
    transpose, which is its gradient). The angles are computed once per
    position and pair, in f32 as Hugging Face computes them.

    ```mlir
    %q1 = kiln.rotary %q {head_dim = 64 : i64, theta = 1.0e+04 : f64}
        : (tensor<?x?x512xf32>) -> tensor<?x?x512xf32>
    %k1 = kiln.rotary %k offset %pos {head_dim = 64 : i64, style = #kiln<rotary_style interleaved>}
        : (tensor<?x1x256xf32>, i64) -> tensor<?x1x256xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Optional<Kiln_Offset>:$offset,
                       I64Attr:$head_dim,
                       DefaultValuedAttr<F64Attr, "10000.0">:$theta,
                       DefaultValuedAttr<Kiln_RotaryStyleAttr,
                                         "RotaryStyle::half">:$style,
                       UnitAttr:$inverse);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`offset` $offset^)? attr-dict `:` functional-type(operands, results)
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

#endif // KILN_DIALECT_KILN_IR_KILNLAYEROPS_TD
