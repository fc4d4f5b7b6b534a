//===- Emitter.cpp - Helpers for lowering kiln to linalg ------------------===//
//
// The bodies of Emitter.h's helpers.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/KilnToLinalg/Emitter.h"

#include "base/SplitMix64.h"

#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::kiln;

//===----------------------------------------------------------------------===//
// Free helpers
//===----------------------------------------------------------------------===//

Value mlir::kiln::mulAdd(OpBuilder &b, Location loc, ValueRange args) {
  Value product = arith::MulFOp::create(b, loc, args[0], args[1]);
  return arith::AddFOp::create(b, loc, args[2], product);
}

Value mlir::kiln::relu(OpBuilder &b, Location loc, Value x) {
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  return arith::MaximumFOp::create(b, loc, x, zero);
}

Value mlir::kiln::gelu(OpBuilder &b, Location loc, Value x, bool tanhApprox) {
  auto c = [&](double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(float(v)));
  };
  Value inner;
  if (tanhApprox) {
    // tanh(sqrt(2/pi) * (x + 0.044715 x^3))
    Value x3 =
        arith::MulFOp::create(b, loc, x, arith::MulFOp::create(b, loc, x, x));
    Value poly = arith::AddFOp::create(
        b, loc, x, arith::MulFOp::create(b, loc, c(0.044715), x3));
    inner = math::TanhOp::create(
        b, loc, arith::MulFOp::create(b, loc, c(std::sqrt(2.0 / M_PI)), poly));
  } else {
    inner = math::ErfOp::create(b, loc,
                                arith::MulFOp::create(b, loc, x, c(M_SQRT1_2)));
  }
  Value onePlus = arith::AddFOp::create(b, loc, c(1.0), inner);
  return arith::MulFOp::create(b, loc, arith::MulFOp::create(b, loc, c(0.5), x),
                               onePlus);
}

Value mlir::kiln::silu(OpBuilder &b, Location loc, Value x) {
  Value one = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f));
  Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
  return arith::DivFOp::create(b, loc, x,
                               arith::AddFOp::create(b, loc, one, e));
}

Value mlir::kiln::activation(OpBuilder &b, Location loc, Activation act,
                             Value x) {
  switch (act) {
  case Activation::relu:
    return relu(b, loc, x);
  case Activation::silu:
    return silu(b, loc, x);
  case Activation::gelu:
  case Activation::gelu_tanh:
    break;
  }
  return gelu(b, loc, x, act == Activation::gelu_tanh);
}

int64_t mlir::kiln::normalizedAxis(uint64_t axis, int64_t rank) {
  auto signedAxis = static_cast<int64_t>(axis);
  return signedAxis < 0 ? signedAxis + rank : signedAxis;
}

//===----------------------------------------------------------------------===//
// Emitter
//===----------------------------------------------------------------------===//

Value Emitter::filled(ArrayRef<OpFoldResult> shape, double value) {
  Value init = empty(shape, f32());
  return linalg::FillOp::create(b, loc, ValueRange{f32c(value)},
                                ValueRange{init})
      .getResult(0);
}

AffineMap Emitter::select(int64_t rank, ArrayRef<int64_t> dims) {
  SmallVector<AffineExpr> exprs;
  for (int64_t d : dims) {
    exprs.push_back(b.getAffineDimExpr(d));
  }
  return AffineMap::get(rank, 0, exprs, b.getContext());
}

AffineMap Emitter::dropping(int64_t rank, int64_t drop) {
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != drop) {
      dims.push_back(d);
    }
  }
  return select(rank, dims);
}

Value Emitter::generic(TypeRange results, ValueRange inputs, ValueRange outputs,
                       ArrayRef<AffineMap> maps,
                       ArrayRef<IteratorType> iterators, BodyFn body) {
  auto op = linalg::GenericOp::create(
      b, loc, results, inputs, outputs, maps, iterators,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value result = body(nb, nl, args);
        linalg::YieldOp::create(nb, nl, result);
      });
  return op.getResult(0);
}

Value Emitter::elementwise(RankedTensorType resultType,
                           ArrayRef<OpFoldResult> shape, ValueRange inputs,
                           BodyFn body) {
  int64_t rank = resultType.getRank();
  SmallVector<Value> operands;
  SmallVector<AffineMap> maps;
  for (Value input : inputs) {
    auto [operand, map] = broadcastOperand(input, resultType);
    operands.push_back(operand);
    maps.push_back(map);
  }
  maps.push_back(identity(rank));
  Value init = empty(shape, resultType.getElementType());
  SmallVector<IteratorType> iterators(rank, IteratorType::parallel);
  return generic(resultType, operands, init, maps, iterators, body);
}

SmallVector<OpFoldResult> Emitter::broadcastShape(RankedTensorType resultType,
                                                  ValueRange inputs) {
  int64_t rank = resultType.getRank();
  SmallVector<OpFoldResult> shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (!resultType.isDynamicDim(d)) {
      shape.push_back(b.getIndexAttr(resultType.getDimSize(d)));
      continue;
    }
    // A dynamic result size comes from an input whose aligned size is
    // dynamic (dynamic sizes broadcast only when they are statically 1).
    for (Value input : inputs) {
      auto t = type(input);
      int64_t k = d - (rank - t.getRank());
      if (k >= 0 && t.isDynamicDim(k)) {
        shape.push_back(size(input, k));
        break;
      }
    }
  }
  return shape;
}

std::pair<Value, AffineMap>
Emitter::broadcastOperand(Value input, RankedTensorType resultType) {
  auto t = type(input);
  int64_t rank = resultType.getRank();
  int64_t offset = rank - t.getRank();
  SmallVector<int64_t> kept;
  for (int64_t k = 0; k < t.getRank(); ++k) {
    bool unit = t.getDimSize(k) == 1;
    if (!unit || resultType.getDimSize(offset + k) == 1) {
      kept.push_back(k);
    }
  }
  SmallVector<int64_t> loops;
  for (int64_t k : kept) {
    loops.push_back(offset + k);
  }
  if (static_cast<int64_t>(kept.size()) == t.getRank()) {
    return {input, select(rank, loops)};
  }
  SmallVector<bool> keptMask(t.getRank(), false);
  for (int64_t k : kept) {
    keptMask[k] = true;
  }
  Value collapsed =
      tensor::CollapseShapeOp::create(b, loc, input, collapseGroups(keptMask));
  return {collapsed, select(rank, loops)};
}

SmallVector<ReassociationIndices> Emitter::collapseGroups(ArrayRef<bool> kept) {
  // Group every dropped dim with the next kept dim (or the last).
  SmallVector<ReassociationIndices> groups;
  ReassociationIndices group;
  for (auto [d, keep] : llvm::enumerate(kept)) {
    group.push_back(int64_t(d));
    if (keep) {
      groups.push_back(group);
      group.clear();
    }
  }
  if (!group.empty() && !groups.empty()) {
    groups.back().append(group.begin(), group.end());
  }
  return groups;
}

Value Emitter::reduce(
    Value input, int64_t axis, double init,
    function_ref<Value(OpBuilder &, Location, Value, Value)> combine) {
  auto t = type(input);
  int64_t rank = t.getRank();
  SmallVector<OpFoldResult> shape = sizes(input);
  shape.erase(shape.begin() + axis);
  Value acc = filled(shape, init);
  SmallVector<IteratorType> iterators(rank, IteratorType::parallel);
  iterators[axis] = IteratorType::reduction;
  return generic(acc.getType(), input, acc,
                 {identity(rank), dropping(rank, axis)}, iterators,
                 [&](OpBuilder &nb, Location nl, ValueRange args) {
                   return combine(nb, nl, args[0], args[1]);
                 });
}

Value Emitter::indexToF32(OpBuilder &nb, Location nl, Value index) {
  Value i64 = arith::IndexCastOp::create(nb, nl, nb.getI64Type(), index);
  return arith::SIToFPOp::create(nb, nl, nb.getF32Type(), i64);
}

Value Emitter::sizeAsFloat(Value t, int64_t dim) {
  return indexToF32(b, loc, sizeValue(t, dim));
}

SmallVector<Value> Emitter::sizeValues(Value t) {
  SmallVector<Value> values;
  for (int64_t d = 0; d < type(t).getRank(); ++d) {
    values.push_back(sizeValue(t, d));
  }
  return values;
}

Value Emitter::offsetIndex(Value offset) {
  if (!offset) {
    return index(0);
  }
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), offset);
}

Value Emitter::castTo(Value value, Type type) {
  if (value.getType() == type) {
    return value;
  }
  return tensor::CastOp::create(b, loc, type, value);
}

SmallVector<IteratorType> Emitter::reducing(int64_t rank, int64_t axis) {
  SmallVector<IteratorType> iterators(rank, IteratorType::parallel);
  iterators[axis] = IteratorType::reduction;
  return iterators;
}

Value Emitter::sum(Value input, int64_t axis) {
  return reduce(input, axis, 0.0,
                [](OpBuilder &nb, Location nl, Value v, Value acc) -> Value {
                  return arith::AddFOp::create(nb, nl, v, acc);
                });
}

Value Emitter::max(Value input, int64_t axis) {
  return reduce(input, axis, -INFINITY,
                [](OpBuilder &nb, Location nl, Value v, Value acc) -> Value {
                  return arith::MaximumFOp::create(nb, nl, v, acc);
                });
}

Value Emitter::mapRows(Value rows, ArrayRef<OpFoldResult> shape,
                       function_ref<Value(OpBuilder &, Location, Value)> f) {
  int64_t rank = type(rows).getRank();
  return generic(rows.getType(), rows, empty(shape, f32()),
                 {identity(rank), identity(rank)}, parallel(rank),
                 [&](OpBuilder &nb, Location nl, ValueRange args) {
                   return f(nb, nl, args[0]);
                 });
}

Value Emitter::sumAll(Value input,
                      function_ref<Value(OpBuilder &, Location, Value)> f,
                      Value init) {
  int64_t rank = type(input).getRank();
  if (!init) {
    init = filled({}, 0.0);
  }
  return generic(RankedTensorType::get({}, f32()), input, init,
                 {identity(rank), scalarMap(rank)},
                 SmallVector<IteratorType>(rank, IteratorType::reduction),
                 [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
                   Value v = f ? f(nb, nl, args[0]) : args[0];
                   return arith::AddFOp::create(nb, nl, v, args[1]);
                 });
}

Value Emitter::divideScalars(Value lhs, Value rhs) {
  AffineMap none = scalarMap(0);
  return generic(RankedTensorType::get({}, f32()), ValueRange{lhs, rhs},
                 empty({}, f32()), {none, none, none}, {},
                 [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
                   return arith::DivFOp::create(nb, nl, args[0], args[1]);
                 });
}

Emitter::RowStats Emitter::rowStats(Value x, Value width) {
  int64_t rank = type(x).getRank(), axis = rank - 1;
  RowStats stats;
  Value sum = this->sum(x, axis);
  stats.rows = sizes(sum);
  stats.mean = mapRows(sum, stats.rows,
                       [&](OpBuilder &nb, Location nl, Value v) -> Value {
                         return arith::DivFOp::create(nb, nl, v, width);
                       });
  AffineMap reduced = dropping(rank, axis);
  Value sq0 = filled(stats.rows, 0.0);
  stats.squares =
      generic(sq0.getType(), ValueRange{x, stats.mean}, sq0,
              {identity(rank), reduced, reduced}, reducing(rank, axis),
              [](OpBuilder &nb, Location nl, ValueRange args) {
                Value d = arith::SubFOp::create(nb, nl, args[0], args[1]);
                Value d2 = arith::MulFOp::create(nb, nl, d, d);
                return arith::AddFOp::create(nb, nl, d2, args[2]);
              });
  return stats;
}

Value Emitter::rmsScale(Value x, float eps, SmallVector<OpFoldResult> &rows) {
  int64_t axis = type(x).getRank() - 1;
  Value width = sizeAsFloat(x, axis);
  Value squares =
      reduce(x, axis, 0.0, [](OpBuilder &nb, Location nl, Value v, Value acc) {
        Value v2 = arith::MulFOp::create(nb, nl, v, v);
        return arith::AddFOp::create(nb, nl, v2, acc);
      });
  rows = sizes(squares);
  return mapRows(squares, rows, [&](OpBuilder &nb, Location nl, Value sq) {
    Value meanSquare = arith::DivFOp::create(nb, nl, sq, width);
    return math::RsqrtOp::create(
        nb, nl, arith::AddFOp::create(nb, nl, meanSquare, f32c(nb, nl, eps)));
  });
}

Value mlir::kiln::layerNormScale(OpBuilder &b, Location loc, Value squares,
                                 Value count, float eps, bool stdEps) {
  Value var = arith::DivFOp::create(b, loc, squares, count);
  Value epsC = Emitter::f32c(b, loc, eps);
  if (stdEps) {
    Value sd = math::SqrtOp::create(b, loc, var);
    return arith::DivFOp::create(b, loc, Emitter::f32c(b, loc, 1.0),
                                 arith::AddFOp::create(b, loc, sd, epsC));
  }
  return math::RsqrtOp::create(b, loc,
                               arith::AddFOp::create(b, loc, var, epsC));
}

Value Emitter::keptCount(Value targets, std::optional<int64_t> ignore) {
  int64_t rank = type(targets).getRank();
  if (!ignore) {
    Value count = index(1);
    for (int64_t d = 0; d < rank; ++d) {
      count = arith::MulIOp::create(b, loc, count, sizeValue(targets, d));
    }
    Value i64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), count);
    Value f = arith::SIToFPOp::create(b, loc, f32(), i64);
    return linalg::FillOp::create(b, loc, ValueRange{f},
                                  ValueRange{empty({}, f32())})
        .getResult(0);
  }
  SmallVector<IteratorType> all(rank, IteratorType::reduction);
  int64_t ignored = *ignore;
  return generic(
      RankedTensorType::get({}, f32()), targets, filled({}, 0.0),
      {identity(rank), scalarMap(rank)}, all,
      [&](OpBuilder &nb, Location nl, ValueRange a) {
        Value skip = isIndex(nb, nl, a[0], ignored);
        Value one = arith::SelectOp::create(
            nb, nl, skip,
            arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(0.0f)),
            arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(1.0f)));
        return arith::AddFOp::create(nb, nl, one, a[1]);
      });
}

Value Emitter::isIndex(OpBuilder &nb, Location nl, Value value, int64_t index) {
  Value constant = arith::ConstantOp::create(
      nb, nl, nb.getIntegerAttr(value.getType(), index));
  return arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::eq, value,
                               constant);
}

Value Emitter::clampIndex(OpBuilder &nb, Location nl, Value value,
                          Value bound) {
  Value idx =
      value.getType().isIndex()
          ? value
          : arith::IndexCastOp::create(nb, nl, nb.getIndexType(), value);
  Value zero = arith::ConstantIndexOp::create(nb, nl, 0);
  Value one = arith::ConstantIndexOp::create(nb, nl, 1);
  Value last = arith::SubIOp::create(nb, nl, bound, one);
  Value low = arith::MaxSIOp::create(nb, nl, idx, zero);
  return arith::MinSIOp::create(nb, nl, low, last);
}

Value Emitter::linear(Value x, Value w, Value bias, RankedTensorType resultType,
                      bool storedKN) {
  int64_t rank = type(x).getRank();
  // Loops: leading dims..., n, k.
  int64_t loops = rank + 1;
  int64_t n = rank - 1, k = rank;
  SmallVector<int64_t> xDims, outDims;
  for (int64_t d = 0; d + 1 < rank; ++d) {
    xDims.push_back(d);
    outDims.push_back(d);
  }
  xDims.push_back(k);
  outDims.push_back(n);
  SmallVector<OpFoldResult> shape = sizes(x);
  shape.back() = size(w, storedKN ? 1 : 0);
  Value acc;
  if (bias) {
    acc =
        generic(resultType, bias, empty(shape, f32()),
                {select(rank, {rank - 1}), identity(rank)},
                SmallVector<IteratorType>(rank, IteratorType::parallel),
                [](OpBuilder &, Location, ValueRange args) { return args[0]; });
  } else {
    acc = filled(shape, 0.0);
  }
  SmallVector<IteratorType> iterators(loops, IteratorType::parallel);
  iterators[k] = IteratorType::reduction;
  if (storedKN) {
    return generic(
        resultType, ValueRange{x, w}, acc,
        {select(loops, xDims), select(loops, {k, n}), select(loops, outDims)},
        iterators, mulAdd);
  }
  // A static weight is read as it is, [N, K]: CPU code generation copies
  // it transposed, block by block, into the contiguous [kc, nc] blocks its
  // register tiles read (kiln-tile-and-vectorize). Otherwise it is
  // transposed to [K, N] here (once per call, K·N copies against M·N·K
  // multiply-adds), so that a row of N outputs reads contiguous weights.
  if (type(w).hasStaticShape() && rank >= 2) {
    return generic(
        resultType, ValueRange{x, w}, acc,
        {select(loops, xDims), select(loops, {n, k}), select(loops, outDims)},
        iterators, mulAdd);
  }
  SmallVector<OpFoldResult> wtShape = {size(w, 1), size(w, 0)};
  Value wt = linalg::TransposeOp::create(b, loc, w, empty(wtShape, f32()),
                                         ArrayRef<int64_t>{1, 0})
                 .getResult()[0];
  return generic(
      resultType, ValueRange{x, wt}, acc,
      {select(loops, xDims), select(loops, {k, n}), select(loops, outDims)},
      iterators, mulAdd);
}

/// splitmix64's `mix` (base/SplitMix64.h) on i64 values.
static Value mix64(OpBuilder &b, Location loc, Value z) {
  namespace sm = ::kiln::splitmix64;
  auto c = [&](uint64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(int64_t(v)));
  };
  auto xorShiftRight = [&](Value v, unsigned shift) -> Value {
    Value shifted = arith::ShRUIOp::create(b, loc, v, c(shift));
    return arith::XOrIOp::create(b, loc, v, shifted);
  };
  z = arith::AddIOp::create(b, loc, z, c(sm::kIncrement));
  z = arith::MulIOp::create(b, loc, xorShiftRight(z, sm::kShift1),
                            c(sm::kMultiplier1));
  z = arith::MulIOp::create(b, loc, xorShiftRight(z, sm::kShift2),
                            c(sm::kMultiplier2));
  return xorShiftRight(z, sm::kShift3);
}

Value Emitter::dropoutScale(OpBuilder &nb, Location nl, Value seed,
                            int64_t stream, double p,
                            ArrayRef<Value> loopSizes) {
  // Linear index, row-major over the given loops.
  Value linear = arith::ConstantIndexOp::create(nb, nl, 0);
  for (auto [dim, size] : llvm::enumerate(loopSizes)) {
    Value i = linalg::IndexOp::create(nb, nl, int64_t(dim));
    linear = arith::AddIOp::create(
        nb, nl, arith::MulIOp::create(nb, nl, linear, size), i);
  }
  return dropoutScaleAt(nb, nl, seed, stream, p, linear);
}

Value Emitter::dropoutScaleAt(OpBuilder &nb, Location nl, Value seed,
                              int64_t stream, double p, Value linear) {
  Value index64 = arith::IndexCastOp::create(nb, nl, nb.getI64Type(), linear);
  // key = mix(seed + stream·kIncrement), bits = mix(key ^ index), as
  // ::kiln::splitmix64::dropoutBits computes them.
  namespace sm = ::kiln::splitmix64;
  Value streamConst = arith::ConstantOp::create(
      nb, nl, nb.getI64IntegerAttr(int64_t(uint64_t(stream) * sm::kIncrement)));
  Value key = mix64(nb, nl, arith::AddIOp::create(nb, nl, seed, streamConst));
  Value bits = mix64(nb, nl, arith::XOrIOp::create(nb, nl, key, index64));
  // The top bits as a uniform integer in [0, 2^kDropoutBits).
  Value top = arith::ShRUIOp::create(
      nb, nl, bits,
      arith::ConstantOp::create(nb, nl,
                                nb.getI64IntegerAttr(64 - sm::kDropoutBits)));
  Value threshold = arith::ConstantOp::create(
      nb, nl, nb.getI64IntegerAttr(int64_t(sm::dropoutThreshold(p))));
  Value keep =
      arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::uge, top, threshold);
  Value scale = arith::ConstantOp::create(
      nb, nl, nb.getF32FloatAttr(float(1.0 / (1.0 - p))));
  Value zero = arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(0.0f));
  return arith::SelectOp::create(nb, nl, keep, scale, zero);
}

std::pair<Value, Value> Emitter::maxAndExpSum(Value x, int64_t axis) {
  int64_t rank = type(x).getRank();
  Value max = this->max(x, axis);
  AffineMap reduced = dropping(rank, axis);
  Value sum0 = filled(sizes(max), 0.0);
  Value sum = generic(sum0.getType(), ValueRange{x, max}, sum0,
                      {identity(rank), reduced, reduced}, reducing(rank, axis),
                      [](OpBuilder &nb, Location nl, ValueRange args) {
                        Value d =
                            arith::SubFOp::create(nb, nl, args[0], args[1]);
                        Value e = math::ExpOp::create(nb, nl, d);
                        return arith::AddFOp::create(nb, nl, e, args[2]);
                      });
  return {max, sum};
}

Value Emitter::logSumExp(Value x, int64_t axis) {
  auto [max, sum] = maxAndExpSum(x, axis);
  int64_t rowRank = type(max).getRank();
  AffineMap row = identity(rowRank);
  return generic(sum.getType(), ValueRange{max, sum}, empty(sizes(max), f32()),
                 {row, row, row}, parallel(rowRank),
                 [](OpBuilder &nb, Location nl, ValueRange args) {
                   Value lg = math::LogOp::create(nb, nl, args[1]);
                   return arith::AddFOp::create(nb, nl, args[0], lg);
                 });
}

Value Emitter::softmax(Value x, int64_t axis, bool log) {
  auto t = type(x);
  int64_t rank = t.getRank();
  auto [max, sum] = maxAndExpSum(x, axis);
  AffineMap reduced = dropping(rank, axis);
  return generic(t, ValueRange{x, max, sum}, empty(sizes(x), f32()),
                 {identity(rank), reduced, reduced, identity(rank)},
                 parallel(rank),
                 [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
                   Value d = arith::SubFOp::create(nb, nl, args[0], args[1]);
                   if (log) {
                     Value l = math::LogOp::create(nb, nl, args[2]);
                     return arith::SubFOp::create(nb, nl, d, l);
                   }
                   Value e = math::ExpOp::create(nb, nl, d);
                   return arith::DivFOp::create(nb, nl, e, args[2]);
                 });
}

//===----------------------------------------------------------------------===//
// ReductionLoops
//===----------------------------------------------------------------------===//

ReductionLoops::ReductionLoops(Emitter &e, Value x, ArrayRef<int64_t> axes) {
  int64_t rank = Emitter::type(x).getRank();
  reduced.assign(rank, false);
  for (int64_t axis : axes) {
    reduced[axis < 0 ? axis + rank : axis] = true;
  }
  for (int64_t d = 0; d < rank; ++d) {
    iterators.push_back(reduced[d] ? IteratorType::reduction
                                   : IteratorType::parallel);
    if (!reduced[d]) {
      keptSizes.push_back(e.size(x, d));
      keptDims.push_back(d);
    }
  }
}
SmallVector<bool> reduced;
SmallVector<IteratorType> iterators;
SmallVector<int64_t> keptDims;
