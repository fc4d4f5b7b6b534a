//===- OpsTest.cpp - The DSL's op functions and operators -----------------===//
//
// Inferred shapes (dynamic sizes preserved), the ops the operators emit, and
// errors: verifier messages and DSL misuse reported at this file's line.
//
//===----------------------------------------------------------------------===//

#include "test/Unit/DSL/TestUtil.h"

using namespace kiln::dsl;
using namespace kiln::dsl::testing;
using kiln::DType;
using kiln::Init;

namespace {
/// One module with one graph "f" to add ops to.
class DslOpsTest : public ::testing::Test {
protected:
  Var f32(const std::string &name, Shape shape) {
    return graph.input(name, std::move(shape), DType::f32);
  }
  Var weight(const std::string &name, Shape shape) {
    return graph.param(name, std::move(shape), Init::zeros());
  }

  Module module;
  Graph &graph = module.addGraph("f");
};
} // namespace

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

TEST_F(DslOpsTest, LinearKeepsDynamicDims) {
  Var x = f32("x", {kDyn, kDyn, 128});
  Var y = linear(x, weight("w", {384, 128}), weight("b", {384}));
  EXPECT_EQ(y.shape(), (Shape{kDyn, kDyn, 384}));
  EXPECT_EQ(y.dtype(), DType::f32);
  EXPECT_EQ(y.rank(), 3);
  EXPECT_EQ(y.dim(-1), 384);
  EXPECT_EQ(y.dim(0), kDyn);
  EXPECT_EQ(y.typeString(), "tensor<?x?x384xf32>");
  EXPECT_THROW(y.dim(3), kiln::Error);
}

TEST_F(DslOpsTest, BuildingBlocksInferShapes) {
  Var ids = graph.input("ids", {kDyn, kDyn}, DType::i64);
  Var x = embedding(ids, weight("table", {65, 32}), 0);
  EXPECT_EQ(x.shape(), (Shape{kDyn, kDyn, 32}));
  x = sinusoidalPositionalEncoding(x);
  x = learnedPositionalEncoding(x, weight("wpe", {128, 32}),
                                graph.scalarInput("offset"));
  x = layerNorm(x, weight("g", {32}), weight("b", {32}),
                {1e-12, NormMode::stdEps});
  Var mask = graph.input("mask", {kDyn, kDyn}, DType::i1);
  Var w = weight("w", {32, 32});
  x = multiHeadAttention(
      x, x, {w, w, w, w},
      {.numHeads = 4, .causal = true, .keyPaddingMask = mask});
  EXPECT_EQ(x.shape(), (Shape{kDyn, kDyn, 32}));
  x = feedForward(x, {weight("w1", {64, 32}), weight("w2", {32, 64})},
                  {Activation::gelu});
  EXPECT_EQ(x.shape(), (Shape{kDyn, kDyn, 32}));
  graph.finish({x});
  module.verify();
  std::string ir = module.str();
  EXPECT_TRUE(contains(ir, "kiln.embedding")) << ir;
  EXPECT_TRUE(contains(ir, "padding_idx = 0")) << ir;
  EXPECT_TRUE(contains(ir, "kiln.pe sinusoidal")) << ir;
  EXPECT_TRUE(contains(ir, "kiln.pe learned")) << ir;
  EXPECT_TRUE(contains(ir, "mode = #kiln<norm_mode std_eps>")) << ir;
  EXPECT_TRUE(contains(ir, "causal")) << ir;
  EXPECT_TRUE(contains(ir, "kiln.ffn gelu")) << ir;
}

TEST_F(DslOpsTest, ShapeOpsInferShapes) {
  Var x = f32("x", {kDyn, kDyn, 128});
  Var heads = transpose(reshape(x, {0, 0, 4, 32}), {0, 2, 1, 3});
  EXPECT_EQ(heads.shape(), (Shape{kDyn, 4, kDyn, 32}));
  Var scores = matmul(heads, heads, false, /*transposeRhs=*/true);
  EXPECT_EQ(scores.shape(), (Shape{kDyn, 4, kDyn, kDyn}));
  EXPECT_EQ(softmax(scores).shape(), scores.shape());
  EXPECT_EQ(logSoftmax(scores, 1).shape(), scores.shape());
  EXPECT_EQ(slice(x, -1, 0, 64).shape(), (Shape{kDyn, kDyn, 64}));
  EXPECT_EQ(slice(x, 1, -1).shape(), (Shape{kDyn, 1, 128}));
  EXPECT_EQ(concat({x, x}, -1).shape(), (Shape{kDyn, kDyn, 256}));
  EXPECT_EQ(reduce(x, Reduction::mean, {-1}, true).shape(),
            (Shape{kDyn, kDyn, 1}));
  EXPECT_EQ(reduce(x, Reduction::sum, {0, 1}).shape(), (Shape{128}));
  EXPECT_EQ(constant(graph, {2, 2}, {1, 2, 3, 4}).shape(), (Shape{2, 2}));
  EXPECT_EQ(constant(graph, 0.5).shape(), Shape{});
  for (Var y : {relu(x), gelu(x, true), tanh(x), exp(x), log(x), abs(x),
                scale(x, 0.5)}) {
    EXPECT_EQ(y.shape(), x.shape());
  }
  graph.finish({x});
  module.verify();
}

TEST_F(DslOpsTest, LossesReduceAsAsked) {
  Var logits = f32("logits", {kDyn, kDyn, 65});
  Var targets = graph.input("targets", {kDyn, kDyn}, DType::i64);
  EXPECT_EQ(crossEntropy(logits, targets).shape(), Shape{});
  EXPECT_EQ(nllLoss(logSoftmax(logits), targets,
                    {.ignoreIndex = 0,
                     .labelSmoothing = 0.1,
                     .reduction = LossReduction::none})
                .shape(),
            (Shape{kDyn, kDyn}));
  EXPECT_TRUE(contains(module.str(), "ignore_index = 0"));
}

//===----------------------------------------------------------------------===//
// Operators
//===----------------------------------------------------------------------===//

TEST_F(DslOpsTest, OperatorsEmitBroadcastingOps) {
  Var x = f32("x", {kDyn, kDyn, 128});
  Var b = weight("b", {128});
  Var y = x + b;
  EXPECT_EQ(y.shape(), x.shape());
  y = y * x - b / x;
  y = 2.0 * y + 1.0;
  y = 1.0 - y;
  y = y / 4;
  y = -y;
  y += x;
  y *= 0.5;
  graph.finish({y});
  module.verify();
  std::string ir = module.str();
  EXPECT_EQ(count(ir, "kiln.add"), 3) << ir;
  EXPECT_EQ(count(ir, "kiln.mul"), 1) << ir;
  EXPECT_EQ(count(ir, "kiln.div"), 1) << ir;
  EXPECT_EQ(count(ir, "kiln.sub"), 2) << ir;
  EXPECT_EQ(count(ir, "kiln.scale"), 4) << ir;
  EXPECT_EQ(count(ir, "kiln.constant"), 2) << ir;
}

TEST_F(DslOpsTest, OperatorErrorNamesTheRightOperandsLine) {
  Var x = f32("x", {2, 3});
  Var y = f32("y", {4});
  int line = 0;
  std::string message = errorOf([&] {
    line = __LINE__ + 1;
    (void)(x + y);
  });
  EXPECT_TRUE(message.starts_with(at(line))) << message;
  EXPECT_TRUE(contains(message,
                       "error: 'kiln.add' op expects broadcast-compatible "
                       "operands: shapes [2, 3] and [4] do not broadcast"))
      << message;
}

//===----------------------------------------------------------------------===//
// Verifier errors, at the caller's line
//===----------------------------------------------------------------------===//

TEST_F(DslOpsTest, WrongLinearWidth) {
  Var x = f32("x", {kDyn, 100});
  Var w = weight("w", {384, 128});
  int line = 0;
  std::string message = errorOf([&] {
    line = __LINE__ + 1;
    linear(x, w);
  });
  EXPECT_TRUE(message.starts_with(at(line))) << message;
  EXPECT_TRUE(contains(message, ": error: 'kiln.linear' op expects 'weight' "
                                "to be [out_features, in_features] = [384, "
                                "100], got [384, 128]"))
      << message;
  // The failed op is gone: the graph still finishes and verifies.
  graph.finish({x});
  module.verify();
  EXPECT_FALSE(contains(module.str(), "kiln.linear"));
}

TEST_F(DslOpsTest, HeadsMustDivideTheModelDimension) {
  Var x = f32("x", {kDyn, kDyn, 128});
  Var w = weight("w", {128, 128});
  int line = 0;
  std::string message = errorOf([&] {
    line = __LINE__ + 1;
    multiHeadAttention(x, x, {w, w, w, w}, {.numHeads = 6});
  });
  EXPECT_TRUE(message.starts_with(at(line))) << message;
  EXPECT_TRUE(contains(message, "error: 'kiln.mha' op expects 'num_heads' (6) "
                                "to divide the model dimension (128)"))
      << message;
}

TEST_F(DslOpsTest, RotaryAndGroupedQueryAttention) {
  Var q = f32("q", {kDyn, kDyn, 64});
  Var k = f32("k", {kDyn, kDyn, 32});
  Var pos = graph.scalarInput("pos");
  Var qr = rotary(q, {.headDim = 16, .theta = 5e5, .offset = pos});
  Var kr = rotary(k, {.headDim = 16, .style = RotaryStyle::interleaved});
  Var o =
      attention(qr, kr, k, {.numHeads = 4, .numKvHeads = 2, .causal = true});
  EXPECT_EQ(o.shape(), (Shape{kDyn, kDyn, 64}));
  graph.finish({o});
  module.verify();
  std::string ir = module.str();
  EXPECT_EQ(count(ir, "kiln.rotary"), 2) << ir;
  EXPECT_TRUE(contains(ir, "theta = 5.000000e+05")) << ir;
  EXPECT_TRUE(contains(ir, "style = #kiln<rotary_style interleaved>")) << ir;
  EXPECT_TRUE(contains(ir, "num_kv_heads = 2")) << ir;
}

TEST_F(DslOpsTest, RotaryAndGroupedQueryErrorsNameTheLine) {
  Var q = f32("q", {kDyn, kDyn, 64});
  int line = 0;
  std::string message = errorOf([&] {
    line = __LINE__ + 1;
    rotary(q, {.headDim = 24});
  });
  EXPECT_TRUE(message.starts_with(at(line))) << message;
  EXPECT_TRUE(contains(message, "'kiln.rotary' op expects 'head_dim' (24) to "
                                "divide the last dimension (64)"))
      << message;
  Var k = f32("k", {kDyn, kDyn, 48});
  message = errorOf([&] {
    line = __LINE__ + 1;
    attention(q, k, k, {.numHeads = 4, .numKvHeads = 2});
  });
  EXPECT_TRUE(message.starts_with(at(line))) << message;
  EXPECT_TRUE(contains(message, "have 2 heads of width 16 (32)")) << message;
  Var w = weight("w", {64, 64});
  message = errorOf([&] {
    multiHeadAttention(q, q, {w, w, w, w}, {.numHeads = 4, .numKvHeads = 2});
  });
  EXPECT_TRUE(contains(message, "'numKvHeads' (grouped-query attention) is "
                                "for attention()"))
      << message;
}

TEST_F(DslOpsTest, MismatchedKeyPaddingMask) {
  Var x = f32("x", {kDyn, 7, 64});
  Var w = weight("w", {64, 64});
  Var mask = graph.input("mask", {kDyn, 5}, DType::i1);
  int line = 0;
  std::string message = errorOf([&] {
    line = __LINE__ + 1;
    multiHeadAttention(x, x, {w, w, w, w},
                       {.numHeads = 4, .keyPaddingMask = mask});
  });
  EXPECT_TRUE(message.starts_with(at(line))) << message;
  EXPECT_TRUE(contains(message, "'kiln.mha' op expects 'key_padding_mask' to "
                                "be [batch, key_seq] = [?, 7], got [?, 5]"))
      << message;
}

TEST_F(DslOpsTest, LearnedPositionsTooLong) {
  Var x = f32("x", {2, 2048, 64});
  Var table = weight("wpe", {1024, 64});
  int line = 0;
  std::string message = errorOf([&] {
    line = __LINE__ + 1;
    learnedPositionalEncoding(x, table);
  });
  EXPECT_TRUE(message.starts_with(at(line))) << message;
  EXPECT_TRUE(contains(message, "'kiln.pe' op expects the sequence length "
                                "(2048) to be at most the learned table's "
                                "max_len (1024)"))
      << message;
}

//===----------------------------------------------------------------------===//
// DSL misuse
//===----------------------------------------------------------------------===//

TEST_F(DslOpsTest, MisuseIsReportedAtTheCall) {
  Var x = f32("x", {kDyn, 8});
  Var w = weight("w", {8, 8});
  Var floatIds = f32("ids", {kDyn, kDyn});
  Var seed = graph.seed();
  Graph &other = module.addGraph("other");
  Var foreign = other.input("x", {kDyn, 8}, DType::f32);

  struct Case {
    std::function<void()> build;
    int line;
    std::string expected;
  };
  std::vector<Case> cases = {
      {[&] { linear(Var(), w); }, __LINE__,
       "linear: operand 'input' is a null Var"},
      {[&] { linear(x, foreign); }, __LINE__,
       "linear: operand 'weight' belongs to graph 'other' but operand "
       "'input' to graph 'f'"},
      {[&] { embedding(floatIds, w); }, __LINE__,
       "embedding: expects 'ids' to be token ids (i32/i64), got "
       "tensor<?x?xf32>"},
      {[&] { crossEntropy(x, x); }, __LINE__,
       "crossEntropy: expects 'targets' to be class ids (i32/i64)"},
      {[&] { relu(seed); }, __LINE__,
       "relu: expects 'input' to be a tensor, got i64"},
      {[&] { sinusoidalPositionalEncoding(x, x); }, __LINE__,
       "expects 'offset' to be an i64 scalar, got tensor<?x8xf32>"},
      {[&] { dropout(x, 1.5); }, __LINE__,
       "dropout: expects the dropout probability to be in [0, 1)"},
      {[&] { constant(graph, {2, 2}, {1, 2, 3}); }, __LINE__,
       "constant: shape [2, 2] has 4 elements but 3 values were given"},
      {[&] { concat({}, 0); }, __LINE__, "concat: expects at least one input"},
      {[&] { (void)(x / 0.0); }, __LINE__, "division by the constant 0"},
  };
  for (const Case &c : cases) {
    std::string message = errorOf(c.build);
    EXPECT_TRUE(message.starts_with(at(c.line))) << message;
    EXPECT_TRUE(contains(message, c.expected)) << message;
  }
}

//===----------------------------------------------------------------------===//
// bf16
//===----------------------------------------------------------------------===//

TEST_F(DslOpsTest, CastMakesBf16TensorsThatOpsKeep) {
  Var x = f32("x", {kDyn, 64});
  Var w = weight("w", {32, 64});
  Var h = cast(x, DType::bf16);
  EXPECT_EQ(h.dtype(), DType::bf16);
  EXPECT_EQ(h.typeString(), "tensor<?x64xbf16>");
  EXPECT_EQ(cast(h, DType::bf16).value(), h.value()); // no op to itself
  Var y = gelu(linear(h, cast(w, DType::bf16)));
  EXPECT_EQ(y.dtype(), DType::bf16);
  // Ops with weights cast f32 weights to bf16 where bf16 activations use
  // them (the master weights stay f32).
  y = layerNorm(linear(y, weight("w2", {64, 32}), weight("b2", {64})),
                weight("g", {64}), weight("beta", {64}));
  EXPECT_EQ(y.dtype(), DType::bf16);
  // Numbers mixed with a bf16 Var become bf16 constants (3.1 rounded).
  y = 1.0 - (y + 3.1) * 0.5;
  EXPECT_EQ(y.dtype(), DType::bf16);
  Var loss = reduce(cast(y, DType::f32), Reduction::mean, {0, 1});
  EXPECT_EQ(loss.dtype(), DType::f32);
  graph.finish({loss});
  module.verify();
  std::string ir = module.str();
  EXPECT_EQ(count(ir, "kiln.cast"), 7) << ir;
  EXPECT_TRUE(contains(ir, "3.093750e+00")) << ir; // 3.1 in bf16
}

TEST_F(DslOpsTest, MixingBf16AndF32IsAnErrorAtTheLine) {
  Var x = graph.input("x", {kDyn, 64}, DType::bf16);
  Var w = weight("w", {32, 64});
  int line = __LINE__ + 1;
  std::string error = errorOf([&] { matmul(x, w, false, true); });
  EXPECT_TRUE(contains(error, at(line))) << error;
  EXPECT_TRUE(contains(error, "one floating-point element type")) << error;
  EXPECT_TRUE(contains(error, "kiln.cast converts")) << error;
  Var ids = graph.input("ids", {kDyn}, DType::i64);
  error = errorOf([&] { cast(ids, DType::bf16); });
  EXPECT_TRUE(contains(error, "cast: expects 'input' to be a floating-point "
                              "tensor (f32/bf16), got tensor<?xi64>"))
      << error;
  error = errorOf([&] { cast(x, DType::i32); });
  EXPECT_TRUE(contains(error, "cast: converts to f32 or bf16, not i32"))
      << error;
}
