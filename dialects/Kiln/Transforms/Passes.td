//===- Passes.td - Kiln dialect passes ---------------------*- tablegen -*-===//
//
// Transformations on kiln IR.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECTS_KILN_TRANSFORMS_PASSES_TD
#define KILN_DIALECTS_KILN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnStripDropoutPass : Pass<"kiln-strip-dropout"> {
  let summary = "Switch a model to evaluation mode by removing dropout";
  let description = [{
    Evaluation (inference) mode of a model written once for training:
    every `kiln.dropout` is replaced by its input, and the attention and
    feed-forward dropout probabilities of `kiln.mha` and `kiln.ffn` are set
    to zero. The seeds stay as operands, unused.

    Before:
    ```mlir
    %y = kiln.dropout %x, %seed {p = 1.000000e-01 : f64}
        : (tensor<?x128xf32>, i64) -> tensor<?x128xf32>
    %z = kiln.ffn relu %y, %w1, %w2 seed %seed {dropout = 1.000000e-01 : f64}
        : (tensor<?x128xf32>, tensor<512x128xf32>, tensor<128x512xf32>, i64)
        -> tensor<?x128xf32>
    ```
    After:
    ```mlir
    %z = kiln.ffn relu %x, %w1, %w2 seed %seed
        : (tensor<?x128xf32>, tensor<512x128xf32>, tensor<128x512xf32>, i64)
        -> tensor<?x128xf32>
    ```
  }];
  let dependentDialects = ["::mlir::kiln::KilnDialect"];
}

def KilnWidenBf16Pass : Pass<"kiln-widen-bf16"> {
  let summary = "Compute every kiln op on bf16 tensors in f32, between casts";
  let description = [{
    bf16 is a storage type in Kiln: every kiln op whose floating-point
    operands and results are bf16 becomes the same op in f32, its operands
    widened by `kiln.cast` (exactly) and its results rounded back to bf16 by
    `kiln.cast` (to the nearest, ties to even). Products accumulate in f32,
    normalization statistics, softmax and losses are computed in f32; only
    what is stored between ops is bf16. Ops that only move elements
    (reshape, transpose, slice, concat, update_slice, embedding's gather)
    and constants stay in bf16. The casts lower to elementwise linalg ops that kiln-fuse-elementwise
    fuses into their elementwise neighbours, so a chain of elementwise ops
    reads and writes bf16 once. The first pass of the lowering to linalg.

    ```mlir
    %y = kiln.gelu %x : (tensor<?x768xbf16>) -> tensor<?x768xbf16>
    // becomes
    %w = kiln.cast %x : (tensor<?x768xbf16>) -> tensor<?x768xf32>
    %g = kiln.gelu %w : (tensor<?x768xf32>) -> tensor<?x768xf32>
    %y = kiln.cast %g : (tensor<?x768xf32>) -> tensor<?x768xbf16>
    ```

    With `rounding-products` (the CPU's bf16 precision, whose products round
    their operands to bf16 while packing them: kiln-bf16-products), an
    operand of a matrix product (linear's input and weight, matmul's, ffn's
    input and weights, mha's inputs and projection weights; not biases)
    that is an f32 value rounded by a kiln.cast is read as that f32 value:
    the product sees the same bf16 values, and neither the rounded copy nor
    its widening is made. (Products of at most 4 rows, which CPU code
    streams in f32, then read the unrounded values.)
  }];
  let options = [
    Option<"roundingProducts", "rounding-products", "bool", "false",
           "The products round their operands to bf16 themselves">
  ];
  let dependentDialects = ["::mlir::kiln::KilnDialect"];
}

def KilnAutodiffPass : Pass<"kiln-autodiff", "::mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of a loss function";
  let description = [{
    For the function named by `function`, whose first result is a scalar
    loss (`tensor<f32>`), adds a function `<function>_grad` with the same
    arguments that returns the loss followed by the gradient of the loss
    with respect to every trainable argument: the arguments marked
    `kiln.kind = "param"` or, when no argument is marked, every f32 tensor
    argument. Each gradient result carries `kiln.name = "grad.<argument>"`.

    The function is walked backwards from the loss; every kiln op states its
    vector-Jacobian product through `GradientOpInterface`, and gradients that
    reach a value along several paths are summed. An op without a gradient
    on the path to the loss is an error naming it.

    Before:
    ```mlir
    func.func @loss(%x: tensor<4xf32>, %w: tensor<4xf32> {kiln.kind = "param"})
        -> tensor<f32> {
      %0 = kiln.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %1 = kiln.reduce sum %0 {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      return %1 : tensor<f32>
    }
    ```
    After (added):
    ```mlir
    func.func @loss_grad(%x: tensor<4xf32>, %w: tensor<4xf32> {kiln.kind = "param"})
        -> (tensor<f32>, tensor<4xf32> {kiln.name = "grad.arg1"}) {
      ... forward ...
      %g = kiln.constant dense<1.0> : tensor<f32>
      ... d(reduce), d(mul) ...
      return %1, %dw : tensor<f32>, tensor<4xf32>
    }
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"loss\"",
           "The loss function to differentiate">
  ];
  let dependentDialects = ["::mlir::kiln::KilnDialect"];
}

def KilnExposeValuesPass : Pass<"kiln-expose-values", "::mlir::ModuleOp"> {
  let summary = "Return every value a function's kiln ops compute";
  let description = [{
    For looking inside a compiled function: `function` also returns, after
    its own results, every f32 tensor that a kiln op in its body computes,
    in program order, each result named (`kiln.name`) after its op and the
    op's location, e.g. `"#3:kiln.linear@model.cpp:42:7"` (the number
    counts the exposed values from 0; `.1` after the op name for its second
    result; characters outside printable ASCII, and spaces, become `_`). The precision check
    (kiln::checkPrecision, kiln-precision-check) compiles a function with
    its values exposed in fp32 and in bf16 and compares them value by value.
    Values that feed no result until now stay computed: nothing is
    removed as dead.

    Before:
    ```mlir
    func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %0 = kiln.gelu %x : tensor<4x8xf32> -> tensor<4x8xf32>
      %1 = kiln.add %0, %x : ...
      return %1 : tensor<4x8xf32>
    }
    ```
    After:
    ```mlir
    func.func @f(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>,
        tensor<4x8xf32> {kiln.name = "#0:kiln.gelu@f.mlir:2:8"},
        tensor<4x8xf32> {kiln.name = "#1:kiln.add@f.mlir:3:8"}) {
      ...
      return %1, %0, %1 : ...
    }
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"\"",
           "The function whose values are returned">
  ];
  let dependentDialects = ["::mlir::kiln::KilnDialect"];
}

def KilnTrainingStepPass : Pass<"kiln-training-step", "::mlir::ModuleOp"> {
  let summary = "One compiled training step: loss, gradients and update";
  let description = [{
    Adds `train_step`: the loss of `function`, its gradients (as
    kiln-autodiff computes them), optional clipping by global norm, and one
    optimizer update of every parameter, in one function. Its arguments are
    those of `function`, then the optimizer state of each parameter in order
    (`adam`/`adamw`: the moments `<name>.m` and `<name>.v`; `sgd`: the
    momentum buffer `<name>.momentum`; marked `kiln.kind = "state"`), then
    the learning rate `lr` (`tensor<f32>`) and the step number `step` (i64,
    1 for the first step). It returns the loss, the updated parameters
    (`param.<name>`) and the updated state (`state.<name>`), each marked
    `kiln.updates = <argument>` with the argument it replaces: CPU code
    writes them into those arguments in place (kiln-mark-in-place-arguments,
    kiln-drop-in-place-results). The updates are guarded by the loss
    (`if_finite`): a step whose loss is not finite changes nothing.

    ```mlir
    // kiln-opt --kiln-training-step=optimizer=adamw adds:
    func.func @train_step(%x: ..., %w: ... {kiln.kind = "param"},
        %w_m: ... {kiln.kind = "state"}, %w_v: ..., %lr: tensor<f32>, %step: i64)
        -> (tensor<f32>, <w>, <w.m>, <w.v>)
    ```

    With `split` (data-parallel training: the gradients of every process are
    summed between the two halves) it adds two functions instead:
    `grad_step`, the loss and its gradients (`grad.<name>`) as
    kiln-autodiff computes them, and `update_step`, whose arguments are the
    parameters, their (averaged) gradients `grad.<name>`, the optimizer
    state, `lr`, `step` and the (averaged) `loss`, and which clips and
    updates as `train_step` does. When the loss is a mean `kiln.cross_entropy`
    or `kiln.nll_loss` whose targets are an argument, `grad_step` records
    that argument and the ignored id (`kiln.loss_tokens = {arg, ignore_index}`)
    so the runtime weighs each process's loss by its count of kept tokens.

    ```mlir
    // kiln-opt --kiln-training-step="optimizer=adamw split=1" adds:
    func.func @grad_step(%x: ..., %t: ..., %w: ... {kiln.kind = "param"})
        -> (tensor<f32>, <grad.w>) attributes {kiln.loss_tokens = {arg = 1}}
    func.func @update_step(%w: ... {kiln.kind = "param"}, %g: ... {kiln.name = "grad.w"},
        %w_m: ..., %w_v: ..., %lr: tensor<f32>, %step: i64, %loss: tensor<f32>)
        -> (<w>, <w.m>, <w.v>)
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"loss\"",
           "The loss function">,
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"",
           "adamw, adam or sgd">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "Adam beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "Adam beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "Adam epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.0",
           "Weight decay (decoupled for adamw)">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0",
           "SGD momentum">,
    Option<"clipNorm", "clip-norm", "double", /*default=*/"0.0",
           "Clip the gradients' global norm to this (0: no clipping)">,
    Option<"split", "split", "bool", /*default=*/"false",
           "Emit grad_step and update_step (data-parallel training) instead "
           "of train_step">
  ];
  let dependentDialects = ["::mlir::kiln::KilnDialect"];
}

#endif // KILN_DIALECTS_KILN_TRANSFORMS_PASSES_TD
