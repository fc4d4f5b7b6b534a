//===- InputContract.h - A function's input contract from its IR -*- C++
//-*-===//
//
// What the kiln ops of a function state of their sizes
// (ShapeContractOpInterface), turned into the conditions on its arguments
// that the runtime checks before every call (runtime/Function.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_COMMON_INPUTCONTRACT_H
#define KILN_COMPILER_TARGET_COMMON_INPUTCONTRACT_H

#include "runtime/Function.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {

/// Fills the groups, position limits, size checks and id bounds of `spec`
/// from the kiln ops of `func`. Every size is expressed through the
/// argument sizes; a condition that cannot be (it involves a size no
/// statement defines) or can never hold is a kiln::Error that names the
/// function.
void buildInputContract(mlir::func::FuncOp func, FunctionSpec &spec);

} // namespace kiln

#endif // KILN_COMPILER_TARGET_COMMON_INPUTCONTRACT_H
