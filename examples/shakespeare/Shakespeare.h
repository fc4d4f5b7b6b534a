//===- Shakespeare.h - The Shakespeare example's training and sampling ----===//
//
// Shared by the JIT example (shakespeare.cpp) and the ahead-of-time binaries
// (shakespeare-aot/): options, the training loop with evaluation and
// checkpoints, and sampling, on any Executable that has the model's
// "train_step", "loss" (or "eval_loss") and "decode". Uses the runtime
// only, so the AOT binaries link no LLVM or MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_EXAMPLES_SHAKESPEARE_SHAKESPEARE_H
#define KILN_EXAMPLES_SHAKESPEARE_SHAKESPEARE_H

#include "../common/CommandLine.h"

#include "runtime/Checkpoint.h"
#include "runtime/Data.h"
#include "runtime/Error.h"
#include "runtime/Generate.h"
#include "runtime/Safetensors.h"
#include "runtime/Trainer.h"
#include "runtime/TrainingLoop.h"

#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>

namespace kiln::shakespeare {

struct Options {
  std::string data = KILN_DATA_DIR "/tinyshakespeare.txt";
  int64_t steps = 2500, batch = 16, context = 64;
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

inline const char *kUsage = R"(usage: kiln-example-shakespeare [options]
Trains a character-level GPT on Tiny Shakespeare and prints a sample.
  --steps N          optimizer steps (2500)
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

/// Which options a program takes.
enum class Program {
  jit,         ///< all of them (the JIT example)
  aotTrain,    ///< not the model's shape: it was compiled ahead of time
  aotGenerate, ///< sampling from a checkpoint only
};

/// Parses argv for `program`; an option it does not take is an error.
inline Options parseOptions(int argc, char **argv, const char *usage,
                            Program program) {
  Options o;
  examples::CommandLine cl;
  cl.integers = {{"--sample", &o.sample}, {"--top-k", &o.topK}};
  cl.unsignedIntegers = {{"--seed", &o.seed}};
  cl.reals = {{"--temperature", &o.temperature}};
  cl.strings = {{"--checkpoint", &o.checkpoint},
                {"--prompt", &o.prompt},
                {"--data", &o.data}};
  if (program != Program::aotGenerate) {
    cl.integers["--steps"] = &o.steps;
    cl.integers["--batch"] = &o.batch;
    cl.integers["--warmup"] = &o.warmup;
    cl.integers["--eval-every"] = &o.evalEvery;
    cl.integers["--eval-batches"] = &o.evalBatches;
    cl.reals["--lr"] = &o.lr;
    cl.reals["--min-lr"] = &o.minLr;
    cl.strings["--csv"] = &o.csv;
    cl.switches["--resume"] = &o.resume;
  }
  if (program == Program::jit) {
    cl.integers["--context"] = &o.context;
    cl.integers["--d-model"] = &o.dModel;
    cl.integers["--layers"] = &o.layers;
    cl.integers["--heads"] = &o.heads;
    cl.reals["--dropout"] = &o.dropout;
    cl.reals["--weight-decay"] = &o.weightDecay;
    cl.switches["--sample-only"] = &o.sampleOnly;
  }
  cl.parse(argc, argv, usage);
  o.sampleOnly |= program == Program::aotGenerate;
  return o;
}

/// The model settings a checkpoint records, so that --sample-only rebuilds
/// the same model.
inline std::map<std::string, std::string> describe(const Options &o) {
  return {{"d_model", std::to_string(o.dModel)},
          {"layers", std::to_string(o.layers)},
          {"heads", std::to_string(o.heads)},
          {"context", std::to_string(o.context)}};
}

inline void adoptCheckpointConfig(Options &o) {
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

/// The sizes of the model `o` describes, checked against the parameters
/// `executable` declares (so a model compiled ahead of time for other
/// options is refused).
inline GptShape checkShape(const Options &o, const Executable &executable,
                           int64_t vocab) {
  auto find = [&](const std::string &name) -> const ParamSpec * {
    for (const ParamSpec &p : executable.params()) {
      if (p.name == name) {
        return &p;
      }
    }
    return nullptr;
  };
  const ParamSpec *wte = find("wte.weight"), *wpe = find("wpe.weight");
  std::string last = fmt::format("h.{}.ln_1.weight", o.layers - 1);
  std::string past = fmt::format("h.{}.ln_1.weight", o.layers);
  if (!wte || !wpe || wte->shape != std::vector<int64_t>{vocab, o.dModel} ||
      wpe->shape != std::vector<int64_t>{o.context, o.dModel} || !find(last) ||
      find(past)) {
    throw Error(fmt::format(
        "the compiled model is not a GPT with vocabulary {}, d_model {}, {} "
        "layers and context {}",
        vocab, o.dModel, o.layers, o.context));
  }
  return {vocab, o.context, o.layers, o.dModel};
}

/// Trains (unless o.sampleOnly: then loads o.checkpoint) and prints a
/// sample, with `executable`'s functions.
inline void run(const Options &o, std::shared_ptr<const Executable> executable,
                const CharDataset &data) {
  int64_t vocab = data.vocab().size();
  GptShape shape = checkShape(o, *executable, vocab);
  Trainer trainer(executable, o.seed);
  std::string evalGraph =
      executable->contains("eval_loss") ? "eval_loss" : "loss";
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
    TrainingState saved = loadCheckpoint(o.checkpoint, trainer.parameters());
    // Same tensor shapes do not make the same model (the number of heads).
    for (const auto &[key, value] : describe(o)) {
      auto it = saved.info.find(key);
      if (it != saved.info.end() && it->second != value) {
        throw Error(fmt::format("{}: the checkpoint's model has {} {}, this "
                                "one {}",
                                o.checkpoint, key, it->second, value));
      }
    }
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
        shape, prompt, o.sample, {o.temperature, o.topK}, rng,
        [&](int64_t token) {
          fmt::print("{}", data.vocab().decode({token}));
          std::fflush(stdout);
        });
    fmt::print("\n---\n");
  }
}

} // namespace kiln::shakespeare

#endif // KILN_EXAMPLES_SHAKESPEARE_SHAKESPEARE_H
