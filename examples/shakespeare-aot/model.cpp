//===- model.cpp - The generator of the ahead-of-time Shakespeare model ---===//
//
// kiln_add_model(shakespeare-model GENERATOR model.cpp) builds and runs this
// program at build time: it writes the kiln IR of the Shakespeare example's
// default model (d_model 128, 4 layers, 4 heads, context 64) with its AdamW
// training step, which kiln-compile then compiles ahead of time.
//
//===----------------------------------------------------------------------===//

#include "../shakespeare/Model.h"

#include <kiln/kiln.h>

int main(int argc, char **argv) try {
  using namespace kiln;
  shakespeare::Options o; // the defaults, which the AOT binaries assume
  CharDataset data = CharDataset::fromFile(o.data);
  dsl::Module module;
  shakespeare::buildModel(module, o, data.vocab().size());
  return generatorMain(
      argc, argv, module,
      {.lossGraph = "loss", .optimizer = shakespeare::optimizer(o)});
} catch (const std::exception &e) { // kiln::Error, or bad_alloc and the like
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
