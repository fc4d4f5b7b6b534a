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

#endif // KILN_DIALECTS_KILN_TRANSFORMS_PASSES_TD
