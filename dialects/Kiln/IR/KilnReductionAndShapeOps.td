//===- KilnReductionAndShapeOps.td - Reductions, shape ops -*- tablegen -*-===//
//
// Softmax, reductions (with the gradient of a max reduction) and shape
// manipulation: reshape, transpose, slice, concat, update_slice, constant.
// Included by KilnOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNREDUCTIONANDSHAPEOPS_TD
#define KILN_DIALECT_KILN_IR_KILNREDUCTIONANDSHAPEOPS_TD

include "dialects/Kiln/IR/KilnBase.td"
include "dialects/Kiln/IR/KilnInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

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

#endif // KILN_DIALECT_KILN_IR_KILNREDUCTIONANDSHAPEOPS_TD
