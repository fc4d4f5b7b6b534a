//===- KilnBackwardOps.td - Kiln backward operations -------*- tablegen -*-===//
//
// The gradients kiln-autodiff builds of embeddings, activations, layer
// normalization, losses and learned positions (attention_grad is with the
// attention ops, reduce_max_grad with the reductions). Included by KilnOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNBACKWARDOPS_TD
#define KILN_DIALECT_KILN_IR_KILNBACKWARDOPS_TD

include "dialects/Kiln/IR/KilnBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

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

def Kiln_RmsNormGradOp
    : Kiln_Op<"rms_norm_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "gradients of a root-mean-square normalization";
  let description = [{
    Given the output gradient `grad` of `kiln.rms_norm` applied to `input`
    with `weight` and `eps`, returns the gradients of the input and of
    `weight`, with `r = rsqrt(mean(x²) + eps)` recomputed per row:

    ```
    input_grad  = r·(grad·weight) - x·r³/D·Σ(grad·weight·x)
    weight_grad = Σ_rows grad·x·r
    ```

    ```mlir
    %dx, %dw = kiln.rms_norm_grad %g, %x, %w {eps = 1.0e-06 : f64}
        : (tensor<?x?x128xf32>, tensor<?x?x128xf32>, tensor<128xf32>)
        -> (tensor<?x?x128xf32>, tensor<128xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$grad, Kiln_FloatTensor:$input,
                       Kiln_FloatTensor:$weight,
                       DefaultValuedAttr<F64Attr, "1e-6">:$eps);
  let results = (outs Kiln_FloatTensor:$input_grad,
                      Kiln_FloatTensor:$weight_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $weight attr-dict `:` functional-type(operands, results)
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

#endif // KILN_DIALECT_KILN_IR_KILNBACKWARDOPS_TD
