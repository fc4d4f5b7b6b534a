// The custom training loop of docs/training.md ("Writing your own loop")
// runs: 10 steps with an evaluation and a checkpoint half-way; a second run
// with more steps resumes from it.
// RUN: rm -rf %t && mkdir -p %t
// RUN: kiln-example-custom-loop 10 %t | FileCheck %s --check-prefix=FIRST
// RUN: kiln-example-custom-loop 14 %t | FileCheck %s --check-prefix=SECOND

// FIRST: step 5: validation loss
// FIRST: step 10: validation loss
// FIRST: resumed from step 0, ran 10 steps, validation loss
// FIRST: sample: ROMEO:
// SECOND: resumed from {{.*}}run.ckpt.safetensors at step 10
// SECOND: resumed from step 10, ran 4 steps
