//===- KilnInterfaces.td - Kiln op interfaces --------------*- tablegen -*-===//
//
// The gradient interface through which every differentiable kiln op states
// its vector-Jacobian product, and the shape contract every kiln op states.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNINTERFACES_TD
#define KILN_DIALECT_KILN_IR_KILNINTERFACES_TD

include "mlir/IR/OpBase.td"

def Kiln_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::mlir::kiln";
  let description = [{
    An op that reverse-mode differentiation (`kiln-autodiff`) can go
    through. Given the gradient of the loss with respect to each result
    (null for a result the loss does not depend on), the op builds, at the
    builder's insertion point, the gradient with respect to each operand:
    one value per operand, null for operands that take no gradient (token
    ids, masks, seeds). Gradients have exactly their operand's type.
  }];
  let methods = [
    InterfaceMethod<
      "Builds the vector-Jacobian product of the op.",
      "::llvm::LogicalResult", "buildGradients",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGradients,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGradients)>
  ];
}

def Kiln_ShapeContractOpInterface : OpInterface<"ShapeContractOpInterface"> {
  let cppNamespace = "::mlir::kiln";
  let description = [{
    What the op's code assumes of the sizes of its operands and results
    beyond their static types: dimensions that must be equal, ids that
    index a table, positions that must lie in a learned table, and sizes
    that are sums of others (see ShapeContract.h). The JIT and ahead-of-time
    entry points check every such condition that reaches a function
    argument before each call, so that no input makes compiled code read
    out of bounds. Every kiln op implements it (Kiln_Op adds it): a new op
    cannot forget its contract.
  }];
  let methods = [
    InterfaceMethod<
      "States the op's shape contract to `contract`.",
      "void", "addShapeContract",
      (ins "::mlir::kiln::ShapeContract &":$contract)>
  ];
  // Every static shape of every kiln op has a byte size that fits in 64
  // bits: the allocations of compiled code compute it without checks. And
  // the static sizes agree with the contract: dimensions it says are one
  // size have one static size (a dynamic one between two others does not
  // join a 0 and a 15). Run after the op's own verifier, which makes the
  // contract's statements meaningful (ranks, axes).
  // And its floating-point operands and results have one element type
  // (f32 or bf16), but for kiln.cast, which converts.
  let verify = [{
    return ::llvm::success(
        ::mlir::succeeded(::mlir::kiln::verifyByteSizes($_op)) &&
        ::mlir::succeeded(::mlir::kiln::verifyStaticContract($_op)) &&
        ::mlir::succeeded(::mlir::kiln::verifyOneFloatType($_op)));
  }];
  let verifyWithRegions = 1;
}

#endif // KILN_DIALECT_KILN_IR_KILNINTERFACES_TD
