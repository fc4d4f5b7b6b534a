//===- DTypes.h - Kiln's tensor element types in MLIR ------------*- C++ -*-===//
//
// The one mapping between Kiln's element types (kiln::DType, base/DType.h)
// and MLIR's, shared by the DSL, which builds IR from DTypes, and the
// lowering, which reads function signatures back.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECTS_KILN_IR_DTYPES_H
#define KILN_DIALECTS_KILN_IR_DTYPES_H

#include "base/DType.h"

#include "mlir/IR/Types.h"

#include <optional>

namespace mlir::kiln {

/// The MLIR element type of `dtype`: f32, i32, i64 or i1.
Type elementTypeOf(MLIRContext *context, ::kiln::DType dtype);

/// The DType of an element type, or of a ranked tensor's elements; nothing
/// for a type Kiln's tensors cannot hold (f64, i8, an unranked tensor, ...).
std::optional<::kiln::DType> dtypeOf(Type type);

} // namespace mlir::kiln

#endif // KILN_DIALECTS_KILN_IR_DTYPES_H
