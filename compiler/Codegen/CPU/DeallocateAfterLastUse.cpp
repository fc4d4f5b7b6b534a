//===- DeallocateAfterLastUse.cpp - Free each buffer when it dies ---------===//
//
// Implements kiln-deallocate-after-last-use.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Operation.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNDEALLOCATEAFTERLASTUSEPASS
#include "compiler/Codegen/CPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

/// The op of `block` that is or holds the last use of `memref` or of any
/// memref derived from it (a view, a reshape, a cast, a loop result or
/// anything else some user returns), or null when one use escapes what the
/// block can see (a terminator passes it on, a raw pointer is taken).
/// `failed` is set then.
Operation *lastUse(Value memref, Block *block, Operation *dealloc,
                   bool &failed) {
  SmallVector<Value> worklist = {memref};
  DenseSet<Value> seen;
  Operation *last = nullptr;
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    if (!seen.insert(value).second) {
      continue;
    }
    for (Operation *user : value.getUsers()) {
      if (user == dealloc) {
        continue;
      }
      if (user->hasTrait<OpTrait::IsTerminator>() ||
          isa<memref::ExtractAlignedPointerAsIndexOp>(user)) {
        failed = true;
        return nullptr;
      }
      Operation *inBlock = block->findAncestorOpInBlock(*user);
      if (!inBlock) {
        failed = true;
        return nullptr;
      }
      if (!last || last->isBeforeInBlock(inBlock)) {
        last = inBlock;
      }
      for (Value result : user->getResults()) {
        if (isa<BaseMemRefType>(result.getType())) {
          worklist.push_back(result);
        }
      }
      // A region's arguments (a loop's iteration arguments) may carry it.
      for (Region &region : user->getRegions()) {
        for (Block &inner : region) {
          for (BlockArgument arg : inner.getArguments()) {
            if (isa<BaseMemRefType>(arg.getType())) {
              worklist.push_back(arg);
            }
          }
        }
      }
    }
  }
  return last;
}

struct KilnDeallocateAfterLastUsePass
    : mlir::kiln::impl::KilnDeallocateAfterLastUsePassBase<
          KilnDeallocateAfterLastUsePass> {
  void runOnOperation() override {
    SmallVector<memref::DeallocOp> deallocs;
    getOperation()->walk(
        [&](memref::DeallocOp dealloc) { deallocs.push_back(dealloc); });
    for (memref::DeallocOp dealloc : deallocs) {
      Value memref = dealloc.getMemref();
      Block *block = dealloc->getBlock();
      // Only a buffer allocated in this block: its every use is here.
      auto alloc = memref.getDefiningOp<memref::AllocOp>();
      if (!alloc || alloc->getBlock() != block) {
        continue;
      }
      bool failed = false;
      Operation *last = lastUse(memref, block, dealloc, failed);
      if (failed) {
        continue;
      }
      Operation *after = last ? last : alloc.getOperation();
      if (after->isBeforeInBlock(dealloc)) {
        dealloc->moveAfter(after);
      }
    }
  }
};
} // namespace
