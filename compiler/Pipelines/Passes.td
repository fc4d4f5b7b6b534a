//===- Passes.td - Passes of Kiln's named pipelines --------*- tablegen -*-===//
//
// Passes that Kiln's pipelines need beyond the upstream ones.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_PIPELINES_PASSES_TD
#define KILN_COMPILER_PIPELINES_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnCheckLoweredPass : Pass<"kiln-check-lowered", "::mlir::ModuleOp"> {
  let summary = "Fail when anything is left above the pipeline's target level";
  let description = [{
    The last pass of every Kiln pipeline. With `stage=linalg` it rejects any
    remaining `kiln` op; with `stage=llvm` it rejects any op outside the
    `llvm` dialect (besides the module). Each leftover op gets an error
    naming it, so a missing lowering is a diagnostic, never a crash later.

    ```mlir
    // kiln-opt --kiln-check-lowered=stage=linalg on:
    %0 = kiln.relu %x : (tensor<4xf32>) -> tensor<4xf32>
    // error: 'kiln.relu' op was not lowered to linalg
    ```
  }];
  let options = [
    Option<"stage", "stage", "std::string", /*default=*/"\"llvm\"",
           "The level everything must have reached: linalg or llvm">
  ];
}

def KilnApproximateMathPass : Pass<"kiln-approximate-math"> {
  let summary = "Replace transcendental math ops with vectorizable polynomials";
  let description = [{
    Rewrites `math.exp`, `math.log`, `math.tanh`, `math.erf`, `math.sin`,
    `math.cos` and friends on f32 into polynomial approximations made of
    arithmetic (MLIR's approximations, accurate to a few ulp), so that they
    vectorize instead of calling libm one element at a time.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::vector::VectorDialect"
  ];
}

#endif // KILN_COMPILER_PIPELINES_PASSES_TD
