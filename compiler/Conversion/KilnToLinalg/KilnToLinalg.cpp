//===- KilnToLinalg.cpp - Lower kiln ops to linalg on tensors -------------===//
//
// Every kiln op becomes linalg.generic ops (plus tensor/arith/math) on
// tensors whose dynamic sizes stay dynamic. Big ops (attention, layer norm,
// losses) become a handful of fused loops rather than one loop per formula
// term. Indices read from data (token ids, targets, positions) are clamped
// into range, so no input can make compiled code read out of bounds; the
// runtime reports such inputs as errors before calling.
//
// This file holds the pass and the public pattern entry point; the patterns
// live in one file per op family (Elementwise.cpp, Layers.cpp, Attention.cpp,
// ReductionsAndShapes.cpp, Losses.cpp, Gradients.cpp, Optimizers.cpp), built
// with the helpers of Emitter.h.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/KilnToLinalg/KilnToLinalg.h"

#include "compiler/Conversion/KilnToLinalg/Emitter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_CONVERTKILNTOLINALGPASS
#include "compiler/Conversion/KilnToLinalg/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {

struct ConvertKilnToLinalgPass
    : mlir::kiln::impl::ConvertKilnToLinalgPassBase<ConvertKilnToLinalgPass> {
  using ConvertKilnToLinalgPassBase::ConvertKilnToLinalgPassBase;
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    ConversionTarget target(*context);
    target.addIllegalDialect<KilnDialect>();
    target.addLegalOp<FlashAttentionOp, FlashAttentionGradOp>();
    target.addLegalDialect<linalg::LinalgDialect, tensor::TensorDialect,
                           arith::ArithDialect, math::MathDialect,
                           func::FuncDialect, scf::SCFDialect>();
    RewritePatternSet patterns(context);
    populateKilnToLinalgPatterns(patterns, attentionBlock, attentionKernel);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns)))) {
      signalPassFailure();
    }
  }
};

} // namespace

void mlir::kiln::populateKilnToLinalgPatterns(RewritePatternSet &patterns,
                                              int64_t attentionBlock,
                                              bool attentionKernel) {
  populateElementwisePatterns(patterns);
  populateLayerPatterns(patterns);
  populateAttentionPatterns(patterns, attentionBlock, attentionKernel);
  populateReductionAndShapePatterns(patterns);
  populateLossPatterns(patterns);
  populateGradientPatterns(patterns);
  populateOptimizerPatterns(patterns);
}
