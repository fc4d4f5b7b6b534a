// RUN: kiln-opt %s -split-input-file -verify-diagnostics -kiln-apply-noalias | FileCheck %s

// The positions kiln-outline-kernels recorded (the aligned pointers of the
// buffers that never overlap a written one) get llvm.noalias, and the
// record goes away.
// CHECK-LABEL: llvm.func @kernel(
// CHECK-SAME:    %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: i64)
// CHECK-NOT:     kiln.noalias_args
llvm.func @kernel(%a: !llvm.ptr, %b: !llvm.ptr, %n: i64) attributes {kiln.noalias_args = array<i64: 1>} {
  llvm.return
}

// -----

// A recorded position that is no pointer (the signature changed since) is an
// error naming it.
// expected-error @+1 {{'llvm.func' op has no pointer argument #2 to mark}}
llvm.func @not_a_pointer(%a: !llvm.ptr, %b: !llvm.ptr, %n: i64) attributes {kiln.noalias_args = array<i64: 2>} {
  llvm.return
}
