// kiln-gpu-modules-to-host refuses NVVM operations it cannot emulate
// (gpu-modules-to-host.mlir runs this).

gpu.module @clock [#nvvm.target<chip = "sm_90">] {
  llvm.func @k(%p: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel} {
    // expected-error @+1 {{has no host emulation}}
    %c = nvvm.read.ptx.sreg.clock : i32
    llvm.store %c, %p : i32, !llvm.ptr
    llvm.return
  }
}

// -----

gpu.module @rz [#nvvm.target<chip = "sm_90">] {
  llvm.func @k(%p: !llvm.ptr, %v: f32) attributes {gpu.kernel, nvvm.kernel} {
    // expected-error @+1 {{has no host emulation but with rounding rna}}
    %t = nvvm.convert.float.to.tf32 %v {rnd = #nvvm.fp_rnd_mode<rz>}
    llvm.store %t, %p : i32, !llvm.ptr
    llvm.return
  }
}
