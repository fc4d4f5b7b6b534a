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

#endif // KILN_DIALECTS_KILN_TRANSFORMS_PASSES_TD
