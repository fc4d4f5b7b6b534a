// kiln-check-lowered reports what a pipeline left behind.
// RUN: kiln-opt %s -split-input-file -verify-diagnostics -kiln-check-lowered=stage=linalg

// A kiln op left at the linalg stage.
func.func @kiln_left(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.relu' op was not lowered to linalg}}
  %0 = kiln.relu %x : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// The GPU kernel ops stay for kiln-gpu-kernels in code compiled for a GPU.
module attributes {kiln.target = #kiln.target<cpu = "x86-64", features = "", l1DataBytes = 32768, l2Bytes = 524288, gpu = "sm_90">} {
  func.func @kernel_for_gpu(%q: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
    %0 = kiln.flash_attention ins(%q, %q, %q : tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) outs(%q : tensor<?x?x8xf32>) {num_heads = 2 : i64, num_kv_heads = 2 : i64} -> tensor<?x?x8xf32>
    return %0 : tensor<?x?x8xf32>
  }
}

// -----

// Elsewhere (CPU code, or no target) they are refused by name.
func.func @kernel_for_cpu(%q: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  // expected-error @+1 {{'kiln.flash_attention' op was not lowered to linalg (a GPU kernel op: only code compiled for a GPU, kiln-to-gpu, takes it)}}
  %0 = kiln.flash_attention ins(%q, %q, %q : tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) outs(%q : tensor<?x?x8xf32>) {num_heads = 2 : i64, num_kv_heads = 2 : i64} -> tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}
