//===- RowGroups.cpp - Linalg ops one GPU block per row can run -----------===//

#include "compiler/Codegen/Common/RowGroups.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;

namespace {

/// Whether `map`'s first `r` results are the loops 0 .. r-1, in order.
bool isRowLocal(AffineMap map, unsigned r) {
  if (map.getNumResults() < r) {
    return false;
  }
  for (unsigned k = 0; k < r; ++k) {
    auto dim = dyn_cast<AffineDimExpr>(map.getResult(k));
    if (!dim || dim.getPosition() != k) {
      return false;
    }
  }
  return true;
}

/// Whether `map` uses none of the loops 0 .. r-1.
bool isRowInvariant(AffineMap map, unsigned r) {
  for (unsigned k = 0; k < r; ++k) {
    if (map.isFunctionOfDim(k)) {
      return false;
    }
  }
  return true;
}

bool isBuffer(Value value) { return isa<BaseMemRefType>(value.getType()); }

} // namespace

std::optional<unsigned>
mlir::kiln::rowGroupRank(ArrayRef<linalg::LinalgOp> ops) {
  std::optional<unsigned> rank;
  int64_t work = 0;
  for (linalg::LinalgOp op : ops) {
    if (!op.hasPureBufferSemantics()) {
      return std::nullopt;
    }
    work += isa<linalg::FillOp>(op) ? 0 : 1;
    if (op.getNumReductionLoops() == 0) {
      continue;
    }
    unsigned parallel = op.getNumParallelLoops();
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    for (unsigned k = 0; k < parallel; ++k) {
      if (iterators[k] != utils::IteratorType::parallel) {
        return std::nullopt;
      }
    }
    if (rank && *rank != parallel) {
      return std::nullopt;
    }
    rank = parallel;
  }
  if (!rank || work < 2) {
    return std::nullopt;
  }
  unsigned r = *rank;
  llvm::SmallPtrSet<Value, 8> written;
  for (linalg::LinalgOp op : ops) {
    for (Value init : op.getDpsInits()) {
      written.insert(init);
    }
  }
  // Ops (by position) joined by the buffers they index row-locally.
  llvm::EquivalenceClasses<int64_t> joined;
  llvm::DenseMap<Value, int64_t> firstRowLocal;
  for (auto [i, member] : llvm::enumerate(ops)) {
    linalg::LinalgOp op = member;
    joined.insert(i);
    if (op.getNumReductionLoops() == 0 &&
        (op.getNumLoops() < r || (r == 0 && op.getNumLoops() != 0))) {
      return std::nullopt;
    }
    for (OpOperand &operand : op->getOpOperands()) {
      Value value = operand.get();
      AffineMap map = op.getMatchingIndexingMap(&operand);
      if (isRowLocal(map, r)) {
        if (isBuffer(value)) {
          auto [it, fresh] = firstRowLocal.try_emplace(value, i);
          joined.unionSets(it->second, i);
        }
      } else if (!isRowInvariant(map, r) ||
                 (isBuffer(value) && written.contains(value))) {
        return std::nullopt;
      }
      // What the op writes, it reads only where it writes.
      if (llvm::is_contained(op.getDpsInits(), value)) {
        for (OpOperand &other : op->getOpOperands()) {
          if (other.get() == value &&
              op.getMatchingIndexingMap(&other) != map) {
            return std::nullopt;
          }
        }
      }
    }
    // The bodies write nothing and read no buffer the group writes.
    Region &body = op->getRegion(0);
    WalkResult bad = body.walk([&](Operation *inner) {
      if (!isMemoryEffectFree(inner) && !isa<memref::LoadOp>(inner)) {
        return WalkResult::interrupt();
      }
      for (Value operand : inner->getOperands()) {
        if (isBuffer(operand) && !body.isAncestor(operand.getParentRegion()) &&
            written.contains(operand)) {
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    if (bad.wasInterrupted()) {
      return std::nullopt;
    }
  }
  if (r > 0 && joined.getNumClasses() != 1) {
    return std::nullopt;
  }
  return r;
}
