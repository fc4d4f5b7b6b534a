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
