// A loss whose targets have a static 0 size: its gradient, training step and
// GPU code compile (kiln-fuzz-ir found that one-shot bufferization made the
// embedding gradient's collapse of 0 x ? positions an invalid
// memref.collapse_shape; kiln-fold-empty-reshapes makes it an empty tensor).
// RUN: kiln-opt %s --kiln-autodiff --kiln-to-llvm | FileCheck %s
// RUN: kiln-opt %s --kiln-training-step="optimizer=adamw clip-norm=1.0" --kiln-to-llvm | FileCheck %s --check-prefix=STEP
// RUN: kiln-opt %s --kiln-training-step="optimizer=adamw" --kiln-to-gpu | FileCheck %s --check-prefix=GPU

// CHECK: llvm.func @loss_grad(
// STEP: llvm.func @train_step(
// GPU: llvm.func @train_step(
func.func @loss(%ids: tensor<?x?xi64> {kiln.kind = "input", kiln.name = "ids"},
                %t: tensor<0x?xi64> {kiln.kind = "input", kiln.name = "targets"},
                %wte: tensor<65x32xf32> {kiln.kind = "param", kiln.name = "wte"},
                %w: tensor<65x32xf32> {kiln.kind = "param", kiln.name = "head"}) -> tensor<f32> {
  %x = kiln.embedding %ids, %wte : (tensor<?x?xi64>, tensor<65x32xf32>) -> tensor<?x?x32xf32>
  %y = kiln.linear %x, %w : (tensor<?x?x32xf32>, tensor<65x32xf32>) -> tensor<?x?x65xf32>
  %l = kiln.cross_entropy %y, %t : (tensor<?x?x65xf32>, tensor<0x?xi64>) -> tensor<f32>
  return %l : tensor<f32>
}
