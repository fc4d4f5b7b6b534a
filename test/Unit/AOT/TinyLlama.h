//===- TinyLlama.h - The Llama the AOT tests compile both ways --*- C++ -*-===//
//
// Built by tiny_llama_generator.cpp (ahead of time, through kiln_add_model)
// and by AotTest.cpp (JIT), so the two compilers see the same module.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_AOT_TINYLLAMA_H
#define KILN_TEST_UNIT_AOT_TINYLLAMA_H

#include "compiler/DSL/DSL.h"
#include "compiler/DSL/Models.h"
#include "compiler/Target/JIT/Training.h"

namespace kiln::test {

/// 4 query heads over 2 key/value heads of 4, a tied head.
inline dsl::models::LlamaConfig tinyLlamaConfig() {
  dsl::models::LlamaConfig config;
  config.vocabSize = 13;
  config.dModel = 16;
  config.numHeads = 4;
  config.numKvHeads = 2;
  config.numLayers = 2;
  config.dFF = 40;
  config.maxSeqLen = 8;
  config.tiedHead = true;
  config.initStd = 0.3;
  return config;
}

/// forward, decode and loss.
inline void buildTinyLlama(dsl::Module &module) {
  dsl::models::LlamaConfig config = tinyLlamaConfig();
  dsl::models::addLlamaForward(module, config);
  dsl::models::addLlamaDecode(module, config);
  dsl::models::addLlamaLoss(module, config);
}

} // namespace kiln::test

#endif // KILN_TEST_UNIT_AOT_TINYLLAMA_H
