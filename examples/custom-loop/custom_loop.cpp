//===- custom_loop.cpp - docs/training.md's "Writing your own loop" -------===//
//
// The code of docs/training.md, built and run by the tests (small, for
// seconds): a GPT with dropout in training and none in evaluation,
// runTraining with evaluation, checkpoints and resume, then sampling with the
// cache. Usage: kiln-example-custom-loop STEPS DIRECTORY
//
//===----------------------------------------------------------------------===//

#include <kiln/kiln.h>

#include <fmt/format.h>

#include <cstdlib>
#include <string>

using namespace kiln;

int main(int argc, char **argv) try {
  if (argc != 3) {
    fmt::print(stderr, "usage: kiln-example-custom-loop STEPS DIRECTORY\n");
    return 2;
  }
  int64_t steps = std::atoll(argv[1]);
  std::string dir = argv[2];

  // --- the code of docs/training.md, with a small model ---
  dsl::Module module;
  dsl::models::GptConfig config;
  config.vocabSize = 65;
  config.dModel = 32;
  config.numHeads = 2;
  config.numLayers = 1;
  config.dFF = 64;
  config.maxSeqLen = 64;
  config.dropout = 0.1;
  dsl::models::addGptLoss(module, config, {.training = true}, "loss");
  dsl::models::addGptLoss(module, config, {}, "eval_loss"); // no dropout
  dsl::models::addGptDecode(module, config);                // for sampling
  Trainer trainer(
      compileTraining(module, "loss", {.kind = "adamw", .weightDecay = 0.1}));

  CharDataset data = CharDataset::fromFile(
      KILN_SOURCE_DIR "/examples/data/tinyshakespeare.txt");
  Rng dataRng(1);
  TrainingHooks hooks = trainer.hooks([&](int64_t step) {
    Batch b = data.sample(Split::train, 16, 64, dataRng);
    return std::map<std::string, Arg>{{"idx", b.inputs},
                                      {"targets", b.targets}};
  });
  hooks.rngs["data"] = &dataRng; // saved in checkpoints, restored on resume
  hooks.evaluate = [&] {         // the mean validation loss, without dropout
    Rng fixed(7);
    double total = 0;
    for (int i = 0; i < 20; ++i) {
      Batch b = data.sample(Split::validation, 16, 64, fixed);
      total +=
          trainer
              .run("eval_loss", {{"idx", b.inputs}, {"targets", b.targets}})[0]
              .data<float>()[0];
    }
    return total / 20;
  };

  TrainingOptions options;
  options.steps = steps;
  options.schedule = LrSchedule::warmupCosine(3e-3, steps / 10, steps, 3e-4);
  options.tokensPerStep = 16 * 64;
  options.evalEvery = steps / 2;
  options.checkpointPath = dir + "/run.ckpt.safetensors";
  options.checkpointEvery = steps / 2;
  options.resume = true; // continue from the checkpoint if there is one
  options.csvPath = dir + "/run.csv";
  TrainingResult result = runTraining(options, hooks);

  Rng sampling(1);
  std::vector<int64_t> text = generateGpt(
      [&](auto &graph, auto &inputs) { return trainer.run(graph, inputs); },
      dsl::models::decodeShape(config), data.vocab().encode("ROMEO:"), 200,
      {.temperature = 0.8, .topK = 10}, sampling);
  // --- end of the code of docs/training.md ---

  fmt::print("resumed from step {}, ran {} steps, validation loss {:.4f}\n",
             result.resumedFrom, result.losses.size(),
             result.validationLoss.value_or(NAN));
  fmt::print("sample: ROMEO:{}\n", data.vocab().decode(text));
  return 0;
} catch (const std::exception &e) { // kiln::Error, or bad_alloc and the like
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
