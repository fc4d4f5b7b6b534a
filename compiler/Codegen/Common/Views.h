//===- Views.h - What a memref view is carved from -------------*- C++ -*-===//

#ifndef KILN_COMPILER_CODEGEN_COMMON_VIEWS_H
#define KILN_COMPILER_CODEGEN_COMMON_VIEWS_H

#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir::kiln {

/// The buffer (an allocation, an argument, a global) that `value`, a memref
/// or a view of one (subview, cast, reshape), was taken of.
inline Value viewRoot(Value value) {
  while (auto view = value.getDefiningOp<ViewLikeOpInterface>()) {
    value = view.getViewSource();
  }
  return value;
}

} // namespace mlir::kiln

#endif // KILN_COMPILER_CODEGEN_COMMON_VIEWS_H
