// Checked by gpu-kernels-tf32.mlir: kiln-gpu-kernels{math=tf32} refuses
// code compiled for a GPU without TF32 tensor cores, and code compiled for
// no GPU, before it changes anything.

module attributes {kiln.target = #kiln.target<cpu = "x86-64", features = "", l1DataBytes = 32768, l2Bytes = 1048576, gpu = "sm_75">} {
  // expected-error @below {{kiln-gpu-kernels: math tf32 (tensor cores, mma.sync) needs an NVIDIA GPU of sm_80 or newer, and the code is compiled for 'sm_75'}}
  func.func @turing(%a: memref<4x8xf32>, %b: memref<8x4xf32>, %c: memref<4x4xf32>) {
    linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x4xf32>) outs(%c : memref<4x4xf32>)
    return
  }
}

// -----

// expected-error @below {{kiln-gpu-kernels: math tf32 (tensor cores, mma.sync) needs an NVIDIA GPU of sm_80 or newer, and the code is compiled for no GPU architecture (kiln.target)}}
func.func @no_target(%a: memref<4x8xf32>, %b: memref<8x4xf32>, %c: memref<4x4xf32>) {
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x4xf32>) outs(%c : memref<4x4xf32>)
  return
}
