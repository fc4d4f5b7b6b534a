//===- OpVerifiers.h - Helpers shared by the kiln op verifiers --*- C++ -*-===//
//
// The type inference and verification helpers that several op families
// share. Internal to dialects/Kiln/IR: the families (KilnLayerOps.cpp,
// KilnAttentionOps.cpp, KilnElementwiseOps.cpp, KilnReductionAndShapeOps.cpp,
// KilnLossOps.cpp, KilnBackwardOps.cpp, KilnOptimizerOps.cpp) include it;
// the helpers are defined in KilnOps.cpp, except verifyLoss, which lives with
// the losses in KilnLossOps.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECTS_KILN_IR_OPVERIFIERS_H
#define KILN_DIALECTS_KILN_IR_OPVERIFIERS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LLVM.h"

#include <optional>
#include <string>

namespace mlir::kiln::detail {

/// The operand's type as a ranked tensor, or a diagnostic (only reachable
/// while parsing ill-typed IR, before the ODS type constraints run).
FailureOr<RankedTensorType> getRanked(std::optional<Location> loc, Value value,
                                      StringRef name);

/// The result type of ops whose result has the type of `input` (`name` in
/// diagnostics).
LogicalResult inferSameAsInput(std::optional<Location> loc, Value input,
                               SmallVectorImpl<Type> &inferred,
                               StringRef name = "input");

/// The type of a value that the ODS constraints made a ranked tensor.
RankedTensorType tensorType(Value value);

/// The shape of a ranked tensor type, formatted for diagnostics.
std::string shapeOf(Type type);

/// The size of dimension `dim` of `type`, dynamic when `type` has no such
/// dimension.
int64_t dimOr(RankedTensorType type, int64_t dim);

/// Checks that `value` is a rank-1 tensor of a size compatible with `size`.
LogicalResult verifyVector(Operation *op, Value value, StringRef name,
                           int64_t size, StringRef sizeName);

/// Checks that `value` is a rank-2 tensor compatible with [rows, cols].
LogicalResult verifyMatrix(Operation *op, Value value, StringRef name,
                           int64_t rows, int64_t cols, StringRef layout);

/// Checks a dropout probability `p` (the attribute `name`) and that a seed
/// is given when it is non-zero.
LogicalResult verifyDropout(Operation *op, double p, bool hasSeed,
                            StringRef name);

/// Checks a normalization's `eps` (layernorm, rms_norm and their
/// gradients): finite and >= 0.
LogicalResult verifyEps(Operation *op, double eps);

/// Checks that two tensors have the same rank and compatible sizes.
LogicalResult verifySameShape(Operation *op, Value a, StringRef aName, Value b,
                              StringRef bName);

/// The checks of a loss on `input` ([..., classes]) and `targets`, shared by
/// kiln.cross_entropy, kiln.nll_loss and kiln.loss_grad (in KilnLossOps.cpp).
LogicalResult verifyLoss(Operation *op, Value input, Value targets,
                         double smoothing, std::optional<int64_t> ignoreIndex);

} // namespace mlir::kiln::detail

#endif // KILN_DIALECTS_KILN_IR_OPVERIFIERS_H
