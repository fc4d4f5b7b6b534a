//===- ModelsTest.cpp - The reference models of Models.h ------------------===//
//
// The three models build for their presets with the parameter counts of
// docs/BENCHMARKS.md, verify, take dynamic batch and sequence sizes, and
// declare the names, shapes and initializers they are specified with.
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
/// The inputs of `graph`, as "name:[shape] ...".
std::string inputsOf(Graph &graph) {
  std::string text;
  for (const Argument &input : graph.inputs()) {
    text += input.name + ":" + formatShape(input.shape) + " ";
  }
  return text;
}

void expectInit(const Module &module, const std::string &name, Init::Kind kind,
                double a = 0.0, double b = 0.0) {
  const ParamSpec *spec = module.findParam(name);
  ASSERT_NE(spec, nullptr) << name;
  EXPECT_EQ(spec->init.kind, kind) << name;
  EXPECT_DOUBLE_EQ(spec->init.a, a) << name;
  EXPECT_DOUBLE_EQ(spec->init.b, b) << name;
}
} // namespace

//===----------------------------------------------------------------------===//
// GPT
//===----------------------------------------------------------------------===//

TEST(DslModelsTest, GptTiny) {
  Module module;
  Graph &forward = models::addGptForward(module, models::gptTiny());
  Graph &loss = models::addGptLoss(module, models::gptTiny());
  module.verify();
  EXPECT_EQ(module.numParameters(), 818048);
  // Both entry points declare the same parameters, stored once.
  EXPECT_EQ(forward.params().size(), module.params().size());
  EXPECT_EQ(loss.params().size(), module.params().size());
  EXPECT_EQ(module.params().size(), 2u + 4 * 12 + 2);

  EXPECT_EQ(inputsOf(forward), "idx:[?, ?] ");
  EXPECT_EQ(inputsOf(loss), "idx:[?, ?] targets:[?, ?] ");
  std::string ir = module.str();
  EXPECT_TRUE(contains(ir, "-> tensor<?x?x65xf32>")) << ir;
  EXPECT_TRUE(contains(ir, "kiln.cross_entropy")) << ir;
  // q|k|v slices of the fused weight and bias, per layer and graph.
  EXPECT_EQ(count(ir, "kiln.slice"), 2 * 4 * 6) << ir;
  EXPECT_EQ(count(ir, "kiln.ffn gelu "), 2 * 4) << ir;
  EXPECT_EQ(count(ir, "causal"), 2 * 4) << ir;
  EXPECT_EQ(count(ir, "kiln.pe learned"), 2) << ir;
  EXPECT_EQ(count(ir, "dropout"), 0) << ir;

  const ParamSpec *qkv = module.findParam("h.3.attn.c_attn.weight");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->shape, (Shape{384, 128}));
  expectInit(module, "wte.weight", Init::Kind::normal, 0.0, 0.02);
  expectInit(module, "wpe.weight", Init::Kind::normal, 0.0, 0.02);
  expectInit(module, "h.0.attn.c_attn.weight", Init::Kind::normal, 0.0, 0.02);
  expectInit(module, "h.0.attn.c_attn.bias", Init::Kind::zeros);
  expectInit(module, "h.1.attn.c_proj.weight", Init::Kind::normal, 0.0, 0.02);
  expectInit(module, "h.2.mlp.c_fc.bias", Init::Kind::zeros);
  expectInit(module, "h.3.mlp.c_proj.weight", Init::Kind::normal, 0.0, 0.02);
  expectInit(module, "h.3.ln_2.weight", Init::Kind::ones);
  expectInit(module, "ln_f.bias", Init::Kind::zeros);
  EXPECT_EQ(module.findParam("wpe.weight")->shape, (Shape{128, 128}));
  EXPECT_EQ(module.findParam("lm_head.weight"), nullptr); // Tied.
}

TEST(DslModelsTest, GptSmall) {
  Module module;
  models::addGptForward(module, models::gptSmall());
  module.verify();
  EXPECT_EQ(module.numParameters(), 12318720);
  EXPECT_EQ(module.findParam("h.5.mlp.c_fc.weight")->shape, (Shape{1536, 384}));
}

TEST(DslModelsTest, GptTrainingGraphNumbersEveryDropout) {
  Module module;
  models::GptConfig config = models::gptTiny();
  config.numLayers = 2;
  config.dropout = 0.1;
  Graph &train = models::addGptLoss(module, config, {.training = true});
  Graph &eval = models::addGptForward(module, config);
  module.verify();
  std::string ir = module.str();
  // Embedding dropout, then per layer: attention (inside kiln.mha) and two
  // residual dropouts.
  EXPECT_EQ(count(ir, "kiln.dropout"), 1 + 2 * 2) << ir;
  EXPECT_EQ(count(ir, "stream = "), 1 + 2 * 3) << ir;
  EXPECT_TRUE(train.lookup("seed"));
  EXPECT_FALSE(eval.lookup("seed"));
}

//===----------------------------------------------------------------------===//
// BERT embeddings
//===----------------------------------------------------------------------===//

TEST(DslModelsTest, BertEmbeddingsOfSeed003) {
  Module module;
  Graph &graph =
      models::addBertEmbeddingsForward(module, models::bertSeedEmbeddings());
  module.verify();
  EXPECT_EQ(module.numParameters(), 120 * 16 + 50 * 16 + 2 * 16 + 2 * 16);
  std::vector<std::string> names;
  for (const ParamSpec &spec : module.params()) {
    names.push_back(spec.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "word_embeddings.weight", "position_embeddings.weight",
                       "token_type_embeddings.weight", "LayerNorm.weight",
                       "LayerNorm.bias"}));
  EXPECT_EQ(inputsOf(graph), "input_ids:[?, ?] token_type_ids:[?, ?] ");
  std::string ir = module.str();
  EXPECT_TRUE(contains(ir, "padding_idx = 0")) << ir;
  EXPECT_TRUE(contains(ir, "eps = 9.9999999999999998E-13")) << ir;
  EXPECT_TRUE(contains(ir, "kiln.pe learned")) << ir;
  EXPECT_TRUE(contains(ir, "-> tensor<?x?x16xf32>")) << ir;
  expectInit(module, "word_embeddings.weight", Init::Kind::normal, 0.0, 0.02);

  // Without token types every token is type 0.
  Graph &plain = module.addGraph("plain");
  models::BertEmbeddings embeddings(plain, "", models::bertSeedEmbeddings());
  Var ids = plain.input("input_ids", {kDyn, kDyn}, DType::i64);
  Var out = embeddings(ids);
  EXPECT_EQ(out.shape(), (Shape{kDyn, kDyn, 16}));
  plain.finish({out});
  module.verify();
}

//===----------------------------------------------------------------------===//
// Encoder-decoder
//===----------------------------------------------------------------------===//

TEST(DslModelsTest, EncDecBase) {
  Module module;
  models::addEncDecForward(module, models::encdecBase());
  module.verify();
  EXPECT_EQ(module.numParameters(), 48234496);
  // Post-LN: no final norms; one shared table, tied head.
  EXPECT_EQ(module.findParam("encoder.norm.weight"), nullptr);
  EXPECT_EQ(module.findParam("tgt_embed.embedding.weight"), nullptr);
  EXPECT_EQ(module.findParam("projection_layer.proj.weight"), nullptr);
  expectInit(module, "src_embed.embedding.weight", Init::Kind::xavierUniform,
             1.0);
  expectInit(module, "decoder.layers.5.feed_forward_block.linear_2.weight",
             Init::Kind::xavierUniform, 1.0);
  expectInit(module, "decoder.layers.5.feed_forward_block.linear_2.bias",
             Init::Kind::uniform, -1 / std::sqrt(2048.0),
             1 / std::sqrt(2048.0));
}

TEST(DslModelsTest, EncDecTinyForwardAndLoss) {
  Module module;
  nn::TransformerConfig config = models::encdecTiny();
  Graph &forward = models::addEncDecForward(module, config);
  Graph &loss = models::addEncDecLoss(module, config);
  module.verify();
  EXPECT_EQ(inputsOf(forward), "src:[?, ?] tgt:[?, ?] src_mask:[?, ?] ");
  EXPECT_EQ(inputsOf(loss),
            "src:[?, ?] tgt:[?, ?] src_mask:[?, ?] targets:[?, ?] ");
  EXPECT_EQ(forward.inputs()[2].dtype, DType::i1);
  std::string ir = module.str();
  EXPECT_TRUE(contains(ir, "-> tensor<?x?x97xf32>")) << ir;
  EXPECT_TRUE(contains(ir, "kiln.cross_entropy")) << ir;
  EXPECT_EQ(count(ir, "kiln.mha"), 2 * (2 + 2 * 2)) << ir;
  // Post-LN: each of the 2·2 + 2·3 residual blocks ends in a norm.
  EXPECT_EQ(count(ir, "kiln.layernorm"), 2 * (2 * 2 + 2 * 3)) << ir;
  int64_t d = 32, v = 97, f = 64;
  int64_t attention = 4 * (d * d + d), ffn = 2 * d * f + f + d;
  EXPECT_EQ(module.numParameters(), v * d + 2 * (attention + ffn + 2 * 2 * d) +
                                        2 * (2 * attention + ffn + 3 * 2 * d));
}

TEST(DslModelsTest, EncDecTrainingWithDropout) {
  Module module;
  nn::TransformerConfig config = models::encdecTiny();
  config.block.dropout = 0.1;
  Graph &graph = models::addEncDecLoss(module, config, {.training = true});
  module.verify();
  std::string ir = module.str();
  // Two positional-encoding dropouts and one per residual block.
  EXPECT_EQ(count(ir, "kiln.dropout"), 2 + 2 * 2 + 2 * 3) << ir;
  EXPECT_TRUE(graph.lookup("seed"));
}
