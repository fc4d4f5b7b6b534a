//===- ApproximateMath.cpp - Polynomial transcendental functions ----------===//
//
// Implements kiln-approximate-math.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/Common/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNAPPROXIMATEMATHPASS
#include "compiler/Codegen/Common/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {
struct KilnApproximateMathPass
    : kiln::impl::KilnApproximateMathPassBase<KilnApproximateMathPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    MathPolynomialApproximationOptions options;
    populateMathPolynomialApproximationPatterns(patterns, options);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      signalPassFailure();
    }
  }
};
} // namespace
