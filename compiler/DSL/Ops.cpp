//===- Ops.cpp - One DSL function per kiln op -----------------------------===//
//
// Each function checks what the verifiers cannot see (null Vars, Vars of
// another graph, scalars where tensors belong, id and mask element types,
// dropout probabilities), creates the op with its result type inferred, and
// verifies it, so that a shape error names the user's line.
//
//===----------------------------------------------------------------------===//

#include "compiler/DSL/Ops.h"
#include "compiler/DSL/Internal.h"

#include "dialects/Kiln/IR/DTypes.h"
#include "dialects/Kiln/IR/KilnOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include <cmath>

namespace kiln::dsl {

namespace mk = mlir::kiln;
using detail::Access;
using detail::checkOperands;
using detail::emit;
using detail::fail;
using detail::Operand;
using detail::Role;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static mlir::OpBuilder &builderOf(Graph &graph) {
  return Access::impl(graph).builder;
}

/// Checks that the elements of `var` have one of the `allowed` types.
static void checkDType(const Var &var, std::initializer_list<DType> allowed,
                       const char *op, const char *name, const char *what,
                       const SourceLoc &loc) {
  DType dtype = var.dtype();
  for (DType ok : allowed) {
    if (dtype == ok) {
      return;
    }
  }
  std::string names;
  for (DType ok : allowed) {
    names += names.empty() ? "" : "/";
    names += kiln::name(ok);
  }
  fail(loc, std::string(op) + ": expects '" + name + "' to be " + what + " (" +
                names + "), got " + var.typeString());
}

/// A weight operand in the floating-point dtype of the activations `x` it
/// is used with: an f32 weight (a parameter, the master copy) used by bf16
/// activations is cast to bf16 where it is used; its gradient is cast back.
static Var weightFor(const Var &x, Var weight, const SourceLoc &loc) {
  if (weight && x && x.dtype() == DType::bf16 && weight.dtype() == DType::f32) {
    return cast(weight, DType::bf16, loc);
  }
  return weight;
}

/// Checks a dropout probability, whatever the mode, so that a model that
/// builds in evaluation also builds in training.
static void checkProbability(double p, const char *op, const SourceLoc &loc) {
  if (!(p >= 0.0 && p < 1.0)) {
    fail(loc, std::string(op) +
                  ": expects the dropout probability to be in "
                  "[0, 1), got " +
                  std::to_string(p));
  }
}

namespace {
/// The seed operand and stream of one dropout site: none in evaluation mode
/// or for p = 0.
struct DropoutSite {
  double p = 0.0;
  mlir::Value seed;
  int64_t stream = 0;
};
} // namespace

static DropoutSite dropoutSite(Graph &graph, double p, const char *op,
                               const SourceLoc &loc) {
  checkProbability(p, op, loc);
  if (!graph.training() || p == 0.0) {
    return {};
  }
  return {p, graph.seed(loc).value(), graph.nextDropoutStream()};
}

static mlir::IntegerAttr i64Attr(Graph &graph, int64_t value) {
  return builderOf(graph).getI64IntegerAttr(value);
}

static mlir::IntegerAttr optionalI64Attr(Graph &graph,
                                         std::optional<int64_t> value) {
  return value ? i64Attr(graph, *value) : mlir::IntegerAttr();
}

// The DSL's option enums (Ops.h, NN.h) mirror the dialect's (KilnBase.td)
// case for case and value for value, checked here, so that neither changes
// without the other; converting is then a cast.
#define KILN_SAME_ENUM_CASE(dsl, ods)                                         \
  static_assert(uint32_t(dsl) == uint32_t(ods), #dsl " must equal " #ods)
KILN_SAME_ENUM_CASE(Activation::relu, mk::Activation::relu);
KILN_SAME_ENUM_CASE(Activation::gelu, mk::Activation::gelu);
KILN_SAME_ENUM_CASE(Activation::geluTanh, mk::Activation::gelu_tanh);
KILN_SAME_ENUM_CASE(Activation::silu, mk::Activation::silu);
static_assert(mk::getMaxEnumValForActivation() == uint32_t(Activation::silu));
KILN_SAME_ENUM_CASE(RotaryStyle::half, mk::RotaryStyle::half);
KILN_SAME_ENUM_CASE(RotaryStyle::interleaved, mk::RotaryStyle::interleaved);
static_assert(mk::getMaxEnumValForRotaryStyle() ==
              uint32_t(RotaryStyle::interleaved));
KILN_SAME_ENUM_CASE(NormMode::standard, mk::NormMode::standard);
KILN_SAME_ENUM_CASE(NormMode::stdEps, mk::NormMode::std_eps);
static_assert(mk::getMaxEnumValForNormMode() == uint32_t(NormMode::stdEps));
KILN_SAME_ENUM_CASE(Reduction::sum, mk::ReduceKind::sum);
KILN_SAME_ENUM_CASE(Reduction::mean, mk::ReduceKind::mean);
KILN_SAME_ENUM_CASE(Reduction::max, mk::ReduceKind::max);
static_assert(mk::getMaxEnumValForReduceKind() == uint32_t(Reduction::max));
KILN_SAME_ENUM_CASE(LossReduction::mean, mk::LossReduction::mean);
KILN_SAME_ENUM_CASE(LossReduction::sum, mk::LossReduction::sum);
KILN_SAME_ENUM_CASE(LossReduction::none, mk::LossReduction::none);
static_assert(mk::getMaxEnumValForLossReduction() ==
              uint32_t(LossReduction::none));
#undef KILN_SAME_ENUM_CASE

static mk::Activation toKiln(Activation activation) {
  return mk::Activation(activation);
}
static mk::NormMode toKiln(NormMode mode) { return mk::NormMode(mode); }
static mk::RotaryStyle toKiln(RotaryStyle style) {
  return mk::RotaryStyle(style);
}
static mk::ReduceKind toKiln(Reduction kind) { return mk::ReduceKind(kind); }
static mk::LossReduction toKiln(LossReduction reduction) {
  return mk::LossReduction(reduction);
}

//===----------------------------------------------------------------------===//
// Building blocks
//===----------------------------------------------------------------------===//

Var embedding(Var ids, Var table, std::optional<int64_t> paddingIdx,
              SourceLoc loc) {
  Graph &graph =
      checkOperands(loc, "embedding", {{ids, "ids"}, {table, "table"}});
  checkDType(ids, {DType::i32, DType::i64}, "embedding", "ids", "token ids",
             loc);
  return emit<mk::EmbeddingOp>(graph, loc, ids.value(), table.value(),
                               optionalI64Attr(graph, paddingIdx));
}

Var sinusoidalPositionalEncoding(Var x, Var offset, SourceLoc loc) {
  Graph &graph =
      checkOperands(loc, "sinusoidalPositionalEncoding",
                    {{x, "input"}, {offset, "offset", Role::optionalScalar}});
  return emit<mk::PositionalEncodingOp>(graph, loc, mk::PEKind::sinusoidal,
                                        x.value(), mlir::Value(),
                                        offset.value());
}

Var learnedPositionalEncoding(Var x, Var table, Var offset, SourceLoc loc) {
  Graph &graph = checkOperands(loc, "learnedPositionalEncoding",
                               {{x, "input"},
                                {table, "table"},
                                {offset, "offset", Role::optionalScalar}});
  return emit<mk::PositionalEncodingOp>(
      graph, loc, mk::PEKind::learned, x.value(),
      weightFor(x, table, loc).value(), offset.value());
}

Var layerNorm(Var x, Var gamma, Var beta, LayerNormOptions options,
              SourceLoc loc) {
  Graph &graph = checkOperands(
      loc, "layerNorm", {{x, "input"}, {gamma, "gamma"}, {beta, "beta"}});
  return emit<mk::LayerNormOp>(graph, loc, x.value(),
                               weightFor(x, gamma, loc).value(),
                               weightFor(x, beta, loc).value(),
                               llvm::APFloat(options.eps),
                               toKiln(options.mode));
}

Var rmsNorm(Var x, Var weight, double eps, SourceLoc loc) {
  Graph &graph =
      checkOperands(loc, "rmsNorm", {{x, "input"}, {weight, "weight"}});
  return emit<mk::RmsNormOp>(graph, loc, x.value(),
                             weightFor(x, weight, loc).value(),
                             llvm::APFloat(eps));
}

Var rotary(Var x, RotaryOptions options, SourceLoc loc) {
  Graph &graph = checkOperands(
      loc, "rotary",
      {{x, "input"}, {options.offset, "offset", Role::optionalScalar}});
  return emit<mk::RotaryOp>(
      graph, loc, x.value(), options.offset.value(), uint64_t(options.headDim),
      llvm::APFloat(options.theta), toKiln(options.style), false);
}

/// A key-padding mask, when given, is i1/i32/i64.
static void checkKeyPaddingMask(const AttentionOptions &options, const char *op,
                                const SourceLoc &loc) {
  if (options.keyPaddingMask) {
    checkDType(options.keyPaddingMask, {DType::i1, DType::i32, DType::i64}, op,
               "key_padding_mask", "a mask, non-zero = attend", loc);
  }
}

Var multiHeadAttention(Var query, Var keyValue, const AttentionWeights &weights,
                       const AttentionOptions &options, SourceLoc loc) {
  const char *op = "multiHeadAttention";
  Graph &graph = checkOperands(
      loc, op,
      {{query, "query"},
       {keyValue, "key_value"},
       {weights.wq, "wq"},
       {weights.wk, "wk"},
       {weights.wv, "wv"},
       {weights.wo, "wo"},
       {weights.bq, "bq", Role::optionalTensor},
       {weights.bk, "bk", Role::optionalTensor},
       {weights.bv, "bv", Role::optionalTensor},
       {weights.bo, "bo", Role::optionalTensor},
       {options.keyPaddingMask, "key_padding_mask", Role::optionalTensor}});
  checkKeyPaddingMask(options, op, loc);
  if (options.offset) {
    fail(loc, std::string(op) + ": 'offset' is for attention() over a "
                                "key/value cache, not multiHeadAttention()");
  }
  if (options.numKvHeads != 0) {
    fail(loc, std::string(op) + ": 'numKvHeads' (grouped-query attention) is "
                                "for attention() on projected heads, not "
                                "multiHeadAttention()");
  }
  DropoutSite site = dropoutSite(graph, options.dropout, op, loc);
  mlir::OpBuilder &b = builderOf(graph);
  auto w = [&](const Var &weight) {
    return weightFor(query, weight, loc).value();
  };
  return emit<mk::MultiHeadAttentionOp>(
      graph, loc, query.value(), keyValue.value(), w(weights.wq),
      w(weights.wk), w(weights.wv), w(weights.wo), w(weights.bq),
      w(weights.bk), w(weights.bv), w(weights.bo),
      options.keyPaddingMask.value(), site.seed,
      b.getI64IntegerAttr(options.numHeads),
      options.causal ? b.getUnitAttr() : mlir::UnitAttr(),
      b.getF64FloatAttr(site.p),
      site.seed ? b.getI64IntegerAttr(site.stream) : mlir::IntegerAttr());
}

Var attention(Var query, Var key, Var value, const AttentionOptions &options,
              SourceLoc loc) {
  const char *op = "attention";
  Graph &graph = checkOperands(
      loc, op,
      {{query, "query"},
       {key, "key"},
       {value, "value"},
       {options.keyPaddingMask, "key_padding_mask", Role::optionalTensor},
       {options.offset, "offset", Role::optionalScalar}});
  checkKeyPaddingMask(options, op, loc);
  DropoutSite site = dropoutSite(graph, options.dropout, op, loc);
  mlir::OpBuilder &b = builderOf(graph);
  return emit<mk::AttentionOp>(
      graph, loc, query.value(), key.value(), value.value(),
      options.keyPaddingMask.value(), site.seed, options.offset.value(),
      b.getI64IntegerAttr(options.numHeads),
      options.causal ? b.getUnitAttr() : mlir::UnitAttr(),
      b.getF64FloatAttr(site.p),
      site.seed ? b.getI64IntegerAttr(site.stream) : mlir::IntegerAttr(),
      options.numKvHeads != 0 ? b.getI64IntegerAttr(options.numKvHeads)
                              : mlir::IntegerAttr());
}

Var feedForward(Var x, const FeedForwardWeights &weights,
                FeedForwardOptions options, SourceLoc loc) {
  const char *op = "feedForward";
  Graph &graph = checkOperands(loc, op,
                               {{x, "input"},
                                {weights.w1, "w1"},
                                {weights.w2, "w2"},
                                {weights.b1, "b1", Role::optionalTensor},
                                {weights.b2, "b2", Role::optionalTensor}});
  DropoutSite site = dropoutSite(graph, options.dropout, op, loc);
  mlir::OpBuilder &b = builderOf(graph);
  auto w = [&](const Var &weight) { return weightFor(x, weight, loc).value(); };
  return emit<mk::FeedForwardOp>(
      graph, loc,
      mk::ActivationAttr::get(b.getContext(), toKiln(options.activation)),
      x.value(), w(weights.w1), w(weights.w2), w(weights.b1), w(weights.b2),
      site.seed, b.getF64FloatAttr(site.p),
      site.seed ? b.getI64IntegerAttr(site.stream) : mlir::IntegerAttr());
}

//===----------------------------------------------------------------------===//
// Linear algebra and elementwise
//===----------------------------------------------------------------------===//

Var linear(Var x, Var weight, Var bias, SourceLoc loc) {
  Graph &graph = checkOperands(
      loc, "linear",
      {{x, "input"}, {weight, "weight"}, {bias, "bias", Role::optionalTensor}});
  return emit<mk::LinearOp>(graph, loc, x.value(),
                            weightFor(x, weight, loc).value(),
                            weightFor(x, bias, loc).value());
}

Var matmul(Var lhs, Var rhs, bool transposeLhs, bool transposeRhs,
           SourceLoc loc) {
  Graph &graph = checkOperands(loc, "matmul", {{lhs, "lhs"}, {rhs, "rhs"}});
  return emit<mk::MatmulOp>(graph, loc, lhs.value(), rhs.value(), transposeLhs,
                            transposeRhs);
}

template <typename OpTy>
static Var binary(const char *op, Var lhs, Var rhs, const SourceLoc &loc) {
  Graph &graph = checkOperands(loc, op, {{lhs, "lhs"}, {rhs, "rhs"}});
  return emit<OpTy>(graph, loc, lhs.value(), rhs.value());
}

Var add(Var lhs, Var rhs, SourceLoc loc) {
  return binary<mk::AddOp>("add", lhs, rhs, loc);
}
Var sub(Var lhs, Var rhs, SourceLoc loc) {
  return binary<mk::SubOp>("sub", lhs, rhs, loc);
}
Var mul(Var lhs, Var rhs, SourceLoc loc) {
  return binary<mk::MulOp>("mul", lhs, rhs, loc);
}
Var div(Var lhs, Var rhs, SourceLoc loc) {
  return binary<mk::DivOp>("div", lhs, rhs, loc);
}

Var scale(Var x, double factor, SourceLoc loc) {
  Graph &graph = checkOperands(loc, "scale", {{x, "input"}});
  if (!std::isfinite(factor)) {
    fail(loc, "scale: expects a finite factor, got " + std::to_string(factor));
  }
  return emit<mk::ScaleOp>(graph, loc, x.value(), llvm::APFloat(factor));
}

template <typename OpTy>
static Var unary(const char *op, Var x, const SourceLoc &loc) {
  Graph &graph = checkOperands(loc, op, {{x, "input"}});
  return emit<OpTy>(graph, loc, x.value());
}

Var relu(Var x, SourceLoc loc) { return unary<mk::ReluOp>("relu", x, loc); }
Var silu(Var x, SourceLoc loc) { return unary<mk::SiluOp>("silu", x, loc); }
Var swiglu(Var gate, Var up, SourceLoc loc) {
  return mul(silu(gate, loc), up, loc);
}
Var tanh(Var x, SourceLoc loc) { return unary<mk::TanhOp>("tanh", x, loc); }
Var exp(Var x, SourceLoc loc) { return unary<mk::ExpOp>("exp", x, loc); }
Var log(Var x, SourceLoc loc) { return unary<mk::LogOp>("log", x, loc); }
Var abs(Var x, SourceLoc loc) { return unary<mk::AbsOp>("abs", x, loc); }

Var gelu(Var x, bool approximateTanh, SourceLoc loc) {
  Graph &graph = checkOperands(loc, "gelu", {{x, "input"}});
  return emit<mk::GeluOp>(graph, loc, x.value(), approximateTanh);
}

Var dropout(Var x, double p, SourceLoc loc) {
  Graph &graph = checkOperands(loc, "dropout", {{x, "input"}});
  DropoutSite site = dropoutSite(graph, p, "dropout", loc);
  if (!site.seed) {
    return x;
  }
  return emit<mk::DropoutOp>(graph, loc, x.value(), site.seed,
                             llvm::APFloat(site.p),
                             static_cast<uint64_t>(site.stream));
}

Var softmax(Var x, int64_t axis, SourceLoc loc) {
  Graph &graph = checkOperands(loc, "softmax", {{x, "input"}});
  return emit<mk::SoftmaxOp>(graph, loc, x.value(), i64Attr(graph, axis));
}

Var logSoftmax(Var x, int64_t axis, SourceLoc loc) {
  Graph &graph = checkOperands(loc, "logSoftmax", {{x, "input"}});
  return emit<mk::LogSoftmaxOp>(graph, loc, x.value(), i64Attr(graph, axis));
}

Var reduce(Var x, Reduction kind, std::vector<int64_t> axes, bool keepDims,
           SourceLoc loc) {
  Graph &graph = checkOperands(loc, "reduce", {{x, "input"}});
  return emit<mk::ReduceOp>(graph, loc, toKiln(kind), x.value(),
                            llvm::ArrayRef<int64_t>(axes), keepDims);
}

//===----------------------------------------------------------------------===//
// Shapes and constants
//===----------------------------------------------------------------------===//

Var reshape(Var x, std::vector<int64_t> shape, SourceLoc loc) {
  Graph &graph = checkOperands(loc, "reshape", {{x, "input"}});
  return emit<mk::ReshapeOp>(graph, loc, x.value(),
                             llvm::ArrayRef<int64_t>(shape));
}

Var transpose(Var x, std::vector<int64_t> permutation, SourceLoc loc) {
  Graph &graph = checkOperands(loc, "transpose", {{x, "input"}});
  return emit<mk::TransposeOp>(graph, loc, x.value(),
                               llvm::ArrayRef<int64_t>(permutation));
}

Var slice(Var x, int64_t axis, int64_t start, std::optional<int64_t> end,
          SourceLoc loc) {
  Graph &graph = checkOperands(loc, "slice", {{x, "input"}});
  return emit<mk::SliceOp>(graph, loc, x.value(), i64Attr(graph, axis),
                           i64Attr(graph, start), optionalI64Attr(graph, end));
}

Var concat(const std::vector<Var> &inputs, int64_t axis, SourceLoc loc) {
  if (inputs.empty()) {
    fail(loc, "concat: expects at least one input");
  }
  Graph *graph = nullptr;
  llvm::SmallVector<mlir::Value> values;
  for (const Var &input : inputs) {
    graph = &checkOperands(loc, "concat",
                           {{inputs.front(), "inputs"}, {input, "inputs"}});
    values.push_back(input.value());
  }
  return emit<mk::ConcatOp>(*graph, loc, mlir::ValueRange(values),
                            i64Attr(*graph, axis));
}

Var updateSlice(Var dest, Var source, Var offset, int64_t axis,
                SourceLoc loc) {
  const char *op = "updateSlice";
  Graph &graph =
      checkOperands(loc, op,
                    {{dest, "dest"},
                     {source, "source"},
                     {offset, "offset", Role::scalar}});
  return emit<mk::UpdateSliceOp>(graph, loc, dest.value(), source.value(),
                                 offset.value(),
                                 i64Attr(graph, axis));
}

Var constant(Graph &graph, Shape shape, std::vector<float> values,
             SourceLoc loc) {
  detail::checkOpen(graph, loc);
  int64_t count = 1;
  for (int64_t size : shape) {
    if (size < 0) {
      fail(loc, "constant: expects a static shape, got " + formatShape(shape));
    }
    count *= size;
  }
  if (count != static_cast<int64_t>(values.size())) {
    fail(loc, "constant: shape " + formatShape(shape) + " has " +
                  std::to_string(count) + " elements but " +
                  std::to_string(values.size()) + " values were given");
  }
  auto type = mlir::RankedTensorType::get(
      shape, mlir::Float32Type::get(&graph.module().context()));
  auto dense =
      mlir::DenseElementsAttr::get(type, llvm::ArrayRef<float>(values));
  return emit<mk::ConstantOp>(graph, loc,
                              mlir::cast<mlir::ElementsAttr>(dense));
}

Var constant(Graph &graph, double value, SourceLoc loc) {
  return constant(graph, Shape{}, {static_cast<float>(value)}, loc);
}

/// The scalar `value` (rounded to the nearest) in the floating-point
/// element type of `like`, for the operators that mix a Var and a number.
static Var scalarLike(Graph &graph, const Var &like, double value,
                      const SourceLoc &loc) {
  auto element = mlir::dyn_cast<mlir::FloatType>(
      mlir::getElementTypeOrSelf(like.value().getType()));
  if (!element || element.isF32()) {
    return constant(graph, value, loc);
  }
  llvm::APFloat rounded(value);
  bool inexact = false;
  rounded.convert(element.getFloatSemantics(),
                  llvm::APFloat::rmNearestTiesToEven, &inexact);
  auto type = mlir::RankedTensorType::get({}, element);
  return emit<mk::ConstantOp>(
      graph, loc,
      mlir::cast<mlir::ElementsAttr>(mlir::DenseElementsAttr::get(
          type, llvm::ArrayRef<llvm::APFloat>(rounded))));
}

Var cast(Var x, DType dtype, SourceLoc loc) {
  Graph &graph = checkOperands(loc, "cast", {{x, "input"}});
  checkDType(x, {DType::f32, DType::bf16}, "cast", "input",
             "a floating-point tensor", loc);
  if (dtype != DType::f32 && dtype != DType::bf16) {
    fail(loc, std::string("cast: converts to f32 or bf16, not ") +
                  kiln::name(dtype));
  }
  if (x.dtype() == dtype) {
    return x;
  }
  auto type = mlir::cast<mlir::RankedTensorType>(x.value().getType());
  return emit<mk::CastOp>(
      graph, loc,
      type.clone(mk::elementTypeOf(&graph.module().context(), dtype)),
      x.value());
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

template <typename OpTy>
static Var loss(const char *op, Var input, Var targets,
                const LossOptions &options, const SourceLoc &loc) {
  Graph &graph =
      checkOperands(loc, op, {{input, "input"}, {targets, "targets"}});
  checkDType(targets, {DType::i32, DType::i64}, op, "targets", "class ids",
             loc);
  return emit<OpTy>(graph, loc, input.value(), targets.value(),
                    optionalI64Attr(graph, options.ignoreIndex),
                    llvm::APFloat(options.labelSmoothing),
                    toKiln(options.reduction));
}

Var crossEntropy(Var logits, Var targets, LossOptions options, SourceLoc loc) {
  return loss<mk::CrossEntropyOp>("crossEntropy", logits, targets, options,
                                  loc);
}

Var nllLoss(Var logProbs, Var targets, LossOptions options, SourceLoc loc) {
  return loss<mk::NLLLossOp>("nllLoss", logProbs, targets, options, loc);
}

//===----------------------------------------------------------------------===//
// Operators
//===----------------------------------------------------------------------===//

/// The graph of the left operand of `op` with a number.
static Graph &graphOf(const Var &var, const char *op, const SourceLoc &loc) {
  if (!var.defined()) {
    fail(loc, std::string("operator") + op + ": operand is a null Var");
  }
  return var.graph();
}

Var operator+(const Var &lhs, Located<Var> rhs) {
  return add(lhs, rhs.value, rhs.loc);
}
Var operator-(const Var &lhs, Located<Var> rhs) {
  return sub(lhs, rhs.value, rhs.loc);
}
Var operator*(const Var &lhs, Located<Var> rhs) {
  return mul(lhs, rhs.value, rhs.loc);
}
Var operator/(const Var &lhs, Located<Var> rhs) {
  return div(lhs, rhs.value, rhs.loc);
}

Var operator+(const Var &lhs, Located<double> rhs) {
  Graph &graph = graphOf(lhs, "+", rhs.loc);
  return add(lhs, scalarLike(graph, lhs, rhs.value, rhs.loc), rhs.loc);
}
Var operator-(const Var &lhs, Located<double> rhs) {
  Graph &graph = graphOf(lhs, "-", rhs.loc);
  return sub(lhs, scalarLike(graph, lhs, rhs.value, rhs.loc), rhs.loc);
}
Var operator*(const Var &lhs, Located<double> rhs) {
  return scale(lhs, rhs.value, rhs.loc);
}
Var operator/(const Var &lhs, Located<double> rhs) {
  if (rhs.value == 0.0) {
    fail(rhs.loc, "operator/: division by the constant 0");
  }
  return scale(lhs, 1.0 / rhs.value, rhs.loc);
}
Var operator+(double lhs, Located<Var> rhs) {
  Graph &graph = graphOf(rhs.value, "+", rhs.loc);
  return add(scalarLike(graph, rhs.value, lhs, rhs.loc), rhs.value, rhs.loc);
}
Var operator-(double lhs, Located<Var> rhs) {
  Graph &graph = graphOf(rhs.value, "-", rhs.loc);
  return sub(scalarLike(graph, rhs.value, lhs, rhs.loc), rhs.value, rhs.loc);
}
Var operator*(double lhs, Located<Var> rhs) {
  return scale(rhs.value, lhs, rhs.loc);
}
Var operator/(double lhs, Located<Var> rhs) {
  Graph &graph = graphOf(rhs.value, "/", rhs.loc);
  return div(scalarLike(graph, rhs.value, lhs, rhs.loc), rhs.value, rhs.loc);
}

Var operator-(Located<Var> x) { return scale(x.value, -1.0, x.loc); }

Var &operator+=(Var &lhs, Located<Var> rhs) { return lhs = lhs + rhs; }
Var &operator-=(Var &lhs, Located<Var> rhs) { return lhs = lhs - rhs; }
Var &operator*=(Var &lhs, Located<Var> rhs) { return lhs = lhs * rhs; }
Var &operator/=(Var &lhs, Located<Var> rhs) { return lhs = lhs / rhs; }
Var &operator+=(Var &lhs, Located<double> rhs) { return lhs = lhs + rhs; }
Var &operator-=(Var &lhs, Located<double> rhs) { return lhs = lhs - rhs; }
Var &operator*=(Var &lhs, Located<double> rhs) { return lhs = lhs * rhs; }
Var &operator/=(Var &lhs, Located<double> rhs) { return lhs = lhs / rhs; }

} // namespace kiln::dsl
