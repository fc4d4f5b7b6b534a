// The examples refuse bad input with a clear error before they compile
// anything: sizes out of range, non-finite or huge reals, heads that do not
// divide the width, data that is no text file or too short, checkpoints
// whose metadata is forged, a prompt outside the vocabulary, and outputs
// that would overwrite the corpus or each other.
// RUN: rm -rf %t && mkdir -p %t
// RUN: not kiln-example-translate --batch 0 2>&1 | FileCheck %s --check-prefix=BATCH
// RUN: not kiln-example-translate --heads 3 2>&1 | FileCheck %s --check-prefix=THEADS
// RUN: not kiln-example-translate --data %t 2>&1 | FileCheck %s --check-prefix=DIR
// RUN: not kiln-example-shakespeare --data /dev/zero 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not kiln-shakespeare-train --data /dev/zero 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not kiln-example-shakespeare --lr 1e39 2>&1 | FileCheck %s --check-prefix=LR
// RUN: not kiln-shakespeare-train --lr -1 2>&1 | FileCheck %s --check-prefix=NEGLR
// RUN: not kiln-example-shakespeare --weight-decay nan 2>&1 | FileCheck %s --check-prefix=DECAY
// RUN: not kiln-example-shakespeare --precision fp16 2>&1 | FileCheck %s --check-prefix=PRECISION
// RUN: not kiln-example-shakespeare --eval-batches 0 2>&1 | FileCheck %s --check-prefix=EVAL
// RUN: not kiln-example-shakespeare --layers 100000 2>&1 | FileCheck %s --check-prefix=LAYERS
// RUN: not kiln-example-shakespeare --heads 3 2>&1 | FileCheck %s --check-prefix=HEADS
// RUN: printf 'a' > %t/one.txt
// RUN: not kiln-example-shakespeare --data %t/one.txt 2>&1 | FileCheck %s --check-prefix=SHORT
// RUN: printf 'ab\000cd' > %t/binary.txt
// RUN: not kiln-example-shakespeare --data %t/binary.txt 2>&1 | FileCheck %s --check-prefix=BINARY
// RUN: printf '' > %t/empty.txt
// RUN: not kiln-example-shakespeare --data %t/empty.txt 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: not kiln-example-shakespeare --steps 1 --prompt 'ROMEO~' 2>&1 | FileCheck %s --check-prefix=PROMPT
// RUN: cp %S/../../examples/data/tinyshakespeare.txt %t/corpus.txt
// RUN: not kiln-example-shakespeare --data %t/corpus.txt --csv %t/corpus.txt 2>&1 | FileCheck %s --check-prefix=CSVDATA
// RUN: not kiln-shakespeare-train --data %t/corpus.txt --checkpoint %t/../%basename_t.tmp/corpus.txt 2>&1 | FileCheck %s --check-prefix=CKPTDATA
// RUN: not kiln-example-shakespeare --data %t/corpus.txt --resume --csv %t/c.safetensors --checkpoint %t/c.safetensors 2>&1 | FileCheck %s --check-prefix=CSVCKPT
// RUN: not kiln-example-translate --data %t/corpus.txt --csv %t/corpus.txt 2>&1 | FileCheck %s --check-prefix=TCSV
// RUN: cmp %t/corpus.txt %S/../../examples/data/tinyshakespeare.txt
// RUN: %python %S/Inputs/header-only-checkpoint.py %t/huge.safetensors format=kiln-checkpoint format_version=1 step=1 info.d_model=32 info.layers=1000000 info.heads=2 info.context=16
// RUN: not kiln-example-shakespeare --sample-only --checkpoint %t/huge.safetensors 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: %python %S/Inputs/header-only-checkpoint.py %t/forged.safetensors format=kiln-checkpoint format_version=1 step=1 info.d_model=4096 info.layers=64 info.heads=2 info.context=4096
// RUN: not kiln-example-shakespeare --sample-only --checkpoint %t/forged.safetensors 2>&1 | FileCheck %s --check-prefix=FORGED

// BATCH: error: --batch must be between 1 and 65536, got 0
// THEADS: error: --heads 3 does not divide --d-model 128
// DIR: error: cannot read '{{.*}}': it is a directory
// ZERO: error: cannot read '/dev/zero': it is not a regular file
// LR: error: --lr must be a finite number between 0 and 10000, got 1e39
// NEGLR: error: --lr must be a finite number between 0 and 10000, got -1
// DECAY: error: --weight-decay must be a finite number between 0 and 10000, got nan
// PRECISION: --precision: precision 'fp16' is not a CPU precision: use fp32 (the default) or bf16
// EVAL: error: --eval-batches must be between 1 and 16777216, got 0
// LAYERS: error: --layers must be between 1 and 1024, got 100000
// HEADS: error: the options: 3 heads do not divide d_model 128
// SHORT: error: {{.*}}one.txt: the train split has 0 characters, too few for windows of 64 (each needs 65)
// BINARY: error: {{.*}}binary.txt: a NUL byte at offset 2: this is a binary file, not text
// EMPTY: error: '{{.*}}empty.txt' is empty
// PROMPT: error: --prompt: CharVocab::encode: character '~' at position 5 is not in the vocabulary of 65 characters
// CSVDATA: error: --data '{{.*}}corpus.txt' and --csv '{{.*}}corpus.txt' name the same file: one would overwrite the other
// CKPTDATA: error: --data '{{.*}}corpus.txt' and --checkpoint '{{.*}}corpus.txt' name the same file
// CSVCKPT: error: --csv '{{.*}}c.safetensors' and --checkpoint '{{.*}}c.safetensors' name the same file
// TCSV: error: --data '{{.*}}corpus.txt' and --csv '{{.*}}corpus.txt' name the same file
// HUGE: error: {{.*}}huge.safetensors: its metadata says layers = 1000000, not between 1 and 1024
// FORGED: error: {{.*}}forged.safetensors: its tensors are not those of the model its metadata describes (d_model 4096, 64 layers, context 4096)
