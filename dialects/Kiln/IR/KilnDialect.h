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

namespace mlir::kiln {
/// The module attribute listing a model's parameters in declaration order:
/// an array of {name, shape, init, a, b} dictionaries (`init` is the
/// kiln::Init::Kind, `a` and `b` its arguments), written by the DSL and read
/// by the compilers, which initialize parameters from it.
constexpr llvm::StringLiteral kParametersAttr = "kiln.parameters";
} // namespace mlir::kiln

#endif // KILN_DIALECTS_KILN_IR_KILNDIALECT_H
