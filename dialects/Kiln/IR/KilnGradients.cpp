//===- KilnGradients.cpp - Vector-Jacobian products of kiln ops -----------===//
//
// GradientOpInterface implementations. Each builds, with kiln ops, the
// gradient of its operands from the gradient of its result.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kiln/IR/KilnOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::kiln;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Sums a gradient of a broadcast result down to the shape of the operand
/// that was broadcast: over the leading dims the operand lacks, and (keeping
/// them) over its static unit dims.
Value unbroadcast(OpBuilder &b, Location loc, Value grad,
                  RankedTensorType target) {
  auto gradType = typeOf(grad);
  int64_t extra = gradType.getRank() - target.getRank();
  if (extra > 0) {
    SmallVector<int64_t> lead;
    for (int64_t i = 0; i < extra; ++i) {
      lead.push_back(i);
    }
    grad = ReduceOp::create(b, loc, ReduceKind::sum, grad, lead, false);
    gradType = typeOf(grad);
  }
  SmallVector<int64_t> units;
  for (int64_t i = 0; i < target.getRank(); ++i) {
    if (target.getDimSize(i) == 1 && gradType.getDimSize(i) != 1) {
      units.push_back(i);
    }
  }
  if (!units.empty()) {
    grad = ReduceOp::create(b, loc, ReduceKind::sum, grad, units, true);
  }
  return grad;
}

Value scaled(OpBuilder &b, Location loc, Value x, double factor) {
  return ScaleOp::create(b, loc, x, b.getF64FloatAttr(factor));
}

/// `grad` (of a value of shape `reducedShape`, the input with `axes`
/// removed or kept as 1) spread back over the input `x`.
Value spread(OpBuilder &b, Location loc, Value grad, Value x,
             ArrayRef<int64_t> axes, bool keptDims) {
  auto xType = typeOf(x);
  if (!keptDims) {
    // Reinsert the reduced axes as 1 so that the gradient broadcasts: append
    // them (each kept size copied with 0, so any number of them may be
    // dynamic), then move them into place.
    int64_t rank = xType.getRank();
    int64_t kept = rank - int64_t(axes.size());
    SmallVector<int64_t> spec(kept, 0);
    spec.append(axes.size(), 1);
    grad = ReshapeOp::create(b, loc, grad, spec);
    SmallVector<int64_t> permutation;
    int64_t nextKept = 0, nextUnit = kept;
    for (int64_t i = 0; i < rank; ++i) {
      permutation.push_back(llvm::is_contained(axes, i) ? nextUnit++
                                                        : nextKept++);
    }
    if (!llvm::equal(permutation, llvm::seq<int64_t>(0, rank))) {
      grad = TransposeOp::create(b, loc, grad, permutation);
    }
  }
  // x·0 + g has x's shape (x is finite wherever a gradient is meaningful).
  return AddOp::create(b, loc, scaled(b, loc, x, 0.0), grad);
}

SmallVector<int64_t> normalizedAxes(ArrayRef<int64_t> axes, int64_t rank) {
  SmallVector<int64_t> out;
  for (int64_t a : axes) {
    out.push_back(a < 0 ? a + rank : a);
  }
  return out;
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  operandGrads.push_back(unbroadcast(b, getLoc(), g, typeOf(getLhs())));
  operandGrads.push_back(unbroadcast(b, getLoc(), g, typeOf(getRhs())));
  return success();
}

LogicalResult SubOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  operandGrads.push_back(unbroadcast(b, getLoc(), g, typeOf(getLhs())));
  operandGrads.push_back(
      unbroadcast(b, getLoc(), scaled(b, getLoc(), g, -1.0), typeOf(getRhs())));
  return success();
}

LogicalResult MulOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  Location loc = getLoc();
  operandGrads.push_back(unbroadcast(b, loc, MulOp::create(b, loc, g, getRhs()),
                                     typeOf(getLhs())));
  operandGrads.push_back(unbroadcast(b, loc, MulOp::create(b, loc, g, getLhs()),
                                     typeOf(getRhs())));
  return success();
}

LogicalResult DivOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  Location loc = getLoc();
  Value gOverRhs = DivOp::create(b, loc, g, getRhs());
  operandGrads.push_back(unbroadcast(b, loc, gOverRhs, typeOf(getLhs())));
  // d(l/r)/dr = -(l/r)/r
  Value dr = MulOp::create(b, loc, scaled(b, loc, gOverRhs, -1.0), getResult());
  operandGrads.push_back(unbroadcast(b, loc, dr, typeOf(getRhs())));
  return success();
}

LogicalResult CastOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(
      CastOp::create(b, getLoc(), getInput().getType(), resultGrads[0]));
  return success();
}

LogicalResult ScaleOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(
      scaled(b, getLoc(), resultGrads[0], getFactor().convertToDouble()));
  return success();
}

LogicalResult TanhOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  // g·(1 - y²) = g - g·y·y
  Location loc = getLoc();
  Value g = resultGrads[0], y = getResult();
  Value gyy = MulOp::create(b, loc, MulOp::create(b, loc, g, y), y);
  operandGrads.push_back(SubOp::create(b, loc, g, gyy));
  return success();
}

LogicalResult ExpOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(
      MulOp::create(b, getLoc(), resultGrads[0], getResult()));
  return success();
}

LogicalResult LogOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(
      DivOp::create(b, getLoc(), resultGrads[0], getInput()));
  return success();
}

LogicalResult AbsOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // g·sign(x) = g·[x > 0] - g·[-x > 0]: relu's gradient at x and at -x, so
  // that x == 0 gets 0 (as PyTorch's sign(0) = 0).
  Location loc = getLoc();
  Value g = resultGrads[0], x = getInput();
  Value positive = ActivationGradOp::create(b, loc, Activation::relu, g, x);
  Value negative = ActivationGradOp::create(b, loc, Activation::relu, g,
                                            scaled(b, loc, x, -1.0));
  operandGrads.push_back(SubOp::create(b, loc, positive, negative));
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

namespace {
/// The gradients of y = x·wᵀ (+ b) given g = dL/dy: (dx, dw, db).
struct LinearGrads {
  Value input, weight, bias;
};

LinearGrads linearGrads(OpBuilder &b, Location loc, Value g, Value x, Value w,
                        bool hasBias) {
  int64_t rank = typeOf(x).getRank();
  LinearGrads grads;
  // dx = g·W  (a linear with the transposed weight)
  Value wt = TransposeOp::create(b, loc, w, ArrayRef<int64_t>{1, 0});
  grads.input = LinearOp::create(b, loc, g, wt, Value());
  // dW = gᵀ·x over every leading position
  Value g2 = g, x2 = x;
  int64_t in = typeOf(x).getDimSize(rank - 1);
  int64_t out = typeOf(g).getDimSize(rank - 1);
  if (in == 0 || out == 0) {
    // An empty weight: its gradient holds nothing (and a reshape to
    // [-1, 0] would read the 0 as "keep this dimension").
    auto type = cast<RankedTensorType>(w.getType());
    grads.weight = ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(type, b.getZeroAttr(type.getElementType())));
  } else if (rank != 2 &&
             (ShapedType::isDynamic(in) || ShapedType::isDynamic(out))) {
    // A reshape to [-1, width] needs a static width: move the width first
    // and keep it ([0, -1]): gᵀ [out, M] and xᵀ [in, M], dW = gᵀ·(xᵀ)ᵀ.
    SmallVector<int64_t> widthFirst = {rank - 1};
    for (int64_t i = 0; i + 1 < rank; ++i) {
      widthFirst.push_back(i);
    }
    auto rows = [&](Value v) -> Value {
      Value t = TransposeOp::create(b, loc, v, widthFirst);
      return ReshapeOp::create(b, loc, t, ArrayRef<int64_t>{0, -1});
    };
    grads.weight = MatmulOp::create(b, loc, rows(g), rows(x),
                                    /*transpose_lhs=*/false,
                                    /*transpose_rhs=*/true);
  } else {
    if (rank != 2) {
      g2 = ReshapeOp::create(b, loc, g, ArrayRef<int64_t>{-1, out});
      x2 = ReshapeOp::create(b, loc, x, ArrayRef<int64_t>{-1, in});
    }
    grads.weight = MatmulOp::create(b, loc, g2, x2, /*transpose_lhs=*/true,
                                    /*transpose_rhs=*/false);
  }
  if (hasBias) {
    SmallVector<int64_t> lead;
    for (int64_t i = 0; i + 1 < rank; ++i) {
      lead.push_back(i);
    }
    grads.bias = lead.empty()
                     ? g
                     : ReduceOp::create(b, loc, ReduceKind::sum, g, lead, false)
                           .getResult();
  }
  return grads;
}
} // namespace

LogicalResult LinearOp::buildGradients(OpBuilder &b,
                                       ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  LinearGrads grads = linearGrads(b, getLoc(), resultGrads[0], getInput(),
                                  getWeight(), bool(getBias()));
  operandGrads.push_back(grads.input);
  operandGrads.push_back(grads.weight);
  if (getBias()) {
    operandGrads.push_back(grads.bias);
  }
  return success();
}

LogicalResult MatmulOp::buildGradients(OpBuilder &b,
                                       ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value g = resultGrads[0], lhs = getLhs(), rhs = getRhs();
  bool tl = getTransposeLhs(), tr = getTransposeRhs();
  // C = op(A)·op(B): dop(A) = g·op(B)ᵀ, dop(B) = op(A)ᵀ·g, then undo op.
  Value da = tl ? MatmulOp::create(b, loc, rhs, g, tr, true).getResult()
                : MatmulOp::create(b, loc, g, rhs, false, !tr).getResult();
  Value db = tr ? MatmulOp::create(b, loc, g, lhs, true, tl).getResult()
                : MatmulOp::create(b, loc, lhs, g, !tl, false).getResult();
  operandGrads.push_back(da);
  operandGrads.push_back(db);
  return success();
}

//===----------------------------------------------------------------------===//
// Normalizations, reductions
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::buildGradients(OpBuilder &b,
                                        ArrayRef<Value> resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  // y·(g - Σ g·y)
  Location loc = getLoc();
  Value g = resultGrads[0], y = getResult();
  int64_t rank = typeOf(y).getRank();
  int64_t axis = int64_t(getAxis());
  axis = axis < 0 ? axis + rank : axis;
  Value dot =
      ReduceOp::create(b, loc, ReduceKind::sum, MulOp::create(b, loc, g, y),
                       ArrayRef<int64_t>{axis}, true);
  operandGrads.push_back(
      MulOp::create(b, loc, y, SubOp::create(b, loc, g, dot)));
  return success();
}

LogicalResult
LogSoftmaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                             SmallVectorImpl<Value> &operandGrads) {
  // g - exp(y)·Σ g
  Location loc = getLoc();
  Value g = resultGrads[0], y = getResult();
  int64_t rank = typeOf(y).getRank();
  int64_t axis = int64_t(getAxis());
  axis = axis < 0 ? axis + rank : axis;
  Value total = ReduceOp::create(b, loc, ReduceKind::sum, g,
                                 ArrayRef<int64_t>{axis}, true);
  Value p = ExpOp::create(b, loc, y);
  operandGrads.push_back(
      SubOp::create(b, loc, g, MulOp::create(b, loc, p, total)));
  return success();
}

LogicalResult ReduceOp::buildGradients(OpBuilder &b,
                                       ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value x = getInput();
  auto xType = typeOf(x);
  SmallVector<int64_t> axes = normalizedAxes(getAxes(), xType.getRank());
  Value g = resultGrads[0];
  if (getKind() == ReduceKind::max) {
    operandGrads.push_back(ReduceMaxGradOp::create(
        b, loc, g, x, b.getDenseI64ArrayAttr(getAxes()), getKeepDimsAttr()));
    return success();
  }
  if (getKind() == ReduceKind::mean) {
    int64_t count = 1;
    for (int64_t a : axes) {
      if (xType.isDynamicDim(a)) {
        return emitOpError("cannot be differentiated yet: a mean over the "
                           "dynamic dimension ")
               << a << " has a run-time count";
      }
      count *= xType.getDimSize(a);
    }
    g = scaled(b, loc, g, 1.0 / double(count));
  }
  operandGrads.push_back(spread(b, loc, g, x, axes, getKeepDims()));
  return success();
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::buildGradients(OpBuilder &b,
                                        ArrayRef<Value> resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  // Back to the input's shape: static sizes as they are, a dynamic size kept
  // where the forward reshape kept it (0), at most one other inferred (-1).
  auto xType = typeOf(getInput());
  SmallVector<int64_t> spec;
  bool inferred = false;
  for (int64_t i = 0; i < xType.getRank(); ++i) {
    if (!xType.isDynamicDim(i)) {
      spec.push_back(xType.getDimSize(i));
    } else if (i < int64_t(getShape().size()) && getShape()[i] == 0) {
      spec.push_back(0);
    } else if (!inferred) {
      spec.push_back(-1);
      inferred = true;
    } else {
      return emitOpError("cannot be differentiated: the input has several "
                         "dynamic sizes the reshape does not keep");
    }
  }
  operandGrads.push_back(ReshapeOp::create(b, getLoc(), resultGrads[0], spec));
  return success();
}

LogicalResult
TransposeOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm)) {
    inverse[p] = int64_t(i);
  }
  operandGrads.push_back(
      TransposeOp::create(b, getLoc(), resultGrads[0], inverse));
  return success();
}

//===----------------------------------------------------------------------===//
// Building blocks
//===----------------------------------------------------------------------===//

LogicalResult ReluOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(ActivationGradOp::create(b, getLoc(), Activation::relu,
                                                  resultGrads[0], getInput()));
  return success();
}

LogicalResult SiluOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(ActivationGradOp::create(b, getLoc(), Activation::silu,
                                                  resultGrads[0], getInput()));
  return success();
}

LogicalResult GeluOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  Activation act =
      getApproximateTanh() ? Activation::gelu_tanh : Activation::gelu;
  operandGrads.push_back(
      ActivationGradOp::create(b, getLoc(), act, resultGrads[0], getInput()));
  return success();
}

LogicalResult DropoutOp::buildGradients(OpBuilder &b,
                                        ArrayRef<Value> resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  // The same mask (same seed, stream and positions) scales the gradient.
  operandGrads.push_back(DropoutOp::create(
      b, getLoc(), resultGrads[0], getSeed(), getPAttr(), getStreamAttr()));
  operandGrads.push_back(Value());
  return success();
}

LogicalResult
EmbeddingOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  auto table = typeOf(getTable());
  if (table.isDynamicDim(0)) {
    return emitOpError("cannot be differentiated: the table's vocabulary "
                       "size must be static");
  }
  operandGrads.push_back(Value()); // ids
  operandGrads.push_back(EmbeddingGradOp::create(
      b, getLoc(), resultGrads[0], getIds(),
      b.getI64IntegerAttr(table.getDimSize(0)), getPaddingIdxAttr()));
  return success();
}

LogicalResult
LayerNormOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  auto grad = LayerNormGradOp::create(b, getLoc(), resultGrads[0], getInput(),
                                      getGamma(), getEpsAttr(), getModeAttr());
  operandGrads.append(
      {grad.getInputGrad(), grad.getGammaGrad(), grad.getBetaGrad()});
  return success();
}

LogicalResult RmsNormOp::buildGradients(OpBuilder &b,
                                        ArrayRef<Value> resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  auto grad = RmsNormGradOp::create(b, getLoc(), resultGrads[0], getInput(),
                                    getWeight(), getEpsAttr());
  operandGrads.append({grad.getInputGrad(), grad.getWeightGrad()});
  return success();
}

LogicalResult RotaryOp::buildGradients(OpBuilder &b,
                                       ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  // A rotation's gradient is its transpose: the rotation by minus the angle.
  operandGrads.push_back(
      RotaryOp::create(b, getLoc(), resultGrads[0], getOffset(),
                       getHeadDimAttr(), getThetaAttr(), getStyleAttr(),
                       getInverse() ? UnitAttr() : b.getUnitAttr()));
  if (getOffset()) {
    operandGrads.push_back(Value());
  }
  return success();
}

template <typename LossOp>
static LogicalResult
lossGradients(LossOp op, OpBuilder &b, ArrayRef<Value> resultGrads,
              SmallVectorImpl<Value> &operandGrads, bool fromLogits) {
  operandGrads.push_back(LossGradOp::create(
      b, op.getLoc(), op.getInput(), op.getTargets(), resultGrads[0],
      fromLogits ? b.getUnitAttr() : UnitAttr(), op.getIgnoreIndexAttr(),
      op.getLabelSmoothingAttr(), op.getReductionAttr()));
  operandGrads.push_back(Value()); // targets
  return success();
}

LogicalResult
CrossEntropyOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  return lossGradients(*this, b, resultGrads, operandGrads, true);
}

LogicalResult NLLLossOp::buildGradients(OpBuilder &b,
                                        ArrayRef<Value> resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  return lossGradients(*this, b, resultGrads, operandGrads, false);
}

LogicalResult
FeedForwardOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  // Recompute the hidden activation, then go back through both linears.
  Location loc = getLoc();
  Value x = getInput();
  Value hidden = LinearOp::create(b, loc, x, getW1(), getB1());
  Activation act = getActivation();
  Value activated;
  if (act == Activation::relu) {
    activated = ReluOp::create(b, loc, hidden);
  } else if (act == Activation::silu) {
    activated = SiluOp::create(b, loc, hidden);
  } else {
    activated = GeluOp::create(b, loc, hidden, act == Activation::gelu_tanh);
  }
  double p = getDropout().convertToDouble();
  if (p > 0.0) {
    activated = DropoutOp::create(b, loc, activated, getSeed(),
                                  getDropoutAttr(), getStreamAttr());
  }
  bool biases = bool(getB1());
  LinearGrads second =
      linearGrads(b, loc, resultGrads[0], activated, getW2(), biases);
  Value dActivated = second.input;
  if (p > 0.0) {
    dActivated = DropoutOp::create(b, loc, dActivated, getSeed(),
                                   getDropoutAttr(), getStreamAttr());
  }
  Value dHidden = ActivationGradOp::create(b, loc, act, dActivated, hidden);
  LinearGrads first = linearGrads(b, loc, dHidden, x, getW1(), biases);
  // Operands: input, w1, w2, b1?, b2?, seed?
  operandGrads.append({first.input, first.weight, second.weight});
  if (biases) {
    operandGrads.append({first.bias, second.bias});
  }
  if (getSeed()) {
    operandGrads.push_back(Value());
  }
  return success();
}

LogicalResult
PositionalEncodingOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(resultGrads[0]); // x + PE: x's gradient is g
  if (getKind() == PEKind::learned) {
    auto table = typeOf(getTable());
    if (table.isDynamicDim(0)) {
      return emitOpError("cannot be differentiated: the position table's "
                         "length must be static");
    }
    operandGrads.push_back(PositionalEncodingGradOp::create(
        b, getLoc(), resultGrads[0], getOffset(),
        b.getI64IntegerAttr(table.getDimSize(0))));
  }
  if (getOffset()) {
    operandGrads.push_back(Value());
  }
  return success();
}

LogicalResult
AttentionOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  if (getOffset()) {
    return emitOpError("has no gradient with a query 'offset' (attention "
                       "over a key/value cache is for inference)");
  }
  auto grad = AttentionGradOp::create(
      b, getLoc(), resultGrads[0], getQuery(), getKey(), getValue(),
      getResult(), getKeyPaddingMask(), getSeed(), getNumHeadsAttr(),
      getCausalAttr(), getDropoutAttr(), getStreamAttr(), getNumKvHeadsAttr());
  operandGrads.append(
      {grad.getQueryGrad(), grad.getKeyGrad(), grad.getValueGrad()});
  if (getKeyPaddingMask()) {
    operandGrads.push_back(Value());
  }
  if (getSeed()) {
    operandGrads.push_back(Value());
  }
  return success();
}

LogicalResult
MultiHeadAttentionOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  // The backward pass splits heads of the projections' widths: weights of
  // dynamic shape would give it widths it cannot split (it had emitted
  // invalid IR); a diagnostic instead.
  for (Value w : {getWq(), getWk(), getWv(), getWo(), getBq(), getBk(), getBv(),
                  getBo()}) {
    if (w && !typeOf(w).hasStaticShape()) {
      return emitOpError("has no gradient with weights of dynamic shape (")
             << w.getType() << "): give the weights static shapes";
    }
  }
  // mha = linear(attention(linear(q), linear(kv), linear(kv)), wo):
  // recompute the projections and the attention output, then go back
  // through each piece.
  Location loc = getLoc();
  bool biases = bool(getBq());
  Value q = LinearOp::create(b, loc, getQuery(), getWq(), getBq());
  Value k = LinearOp::create(b, loc, getKeyValue(), getWk(), getBk());
  Value v = LinearOp::create(b, loc, getKeyValue(), getWv(), getBv());
  Value o = AttentionOp::create(b, loc, q, k, v, getKeyPaddingMask(), getSeed(),
                                /*offset=*/Value(), getNumHeadsAttr(),
                                getCausalAttr(), getDropoutAttr(),
                                getStreamAttr(), /*num_kv_heads=*/nullptr);
  LinearGrads out = linearGrads(b, loc, resultGrads[0], o, getWo(), biases);
  auto core = AttentionGradOp::create(
      b, loc, out.input, q, k, v, o, getKeyPaddingMask(), getSeed(),
      getNumHeadsAttr(), getCausalAttr(), getDropoutAttr(), getStreamAttr(),
      /*num_kv_heads=*/nullptr);
  LinearGrads gq =
      linearGrads(b, loc, core.getQueryGrad(), getQuery(), getWq(), biases);
  LinearGrads gk =
      linearGrads(b, loc, core.getKeyGrad(), getKeyValue(), getWk(), biases);
  LinearGrads gv =
      linearGrads(b, loc, core.getValueGrad(), getKeyValue(), getWv(), biases);
  Value dkv = AddOp::create(b, loc, gk.input, gv.input);
  // Operands: query, key_value, wq, wk, wv, wo, biases?, mask?, seed?
  operandGrads.append(
      {gq.input, dkv, gq.weight, gk.weight, gv.weight, out.weight});
  if (biases) {
    operandGrads.append({gq.bias, gk.bias, gv.bias, out.bias});
  }
  if (getKeyPaddingMask()) {
    operandGrads.push_back(Value());
  }
  if (getSeed()) {
    operandGrads.push_back(Value());
  }
  return success();
}

LogicalResult SliceOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  // Zeros (the input's other parts times 0) around the gradient.
  Location loc = getLoc();
  Value x = getInput();
  auto xType = typeOf(x);
  int64_t axis = int64_t(getAxis());
  axis = axis < 0 ? axis + xType.getRank() : axis;
  int64_t dim = xType.getDimSize(axis);
  int64_t start = int64_t(getStart());
  std::optional<int64_t> end = getEnd();
  SmallVector<Value> parts;
  auto zerosOf = [&](int64_t from, std::optional<int64_t> to) {
    Value part = SliceOp::create(b, loc, x, b.getI64IntegerAttr(axis),
                                 b.getI64IntegerAttr(from),
                                 to ? b.getI64IntegerAttr(*to) : IntegerAttr());
    return scaled(b, loc, part, 0.0);
  };
  bool staticDim = !ShapedType::isDynamic(dim);
  int64_t first = staticDim && start < 0 ? start + dim : start;
  if (first != 0) {
    parts.push_back(zerosOf(0, start));
  }
  parts.push_back(resultGrads[0]);
  if (end) {
    int64_t last = staticDim && *end < 0 ? *end + dim : *end;
    if (!staticDim || last != dim) {
      parts.push_back(zerosOf(*end, std::nullopt));
    }
  }
  operandGrads.push_back(
      parts.size() == 1
          ? parts[0]
          : ConcatOp::create(b, loc, parts, b.getI64IntegerAttr(axis))
                .getResult());
  return success();
}

LogicalResult ConcatOp::buildGradients(OpBuilder &b,
                                       ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  // Each input's part of the gradient; needs the sizes along the axis of all
  // inputs but the last.
  Location loc = getLoc();
  int64_t rank = typeOf(getResult()).getRank();
  int64_t axis = int64_t(getAxis());
  axis = axis < 0 ? axis + rank : axis;
  int64_t offset = 0;
  ValueRange inputs = getInputs();
  for (auto [i, input] : llvm::enumerate(inputs)) {
    int64_t size = typeOf(input).getDimSize(axis);
    bool lastOne = i + 1 == inputs.size();
    if (ShapedType::isDynamic(size) && !lastOne) {
      return emitOpError("cannot be differentiated: input #")
             << i << " has a dynamic size along the concatenation axis";
    }
    if (size == 0) {
      // An empty piece: its gradient holds nothing (an empty slice would
      // not verify).
      operandGrads.push_back(ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(
              cast<RankedTensorType>(input.getType()),
              b.getZeroAttr(getElementTypeOrSelf(input.getType())))));
      continue;
    }
    operandGrads.push_back(SliceOp::create(
        b, loc, resultGrads[0], b.getI64IntegerAttr(axis),
        b.getI64IntegerAttr(offset),
        lastOne ? IntegerAttr() : b.getI64IntegerAttr(offset + size)));
    offset += lastOne ? 0 : size;
  }
  return success();
}
