// At the llvm stage, anything outside the LLVM dialect is reported.
// RUN: kiln-opt %s -verify-diagnostics -kiln-check-lowered=stage=llvm

// expected-error @+1 {{'func.func' op was not lowered to llvm}}
func.func @not_lowered() {
  // expected-error @+1 {{'func.return' op was not lowered to llvm}}
  return
}
