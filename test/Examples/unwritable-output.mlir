// A checkpoint directory that has become read-only stops training before it
// starts (the error names the file system); one that fills up stops the run
// when it saves. Either way the checkpoint that was there stays byte for byte
// and no temporary file is left. Each runs in a private mount namespace
// (a read-only bind mount, a small tmpfs).
// REQUIRES: mount-namespaces
// RUN: sh %S/Inputs/unwritable-output.sh %t %kiln_obj/examples/kiln-example-shakespeare | FileCheck %s

// CHECK-LABEL: read-only:
// CHECK-NEXT: exit 1
// CHECK-NEXT: error: {{.*}}/out/ckpt.safetensors: cannot save checkpoints there: the directory '{{.*}}/out' is not writable (Read-only file system)
// CHECK-NEXT: kept
// CHECK-NEXT: ckpt.safetensors
// CHECK-LABEL: full:
// CHECK-NEXT: exit 1
// CHECK: resumed from {{.*}}/full/ckpt.safetensors at step 5
// CHECK-NEXT: error: {{.*}}/full/ckpt.safetensors: cannot save: cannot write '{{.*}}/full/ckpt.safetensors.tmp': No space left on device
// CHECK-NEXT: kept
// CHECK-NEXT: ckpt.safetensors
// CHECK-NOT: tmp
