//===- generate.cpp - Sample from a Shakespeare checkpoint, AOT-compiled --===//
//
// A standalone text-generation binary: loads a safetensors checkpoint of the
// Shakespeare GPT (written by kiln-shakespeare-train or by the JIT example
// with its default shape) and prints samples, with the cached decoder
// compiled ahead of time. Links only Kiln's runtime.
//
//===----------------------------------------------------------------------===//

#include "AotMain.h"

static const char *kGenerateUsage =
    R"(usage: kiln-shakespeare-generate [options]
Prints a sample of the Shakespeare GPT from a checkpoint (d_model 128,
4 layers, 4 heads, context 64: kiln-shakespeare-train, or make run).
  --checkpoint PATH  the checkpoint (shakespeare.ckpt.safetensors)
  --sample N         characters to generate (500)
  --temperature X    sampling temperature (0.8; 0 = greedy)
  --top-k N          sample among the N most likely characters (0 = all)
  --prompt TEXT      the start of the sample ("ROMEO:")
  --data PATH        the text whose characters are the vocabulary
  --seed N           sampling seed (1)
)";

int main(int argc, char **argv) {
  return aotMain(argc, argv, kGenerateUsage,
                 kiln::shakespeare::Program::aotGenerate);
}
