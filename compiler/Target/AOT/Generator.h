//===- Generator.h - The main() of a model generator program ----*- C++ -*-===//
//
// How a DSL model reaches kiln-compile: a small program builds the model with
// the DSL and hands it to generatorMain(), which writes its kiln IR (with a
// training step when asked). kiln_add_model() in CMake builds and runs that
// program, then kiln-compile, as part of a normal build.
//
//   int main(int argc, char **argv) {
//     kiln::dsl::Module module;
//     kiln::dsl::models::addGptLoss(module, config);
//     return kiln::generatorMain(argc, argv, module,
//                                {.lossGraph = "loss", .optimizer = adamw});
//   }
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_AOT_GENERATOR_H
#define KILN_COMPILER_TARGET_AOT_GENERATOR_H

#include "compiler/Target/Common/TrainingStep.h"

#include <string>

namespace kiln {
namespace dsl {
class Module;
} // namespace dsl

struct GeneratorOptions {
  /// When set, the IR also gets "train_step" for this loss graph.
  std::string lossGraph;
  OptimizerConfig optimizer;
};

/// Writes `module`'s IR to the path after `-o` (standard output without
/// one). Returns the process exit code; errors are printed, never thrown.
int generatorMain(int argc, char **argv, const dsl::Module &module,
                  const GeneratorOptions &options = {});

} // namespace kiln

#endif // KILN_COMPILER_TARGET_AOT_GENERATOR_H
