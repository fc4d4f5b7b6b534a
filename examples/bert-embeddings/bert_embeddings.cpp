//===- bert_embeddings.cpp - BERT's embedding layer (seed document 003) ---===//
//
// Token + learned position + token type embeddings, summed and normalized
// with LayerNorm (eps 1e-12); token 0 is [PAD] (padding_idx 0). Prints the
// shapes and a few values, and shows that [PAD] reads its row like any token.
//
//===----------------------------------------------------------------------===//

#include <kiln/kiln.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

using namespace kiln;

int main() try {
  dsl::Module module;
  dsl::models::BertEmbeddingsConfig config = dsl::models::bertSeedEmbeddings();
  dsl::models::addBertEmbeddingsForward(module, config);
  CompiledModel model(module, /*seed=*/42);
  fmt::print("BERT embeddings: {} parameters\n",
             model.parameters().numParameters());
  for (const std::string &name : model.parameters().names()) {
    fmt::print("  {:<32} {}\n", name,
               formatShape(model.parameters().get(name).shape()));
  }

  // "[CLS] the cat sat [SEP] [PAD] [PAD]" as ids, one sentence (type 0).
  Tensor ids = Tensor::fromVector<int64_t>(
      {1, 7}, {101 % 120, 5, 17, 29, 102 % 120, 0, 0});
  Tensor types = Tensor::zeros({1, 7}, DType::i64);
  Tensor out =
      model.run("forward", {{"input_ids", ids}, {"token_type_ids", types}})[0];
  fmt::print("input_ids {} -> embeddings {}\n", formatShape(ids.shape()),
             formatShape(out.shape()));
  const float *row = out.data<float>();
  int64_t d = out.shape().back();
  for (int64_t t : {0, 5}) {
    std::vector<float> head(row + t * d, row + t * d + 4);
    double mean = 0, var = 0;
    for (int64_t c = 0; c < d; ++c) {
      mean += row[t * d + c] / d;
    }
    for (int64_t c = 0; c < d; ++c) {
      var += (row[t * d + c] - mean) * (row[t * d + c] - mean) / d;
    }
    fmt::print("  position {} [:4] = [{:.4f}]  (mean {:+.1e}, var {:.4f})\n", t,
               fmt::join(head, ", "), mean, var);
  }
  return 0;
} catch (const std::exception &e) { // kiln::Error, or bad_alloc and the like
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
