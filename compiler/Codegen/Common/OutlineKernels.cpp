//===- OutlineKernels.cpp - One private function per distinct linalg op ---===//
//
// Implements kiln-outline-kernels.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/Common/Passes.h"

#include "compiler/Codegen/Common/Attributes.h"
#include "compiler/Codegen/Common/RowGroups.h"
#include "compiler/Codegen/Common/Views.h"

#include "dialects/Kiln/IR/KilnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"

#include <limits>

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNOUTLINEKERNELSPASS
#include "compiler/Codegen/Common/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

/// The most ops one row group holds.
constexpr size_t kMaxRowGroup = 16;

struct OutlineKernels
    : public mlir::kiln::impl::KilnOutlineKernelsPassBase<OutlineKernels> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    kernels.clear();
    aliasing.clear();
    writes.clear();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> callers;
    for (func::FuncOp func : module.getOps<func::FuncOp>()) {
      if (!func.isExternal()) {
        callers.push_back(func);
      }
    }
    for (func::FuncOp func : callers) {
      // What stays is glue (descriptors, allocations, calls): LLVM's
      // optimizations would only cost time, which grows faster than the
      // glue does with the depth of the model.
      OpBuilder b(func);
      func->setAttr("passthrough",
                    b.getArrayAttr({b.getStringAttr("noinline"),
                                    b.getStringAttr("optnone")}));
      // Each linalg op, and each parallel loop (flash attention's loop
      // over blocks) with the ops inside it: those become serial kernels
      // first (LLVM's time grows faster than the size of a function), then
      // the loop becomes the kernel that calls them on all cores. The GPU
      // kernel ops (kiln.flash_attention, kiln.flash_attention_grad) are
      // kernels of their own too, shared between identical layers.
      SmallVector<Operation *> ops;
      func.walk<WalkOrder::PreOrder>([&](Operation *op) {
        if (isa<linalg::LinalgOp, scf::ParallelOp, mlir::kiln::FlashAttentionOp,
                mlir::kiln::FlashAttentionGradOp>(op)) {
          ops.push_back(op);
          return WalkResult::skip();
        }
        return WalkResult::advance();
      });
      // With group-rows: runs of ops that one kernel runs with a block per
      // row, by their first op.
      llvm::DenseMap<Operation *, SmallVector<Operation *>> rowGroups;
      llvm::SmallPtrSet<Operation *, 8> inRowGroup;
      if (groupRows) {
        for (size_t i = 0; i < ops.size();) {
          SmallVector<Operation *> group = rowGroupAt(ops, i);
          if (group.empty()) {
            ++i;
            continue;
          }
          i += group.size();
          inRowGroup.insert(group.begin(), group.end());
          rowGroups[group.front()] = std::move(group);
        }
      }
      // With group-fills: the fills that go with the next op (by position).
      llvm::SmallPtrSet<Operation *, 8> grouped;
      if (groupFills) {
        for (size_t i = 0; i + 1 < ops.size(); ++i) {
          if (!inRowGroup.contains(ops[i]) &&
              !inRowGroup.contains(ops[i + 1]) &&
              initializes(ops[i], ops[i + 1])) {
            grouped.insert(ops[i]);
          }
        }
      }
      Operation *pendingFill = nullptr;
      for (Operation *op : ops) {
        // (The ops of a row group are compared, not used: the group's
        // outlining erased them.)
        if (auto group = rowGroups.find(op); group != rowGroups.end()) {
          outline(group->second, module, symbols, /*serial=*/false);
          continue;
        }
        if (inRowGroup.contains(op)) {
          continue;
        }
        if (grouped.contains(op)) {
          pendingFill = op;
          continue;
        }
        if (pendingFill) {
          outline({pendingFill, op}, module, symbols, /*serial=*/false);
          pendingFill = nullptr;
          continue;
        }
        if (isa<scf::ParallelOp>(op)) {
          SmallVector<linalg::LinalgOp> inner;
          op->walk(
              [&](linalg::LinalgOp linalgOp) { inner.push_back(linalgOp); });
          for (linalg::LinalgOp linalgOp : inner) {
            if (outlinable(linalgOp)) {
              outline(linalgOp.getOperation(), module, symbols,
                      /*serial=*/true);
            }
          }
        }
        if (outlinable(op)) {
          outline(op, module, symbols, /*serial=*/false);
        }
      }
    }
    // A buffer argument that no call passes together with an overlapping
    // one that is written is `noalias` for LLVM, which may then keep loads
    // in registers across stores.
    // func-to-llvm drops `llvm.noalias` on memref arguments, so the kernel
    // records the positions of the aligned pointers in its LLVM signature
    // and kiln-apply-noalias marks them after the conversion.
    for (auto &[name, mayAlias] : aliasing) {
      auto kernel = symbols.lookup<func::FuncOp>(name);
      SmallVector<int64_t> positions;
      int64_t position = 0;
      for (auto [i, clash] : llvm::enumerate(mayAlias)) {
        auto memref = dyn_cast<MemRefType>(kernel.getArgumentTypes()[i]);
        if (!memref) {
          ++position;
          continue;
        }
        if (!clash) {
          kernel.setArgAttr(i, mlir::kiln::kNoAliasArgAttr,
                            UnitAttr::get(&getContext()));
          positions.push_back(position + 1);
        }
        // allocated, aligned, offset, sizes, strides
        position += 3 + 2 * memref.getRank();
      }
      if (!positions.empty()) {
        kernel->setAttr(mlir::kiln::kNoAliasArgsAttr,
                        DenseI64ArrayAttr::get(&getContext(), positions));
      }
    }
  }

  /// Whether two different `known` roots are certainly different memory: a
  /// fresh allocation, a global, or an argument of the calling function
  /// (compiled code writes only the arguments a training step updates in
  /// place, which the runtime refuses to share memory with any other
  /// argument: ResultSpec::updates).
  static bool isKnownRoot(Value root) {
    if (auto arg = dyn_cast<BlockArgument>(root)) {
      return isa<func::FuncOp>(arg.getOwner()->getParentOp());
    }
    return isa_and_nonnull<memref::AllocOp, memref::AllocaOp,
                           memref::GetGlobalOp>(root.getDefiningOp());
  }

  /// Whether `op` can become a kernel: on buffers, and ranked ones
  /// (kiln-apply-noalias counts the words of ranked descriptors).
  static bool outlinable(Operation *op) {
    bool ranked = true;
    op->walk([&](Operation *inner) {
      ranked &= llvm::all_of(inner->getOperandTypes(), [](Type t) {
        return !isa<UnrankedMemRefType>(t);
      });
    });
    return op->getNumResults() == 0 && ranked;
  }

  /// Whether `fill` is a linalg.fill of a buffer that `next`, a linalg op
  /// later in the same block, takes as an init, with no op between them
  /// using any view of that buffer (the fill then runs just before `next`).
  static bool initializes(Operation *fill, Operation *next) {
    auto fillOp = dyn_cast<linalg::FillOp>(fill);
    auto nextOp = dyn_cast<linalg::LinalgOp>(next);
    if (!fillOp || !nextOp || isa<linalg::FillOp>(next) ||
        fill->getBlock() != next->getBlock() || !outlinable(fill) ||
        !outlinable(next) || !fillOp.hasPureBufferSemantics()) {
      return false;
    }
    Value buffer = fillOp.getDpsInitOperand(0)->get();
    if (!llvm::is_contained(nextOp.getDpsInits(), buffer)) {
      return false;
    }
    Value root = mlir::kiln::viewRoot(buffer);
    for (Operation *between = fill->getNextNode(); between != next;
         between = between->getNextNode()) {
      WalkResult used = between->walk([&](Operation *inner) {
        for (Value operand : inner->getOperands()) {
          if (isa<BaseMemRefType>(operand.getType()) &&
              mlir::kiln::viewRoot(operand) == root) {
            return WalkResult::interrupt();
          }
        }
        return WalkResult::advance();
      });
      if (used.wasInterrupted()) {
        return false;
      }
    }
    return true;
  }

  /// The buffers `op` and the ops nested in it use.
  static SmallVector<Value> usedBuffers(Operation *op) {
    SmallVector<Value> buffers;
    op->walk([&](Operation *inner) {
      for (Value operand : inner->getOperands()) {
        if (isa<BaseMemRefType>(operand.getType())) {
          buffers.push_back(operand);
        }
      }
    });
    return buffers;
  }

  /// The longest run of ops from `ops[start]` (at most kMaxRowGroup) that
  /// forms a row group and can run where its last op is: the ops between
  /// two of them have no memory effects or use none of the buffers of the
  /// ops before them (which move past them), and every buffer the group
  /// writes is a view of a fresh allocation that the group uses through
  /// that one view only. Empty if there is none.
  static SmallVector<Operation *> rowGroupAt(ArrayRef<Operation *> ops,
                                             size_t start) {
    SmallVector<linalg::LinalgOp> run;
    llvm::SmallPtrSet<Value, 8> movedRoots;
    SmallVector<Operation *> best;
    for (size_t end = start; end < ops.size() && end - start < kMaxRowGroup;
         ++end) {
      auto op = dyn_cast<linalg::LinalgOp>(ops[end]);
      if (!op || !outlinable(op)) {
        break;
      }
      if (!run.empty()) {
        Operation *prev = run.back();
        if (prev->getBlock() != op->getBlock()) {
          break;
        }
        bool movable = true;
        for (Operation *between = prev->getNextNode(); movable && between != op;
             between = between->getNextNode()) {
          movable = isMemoryEffectFree(between) ||
                    llvm::none_of(usedBuffers(between), [&](Value buffer) {
                      return movedRoots.contains(mlir::kiln::viewRoot(buffer));
                    });
        }
        if (!movable) {
          break;
        }
      }
      run.push_back(op);
      for (Value buffer : usedBuffers(op)) {
        movedRoots.insert(mlir::kiln::viewRoot(buffer));
      }
      if (run.size() >= 2 && mlir::kiln::rowGroupRank(run) &&
          separateMemory(run)) {
        best.assign(run.begin(), run.end());
      }
    }
    return best;
  }

  /// Whether every buffer that `ops` write is a view of a fresh allocation
  /// that they use through that view only.
  static bool separateMemory(ArrayRef<linalg::LinalgOp> ops) {
    SmallVector<Value> used;
    for (linalg::LinalgOp op : ops) {
      llvm::append_range(used, usedBuffers(op));
    }
    for (linalg::LinalgOp op : ops) {
      for (Value init : op.getDpsInits()) {
        Value root = mlir::kiln::viewRoot(init);
        if (!root.getDefiningOp<memref::AllocOp>() ||
            llvm::any_of(used, [&](Value buffer) {
              return buffer != init && mlir::kiln::viewRoot(buffer) == root;
            })) {
          return false;
        }
      }
    }
    return true;
  }

  /// The buffers `op` (or an op nested in it, or a kernel it calls) writes,
  /// as view roots.
  llvm::SmallPtrSet<Value, 4> writtenRoots(Operation *op) {
    llvm::SmallPtrSet<Value, 4> roots;
    op->walk([&](func::CallOp call) {
      auto found = writes.find(call.getCallee());
      for (auto [i, operand] : llvm::enumerate(call.getOperands())) {
        if (found == writes.end() ||
            (i < found->second.size() && found->second[i])) {
          if (isa<BaseMemRefType>(operand.getType())) {
            roots.insert(mlir::kiln::viewRoot(operand));
          }
        }
      }
    });
    op->walk([&](MemoryEffectOpInterface effects) {
      SmallVector<MemoryEffects::EffectInstance> instances;
      effects.getEffects(instances);
      for (const MemoryEffects::EffectInstance &effect : instances) {
        if (isa<MemoryEffects::Write>(effect.getEffect()) &&
            effect.getValue()) {
          roots.insert(mlir::kiln::viewRoot(effect.getValue()));
        }
      }
    });
    return roots;
  }

  /// For each argument of a call of `op`: may it overlap another buffer
  /// argument when one of the two is written? Anything whose origin is not
  /// known (a loop result, a select) may overlap whatever is written.
  /// `writtenSet`: what the op writes (writtenRoots).
  static SmallVector<bool>
  mayAlias(const llvm::SmallPtrSet<Value, 4> &writtenSet,
           ArrayRef<Value> arguments) {
    size_t n = arguments.size();
    SmallVector<Value> roots;
    SmallVector<bool> written, buffer, known;
    for (Value v : arguments) {
      roots.push_back(mlir::kiln::viewRoot(v));
      buffer.push_back(isa<BaseMemRefType>(v.getType()));
      written.push_back(buffer.back() && writtenSet.contains(roots.back()));
      Value root = roots.back();
      // Written buffers are always fresh allocations in compiled code.
      known.push_back(isKnownRoot(root) &&
                      (!written.back() ||
                       isa_and_nonnull<memref::AllocOp, memref::AllocaOp>(
                           root.getDefiningOp())));
    }
    SmallVector<bool> clash(n, false);
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = i + 1; j < n; ++j) {
        if (!buffer[i] || !buffer[j] || !(written[i] || written[j])) {
          continue;
        }
        if (roots[i] == roots[j] || !known[i] || !known[j]) {
          clash[i] = clash[j] = true;
        }
      }
    }
    return clash;
  }

  /// Replaces `ops` (one op, a fill and the op it initializes, or a row
  /// group, in program order) by a call to the kernel holding them (made if
  /// new), where the last one was. `serial`: the kernel runs inside a parallel
  /// loop.
  void outline(ArrayRef<Operation *> ops, ModuleOp module, SymbolTable &symbols,
               bool serial) {
    Operation *op = ops.back();
    // The kernel's arguments: the ops' operands and whatever their bodies
    // use from above, except constants, which the kernel holds itself.
    llvm::SetVector<Value> captured;
    for (Operation *each : ops) {
      captured.insert(each->getOperands().begin(), each->getOperands().end());
      getUsedValuesDefinedAbove(each->getRegions(), captured);
    }
    SmallVector<Value> arguments;
    SmallVector<Operation *> constants;
    for (Value v : captured) {
      Operation *def = v.getDefiningOp();
      if (def && def->hasTrait<OpTrait::ConstantLike>() &&
          def->getNumOperands() == 0 && def->getNumRegions() == 0) {
        if (!llvm::is_contained(constants, def)) {
          constants.push_back(def);
        }
      } else {
        arguments.push_back(v);
      }
    }
    SmallVector<Type> types;
    for (Value v : arguments) {
      types.push_back(v.getType());
    }

    OpBuilder builder(module.getContext());
    auto kernel =
        func::FuncOp::create(builder, op->getLoc(), "kernel",
                             FunctionType::get(module.getContext(), types, {}));
    kernel.setPrivate();
    // Kept out of line through LLVM too (func-to-llvm passes this on).
    kernel->setAttr("passthrough",
                    builder.getArrayAttr(builder.getStringAttr("noinline")));
    if (serial) {
      kernel->setAttr(mlir::kiln::kSerialKernelAttr, builder.getUnitAttr());
    }
    Block *entry = kernel.addEntryBlock();
    builder.setInsertionPointToStart(entry);
    IRMapping mapping;
    for (auto [v, arg] : llvm::zip(arguments, entry->getArguments())) {
      mapping.map(v, arg);
    }
    for (Operation *constant : constants) {
      builder.clone(*constant, mapping);
    }
    for (Operation *each : ops) {
      builder.clone(*each, mapping);
    }
    func::ReturnOp::create(builder, op->getLoc());

    // Identical kernels print identically. The flags are set here, not taken
    // from the command line: regions, every constant and no locations.
    std::string key;
    {
      OpPrintingFlags flags;
      flags.printGenericOpForm()
          .skipRegions(false)
          .enableDebugInfo(false)
          .elideLargeElementsAttrs(std::numeric_limits<int64_t>::max())
          .elideLargeResourceString(std::numeric_limits<int64_t>::max());
      llvm::raw_string_ostream os(key);
      kernel->print(os, flags);
    }
    auto [it, inserted] = kernels.try_emplace(key, StringRef());
    if (inserted) {
      kernel.setName("kiln_kernel_" + std::to_string(kernels.size() - 1));
      symbols.insert(kernel);
      it->second = kernel.getName();
    } else {
      kernel->erase();
    }
    llvm::SmallPtrSet<Value, 4> written;
    for (Operation *each : ops) {
      llvm::SmallPtrSet<Value, 4> roots = writtenRoots(each);
      written.insert(roots.begin(), roots.end());
    }
    SmallVector<bool> clash = mayAlias(written, arguments);
    SmallVector<bool> &argWrites = writes[it->second];
    argWrites.resize(arguments.size(), false);
    for (auto [i, v] : llvm::enumerate(arguments)) {
      argWrites[i] =
          argWrites[i] || (isa<BaseMemRefType>(v.getType()) &&
                           written.contains(mlir::kiln::viewRoot(v)));
    }
    auto [entryIt, fresh] = aliasing.try_emplace(it->second, clash);
    if (!fresh) {
      for (auto [seen, now] : llvm::zip(entryIt->second, clash)) {
        seen = seen || now;
      }
    }
    OpBuilder at(op);
    func::CallOp::create(at, op->getLoc(), it->second, TypeRange(), arguments);
    for (Operation *each : llvm::reverse(ops)) {
      each->erase();
    }
  }

  llvm::StringMap<StringRef> kernels;
  /// Per kernel, per argument: does it write the argument (at some call)?
  llvm::StringMap<SmallVector<bool>> writes;
  /// Per kernel, per argument: may it alias at some call?
  llvm::MapVector<StringRef, SmallVector<bool>> aliasing;
};

} // namespace
