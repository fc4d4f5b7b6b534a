// kiln-attach-gpu-target: the architecture the module's kiln.target names
// is attached to every GPU module (as nvvm-attach-target does, at O3); a
// module whose target names no GPU, or that has no target, is refused with
// how to set one.
// RUN: kiln-opt %s -kiln-attach-gpu-target --split-input-file -verify-diagnostics | FileCheck %s

// CHECK-LABEL: module attributes {{{.*}}kiln.target = #kiln.target<{{.*}}gpu = "sm_80">
// CHECK:       gpu.module @a [#nvvm.target<O = 3, chip = "sm_80">]
// CHECK:       gpu.module @b [#nvvm.target<O = 3, chip = "sm_80">]
module attributes {gpu.container_module, kiln.target = #kiln.target<cpu = "x86-64-v3", features = "+avx2", l1DataBytes = 32768, l2Bytes = 524288, gpu = "sm_80">} {
  gpu.module @a {
  }
  gpu.module @b {
  }
}

// -----

// expected-error @+1 {{kiln-attach-gpu-target: the module's kiln.target names no GPU architecture: run kiln-set-target{gpu=sm_90} first (kiln-to-gpu does)}}
module attributes {gpu.container_module, kiln.target = #kiln.target<cpu = "x86-64-v3", features = "+avx2", l1DataBytes = 32768, l2Bytes = 524288>} {
  gpu.module @a {
  }
}

// -----

// expected-error @+1 {{kiln-attach-gpu-target: the module's kiln.target names no GPU architecture}}
module attributes {gpu.container_module} {
  gpu.module @a {
  }
}
