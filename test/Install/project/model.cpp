// The generator: builds a small GPT with the DSL, with an SGD training step.
#include "compiler/DSL/DSL.h"
#include "compiler/DSL/Models.h"
#include "compiler/Target/AOT/Generator.h"

int main(int argc, char **argv) {
  kiln::dsl::models::GptConfig config;
  config.vocabSize = 11;
  config.dModel = 8;
  config.numHeads = 2;
  config.numLayers = 1;
  config.dFF = 16;
  config.maxSeqLen = 6;
  kiln::dsl::Module module;
  kiln::dsl::models::addGptForward(module, config);
  kiln::dsl::models::addGptLoss(module, config);
  return kiln::generatorMain(
      argc, argv, module, {.lossGraph = "loss", .optimizer = {.kind = "sgd"}});
}
