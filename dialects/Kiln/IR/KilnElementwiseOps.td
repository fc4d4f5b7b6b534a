//===- KilnElementwiseOps.td - Kiln elementwise operations -*- tablegen -*-===//
//
// Broadcasting binary ops, unary ops, scale and dropout. Included by
// KilnOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNELEMENTWISEOPS_TD
#define KILN_DIALECT_KILN_IR_KILNELEMENTWISEOPS_TD

include "dialects/Kiln/IR/KilnBase.td"
include "dialects/Kiln/IR/KilnInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

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

def Kiln_SiluOp : Kiln_UnaryOp<"silu", "x * sigmoid(x)", [DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let description = [{
    Computes `x * sigmoid(x) = x / (1 + exp(-x))` for every element
    (`torch.nn.functional.silu`). With `kiln.mul` it forms the SwiGLU of
    Llama's feed-forward block, `silu(x·w_gateᵀ) * (x·w_upᵀ)`; the lowering
    fuses the two into one loop.

    ```mlir
    %y = kiln.silu %x : (tensor<?x512xf32>) -> tensor<?x512xf32>
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

def Kiln_CastOp : Kiln_Op<"cast", [Pure, DeclareOpInterfaceMethods<Kiln_GradientOpInterface>]> {
  let summary = "convert between floating-point element types";
  let description = [{
    The input's elements as the result's element type, of the same shape:
    f32 to bf16 rounds to the nearest, ties to even (infinities and NaNs
    stay); bf16 to f32 is exact. The one op whose operand and result differ
    in element type: every other kiln op has one floating-point element type
    for all its operands and results. Its gradient is the result's gradient
    cast back. A cast to the input's own type folds away, and so does a bf16
    value widened to f32 and rounded back.

    ```mlir
    %h = kiln.cast %x : (tensor<?x768xf32>) -> tensor<?x768xbf16>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

#endif // KILN_DIALECT_KILN_IR_KILNELEMENTWISEOPS_TD
