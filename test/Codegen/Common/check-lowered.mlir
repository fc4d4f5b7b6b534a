// kiln-check-lowered reports what a pipeline left behind.
// RUN: kiln-opt %s -split-input-file -verify-diagnostics -kiln-check-lowered=stage=linalg

// A kiln op left at the linalg stage.
func.func @kiln_left(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.relu' op was not lowered to linalg}}
  %0 = kiln.relu %x : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
