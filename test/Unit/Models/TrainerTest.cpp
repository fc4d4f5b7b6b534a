//===- TrainerTest.cpp - Compiled training steps of DSL models ------------===//
//
// kiln::Trainer on the DSL's GPT: the loss of a fixed batch falls; inputs are
// bound by name; the optimizer state has one entry per parameter moment.
//
//===----------------------------------------------------------------------===//

#include "../JIT/Reference.h"

#include "compiler/DSL/DSL.h"
#include "compiler/DSL/Models.h"
#include "compiler/Target/JIT/Training.h"
#include "runtime/Data.h"
#include "runtime/Error.h"
#include "runtime/TrainingLoop.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include <unistd.h>

using namespace kiln;

namespace {
/// A one-layer GPT: vocabulary 13, d_model 16, 2 heads, context 8.
dsl::models::GptConfig tinyGpt() {
  dsl::models::GptConfig config;
  config.vocabSize = 13;
  config.dModel = 16;
  config.numHeads = 2;
  config.numLayers = 1;
  config.dFF = 32;
  config.maxSeqLen = 8;
  return config;
}
} // namespace

TEST(Trainer, GptLossFallsOnAFixedBatch) {
  dsl::Module module;
  dsl::models::addGptLoss(module, tinyGpt());
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

namespace {
/// Rank 0 of two processes holding the same values (sums double).
class TwinWorld final : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void allReduceSum(float *data, size_t count) override {
    for (size_t i = 0; i < count; ++i) {
      data[i] *= 2.0f;
    }
  }
  void broadcast(void *, size_t, int) override {}
  std::vector<uint64_t> allGather(uint64_t value) override {
    return {value, value};
  }
  void barrier() override {}
  [[noreturn]] void abort(const std::string &message, int) override {
    throw Error(message);
  }
};
} // namespace

// The data-parallel step (grad_step, the sums, update_step) of one process,
// and of a process whose twin trained on the same rows, gives the fused
// step's losses and parameters; a model without it cannot train on several
// processes.
TEST(Trainer, SplitStepsMatchTheFusedStep) {
  dsl::Module module;
  dsl::models::addGptLoss(module, tinyGpt());
  OptimizerConfig adamw;
  adamw.weightDecay = 0.01;
  adamw.clipNorm = 0.5;
  auto fusedStep = compileTraining(module, "loss", adamw);
  auto splitStep = compileTraining(module, "loss", adamw, {}, StepKind::split);
  EXPECT_FALSE(splitStep->contains("train_step"));
  const FunctionSpec &grad = splitStep->spec("grad_step");
  ASSERT_TRUE(grad.lossTokens); // a mean cross-entropy over "targets"
  EXPECT_EQ(grad.args[size_t(grad.lossTokens->arg)].name, "targets");
  EXPECT_FALSE(grad.lossTokens->ignoreIndex);

  Trainer fused(fusedStep, 1), split(splitStep, 1);
  // With twin processes each runs on the first half of every batch: give
  // them batches whose halves are equal, so the sum over both is the whole.
  Trainer twin(splitStep, 1, std::make_shared<TwinWorld>());
  for (int step = 1; step <= 4; ++step) {
    Tensor half = ref::randomIds({2, 8}, 13, 10 + step),
           halfTargets = ref::randomIds({2, 8}, 13, 20 + step);
    std::vector<int64_t> ids = half.toVector<int64_t>(),
                         targets = halfTargets.toVector<int64_t>();
    ids.insert(ids.end(), ids.begin(), ids.end());
    targets.insert(targets.end(), targets.begin(), targets.end());
    std::map<std::string, Arg> batch = {
        {"idx", Tensor::fromVector<int64_t>({4, 8}, ids)},
        {"targets", Tensor::fromVector<int64_t>({4, 8}, targets)}};
    float a = fused.step(batch, 3e-3f), b = split.step(batch, 3e-3f),
          c = twin.step(batch, 3e-3f);
    EXPECT_NEAR(b, a, 1e-5f * std::abs(a)) << "step " << step;
    EXPECT_NEAR(c, a, 1e-5f * std::abs(a)) << "step " << step;
  }
  for (const auto &[name, tensor] : fused.parameters().namedTensors()) {
    std::vector<float> want = tensor.toVector<float>();
    std::vector<float> got = split.parameters().get(name).toVector<float>();
    std::vector<float> twins = twin.parameters().get(name).toVector<float>();
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-5) << name << "[" << i << "]";
      ASSERT_NEAR(twins[i], want[i], 1e-5) << name << "[" << i << "]";
    }
  }
  try {
    Trainer parallel(fusedStep, 1, std::make_shared<TwinWorld>());
    ADD_FAILURE() << "expected an error";
  } catch (const kiln::Error &e) {
    EXPECT_NE(std::string(e.what()).find("over 2 processes needs a model "
                                         "compiled with a split step"),
              std::string::npos)
        << e.what();
  }
}

// A summed loss adds up over the processes: the twin of a process that
// trained on the same rows doubles its sum, as the fused step on both
// halves does (a mean would halve it again).
TEST(Trainer, SummedLossesAddUpOverProcesses) {
  dsl::Module module;
  dsl::Graph &graph = module.addGraph("loss");
  dsl::Var x = graph.input("x", {dsl::kDynamic, 4}, DType::f32);
  dsl::Var t = graph.input("t", {dsl::kDynamic}, DType::i64);
  dsl::Var w = graph.param("w", {3, 4}, Init::normal(0.0, 0.5));
  graph.finish({dsl::crossEntropy(dsl::linear(x, w), t,
                                  {.reduction = dsl::LossReduction::sum})});
  OptimizerConfig sgd;
  sgd.kind = "sgd";
  auto fusedStep = compileTraining(module, "loss", sgd);
  auto splitStep = compileTraining(module, "loss", sgd, {}, StepKind::split);
  const FunctionSpec &grad = splitStep->spec("grad_step");
  ASSERT_TRUE(grad.lossTokens);
  EXPECT_TRUE(grad.lossTokens->sum);
  Trainer fused(fusedStep, 3),
      twin(splitStep, 3, std::make_shared<TwinWorld>());
  for (int step = 1; step <= 3; ++step) {
    std::vector<float> half =
        ref::randomTensor({3, 4}, 40 + step).toVector<float>();
    std::vector<float> rows = half;
    rows.insert(rows.end(), half.begin(), half.end());
    std::map<std::string, Arg> batch = {
        {"x", Tensor::fromVector<float>({6, 4}, rows)},
        {"t", Tensor::fromVector<int64_t>({6}, {0, 2, 1, 0, 2, 1})}};
    float a = fused.step(batch, 0.05f), b = twin.step(batch, 0.05f);
    EXPECT_NEAR(b, a, 1e-5f * std::abs(a)) << "step " << step;
  }
  std::vector<float> want = fused.parameters().get("w").toVector<float>();
  std::vector<float> got = twin.parameters().get("w").toVector<float>();
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5) << i;
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
