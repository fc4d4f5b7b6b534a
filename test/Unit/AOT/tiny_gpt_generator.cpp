//===- tiny_gpt_generator.cpp - Emits the AOT tests' model ----------------===//

#include "TinyGpt.h"

#include "compiler/Target/AOT/Generator.h"

int main(int argc, char **argv) {
  kiln::dsl::Module module;
  kiln::test::buildTinyGpt(module);
  return kiln::generatorMain(
      argc, argv, module,
      {.lossGraph = "loss", .optimizer = kiln::test::tinyGptOptimizer()});
}
