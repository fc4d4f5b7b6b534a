//===- KilnInterfaces.td - Kiln op interfaces --------------*- tablegen -*-===//
//
// The gradient interface through which every differentiable kiln op states
// its vector-Jacobian product.
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

#endif // KILN_DIALECT_KILN_IR_KILNINTERFACES_TD
