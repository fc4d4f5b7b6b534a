//===- ShapeContract.h - What kiln ops assume of dynamic sizes --*- C++ -*-===//
//
// The receiver of ShapeContractOpInterface::addShapeContract: each kiln op
// states what its code assumes of the sizes of its operands and results
// beyond their static types. The JIT/AOT input contract
// (compiler/Target/Common/Lowering.cpp) implements it: it expresses every
// size as a linear combination of argument sizes, so that each condition
// is either proved from the signature, checked before every call, or the
// function is refused at compile time.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECTS_KILN_IR_SHAPECONTRACT_H
#define KILN_DIALECTS_KILN_IR_SHAPECONTRACT_H

#include "mlir/IR/Value.h"
#include "mlir/IR/ValueRange.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/LogicalResult.h"

#include <cstdint>
#include <optional>

namespace mlir {
class Operation;
} // namespace mlir

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
  /// One term of a size: `coefficient` times dimension `dim` of `value`.
  struct Term {
    Value value;
    int64_t dim;
    int64_t coefficient;
  };
  /// Dimension `dim` of `result` is the sum of `terms` plus `constant`.
  virtual void linear(Value result, int64_t dim, ArrayRef<Term> terms,
                      int64_t constant) = 0;
  /// A dimension: dimension `dim` of `value`.
  using Dim = std::pair<Value, int64_t>;
  /// Dimension `dim` of `result` is the product of `factors` divided by the
  /// product of `divisors` (a reshape's inferred size). Two such sizes are
  /// known equal when they divide the same sizes; one must not be related
  /// to a size of any other form, or the function is refused.
  virtual void quotient(Value result, int64_t dim, ArrayRef<Dim> factors,
                        ArrayRef<Dim> divisors) = 0;
  /// Dimension `dim` of `x` is at least `size`.
  virtual void atLeast(Value x, int64_t dim, int64_t size) = 0;
  /// `a` and `b` hold as many elements (a reshape: its code reads as many
  /// elements of its input as its result has).
  virtual void sameElements(Value a, Value b) = 0;

  /// Dimension `axis` of `result` is the sum of dimension `axis` of
  /// `parts`.
  void sumOf(Value result, int64_t axis, ValueRange parts);
  /// Every dimension of `a` and `b` (of one rank).
  void sameShape(Value a, Value b);
  /// The trailing-aligned dimensions of `a` and `b` (broadcasting): a
  /// static 1 on either side broadcasts, every other pair is the same.
  void sameBroadcast(Value a, Value b);
};

/// Fails, with an op error, when an operand or result of `op` has a static
/// shape whose size in bytes does not fit in an int64 (a tensor with a 0
/// in its shape has none).
llvm::LogicalResult verifyByteSizes(Operation *op);

/// Fails, with an op error, when the static sizes of `op` (a
/// ShapeContractOpInterface) contradict its contract: two static sizes
/// among dimensions stated to be one size, a static size other than a
/// stated constant, or below a stated least size.
llvm::LogicalResult verifyStaticContract(Operation *op);

/// Fails, with an op error, when the floating-point tensors among the
/// operands and results of `op` have more than one element type (kiln.cast
/// excepted: it converts). Defined in KilnOps.cpp.
llvm::LogicalResult verifyOneFloatType(Operation *op);

} // namespace mlir::kiln

#endif // KILN_DIALECTS_KILN_IR_SHAPECONTRACT_H
