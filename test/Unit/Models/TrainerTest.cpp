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
#include "runtime/Error.h"

#include <gtest/gtest.h>

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
  Trainer trainer(module, "loss", adamw, /*seed=*/1);
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
  Trainer trainer(module, "loss", sgd);
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
