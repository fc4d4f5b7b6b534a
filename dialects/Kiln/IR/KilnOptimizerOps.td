//===- KilnOptimizerOps.td - Kiln optimizer updates --------*- tablegen -*-===//
//
// Adam(W) and SGD steps and global-norm gradient clipping, the last part of a
// compiled training step. Included by KilnOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNOPTIMIZEROPS_TD
#define KILN_DIALECT_KILN_IR_KILNOPTIMIZEROPS_TD

include "dialects/Kiln/IR/KilnBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

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

#endif // KILN_DIALECT_KILN_IR_KILNOPTIMIZEROPS_TD
