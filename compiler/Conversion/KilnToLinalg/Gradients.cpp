//===- Gradients.cpp - Backward ops ---------------------------------------===//
//
// The ops kiln-autodiff emits for gradients: activation_grad,
// layer_norm_grad, rms_norm_grad, loss_grad, embedding_grad,
// positional_encoding_grad and reduce_max_grad (attention_grad is in
// Attention.cpp, with the forward pass it recomputes).
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/KilnToLinalg/Emitter.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// d act(x) / dx · g for the four activations.
static Value activationGrad(OpBuilder &b, Location loc, Activation act, Value g,
                            Value x) {
  auto c = [&](double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(float(v)));
  };
  if (act == Activation::relu) {
    Value positive =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, c(0.0));
    return arith::SelectOp::create(b, loc, positive, g, c(0.0));
  }
  Value d;
  if (act == Activation::silu) {
    // σ·(1 + x·(1 - σ)), σ = 1 / (1 + e^-x)
    Value sigma = arith::DivFOp::create(
        b, loc, c(1.0),
        arith::AddFOp::create(
            b, loc, c(1.0),
            math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x))));
    Value oneMinus = arith::SubFOp::create(b, loc, c(1.0), sigma);
    d = arith::MulFOp::create(
        b, loc, sigma,
        arith::AddFOp::create(b, loc, c(1.0),
                              arith::MulFOp::create(b, loc, x, oneMinus)));
  } else if (act == Activation::gelu) {
    // Φ(x) + x·φ(x)
    Value cdf = arith::MulFOp::create(
        b, loc, c(0.5),
        arith::AddFOp::create(
            b, loc, c(1.0),
            math::ErfOp::create(
                b, loc, arith::MulFOp::create(b, loc, x, c(M_SQRT1_2)))));
    Value x2 = arith::MulFOp::create(b, loc, x, x);
    Value pdf = arith::MulFOp::create(
        b, loc, c(1.0 / std::sqrt(2.0 * M_PI)),
        math::ExpOp::create(b, loc,
                            arith::MulFOp::create(b, loc, c(-0.5), x2)));
    d = arith::AddFOp::create(b, loc, cdf,
                              arith::MulFOp::create(b, loc, x, pdf));
  } else {
    // 0.5(1 + t) + 0.5·x·(1 - t²)·k·(1 + 3a·x²), t = tanh(k(x + a·x³))
    double k = std::sqrt(2.0 / M_PI), a = 0.044715;
    Value x2 = arith::MulFOp::create(b, loc, x, x);
    Value inner = arith::MulFOp::create(
        b, loc, c(k),
        arith::AddFOp::create(
            b, loc, x,
            arith::MulFOp::create(b, loc, c(a),
                                  arith::MulFOp::create(b, loc, x2, x))));
    Value t = math::TanhOp::create(b, loc, inner);
    Value left = arith::MulFOp::create(
        b, loc, c(0.5), arith::AddFOp::create(b, loc, c(1.0), t));
    Value sech2 = arith::SubFOp::create(b, loc, c(1.0),
                                        arith::MulFOp::create(b, loc, t, t));
    Value slope = arith::MulFOp::create(
        b, loc, c(k),
        arith::AddFOp::create(b, loc, c(1.0),
                              arith::MulFOp::create(b, loc, c(3 * a), x2)));
    Value right =
        arith::MulFOp::create(b, loc, arith::MulFOp::create(b, loc, c(0.5), x),
                              arith::MulFOp::create(b, loc, sech2, slope));
    d = arith::AddFOp::create(b, loc, left, right);
  }
  return arith::MulFOp::create(b, loc, g, d);
}

SmallVector<Value> lowerActivationGrad(ActivationGradOp op,
                                       ActivationGradOp::Adaptor adaptor,
                                       Emitter &e) {
  Activation act = op.getActivation();
  Value result =
      e.elementwise(resultType(op), e.sizes(adaptor.getGrad()),
                    ValueRange{adaptor.getGrad(), adaptor.getInput()},
                    [&](OpBuilder &b, Location loc, ValueRange args) {
                      return activationGrad(b, loc, act, args[0], args[1]);
                    });
  return {result};
}

/// Sums a [..., D] tensor over every leading dimension into [D].
static Value sumRows(Emitter &e, Value x) {
  auto t = Emitter::type(x);
  int64_t rank = t.getRank();
  SmallVector<IteratorType> iterators(rank, IteratorType::reduction);
  iterators.back() = IteratorType::parallel;
  Value acc = e.filled({e.size(x, rank - 1)}, 0.0);
  return e.generic(acc.getType(), x, acc,
                   {e.identity(rank), e.select(rank, {rank - 1})}, iterators,
                   [](OpBuilder &b, Location l, ValueRange args) {
                     return arith::AddFOp::create(b, l, args[0], args[1]);
                   });
}

SmallVector<Value> lowerLayerNormGrad(LayerNormGradOp op,
                                      LayerNormGradOp::Adaptor adaptor,
                                      Emitter &e) {
  Value g = adaptor.getGrad(), x = adaptor.getInput(),
        gamma = adaptor.getGamma();
  auto xType = Emitter::type(x);
  int64_t rank = xType.getRank(), axis = rank - 1;
  bool stdEps = op.getMode() == NormMode::std_eps;
  float eps = float(op.getEps().convertToDouble());
  Value width = e.sizeAsFloat(x, axis);
  // Row statistics: mean, then the sum of squared deviations.
  Emitter::RowStats stats = e.rowStats(x, width);
  Value mean = stats.mean, sq = stats.squares;
  SmallVector<OpFoldResult> rows = stats.rows;
  AffineMap reduced = e.dropping(rank, axis);
  AffineMap feature = e.select(rank, {axis});
  SmallVector<IteratorType> red = Emitter::reducing(rank, axis);
  // Per row: s = 1/(σ+eps) or rsqrt(var+eps), and for std_eps the factor
  // k = s²/((D-1)σ) of the σ term.
  Value count =
      stdEps ? arith::SubFOp::create(e.b, op.getLoc(), width, e.f32c(1.0))
                   .getResult()
             : width;
  Value inv = e.mapRows(sq, rows, [&](OpBuilder &b, Location l, Value s2) {
    return layerNormScale(b, l, s2, count, eps, stdEps);
  });
  Value sigmaTerm =
      e.mapRows(sq, rows, [&](OpBuilder &b, Location l, Value s2) -> Value {
        if (!stdEps) {
          return Emitter::f32c(b, l, 0.0);
        }
        Value sd =
            math::SqrtOp::create(b, l, arith::DivFOp::create(b, l, s2, count));
        Value s = layerNormScale(b, l, s2, count, eps, stdEps);
        // s² / ((D-1)·σ)
        return arith::DivFOp::create(b, l, arith::MulFOp::create(b, l, s, s),
                                     arith::MulFOp::create(b, l, count, sd));
      });
  // Row sums of dxhat = g·gamma and of dxhat·(x - mean).
  auto rowSum = [&](bool timesCentered) {
    return e.generic(
        mean.getType(), ValueRange{g, x, mean, gamma}, e.filled(rows, 0.0),
        {e.identity(rank), e.identity(rank), reduced, feature, reduced}, red,
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value dxhat = arith::MulFOp::create(b, l, args[0], args[3]);
          if (timesCentered) {
            Value c = arith::SubFOp::create(b, l, args[1], args[2]);
            dxhat = arith::MulFOp::create(b, l, dxhat, c);
          }
          return arith::AddFOp::create(b, l, dxhat, args[4]);
        });
  };
  Value sumDxhat = rowSum(false);
  Value sumDxhatC = rowSum(true);
  SmallVector<IteratorType> par(rank, IteratorType::parallel);
  Value dx = e.generic(
      xType, ValueRange{g, x, mean, gamma, inv, sigmaTerm, sumDxhat, sumDxhatC},
      e.empty(e.sizes(x), e.f32()),
      {e.identity(rank), e.identity(rank), reduced, feature, reduced, reduced,
       reduced, reduced, e.identity(rank)},
      par, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        // standard: s·(dxhat - mean(dxhat) - xhat·mean(dxhat·xhat))
        // std_eps: s·(dxhat - mean(dxhat)) - c·Σ(dxhat·c)·s²/((D-1)σ)
        Value dxhat = arith::MulFOp::create(b, l, a[0], a[3]);
        Value c = arith::SubFOp::create(b, l, a[1], a[2]);
        Value meanDxhat = arith::DivFOp::create(b, l, a[6], width);
        Value centered = arith::SubFOp::create(b, l, dxhat, meanDxhat);
        if (stdEps) {
          Value first = arith::MulFOp::create(b, l, a[4], centered);
          Value second = arith::MulFOp::create(
              b, l, c, arith::MulFOp::create(b, l, a[7], a[5]));
          return arith::SubFOp::create(b, l, first, second);
        }
        Value xhat = arith::MulFOp::create(b, l, c, a[4]);
        // mean(dxhat·xhat) = s·Σ(dxhat·c)/D
        Value meanDxhatXhat = arith::DivFOp::create(
            b, l, arith::MulFOp::create(b, l, a[7], a[4]), width);
        Value inner = arith::SubFOp::create(
            b, l, centered, arith::MulFOp::create(b, l, xhat, meanDxhatXhat));
        return arith::MulFOp::create(b, l, a[4], inner);
      });
  // dgamma = Σ_rows g·xhat, dbeta = Σ_rows g.
  Value gXhat = e.generic(
      xType, ValueRange{g, x, mean, inv}, e.empty(e.sizes(x), e.f32()),
      {e.identity(rank), e.identity(rank), reduced, reduced, e.identity(rank)},
      par, [](OpBuilder &b, Location l, ValueRange a) {
        Value c = arith::SubFOp::create(b, l, a[1], a[2]);
        return arith::MulFOp::create(b, l, a[0],
                                     arith::MulFOp::create(b, l, c, a[3]));
      });
  return {dx, sumRows(e, gXhat), sumRows(e, g)};
}

SmallVector<Value>
lowerRmsNormGrad(RmsNormGradOp op, RmsNormGradOp::Adaptor adaptor, Emitter &e) {
  Value g = adaptor.getGrad(), x = adaptor.getInput(), w = adaptor.getWeight();
  auto xType = Emitter::type(x);
  int64_t rank = xType.getRank(), axis = rank - 1;
  SmallVector<OpFoldResult> rows;
  Value r = e.rmsScale(x, float(op.getEps().convertToDouble()), rows);
  AffineMap reduced = e.dropping(rank, axis);
  AffineMap feature = e.select(rank, {axis});
  // Per row: Σ g·w·x.
  Value dot =
      e.generic(Emitter::type(r), ValueRange{g, x, w}, e.filled(rows, 0.0),
                {e.identity(rank), e.identity(rank), feature, reduced},
                Emitter::reducing(rank, axis),
                [](OpBuilder &b, Location l, ValueRange a) {
                  Value gw = arith::MulFOp::create(b, l, a[0], a[2]);
                  return arith::AddFOp::create(
                      b, l, arith::MulFOp::create(b, l, gw, a[1]), a[3]);
                });
  Value width = e.sizeAsFloat(x, axis);
  // dx = r·g·w - x·(r³/D)·Σ g·w·x
  Value dx = e.generic(
      xType, ValueRange{g, x, w, r, dot}, e.empty(e.sizes(x), e.f32()),
      {e.identity(rank), e.identity(rank), feature, reduced, reduced,
       e.identity(rank)},
      Emitter::parallel(rank), [&](OpBuilder &b, Location l, ValueRange a) {
        Value gw = arith::MulFOp::create(b, l, a[0], a[2]);
        Value first = arith::MulFOp::create(b, l, a[3], gw);
        Value r3 = arith::MulFOp::create(
            b, l, a[3], arith::MulFOp::create(b, l, a[3], a[3]));
        Value k = arith::DivFOp::create(
            b, l, arith::MulFOp::create(b, l, r3, a[4]), width);
        return arith::SubFOp::create(b, l, first,
                                     arith::MulFOp::create(b, l, a[1], k));
      });
  // dw = Σ_rows g·x·r
  Value gxr = e.generic(
      xType, ValueRange{g, x, r}, e.empty(e.sizes(x), e.f32()),
      {e.identity(rank), e.identity(rank), reduced, e.identity(rank)},
      Emitter::parallel(rank), [](OpBuilder &b, Location l, ValueRange a) {
        return arith::MulFOp::create(b, l, a[0],
                                     arith::MulFOp::create(b, l, a[1], a[2]));
      });
  return {dx, sumRows(e, gxr)};
}

SmallVector<Value> lowerLossGrad(LossGradOp op, LossGradOp::Adaptor adaptor,
                                 Emitter &e) {
  Value x = adaptor.getInput(), targets = adaptor.getTargets(),
        lossGrad = adaptor.getLossGrad();
  auto xType = Emitter::type(x);
  int64_t rank = xType.getRank(), axis = rank - 1;
  bool fromLogits = op.getFromLogits();
  double smoothing = op.getLabelSmoothing().convertToDouble();
  std::optional<int64_t> ignore = op.getIgnoreIndex();
  LossReduction reduction = op.getReduction();
  Value classesF = e.sizeAsFloat(x, axis);
  AffineMap reduced = e.dropping(rank, axis);
  // Per row: log-sum-exp of the logits.
  Value lse = fromLogits ? e.logSumExp(x, axis) : Value();
  // The gradient scale: g (sum), g / #not-ignored (mean), g[row] (none).
  auto isIgnored = [&](OpBuilder &b, Location l, Value t) -> Value {
    if (!ignore) {
      return arith::ConstantOp::create(b, l, b.getBoolAttr(false));
    }
    return Emitter::isIndex(b, l, t, *ignore);
  };
  Value scale = lossGrad; // rank 0, or [rows] for none
  if (reduction == LossReduction::mean) {
    scale = e.divideScalars(lossGrad, e.keptCount(targets, ignore));
  }
  SmallVector<Value> inputs = {x, targets, scale};
  SmallVector<AffineMap> maps = {
      e.identity(rank), reduced,
      reduction == LossReduction::none ? reduced : e.scalarMap(rank)};
  if (lse) {
    inputs.push_back(lse);
    maps.push_back(reduced);
  }
  maps.push_back(e.identity(rank));
  SmallVector<IteratorType> par(rank, IteratorType::parallel);
  Value result = e.generic(
      resultType(op), inputs, e.empty(e.sizes(x), e.f32()), maps, par,
      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        auto c = [&](double v) {
          return arith::ConstantOp::create(b, l, b.getF32FloatAttr(float(v)));
        };
        Value cls = arith::IndexCastOp::create(
            b, l, a[1].getType(), linalg::IndexOp::create(b, l, axis));
        Value hit =
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, cls, a[1]);
        // q = (1 - s)·onehot + s/C
        Value q = arith::AddFOp::create(
            b, l,
            arith::SelectOp::create(b, l, hit, c(1.0 - smoothing), c(0.0)),
            arith::DivFOp::create(b, l, c(smoothing), classesF));
        Value d = arith::SubFOp::create(b, l, c(0.0), q);
        if (lse) {
          Value p = math::ExpOp::create(
              b, l, arith::SubFOp::create(b, l, a[0], a[3]));
          d = arith::AddFOp::create(b, l, p, d);
        }
        d = arith::MulFOp::create(b, l, d, a[2]);
        return arith::SelectOp::create(b, l, isIgnored(b, l, a[1]), c(0.0), d);
      });
  return {result};
}

/// Scatter-add of the output gradient rows into the table: a loop over the
/// positions (in order, so the sums are deterministic) carrying the table.
SmallVector<Value> lowerEmbeddingGrad(EmbeddingGradOp op,
                                      EmbeddingGradOp::Adaptor adaptor,
                                      Emitter &e) {
  Location loc = op.getLoc();
  Value g = adaptor.getGrad(), ids = adaptor.getIds();
  auto gType = Emitter::type(g);
  int64_t rank = gType.getRank();
  // View the positions as one dimension.
  Value g2 = g, ids1 = ids;
  if (rank != 2) {
    ReassociationIndices lead;
    for (int64_t d = 0; d + 1 < rank; ++d) {
      lead.push_back(d);
    }
    g2 = rank == 1 ? g
                   : tensor::CollapseShapeOp::create(
                         e.b, loc, g,
                         ArrayRef<ReassociationIndices>{lead, {rank - 1}})
                         .getResult();
    if (rank > 2) {
      ids1 = tensor::CollapseShapeOp::create(
          e.b, loc, ids, ArrayRef<ReassociationIndices>{lead});
    }
  }
  auto type = resultType(op);
  int64_t vocab = type.getDimSize(0);
  Value table = e.filled({e.b.getIndexAttr(vocab), e.size(g2, 1)}, 0.0);
  Value positions = e.sizeValue(g2, 0), width = e.sizeValue(g2, 1);
  std::optional<int64_t> pad = op.getPaddingIdx();
  Value zero = e.index(0), one = e.index(1);
  auto outer = scf::ForOp::create(
      e.b, loc, zero, positions, one, ValueRange{table},
      [&](OpBuilder &b, Location l, Value n, ValueRange iter) {
        Value id = tensor::ExtractOp::create(b, l, ids1, ValueRange{n});
        Value idx = arith::IndexCastOp::create(b, l, b.getIndexType(), id);
        Value inRange = arith::AndIOp::create(
            b, l,
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge, idx,
                                  arith::ConstantIndexOp::create(b, l, 0)),
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, idx,
                                  arith::ConstantIndexOp::create(b, l, vocab)));
        if (pad) {
          inRange = arith::AndIOp::create(
              b, l, inRange,
              arith::CmpIOp::create(
                  b, l, arith::CmpIPredicate::ne, idx,
                  arith::ConstantIndexOp::create(b, l, *pad)));
        }
        auto update = scf::IfOp::create(
            b, l, inRange,
            [&](OpBuilder &tb, Location tl) {
              auto inner = scf::ForOp::create(
                  tb, tl, arith::ConstantIndexOp::create(tb, tl, 0), width,
                  arith::ConstantIndexOp::create(tb, tl, 1), iter,
                  [&](OpBuilder &ib, Location il, Value d, ValueRange acc) {
                    Value cur = tensor::ExtractOp::create(ib, il, acc[0],
                                                          ValueRange{idx, d});
                    Value add =
                        tensor::ExtractOp::create(ib, il, g2, ValueRange{n, d});
                    Value sum = arith::AddFOp::create(ib, il, cur, add);
                    Value next = tensor::InsertOp::create(ib, il, sum, acc[0],
                                                          ValueRange{idx, d});
                    scf::YieldOp::create(ib, il, next);
                  });
              scf::YieldOp::create(tb, tl, inner.getResults());
            },
            [&](OpBuilder &eb, Location el) {
              scf::YieldOp::create(eb, el, iter);
            });
        scf::YieldOp::create(b, l, update.getResults());
      });
  Value result = outer.getResult(0);
  return {e.castTo(result, type)};
}

/// The learned position table's gradient: the output gradient summed over
/// the batch dims, placed at rows offset .. offset + T.
SmallVector<Value>
lowerPositionalEncodingGrad(PositionalEncodingGradOp op,
                            PositionalEncodingGradOp::Adaptor adaptor,
                            Emitter &e) {
  Value g = adaptor.getGrad();
  int64_t rank = Emitter::type(g).getRank();
  // [..., T, D] -> [T, D]
  Value rows = g;
  if (rank > 2) {
    SmallVector<IteratorType> iterators(rank, IteratorType::reduction);
    iterators[rank - 2] = iterators[rank - 1] = IteratorType::parallel;
    Value acc = e.filled({e.size(g, rank - 2), e.size(g, rank - 1)}, 0.0);
    rows = e.generic(acc.getType(), g, acc,
                     {e.identity(rank), e.select(rank, {rank - 2, rank - 1})},
                     iterators, [](OpBuilder &b, Location l, ValueRange a) {
                       return arith::AddFOp::create(b, l, a[0], a[1]);
                     });
  }
  Value offset = e.offsetIndex(adaptor.getOffset());
  Value length = e.sizeValue(rows, 0);
  auto type = resultType(op);
  SmallVector<OpFoldResult> shape = {e.b.getIndexAttr(type.getDimSize(0)),
                                     e.size(rows, 1)};
  Value result = e.generic(
      type, ValueRange{}, e.empty(shape, e.f32()), {e.identity(2)},
      {IteratorType::parallel, IteratorType::parallel},
      [&](OpBuilder &b, Location l, ValueRange) -> Value {
        Value r = linalg::IndexOp::create(b, l, 0);
        Value d = linalg::IndexOp::create(b, l, 1);
        Value p = arith::SubIOp::create(b, l, r, offset);
        Value inside = arith::AndIOp::create(
            b, l,
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge, p,
                                  arith::ConstantIndexOp::create(b, l, 0)),
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, p, length));
        Value row = Emitter::clampIndex(b, l, p, length);
        Value v = tensor::ExtractOp::create(b, l, rows, ValueRange{row, d});
        Value zero = arith::ConstantOp::create(b, l, b.getF32FloatAttr(0.0f));
        return arith::SelectOp::create(b, l, inside, v, zero);
      });
  return {result};
}

/// dx = g · [x == max] / count(x == max) over each reduced slice, the maxima
/// and counts recomputed in two reductions.
SmallVector<Value> lowerReduceMaxGrad(ReduceMaxGradOp op,
                                      ReduceMaxGradOp::Adaptor adaptor,
                                      Emitter &e) {
  Value x = adaptor.getInput();
  int64_t rank = Emitter::type(x).getRank();
  ReductionLoops loops(e, x, op.getAxes());
  // grad is indexed by the kept dimensions (and 0 for kept reduced ones).
  SmallVector<AffineExpr> gradExprs;
  for (int64_t d = 0; d < rank; ++d) {
    if (!loops.reduced[d]) {
      gradExprs.push_back(e.b.getAffineDimExpr(d));
    } else if (op.getKeepDims()) {
      gradExprs.push_back(e.b.getAffineConstantExpr(0));
    }
  }
  AffineMap all = e.identity(rank), kept = e.select(rank, loops.keptDims);
  AffineMap gradMap = AffineMap::get(rank, 0, gradExprs, e.b.getContext());
  Value lowest = e.filled(loops.keptSizes, -INFINITY);
  Value max =
      e.generic(lowest.getType(), x, lowest, {all, kept}, loops.iterators,
                [](OpBuilder &b, Location loc, ValueRange args) -> Value {
                  return arith::MaximumFOp::create(b, loc, args[0], args[1]);
                });
  auto isMax = [](OpBuilder &b, Location loc, Value v, Value m) {
    return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, v, m);
  };
  Value count = e.generic(
      max.getType(), ValueRange{x, max}, e.filled(loops.keptSizes, 0.0),
      {all, kept, kept}, loops.iterators,
      [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
        Value one = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1));
        Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
        Value add = arith::SelectOp::create(
            b, loc, isMax(b, loc, args[0], args[1]), one, zero);
        return arith::AddFOp::create(b, loc, args[2], add);
      });
  SmallVector<IteratorType> parallel(rank, IteratorType::parallel);
  Value dx = e.generic(
      resultType(op), ValueRange{x, max, count, adaptor.getGrad()},
      e.empty(e.sizes(x), e.f32()), {all, kept, kept, gradMap, all}, parallel,
      [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
        Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
        Value share = arith::DivFOp::create(b, loc, args[3], args[2]);
        return arith::SelectOp::create(b, loc, isMax(b, loc, args[0], args[1]),
                                       share, zero);
      });
  return {dx};
}

} // namespace

void mlir::kiln::populateGradientPatterns(RewritePatternSet &patterns) {
  patterns.add<Lowering<ActivationGradOp, lowerActivationGrad>,
               Lowering<LayerNormGradOp, lowerLayerNormGrad>,
               Lowering<RmsNormGradOp, lowerRmsNormGrad>,
               Lowering<LossGradOp, lowerLossGrad>,
               Lowering<EmbeddingGradOp, lowerEmbeddingGrad>,
               Lowering<PositionalEncodingGradOp, lowerPositionalEncodingGrad>,
               Lowering<ReduceMaxGradOp, lowerReduceMaxGrad>>(
      patterns.getContext());
}
