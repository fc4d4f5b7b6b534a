//===- shakespeare.cpp - Train a character-level GPT on Tiny Shakespeare --===//
//
// Builds a GPT-2 style decoder with the DSL, compiles its whole training step
// (forward, loss, backward, AdamW) with the JIT, trains it on random windows
// of Tiny Shakespeare with a warm-up + cosine schedule, evaluates on the
// held-out 10%, checkpoints atomically (resumable with --resume) and prints a
// sample generated with the key/value cache. --sample-only samples from a
// checkpoint without training. Run with --help for the options; under
// `mpirun -np N` it trains data-parallel. The same model compiled ahead of
// time: examples/shakespeare-aot.
//
//===----------------------------------------------------------------------===//

#include "Model.h"

#include "../common/World.h"

using namespace kiln;
using namespace kiln::shakespeare;

int main(int argc, char **argv) try {
  std::shared_ptr<Communicator> world = examples::exampleWorld(&argc, &argv);
  Options o = parseOptions(argc, argv, kUsage, Program::jit,
                           world->rank() == 0);
  // Before the corpus is read: a precision this CPU cannot run.
  if (std::string why = precisionError(o.precision); !why.empty()) {
    throw Error("--precision: " + why);
  }
  CharDataset data = loadCorpus(o);
  if (o.sampleOnly) {
    adoptCheckpointConfig(o);
  }
  dsl::Module module;
  buildModel(module, o, data.vocab().size());
  fmt::print("model: GPT, vocab {}, d_model {}, {} layers, {} heads, context "
             "{}, dropout {}, precision {}\n",
             data.vocab().size(), o.dModel, o.layers, o.heads, o.context,
             o.dropout, o.precision);
  JitOptions jitOptions;
  jitOptions.precision = o.precision;
  auto jit = compileTraining(module, "loss", optimizer(o), jitOptions,
                             stepKindFor(*world));
  fmt::print("{} parameters; compiled in {:.1f} s (MLIR {:.1f} s, LLVM {:.1f} "
             "s)\n",
             module.numParameters(),
             jit->pipelineSeconds() + jit->codegenSeconds(),
             jit->pipelineSeconds(), jit->codegenSeconds());
  run(o, jit, data, world);
  return 0;
} catch (const std::exception &e) { // kiln::Error, or bad_alloc and the like
  return examples::failExample(e);
}
