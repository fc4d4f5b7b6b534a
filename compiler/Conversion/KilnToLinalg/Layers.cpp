//===- Layers.cpp - Model building blocks ---------------------------------===//
//
// kiln.embedding, positional_encoding, layer_norm, rms_norm, rotary, linear,
// matmul (the contraction linear is built on), feed_forward and dropout.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/KilnToLinalg/Emitter.h"

#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// x times the dropout scale of each element (a pure function of the seed,
/// the stream and the element's row-major index).
SmallVector<Value> lowerDropout(DropoutOp op, DropoutOp::Adaptor adaptor,
                                Emitter &e) {
  Value x = adaptor.getInput();
  SmallVector<Value> sizes = e.sizeValues(x);
  double p = op.getP().convertToDouble();
  Value seed = adaptor.getSeed();
  int64_t stream = op.getStream();
  return {e.elementwise(resultType(op), e.sizes(x), x,
                        [&](OpBuilder &b, Location loc, ValueRange args) {
                          Value scale = Emitter::dropoutScale(b, loc, seed,
                                                              stream, p, sizes);
                          return arith::MulFOp::create(b, loc, args[0], scale);
                        })};
}

SmallVector<Value> lowerEmbedding(EmbeddingOp op, EmbeddingOp::Adaptor adaptor,
                                  Emitter &e) {
  // A gather: row ids[...] (clamped into the table), column d.
  Value ids = adaptor.getIds(), table = adaptor.getTable();
  RankedTensorType type = resultType(op);
  int64_t rank = type.getRank();
  SmallVector<OpFoldResult> shape = e.sizes(ids);
  shape.push_back(e.size(table, 1));
  Value vocab = e.sizeValue(table, 0);
  SmallVector<IteratorType> iterators(rank, IteratorType::parallel);
  Value result = e.generic(
      type, ids, e.empty(shape, type.getElementType()),
      {e.dropping(rank, rank - 1), e.identity(rank)}, iterators,
      [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
        Value row = Emitter::clampIndex(b, loc, args[0], vocab);
        Value col = linalg::IndexOp::create(b, loc, rank - 1);
        return tensor::ExtractOp::create(b, loc, table, ValueRange{row, col});
      });
  return {result};
}

SmallVector<Value>
lowerPositionalEncoding(PositionalEncodingOp op,
                        PositionalEncodingOp::Adaptor adaptor, Emitter &e) {
  auto type = resultType(op);
  int64_t rank = type.getRank();
  Value input = adaptor.getInput();
  Value offset = e.offsetIndex(adaptor.getOffset());
  bool learned = op.getKind() == PEKind::learned;
  Value table = adaptor.getTable();
  Value maxLen = learned ? e.sizeValue(table, 0) : Value();
  Value width = e.sizeAsFloat(input, rank - 1);
  Value result = e.elementwise(
      type, e.sizes(input), input,
      [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
        Value t = linalg::IndexOp::create(b, loc, rank - 2);
        Value i = linalg::IndexOp::create(b, loc, rank - 1);
        Value pos = arith::AddIOp::create(b, loc, t, offset);
        if (learned) {
          Value row = Emitter::clampIndex(b, loc, pos, maxLen);
          Value pe =
              tensor::ExtractOp::create(b, loc, table, ValueRange{row, i});
          return arith::AddFOp::create(b, loc, args[0], pe);
        }
        // div = exp(2·floor(i/2) · (-ln(10000) / D)), as torch computes it.
        auto c = [&](double v) {
          return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(float(v)));
        };
        auto toFloat = [&](Value index) {
          return Emitter::indexToF32(b, loc, index);
        };
        Value two = arith::ConstantIndexOp::create(b, loc, 2);
        Value pair = arith::MulIOp::create(
            b, loc, arith::DivUIOp::create(b, loc, i, two), two);
        Value rate =
            arith::DivFOp::create(b, loc, c(-std::log(10000.0)), width);
        Value div = math::ExpOp::create(
            b, loc, arith::MulFOp::create(b, loc, toFloat(pair), rate));
        Value angle = arith::MulFOp::create(b, loc, toFloat(pos), div);
        Value odd =
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                  arith::RemUIOp::create(b, loc, i, two),
                                  arith::ConstantIndexOp::create(b, loc, 0));
        Value pe = arith::SelectOp::create(b, loc, odd,
                                           math::CosOp::create(b, loc, angle),
                                           math::SinOp::create(b, loc, angle));
        return arith::AddFOp::create(b, loc, args[0], pe);
      });
  return {result};
}

SmallVector<Value> lowerLayerNorm(LayerNormOp op, LayerNormOp::Adaptor adaptor,
                                  Emitter &e) {
  auto type = resultType(op);
  int64_t rank = type.getRank();
  int64_t axis = rank - 1;
  Value x = adaptor.getInput();
  bool stdEps = op.getMode() == NormMode::std_eps;
  Value width = e.sizeAsFloat(x, axis);
  Emitter::RowStats stats = e.rowStats(x, width);
  Value mean = stats.mean;
  AffineMap reduced = e.dropping(rank, axis);
  // Per row: the factor that multiplies (x - mean).
  float eps = float(op.getEps().convertToDouble());
  Value count = width;
  if (stdEps) {
    count = arith::SubFOp::create(e.b, op.getLoc(), width, e.f32c(1.0));
  }
  Value inv = e.mapRows(stats.squares, stats.rows,
                        [&](OpBuilder &b, Location loc, Value sq) {
                          return layerNormScale(b, loc, sq, count, eps, stdEps);
                        });
  AffineMap feature = e.select(rank, {axis});
  SmallVector<IteratorType> parallel(rank, IteratorType::parallel);
  Value result = e.generic(
      type, ValueRange{x, mean, inv, adaptor.getGamma(), adaptor.getBeta()},
      e.empty(e.sizes(x), e.f32()),
      {e.identity(rank), reduced, reduced, feature, feature, e.identity(rank)},
      parallel, [](OpBuilder &b, Location loc, ValueRange args) {
        Value centered = arith::SubFOp::create(b, loc, args[0], args[1]);
        Value norm = arith::MulFOp::create(b, loc, centered, args[2]);
        Value scaled = arith::MulFOp::create(b, loc, norm, args[3]);
        return arith::AddFOp::create(b, loc, scaled, args[4]);
      });
  return {result};
}

/// Not a KilnPattern: it reads the input of the weight's defining op, which
/// needs the rewriter's remapping.
struct LinearPattern : OpConversionPattern<LinearOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(LinearOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Emitter e{rewriter, op.getLoc()};
    // The weight a 2-D transpose makes (dx = g·W of a linear's gradient) is
    // read where it was, [K, N]: the transpose, left unused, goes away.
    auto resultType = cast<RankedTensorType>(op.getType());
    auto transpose = op.getWeight().getDefiningOp<TransposeOp>();
    if (transpose && transpose.getPermutation() == ArrayRef<int64_t>{1, 0}) {
      rewriter.replaceOp(
          op, e.linear(adaptor.getInput(),
                       rewriter.getRemappedValue(transpose.getInput()),
                       adaptor.getBias(), resultType, /*storedKN=*/true));
      return success();
    }
    rewriter.replaceOp(op, e.linear(adaptor.getInput(), adaptor.getWeight(),
                                    adaptor.getBias(), resultType));
    return success();
  }
};

SmallVector<Value> lowerMatmul(MatmulOp op, MatmulOp::Adaptor adaptor,
                               Emitter &e) {
  auto type = resultType(op);
  int64_t rank = type.getRank();
  int64_t batch = rank - 2;
  // Loops: batch..., m, n, k.
  int64_t loops = rank + 1;
  int64_t m = batch, n = batch + 1, k = batch + 2;
  SmallVector<int64_t> lhsDims, rhsDims, outDims;
  for (int64_t d = 0; d < batch; ++d) {
    lhsDims.push_back(d);
    rhsDims.push_back(d);
    outDims.push_back(d);
  }
  lhsDims.append(op.getTransposeLhs() ? SmallVector<int64_t>{k, m}
                                      : SmallVector<int64_t>{m, k});
  // B stored [.., N, K] is read as it is stored, (n, k), as kiln.linear
  // reads its weight: on the CPU, kiln-tile-and-vectorize copies it
  // transposed block by block (batch by batch) while the block is in
  // cache, instead of a transpose of all of B first.
  rhsDims.append(op.getTransposeRhs() ? SmallVector<int64_t>{n, k}
                                      : SmallVector<int64_t>{k, n});
  outDims.append({m, n});
  Value lhs = adaptor.getLhs(), rhs = adaptor.getRhs();
  SmallVector<OpFoldResult> shape;
  for (int64_t d = 0; d < batch; ++d) {
    shape.push_back(e.size(lhs, d));
  }
  shape.push_back(e.size(lhs, op.getTransposeLhs() ? rank - 1 : rank - 2));
  shape.push_back(e.size(rhs, op.getTransposeRhs() ? rank - 2 : rank - 1));
  SmallVector<IteratorType> iterators(loops, IteratorType::parallel);
  iterators[k] = IteratorType::reduction;
  Value result = e.generic(type, ValueRange{lhs, rhs}, e.filled(shape, 0.0),
                           {e.select(loops, lhsDims), e.select(loops, rhsDims),
                            e.select(loops, outDims)},
                           iterators, mulAdd);
  return {result};
}

SmallVector<Value> lowerRmsNorm(RmsNormOp op, RmsNormOp::Adaptor adaptor,
                                Emitter &e) {
  auto type = resultType(op);
  int64_t rank = type.getRank(), axis = rank - 1;
  Value x = adaptor.getInput();
  SmallVector<OpFoldResult> rows;
  Value scale = e.rmsScale(x, float(op.getEps().convertToDouble()), rows);
  return {e.generic(type, ValueRange{x, scale, adaptor.getWeight()},
                    e.empty(e.sizes(x), e.f32()),
                    {e.identity(rank), e.dropping(rank, axis),
                     e.select(rank, {axis}), e.identity(rank)},
                    Emitter::parallel(rank),
                    [](OpBuilder &b, Location loc, ValueRange args) {
                      Value n = arith::MulFOp::create(b, loc, args[0], args[1]);
                      return arith::MulFOp::create(b, loc, n, args[2]);
                    })};
}

/// The rotation of each pair of features by its position's angle. The cos
/// and sin of every (position, pair) are computed once, into [T, hd/2]
/// tables, then every element of the input reads its partner and the tables.
SmallVector<Value> lowerRotary(RotaryOp op, RotaryOp::Adaptor adaptor,
                               Emitter &e) {
  auto type = resultType(op);
  int64_t rank = type.getRank(), tAxis = rank - 2, dAxis = rank - 1;
  int64_t headDim = int64_t(op.getHeadDim()), half = headDim / 2;
  bool interleaved = op.getStyle() == RotaryStyle::interleaved;
  Value x = adaptor.getInput();
  // theta^(-2i / head_dim) in double, rounded once to f32.
  double theta = op.getTheta().convertToDouble();
  SmallVector<float> freqs;
  for (int64_t i = 0; i < half; ++i) {
    freqs.push_back(float(std::pow(theta, -2.0 * double(i) / double(headDim))));
  }
  auto freqType = RankedTensorType::get({half}, e.f32());
  Value invFreq = arith::ConstantOp::create(
      e.b, e.loc, DenseElementsAttr::get(freqType, ArrayRef<float>(freqs)));
  Value offset = e.offsetIndex(adaptor.getOffset());
  SmallVector<OpFoldResult> tableSizes = {e.size(x, tAxis),
                                          e.b.getIndexAttr(half)};
  auto tableType =
      RankedTensorType::get({type.getDimSize(tAxis), half}, e.f32());
  // The angle (offset + t)·freq[i] in f32, as Hugging Face computes it.
  auto table = [&](bool sine) {
    return e.generic(tableType, invFreq, e.empty(tableSizes, e.f32()),
                     {e.select(2, {1}), e.identity(2)}, Emitter::parallel(2),
                     [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                       Value pos = arith::AddIOp::create(
                           b, l, linalg::IndexOp::create(b, l, 0), offset);
                       Value angle = arith::MulFOp::create(
                           b, l, Emitter::indexToF32(b, l, pos), args[0]);
                       if (!sine) {
                         return math::CosOp::create(b, l, angle);
                       }
                       Value s = math::SinOp::create(b, l, angle);
                       return op.getInverse()
                                  ? arith::NegFOp::create(b, l, s).getResult()
                                  : s;
                     });
  };
  Value cosT = table(false), sinT = table(true);
  return {e.elementwise(
      type, e.sizes(x), x,
      [&](OpBuilder &b, Location l, ValueRange args) -> Value {
        auto c = [&](int64_t v) {
          return arith::ConstantIndexOp::create(b, l, v);
        };
        SmallVector<Value> at;
        for (int64_t d = 0; d < rank; ++d) {
          at.push_back(linalg::IndexOp::create(b, l, d));
        }
        Value d = at[dAxis];
        Value j = arith::RemUIOp::create(b, l, d, c(headDim));
        // `first`: the feature is a of its pair (out = x·cos - partner·sin),
        // else b (out = x·cos + partner·sin).
        Value first, pair, partner;
        if (interleaved) {
          Value odd = arith::AndIOp::create(b, l, j, c(1));
          first =
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, odd, c(0));
          pair = arith::ShRUIOp::create(b, l, j, c(1));
          partner = arith::SelectOp::create(
              b, l, first, arith::AddIOp::create(b, l, d, c(1)),
              arith::SubIOp::create(b, l, d, c(1)));
        } else {
          first = arith::CmpIOp::create(b, l, arith::CmpIPredicate::ult, j,
                                        c(half));
          pair = arith::SelectOp::create(
              b, l, first, j, arith::SubIOp::create(b, l, j, c(half)));
          partner = arith::SelectOp::create(
              b, l, first, arith::AddIOp::create(b, l, d, c(half)),
              arith::SubIOp::create(b, l, d, c(half)));
        }
        at[dAxis] = partner;
        Value other = tensor::ExtractOp::create(b, l, x, at);
        Value cosV =
            tensor::ExtractOp::create(b, l, cosT, ValueRange{at[tAxis], pair});
        Value sinV =
            tensor::ExtractOp::create(b, l, sinT, ValueRange{at[tAxis], pair});
        Value rotated = arith::MulFOp::create(b, l, other, sinV);
        rotated = arith::SelectOp::create(
            b, l, first, arith::NegFOp::create(b, l, rotated), rotated);
        return arith::AddFOp::create(
            b, l, arith::MulFOp::create(b, l, args[0], cosV), rotated);
      })};
}

SmallVector<Value>
lowerFeedForward(FeedForwardOp op, FeedForwardOp::Adaptor adaptor, Emitter &e) {
  auto type = resultType(op);
  Value x = adaptor.getInput();
  auto w1 = Emitter::type(adaptor.getW1());
  SmallVector<int64_t> hiddenShape(type.getShape());
  hiddenShape.back() = w1.getDimSize(0);
  auto hiddenType = RankedTensorType::get(hiddenShape, e.f32());
  Value hidden = e.linear(x, adaptor.getW1(), adaptor.getB1(), hiddenType);
  Activation act = op.getActivation();
  double p = op.getDropout().convertToDouble();
  SmallVector<Value> sizes = e.sizeValues(hidden);
  Value seed = adaptor.getSeed();
  int64_t stream = op.getStream();
  Value activated =
      e.elementwise(hiddenType, e.sizes(hidden), hidden,
                    [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                      Value h = activation(b, l, act, args[0]);
                      if (p > 0.0) {
                        Value s =
                            Emitter::dropoutScale(b, l, seed, stream, p, sizes);
                        h = arith::MulFOp::create(b, l, h, s);
                      }
                      return h;
                    });
  // The result's width as w2 has it (a result type that leaves it dynamic
  // verifies, but the linear's output buffer has it static), then cast to
  // the op's type.
  SmallVector<int64_t> outShape(type.getShape());
  outShape.back() = Emitter::type(adaptor.getW2()).getDimSize(0);
  auto outType = RankedTensorType::get(outShape, e.f32());
  return {e.castTo(
      e.linear(activated, adaptor.getW2(), adaptor.getB2(), outType), type)};
}

} // namespace

void mlir::kiln::populateLayerPatterns(RewritePatternSet &patterns) {
  patterns.add<
      Lowering<DropoutOp, lowerDropout>, Lowering<EmbeddingOp, lowerEmbedding>,
      Lowering<PositionalEncodingOp, lowerPositionalEncoding>,
      Lowering<LayerNormOp, lowerLayerNorm>, Lowering<RmsNormOp, lowerRmsNorm>,
      Lowering<RotaryOp, lowerRotary>, LinearPattern,
      Lowering<MatmulOp, lowerMatmul>,
      Lowering<FeedForwardOp, lowerFeedForward>>(patterns.getContext());
}
