//===- ShapeContract.h - What kiln ops assume of dynamic sizes --*- C++ -*-===//
//
// The receiver of ShapeContractOpInterface::addShapeContract: each kiln op
// states what its code assumes of the sizes of its operands and results
// beyond their static types. The JIT/AOT input contract
// (compiler/Target/Common/Lowering.cpp) implements it and checks what reaches
// function arguments before every call.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECTS_KILN_IR_SHAPECONTRACT_H
#define KILN_DIALECTS_KILN_IR_SHAPECONTRACT_H

#include "mlir/IR/Value.h"
#include "mlir/IR/ValueRange.h"

#include <cstdint>
#include <optional>

namespace mlir::kiln {

class ShapeContract {
public:
  virtual ~ShapeContract() = default;

  /// Dimension `da` of `a` and dimension `db` of `b` have one size.
  virtual void same(Value a, int64_t da, Value b, int64_t db) = 0;
  /// Every value of the integer tensor `ids` lies in [0, bound), but
  /// `ignored` when given.
  virtual void idsWithin(Value ids, int64_t bound,
                         std::optional<int64_t> ignored) = 0;
  /// The positions [offset, offset + size) along dimension `dim` of `x`
  /// lie in [0, maxLen); `offset` is an i64 value, or null for 0.
  virtual void positionsWithin(Value x, int64_t dim, Value offset,
                               int64_t maxLen) = 0;
  /// Dimension `axis` of `result` is the sum of dimension `axis` of
  /// `parts`.
  virtual void sumOf(Value result, int64_t axis, ValueRange parts) = 0;
  /// Dimension `dim` of `x` is at least `size`.
  virtual void atLeast(Value x, int64_t dim, int64_t size) = 0;

  /// Every dimension of `a` and `b` (of one rank).
  void sameShape(Value a, Value b);
  /// The trailing-aligned dimensions of `a` and `b` (broadcasting): a
  /// static 1 on either side broadcasts, every other pair is the same.
  void sameBroadcast(Value a, Value b);
};

} // namespace mlir::kiln

#endif // KILN_DIALECTS_KILN_IR_SHAPECONTRACT_H
