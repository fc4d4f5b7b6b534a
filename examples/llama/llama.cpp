//===- llama.cpp - A Llama-architecture model, trained and reloaded -------===//
//
// Builds a small Llama-architecture decoder with the DSL (RMSNorm, rotary
// positions, grouped-query attention, SwiGLU), trains it on Tiny
// Shakespeare with AdamW, saves it as Hugging Face lays a checkpoint out
// (config.json and model.safetensors, loadable by transformers'
// LlamaForCausalLM), reloads it through Kiln's loader into a freshly
// compiled model, checks that it computes the same validation loss, and
// generates with the key/value cache (which holds only the key/value
// heads). Run with --help for the options.
//
//===----------------------------------------------------------------------===//

#include "../common/CommandLine.h"

#include <kiln/kiln.h>

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <string>

using namespace kiln;

namespace {

const char *kUsage = R"(usage: kiln-example-llama [options]
Trains a small Llama-architecture model on Tiny Shakespeare, saves it in
Hugging Face's layout, reloads it and prints a sample.
  --steps N       optimizer steps (600)
  --out DIR       where config.json and model.safetensors go
                  (llama-shakespeare); created if missing
  --overwrite     replace a checkpoint already in --out
  --sample N      characters to generate (300)
  --data PATH     the text to train on (examples/data/tinyshakespeare.txt)
  --seed N        initialization, data and sampling seed (1)
)";

constexpr int64_t kBatch = 16, kContext = 64, kEvalBatches = 20;

/// The mean loss of graph "eval_loss" over kEvalBatches fixed validation
/// batches.
double validationLoss(
    const std::function<std::vector<Tensor>(
        const std::string &, const std::map<std::string, Arg> &)> &run,
    const CharDataset &data) {
  Rng fixed(7);
  double total = 0;
  for (int64_t i = 0; i < kEvalBatches; ++i) {
    Batch b = data.sample(Split::validation, kBatch, kContext, fixed);
    total += run("eval_loss", {{"idx", b.inputs}, {"targets", b.targets}})[0]
                 .data<float>()[0];
  }
  return total / double(kEvalBatches);
}

} // namespace

int main(int argc, char **argv) try {
  int64_t steps = 600, sample = 300;
  uint64_t seed = 1;
  std::string out = "llama-shakespeare";
  std::string dataPath = KILN_DATA_DIR "/tinyshakespeare.txt";
  bool overwrite = false;
  examples::CommandLine cl;
  cl.integers = {{"--steps", examples::Integer(&steps, 1, int64_t(1) << 30)},
                 {"--sample", examples::Integer(&sample, 0, 1 << 20)}};
  cl.unsignedIntegers = {{"--seed", &seed}};
  cl.strings = {{"--out", &out}, {"--data", &dataPath}};
  cl.switches = {{"--overwrite", &overwrite}};
  cl.parse(argc, argv, kUsage);

  // Refused before any work: a checkpoint the user did not ask to replace.
  std::string configPath = out + "/config.json",
              weightsPath = out + "/model.safetensors";
  for (const std::string &path : {configPath, weightsPath}) {
    if (!overwrite && std::filesystem::exists(path)) {
      throw Error(fmt::format("{} exists: pass --overwrite to replace it, or "
                              "another --out",
                              path));
    }
  }
  CharDataset data = CharDataset::fromFile(dataPath);

  dsl::models::LlamaConfig config = dsl::models::llamaTiny();
  config.vocabSize = data.vocab().size();
  config.maxSeqLen = kContext;
  dsl::Module module;
  dsl::models::addLlamaLoss(module, config, {}, "loss");
  dsl::models::addLlamaLoss(module, config, {}, "eval_loss");
  fmt::print("model: Llama, vocab {}, d_model {}, {} layers, {} query heads "
             "over {} key/value heads, d_ff {}, context {}\n",
             config.vocabSize, config.dModel, config.numLayers, config.numHeads,
             config.kvHeads(), config.dFF, config.maxSeqLen);
  Trainer trainer(
      compileTraining(module, "loss",
                      {.kind = "adamw", .weightDecay = 0.1, .clipNorm = 1.0}),
      seed);
  fmt::print("{} parameters\n", module.numParameters());

  Rng dataRng(seed);
  TrainingHooks hooks = trainer.hooks([&](int64_t) {
    Batch b = data.sample(Split::train, kBatch, kContext, dataRng);
    return std::map<std::string, Arg>{{"idx", b.inputs},
                                      {"targets", b.targets}};
  });
  auto runTrainer = [&](const std::string &graph,
                        const std::map<std::string, Arg> &inputs) {
    return trainer.run(graph, inputs);
  };
  hooks.evaluate = [&] { return validationLoss(runTrainer, data); };
  TrainingOptions options;
  options.steps = steps;
  options.schedule = LrSchedule::warmupCosine(
      3e-3, std::max<int64_t>(1, steps / 10), steps, 3e-4);
  options.tokensPerStep = kBatch * kContext;
  options.evalEvery = std::max<int64_t>(1, steps / 3);
  TrainingResult result = runTraining(options, hooks);
  double trained = result.validationLoss.value_or(NAN);

  // Hugging Face's layout: the names are the model's own.
  std::filesystem::create_directories(out);
  dsl::models::saveLlamaConfig(configPath, config);
  saveParameters(weightsPath, trainer.parameters());
  fmt::print("saved {} and {}\n", configPath, weightsPath);

  // Reloaded through the loader, into a model compiled afresh.
  std::vector<std::string> notes;
  dsl::models::LlamaConfig read =
      dsl::models::readLlamaConfig(configPath, &notes);
  for (const std::string &note : notes) {
    fmt::print("note: {}\n", note);
  }
  dsl::Module reloadedModule;
  dsl::models::addLlamaLoss(reloadedModule, read, {}, "eval_loss");
  dsl::models::addLlamaDecode(reloadedModule, read);
  CompiledModel reloaded(reloadedModule, /*seed=*/seed + 1);
  loadParameters(weightsPath, reloaded.parameters(),
                 dsl::models::llamaStateDictMapping(read));
  double again = validationLoss(
      [&](const std::string &graph, const std::map<std::string, Arg> &in) {
        return reloaded.run(graph, in);
      },
      data);
  fmt::print("validation loss: trained {:.4f}, reloaded {:.4f}\n", trained,
             again);
  if (again != trained) {
    throw Error("the reloaded model computes another validation loss");
  }

  Rng sampling(seed);
  std::vector<int64_t> text = generateGpt(
      [&](const std::string &graph, const std::map<std::string, Arg> &in) {
        return reloaded.run(graph, in);
      },
      dsl::models::decodeShape(read), data.vocab().encode("ROMEO:"), sample,
      {.temperature = 0.8, .topK = 10}, sampling);
  fmt::print("sample:\nROMEO:{}\n", data.vocab().decode(text));
  return 0;
} catch (const std::exception &e) { // kiln::Error, or bad_alloc and the like
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
