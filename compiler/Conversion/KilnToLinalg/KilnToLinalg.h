//===- KilnToLinalg.h - Lower kiln to linalg on tensors ----------*- C++
//-*-===//
//
// The kiln-to-linalg conversion as a pattern library and a pass.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_CONVERSION_KILNTOLINALG_KILNTOLINALG_H
#define KILN_COMPILER_CONVERSION_KILNTOLINALG_KILNTOLINALG_H

#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;

namespace kiln {

#define GEN_PASS_DECL
#include "compiler/Conversion/KilnToLinalg/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/Conversion/KilnToLinalg/Passes.h.inc"

/// Adds the patterns that lower every kiln op to linalg/tensor/arith/math.
/// `attentionBlock` > 0 lowers the attention forward pass block by block
/// (the pass's `attention-block` option).
void populateKilnToLinalgPatterns(RewritePatternSet &patterns,
                                  int64_t attentionBlock = 0,
                                  bool attentionKernel = false);

} // namespace kiln
} // namespace mlir

#endif // KILN_COMPILER_CONVERSION_KILNTOLINALG_KILNTOLINALG_H
