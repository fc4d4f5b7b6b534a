//===- NNTest.cpp - The PyTorch-style modules of NN.h ---------------------===//
//
// Each module builds and verifies with the expected result shape (dynamic
// sizes preserved) and records its parameters with their names, shapes and
// initializers.
//
//===----------------------------------------------------------------------===//

#include "test/Unit/DSL/TestUtil.h"

#include "compiler/DSL/Models.h"

#include <cmath>

using namespace kiln::dsl;
using namespace kiln::dsl::testing;
using kiln::DType;
using kiln::Init;

namespace {
class DslNNTest : public ::testing::Test {
protected:
  Var activations(int64_t width, const std::string &name = "x") {
    return graph.input(name, {kDyn, kDyn, width}, DType::f32);
  }

  /// Finishes the graph with `output` and verifies the module.
  void finish(Var output) {
    graph.finish({output});
    module.verify();
  }

  /// The recorded parameter `name`; fails the test when absent.
  const ParamSpec &param(const std::string &name) {
    const ParamSpec *spec = module.findParam(name);
    if (!spec) {
      ADD_FAILURE() << "no parameter " << name;
      static ParamSpec none;
      return none;
    }
    return *spec;
  }

  void expectParam(const std::string &name, Shape shape, Init::Kind kind,
                   double a = 0.0, double b = 0.0) {
    const ParamSpec &spec = param(name);
    EXPECT_EQ(spec.shape, shape) << name;
    EXPECT_EQ(spec.init.kind, kind) << name;
    EXPECT_DOUBLE_EQ(spec.init.a, a) << name;
    EXPECT_DOUBLE_EQ(spec.init.b, b) << name;
  }

  std::vector<std::string> paramNames() const {
    std::vector<std::string> names;
    for (const Argument &argument : graph.params()) {
      names.push_back(argument.name);
    }
    return names;
  }

  Module module;
  Graph &graph = module.addGraph("forward");
};
} // namespace

TEST_F(DslNNTest, Linear) {
  nn::Linear fc(graph, "fc", {.inFeatures = 64, .outFeatures = 16});
  Var y = fc(activations(64));
  EXPECT_EQ(y.shape(), (Shape{kDyn, kDyn, 16}));
  finish(y);
  expectParam("fc.weight", {16, 64}, Init::Kind::uniform, -0.125, 0.125);
  expectParam("fc.bias", {16}, Init::Kind::uniform, -0.125, 0.125);

  nn::Linear noBias(graph.module().addGraph("g"), "head",
                    {.inFeatures = 4, .outFeatures = 2, .bias = false});
  EXPECT_FALSE(noBias.bias);
  EXPECT_EQ(module.findParam("head.bias"), nullptr);
}

TEST_F(DslNNTest, EmbeddingWithPaddingAndScaling) {
  nn::Embedding embed(graph, "src_embed.embedding",
                      {.numEmbeddings = 100,
                       .dim = 64,
                       .paddingIdx = 0,
                       .scaleBySqrtDim = true});
  Var ids = graph.input("ids", {kDyn, kDyn}, DType::i32);
  Var y = embed(ids);
  EXPECT_EQ(y.shape(), (Shape{kDyn, kDyn, 64}));
  finish(y);
  expectParam("src_embed.embedding.weight", {100, 64}, Init::Kind::normal, 0.0,
              1.0);
  std::string ir = module.str();
  EXPECT_TRUE(contains(ir, "padding_idx = 0")) << ir;
  EXPECT_TRUE(contains(ir, "factor = 8.000000e+00")) << ir;
}

TEST_F(DslNNTest, PositionalEncodings) {
  nn::PositionalEncoding fixed(graph, "src_pos", {.dim = 32});
  nn::PositionalEncoding learned(
      graph, "wpe", {.kind = nn::PEKind::learned, .dim = 32, .maxLen = 64});
  Var x = activations(32);
  Var y = learned(fixed(x), graph.scalarInput("offset"));
  EXPECT_EQ(y.shape(), (Shape{kDyn, kDyn, 32}));
  finish(y);
  EXPECT_EQ(paramNames(), (std::vector<std::string>{"wpe.weight"}));
  expectParam("wpe.weight", {64, 32}, Init::Kind::normal, 0.0, 1.0);

  int line = 0;
  std::string message = errorOf([&] {
    Graph &other = module.addGraph("other");
    Var wide = other.input("x", {kDyn, kDyn, 16}, DType::f32);
    line = __LINE__ + 1;
    nn::PositionalEncoding(other, "pos", {.dim = 32})(wide);
  });
  EXPECT_TRUE(message.starts_with(at(line))) << message;
  EXPECT_TRUE(contains(message, "expects inputs of width 32")) << message;
}

TEST_F(DslNNTest, LayerNormModes) {
  nn::LayerNorm standard(graph, "ln", {.dim = 48});
  nn::LayerNorm seed(graph, "norm",
                     {.dim = 48, .eps = 1e-6, .mode = NormMode::stdEps});
  Var y = seed(standard(activations(48)));
  EXPECT_EQ(y.shape(), (Shape{kDyn, kDyn, 48}));
  finish(y);
  EXPECT_EQ(paramNames(),
            (std::vector<std::string>{"ln.weight", "ln.bias", "norm.alpha",
                                      "norm.bias"}));
  expectParam("ln.weight", {48}, Init::Kind::ones);
  expectParam("ln.bias", {48}, Init::Kind::zeros);
  expectParam("norm.alpha", {48}, Init::Kind::ones);
  std::string ir = module.str();
  EXPECT_TRUE(contains(ir, "std_eps")) << ir;
  EXPECT_TRUE(contains(ir, "eps = 9.9999999999999995E-7")) << ir;
}

TEST_F(DslNNTest, SelfAndCrossAttention) {
  nn::MultiHeadAttention self(graph, "self_attention_block",
                              {.dModel = 64, .numHeads = 8, .bias = false});
  nn::MultiHeadAttention cross(graph, "cross_attention_block",
                               {.dModel = 64, .numHeads = 8, .kvDim = 96});
  Var x = activations(64);
  Var memory = graph.input("memory", {kDyn, 11, 96}, DType::f32);
  Var mask = graph.input("mask", {kDyn, 11}, DType::i1);
  Var y = self(x, x, {.causal = true});
  y = cross(y, memory, {.keyPadding = mask});
  EXPECT_EQ(y.shape(), (Shape{kDyn, kDyn, 64}));
  finish(y);
  EXPECT_EQ(paramNames(), (std::vector<std::string>{
                              "self_attention_block.w_q.weight",
                              "self_attention_block.w_k.weight",
                              "self_attention_block.w_v.weight",
                              "self_attention_block.w_o.weight",
                              "cross_attention_block.w_q.weight",
                              "cross_attention_block.w_q.bias",
                              "cross_attention_block.w_k.weight",
                              "cross_attention_block.w_k.bias",
                              "cross_attention_block.w_v.weight",
                              "cross_attention_block.w_v.bias",
                              "cross_attention_block.w_o.weight",
                              "cross_attention_block.w_o.bias",
                          }));
  expectParam("cross_attention_block.w_k.weight", {64, 96}, Init::Kind::uniform,
              -1 / std::sqrt(96.0), 1 / std::sqrt(96.0));
  EXPECT_EQ(count(module.str(), "kiln.mha"), 2);
}

TEST_F(DslNNTest, GroupedQueryAttentionWithRotaryPositions) {
  nn::MultiHeadAttention attn(graph, "attn",
                              {.dModel = 64,
                               .numHeads = 8,
                               .numKvHeads = 2,
                               .rotary = nn::RotaryConfig{.theta = 5e5},
                               .bias = false});
  Var x = activations(64);
  Var y = attn(x, x, {.causal = true});
  EXPECT_EQ(y.shape(), (Shape{kDyn, kDyn, 64}));
  finish(y);
  expectParam("attn.w_k.weight", {16, 64}, Init::Kind::uniform, -1 / 8.0,
              1 / 8.0);
  expectParam("attn.w_v.weight", {16, 64}, Init::Kind::uniform, -1 / 8.0,
              1 / 8.0);
  expectParam("attn.w_q.weight", {64, 64}, Init::Kind::uniform, -1 / 8.0,
              1 / 8.0);
  std::string ir = module.str();
  EXPECT_EQ(count(ir, "kiln.rotary"), 2) << ir;
  EXPECT_EQ(count(ir, "kiln.mha"), 0) << ir;
  EXPECT_TRUE(contains(ir, "num_kv_heads = 2")) << ir;
  EXPECT_TRUE(contains(ir, "theta = 5.000000e+05")) << ir;
}

TEST_F(DslNNTest, GroupedQueryAttentionErrorsNameTheLine) {
  nn::MultiHeadAttentionConfig grouped{
      .dModel = 64, .numHeads = 8, .numKvHeads = 3};
  int line = 0;
  std::string message = errorOf([&] {
    line = __LINE__ + 1;
    nn::MultiHeadAttention(graph, "a", grouped);
  });
  EXPECT_TRUE(message.starts_with(at(line))) << message;
  EXPECT_TRUE(contains(message, "'numKvHeads' (3)")) << message;
  message = errorOf([&] {
    nn::MultiHeadAttention(
        graph, "b",
        {.dModel = 24, .numHeads = 8, .rotary = nn::RotaryConfig{}});
  });
  EXPECT_TRUE(contains(message, "rotary positions need heads of even width, "
                                "got 3"))
      << message;
}

TEST_F(DslNNTest, FeedForwardActivations) {
  Var x = activations(32);
  for (auto [activation, name] : {std::pair{Activation::relu, "relu"},
                                  {Activation::gelu, "gelu"},
                                  {Activation::geluTanh, "gelu_tanh"}}) {
    nn::FeedForward ffn(graph, std::string("ffn_") + name,
                        {.dModel = 32, .dFF = 128, .activation = activation});
    x = ffn(x);
    EXPECT_TRUE(contains(module.str(), std::string("kiln.ffn ") + name + " "))
        << name;
  }
  EXPECT_EQ(x.shape(), (Shape{kDyn, kDyn, 32}));
  finish(x);
  expectParam("ffn_relu.linear_1.weight", {128, 32}, Init::Kind::uniform,
              -1 / std::sqrt(32.0), 1 / std::sqrt(32.0));
  expectParam("ffn_relu.linear_2.weight", {32, 128}, Init::Kind::uniform,
              -1 / std::sqrt(128.0), 1 / std::sqrt(128.0));
  expectParam("ffn_relu.linear_2.bias", {32}, Init::Kind::uniform,
              -1 / std::sqrt(128.0), 1 / std::sqrt(128.0));
}

TEST_F(DslNNTest, RMSNormAndSwiGLU) {
  nn::RMSNorm norm(graph, "input_layernorm", {.dim = 32, .eps = 1e-5});
  nn::FeedForward mlp(graph, "mlp",
                      {.dModel = 32,
                       .dFF = 88,
                       .activation = Activation::silu,
                       .gated = true,
                       .bias = false});
  Var y = mlp(norm(activations(32)));
  EXPECT_EQ(y.shape(), (Shape{kDyn, kDyn, 32}));
  finish(y);
  EXPECT_EQ(paramNames(), (std::vector<std::string>{
                              "input_layernorm.weight", "mlp.gate_proj.weight",
                              "mlp.up_proj.weight", "mlp.down_proj.weight"}));
  expectParam("input_layernorm.weight", {32}, Init::Kind::ones);
  expectParam("mlp.gate_proj.weight", {88, 32}, Init::Kind::uniform,
              -1 / std::sqrt(32.0), 1 / std::sqrt(32.0));
  expectParam("mlp.down_proj.weight", {32, 88}, Init::Kind::uniform,
              -1 / std::sqrt(88.0), 1 / std::sqrt(88.0));
  std::string ir = module.str();
  EXPECT_TRUE(contains(ir, "kiln.rms_norm")) << ir;
  EXPECT_TRUE(contains(ir, "eps = 1.000000e-05")) << ir;
  EXPECT_EQ(count(ir, "kiln.silu"), 1) << ir;
  EXPECT_EQ(count(ir, "kiln.mul"), 1) << ir;
  EXPECT_EQ(count(ir, "kiln.linear"), 3) << ir;
  EXPECT_FALSE(contains(ir, "kiln.ffn")) << ir;
}

TEST_F(DslNNTest, ResidualConnectionPlacement) {
  nn::ResidualConnection pre(graph, "pre", {.norm = {.dim = 16}});
  nn::ResidualConnection post(
      graph, "post",
      {.norm = {.dim = 16}, .placement = nn::NormPlacement::post});
  Var x = activations(16);
  Var y = pre(x, [](Var h) { return relu(h); });
  y = post(y, [](Var h) { return tanh(h); });
  finish(y);
  std::string ir = module.str();
  // pre: layernorm, relu, add; post: tanh, add, layernorm.
  size_t ln1 = ir.find("kiln.layernorm"), relu = ir.find("kiln.relu");
  size_t add1 = ir.find("kiln.add"), tanh = ir.find("kiln.tanh");
  size_t add2 = ir.find("kiln.add", add1 + 1);
  size_t ln2 = ir.find("kiln.layernorm", ln1 + 1);
  EXPECT_LT(ln1, relu);
  EXPECT_LT(relu, add1);
  EXPECT_LT(add1, tanh);
  EXPECT_LT(tanh, add2);
  EXPECT_LT(add2, ln2);
  EXPECT_NE(ln2, std::string::npos);
  EXPECT_NE(module.findParam("post.norm.weight"), nullptr);
}

TEST_F(DslNNTest, EncoderAndDecoderStacks) {
  nn::BlockConfig config{.dModel = 32, .numHeads = 4, .dFF = 64};
  nn::Encoder encoder(graph, "encoder", config, 2);
  nn::Decoder decoder(graph, "decoder", config, 2);
  Var src = activations(32, "src");
  Var tgt = activations(32, "tgt");
  Var srcMask = graph.input("src_mask", {kDyn, kDyn}, DType::i1);
  Var memory = encoder(src, srcMask);
  Var y = decoder(tgt, memory, srcMask);
  EXPECT_EQ(y.shape(), (Shape{kDyn, kDyn, 32}));
  finish(y);
  // Pre-LN stacks end with a norm.
  expectParam("encoder.norm.weight", {32}, Init::Kind::ones);
  expectParam("decoder.norm.bias", {32}, Init::Kind::zeros);
  expectParam("encoder.layers.1.self_attention_block.w_q.weight", {32, 32},
              Init::Kind::uniform, -1 / std::sqrt(32.0), 1 / std::sqrt(32.0));
  expectParam("encoder.layers.1.residual_connections.1.norm.weight", {32},
              Init::Kind::ones);
  expectParam("decoder.layers.1.cross_attention_block.w_o.bias", {32},
              Init::Kind::uniform, -1 / std::sqrt(32.0), 1 / std::sqrt(32.0));
  expectParam("decoder.layers.0.residual_connections.2.norm.bias", {32},
              Init::Kind::zeros);
  expectParam("decoder.layers.0.feed_forward_block.linear_1.weight", {64, 32},
              Init::Kind::uniform, -1 / std::sqrt(32.0), 1 / std::sqrt(32.0));
  std::string ir = module.str();
  EXPECT_EQ(count(ir, "kiln.mha"), 6) << ir;
  EXPECT_EQ(count(ir, "causal"), 2) << ir; // The decoders' self-attention.
  EXPECT_EQ(count(ir, "mask %"), 4) << ir; // Encoder self, decoder cross.
  EXPECT_EQ(count(ir, "kiln.layernorm"), 2 * 2 + 2 * 3 + 2) << ir;

  // A post-LN stack has no final norm.
  Graph &other = module.addGraph("post");
  config.placement = nn::NormPlacement::post;
  nn::Encoder postEncoder(other, "post_encoder", config, 1);
  EXPECT_FALSE(postEncoder.norm);
  EXPECT_EQ(module.findParam("post_encoder.norm.weight"), nullptr);
}

TEST_F(DslNNTest, ProjectionLayer) {
  nn::ProjectionLayer projection(graph, "projection_layer",
                                 {.dModel = 32, .vocabSize = 1000});
  Var y = projection(activations(32));
  EXPECT_EQ(y.shape(), (Shape{kDyn, kDyn, 1000}));
  finish(y);
  EXPECT_TRUE(contains(module.str(), "kiln.log_softmax"));
  expectParam("projection_layer.proj.weight", {1000, 32}, Init::Kind::uniform,
              -1 / std::sqrt(32.0), 1 / std::sqrt(32.0));
}

TEST_F(DslNNTest, Seed002Transformer) {
  nn::TransformerConfig config = models::seed002Transformer(300, 400);
  config.block.dModel = 32;
  config.block.dFF = 64;
  config.numEncoderLayers = 2;
  config.numDecoderLayers = 3;
  nn::Transformer model(graph, "", config);
  Var src = graph.input("src", {kDyn, kDyn}, DType::i64);
  Var tgt = graph.input("tgt", {kDyn, kDyn}, DType::i64);
  Var srcMask = graph.input("src_mask", {kDyn, kDyn}, DType::i1);
  Var memory = model.encode(src, srcMask);
  EXPECT_EQ(memory.shape(), (Shape{kDyn, kDyn, 32}));
  Var y = model.project(model.decode(memory, srcMask, tgt));
  EXPECT_EQ(y.shape(), (Shape{kDyn, kDyn, 400}));
  finish(y);
  // Xavier on every 2-D weight, PyTorch's default on biases.
  expectParam("src_embed.embedding.weight", {300, 32},
              Init::Kind::xavierUniform, 1.0);
  expectParam("tgt_embed.embedding.weight", {400, 32},
              Init::Kind::xavierUniform, 1.0);
  expectParam("decoder.layers.2.cross_attention_block.w_v.weight", {32, 32},
              Init::Kind::xavierUniform, 1.0);
  expectParam("projection_layer.proj.weight", {400, 32},
              Init::Kind::xavierUniform, 1.0);
  expectParam("projection_layer.proj.bias", {400}, Init::Kind::uniform,
              -1 / std::sqrt(32.0), 1 / std::sqrt(32.0));
  expectParam("encoder.norm.alpha", {32}, Init::Kind::ones);
  EXPECT_EQ(module.findParam("encoder.layers.0.self_attention_block.w_q.bias"),
            nullptr);
  std::string ir = module.str();
  EXPECT_EQ(count(ir, "kiln.pe sinusoidal"), 2) << ir;
  EXPECT_EQ(count(ir, "kiln.scale"), 2) << ir; // √d on both embeddings.
}
