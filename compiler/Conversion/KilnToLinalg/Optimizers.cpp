//===- Optimizers.cpp - Optimizer updates ---------------------------------===//
//
// kiln.adam_update, sgd_update and global_norm_scale: one elementwise loop
// per parameter that updates it and its optimizer state in place.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/KilnToLinalg/Emitter.h"

#include "mlir/Dialect/Math/IR/Math.h"

#include <limits>

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// An optimizer update: one elementwise loop that reads `state` (the
/// parameter and its optimizer state, all of one shape), `tensors` of that
/// shape and rank-0 `scalars`, and writes the new state into `state` as its
/// destinations (linalg outs), so that bufferization can update arguments in
/// place. `body` gets the old state values, then the tensors' and the
/// scalars' elements, and returns the new state. With a `guard` (rank 0),
/// each element keeps its old value unless the guard is finite. Returns the
/// new state.
static SmallVector<Value> optimizerUpdate(
    Emitter &e, ValueRange state, ValueRange tensors, ValueRange scalars,
    Value guard,
    function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)> body) {
  int64_t rank = Emitter::type(state.front()).getRank();
  AffineMap scalarMap = e.scalarMap(rank);
  SmallVector<Value> inputs(tensors.begin(), tensors.end());
  SmallVector<AffineMap> maps(tensors.size(), e.identity(rank));
  llvm::append_range(inputs, scalars);
  maps.append(scalars.size(), scalarMap);
  if (guard) {
    inputs.push_back(guard);
    maps.push_back(scalarMap);
  }
  maps.append(state.size(), e.identity(rank));
  size_t numInputs = inputs.size();
  auto op = linalg::GenericOp::create(
      e.b, e.loc, TypeRange(state), inputs, state, maps,
      SmallVector<IteratorType>(rank, IteratorType::parallel),
      [&](OpBuilder &b, Location l, ValueRange args) {
        ValueRange old = args.drop_front(numInputs);
        SmallVector<Value> operands(old.begin(), old.end());
        llvm::append_range(operands,
                           args.take_front(tensors.size() + scalars.size()));
        SmallVector<Value> updated = body(b, l, operands);
        if (guard) {
          // |guard| < inf is false for inf and NaN (ordered comparison).
          Value magnitude = math::AbsFOp::create(b, l, args[numInputs - 1]);
          Value inf = arith::ConstantOp::create(
              b, l, b.getF32FloatAttr(std::numeric_limits<float>::infinity()));
          Value finite = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OLT,
                                               magnitude, inf);
          for (auto [value, before] : llvm::zip(updated, old)) {
            value = arith::SelectOp::create(b, l, finite, value, before);
          }
        }
        linalg::YieldOp::create(b, l, updated);
      });
  return llvm::to_vector_of<Value>(op.getResults());
}

SmallVector<Value> lowerAdamUpdate(AdamUpdateOp op,
                                   AdamUpdateOp::Adaptor adaptor, Emitter &e) {
  Location loc = op.getLoc();
  double b1 = op.getBeta1().convertToDouble(),
         b2 = op.getBeta2().convertToDouble();
  double eps = op.getEps().convertToDouble();
  double wd = op.getWeightDecay().convertToDouble();
  bool decoupled = op.getDecoupled();
  // 1 / (1 - beta^step), once per call: the elements multiply by it (one
  // division per element, m_hat / denominator, instead of three; the
  // update is memory-bound only when the divider keeps up).
  Value step =
      arith::SIToFPOp::create(e.b, loc, e.b.getF32Type(), adaptor.getStep());
  auto correction = [&](double beta) -> Value {
    Value pow = math::PowFOp::create(e.b, loc, e.f32c(beta), step);
    return arith::DivFOp::create(
        e.b, loc, e.f32c(1.0),
        arith::SubFOp::create(e.b, loc, e.f32c(1.0), pow));
  };
  Value bc1 = correction(b1), bc2 = correction(b2);
  SmallVector<Value> results = optimizerUpdate(
      e, ValueRange{adaptor.getParam(), adaptor.getM(), adaptor.getV()},
      ValueRange{adaptor.getGrad()}, ValueRange{adaptor.getLr()},
      adaptor.getGuard(),
      [&](OpBuilder &b, Location l, ValueRange a) -> SmallVector<Value> {
        auto c = [&](double v) {
          return arith::ConstantOp::create(b, l, b.getF32FloatAttr(float(v)));
        };
        Value p = a[0], g = a[3], lr = a[4];
        if (wd != 0.0) {
          Value decay = arith::MulFOp::create(b, l, c(wd), p);
          if (decoupled) {
            p = arith::SubFOp::create(b, l, p,
                                      arith::MulFOp::create(b, l, lr, decay));
          } else {
            g = arith::AddFOp::create(b, l, g, decay);
          }
        }
        Value m = arith::AddFOp::create(
            b, l, arith::MulFOp::create(b, l, c(b1), a[1]),
            arith::MulFOp::create(b, l, c(1 - b1), g));
        Value v = arith::AddFOp::create(
            b, l, arith::MulFOp::create(b, l, c(b2), a[2]),
            arith::MulFOp::create(b, l, c(1 - b2),
                                  arith::MulFOp::create(b, l, g, g)));
        Value mHat = arith::MulFOp::create(b, l, m, bc1);
        Value vHat = arith::MulFOp::create(b, l, v, bc2);
        Value denom = arith::AddFOp::create(
            b, l, math::SqrtOp::create(b, l, vHat), c(eps));
        Value update = arith::MulFOp::create(
            b, l, lr, arith::DivFOp::create(b, l, mHat, denom));
        return {arith::SubFOp::create(b, l, p, update), m, v};
      });
  return results;
}

SmallVector<Value> lowerSgdUpdate(SgdUpdateOp op, SgdUpdateOp::Adaptor adaptor,
                                  Emitter &e) {
  double momentum = op.getMomentum().convertToDouble();
  double wd = op.getWeightDecay().convertToDouble();
  SmallVector<Value> results = optimizerUpdate(
      e, ValueRange{adaptor.getParam(), adaptor.getBuf()},
      ValueRange{adaptor.getGrad()}, ValueRange{adaptor.getLr()},
      adaptor.getGuard(),
      [&](OpBuilder &b, Location l, ValueRange a) -> SmallVector<Value> {
        auto c = [&](double v) {
          return arith::ConstantOp::create(b, l, b.getF32FloatAttr(float(v)));
        };
        Value g = a[2];
        if (wd != 0.0) {
          g = arith::AddFOp::create(b, l, g,
                                    arith::MulFOp::create(b, l, c(wd), a[0]));
        }
        Value buf =
            momentum != 0.0
                ? arith::AddFOp::create(
                      b, l, arith::MulFOp::create(b, l, c(momentum), a[1]), g)
                      .getResult()
                : g;
        Value p = arith::SubFOp::create(b, l, a[0],
                                        arith::MulFOp::create(b, l, a[3], buf));
        return {p, buf};
      });
  return results;
}

SmallVector<Value> lowerGlobalNormScale(GlobalNormScaleOp op,
                                        GlobalNormScaleOp::Adaptor adaptor,
                                        Emitter &e) {
  Value total = e.filled({}, 0.0);
  for (Value g : adaptor.getInputs()) {
    total = e.sumAll(
        g,
        [](OpBuilder &b, Location l, Value v) -> Value {
          return arith::MulFOp::create(b, l, v, v);
        },
        total);
  }
  double maxNorm = op.getMaxNorm().convertToDouble();
  AffineMap none = e.scalarMap(0);
  Value scale = e.generic(
      total.getType(), total, e.empty({}, e.f32()), {none, none}, {},
      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        auto c = [&](double v) {
          return arith::ConstantOp::create(b, l, b.getF32FloatAttr(float(v)));
        };
        Value norm = math::SqrtOp::create(b, l, a[0]);
        Value factor = arith::DivFOp::create(
            b, l, c(maxNorm), arith::AddFOp::create(b, l, norm, c(1e-6)));
        return arith::MinimumFOp::create(b, l, factor, c(1.0));
      });
  return {scale};
}

} // namespace

void mlir::kiln::populateOptimizerPatterns(RewritePatternSet &patterns) {
  patterns.add<Lowering<AdamUpdateOp, lowerAdamUpdate>,
               Lowering<SgdUpdateOp, lowerSgdUpdate>,
               Lowering<GlobalNormScaleOp, lowerGlobalNormScale>>(
      patterns.getContext());
}
