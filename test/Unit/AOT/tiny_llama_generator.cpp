//===- tiny_llama_generator.cpp - Emits the AOT tests' Llama --------------===//

#include "TinyGpt.h"
#include "TinyLlama.h"

#include "compiler/Target/AOT/Generator.h"

int main(int argc, char **argv) {
  kiln::dsl::Module module;
  kiln::test::buildTinyLlama(module);
  return kiln::generatorMain(
      argc, argv, module,
      {.lossGraph = "loss", .optimizer = kiln::test::tinyGptOptimizer()});
}
