//===- KilnLossOps.td - Kiln loss operations ---------------*- tablegen -*-===//
//
// Cross-entropy and negative log-likelihood. Included by KilnOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNLOSSOPS_TD
#define KILN_DIALECT_KILN_IR_KILNLOSSOPS_TD

include "dialects/Kiln/IR/KilnBase.td"
include "dialects/Kiln/IR/KilnInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

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

#endif // KILN_DIALECT_KILN_IR_KILNLOSSOPS_TD
