//===- Passes.h - Kiln dialect passes ----------------------------*- C++
//-*-===//
//
// Declarations and registration of the passes on kiln IR.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECTS_KILN_TRANSFORMS_PASSES_H
#define KILN_DIALECTS_KILN_TRANSFORMS_PASSES_H

#include "dialects/Kiln/IR/KilnDialect.h"
#include "mlir/Pass/Pass.h"

namespace mlir::kiln {

#define GEN_PASS_DECL
#include "dialects/Kiln/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dialects/Kiln/Transforms/Passes.h.inc"

} // namespace mlir::kiln

#endif // KILN_DIALECTS_KILN_TRANSFORMS_PASSES_H
