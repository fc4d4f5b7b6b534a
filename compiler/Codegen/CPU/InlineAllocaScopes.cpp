//===- InlineAllocaScopes.cpp - Drop empty alloca scopes ------------------===//
//
// Implements kiln-inline-alloca-scopes.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNINLINEALLOCASCOPESPASS
#include "compiler/Codegen/CPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {
struct KilnInlineAllocaScopesPass
    : mlir::kiln::impl::KilnInlineAllocaScopesPassBase<
          KilnInlineAllocaScopesPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    SmallVector<memref::AllocaScopeOp> scopes;
    getOperation()->walk([&](memref::AllocaScopeOp scope) {
      bool allocates = false;
      scope.getBodyRegion().walk([&](memref::AllocaOp) { allocates = true; });
      if (!allocates && scope.getBodyRegion().hasOneBlock()) {
        scopes.push_back(scope);
      }
    });
    for (memref::AllocaScopeOp scope : scopes) {
      Block *body = &scope.getBodyRegion().front();
      auto terminator =
          cast<memref::AllocaScopeReturnOp>(body->getTerminator());
      SmallVector<Value> results(terminator.getResults());
      rewriter.eraseOp(terminator);
      rewriter.inlineBlockBefore(body, scope);
      rewriter.replaceOp(scope, results);
    }
  }
};
} // namespace
