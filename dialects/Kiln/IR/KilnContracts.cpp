//===- KilnContracts.cpp - The shape contract of every kiln op ------------===//
//
// ShapeContractOpInterface for every op: what its lowering assumes of the
// dynamic sizes of its operands and results (see ShapeContract.h).
//
//===----------------------------------------------------------------------===//

#include "dialects/Kiln/IR/KilnOps.h"
#include "dialects/Kiln/IR/ShapeUtils.h"

#include <set>

using namespace mlir;
using namespace mlir::kiln;

static RankedTensorType typeOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

static int64_t rankOf(Value v) { return typeOf(v).getRank(); }

void ShapeContract::sameShape(Value a, Value b) {
  for (int64_t d = 0, e = std::min(rankOf(a), rankOf(b)); d < e; ++d) {
    same(a, d, b, d);
  }
}

LogicalResult mlir::kiln::verifyByteSizes(Operation *op) {
  auto check = [&](Type type, StringRef what,
                   unsigned index) -> LogicalResult {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || llvm::is_contained(tensor.getShape(), 0)) {
      return success();
    }
    int64_t bytes =
        std::max<int64_t>(1, (tensor.getElementTypeBitWidth() + 7) / 8);
    for (int64_t size : tensor.getShape()) {
      if (!ShapedType::isDynamic(size) &&
          __builtin_mul_overflow(bytes, size, &bytes)) {
        return op->emitOpError()
               << what << " #" << index << " of type " << type
               << " has more bytes than a 64-bit size can count";
      }
    }
    return success();
  };
  for (auto [i, type] : llvm::enumerate(op->getOperandTypes())) {
    if (failed(check(type, "operand", i))) {
      return failure();
    }
  }
  for (auto [i, type] : llvm::enumerate(op->getResultTypes())) {
    if (failed(check(type, "result", i))) {
      return failure();
    }
  }
  return success();
}

namespace {
/// Collects what a contract says of static sizes (verifyStaticContract).
class StaticContractCheck : public ShapeContract {
public:
  using Dim = std::pair<Value, int64_t>;

  void same(Value a, int64_t da, Value b, int64_t db) override {
    unsigned x = find(index({a, da})), y = find(index({b, db}));
    parent[x] = y;
  }
  void idsWithin(Value, int64_t, std::optional<int64_t>) override {}
  void positionsWithin(Value, int64_t, Value, int64_t) override {}
  void linear(Value result, int64_t dim, ArrayRef<Term> terms,
              int64_t constant) override {
    if (terms.empty()) {
      bounds.push_back({{result, dim}, constant, /*exact=*/true});
    }
  }
  void quotient(Value, int64_t, ArrayRef<Dim>, ArrayRef<Dim>) override {}
  void atLeast(Value x, int64_t dim, int64_t size) override {
    bounds.push_back({{x, dim}, size, /*exact=*/false});
  }
  void sameElements(Value, Value) override {}

  LogicalResult check(Operation *op) {
    // The first static size of each class, and where it is.
    DenseMap<unsigned, Dim> firstStatic;
    for (auto [i, dim] : llvm::enumerate(dims)) {
      int64_t size = sizeOf(dim);
      if (ShapedType::isDynamic(size)) {
        continue;
      }
      auto [it, inserted] = firstStatic.try_emplace(find(i), dim);
      if (!inserted && sizeOf(it->second) != size) {
        return op->emitOpError("expects ")
               << describe(op, it->second) << " (" << sizeOf(it->second)
               << ") and " << describe(op, dim) << " (" << size
               << ") to be one size";
      }
    }
    for (const Bound &bound : bounds) {
      int64_t size = sizeOf(bound.dim);
      if (ShapedType::isDynamic(size) ||
          (bound.exact ? size == bound.size : size >= bound.size)) {
        continue;
      }
      return op->emitOpError("expects ")
             << describe(op, bound.dim) << " to be "
             << (bound.exact ? "" : "at least ") << bound.size << ", got "
             << size;
    }
    return success();
  }

private:
  struct Bound {
    Dim dim;
    int64_t size;
    bool exact;
  };
  unsigned index(Dim dim) {
    auto [it, inserted] = indices.try_emplace(dim, dims.size());
    if (inserted) {
      dims.push_back(dim);
      parent.push_back(parent.size());
    }
    return it->second;
  }
  unsigned find(unsigned i) {
    while (parent[i] != i) {
      i = parent[i] = parent[parent[i]];
    }
    return i;
  }
  static int64_t sizeOf(Dim dim) {
    return cast<RankedTensorType>(dim.first.getType()).getDimSize(dim.second);
  }
  /// "dimension 1 of operand #2" or "... of result #0".
  static std::string describe(Operation *op, Dim dim) {
    std::string where;
    for (OpOperand &operand : op->getOpOperands()) {
      if (operand.get() == dim.first) {
        where = "operand #" + std::to_string(operand.getOperandNumber());
        break;
      }
    }
    if (auto result = dyn_cast<OpResult>(dim.first);
        where.empty() && result && result.getOwner() == op) {
      where = "result #" + std::to_string(result.getResultNumber());
    }
    return "dimension " + std::to_string(dim.second) + " of " +
           (where.empty() ? std::string("a value") : where);
  }

  DenseMap<Dim, unsigned> indices;
  SmallVector<Dim> dims;
  SmallVector<unsigned> parent;
  SmallVector<Bound> bounds;
};
} // namespace

LogicalResult mlir::kiln::verifyStaticContract(Operation *op) {
  StaticContractCheck check;
  cast<ShapeContractOpInterface>(op).addShapeContract(check);
  return check.check(op);
}

void ShapeContract::sumOf(Value result, int64_t axis, ValueRange parts) {
  SmallVector<Term> terms;
  for (Value part : parts) {
    terms.push_back({part, axis, 1});
  }
  linear(result, axis, terms, 0);
}

void ShapeContract::sameBroadcast(Value a, Value b) {
  auto ta = typeOf(a), tb = typeOf(b);
  int64_t rank = std::min(ta.getRank(), tb.getRank());
  for (int64_t i = 1; i <= rank; ++i) {
    int64_t da = ta.getRank() - i, db = tb.getRank() - i;
    if (ta.getDimSize(da) != 1 && tb.getDimSize(db) != 1) {
      same(a, da, b, db);
    }
  }
}

/// The dimensions of `input` that a reduction over `axes` keeps, paired
/// with their place in the reduced value.
static void sameReduced(ShapeContract &c, Value reduced, Value input,
                        ArrayRef<int64_t> axes, bool keepDims) {
  int64_t rank = rankOf(input);
  std::set<int64_t> reducedAxes;
  for (int64_t a : axes) {
    reducedAxes.insert(a < 0 ? a + rank : a);
  }
  int64_t out = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reducedAxes.count(d)) {
      c.same(reduced, out++, input, d);
    } else if (keepDims) {
      c.linear(reduced, out++, {}, 1); // a kept axis has size 1
    }
  }
}

/// A loss: input [..., C], targets [...] of class ids in [0, C), the result
/// like the targets when it is not reduced.
static void lossContract(ShapeContract &c, Value input, Value targets,
                         Value result, std::optional<int64_t> ignore) {
  for (int64_t d = 0; d < rankOf(targets); ++d) {
    c.same(input, d, targets, d);
  }
  if (result && rankOf(result) == rankOf(targets)) {
    c.sameShape(result, targets);
  }
  auto it = typeOf(input);
  if (!it.isDynamicDim(it.getRank() - 1)) {
    c.idsWithin(targets, it.getDimSize(it.getRank() - 1), ignore);
  } else {
    // Compiled code clamps a target into [0, classes - 1]: there must be a
    // class to clamp to.
    c.atLeast(input, it.getRank() - 1, 1);
  }
}

/// Attention: query [B, Tq, E], key = value [B, Tk, E], mask [B, Tk].
static void attentionContract(ShapeContract &c, Value query, Value key,
                              Value value, Value mask, int64_t heads,
                              std::optional<uint64_t> kvHeads) {
  c.sameShape(key, value);
  c.same(query, 0, key, 0);
  if (kvHeads) {
    // Grouped-query attention: the keys hold kvHeads heads of the query's
    // static head width (the verifier checked it).
    c.linear(key, 2, {},
             typeOf(query).getDimSize(2) / heads * int64_t(*kvHeads));
  } else {
    c.same(query, 2, key, 2);
  }
  if (mask) {
    c.same(mask, 0, query, 0);
    c.same(mask, 1, key, 1);
  }
}

//===----------------------------------------------------------------------===//
// Building blocks
//===----------------------------------------------------------------------===//

void EmbeddingOp::addShapeContract(ShapeContract &c) {
  int64_t rank = rankOf(getIds());
  for (int64_t d = 0; d < rank; ++d) {
    c.same(getResult(), d, getIds(), d);
  }
  c.same(getResult(), rank, getTable(), 1);
  auto table = typeOf(getTable());
  if (!table.isDynamicDim(0)) {
    c.idsWithin(getIds(), table.getDimSize(0), std::nullopt);
  } else {
    // Compiled code clamps ids into [0, rows - 1]: an empty table has no
    // row to clamp to.
    c.atLeast(getTable(), 0, 1);
  }
}

void PositionalEncodingOp::addShapeContract(ShapeContract &c) {
  c.sameShape(getResult(), getInput());
  int64_t rank = rankOf(getInput());
  if (Value table = getTable()) {
    c.same(getInput(), rank - 1, table, 1);
    if (!typeOf(table).isDynamicDim(0)) {
      c.positionsWithin(getInput(), rank - 2, getOffset(),
                        typeOf(table).getDimSize(0));
    } else {
      c.atLeast(table, 0, 1); // positions are clamped into its rows
    }
  }
}

void LayerNormOp::addShapeContract(ShapeContract &c) {
  c.sameShape(getResult(), getInput());
  int64_t rank = rankOf(getInput());
  c.same(getInput(), rank - 1, getGamma(), 0);
  c.same(getInput(), rank - 1, getBeta(), 0);
}

void RmsNormOp::addShapeContract(ShapeContract &c) {
  c.sameShape(getResult(), getInput());
  c.same(getInput(), rankOf(getInput()) - 1, getWeight(), 0);
}

void RotaryOp::addShapeContract(ShapeContract &c) {
  c.sameShape(getResult(), getInput());
}

void MultiHeadAttentionOp::addShapeContract(ShapeContract &c) {
  Value query = getQuery(), kv = getKeyValue();
  c.sameShape(getResult(), query);
  c.same(query, 0, kv, 0);
  if (Value mask = getKeyPaddingMask()) {
    c.same(mask, 0, query, 0);
    c.same(mask, 1, kv, 1);
  }
  // wq, wo [dim, dim]; wk, wv [dim, kv_dim]; biases [dim].
  for (Value w : {getWq(), getWk(), getWv(), getWo()}) {
    c.same(w, 0, query, 2);
  }
  c.same(getWq(), 1, query, 2);
  c.same(getWo(), 1, query, 2);
  c.same(getWk(), 1, kv, 2);
  c.same(getWv(), 1, kv, 2);
  for (Value bias : {getBq(), getBk(), getBv(), getBo()}) {
    if (bias) {
      c.same(bias, 0, query, 2);
    }
  }
}

void FeedForwardOp::addShapeContract(ShapeContract &c) {
  // w1 [d_ff, d], w2 [d, d_ff], b1 [d_ff], b2 [d].
  c.sameShape(getResult(), getInput());
  int64_t rank = rankOf(getInput());
  c.same(getInput(), rank - 1, getW1(), 1);
  c.same(getInput(), rank - 1, getW2(), 0);
  c.same(getW1(), 0, getW2(), 1);
  if (Value b1 = getB1()) {
    c.same(b1, 0, getW1(), 0);
  }
  if (Value b2 = getB2()) {
    c.same(b2, 0, getW2(), 0);
  }
}

void LinearOp::addShapeContract(ShapeContract &c) {
  // input [..., K], weight [N, K], bias [N], result [..., N].
  int64_t rank = rankOf(getResult());
  for (int64_t d = 0; d + 1 < rank; ++d) {
    c.same(getResult(), d, getInput(), d);
  }
  c.same(getInput(), rank - 1, getWeight(), 1);
  c.same(getResult(), rank - 1, getWeight(), 0);
  if (Value bias = getBias()) {
    c.same(bias, 0, getWeight(), 0);
  }
}

void MatmulOp::addShapeContract(ShapeContract &c) {
  int64_t rank = rankOf(getResult());
  for (int64_t d = 0; d + 2 < rank; ++d) {
    c.same(getLhs(), d, getRhs(), d);
    c.same(getResult(), d, getLhs(), d);
  }
  int64_t lk = getTransposeLhs() ? rank - 2 : rank - 1;
  int64_t lm = getTransposeLhs() ? rank - 1 : rank - 2;
  int64_t rk = getTransposeRhs() ? rank - 1 : rank - 2;
  int64_t rn = getTransposeRhs() ? rank - 2 : rank - 1;
  c.same(getLhs(), lk, getRhs(), rk);
  c.same(getResult(), rank - 2, getLhs(), lm);
  c.same(getResult(), rank - 1, getRhs(), rn);
}

//===----------------------------------------------------------------------===//
// Elementwise and shape ops
//===----------------------------------------------------------------------===//

#define KILN_BROADCAST_CONTRACT(Op)                                            \
  void Op::addShapeContract(ShapeContract &c) {                                \
    c.sameBroadcast(getLhs(), getRhs());                                       \
    c.sameBroadcast(getResult(), getLhs());                                    \
    c.sameBroadcast(getResult(), getRhs());                                    \
  }
KILN_BROADCAST_CONTRACT(AddOp)
KILN_BROADCAST_CONTRACT(SubOp)
KILN_BROADCAST_CONTRACT(MulOp)
KILN_BROADCAST_CONTRACT(DivOp)
#undef KILN_BROADCAST_CONTRACT

#define KILN_SAME_SHAPE_CONTRACT(Op)                                           \
  void Op::addShapeContract(ShapeContract &c) {                                \
    c.sameShape(getResult(), getInput());                                      \
  }
KILN_SAME_SHAPE_CONTRACT(ReluOp)
KILN_SAME_SHAPE_CONTRACT(TanhOp)
KILN_SAME_SHAPE_CONTRACT(ExpOp)
KILN_SAME_SHAPE_CONTRACT(LogOp)
KILN_SAME_SHAPE_CONTRACT(AbsOp)
KILN_SAME_SHAPE_CONTRACT(SiluOp)
KILN_SAME_SHAPE_CONTRACT(GeluOp)
KILN_SAME_SHAPE_CONTRACT(ScaleOp)
KILN_SAME_SHAPE_CONTRACT(DropoutOp)
KILN_SAME_SHAPE_CONTRACT(CastOp)
KILN_SAME_SHAPE_CONTRACT(SoftmaxOp)
KILN_SAME_SHAPE_CONTRACT(LogSoftmaxOp)
#undef KILN_SAME_SHAPE_CONTRACT

void ReduceOp::addShapeContract(ShapeContract &c) {
  sameReduced(c, getResult(), getInput(), getAxes(), getKeepDims());
}

void ReshapeOp::addShapeContract(ShapeContract &c) {
  for (auto [i, entry] : llvm::enumerate(getShape())) {
    if (entry == 0) {
      c.same(getResult(), i, getInput(), i);
    }
  }
  auto shape = getShape();
  auto inferred = llvm::find(shape, -1);
  if (inferred == shape.end() ||
      !typeOf(getResult()).isDynamicDim(inferred - shape.begin())) {
    // Every size known to the code: the input must hold as many elements
    // (with a dynamic inferred size, the code takes whole rows of what it
    // holds, and reads no further).
    c.sameElements(getInput(), getResult());
    return;
  }
  // The input's elements over the product of the other sizes.
  int64_t axis = inferred - shape.begin();
  SmallVector<ShapeContract::Dim> factors, divisors;
  for (int64_t d = 0; d < rankOf(getInput()); ++d) {
    factors.push_back({getInput(), d});
  }
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    if (d != axis) {
      divisors.push_back({getResult(), d});
    }
  }
  c.quotient(getResult(), axis, factors, divisors);
}

void TransposeOp::addShapeContract(ShapeContract &c) {
  for (auto [i, p] : llvm::enumerate(getPermutation())) {
    c.same(getResult(), i, getInput(), p);
  }
}

void SliceOp::addShapeContract(ShapeContract &c) {
  int64_t rank = rankOf(getResult());
  int64_t axis = *shape::normalizeAxis(getAxis(), rank);
  for (int64_t d = 0; d < rank; ++d) {
    if (d != axis) {
      c.same(getResult(), d, getInput(), d);
    }
  }
  auto input = typeOf(getInput());
  if (!input.isDynamicDim(axis)) {
    return; // the verifier checked the bounds
  }
  // The verifier's conditions on a static size, stated for the dynamic
  // one (size n): a negative bound counts from n; the slice [first, last)
  // must lie in [0, n]. It may be empty (gradients slice pieces of any
  // length, and compiled code takes an empty one as it is).
  int64_t start = getStart();
  std::optional<int64_t> end = getEnd();
  Value x = getInput();
  if (start < 0) {
    c.atLeast(x, axis, -start); // first = n + start >= 0
  }
  if (end && *end >= 0) {
    c.atLeast(x, axis, *end); // last = end <= n
  }
  // The length, last - first, with n's coefficient: [s:] n - s; [s:-e]
  // n - e - s; [-s:e] e + s - n; 0 when both bounds count from one end.
  // Compiled code takes a static result's length from its type: then the
  // two must agree.
  int64_t nFirst = start < 0 ? 1 : 0, kFirst = start;
  int64_t nLast = !end || *end < 0 ? 1 : 0, kLast = end ? *end : 0;
  c.linear(getResult(), axis, {{x, axis, nLast - nFirst}}, kLast - kFirst);
  c.atLeast(getResult(), axis, 0);
}

void ConcatOp::addShapeContract(ShapeContract &c) {
  int64_t rank = rankOf(getResult());
  int64_t axis = *shape::normalizeAxis(getAxis(), rank);
  for (Value input : getInputs()) {
    for (int64_t d = 0; d < rank; ++d) {
      if (d != axis) {
        c.same(getResult(), d, input, d);
      }
    }
  }
  c.sumOf(getResult(), axis, getInputs());
}

void ConstantOp::addShapeContract(ShapeContract &) {} // static

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

void CrossEntropyOp::addShapeContract(ShapeContract &c) {
  lossContract(c, getInput(), getTargets(), getResult(), getIgnoreIndex());
}

void NLLLossOp::addShapeContract(ShapeContract &c) {
  lossContract(c, getInput(), getTargets(), getResult(), getIgnoreIndex());
}

//===----------------------------------------------------------------------===//
// Gradients and optimizers
//===----------------------------------------------------------------------===//

void EmbeddingGradOp::addShapeContract(ShapeContract &c) {
  // grad [ids..., width] is added into rows [num_embeddings, width] by id.
  int64_t rank = rankOf(getIds());
  for (int64_t d = 0; d < rank; ++d) {
    c.same(getGrad(), d, getIds(), d);
  }
  c.same(getResult(), 1, getGrad(), rank);
  c.idsWithin(getIds(), int64_t(getNumEmbeddings()), std::nullopt);
}

void ActivationGradOp::addShapeContract(ShapeContract &c) {
  c.sameShape(getGrad(), getInput());
  c.sameShape(getResult(), getInput());
}

void ReduceMaxGradOp::addShapeContract(ShapeContract &c) {
  sameReduced(c, getGrad(), getInput(), getAxes(), getKeepDims());
  c.sameShape(getResult(), getInput());
}

void LayerNormGradOp::addShapeContract(ShapeContract &c) {
  int64_t rank = rankOf(getInput());
  c.sameShape(getGrad(), getInput());
  c.sameShape(getResult(0), getInput());
  c.same(getGamma(), 0, getInput(), rank - 1);
  c.sameShape(getResult(1), getGamma());
  c.sameShape(getResult(2), getGamma());
}

void RmsNormGradOp::addShapeContract(ShapeContract &c) {
  int64_t rank = rankOf(getInput());
  c.sameShape(getGrad(), getInput());
  c.sameShape(getResult(0), getInput());
  c.same(getWeight(), 0, getInput(), rank - 1);
  c.sameShape(getResult(1), getWeight());
}

void LossGradOp::addShapeContract(ShapeContract &c) {
  lossContract(c, getInput(), getTargets(), getLossGrad(), getIgnoreIndex());
  c.sameShape(getResult(), getInput());
}

void UpdateSliceOp::addShapeContract(ShapeContract &c) {
  c.sameShape(getResult(), getDest());
  int64_t axis = int64_t(getAxis());
  for (int64_t d = 0, e = rankOf(getDest()); d < e; ++d) {
    if (d != axis) {
      c.same(getDest(), d, getSource(), d);
    }
  }
  // The verifier has the destination's length along the axis static.
  c.positionsWithin(getSource(), axis, getOffset(),
                    typeOf(getDest()).getDimSize(axis));
}

void AttentionOp::addShapeContract(ShapeContract &c) {
  attentionContract(c, getQuery(), getKey(), getValue(), getKeyPaddingMask(),
                    int64_t(getNumHeads()), getNumKvHeads());
  c.sameShape(getResult(), getQuery());
  if (Value offset = getOffset()) {
    // The queries are positions [offset, offset + Tq) of the Tk keys (a
    // static length: the verifier says so).
    c.positionsWithin(getQuery(), 1, offset, typeOf(getKey()).getDimSize(1));
  }
}

void AttentionGradOp::addShapeContract(ShapeContract &c) {
  attentionContract(c, getQuery(), getKey(), getValue(), getKeyPaddingMask(),
                    int64_t(getNumHeads()), getNumKvHeads());
  c.sameShape(getGrad(), getQuery());
  if (Value output = getOutput()) {
    c.sameShape(output, getQuery());
  }
  c.sameShape(getResult(0), getQuery());
  c.sameShape(getResult(1), getKey());
  c.sameShape(getResult(2), getValue());
}

// The kernel ops exist only in the GPU pipeline after the calls' contracts
// were taken (from kiln.attention and kiln.attention_grad): on tensors they
// state the same one, on buffers none.
void FlashAttentionOp::addShapeContract(ShapeContract &c) {
  if (!hasPureTensorSemantics()) {
    return;
  }
  attentionContract(c, getQuery(), getKey(), getValue(), getKeyPaddingMask(),
                    int64_t(getNumHeads()), getNumKvHeads());
  c.sameShape(getInit(), getQuery());
}

void FlashAttentionGradOp::addShapeContract(ShapeContract &c) {
  if (!hasPureTensorSemantics()) {
    return;
  }
  attentionContract(c, getQuery(), getKey(), getValue(), getKeyPaddingMask(),
                    int64_t(getNumHeads()), getNumKvHeads());
  for (Value v : {getGrad(), getOutput(), getQueryInit()}) {
    c.sameShape(v, getQuery());
  }
  c.sameShape(getKeyInit(), getKey());
  c.sameShape(getValueInit(), getValue());
}

void PositionalEncodingGradOp::addShapeContract(ShapeContract &c) {
  int64_t rank = rankOf(getGrad());
  c.same(getResult(), 1, getGrad(), rank - 1);
  c.positionsWithin(getGrad(), rank - 2, getOffset(), int64_t(getMaxLen()));
}

void AdamUpdateOp::addShapeContract(ShapeContract &c) {
  for (Value v : {getGrad(), getM(), getV()}) {
    c.sameShape(v, getParam());
  }
  for (Value r : getResults()) {
    c.sameShape(r, getParam());
  }
}

void SgdUpdateOp::addShapeContract(ShapeContract &c) {
  for (Value v : {getGrad(), getBuf()}) {
    c.sameShape(v, getParam());
  }
  for (Value r : getResults()) {
    c.sameShape(r, getParam());
  }
}

void GlobalNormScaleOp::addShapeContract(ShapeContract &) {} // reads each whole
