//===- Passes.h - Kiln dialect passes ----------------------------*- C++
//-*-===//
//
// Declarations and registration of the passes on kiln IR.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECTS_KILN_TRANSFORMS_PASSES_H
#define KILN_DIALECTS_KILN_TRANSFORMS_PASSES_H

#include "dialects/Kiln/IR/KilnDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::kiln {

#define GEN_PASS_DECL
#include "dialects/Kiln/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dialects/Kiln/Transforms/Passes.h.inc"

/// The arguments a loss is differentiated with respect to: those marked
/// `kiln.kind = "param"`, or every f32 tensor argument when none is marked.
SmallVector<unsigned> trainableArguments(func::FuncOp function);

/// Adds to the module of `forward` (a loss function: scalar first result) a
/// function `gradName` that returns the loss and the gradients of the
/// trainable arguments; see kiln-autodiff. Reports a diagnostic and fails
/// when an op on the path to the loss has no gradient.
FailureOr<func::FuncOp> differentiate(func::FuncOp forward, StringRef gradName);

} // namespace mlir::kiln

#endif // KILN_DIALECTS_KILN_TRANSFORMS_PASSES_H
