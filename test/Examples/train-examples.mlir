// The training examples, shrunk to seconds: they train, evaluate, write a
// CSV log and checkpoints, resume, sample from a checkpoint, refuse a
// corrupted one, and translate.
// RUN: rm -rf %t && mkdir -p %t
// RUN: kiln-example-shakespeare --steps 20 --batch 4 --context 16 --d-model 32 --layers 1 --heads 2 --warmup 5 --eval-every 10 --eval-batches 2 --sample 40 --checkpoint %t/ckpt.safetensors --csv %t/log.csv | FileCheck %s --check-prefix=TRAIN
// RUN: wc -l < %t/log.csv | FileCheck %s --check-prefix=ROWS20
// RUN: kiln-example-shakespeare --steps 30 --batch 4 --context 16 --d-model 32 --layers 1 --heads 2 --warmup 5 --eval-every 10 --eval-batches 2 --sample 0 --checkpoint %t/ckpt.safetensors --csv %t/log.csv --resume | FileCheck %s --check-prefix=RESUME
// RUN: wc -l < %t/log.csv | FileCheck %s --check-prefix=ROWS30
// RUN: kiln-example-shakespeare --sample-only --sample 30 --temperature 0 --checkpoint %t/ckpt.safetensors | FileCheck %s --check-prefix=SAMPLE
// Same tensor shapes, another model: other heads, or a corpus whose
// alphabet has the same size but other characters.
// RUN: not kiln-example-shakespeare --steps 40 --batch 4 --context 16 --d-model 32 --layers 1 --heads 4 --eval-every 10 --eval-batches 2 --sample 0 --checkpoint %t/ckpt.safetensors --resume 2>&1 | FileCheck %s --check-prefix=HEADS
// RUN: tr 'a' '~' < %kiln_src/examples/data/tinyshakespeare.txt > %t/other.txt
// RUN: not kiln-example-shakespeare --sample-only --data %t/other.txt --checkpoint %t/ckpt.safetensors 2>&1 | FileCheck %s --check-prefix=VOCAB
// RUN: printf 'garbage' > %t/bad.safetensors
// RUN: not kiln-example-shakespeare --sample-only --checkpoint %t/bad.safetensors 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not kiln-example-shakespeare --steps x 2>&1 | FileCheck %s --check-prefix=FLAG
// RUN: kiln-example-translate --epochs 1 --d-model 32 --layers 1 --heads 2 --d-ff 64 --warmup 20 --show 2 | FileCheck %s --check-prefix=TRANSLATE

// TRAIN: model: GPT, vocab 65, d_model 32, 1 layers, 2 heads, context 16
// TRAIN: training: 20 steps of 4 x 16 characters, AdamW, warmup-cosine(peak=0.003, warmup=5, total=20, min=0.0003)
// TRAIN: step  1/20 | loss {{[0-9.]+}} | lr 6.00e-04 | {{.*}} tok/s | {{.*}} | ETA
// TRAIN: step 10: validation loss {{[0-9.]+}}
// TRAIN: step 20/20 | loss
// TRAIN: step 20: validation loss
// TRAIN: validation loss {{[0-9.]+}} nats/char after 20 steps
// TRAIN: --- sample (temperature 0.8, top-k 0) ---
// TRAIN-NEXT: ROMEO:
// TRAIN: ---

// The header and one row per step.
// ROWS20: 21
// RESUME: resumed from {{.*}}ckpt.safetensors at step 20
// RESUME-NOT: step  1/30
// RESUME: step 21/30
// RESUME: step 30: validation loss
// ROWS30: 31

// HEADS: error: {{.*}}ckpt.safetensors: not a usable Kiln checkpoint: it was saved with heads = '2', this run has '4'
// VOCAB: error: {{.*}}ckpt.safetensors: not a usable Kiln checkpoint: it was saved with vocab = '{{[0-9a-f]+}}', this run has '{{[0-9a-f]+}}'
// SAMPLE: loaded {{.*}}ckpt.safetensors
// SAMPLE: --- sample (temperature 0, top-k 0) ---
// BAD: error: {{.*}}bad.safetensors
// FLAG: error: --steps needs a number, got 'x'

// TRANSLATE: 4500 training pairs, 500 held out
// TRANSLATE: training: 1 epochs of 141 steps
// TRANSLATE: held-out token accuracy: {{[0-9.]+}}% (baseline, always '{{.+}}': {{[0-9.]+}}%)
// TRANSLATE: reference:
// TRANSLATE-NEXT: kiln:
