//===- shakespeare.cpp - Train a character-level GPT on Tiny Shakespeare --===//
//
// Builds a GPT-2 style decoder with the DSL, compiles its whole training step
// (forward, loss, backward, AdamW) with the JIT, trains it on random windows
// of Tiny Shakespeare with a warm-up + cosine schedule, evaluates on the
// held-out 10%, checkpoints atomically (resumable with --resume) and prints a
// sample generated with the key/value cache. --sample-only samples from a
// checkpoint without training. Run with --help for the options.
//
//===----------------------------------------------------------------------===//

#include "../common/CommandLine.h"

#include "compiler/DSL/DSL.h"
#include "compiler/DSL/Models.h"
#include "compiler/Target/JIT/Trainer.h"
#include "runtime/Checkpoint.h"
#include "runtime/Data.h"
#include "runtime/Error.h"
#include "runtime/Generate.h"
#include "runtime/Safetensors.h"
#include "runtime/TrainingLoop.h"

#include <fmt/format.h>

#include <map>
#include <string>

using namespace kiln;

namespace {

struct Options {
  std::string data = KILN_SOURCE_DIR "/examples/data/tinyshakespeare.txt";
  int64_t steps = 1500, batch = 16, context = 64;
  int64_t dModel = 128, layers = 4, heads = 4;
  double lr = 3e-3, minLr = 3e-4, dropout = 0.0, weightDecay = 0.1;
  int64_t warmup = 100, evalEvery = 250, evalBatches = 40;
  std::string checkpoint = "shakespeare.ckpt.safetensors";
  std::string csv;
  bool resume = false, sampleOnly = false;
  int64_t sample = 500, topK = 0;
  double temperature = 0.8;
  std::string prompt = "ROMEO:";
  uint64_t seed = 1;
};

const char *kUsage = R"(usage: kiln-example-shakespeare [options]
Trains a character-level GPT on Tiny Shakespeare and prints a sample.
  --steps N          optimizer steps (1500)
  --batch N          windows per step (16)
  --context N        characters per window = the model's max length (64)
  --d-model N        width (128)          --layers N   blocks (4)
  --heads N          attention heads (4)  --dropout P  dropout (0)
  --lr X             peak learning rate (3e-3), linear warm-up then cosine
  --min-lr X         final learning rate (3e-4)
  --warmup N         warm-up steps (100)  --weight-decay X  AdamW (0.1)
  --eval-every N     validation every N steps (250), on --eval-batches (40)
  --checkpoint PATH  checkpoint file (shakespeare.ckpt.safetensors), written
                     at every evaluation and at the end; "" for none
  --resume           continue from --checkpoint if it exists
  --csv PATH         a CSV log of every step
  --sample N         characters to generate at the end (500)
  --temperature X    sampling temperature (0.8; 0 = greedy)
  --top-k N          sample among the N most likely characters (0 = all)
  --prompt TEXT      the start of the sample ("ROMEO:")
  --sample-only      load --checkpoint and sample, without training
  --data PATH        the text to train on (examples/data/tinyshakespeare.txt)
  --seed N           initialization, data and sampling seed (1)
)";

Options parseOptions(int argc, char **argv) {
  Options o;
  examples::CommandLine cl;
  cl.integers = {{"--steps", &o.steps},
                 {"--batch", &o.batch},
                 {"--context", &o.context},
                 {"--d-model", &o.dModel},
                 {"--layers", &o.layers},
                 {"--heads", &o.heads},
                 {"--warmup", &o.warmup},
                 {"--eval-every", &o.evalEvery},
                 {"--eval-batches", &o.evalBatches},
                 {"--sample", &o.sample},
                 {"--top-k", &o.topK}};
  cl.unsignedIntegers = {{"--seed", &o.seed}};
  cl.reals = {{"--lr", &o.lr},
              {"--min-lr", &o.minLr},
              {"--dropout", &o.dropout},
              {"--weight-decay", &o.weightDecay},
              {"--temperature", &o.temperature}};
  cl.strings = {{"--checkpoint", &o.checkpoint},
                {"--csv", &o.csv},
                {"--prompt", &o.prompt},
                {"--data", &o.data}};
  cl.switches = {{"--resume", &o.resume}, {"--sample-only", &o.sampleOnly}};
  cl.parse(argc, argv, kUsage);
  return o;
}

dsl::models::GptConfig modelConfig(const Options &o, int64_t vocab) {
  dsl::models::GptConfig config;
  config.vocabSize = vocab;
  config.dModel = o.dModel;
  config.numHeads = o.heads;
  config.numLayers = o.layers;
  config.dFF = 4 * o.dModel;
  config.maxSeqLen = o.context;
  config.dropout = o.dropout;
  return config;
}

/// The model settings a checkpoint records, so that --sample-only rebuilds
/// the same model.
std::map<std::string, std::string> describe(const Options &o) {
  return {{"d_model", std::to_string(o.dModel)},
          {"layers", std::to_string(o.layers)},
          {"heads", std::to_string(o.heads)},
          {"context", std::to_string(o.context)}};
}

void adoptCheckpointConfig(Options &o) {
  SafetensorsFile file = loadSafetensors(o.checkpoint);
  auto get = [&](const std::string &key) {
    auto it = file.metadata.find("info." + key);
    if (it == file.metadata.end()) {
      throw Error(fmt::format("{}: not a checkpoint of this example (no "
                              "'{}' in its metadata)",
                              o.checkpoint, key));
    }
    return examples::parseNumber<int64_t>(key, it->second.c_str());
  };
  o.dModel = get("d_model");
  o.layers = get("layers");
  o.heads = get("heads");
  o.context = get("context");
}

} // namespace

int main(int argc, char **argv) try {
  Options o = parseOptions(argc, argv);
  CharDataset data = CharDataset::fromFile(o.data);
  if (o.sampleOnly) {
    adoptCheckpointConfig(o);
  }
  dsl::models::GptConfig config = modelConfig(o, data.vocab().size());

  // One module: the training loss (with dropout when asked), the evaluation
  // loss and the cached decoder share their parameters by name.
  dsl::Module module;
  dsl::models::addGptLoss(module, config, {.training = o.dropout > 0}, "loss");
  std::string evalGraph = "loss";
  if (o.dropout > 0) {
    dsl::models::addGptLoss(module, config, {}, "eval_loss");
    evalGraph = "eval_loss";
  }
  dsl::models::addGptDecode(module, config);

  OptimizerConfig adamw;
  adamw.beta2 = 0.99;
  adamw.weightDecay = o.weightDecay;
  adamw.clipNorm = 1.0;
  fmt::print("model: GPT, vocab {}, d_model {}, {} layers, {} heads, context "
             "{}, dropout {}\n",
             config.vocabSize, config.dModel, config.numLayers, config.numHeads,
             config.maxSeqLen, config.dropout);
  auto compiled = compileTraining(module, "loss", adamw);
  const JitModule &jit = *compiled;
  Trainer trainer(compiled, o.seed);
  fmt::print("{} parameters; compiled in {:.1f} s (MLIR {:.1f} s, LLVM {:.1f} "
             "s)\n",
             trainer.parameters().numParameters(),
             jit.pipelineSeconds() + jit.codegenSeconds(),
             jit.pipelineSeconds(), jit.codegenSeconds());

  auto evaluate = [&] {
    Rng rng(o.seed + 1000); // the same validation windows every time
    double total = 0.0;
    for (int64_t i = 0; i < o.evalBatches; ++i) {
      Batch b = data.sample(Split::validation, o.batch, o.context, rng);
      total +=
          trainer.run(evalGraph, {{"idx", b.inputs}, {"targets", b.targets}})[0]
              .data<float>()[0];
    }
    return total / double(o.evalBatches);
  };

  if (o.sampleOnly) {
    loadCheckpoint(o.checkpoint, trainer.parameters());
    fmt::print("loaded {}\n", o.checkpoint);
  } else {
    Rng dataRng(o.seed);
    TrainingHooks hooks = trainer.hooks([&](int64_t) {
      Batch b = data.sample(Split::train, o.batch, o.context, dataRng);
      return std::map<std::string, Arg>{{"idx", b.inputs},
                                        {"targets", b.targets}};
    });
    hooks.evaluate = evaluate;
    hooks.rngs["data"] = &dataRng;
    hooks.info = describe(o);
    TrainingOptions run;
    run.steps = o.steps;
    run.schedule = LrSchedule::warmupCosine(
        o.lr, std::min(o.warmup, o.steps - 1), o.steps, o.minLr);
    run.tokensPerStep = o.batch * o.context;
    run.evalEvery = o.evalEvery;
    run.checkpointPath = o.checkpoint;
    run.checkpointEvery = o.evalEvery;
    run.resume = o.resume;
    run.csvPath = o.csv;
    fmt::print("training: {} steps of {} x {} characters, AdamW, {}\n", o.steps,
               o.batch, o.context, run.schedule.describe());
    TrainingResult result = runTraining(run, hooks);
    if (result.validationLoss) {
      fmt::print("validation loss {:.4f} nats/char after {} steps ({:.0f} s "
                 "of training)\n",
                 *result.validationLoss, o.steps, result.seconds);
    }
  }

  if (o.sample > 0) {
    std::vector<int64_t> prompt = data.vocab().encode(o.prompt);
    Rng rng(o.seed);
    fmt::print("--- sample (temperature {}, top-k {}) ---\n{}", o.temperature,
               o.topK, o.prompt);
    generateGpt(
        [&](const std::string &graph, const std::map<std::string, Arg> &in) {
          return trainer.run(graph, in);
        },
        dsl::models::decodeShape(config), prompt, o.sample,
        {o.temperature, o.topK}, rng,
        [&](int64_t token) {
          fmt::print("{}", data.vocab().decode({token}));
          std::fflush(stdout);
        });
    fmt::print("\n---\n");
  }
  return 0;
} catch (const kiln::Error &e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
