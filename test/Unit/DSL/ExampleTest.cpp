//===- ExampleTest.cpp - The README's DSL example, built ------------------===//
//
// The model of the README's "Writing a model in C++" section, verbatim, so
// that the documented example always compiles and builds both entry points.
//
//===----------------------------------------------------------------------===//

#include "test/Unit/DSL/TestUtil.h"

#include "compiler/DSL/DSL.h"

#include <filesystem>
#include <fstream>

using namespace kiln::dsl;
using namespace kiln::dsl::testing;

namespace {
/// The line of this file that contains `text` (0 if none). The compiler
/// may name the file relative to the build directory (ccache's base_dir
/// rewrites absolute paths so), not to where the test runs.
int lineOf(const std::string &text) {
  std::filesystem::path path = std::source_location::current().file_name();
  if (path.is_relative()) {
    path = std::filesystem::path(KILN_BUILD_DIR) / path;
  }
  std::ifstream file(path);
  std::string line;
  for (int number = 1; std::getline(file, line); ++number) {
    if (line.find(text) != std::string::npos) {
      return number;
    }
  }
  return 0;
}

// --- README example begins ---
/// A one-layer causal language model: token ids [B, T] -> logits [B, T, V].
Var tinyLM(Graph &g, Var ids, int64_t vocab = 256, int64_t d = 64,
           int64_t heads = 4) {
  nn::Embedding embed(g, "embed", {.numEmbeddings = vocab, .dim = d});
  nn::PositionalEncoding pos(
      g, "pos", {.kind = nn::PEKind::learned, .dim = d, .maxLen = 512});
  nn::LayerNorm ln1(g, "ln1", {.dim = d}), ln2(g, "ln2", {.dim = d});
  nn::MultiHeadAttention attn(g, "attn",
                              {.dModel = d, .numHeads = heads, .dropout = 0.1});
  nn::FeedForward mlp(
      g, "mlp", {.dModel = d, .dFF = 4 * d, .activation = Activation::gelu});

  Var x = pos(embed(ids));
  Var h = ln1(x);
  x += dropout(attn(h, h, {.causal = true}), 0.1);
  x += dropout(mlp(ln2(x)), 0.1);
  return linear(x, embed.weight); // Tied output head.
}
// --- README example ends ---
} // namespace

TEST(DslExampleTest, BuildsForwardAndTrainingLoss) {
  Module module;
  Graph &forward = module.addGraph("forward");
  Var ids = forward.input("ids", {kDynamic, kDynamic}, kiln::DType::i64);
  forward.finish({tinyLM(forward, ids)});

  Graph &train = module.addGraph("loss", {.training = true});
  Var trainIds = train.input("ids", {kDynamic, kDynamic}, kiln::DType::i64);
  Var targets = train.input("targets", {kDynamic, kDynamic}, kiln::DType::i64);
  train.finish({crossEntropy(tinyLM(train, trainIds), targets)});

  module.verify();
  EXPECT_EQ(module.numParameters(), 256 * 64 + 512 * 64 + 4 * 64 +
                                        4 * (64 * 64 + 64) + (64 * 256 + 256) +
                                        (256 * 64 + 64));
  std::string ir = module.str();
  EXPECT_EQ(count(ir, "kiln.dropout"), 2) << ir; // The loss graph only.
  EXPECT_EQ(count(ir, "func.func"), 2) << ir;
}

TEST(DslExampleTest, AMistakeNamesTheModelLine) {
  Module module;
  Graph &graph = module.addGraph("forward");
  Var ids = graph.input("ids", {kDynamic, kDynamic}, kiln::DType::i64);
  std::string message = errorOf([&] { tinyLM(graph, ids, 256, 64, 6); });
  // The offending line is the attention call inside tinyLM.
  EXPECT_TRUE(message.starts_with(at(lineOf("x += dropout(attn(h, h"))))
      << message;
  EXPECT_TRUE(contains(message, "error: 'kiln.mha' op expects 'num_heads' (6) "
                                "to divide the model dimension (64)"))
      << message;
}
