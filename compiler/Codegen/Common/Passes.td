//===- Passes.td - Common code generation passes -----------*- tablegen -*-===//
//
// Code generation shared by the CPU and GPU pipelines.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_CODEGEN_COMMON_PASSES_TD
#define KILN_COMPILER_CODEGEN_COMMON_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnFuseElementwisePass : Pass<"kiln-fuse-elementwise"> {
  let summary = "Fuse elementwise producers into elementwise consumers";
  let description = [{
    linalg's elementwise fusion, restricted to consumers whose loops are all
    parallel, and to producers all of whose users are such consumers: an
    activation fuses with the bias add or the residual add that follows it,
    but is never fused into a contraction or a reduction, where it would be
    recomputed once per reduction step, nor into one consumer while it is
    kept for another (along a residual stream, every layer would recompute
    all the ones before it).
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}


#endif // KILN_COMPILER_CODEGEN_COMMON_PASSES_TD
