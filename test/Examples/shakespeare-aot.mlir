// The ahead-of-time Shakespeare binaries: they train, checkpoint and sample;
// greedy samples equal the JIT example's from the same checkpoint; a
// checkpoint of another shape, or of another number of heads, is refused; and they link no LLVM or MLIR.
// RUN: rm -rf %t && mkdir -p %t
// RUN: kiln-shakespeare-train --steps 20 --batch 4 --warmup 5 --eval-every 10 --eval-batches 2 --sample 40 --checkpoint %t/ckpt.safetensors | FileCheck %s --check-prefix=TRAIN
// RUN: kiln-shakespeare-generate --checkpoint %t/ckpt.safetensors --sample 60 --temperature 0 > %t/aot.txt
// RUN: FileCheck %s --check-prefix=GEN < %t/aot.txt
// RUN: kiln-example-shakespeare --sample-only --checkpoint %t/ckpt.safetensors --sample 60 --temperature 0 | sed -n '/^loaded/,$p' > %t/jit.txt
// RUN: diff %t/aot.txt %t/jit.txt
// RUN: kiln-example-shakespeare --steps 2 --batch 2 --context 16 --d-model 32 --layers 1 --heads 2 --eval-every 1 --eval-batches 1 --sample 0 --checkpoint %t/small.safetensors
// RUN: not kiln-shakespeare-generate --checkpoint %t/small.safetensors 2>&1 | FileCheck %s --check-prefix=WRONG
// RUN: kiln-example-shakespeare --steps 1 --batch 2 --heads 8 --eval-every 1 --eval-batches 1 --sample 0 --checkpoint %t/heads8.safetensors
// RUN: not kiln-shakespeare-generate --checkpoint %t/heads8.safetensors 2>&1 | FileCheck %s --check-prefix=HEADS
// RUN: not kiln-shakespeare-train --d-model 64 2>&1 | FileCheck %s --check-prefix=FLAG
// RUN: not kiln-shakespeare-generate --steps 10 2>&1 | FileCheck %s --check-prefix=GENFLAG
// RUN: llvm-readelf -d %kiln_obj/examples/kiln-shakespeare-train | FileCheck %s --check-prefix=DEPS
// RUN: llvm-readelf -d %kiln_obj/examples/kiln-shakespeare-generate | FileCheck %s --check-prefix=DEPS
// RUN: llvm-nm --undefined-only %kiln_obj/examples/kiln-shakespeare-train | FileCheck %s --check-prefix=UNDEF
// RUN: llvm-nm --undefined-only %kiln_obj/examples/kiln-shakespeare-generate | FileCheck %s --check-prefix=UNDEF

// TRAIN: training: 20 steps of 4 x 64 characters, AdamW
// TRAIN: step 10: validation loss {{[0-9.]+}}
// TRAIN: step 20: validation loss {{[0-9.]+}}
// TRAIN: --- sample (temperature 0.8, top-k 0) ---

// GEN: loaded {{.*}}ckpt.safetensors
// GEN-NEXT: --- sample (temperature 0, top-k 0) ---
// GEN-NEXT: ROMEO:

// WRONG: error: {{.*}}small.safetensors: not a usable Kiln checkpoint: it was saved with context = '16', this run has '64'

// HEADS: error: {{.*}}heads8.safetensors: not a usable Kiln checkpoint: it was saved with heads = '8', this run has '4'

// FLAG: error: unknown option '--d-model' (see --help)

// GENFLAG: error: unknown option '--steps' (see --help)

// DEPS: libomp.so.5
// DEPS-NOT: libLLVM
// DEPS-NOT: libMLIR
// UNDEF-NOT: {{llvm|mlir}}
