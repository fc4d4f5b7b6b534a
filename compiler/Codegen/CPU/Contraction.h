//===- Contraction.h - What rewrites of contractions read off them --------===//
//
// Shared by the passes that replace a contraction with code of their own
// (kiln-vector-matrix-products, kiln-bf16-products).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_CODEGEN_CPU_CONTRACTION_H
#define KILN_COMPILER_CODEGEN_CPU_CONTRACTION_H

#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/BuiltinTypes.h"

#include <array>
#include <optional>

namespace mlir::kiln::cpu {

/// The loop dimension of each result of `map`, none when a result is not a
/// plain dimension.
inline std::optional<SmallVector<unsigned>> loopDimsOf(AffineMap map) {
  SmallVector<unsigned> dims;
  for (AffineExpr e : map.getResults()) {
    auto dim = dyn_cast<AffineDimExpr>(e);
    if (!dim) {
      return std::nullopt;
    }
    dims.push_back(dim.getPosition());
  }
  return dims;
}

/// loopDimsOf each indexing map of an op with two inputs and one output
/// (in0, in1, out), none when one has a result that is no plain dimension.
inline std::optional<std::array<SmallVector<unsigned>, 3>>
operandLoopDims(linalg::LinalgOp op) {
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  if (maps.size() != 3) {
    return std::nullopt;
  }
  std::array<SmallVector<unsigned>, 3> dims;
  for (int i = 0; i < 3; ++i) {
    std::optional<SmallVector<unsigned>> d = loopDimsOf(maps[i]);
    if (!d) {
      return std::nullopt;
    }
    dims[i] = std::move(*d);
  }
  return dims;
}

/// Whether `buffer` is an f32 memref of rank 1 or more whose innermost
/// dimension has stride 1 (vectors load along it).
inline bool isF32InnermostContiguous(Value buffer) {
  auto type = dyn_cast<MemRefType>(buffer.getType());
  if (!type || !type.getElementType().isF32() || type.getRank() == 0) {
    return false;
  }
  SmallVector<int64_t> strides;
  int64_t offset;
  return succeeded(type.getStridesAndOffset(strides, offset)) &&
         strides.back() == 1;
}

} // namespace mlir::kiln::cpu

#endif // KILN_COMPILER_CODEGEN_CPU_CONTRACTION_H
