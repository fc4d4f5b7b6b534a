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

#include <kiln/runtime.h>

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
  std::string precision = "fp32";
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
  --precision P      fp32 (default), or bf16: matrix products of bf16 values
                     with f32 sums, f32 weights and optimizer state (needs a
                     CPU with AVX512-BF16; docs/precision.md)
)";

/// The largest values the options take: far beyond any model this example
/// trains, they keep nonsense sizes from reaching the compiler.
inline constexpr int64_t kMaxSize = 1 << 16, kMaxLayers = 1024,
                         kMaxCount = 1 << 24, kMaxSteps = int64_t(1) << 40;
/// The largest learning rate and weight decay: finite as a float.
inline constexpr double kMaxLr = 1e4;

/// Refuses a model that the sizes in `o` (each within its range) do not
/// make; `source` says where they came from.
inline void checkModel(const Options &o, const std::string &source) {
  if (o.dModel % o.heads != 0) {
    throw Error(fmt::format("{}: {} heads do not divide d_model {}", source,
                            o.heads, o.dModel));
  }
}

/// Reads the corpus of `o.data`; when training, refuses one whose splits
/// are too short for a window of `o.context` characters (before anything
/// is compiled).
inline CharDataset loadCorpus(const Options &o) {
  CharDataset data = CharDataset::fromFile(o.data);
  for (Split split : {Split::train, Split::validation}) {
    if (!o.sampleOnly && data.size(split) <= o.context) {
      throw Error(fmt::format("{}: the {} split has {} characters, too few "
                              "for windows of {} (each needs {})",
                              o.data, name(split), data.size(split), o.context,
                              o.context + 1));
    }
  }
  if (o.sample > 0) {
    try { // before training, not after it
      data.vocab().encode(o.prompt);
    } catch (const Error &e) {
      throw Error(fmt::format("--prompt: {} ({})", e.what(), o.data));
    }
  }
  return data;
}

/// Which options a program takes.
enum class Program {
  jit,         ///< all of them (the JIT example)
  aotTrain,    ///< not the model's shape: it was compiled ahead of time
  aotGenerate, ///< sampling from a checkpoint only
};

/// Parses argv for `program`; an option it does not take is an error.
/// `writer`: this process writes the checkpoint (rank 0 of a data-parallel
/// run), so it checks that it can.
inline Options parseOptions(int argc, char **argv, const char *usage,
                            Program program, bool writer = true) {
  Options o;
  using examples::Integer, examples::Real;
  examples::CommandLine cl;
  cl.integers = {{"--sample", {&o.sample, 0, kMaxCount}},
                 {"--top-k", {&o.topK, 0, kMaxCount}}};
  cl.unsignedIntegers = {{"--seed", &o.seed}};
  cl.reals = {{"--temperature", {&o.temperature, 0, 100}}};
  cl.strings = {{"--checkpoint", &o.checkpoint},
                {"--prompt", &o.prompt},
                {"--data", &o.data}};
  if (program != Program::aotGenerate) {
    cl.integers.insert_or_assign("--steps", Integer(&o.steps, 1, kMaxSteps));
    cl.integers.insert_or_assign("--batch", Integer(&o.batch, 1, kMaxSize));
    cl.integers.insert_or_assign("--warmup", Integer(&o.warmup, 0, kMaxSteps));
    cl.integers.insert_or_assign("--eval-every",
                                 Integer(&o.evalEvery, 0, kMaxSteps));
    cl.integers.insert_or_assign("--eval-batches",
                                 Integer(&o.evalBatches, 1, kMaxCount));
    cl.reals.insert_or_assign("--lr", Real(&o.lr, 0, kMaxLr));
    cl.reals.insert_or_assign("--min-lr", Real(&o.minLr, 0, kMaxLr));
    cl.strings["--csv"] = &o.csv;
    cl.switches["--resume"] = &o.resume;
  }
  if (program == Program::jit) {
    cl.integers.insert_or_assign("--context", Integer(&o.context, 1, kMaxSize));
    cl.integers.insert_or_assign("--d-model", Integer(&o.dModel, 1, kMaxSize));
    cl.integers.insert_or_assign("--layers", Integer(&o.layers, 1, kMaxLayers));
    cl.integers.insert_or_assign("--heads", Integer(&o.heads, 1, kMaxSize));
    cl.reals.insert_or_assign("--dropout", Real(&o.dropout, 0, 0.99));
    cl.reals.insert_or_assign("--weight-decay",
                              Real(&o.weightDecay, 0, kMaxLr));
    cl.switches["--sample-only"] = &o.sampleOnly;
    cl.strings["--precision"] = &o.precision;
  }
  cl.parse(argc, argv, usage);
  o.sampleOnly |= program == Program::aotGenerate;
  checkModel(o, "the options");
  // Before anything is compiled: no output over the corpus or another
  // output, and a checkpoint that can be saved.
  if (!o.sampleOnly) {
    checkDistinctFiles(
        {{"--data", o.data},
         {"--csv", o.csv},
         {"--checkpoint", o.checkpoint},
         {"--checkpoint's temporary file",
          o.checkpoint.empty() ? "" : checkpointTemporary(o.checkpoint)}});
  }
  if (!o.sampleOnly && !o.checkpoint.empty() && writer) {
    checkCheckpointWritable(o.checkpoint);
  }
  return o;
}

/// The model settings a checkpoint records, so that --sample-only rebuilds
/// the same model, and its vocabulary (the characters' bytes in hex: ids
/// mean nothing with another corpus, even one of the same size). Resuming
/// or sampling with other settings is refused.
inline std::map<std::string, std::string> describe(const Options &o,
                                                   const CharVocab &vocab) {
  std::string hex;
  for (char c : vocab.chars()) {
    hex += fmt::format("{:02x}", static_cast<unsigned char>(c));
  }
  return {{"d_model", std::to_string(o.dModel)},
          {"layers", std::to_string(o.layers)},
          {"heads", std::to_string(o.heads)},
          {"context", std::to_string(o.context)},
          {"vocab", hex}};
}

/// Takes the model's sizes from the checkpoint's metadata, refused unless
/// each is within its option's range and the checkpoint's tensors have
/// them (so a forged "layers" = 1000000 builds nothing).
inline void adoptCheckpointConfig(Options &o) {
  SafetensorsFile file = loadSafetensors(o.checkpoint);
  auto get = [&](const std::string &key, int64_t max) {
    auto it = file.metadata.find("info." + key);
    if (it == file.metadata.end()) {
      throw Error(fmt::format("{}: not a checkpoint of this example (no "
                              "'{}' in its metadata)",
                              o.checkpoint, key));
    }
    auto value = examples::parseNumber<int64_t>(key, it->second.c_str());
    if (value < 1 || value > max) {
      throw Error(fmt::format("{}: its metadata says {} = {}, not between 1 "
                              "and {}",
                              o.checkpoint, key, value, max));
    }
    return value;
  };
  o.dModel = get("d_model", kMaxSize);
  o.layers = get("layers", kMaxLayers);
  o.heads = get("heads", kMaxSize);
  o.context = get("context", kMaxSize);
  checkModel(o, o.checkpoint);
  auto shapeOf = [&](const std::string &name) {
    const Tensor *tensor = file.find(name);
    return tensor ? tensor->shape() : std::vector<int64_t>{};
  };
  if (shapeOf("wpe.weight") != std::vector<int64_t>{o.context, o.dModel} ||
      shapeOf(fmt::format("h.{}.ln_1.weight", o.layers - 1)) !=
          std::vector<int64_t>{o.dModel} ||
      file.find(fmt::format("h.{}.ln_1.weight", o.layers))) {
    throw Error(fmt::format("{}: its tensors are not those of the model its "
                            "metadata describes (d_model {}, {} layers, "
                            "context {})",
                            o.checkpoint, o.dModel, o.layers, o.context));
  }
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
/// sample, with `executable`'s functions; data-parallel over the processes
/// of `world` when it has several (each trains and evaluates on its share
/// of every batch).
inline void run(const Options &o, std::shared_ptr<const Executable> executable,
                const CharDataset &data,
                std::shared_ptr<Communicator> world = nullptr) {
  int64_t vocab = data.vocab().size();
  GptShape shape = checkShape(o, *executable, vocab);
  Trainer trainer(executable, o.seed, world);
  std::string evalGraph =
      executable->contains("eval_loss") ? "eval_loss" : "loss";
  auto evaluate = [&]() -> Evaluation {
    Rng rng(o.seed + 1000); // the same validation windows every time
    double total = 0.0, tokens = 0.0;
    for (int64_t i = 0; i < o.evalBatches; ++i) {
      Batch b = data.sample(Split::validation, o.batch, o.context, rng);
      std::map<std::string, Arg> share =
          trainer.shard({{"idx", b.inputs}, {"targets", b.targets}});
      total += trainer.run(evalGraph, share)[0].data<float>()[0];
      tokens += double(share.at("targets").tensor.numel());
    }
    // A process's share of a batch may hold fewer rows than another's.
    return {total / double(o.evalBatches), tokens};
  };

  std::map<std::string, std::string> info = describe(o, data.vocab());
  if (o.sampleOnly) {
    // Same tensor shapes do not make the same model (the number of heads,
    // the vocabulary): loadCheckpoint compares the recorded settings.
    loadCheckpoint(o.checkpoint, trainer.parameters(), nullptr, &info);
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
    hooks.info = info;
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
    run.inputs = {{"--data", o.data}};
    fmt::print("training: {} steps of {} x {} characters, AdamW, {}\n", o.steps,
               o.batch, o.context, run.schedule.describe());
    TrainingResult result = runTraining(run, hooks);
    if (result.validationLoss) {
      fmt::print("validation loss {:.4f} nats/char after {} steps ({:.0f} s "
                 "of training)\n",
                 *result.validationLoss, o.steps, result.seconds);
    }
  }

  if (o.sample > 0 && trainer.communicator().rank() == 0) {
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
