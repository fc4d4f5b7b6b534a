// At the llvm stage, anything outside the LLVM dialect is reported, but for
// what is translated to LLVM IR with it: OpenMP regions, GPU binaries and
// their launches on LLVM values.
// RUN: kiln-opt %s -split-input-file -verify-diagnostics -kiln-check-lowered=stage=llvm

// expected-error @+1 {{'func.func' op was not lowered to llvm}}
func.func @not_lowered() {
  // expected-error @+1 {{'func.return' op was not lowered to llvm}}
  return
}

// -----

// The output of kiln-to-gpu: host code in the LLVM dialect that launches a
// kernel of a gpu.binary.
module attributes {gpu.container_module} {
  gpu.binary @kernels [#gpu.object<#nvvm.target, "">]
  llvm.func @launch(%p: !llvm.ptr) {
    %c1 = llvm.mlir.constant(1 : index) : i64
    gpu.launch_func @kernels::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) : i64 args(%p : !llvm.ptr)
    llvm.return
  }
}

// -----

// A kernel module that was not compiled to a binary.
module attributes {gpu.container_module} {
  // expected-error @+1 {{'gpu.module' op was not lowered to llvm}}
  gpu.module @kernels {
    // expected-error @+1 {{'gpu.func' op was not lowered to llvm}}
    gpu.func @k() kernel {
      // expected-error @+1 {{'gpu.return' op was not lowered to llvm}}
      gpu.return
    }
  }
}

// -----

// A launch whose operands are not LLVM values yet (gpu-to-llvm did not run).
module attributes {gpu.container_module} {
  gpu.binary @kernels [#gpu.object<#nvvm.target, "">]
  llvm.func @launch(%p: !llvm.ptr) {
    %c1 = llvm.mlir.constant(1 : index) : i64
    // expected-error @+1 {{'builtin.unrealized_conversion_cast' op was not lowered to llvm}}
    %m = builtin.unrealized_conversion_cast %p : !llvm.ptr to memref<4xf32>
    // expected-error @+1 {{'gpu.launch_func' op was not lowered to llvm}}
    gpu.launch_func @kernels::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) : i64 args(%m : memref<4xf32>)
    llvm.return
  }
}
