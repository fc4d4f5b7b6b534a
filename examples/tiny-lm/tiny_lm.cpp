//===- tiny_lm.cpp - The README's DSL example, built and run by the tests -===//
//
// A one-block language model with a tied head, written with the DSL,
// compiled in-process and run.
//
//===----------------------------------------------------------------------===//

#include <kiln/kiln.h>
#include <iostream>
using namespace kiln;
using namespace kiln::dsl;

Var tinyLM(Graph &g, Var ids, int64_t vocab = 256, int64_t d = 64) {
  nn::Embedding embed(g, "embed", {.numEmbeddings = vocab, .dim = d});
  nn::PositionalEncoding pos(
      g, "pos", {.kind = nn::PEKind::learned, .dim = d, .maxLen = 512});
  nn::LayerNorm ln1(g, "ln1", {.dim = d}), ln2(g, "ln2", {.dim = d});
  nn::MultiHeadAttention attn(g, "attn", {.dModel = d, .numHeads = 4});
  nn::FeedForward mlp(
      g, "mlp", {.dModel = d, .dFF = 4 * d, .activation = Activation::gelu});
  Var x = pos(embed(ids));
  Var h = ln1(x);
  x += attn(h, h, {.causal = true});
  x += mlp(ln2(x));
  return linear(x, embed.weight); // tied head
}

int main() try {
  dsl::Module module;
  Graph &fwd = module.addGraph("forward");
  fwd.finish({tinyLM(fwd, fwd.input("ids", {kDynamic, kDynamic}, DType::i64))});
  CompiledModel model(module, /*seed=*/0);
  Tensor ids = Tensor::fromVector<int64_t>({1, 3}, {1, 2, 3});
  Tensor logits = model.run("forward", {{"ids", ids}})[0]; // [1, 3, 256]
  std::cout << formatShape(logits.shape()) << "\n";
} catch (
    const kiln::Error &e) { // model.cpp:12:42: error: 'kiln.mha' op expects ...
  std::cerr << e.what() << "\n";
  return 1;
}
