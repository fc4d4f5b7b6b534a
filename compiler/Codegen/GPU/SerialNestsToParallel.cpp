//===- SerialNestsToParallel.cpp - Serial code as one-thread kernels ------===//
//
// Implements kiln-serial-nests-to-parallel.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/GPU/Passes.h"

#include "compiler/Codegen/GPU/ShapeBuffers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kiln-serial-nests-to-parallel"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNSERIALNESTSTOPARALLELPASS
#include "compiler/Codegen/GPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

/// Does `op` read or write memory other than by allocating, freeing,
/// copying whole buffers or taking views?
bool touchesMemory(Operation *op) {
  if (kiln::onShapeBuffer(op)) {
    return false;
  }
  if (isa<memref::AllocOp, memref::DeallocOp, memref::CopyOp,
          ViewLikeOpInterface, memref::DimOp, memref::ExtractStridedMetadataOp,
          scf::ParallelOp>(op)) {
    return false;
  }
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (effects) {
    return effects.hasEffect<MemoryEffects::Read>() ||
           effects.hasEffect<MemoryEffects::Write>();
  }
  return op->getNumRegions() > 0; // loops: whatever their bodies do
}

/// Ops a run of serial code does not extend over.
bool isBarrier(Operation *op) {
  bool hasParallel = false;
  op->walk([&](scf::ParallelOp) { hasParallel = true; });
  return hasParallel || op->hasTrait<OpTrait::IsTerminator>() ||
         isa<memref::AllocOp, memref::DeallocOp, memref::CopyOp,
             CallOpInterface, gpu::LaunchOp>(op);
}

/// The allocation a memref is a view of (through views), or null when it is
/// not a fresh `memref.alloc` (an argument, which others may alias).
memref::AllocOp rootAllocation(Value memref) {
  while (true) {
    Operation *def = memref.getDefiningOp();
    if (auto alloc = dyn_cast_or_null<memref::AllocOp>(def)) {
      return alloc;
    }
    auto view = dyn_cast_or_null<ViewLikeOpInterface>(def);
    if (!view) {
      return nullptr;
    }
    memref = view.getViewSource();
  }
}

/// A serial nest whose inner loop's iterations are independent:
///
///   scf.for %n { <pure ops, loads>; scf.if %c { scf.for %d { body } } }
///
/// (the scf.if optional) where every buffer the nest writes is a fresh
/// allocation with the identity layout, accessed, loads and stores alike,
/// only inside the inner loop and only through the memref the stores use,
/// with %d as the last index. Distinct %d then never touch the same memory
/// (embedding_grad's scatter-add of rows into a table: each column its own).
struct ColumnNest {
  scf::ForOp outer, inner;
  scf::IfOp guard;
  /// The ops of the outer body before the guard (or the inner loop).
  SmallVector<Operation *> prefix;
  /// Each written allocation's memref.
  llvm::SmallDenseMap<Operation *, Value> written;
};

std::optional<ColumnNest> matchColumnNest(scf::ForOp outer) {
  if (outer.getNumResults() != 0) {
    return std::nullopt;
  }
  Block *outerBody = outer.getBody();
  // The last op before the terminator is the inner loop or an scf.if that
  // holds only it.
  Operation *last = outerBody->getTerminator()->getPrevNode();
  if (!last) {
    return std::nullopt;
  }
  ColumnNest nest;
  nest.outer = outer;
  nest.guard = dyn_cast<scf::IfOp>(last);
  nest.inner = dyn_cast<scf::ForOp>(last);
  if (nest.guard) {
    if (nest.guard.getNumResults() != 0 ||
        !nest.guard.getElseRegion().empty() ||
        nest.guard.thenBlock()->getOperations().size() != 2) {
      return std::nullopt;
    }
    nest.inner = dyn_cast<scf::ForOp>(nest.guard.thenBlock()->front());
  }
  scf::ForOp inner = nest.inner;
  if (!inner || inner.getNumResults() != 0) {
    return std::nullopt;
  }
  // The inner bounds are known before the outer loop starts.
  for (Value bound :
       {inner.getLowerBound(), inner.getUpperBound(), inner.getStep()}) {
    if (outer.getBodyRegion().isAncestor(bound.getParentRegion())) {
      return std::nullopt;
    }
  }
  // The ops before it: pure, or loads; the inner body: pure, loads, stores.
  for (Operation &op : outerBody->without_terminator()) {
    if (&op == last) {
      break;
    }
    if (!isa<memref::LoadOp>(op) &&
        (op.getNumRegions() != 0 || !isMemoryEffectFree(&op))) {
      return std::nullopt;
    }
    nest.prefix.push_back(&op);
  }
  for (Operation &op : inner.getBody()->without_terminator()) {
    if (!isa<memref::LoadOp, memref::StoreOp>(op) &&
        (op.getNumRegions() != 0 || !isMemoryEffectFree(&op))) {
      return std::nullopt;
    }
  }
  // What the nest writes, and through which memref.
  for (auto store : inner.getBody()->getOps<memref::StoreOp>()) {
    memref::AllocOp root = rootAllocation(store.getMemRef());
    auto type = store.getMemRefType();
    if (!root || !type.getLayout().isIdentity() || type.getRank() == 0) {
      return std::nullopt;
    }
    auto [it, added] = nest.written.try_emplace(root, store.getMemRef());
    if (!added && it->second != store.getMemRef()) {
      return std::nullopt;
    }
  }
  if (nest.written.empty()) {
    return std::nullopt;
  }
  Value column = inner.getInductionVar();
  WalkResult accesses = outer.getBody()->walk([&](Operation *op) {
    Value memref;
    ValueRange indices;
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      memref = load.getMemRef();
      indices = load.getIndices();
    } else if (auto store = dyn_cast<memref::StoreOp>(op)) {
      memref = store.getMemRef();
      indices = store.getIndices();
    } else {
      return WalkResult::advance();
    }
    memref::AllocOp root = rootAllocation(memref);
    if (!root || !nest.written.count(root)) {
      return WalkResult::advance(); // read only in the nest
    }
    if (memref != nest.written.lookup(root) || op->getParentOp() != inner ||
        indices.empty() || indices.back() != column) {
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (accesses.wasInterrupted()) {
    return std::nullopt;
  }
  return nest;
}

/// The nest becomes
///
///   scf.parallel %d { scf.for %n { ...; scf.if %c { body } } }
///
/// Each column still sums in the outer loop's order: the results are those
/// of the serial nest, bit for bit.
void parallelizeColumns(ColumnNest &nest) {
  scf::ForOp outer = nest.outer, inner = nest.inner;
  LLVM_DEBUG(llvm::dbgs() << "kiln-serial-nests-to-parallel: columns of "
                          << outer.getLoc() << " in parallel\n");
  OpBuilder b(outer);
  Location loc = outer.getLoc();
  auto parallel = scf::ParallelOp::create(
      b, loc, ValueRange{inner.getLowerBound()},
      ValueRange{inner.getUpperBound()}, ValueRange{inner.getStep()});
  outer->moveBefore(parallel.getBody()->getTerminator());
  inner.getInductionVar().replaceAllUsesWith(parallel.getInductionVars()[0]);
  for (Operation &op :
       llvm::make_early_inc_range(inner.getBody()->without_terminator())) {
    op.moveBefore(inner);
  }
  inner->erase();
}

/// The row of the one written 2-D buffer that every access of iteration
/// %n uses (its first index, the same value in every load and store,
/// computed before the inner loop), or null. With the outer loop from 0 by
/// 1, the nest can then run parallel over rows too (parallelizeSortedRows).
Value writtenRow(ColumnNest &nest) {
  if (nest.written.size() != 1 ||
      !matchPattern(nest.outer.getLowerBound(), m_Zero()) ||
      !matchPattern(nest.outer.getStep(), m_One())) {
    return nullptr;
  }
  Value memref = nest.written.begin()->second;
  if (cast<MemRefType>(memref.getType()).getRank() != 2) {
    return nullptr;
  }
  Value row;
  for (Operation *user : memref.getUsers()) {
    ValueRange indices;
    if (auto load = dyn_cast<memref::LoadOp>(user)) {
      indices = load.getIndices();
    } else if (auto store = dyn_cast<memref::StoreOp>(user)) {
      indices = store.getIndices();
    } else {
      continue;
    }
    if (!nest.outer->isAncestor(user)) {
      continue;
    }
    if (row && indices.front() != row) {
      return nullptr;
    }
    row = indices.front();
  }
  bool beforeInner = row == nest.outer.getInductionVar() ||
                     llvm::is_contained(nest.prefix, row.getDefiningOp());
  return beforeInner ? row : nullptr;
}

/// With `row` from writtenRow, the nest becomes two parallel loops over a
/// fresh buffer `order` of the outer loop's N iterations:
///
///   scf.parallel %i {      // a stable sort of the iterations by row
///     rank = #{j : row(j) < row(i) or (row(j) == row(i) and j < i)}
///     order[rank] = i }
///   scf.parallel (%k, %d) {  // one thread per sorted iteration and column
///     if (k is the first of its row in `order`)
///       for each k' from k while row(order[k']) == row(order[k]):
///         n = order[k']; if %c(n) { body(n, d) } }
///
/// Every element of the written buffer is still updated by one thread, in
/// the outer loop's order (the sort is stable): the results are those of
/// the serial nest, bit for bit, with rows in parallel as well as columns.
/// The rank costs N^2 comparisons, which the GPU does in parallel.
void parallelizeSortedRows(ColumnNest &nest, Value row) {
  scf::ForOp outer = nest.outer, inner = nest.inner;
  LLVM_DEBUG(llvm::dbgs() << "kiln-serial-nests-to-parallel: rows and "
                          << "columns of " << outer.getLoc()
                          << " in parallel, rows sorted\n");
  OpBuilder b(outer);
  Location loc = outer.getLoc();
  Type i64 = b.getI64Type();
  Type indexType = b.getIndexType();
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value count = outer.getUpperBound();
  // The ops before the inner loop for iteration `n`: its row and guard.
  auto prefixFor = [&](OpBuilder &b, Value n, IRMapping &map) {
    map.map(outer.getInductionVar(), n);
    for (Operation *op : nest.prefix) {
      b.clone(*op, map);
    }
  };
  auto rowOf = [&](OpBuilder &b, Value n) {
    IRMapping map;
    prefixFor(b, n, map);
    return map.lookupOrDefault(row);
  };
  auto orderAt = [&](OpBuilder &b, Location loc, Value order, Value k) {
    Value v = memref::LoadOp::create(b, loc, order, ValueRange{k});
    return arith::IndexCastOp::create(b, loc, indexType, v).getResult();
  };
  auto order = memref::AllocOp::create(
      b, loc, MemRefType::get({ShapedType::kDynamic}, i64), ValueRange{count});
  // The stable sort.
  auto sort = scf::ParallelOp::create(b, loc, ValueRange{zero},
                                      ValueRange{count}, ValueRange{one});
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(sort.getBody()->getTerminator());
    Value i = sort.getInductionVars()[0];
    Value rowI = rowOf(b, i);
    auto rank = scf::ForOp::create(
        b, loc, zero, count, one, ValueRange{zero},
        [&](OpBuilder &b, Location loc, Value j, ValueRange rank) {
          Value rowJ = rowOf(b, j);
          Value less = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                             rowJ, rowI);
          Value same = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                             rowJ, rowI);
          Value earlier =
              arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, j, i);
          Value before = arith::OrIOp::create(
              b, loc, less, arith::AndIOp::create(b, loc, same, earlier));
          Value step = arith::SelectOp::create(b, loc, before, one, zero);
          scf::YieldOp::create(
              b, loc, ValueRange{arith::AddIOp::create(b, loc, rank[0], step)});
        });
    memref::StoreOp::create(b, loc, arith::IndexCastOp::create(b, loc, i64, i),
                            order, ValueRange{rank.getResult(0)});
  }
  // The sums, a thread per sorted iteration and column.
  auto sums =
      scf::ParallelOp::create(b, loc, ValueRange{zero, inner.getLowerBound()},
                              ValueRange{count, inner.getUpperBound()},
                              ValueRange{one, inner.getStep()});
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(sums.getBody()->getTerminator());
    Value k = sums.getInductionVars()[0];
    Value d = sums.getInductionVars()[1];
    Value rowK = rowOf(b, orderAt(b, loc, order, k));
    Value first =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, k, zero);
    auto head = scf::IfOp::create(
        b, loc, first,
        [&](OpBuilder &b, Location loc) {
          scf::YieldOp::create(
              b, loc, ValueRange{arith::ConstantIntOp::create(b, loc, 1, 1)});
        },
        [&](OpBuilder &b, Location loc) {
          Value previous = arith::SubIOp::create(b, loc, k, one);
          Value rowP = rowOf(b, orderAt(b, loc, order, previous));
          scf::YieldOp::create(
              b, loc,
              ValueRange{arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                               rowP, rowK)});
        });
    scf::IfOp::create(
        b, loc, head.getResult(0), [&](OpBuilder &b, Location loc) {
          scf::WhileOp::create(
              b, loc, TypeRange{indexType}, ValueRange{k},
              [&](OpBuilder &b, Location loc, ValueRange kk) {
                Value inRange = arith::CmpIOp::create(
                    b, loc, arith::CmpIPredicate::ult, kk[0], count);
                auto same = scf::IfOp::create(
                    b, loc, inRange,
                    [&](OpBuilder &b, Location loc) {
                      Value rowM = rowOf(b, orderAt(b, loc, order, kk[0]));
                      scf::YieldOp::create(
                          b, loc,
                          ValueRange{arith::CmpIOp::create(
                              b, loc, arith::CmpIPredicate::eq, rowM, rowK)});
                    },
                    [&](OpBuilder &b, Location loc) {
                      scf::YieldOp::create(
                          b, loc,
                          ValueRange{
                              arith::ConstantIntOp::create(b, loc, 0, 1)});
                    });
                scf::ConditionOp::create(b, loc, same.getResult(0), kk);
              },
              [&](OpBuilder &b, Location loc, ValueRange kk) {
                IRMapping map;
                prefixFor(b, orderAt(b, loc, order, kk[0]), map);
                map.map(inner.getInductionVar(), d);
                auto body = [&](OpBuilder &b, Location loc) {
                  for (Operation &op : inner.getBody()->without_terminator()) {
                    b.clone(op, map);
                  }
                  scf::YieldOp::create(b, loc);
                };
                if (nest.guard) {
                  scf::IfOp::create(
                      b, loc, map.lookupOrDefault(nest.guard.getCondition()),
                      body);
                } else {
                  body(b, loc);
                }
                scf::YieldOp::create(
                    b, loc,
                    ValueRange{arith::AddIOp::create(b, loc, kk[0], one)});
              });
          scf::YieldOp::create(b, loc);
        });
  }
  memref::DeallocOp::create(b, loc, order);
  outer->erase();
}

struct SerialNestsToParallel
    : public kiln::impl::KilnSerialNestsToParallelPassBase<
          SerialNestsToParallel> {
  void runOnOperation() override {
    // A load on the host whose value only parallel loops use (a learning
    // rate, a clipping scale) is done by every thread instead.
    SmallVector<memref::LoadOp> loads;
    for (Block &block : getOperation().getBody()) {
      for (auto load : block.getOps<memref::LoadOp>()) {
        loads.push_back(load);
      }
    }
    for (memref::LoadOp load : loads) {
      Block *block = load->getBlock();
      SmallVector<Operation *> users(load->getUsers().begin(),
                                     load->getUsers().end());
      bool inKernels = !users.empty() && llvm::all_of(users, [&](Operation *u) {
        Operation *top = block->findAncestorOpInBlock(*u);
        return top && top != u && isa<scf::ParallelOp>(top);
      });
      if (!inKernels) {
        continue;
      }
      for (OpOperand &use : llvm::make_early_inc_range(load->getUses())) {
        auto parallel = cast<scf::ParallelOp>(
            block->findAncestorOpInBlock(*use.getOwner()));
        OpBuilder b(parallel.getBody(), parallel.getBody()->begin());
        use.set(b.clone(*load)->getResult(0));
      }
      load->erase();
    }
    // Nests whose inner iterations are independent: parallel over them.
    SmallVector<scf::ForOp> nests;
    for (Block &block : getOperation().getBody()) {
      for (auto loop : block.getOps<scf::ForOp>()) {
        nests.push_back(loop);
      }
    }
    for (scf::ForOp loop : nests) {
      std::optional<ColumnNest> nest = matchColumnNest(loop);
      if (!nest) {
        continue;
      }
      if (Value row = writtenRow(*nest)) {
        parallelizeSortedRows(*nest, row);
      } else {
        parallelizeColumns(*nest);
      }
    }
    // Runs of ops between barriers that touch memory outside any parallel
    // loop; each becomes one kernel, if no value it defines is used after
    // it (otherwise it stays, and kiln-device-buffers reports it).
    SmallVector<SmallVector<Operation *>> runs, constants;
    for (Block &block : getOperation().getBody()) {
      SmallVector<Operation *> run, runConstants;
      bool touches = false;
      auto flush = [&] {
        if (touches) {
          runs.push_back(run);
          constants.push_back(runConstants);
        }
        run.clear();
        runConstants.clear();
        touches = false;
      };
      llvm::SmallPtrSet<Operation *, 16> inRun;
      for (Operation &op : block) {
        if (isBarrier(&op)) {
          flush();
          inRun.clear();
          continue;
        }
        // Pure ops on values from before the run (constants, sizes) stay
        // outside it: code after the run may use them.
        bool hoistable = op.getNumRegions() == 0 && isMemoryEffectFree(&op) &&
                         llvm::none_of(op.getOperands(), [&](Value v) {
                           return inRun.contains(v.getDefiningOp());
                         });
        if (hoistable) {
          if (!run.empty()) {
            runConstants.push_back(&op);
          }
          continue;
        }
        run.push_back(&op);
        inRun.insert(&op);
        touches |= touchesMemory(&op);
      }
      flush();
    }
    OpBuilder b(&getContext());
    for (auto [run, runConstants] : llvm::zip(runs, constants)) {
      llvm::SmallPtrSet<Operation *, 16> inside(run.begin(), run.end());
      bool escapes = llvm::any_of(run, [&](Operation *op) {
        return llvm::any_of(op->getUsers(), [&](Operation *user) {
          Operation *top =
              run.front()->getBlock()->findAncestorOpInBlock(*user);
          return !top || !inside.contains(top);
        });
      });
      if (escapes) {
        continue;
      }
      for (Operation *constant : runConstants) {
        constant->moveBefore(run.front());
      }
      b.setInsertionPoint(run.front());
      Location loc = run.front()->getLoc();
      Value zero = arith::ConstantIndexOp::create(b, loc, 0);
      Value one = arith::ConstantIndexOp::create(b, loc, 1);
      auto parallel = scf::ParallelOp::create(b, loc, ValueRange{zero},
                                              ValueRange{one}, ValueRange{one});
      for (Operation *op : run) {
        op->moveBefore(parallel.getBody()->getTerminator());
      }
    }
  }
};

} // namespace
