// A program outside Kiln's tree: writes a small GPT with the DSL, JIT-runs
// its forward pass, takes its gradients by parameter name, trains it, and
// loads its weights back from a state dict saved under PyTorch's names
// (Hugging Face GPT-2's: "transformer." prefixes, Conv1D weights [in, out]).
#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>

using namespace kiln;

static Tensor transposed(const Tensor &t) {
  int64_t rows = t.shape()[0], cols = t.shape()[1];
  std::vector<float> v(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      v[c * rows + r] = t.data<float>()[r * cols + c];
    }
  }
  return Tensor::fromVector<float>({cols, rows}, v);
}

int main(int argc, char **argv) try {
  std::string dir = argc > 1 ? argv[1] : ".";
  dsl::models::GptConfig config;
  config.vocabSize = 11;
  config.dModel = 16;
  config.numHeads = 2;
  config.numLayers = 1;
  config.dFF = 32;
  config.maxSeqLen = 8;
  dsl::Module module;
  dsl::models::addGptForward(module, config);
  dsl::models::addGptLoss(module, config);

  Tensor idx = Tensor::fromVector<int64_t>(
      {2, 6}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2});
  Tensor targets = Tensor::fromVector<int64_t>(
      {2, 6}, {2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2, 3});

  // JIT: the forward pass and the gradients by name.
  CompiledModel model(module, /*seed=*/1);
  Tensor logits = model.run("forward", {{"idx", idx}})[0];
  LossAndGradients g =
      model.gradients("loss", {{"idx", idx}, {"targets", targets}});
  const Tensor &gq = g.gradients.at("h.0.attn.c_attn.weight");
  std::printf("logits %s, loss %.3f, %zu gradients, c_attn %s\n",
              formatShape(logits.shape()).c_str(), g.loss, g.gradients.size(),
              formatShape(gq.shape()).c_str());

  // Training: one compiled AdamW step per call.
  Trainer trainer(compileTraining(module, "loss", {.kind = "adamw"}), 1);
  float first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    last = trainer.step({{"idx", idx}, {"targets", targets}}, 0.01f);
    first = step == 0 ? last : first;
  }
  std::printf("trained: loss %.3f -> %.3f\n", first, last);

  // A state dict with Hugging Face GPT-2's names and layouts, loaded into a
  // model initialized from another seed.
  NamedTensors pytorch;
  for (const auto &[name, tensor] : model.parameters().namedTensors()) {
    bool conv1d = name.find(".c_") != std::string::npos &&
                  name.ends_with(".weight");
    pytorch.emplace_back("transformer." + name,
                         conv1d ? transposed(tensor) : tensor.clone());
  }
  pytorch.emplace_back("transformer.h.0.attn.bias",
                       Tensor::zeros({1, 1, 8, 8}, DType::f32));
  saveSafetensors(dir + "/gpt2.safetensors", pytorch);
  CompiledModel other(module, /*seed=*/2);
  StateDictMapping gpt2 = {
      .renames = {{"transformer.**", "**"}},
      .ignore = {"transformer.h.*.attn.bias"},
      .transpose = {"h.*.attn.c_*.weight", "h.*.mlp.c_*.weight"}};
  loadParameters(dir + "/gpt2.safetensors", other.parameters(), gpt2);
  Tensor again = other.run("forward", {{"idx", idx}})[0];
  double diff = 0;
  for (int64_t i = 0; i < logits.numel(); ++i) {
    diff = std::max(diff, double(std::fabs(logits.data<float>()[i] -
                                           again.data<float>()[i])));
  }
  std::printf("state dict: max difference %g\n", diff);

  // A mapping that leaves a tensor unmatched is refused.
  gpt2.ignore.clear();
  try {
    loadParameters(dir + "/gpt2.safetensors", other.parameters(), gpt2);
    return 1;
  } catch (const Error &e) {
    std::printf("refused: %s\n", e.what());
  }
  return last < first && diff == 0 ? 0 : 1;
} catch (const Error &e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
