//===- KilnOps.h - The kiln dialect's operations -----------------*- C++
//-*-===//
//
// Declares the ODS-generated kiln operations.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECTS_KILN_IR_KILNOPS_H
#define KILN_DIALECTS_KILN_IR_KILNOPS_H

#include "dialects/Kiln/IR/KilnDialect.h"
#include "dialects/Kiln/IR/ShapeContract.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/Kiln/IR/KilnInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/Kiln/IR/KilnOps.h.inc"

#endif // KILN_DIALECTS_KILN_IR_KILNOPS_H
