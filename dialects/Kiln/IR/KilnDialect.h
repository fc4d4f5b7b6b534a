//===- KilnDialect.h - The kiln dialect --------------------------*- C++
//-*-===//
//
// Declares the kiln dialect and its attributes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECTS_KILN_IR_KILNDIALECT_H
#define KILN_DIALECTS_KILN_IR_KILNDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/Kiln/IR/KilnOpsDialect.h.inc"
#include "dialects/Kiln/IR/KilnOpsEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Kiln/IR/KilnOpsAttributes.h.inc"

#endif // KILN_DIALECTS_KILN_IR_KILNDIALECT_H
