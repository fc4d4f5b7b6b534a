// kiln-align-workgroup-memory: every workgroup buffer of a kernel is 16-byte
// aligned (llvm.align = 16, a larger alignment kept), so that the PTX
// declares the shared memory the 128-bit loads read as `.align 16`.
// RUN: kiln-opt %s --pass-pipeline="builtin.module(gpu.module(kiln-align-workgroup-memory))" | FileCheck %s
// RUN: kiln-opt %s --pass-pipeline="builtin.module(gpu.module(kiln-align-workgroup-memory,convert-gpu-to-nvvm))" | FileCheck %s --check-prefix=NVVM

// CHECK-LABEL: gpu.func @k(
// CHECK-SAME:    workgroup(%{{.*}} : memref<8x132xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<4xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<16xf32, #gpu.address_space<workgroup>> {llvm.align = 64 : i64})
// NVVM: llvm.mlir.global internal @__wg_k_0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<1056 x f32>
// NVVM: llvm.mlir.global internal @__wg_k_1() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<4 x f32>
// NVVM: llvm.mlir.global internal @__wg_k_2() {addr_space = 3 : i32, alignment = 64 : i64} : !llvm.array<16 x f32>
gpu.module @m {
  gpu.func @k(%out: memref<3xf32>)
      workgroup(%a: memref<8x132xf32, #gpu.address_space<workgroup>>,
                %b: memref<4xf32, #gpu.address_space<workgroup>> {llvm.align = 4 : i64},
                %c: memref<16xf32, #gpu.address_space<workgroup>> {llvm.align = 64 : i64}) kernel {
    %c0 = arith.constant 0 : index
    %x = memref.load %a[%c0, %c0] : memref<8x132xf32, #gpu.address_space<workgroup>>
    %y = memref.load %b[%c0] : memref<4xf32, #gpu.address_space<workgroup>>
    %z = memref.load %c[%c0] : memref<16xf32, #gpu.address_space<workgroup>>
    %s = arith.addf %x, %y : f32
    %t = arith.addf %s, %z : f32
    memref.store %t, %out[%c0] : memref<3xf32>
    gpu.return
  }
}
