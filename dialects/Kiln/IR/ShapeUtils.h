//===- ShapeUtils.h - Shape arithmetic shared by verifiers and the DSL -*- C++
//-*-===//
//
// Pure functions over shapes (vectors of sizes where kDynamic marks a size
// known only at run time). They never fail hard: on bad input they return an
// error message and a best-effort shape with dynamic sizes, so that type
// inference stays total and the verifiers report the problem.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECTS_KILN_IR_SHAPEUTILS_H
#define KILN_DIALECTS_KILN_IR_SHAPEUTILS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

namespace mlir::kiln::shape {

/// The marker of a dynamic size; equal to mlir::ShapedType::kDynamic.
inline constexpr int64_t kDynamic = std::numeric_limits<int64_t>::min();

/// True when two sizes may be equal at run time.
bool compatible(int64_t a, int64_t b);

/// The more precise of two compatible sizes (the static one if either is).
int64_t merge(int64_t a, int64_t b);

/// Maps `axis` (negative counts from the end) into [0, rank), or nullopt.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

/// Formats a shape for diagnostics: "[?, 128]".
std::string format(llvm::ArrayRef<int64_t> shape);

/// NumPy broadcasting of two shapes into `result`. Returns an error message,
/// empty on success; on failure the clashing sizes are dynamic in `result`.
std::string broadcast(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b,
                      llvm::SmallVectorImpl<int64_t> &result);

/// Resolves a reshape specification (sizes, 0 = keep the input size at that
/// index, -1 = inferred) against `input`. Returns an error message, empty on
/// success; `result` always holds a best-effort shape of `spec.size()` dims.
std::string reshape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> spec,
                    llvm::SmallVectorImpl<int64_t> &result);

/// Resolves Python-style slice bounds `start:end` (negative from the end,
/// no `end` = to the end) on a dimension of size `size`. Returns an error
/// message, empty on success; `length` is the slice's size or kDynamic.
std::string slice(int64_t size, int64_t start, std::optional<int64_t> end,
                  int64_t &length);

} // namespace mlir::kiln::shape

#endif // KILN_DIALECTS_KILN_IR_SHAPEUTILS_H
