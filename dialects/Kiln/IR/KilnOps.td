//===- KilnOps.td - Kiln dialect operations ----------------*- tablegen -*-===//
//
// Every op infers its result type from its operands (the DSL never spells a
// result type) and has a verifier that names the offending values.
//
// The ops are defined in one file per op family (as the kiln-to-linalg
// conversion groups them), included below.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNOPS_TD
#define KILN_DIALECT_KILN_IR_KILNOPS_TD

include "dialects/Kiln/IR/KilnBase.td"
include "dialects/Kiln/IR/KilnInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

include "dialects/Kiln/IR/KilnLayerOps.td"
include "dialects/Kiln/IR/KilnAttentionOps.td"
include "dialects/Kiln/IR/KilnElementwiseOps.td"
include "dialects/Kiln/IR/KilnReductionAndShapeOps.td"
include "dialects/Kiln/IR/KilnLossOps.td"
include "dialects/Kiln/IR/KilnBackwardOps.td"
include "dialects/Kiln/IR/KilnOptimizerOps.td"

#endif // KILN_DIALECT_KILN_IR_KILNOPS_TD
