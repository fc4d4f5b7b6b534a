//===- transformer.cpp - The encoder-decoder of seed document 002 ---------===//
//
// build_transformer of seed 002 (pre-LN blocks with the from-scratch
// LayerNorm, sinusoidal positions, separate source and target embeddings, a
// projection with log_softmax), at a small size: encodes a padded batch of
// source sentences, decodes teacher-forced targets under the causal mask,
// and prints the shapes and the log-probabilities of the first position.
//
//===----------------------------------------------------------------------===//

#include <kiln/kiln.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <vector>

using namespace kiln;

int main() try {
  auto config =
      dsl::models::seed002Transformer(/*srcVocab=*/50, /*tgtVocab=*/60);
  config.numEncoderLayers = 2;
  config.numDecoderLayers = 2;
  config.block.dModel = 64;
  config.block.numHeads = 4;
  config.block.dFF = 128;
  dsl::Module module;
  dsl::models::addEncDecForward(module, config); // eval mode: no dropout
  CompiledModel model(module, /*seed=*/7);
  fmt::print("seed-002 Transformer (d_model {}, {} heads, {}+{} layers): {} "
             "parameters\n",
             config.block.dModel, config.block.numHeads,
             config.numEncoderLayers, config.numDecoderLayers,
             model.parameters().numParameters());

  // Two source sentences; the second is padded after 3 tokens.
  Tensor src =
      Tensor::fromVector<int64_t>({2, 5}, {3, 14, 15, 9, 26, 5, 35, 8, 0, 0});
  std::vector<bool> keep = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
  Tensor srcMask = Tensor::zeros({2, 5}, DType::i1);
  for (size_t i = 0; i < keep.size(); ++i) {
    srcMask.data<bool>()[i] = keep[i];
  }
  Tensor tgt =
      Tensor::fromVector<int64_t>({2, 4}, {1, 7, 12, 40, 1, 22, 5, 33});
  Tensor logProbs = model.run(
      "forward", {{"src", src}, {"tgt", tgt}, {"src_mask", srcMask}})[0];
  fmt::print("src {} (+ mask), tgt {} -> log-probabilities {}\n",
             formatShape(src.shape()), formatShape(tgt.shape()),
             formatShape(logProbs.shape()));
  const float *first = logProbs.data<float>();
  double total = 0;
  for (int64_t v = 0; v < logProbs.shape().back(); ++v) {
    total += std::exp(first[v]);
  }
  fmt::print("  position 0 [:4] = [{:.4f}], sum of probabilities {:.6f}\n",
             fmt::join(std::vector<float>(first, first + 4), ", "), total);
  return 0;
} catch (const std::exception &e) { // kiln::Error, or bad_alloc and the like
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
