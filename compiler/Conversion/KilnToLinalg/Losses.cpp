//===- Losses.cpp - Cross-entropy and NLL losses --------------------------===//
//
// kiln.cross_entropy and kiln.nll_loss: per-position losses (label smoothing,
// ignored targets) and their sum or mean.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/KilnToLinalg/Emitter.h"

#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// Cross-entropy over logits and NLL over log-probabilities.
template <typename Op>
SmallVector<Value> lowerLoss(Op op, typename Op::Adaptor adaptor, Emitter &e) {
  constexpr bool fromLogits = std::is_same_v<Op, CrossEntropyOp>;
  Value x = adaptor.getInput();
  Value targets = adaptor.getTargets();
  auto xType = Emitter::type(x);
  int64_t rank = xType.getRank();
  int64_t axis = rank - 1;
  int64_t rowRank = rank - 1;
  double smoothing = op.getLabelSmoothing().convertToDouble();
  std::optional<int64_t> ignore = op.getIgnoreIndex();
  Value classes = e.sizeValue(x, axis);
  Value classesF = e.sizeAsFloat(x, axis);
  // Per row: lse (cross-entropy only) and the mean over classes.
  Value lse = fromLogits ? e.logSumExp(x, axis) : Value();
  Value classSum = smoothing > 0.0 ? e.sum(x, axis) : Value();
  // Per position: the loss (0 where the target is ignored).
  auto rowType =
      RankedTensorType::get(Emitter::type(targets).getShape(), e.f32());
  SmallVector<OpFoldResult> rowShape = e.sizes(targets);
  SmallVector<Value> inputs = {targets};
  if (lse) {
    inputs.push_back(lse);
  }
  if (classSum) {
    inputs.push_back(classSum);
  }
  SmallVector<AffineMap> maps(inputs.size() + 1, e.identity(rowRank));
  SmallVector<IteratorType> rowPar(rowRank, IteratorType::parallel);
  Value losses = e.generic(
      rowType, inputs, e.empty(rowShape, e.f32()), maps, rowPar,
      [&](OpBuilder &b, Location l, ValueRange args) -> Value {
        auto c = [&](double v) {
          return arith::ConstantOp::create(b, l, b.getF32FloatAttr(float(v)));
        };
        Value target = args[0];
        SmallVector<Value> indices;
        for (int64_t d = 0; d < rowRank; ++d) {
          indices.push_back(linalg::IndexOp::create(b, l, d));
        }
        indices.push_back(Emitter::clampIndex(b, l, target, classes));
        Value picked = tensor::ExtractOp::create(b, l, x, indices);
        // loss = lse - (1-s)·x[t] - s·mean(x)   (lse = 0 for log-probs)
        Value loss = arith::MulFOp::create(b, l, c(-(1.0 - smoothing)), picked);
        size_t next = 1;
        if (lse) {
          loss = arith::AddFOp::create(b, l, loss, args[next++]);
        }
        if (classSum) {
          Value mean = arith::DivFOp::create(b, l, args[next++], classesF);
          loss = arith::SubFOp::create(
              b, l, loss, arith::MulFOp::create(b, l, c(smoothing), mean));
        }
        if (ignore) {
          Value ignored = Emitter::isIndex(b, l, target, *ignore);
          loss = arith::SelectOp::create(b, l, ignored, c(0.0), loss);
        }
        return loss;
      });
  LossReduction reduction = op.getReduction();
  if (reduction == LossReduction::none) {
    return {losses};
  }
  // Sum of losses over every position, divided by the kept count for the
  // mean.
  Value sum = e.sumAll(losses);
  if (reduction == LossReduction::mean) {
    sum = e.divideScalars(sum, e.keptCount(targets, ignore));
  }
  return {sum};
}

} // namespace

void mlir::kiln::populateLossPatterns(RewritePatternSet &patterns) {
  patterns.add<Lowering<CrossEntropyOp, lowerLoss<CrossEntropyOp>>,
               Lowering<NLLLossOp, lowerLoss<NLLLossOp>>>(
      patterns.getContext());
}
