//===- Passes.td - kiln to linalg conversion ---------------*- tablegen -*-===//
//
// The conversion pass from kiln to linalg on tensors.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_CONVERSION_KILNTOLINALG_PASSES_TD
#define KILN_COMPILER_CONVERSION_KILNTOLINALG_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertKilnToLinalgPass : Pass<"convert-kiln-to-linalg"> {
  let summary = "Lower kiln ops to linalg on tensors";
  let description = [{
    Rewrites every kiln op into `linalg.generic` (and `linalg.fill`,
    `linalg.transpose`) on tensors, with `tensor`, `arith` and `math` ops for
    shapes and scalar math. Dynamic sizes stay dynamic. Token ids, targets
    and positions read from data are clamped into range, so compiled code
    never reads out of bounds (the runtime rejects such inputs first).

    Before:
    ```mlir
    %y = kiln.relu %x : (tensor<?x8xf32>) -> tensor<?x8xf32>
    ```
    After:
    ```mlir
    %c0 = arith.constant 0 : index
    %d0 = tensor.dim %x, %c0 : tensor<?x8xf32>
    %e = tensor.empty(%d0) : tensor<?x8xf32>
    %y = linalg.generic {indexing_maps = [#id, #id],
                         iterator_types = ["parallel", "parallel"]}
        ins(%x : tensor<?x8xf32>) outs(%e : tensor<?x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      %zero = arith.constant 0.0 : f32
      %m = arith.maximumf %in, %zero : f32
      linalg.yield %m : f32
    } -> tensor<?x8xf32>
    ```
  }];
  let options = [
    Option<"attentionBlock", "attention-block", "int64_t", /*default=*/"0",
           "Attention in the flash manner, over blocks of this many query "
           "rows and keys (no [B, H, Tq, Tk] scores); 0: the scores are "
           "materialized (one linalg op per step, as GPU code wants)">,
    Option<"attentionKernel", "attention-kernel", "bool", /*default=*/"false",
           "Attention (forward, and backward given the forward output) as "
           "kiln.flash_attention and kiln.flash_attention_grad, whose GPU "
           "kernels kiln-gpu-kernels builds (heads at most 128 wide; wider "
           "ones as attention-block says)">
  ];
  let dependentDialects = [
    "::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect",
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect"
  ];
}

#endif // KILN_COMPILER_CONVERSION_KILNTOLINALG_PASSES_TD
