//===- TinyGpt.h - The model the AOT tests compile both ways ----*- C++ -*-===//
//
// Built by tiny_gpt_generator.cpp (ahead of time, through kiln_add_model) and
// by AotTest.cpp (JIT), so the two compilers see the same module.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_AOT_TINYGPT_H
#define KILN_TEST_UNIT_AOT_TINYGPT_H

#include "compiler/DSL/DSL.h"
#include "compiler/DSL/Models.h"
#include "compiler/Target/JIT/Training.h"

namespace kiln::test {

inline dsl::models::GptConfig tinyGptConfig() {
  dsl::models::GptConfig config;
  config.vocabSize = 13;
  config.dModel = 16;
  config.numHeads = 2;
  config.numLayers = 2;
  config.dFF = 32;
  config.maxSeqLen = 8;
  config.dropout = 0.1;
  return config;
}

inline OptimizerConfig tinyGptOptimizer() {
  return {.kind = "adamw", .weightDecay = 0.1, .clipNorm = 1.0};
}

/// forward, decode, loss (training mode, with dropout) and eval_loss.
inline void buildTinyGpt(dsl::Module &module) {
  dsl::models::GptConfig config = tinyGptConfig();
  dsl::models::addGptForward(module, config);
  dsl::models::addGptDecode(module, config);
  dsl::models::addGptLoss(module, config, {.training = true});
  dsl::models::addGptLoss(module, config, {}, "eval_loss");
}

} // namespace kiln::test

#endif // KILN_TEST_UNIT_AOT_TINYGPT_H
