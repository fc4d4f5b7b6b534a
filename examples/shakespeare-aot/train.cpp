//===- train.cpp - Train the Shakespeare GPT with AOT-compiled code -------===//
//
// A standalone training binary: the model and its training step were compiled
// ahead of time (shakespeare.h); this program links only Kiln's runtime
// (no LLVM, no MLIR). It trains, evaluates, checkpoints and samples exactly as
// the JIT example does, on the model's compiled shape.
//
//===----------------------------------------------------------------------===//

#include "AotMain.h"

static const char *kTrainUsage =
    R"(usage: kiln-shakespeare-train [options]
Trains the ahead-of-time compiled Shakespeare GPT (d_model 128, 4 layers,
4 heads, context 64, AdamW with weight decay 0.1) and prints a sample.
  --steps N          optimizer steps (2500)   --batch N  windows per step (16)
  --lr X             peak learning rate (3e-3), linear warm-up then cosine
  --min-lr X         final learning rate (3e-4)  --warmup N  warm-up steps (100)
  --eval-every N     validation every N steps (250), on --eval-batches (40)
  --checkpoint PATH  checkpoint file (shakespeare.ckpt.safetensors); "" for none
  --resume           continue from --checkpoint if it exists
  --csv PATH         a CSV log of every step
  --sample N         characters to generate at the end (500)
  --temperature X    sampling temperature (0.8)  --top-k N  (0 = all)
  --prompt TEXT      the start of the sample ("ROMEO:")
  --data PATH        the text to train on     --seed N  seed (1)
)";

int main(int argc, char **argv) {
  return aotMain(argc, argv, kTrainUsage, kiln::shakespeare::Program::aotTrain);
}
