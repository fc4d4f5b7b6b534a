//===- TrainerTest.cpp - Compiled training steps of DSL models ------------===//
//
// kiln::Trainer on the DSL's GPT: the loss of a fixed batch falls; inputs are
// bound by name; the optimizer state has one entry per parameter moment.
//
//===----------------------------------------------------------------------===//

#include "../JIT/Reference.h"

#include "compiler/DSL/DSL.h"
#include "compiler/DSL/Models.h"
#include "compiler/Target/JIT/Trainer.h"
#include "runtime/Data.h"
#include "runtime/Error.h"
#include "runtime/TrainingLoop.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include <unistd.h>

using namespace kiln;

TEST(Trainer, GptLossFallsOnAFixedBatch) {
  dsl::models::GptConfig config;
  config.vocabSize = 13;
  config.dModel = 16;
  config.numHeads = 2;
  config.numLayers = 1;
  config.dFF = 32;
  config.maxSeqLen = 8;
  dsl::Module module;
  dsl::models::addGptLoss(module, config);
  OptimizerConfig adamw;
  adamw.weightDecay = 0.01;
  adamw.clipNorm = 1.0;
  Trainer trainer(compileTraining(module, "loss", adamw), /*seed=*/1);
  EXPECT_EQ(trainer.state().size(), 2 * trainer.parameters().size());
  Tensor idx = ref::randomIds({4, 8}, 13, 2),
         targets = ref::randomIds({4, 8}, 13, 3);
  float first = trainer.step({{"idx", idx}, {"targets", targets}}, 3e-3f);
  float last = first;
  for (int i = 0; i < 60; ++i) {
    last = trainer.step({{"idx", idx}, {"targets", targets}}, 3e-3f);
  }
  EXPECT_EQ(trainer.steps(), 61);
  EXPECT_NEAR(first, std::log(13.0), 0.3); // ~uniform at initialization
  EXPECT_LT(last, 0.5f * first) << first << " -> " << last;
  try {
    trainer.step({{"idx", idx}}, 1e-3f);
    ADD_FAILURE() << "expected an error";
  } catch (const kiln::Error &e) {
    EXPECT_NE(std::string(e.what()).find("needs the input 'targets'"),
              std::string::npos);
  }
}

TEST(Trainer, ANonFiniteLossStopsWithTheStep) {
  // loss = mean(log(w)) with w < 0: NaN on the first step.
  dsl::Module module;
  dsl::Graph &graph = module.addGraph("loss");
  dsl::Var x = graph.input("x", {4}, DType::f32);
  dsl::Var w = graph.param("w", {4}, Init::constant(-1.0));
  graph.finish(
      {dsl::reduce(dsl::log(dsl::mul(w, x)), dsl::Reduction::mean, {0})});
  OptimizerConfig sgd;
  sgd.kind = "sgd";
  Trainer trainer(compileTraining(module, "loss", sgd));
  Tensor before = trainer.parameters().get("w").clone();
  try {
    trainer.step({{"x", Tensor::full({4}, 1.0f)}}, 0.1f);
    ADD_FAILURE() << "expected an error";
  } catch (const kiln::Error &e) {
    EXPECT_NE(std::string(e.what()).find("at step 1"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(trainer.steps(), 0);
  EXPECT_EQ(trainer.parameters().get("w").toVector<float>(),
            before.toVector<float>());
}

namespace {
/// A GPT with dropout (so resume must reproduce the masks), trained by
/// runTraining on random windows of a small text.
struct TinyRun {
  explicit TinyRun(const std::string &checkpoint)
      : data(CharDataset::fromText(
            "the quick brown fox jumps over the lazy dog; "
            "pack my box with five dozen liquor jugs. ",
            0.8)) {
    config.vocabSize = data.vocab().size();
    config.dModel = 16;
    config.numHeads = 2;
    config.numLayers = 1;
    config.dFF = 32;
    config.maxSeqLen = 8;
    config.dropout = 0.1;
    dsl::models::addGptLoss(module, config, {.training = true});
    OptimizerConfig adamw;
    adamw.weightDecay = 0.01;
    adamw.clipNorm = 1.0;
    trainer = std::make_unique<Trainer>(compileTraining(module, "loss", adamw),
                                        /*seed=*/9);
    options.steps = 12;
    options.schedule = LrSchedule::warmupCosine(1e-2, 3, 12);
    options.checkpointPath = checkpoint;
    options.checkpointEvery = 5;
    options.out = nullptr;
  }
  TrainingHooks hooks() {
    TrainingHooks h = trainer->hooks([this](int64_t) {
      Batch b = data.sample(Split::train, 3, 8, rng);
      return std::map<std::string, Arg>{{"idx", b.inputs},
                                        {"targets", b.targets}};
    });
    h.rngs["data"] = &rng;
    return h;
  }
  CharDataset data;
  dsl::models::GptConfig config;
  dsl::Module module;
  std::unique_ptr<Trainer> trainer;
  Rng rng{4};
  TrainingOptions options;
};
} // namespace

TEST(Trainer, ResumeReproducesTheUninterruptedRunBitForBit) {
  std::string dir = ::testing::TempDir();
  std::string checkpoint =
      dir + "/kiln-resume-" + std::to_string(::getpid()) + ".safetensors";
  std::remove(checkpoint.c_str());

  TinyRun whole(dir + "/kiln-resume-whole-" + std::to_string(::getpid()) +
                ".safetensors");
  std::vector<float> uninterrupted =
      runTraining(whole.options, whole.hooks()).losses;
  ASSERT_EQ(uninterrupted.size(), 12u);

  // A run that dies during step 8, after the checkpoint of step 5.
  TinyRun first(checkpoint);
  TrainingHooks dying = first.hooks();
  auto step = dying.step;
  dying.step = [step](int64_t s, float lr) -> float {
    if (s == 8) {
      throw Error("killed");
    }
    return step(s, lr);
  };
  EXPECT_THROW(runTraining(first.options, dying), Error);

  TinyRun second(checkpoint); // a new process: fresh parameters and data
  second.options.resume = true;
  TrainingResult resumed = runTraining(second.options, second.hooks());
  EXPECT_EQ(resumed.resumedFrom, 5);
  EXPECT_EQ(second.trainer->steps(), 12);
  ASSERT_EQ(resumed.losses.size(), 7u);
  for (size_t i = 0; i < resumed.losses.size(); ++i) {
    EXPECT_EQ(resumed.losses[i], uninterrupted[5 + i]) << "step " << 6 + i;
  }
  for (const auto &[name, tensor] :
       whole.trainer->parameters().namedTensors()) {
    EXPECT_EQ(second.trainer->parameters().get(name).toVector<float>(),
              tensor.toVector<float>())
        << name;
  }

  // A corrupted checkpoint is refused with the file named, and the run's
  // parameters stay as they were.
  {
    std::fstream file(checkpoint,
                      std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(10);
    file.put('\x7f');
  }
  TinyRun third(checkpoint);
  std::vector<float> before =
      third.trainer->parameters().get("wte.weight").toVector<float>();
  third.options.resume = true;
  try {
    runTraining(third.options, third.hooks());
    ADD_FAILURE() << "expected the corrupted checkpoint to be refused";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find(checkpoint), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(third.trainer->parameters().get("wte.weight").toVector<float>(),
            before);
  std::remove(checkpoint.c_str());
}
