//===- GpuKernels.cpp - Contractions and reductions as tuned GPU kernels --===//
//
// Implements kiln-gpu-kernels: the linalg ops that the generic mapping
// (parallel loops tiled 16 x 16, one thread per output element) would run
// badly become gpu.launch ops of their own.
//
//  - A contraction (a matmul, a batched matmul, a projection over [B, T, D],
//    attention's Q.K^T, a weight gradient summing over B and T) is tiled by
//    128 x 128 outputs per block of 16 x 16 threads, each thread computing
//    8 x 8 of them in registers (runs of 4, read from shared memory 128 bits
//    at a time), with 8 x 128 tiles of each operand staged through shared
//    memory, loaded by the whole block in the order that reads global
//    memory contiguously. On sm_80 and newer the tiles are copied by
//    cp.async into two stages of shared memory, the next one filling while
//    the block multiplies the current one (one barrier a step); older GPUs
//    read the next tiles into registers instead. A grid too small to fill the
//    GPU splits the reduction over more blocks (split-K, decided at run time
//    for dynamic sizes); a second kernel adds the parts in order, so results do
//    not depend on timing. By default the arithmetic is fp32 FMA on the
//    CUDA cores, so results match the CPU's to rounding; `math=tf32`,
//    `math=tf32x3` and `math=bf16` multiply on the tensor cores instead
//    (mma.sync, each warp 64 x 32 outputs; docs/gpu.md).
//  - kiln.flash_attention and kiln.flash_attention_grad become the attention
//    kernels of FlashAttention.cpp.
//  - A reduction over at least 32 elements (softmax's max and sum,
//    layernorm's mean and variance, the loss) gives each output element a
//    block: the threads stride over the reduced elements, then combine their
//    partial results with gpu.all_reduce (warp shuffles, then shared memory).
//
// Both accept any loop order and any number of batch, m, n, k or reduced
// dimensions (linearized, and split again at each access).
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/GPU/Passes.h"

#include "compiler/Codegen/GPU/FlashAttention.h"

#include "compiler/Codegen/Common/Attributes.h"
#include "compiler/Codegen/Common/RowGroups.h"
#include "compiler/Codegen/Common/Views.h"
#include "dialects/Kiln/IR/KilnOps.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Debug.h"

#include <limits>

#define DEBUG_TYPE "kiln-gpu-kernels"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNGPUKERNELSPASS
#include "compiler/Codegen/GPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

/// Reductions over fewer elements than this keep one thread per output (a
/// static loop of 32 or more, unrolled, had taken 251 registers a thread).
constexpr int64_t kMinBlockReduction = 32;
/// Contraction tiling: a block of kThreads x kThreads threads computes
/// kTile x kTile outputs, kPerThread x kPerThread per thread in registers
/// (runs of kRun consecutive rows and columns, kThreads * kRun apart, read
/// from shared memory 128 bits at a time), stepping over the reduction
/// kDepth at a time.
constexpr int64_t kThreads = 16, kTile = 128, kDepth = 8, kRun = 4;
constexpr int64_t kPerThread = kTile / kThreads;
/// Split-K: a grid of B blocks splits the reduction into up to
/// kWantedBlocks / B parts (two blocks on each of an H100's or H200's 132
/// multiprocessors), so a grid of 132 blocks or fewer splits...
constexpr int64_t kWantedBlocks = 264;
/// ... into no more parts than the reduction has multiples of this many
/// steps (every part but the last is at least about this long).
constexpr int64_t kMinSplit = 128;

Value index(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

Value product(OpBuilder &b, Location loc, ArrayRef<Value> values) {
  if (values.empty()) {
    return index(b, loc, 1);
  }
  Value p = values.front();
  for (Value v : values.drop_front()) {
    p = arith::MulIOp::create(b, loc, p, v);
  }
  return p;
}

/// Splits `linear` into indices of `sizes` (the last one fastest).
SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value linear,
                               ArrayRef<Value> sizes) {
  SmallVector<Value> indices(sizes.size());
  for (size_t i = sizes.size(); i-- > 0;) {
    if (i == 0) {
      indices[i] = linear;
      break;
    }
    indices[i] = arith::RemUIOp::create(b, loc, linear, sizes[i]);
    linear = arith::DivUIOp::create(b, loc, linear, sizes[i]);
  }
  return indices;
}

/// The indices of `operand` at the iteration `loops` (one index per loop).
SmallVector<Value> operandIndices(OpBuilder &b, Location loc,
                                  linalg::LinalgOp op, OpOperand &operand,
                                  ArrayRef<Value> loops) {
  AffineMap map = op.getMatchingIndexingMap(&operand);
  SmallVector<Value> indices;
  for (unsigned r = 0; r < map.getNumResults(); ++r) {
    AffineExpr e = map.getResult(r);
    if (auto dim = dyn_cast<AffineDimExpr>(e)) {
      indices.push_back(loops[dim.getPosition()]);
    } else {
      indices.push_back(
          affine::AffineApplyOp::create(b, loc, map.getSubMap({r}), loops));
    }
  }
  return indices;
}

/// The loop sizes of a linalg op on buffers.
SmallVector<Value> loopSizes(OpBuilder &b, Location loc, linalg::LinalgOp op) {
  SmallVector<Value> sizes;
  for (Range range : op.createLoopRanges(b, loc)) {
    sizes.push_back(getValueOrCreateConstantIndexOp(b, loc, range.size));
  }
  return sizes;
}

/// ceil(a / b) for positive b.
Value ceilDiv(OpBuilder &b, Location loc, Value a, int64_t d) {
  return arith::CeilDivUIOp::create(b, loc, a, index(b, loc, d));
}

gpu::LaunchOp createLaunch(OpBuilder &b, Location loc, Value gridX, Value gridY,
                           Value blockX, Value blockY, TypeRange workgroup = {},
                           Value gridZ = {}) {
  Value one = index(b, loc, 1);
  auto launch = gpu::LaunchOp::create(
      b, loc, gridX, gridY, gridZ ? gridZ : one, blockX, blockY, one,
      /*dynamicSharedMemorySize=*/nullptr,
      /*asyncTokenType=*/nullptr, ValueRange(), workgroup);
  b.setInsertionPointToEnd(&launch.getBody().front());
  gpu::TerminatorOp::create(b, loc);
  b.setInsertionPointToStart(&launch.getBody().front());
  return launch;
}

/// The linalg.fill just before `op` (constants between them skipped) that
/// fills `init`, one of its inits, or null. kiln-outline-kernels{group-fills}
/// puts such a fill into the op's kernel; the kernel built for the op then
/// starts from the fill's value (`initialValues`) and the fill is erased
/// with the op, so it costs no launch of its own.
linalg::FillOp fillBefore(linalg::LinalgOp op) {
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode()) {
    if (prev->hasTrait<OpTrait::ConstantLike>()) {
      continue;
    }
    auto fill = dyn_cast<linalg::FillOp>(prev);
    if (!fill || !fill.hasPureBufferSemantics()) {
      return nullptr;
    }
    Value buffer = fill.getDpsInitOperand(0)->get();
    // An op that also reads the buffer (through any view) needs it filled.
    bool read = llvm::any_of(op.getDpsInputs(), [&](Value input) {
      return isa<BaseMemRefType>(input.getType()) &&
             mlir::kiln::viewRoot(input) == mlir::kiln::viewRoot(buffer);
    });
    return llvm::is_contained(op.getDpsInits(), buffer) && !read ? fill
                                                                 : nullptr;
  }
  return nullptr;
}

/// Per init of `op`: the value `fill` stores into it, or null (read it).
SmallVector<Value> initialValues(linalg::LinalgOp op, linalg::FillOp fill) {
  SmallVector<Value> values;
  for (Value init : op.getDpsInits()) {
    values.push_back(fill && fill.getDpsInitOperand(0)->get() == init
                         ? fill.getInputs()[0]
                         : Value());
  }
  return values;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

std::optional<gpu::AllReduceOperation> allReduceKind(Operation *combiner) {
  using K = gpu::AllReduceOperation;
  return llvm::TypeSwitch<Operation *, std::optional<K>>(combiner)
      .Case<arith::AddFOp, arith::AddIOp>([](auto) { return K::ADD; })
      .Case<arith::MulFOp, arith::MulIOp>([](auto) { return K::MUL; })
      .Case([](arith::MaximumFOp) { return K::MAXIMUMF; })
      .Case([](arith::MinimumFOp) { return K::MINIMUMF; })
      .Case([](arith::MaxNumFOp) { return K::MAXNUMF; })
      .Case([](arith::MinNumFOp) { return K::MINNUMF; })
      .Case([](arith::MaxSIOp) { return K::MAXSI; })
      .Case([](arith::MinSIOp) { return K::MINSI; })
      .Default([](Operation *) { return std::nullopt; });
}

/// Whether `value` is computed (in `body`) from any of `args`.
bool dependsOn(Value value, ArrayRef<BlockArgument> args) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    return llvm::is_contained(args, arg);
  }
  Operation *def = value.getDefiningOp();
  return def && llvm::any_of(def->getOperands(),
                             [&](Value v) { return dependsOn(v, args); });
}

struct ReductionPlan {
  SmallVector<Operation *> combiners; ///< One per output.
  SmallVector<gpu::AllReduceOperation> kinds;
};

/// The plan for a reduction every output of which accumulates one value per
/// iteration with one commutative combiner, or nothing; any number of
/// elements.
std::optional<ReductionPlan> planCombiners(linalg::LinalgOp op) {
  if (op.getNumReductionLoops() == 0) {
    return std::nullopt;
  }
  bool usesIndex = false;
  op->walk([&](linalg::IndexOp) { usesIndex = true; });
  if (usesIndex) {
    return std::nullopt;
  }
  Block *body = op.getBlock();
  SmallVector<BlockArgument> outs(op.getRegionOutputArgs());
  ReductionPlan plan;
  for (unsigned k = 0; k < outs.size(); ++k) {
    SmallVector<Operation *> combiners;
    Value reducedValue = matchReduction(outs, k, combiners);
    if (!reducedValue || combiners.size() != 1 ||
        combiners[0]->getBlock() != body || dependsOn(reducedValue, outs)) {
      return std::nullopt;
    }
    std::optional<gpu::AllReduceOperation> kind = allReduceKind(combiners[0]);
    if (!kind || !arith::getNeutralElement(combiners[0])) {
      return std::nullopt;
    }
    plan.combiners.push_back(combiners[0]);
    plan.kinds.push_back(*kind);
  }
  return plan;
}

/// The product of the static sizes of `op`'s loops from `from` on, or
/// kDynamic.
int64_t staticTrip(linalg::LinalgOp op, unsigned from,
                   std::optional<utils::IteratorType> only = std::nullopt) {
  int64_t trip = 1;
  for (auto [k, size, type] :
       llvm::enumerate(op.getStaticLoopRanges(), op.getIteratorTypesArray())) {
    if (k < from || (only && type != *only)) {
      continue;
    }
    trip = ShapedType::isDynamic(size) || ShapedType::isDynamic(trip)
               ? ShapedType::kDynamic
               : trip * size;
  }
  return trip;
}

/// planCombiners for a reduction over at least kMinBlockReduction elements
/// (fewer: one thread per output is as good).
std::optional<ReductionPlan> planReduction(linalg::LinalgOp op) {
  int64_t reduced = staticTrip(op, 0, utils::IteratorType::reduction);
  if (!ShapedType::isDynamic(reduced) && reduced < kMinBlockReduction) {
    return std::nullopt;
  }
  return planCombiners(op);
}

/// A block whose threads stride over `count` elements (thread t visits t,
/// t + blockDim, ...), carrying `carried`; `body` gets the element and the
/// carried values and returns the next ones.
scf::ForOp strideLoop(
    OpBuilder &b, Location loc, gpu::LaunchOp launch, Value count,
    ValueRange carried,
    function_ref<SmallVector<Value>(OpBuilder &, Value, ValueRange)> body) {
  auto loop = scf::ForOp::create(b, loc, launch.getThreadIds().x, count,
                                 launch.getBlockSize().x, carried);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  SmallVector<Value> next =
      body(b, loop.getInductionVar(), loop.getRegionIterArgs());
  if (!carried.empty()) { // (else the loop has its yield)
    scf::YieldOp::create(b, loc, next);
  }
  return loop;
}

/// The loop indices of `op` where the row (`rowIndices`, its first loops)
/// and the rest (`restIndices`, the others, in order) meet.
SmallVector<Value> joinIndices(ArrayRef<Value> rowIndices,
                               ArrayRef<Value> restIndices) {
  SmallVector<Value> loops(rowIndices);
  llvm::append_range(loops, restIndices);
  return loops;
}

/// In a row group's block: the buffers whose element of this row every
/// thread already holds (a reduction's result), and that value.
using RowValues = DenseMap<Value, Value>;

/// Maps `op`'s inputs at iteration `loops` into `mapping` (buffers loaded,
/// or taken from `known`; scalars as they are) and its linalg.index ops to
/// `loops`.
void mapInputs(OpBuilder &b, Location loc, linalg::LinalgOp op,
               ArrayRef<Value> loops, IRMapping &mapping,
               const RowValues &known = RowValues()) {
  for (OpOperand *input : op.getDpsInputOperands()) {
    Value value = input->get();
    if (auto it = known.find(value); it != known.end()) {
      value = it->second;
    } else if (isa<MemRefType>(value.getType())) {
      value = memref::LoadOp::create(b, loc, value,
                                     operandIndices(b, loc, op, *input, loops));
    }
    mapping.map(op.getMatchingBlockArgument(input), value);
  }
}

/// Clones `op`'s body with `mapping` (its linalg.index ops become `loops`)
/// and returns the values it yields.
SmallVector<Value> cloneBody(OpBuilder &b, linalg::LinalgOp op,
                             ArrayRef<Value> loops, IRMapping &mapping) {
  for (Operation &bodyOp : op.getBlock()->without_terminator()) {
    if (auto indexOp = dyn_cast<linalg::IndexOp>(bodyOp)) {
      mapping.map(indexOp.getResult(), loops[indexOp.getDim()]);
      continue;
    }
    b.clone(bodyOp, mapping);
  }
  SmallVector<Value> yielded;
  for (Value value : op.getBlock()->getTerminator()->getOperands()) {
    yielded.push_back(mapping.lookupOrDefault(value));
  }
  return yielded;
}

/// In a block of `launch`: reduces `op` at the parallel iteration
/// `parallelIndices` (its parallel loops, in order) over its reduction loops
/// (`reducedSizes`): the threads stride over the reduced elements (inputs in
/// `known` taken from it), combine their partial results with
/// gpu.all_reduce, and thread 0 combines the totals with the outputs (or
/// with `initial`, where given) and stores them. Returns, per output, the
/// stored value where every thread computed it too (its start was
/// `initial`, not the output, which thread 0 overwrites), else null.
SmallVector<Value> reduceInBlock(OpBuilder &b, Location loc,
                                 gpu::LaunchOp launch, linalg::LinalgOp op,
                                 const ReductionPlan &plan,
                                 ArrayRef<Value> initial,
                                 ArrayRef<Value> parallelIndices,
                                 ArrayRef<Value> reducedSizes,
                                 const RowValues &known = RowValues()) {
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  auto iteration = [&](ArrayRef<Value> reducedIndices) {
    SmallVector<Value> loops;
    auto p = parallelIndices.begin(), r = reducedIndices.begin();
    for (utils::IteratorType type : iterators) {
      loops.push_back(type == utils::IteratorType::reduction ? *r++ : *p++);
    }
    return loops;
  };
  SmallVector<Value> identities;
  for (Operation *combiner : plan.combiners) {
    identities.push_back(
        arith::ConstantOp::create(b, loc, *arith::getNeutralElement(combiner)));
  }
  // Each thread's partial results over the elements it visits.
  scf::ForOp loop =
      strideLoop(b, loc, launch, product(b, loc, reducedSizes), identities,
                 [&](OpBuilder &b, Value i, ValueRange partials) {
                   SmallVector<Value> loops =
                       iteration(delinearize(b, loc, i, reducedSizes));
                   IRMapping mapping;
                   mapInputs(b, loc, op, loops, mapping, known);
                   for (auto [arg, partial] :
                        llvm::zip(op.getRegionOutputArgs(), partials)) {
                     mapping.map(arg, partial);
                   }
                   return cloneBody(b, op, loops, mapping);
                 });
  // The block's results, combined with the outputs by thread 0.
  SmallVector<Value> totals;
  for (auto [partial, kind] : llvm::zip(loop.getResults(), plan.kinds)) {
    totals.push_back(gpu::AllReduceOp::create(
        b, loc, partial, gpu::AllReduceOperationAttr::get(b.getContext(), kind),
        /*uniform=*/b.getUnitAttr()));
  }
  Value zero = index(b, loc, 0);
  auto combine = [&](OpBuilder &b, size_t k, Value old) {
    Operation *combiner = plan.combiners[k];
    BlockArgument arg = op.getRegionOutputArgs()[k];
    IRMapping mapping;
    for (Value operand : combiner->getOperands()) {
      mapping.map(operand, operand == arg ? old : totals[k]);
    }
    return b.clone(*combiner, mapping)->getResult(0);
  };
  // Every thread's copy of the results that start from `initial`.
  SmallVector<Value> results(op.getNumDpsInits());
  for (size_t k = 0; k < results.size(); ++k) {
    if (initial[k]) {
      results[k] = combine(b, k, initial[k]);
    }
  }
  Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                      launch.getThreadIds().x, zero);
  auto ifFirst = scf::IfOp::create(b, loc, first, /*withElse=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifFirst.getThenRegion().front());
  SmallVector<Value> loops =
      iteration(SmallVector<Value>(reducedSizes.size(), zero));
  for (auto [k, output] : llvm::enumerate(op.getDpsInitsMutable())) {
    SmallVector<Value> indices = operandIndices(b, loc, op, output, loops);
    Value result =
        results[k]
            ? results[k]
            : combine(b, k,
                      memref::LoadOp::create(b, loc, output.get(), indices));
    memref::StoreOp::create(b, loc, result, output.get(), indices);
  }
  return results;
}

/// A launch of a block for each of `count` things (at least one block: an
/// empty launch is not allowed), with as many threads as there are
/// `elements` to visit in each (whole warps, 32 to 256; 256 if kDynamic);
/// the insertion point is left in the blocks that have a thing.
gpu::LaunchOp launchBlockPer(OpBuilder &b, Location loc, Value count,
                             int64_t elements) {
  int64_t threads =
      ShapedType::isDynamic(elements)
          ? 256
          : std::clamp<int64_t>((elements + 31) / 32 * 32, 32, 256);
  Value grid = arith::MaxUIOp::create(b, loc, count, index(b, loc, 1));
  auto launch = createLaunch(b, loc, grid, index(b, loc, 1),
                             index(b, loc, threads), index(b, loc, 1));
  Value active = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                       launch.getBlockIds().x, count);
  auto ifActive = scf::IfOp::create(b, loc, active, /*withElse=*/false);
  b.setInsertionPointToStart(&ifActive.getThenRegion().front());
  return launch;
}

/// A reduction over 32 or more elements: a block per output element.
void buildReduction(RewriterBase &b, linalg::LinalgOp op,
                    const ReductionPlan &plan, ArrayRef<Value> initial) {
  Location loc = op.getLoc();
  SmallVector<Value> sizes = loopSizes(b, loc, op);
  SmallVector<Value> parallelSizes, reducedSizes;
  for (auto [size, type] : llvm::zip(sizes, op.getIteratorTypesArray())) {
    (type == utils::IteratorType::reduction ? reducedSizes : parallelSizes)
        .push_back(size);
  }
  gpu::LaunchOp launch =
      launchBlockPer(b, loc, product(b, loc, parallelSizes),
                     staticTrip(op, 0, utils::IteratorType::reduction));
  reduceInBlock(b, loc, launch, op, plan, initial,
                delinearize(b, loc, launch.getBlockIds().x, parallelSizes),
                reducedSizes);
}

//===----------------------------------------------------------------------===//
// Row groups
//===----------------------------------------------------------------------===//

/// The ops of `func`, a kernel of kiln-outline-kernels{group-rows}, and
/// their number of row dimensions, if they form a row group (RowGroups.h)
/// that this pass builds: nothing else but constants in the function, every
/// buffer they write an argument that overlaps no other (kiln.noalias), and
/// every reduction one gpu.all_reduce can combine.
std::optional<unsigned> planRowGroup(func::FuncOp func,
                                     SmallVector<linalg::LinalgOp> &ops) {
  if (!func->hasAttr(mlir::kiln::kNoAliasArgsAttr) ||
      !func.getBody().hasOneBlock()) {
    return std::nullopt;
  }
  for (Operation &op : func.getBody().front()) {
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
      ops.push_back(linalgOp);
    } else if (!op.hasTrait<OpTrait::ConstantLike>() &&
               !isa<func::ReturnOp>(op)) {
      return std::nullopt;
    }
  }
  std::optional<unsigned> rank = mlir::kiln::rowGroupRank(ops);
  if (!rank) {
    return std::nullopt;
  }
  for (linalg::LinalgOp op : ops) {
    for (Value init : op.getDpsInits()) {
      auto arg = dyn_cast<BlockArgument>(init);
      if (!arg || arg.getOwner() != &func.getBody().front() ||
          !func.getArgAttr(arg.getArgNumber(), mlir::kiln::kNoAliasArgAttr)) {
        return std::nullopt;
      }
    }
    if (op.getNumReductionLoops() > 0 && !planCombiners(op)) {
      return std::nullopt;
    }
  }
  return rank;
}

/// A row group as one kernel: a block per row (the product of the first
/// `rank` loops), the ops one after the other, a barrier between two. A
/// reduction is reduced by the whole block (reduceInBlock); any other op's
/// elements of the row are strided over by the block's threads. A fill
/// that a reduction starts from (fillBefore) is not run: the reduction
/// starts from its value.
void buildRowGroup(RewriterBase &b, ArrayRef<linalg::LinalgOp> group,
                   unsigned rank) {
  SmallVector<linalg::LinalgOp> ops(group);
  Location loc = ops.front().getLoc();
  b.setInsertionPoint(ops.front());
  SmallVector<SmallVector<Value>> sizes;
  int64_t widest = 1;
  for (linalg::LinalgOp op : ops) {
    sizes.push_back(loopSizes(b, loc, op));
    int64_t trip = staticTrip(op, rank);
    widest = ShapedType::isDynamic(trip) || ShapedType::isDynamic(widest)
                 ? ShapedType::kDynamic
                 : std::max(widest, trip);
  }
  ArrayRef<Value> rowSizes = ArrayRef(sizes.front()).take_front(rank);
  gpu::LaunchOp launch =
      launchBlockPer(b, loc, product(b, loc, rowSizes), widest);
  SmallVector<Value> rowIndices =
      delinearize(b, loc, launch.getBlockIds().x, rowSizes);
  // Whether ops[k] is the fill that ops[k + 1], a reduction, starts from.
  auto startsFrom = [&](size_t k) {
    return k + 1 < ops.size() && ops[k + 1].getNumReductionLoops() > 0 &&
           fillBefore(ops[k + 1]) == ops[k].getOperation();
  };
  // The row's statistics every thread holds (a reduction's results): the
  // ops after it read them from registers, not memory, until an op writes
  // their buffer again.
  RowValues known;
  for (auto [k, op] : llvm::enumerate(ops)) {
    ArrayRef<Value> restSizes = ArrayRef(sizes[k]).drop_front(rank);
    if (startsFrom(k)) {
      continue; // Not run: the reduction after it starts from its value.
    }
    for (OpOperand &init : op.getDpsInitsMutable()) {
      known.erase(init.get());
    }
    if (op.getNumReductionLoops() > 0) {
      auto fill = k > 0 && startsFrom(k - 1)
                      ? cast<linalg::FillOp>(ops[k - 1].getOperation())
                      : linalg::FillOp();
      SmallVector<Value> results =
          reduceInBlock(b, loc, launch, op, *planCombiners(op),
                        initialValues(op, fill), rowIndices, restSizes, known);
      // A reduction of the group has no loop but the row's and reduced ones,
      // so each output holds one element of the row.
      for (auto [init, result] : llvm::zip(op.getDpsInits(), results)) {
        if (result) {
          known[init] = result;
        }
      }
    } else {
      strideLoop(
          b, loc, launch, product(b, loc, restSizes), {},
          [&](OpBuilder &b, Value i, ValueRange) {
            SmallVector<Value> loops =
                joinIndices(rowIndices, delinearize(b, loc, i, restSizes));
            IRMapping mapping;
            mapInputs(b, loc, op, loops, mapping, known);
            for (OpOperand &init : op.getDpsInitsMutable()) {
              BlockArgument arg = op.getMatchingBlockArgument(&init);
              if (!arg.use_empty()) {
                mapping.map(arg, memref::LoadOp::create(
                                     b, loc, init.get(),
                                     operandIndices(b, loc, op, init, loops)));
              }
            }
            SmallVector<Value> yielded = cloneBody(b, op, loops, mapping);
            for (auto [init, value] :
                 llvm::zip(op.getDpsInitsMutable(), yielded)) {
              memref::StoreOp::create(b, loc, value, init.get(),
                                      operandIndices(b, loc, op, init, loops));
            }
            return SmallVector<Value>();
          });
    }
    // What this op wrote, the next ones may read.
    if (k + 1 < ops.size()) {
      gpu::BarrierOp::create(b, loc);
    }
  }
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

struct ContractionPlan {
  linalg::ContractionDimensions dims;
  /// Whether an operand's innermost dimension is a reduction dimension (its
  /// tile is then read along k, else along m or n).
  bool lhsAlongK = false, rhsAlongK = false;
  /// Whether an operand read along m or n has the innermost of those
  /// dimensions innermost in memory: four consecutive elements of a tile
  /// row may then be one 16-byte cp.async (where the strides allow).
  bool lhsVectors = false, rhsVectors = false;
};

std::optional<ContractionPlan> planContraction(linalg::LinalgOp op) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      !linalg::isaContractionOpInterface(op)) {
    return std::nullopt;
  }
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = dyn_cast<MemRefType>(operand.get().getType());
    if (!type || !type.getElementType().isF32()) {
      return std::nullopt;
    }
  }
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  // A product with no m or no n dimension (a matrix times a vector, a dot:
  // layer norm's gradient sums x * gamma over D) would fill one row or
  // column of each 128 x 128 tile (a 64 x 64 one took 251 registers a
  // thread): a reduction instead.
  if (failed(dims) ||
      dims->batch.size() + dims->m.size() + dims->n.size() + dims->k.size() !=
          op.getNumLoops() ||
      dims->m.empty() || dims->n.empty()) {
    return std::nullopt;
  }
  auto alongK = [&](OpOperand *operand) {
    AffineMap map = op.getMatchingIndexingMap(operand);
    if (map.getNumResults() == 0) {
      return false;
    }
    auto last = dyn_cast<AffineDimExpr>(map.getResults().back());
    return last && llvm::is_contained(dims->k, last.getPosition());
  };
  auto innermost = [&](OpOperand *operand, ArrayRef<unsigned> xDims) {
    AffineMap map = op.getMatchingIndexingMap(operand);
    if (map.getNumResults() == 0 || xDims.empty()) {
      return false;
    }
    auto last = dyn_cast<AffineDimExpr>(map.getResults().back());
    return last && last.getPosition() == xDims.back();
  };
  ContractionPlan plan{*dims, alongK(op.getDpsInputOperand(0)),
                       alongK(op.getDpsInputOperand(1))};
  plan.lhsVectors =
      !plan.lhsAlongK && innermost(op.getDpsInputOperand(0), dims->m);
  plan.rhsVectors =
      !plan.rhsAlongK && innermost(op.getDpsInputOperand(1), dims->n);
  return plan;
}

/// The sizes of the loops `dims`, in order.
SmallVector<Value> sizesOf(ArrayRef<Value> sizes, ArrayRef<unsigned> dims) {
  SmallVector<Value> result;
  for (unsigned d : dims) {
    result.push_back(sizes[d]);
  }
  return result;
}

/// The block's tile-local index of a thread's `r`-th row (or column) of
/// outputs: runs of kRun consecutive ones, kThreads * kRun apart.
Value localOutput(OpBuilder &b, Location loc, Value thread, int64_t r) {
  Value base = arith::MulIOp::create(b, loc, thread, index(b, loc, kRun));
  return arith::AddIOp::create(
      b, loc, base, index(b, loc, r / kRun * kThreads * kRun + r % kRun));
}

/// TF32 (kiln-gpu-kernels{math=tf32}): the block's 8 warps compute 64 x 32
/// outputs each (2 x 4 warps), as 4 x 4 tiles of `mma.sync.m16n8k8` (16 x 8
/// outputs, 8 steps of the reduction). PTX fixes which lane holds which
/// element of a tile: lane l = 4g + t (g its group, t its place in it)
/// holds A's rows g and g + 8 at columns t and t + 4, B's column g at rows
/// t and t + 4, and C's rows g and g + 8 at columns 2t and 2t + 1. Which
/// rows of the block's tile a warp's tile rows are is free: row r = g + 8h
/// of m-tile i is warpM * 64 + (i / 2) * 32 + (g / 4) * 16 + 8h + (i % 2) * 4
/// + g % 4, column c of n-tile j is warpN * 32 + (c / 4) * 16 + 4j + c % 4,
/// so that the 32 lanes' reads of a fragment from the shared tiles (rows
/// kTile + kRun floats apart) fall in 32 distinct banks.
constexpr int64_t kWarpsM = 2, kWarpsN = 4, kWarpTileM = kTile / kWarpsM,
                  kWarpTileN = kTile / kWarpsN, kMmaM = 16, kMmaN = 8,
                  kMmaK = 8, kMmaKBf16 = 16, kMmaTilesM = kWarpTileM / kMmaM,
                  kMmaTilesN = kWarpTileN / kMmaN;
static_assert(kWarpsM * kWarpsN * 32 == kThreads * kThreads &&
                  kDepth == kMmaK &&
                  kMmaTilesM * kMmaTilesN * 4 == kPerThread * kPerThread,
              "the TF32 tiling covers the block's tile with the same "
              "accumulators per thread");

/// The offset of m-tile `i`'s row 8h (h = 0, 1) in its warp's rows, past
/// the lane's own part (TF32 layout above).
int64_t mmaRowOffset(int64_t i, int64_t h) {
  return (i / 2) * 32 + h * 8 + (i % 2) * 4;
}

/// A lane's parts of its warp's rows and columns (TF32 layout above):
/// `rowBase` + mmaRowOffset(i, h) is the block-tile row of A's and C's rows
/// g + 8h of m-tile i, `colBase` + 4j the column of B's column g of n-tile
/// j, `accColBase` + 4j + e that of C's column 2t + e; `t` and `t4` are the
/// reduction steps (t, t + 4) of the lane's A and B elements.
struct MmaLanes {
  Value rowBase, colBase, accColBase, t, t4;
  /// bf16's reduction steps: a lane's A and B registers pair steps 2t and
  /// 2t + 1.
  Value t2, t21;

  /// For the thread `linearThread` of a block of kThreads x kThreads.
  static MmaLanes of(OpBuilder &b, Location loc, Value linearThread) {
    auto c = [&](int64_t v) { return index(b, loc, v); };
    auto div = [&](Value x, int64_t d) {
      return arith::DivUIOp::create(b, loc, x, c(d)).getResult();
    };
    auto rem = [&](Value x, int64_t d) {
      return arith::RemUIOp::create(b, loc, x, c(d)).getResult();
    };
    auto mul = [&](Value x, int64_t d) {
      return arith::MulIOp::create(b, loc, x, c(d)).getResult();
    };
    auto add = [&](Value x, Value y) {
      return arith::AddIOp::create(b, loc, x, y).getResult();
    };
    MmaLanes lanes;
    Value lane = rem(linearThread, 32), warp = div(linearThread, 32);
    lanes.t = rem(lane, 4);
    lanes.t4 = add(lanes.t, c(4));
    lanes.t2 = mul(lanes.t, 2);
    lanes.t21 = add(lanes.t2, c(1));
    // g / 4 * 16 + g % 4 with g = lane / 4.
    Value group = add(mul(div(lane, 16), 16), rem(div(lane, 4), 4));
    Value warpCol = mul(rem(warp, kWarpsN), kWarpTileN);
    lanes.rowBase = add(mul(div(warp, kWarpsN), kWarpTileM), group);
    lanes.colBase = add(warpCol, group);
    // Column 2t + e: (2t + e) / 4 * 16 + (2t + e) % 4 = t / 2 * 16 +
    // t % 2 * 2 + e.
    lanes.accColBase =
        add(warpCol, add(mul(div(lanes.t, 2), 16), mul(rem(lanes.t, 2), 2)));
    return lanes;
  }
};

/// One step of kMmaK of the reduction on the tensor cores: the warp's 4 x 4
/// tiles of mma.sync.m16n8k8 on the values staged in stage `stage` of
/// `lhsTile` and `rhsTile` (stages x kDepth x kTile + kRun, k after the
/// stage), accumulating into `acc`
/// (accumulator (i * kMmaTilesN + j) * 4 + e is C's element e of tile (i,
/// j)); returns the new accumulators. The staged values are TF32 already
/// (math tf32), or, with `split` (math tf32x3), fp32 values that each
/// fragment splits into big = tf32(x) and small = tf32(x - big): a product
/// is small_a big_b + big_a small_b + big_a big_b, three mma.sync, the
/// small terms first (only small_a small_b, about 2^-22 of it, is left out).
SmallVector<Value> multiplyOnTensorCores(OpBuilder &b, Location loc,
                                         const MmaLanes &lanes, Value stage,
                                         Value lhsTile, Value rhsTile,
                                         ValueRange acc, bool split) {
  Type i32 = b.getI32Type(), f32 = b.getF32Type();
  // A fragment's element: its TF32 bits, and with `split` its remainder's.
  struct Element {
    Value big, small;
  };
  auto fragment = [&](Value tile, Value row, Value base, int64_t offset) {
    Value v = memref::LoadOp::create(
        b, loc, tile,
        ValueRange{stage, row,
                   arith::AddIOp::create(b, loc, base, index(b, loc, offset))});
    if (!split) {
      return Element{arith::BitcastOp::create(b, loc, i32, v), Value()};
    }
    Value big = NVVM::ConvertFloatToTF32Op::create(b, loc, i32, v,
                                                   NVVM::FPRoundingMode::RNA);
    Value rest = arith::SubFOp::create(
        b, loc, v, arith::BitcastOp::create(b, loc, f32, big));
    // An infinite big part (x infinite, or rounded up to infinity) leaves
    // no small part: x - big would be NaN or infinite, and so the sum.
    Value finite = arith::CmpFOp::create(
        b, loc, arith::CmpFPredicate::OLT, math::AbsFOp::create(b, loc, rest),
        arith::ConstantOp::create(
            b, loc, b.getF32FloatAttr(std::numeric_limits<float>::infinity())));
    rest = arith::SelectOp::create(
        b, loc, finite, rest,
        arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0)));
    Value small = NVVM::ConvertFloatToTF32Op::create(b, loc, i32, rest,
                                                     NVVM::FPRoundingMode::RNA);
    return Element{big, small};
  };
  // B's fragments for every n-tile, then A's of one m-tile at a time (fewer
  // live registers: split, each is two).
  SmallVector<SmallVector<Element, 4>> bFragments;
  for (int64_t j = 0; j < kMmaTilesN; ++j) {
    bFragments.push_back({fragment(rhsTile, lanes.t, lanes.colBase, 4 * j),
                          fragment(rhsTile, lanes.t4, lanes.colBase, 4 * j)});
  }
  auto parts = [](ArrayRef<Element> elements, bool small) {
    SmallVector<Value, 4> values;
    for (const Element &e : elements) {
      values.push_back(small ? e.small : e.big);
    }
    return values;
  };
  auto resultType =
      LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
  auto multiplyAdd = [&](ValueRange a, ValueRange c, ValueRange sums) {
    auto mma =
        NVVM::MmaOp::create(b, loc, resultType, a, c, sums,
                            {kMmaM, kMmaN, kMmaK}, std::nullopt, std::nullopt,
                            std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::tf32,
                                                          NVVM::MMATypes::tf32},
                            std::array<NVVM::MMALayout, 2>{
                                NVVM::MMALayout::row, NVVM::MMALayout::col});
    SmallVector<Value, 4> result;
    for (int64_t e = 0; e < 4; ++e) {
      result.push_back(LLVM::ExtractValueOp::create(b, loc, mma, e));
    }
    return result;
  };
  SmallVector<Value> sums;
  for (int64_t i = 0; i < kMmaTilesM; ++i) {
    int64_t top = mmaRowOffset(i, 0), bottom = mmaRowOffset(i, 1);
    SmallVector<Element, 4> aFragment = {
        fragment(lhsTile, lanes.t, lanes.rowBase, top),
        fragment(lhsTile, lanes.t, lanes.rowBase, bottom),
        fragment(lhsTile, lanes.t4, lanes.rowBase, top),
        fragment(lhsTile, lanes.t4, lanes.rowBase, bottom)};
    for (int64_t j = 0; j < kMmaTilesN; ++j) {
      SmallVector<Value, 4> tile(acc.slice((i * kMmaTilesN + j) * 4, 4));
      SmallVector<Value, 4> aBig = parts(aFragment, false),
                            bBig = parts(bFragments[j], false);
      if (split) {
        tile = multiplyAdd(parts(aFragment, true), bBig, tile);
        tile = multiplyAdd(aBig, parts(bFragments[j], true), tile);
      }
      llvm::append_range(sums, multiplyAdd(aBig, bBig, tile));
    }
  }
  return sums;
}

/// One step of kMmaKBf16 (16) of the reduction on the tensor cores in
/// bf16: the warp's 4 x 4 tiles of mma.sync.m16n8k16 with bf16 operands on
/// the values staged in stage `stage` of `lhsTile` and `rhsTile` (16 deep;
/// fp32 values rounded to bf16 already: their low 16 bits zero), as
/// multiplyOnTensorCores. PTX's bf16 layout pairs the reduction: lane 4g + t
/// holds A's rows g and g + 8 at steps 2t and 2t + 1 (a0, a1) and 2t + 8 and
/// 2t + 9 (a2, a3; one register each, the even step in the low half), B's
/// column g at steps 2t and 2t + 1 (b0) and 2t + 8 and 2t + 9 (b1), and C as
/// TF32's.
SmallVector<Value> multiplyOnTensorCoresBf16(OpBuilder &b, Location loc,
                                             const MmaLanes &lanes, Value stage,
                                             Value lhsTile, Value rhsTile,
                                             ValueRange acc) {
  Type i32 = b.getI32Type(), f32 = b.getF32Type();
  auto constant = [&](uint32_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(int32_t(v)))
        .getResult();
  };
  // The bf16 pair (tile[even][x], tile[even + 1][x]) in one register, even
  // = 2t + `half` * 8.
  auto pair = [&](Value tile, Value base, int64_t offset, int64_t half) {
    Value x = arith::AddIOp::create(b, loc, base, index(b, loc, offset));
    auto bits = [&](Value step) {
      Value row = arith::AddIOp::create(b, loc, step, index(b, loc, half * 8));
      return arith::BitcastOp::create(
          b, loc, i32,
          memref::LoadOp::create(b, loc, tile, ValueRange{stage, row, x}));
    };
    Value low = arith::ShRUIOp::create(b, loc, bits(lanes.t2), constant(16));
    Value high =
        arith::AndIOp::create(b, loc, bits(lanes.t21), constant(0xffff0000u));
    return arith::OrIOp::create(b, loc, high, low).getResult();
  };
  SmallVector<SmallVector<Value, 2>, 4> bRegisters;
  for (int64_t j = 0; j < kMmaTilesN; ++j) {
    bRegisters.push_back({pair(rhsTile, lanes.colBase, 4 * j, 0),
                          pair(rhsTile, lanes.colBase, 4 * j, 1)});
  }
  auto resultType =
      LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
  SmallVector<Value> sums;
  for (int64_t i = 0; i < kMmaTilesM; ++i) {
    int64_t top = mmaRowOffset(i, 0), bottom = mmaRowOffset(i, 1);
    SmallVector<Value, 4> aRegisters = {
        pair(lhsTile, lanes.rowBase, top, 0),
        pair(lhsTile, lanes.rowBase, bottom, 0),
        pair(lhsTile, lanes.rowBase, top, 1),
        pair(lhsTile, lanes.rowBase, bottom, 1)};
    for (int64_t j = 0; j < kMmaTilesN; ++j) {
      SmallVector<Value, 4> tile(acc.slice((i * kMmaTilesN + j) * 4, 4));
      auto mma = NVVM::MmaOp::create(
          b, loc, resultType, aRegisters, bRegisters[j], tile,
          {kMmaM, kMmaN, kMmaKBf16}, std::nullopt, std::nullopt,
          std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::bf16,
                                        NVVM::MMATypes::bf16},
          std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                         NVVM::MMALayout::col});
      for (int64_t e = 0; e < 4; ++e) {
        sums.push_back(LLVM::ExtractValueOp::create(b, loc, mma, e));
      }
    }
  }
  return sums;
}

/// The arithmetic of contractions (kiln-gpu-kernels{math}).
enum class ContractionMath { fp32, tf32, tf32x3, bf16 };

/// How a contraction's operand tiles reach shared memory.
enum class Staging {
  /// Read into registers a step ahead, stored to one shared buffer (any
  /// GPU).
  registers,
  /// cp.async into two shared buffers, a step ahead (sm_80 and newer).
  asyncCopies
};

void buildContraction(RewriterBase &b, linalg::LinalgOp op,
                      const ContractionPlan &plan, Value initial,
                      ContractionMath math, Staging staging) {
  // cp.async (nvgpu.device_async_copy) reads from memrefs whose innermost
  // stride is 1 by their type; others go through registers.
  bool async =
      staging == Staging::asyncCopies &&
      llvm::all_of(op.getDpsInputOperands(), [](OpOperand *operand) {
        return cast<MemRefType>(operand->get().getType()).isLastDimUnitStride();
      });
  bool tensorCores = math != ContractionMath::fp32;
  // The reduction steps a tile holds: bf16's m16n8k16 takes 16 at a time.
  const int64_t depth = math == ContractionMath::bf16 ? kMmaKBf16 : kDepth;
  Location loc = op.getLoc();
  const linalg::ContractionDimensions &dims = plan.dims;
  SmallVector<Value> sizes = loopSizes(b, loc, op);
  SmallVector<Value> batchSizes = sizesOf(sizes, dims.batch),
                     mSizes = sizesOf(sizes, dims.m),
                     nSizes = sizesOf(sizes, dims.n),
                     kSizes = sizesOf(sizes, dims.k);
  Value batch = product(b, loc, batchSizes), m = product(b, loc, mSizes),
        n = product(b, loc, nSizes), k = product(b, loc, kSizes);
  Value tilesN = ceilDiv(b, loc, n, kTile);
  Value one = index(b, loc, 1), zero = index(b, loc, 0);
  // Grid x: the n tiles of every batch; grid y: the m tiles; grid z: the
  // parts of the reduction.
  Value gridX = arith::MaxUIOp::create(
      b, loc, arith::MulIOp::create(b, loc, tilesN, batch), one);
  Value gridY = arith::MaxUIOp::create(b, loc, ceilDiv(b, loc, m, kTile), one);
  // Split-K: a grid of B blocks where kWantedBlocks / B is 2 or more splits
  // the reduction into up to that many parts, at most k / kMinSplit of
  // them, each a multiple of `depth` steps but the last. The parts' sums go to
  // `partials` ([splits, batch * m * n]), which a second kernel adds to the
  // output in order: the result does not depend on timing. Sizes known to give
  // one part emit neither.
  auto staticProduct = [&](ArrayRef<unsigned> ds) -> std::optional<int64_t> {
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    int64_t p = 1;
    for (unsigned d : ds) {
      if (ShapedType::isDynamic(ranges[d])) {
        return std::nullopt;
      }
      p *= ranges[d];
    }
    return p;
  };
  std::optional<int64_t> staticK = staticProduct(dims.k),
                         staticM = staticProduct(dims.m),
                         staticN = staticProduct(dims.n),
                         staticBatch = staticProduct(dims.batch);
  bool maySplit = !(staticK && *staticK / kMinSplit <= 1);
  if (staticM && staticN && staticBatch) {
    int64_t blocks =
        std::max<int64_t>((*staticN + kTile - 1) / kTile * *staticBatch, 1) *
        std::max<int64_t>((*staticM + kTile - 1) / kTile, 1);
    if (kWantedBlocks / blocks <= 1) {
      maySplit = false; // one part, whatever k is
    } else if (staticK) {
      // As the host code below computes it.
      int64_t parts = std::min(std::max<int64_t>(kWantedBlocks / blocks, 1),
                               std::max<int64_t>(*staticK / kMinSplit, 1));
      int64_t chunk = std::max<int64_t>(
          ((*staticK + parts - 1) / parts + depth - 1) / depth * depth, depth);
      maySplit = (*staticK + chunk - 1) / chunk > 1;
    }
  }
  Value splits = one, chunk = k, split, outputs, partials;
  if (maySplit) {
    Value blocks = arith::MulIOp::create(b, loc, gridX, gridY);
    Value wanted = arith::MaxUIOp::create(
        b, loc,
        arith::DivUIOp::create(b, loc, index(b, loc, kWantedBlocks), blocks),
        one);
    Value most = arith::MaxUIOp::create(
        b, loc, arith::DivUIOp::create(b, loc, k, index(b, loc, kMinSplit)),
        one);
    Value parts = arith::MinUIOp::create(b, loc, wanted, most);
    chunk = arith::MaxUIOp::create(
        b, loc,
        arith::MulIOp::create(
            b, loc,
            ceilDiv(b, loc, arith::CeilDivUIOp::create(b, loc, k, parts),
                    depth),
            index(b, loc, depth)),
        index(b, loc, depth));
    splits = arith::MaxUIOp::create(
        b, loc, arith::CeilDivUIOp::create(b, loc, k, chunk), one);
    split =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt, splits, one);
    outputs = arith::MulIOp::create(b, loc,
                                    arith::MulIOp::create(b, loc, batch, m), n);
    partials = memref::AllocOp::create(
        b, loc,
        MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                        b.getF32Type()),
        ValueRange{arith::SelectOp::create(b, loc, split, splits, zero),
                   outputs});
  }

  // kRun columns of padding keep rows 16-byte aligned (128-bit loads) and
  // put the threads that store a column along k in distinct banks; cp.async
  // fills one stage while the block reads the other.
  auto tileType = MemRefType::get(
      {async ? 2 : 1, depth, kTile + kRun}, b.getF32Type(), AffineMap(),
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup));
  auto launch =
      createLaunch(b, loc, gridX, gridY, index(b, loc, kThreads),
                   index(b, loc, kThreads), {tileType, tileType}, splits);
  Value lhsTile = launch.getWorkgroupAttributions()[0];
  Value rhsTile = launch.getWorkgroupAttributions()[1];

  Value tx = launch.getThreadIds().x, ty = launch.getThreadIds().y;
  Value safeTilesN = arith::MaxUIOp::create(b, loc, tilesN, one);
  Value batchIndex =
      arith::DivUIOp::create(b, loc, launch.getBlockIds().x, safeTilesN);
  Value n0 = arith::MulIOp::create(
      b, loc,
      arith::RemUIOp::create(b, loc, launch.getBlockIds().x, safeTilesN),
      index(b, loc, kTile));
  Value m0 = arith::MulIOp::create(b, loc, launch.getBlockIds().y,
                                   index(b, loc, kTile));
  Value part = launch.getBlockIds().z;
  Value kBegin = arith::MulIOp::create(b, loc, part, chunk);
  Value kEnd = arith::MinUIOp::create(
      b, loc, k, arith::AddIOp::create(b, loc, kBegin, chunk));
  // An empty batch still runs its one block (guarded by inBatch below): its
  // indices must not divide by zero.
  SmallVector<Value> safeBatchSizes;
  for (Value size : batchSizes) {
    safeBatchSizes.push_back(arith::MaxUIOp::create(b, loc, size, one));
  }
  SmallVector<Value> batchIndices =
      delinearize(b, loc, batchIndex, safeBatchSizes);
  Value inBatch = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                        batchIndex, batch);
  Value zeroF = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
  // Whether i < iEnd and j < jEnd in a batch that exists.
  auto within = [&](Value i, Value iEnd, Value j, Value jEnd) -> Value {
    return arith::AndIOp::create(
        b, loc,
        arith::AndIOp::create(
            b, loc,
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, i, iEnd),
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, j, jEnd)),
        inBatch);
  };
  Value linearThread = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, ty, index(b, loc, kThreads)), tx);

  // The loop indices of the iteration (batch, m, n, k).
  auto iteration = [&](ArrayRef<Value> bIdx, ArrayRef<Value> mIdx,
                       ArrayRef<Value> nIdx, ArrayRef<Value> kIdx) {
    SmallVector<Value> loops(op.getNumLoops());
    auto place = [&](ArrayRef<unsigned> ds, ArrayRef<Value> values) {
      for (auto [d, v] : llvm::zip(ds, values)) {
        loops[d] = v;
      }
    };
    place(dims.batch, bIdx);
    place(dims.m, mIdx);
    place(dims.n, nIdx);
    place(dims.k, kIdx);
    for (Value &v : loops) {
      if (!v) {
        v = zero; // a dimension the operand does not use
      }
    }
    return loops;
  };

  // Where this thread's e-th element of a depth x kTile tile of operand
  // `which` (0: lhs along m, 1: rhs along n) goes: the block's threads read
  // consecutive elements of the operand's innermost dimension; with cp.async
  // and an operand that may be copied 16 bytes at a time (plan.*Vectors),
  // the thread's elements are runs of 4 consecutive in a tile row (run r =
  // e / 4 at kk = thread / 32 + 8r, xx = thread % 32 * 4 + e % 4), one copy
  // a run where the call's strides allow.
  const int64_t loadsPerThread = depth * kTile / (kThreads * kThreads);
  constexpr int64_t kRunRows = kThreads * kThreads * kRun / kTile;
  static_assert(kDepth * kTile == kThreads * kThreads * kRun,
                "a thread's elements of an 8-deep tile are one run of kRun");
  auto inRuns = [&](unsigned which) {
    return async && (which == 0 ? plan.lhsVectors : plan.rhsVectors);
  };
  auto tilePlace = [&](unsigned which, int64_t e) -> std::pair<Value, Value> {
    bool alongK = which == 0 ? plan.lhsAlongK : plan.rhsAlongK;
    if (inRuns(which)) {
      Value row = arith::AddIOp::create(
          b, loc,
          arith::DivUIOp::create(b, loc, linearThread,
                                 index(b, loc, kTile / kRun)),
          index(b, loc, e / kRun * kRunRows));
      Value column = arith::MulIOp::create(
          b, loc,
          arith::RemUIOp::create(b, loc, linearThread,
                                 index(b, loc, kTile / kRun)),
          index(b, loc, kRun));
      return {row,
              arith::AddIOp::create(b, loc, column, index(b, loc, e % kRun))};
    }
    if (alongK && depth > kDepth) {
      // Deep tiles (bf16): a thread's elements are consecutive along k in
      // one row (half a row each: xx = thread / 2), so that its copies share
      // one row's address (one per element kept more than the 128
      // registers a thread has).
      Value half =
          arith::RemUIOp::create(b, loc, linearThread, index(b, loc, 2));
      return {arith::AddIOp::create(
                  b, loc,
                  arith::MulIOp::create(b, loc, half,
                                        index(b, loc, loadsPerThread)),
                  index(b, loc, e)),
              arith::DivUIOp::create(b, loc, linearThread, index(b, loc, 2))};
    }
    Value linear = arith::AddIOp::create(
        b, loc, linearThread, index(b, loc, e * kThreads * kThreads));
    if (alongK) {
      return {arith::RemUIOp::create(b, loc, linear, index(b, loc, depth)),
              arith::DivUIOp::create(b, loc, linear, index(b, loc, depth))};
    }
    return {arith::DivUIOp::create(b, loc, linear, index(b, loc, kTile)),
            arith::RemUIOp::create(b, loc, linear, index(b, loc, kTile))};
  };
  // This thread's e-th element of operand `which`'s tile at k0: its place
  // in the tile (kk, xx), along k and along m or n (gk, gx), and whether it
  // lies inside the operand and this part of the reduction.
  struct TileElement {
    Value kk, xx, gk, gx, inside;
  };
  auto tileElement = [&](unsigned which, int64_t e, Value k0) {
    auto [kk, xx] = tilePlace(which, e);
    Value gk = arith::AddIOp::create(b, loc, k0, kk);
    Value gx =
        arith::AddIOp::create(b, loc, which == 0 ? m0 : n0, xx).getResult();
    Value inside = within(gk, kEnd, gx, which == 0 ? m : n);
    return TileElement{kk, xx, gk, gx, inside};
  };
  // The indices into operand `which` of its element (gk, gx) of the batch
  // `bIdx`.
  auto operandAt = [&](unsigned which, Value gk, Value gx,
                       ArrayRef<Value> bIdx) {
    OpOperand *operand = op.getDpsInputOperand(which);
    SmallVector<Value> kIdx = delinearize(b, loc, gk, kSizes);
    SmallVector<Value> xIdx =
        delinearize(b, loc, gx, which == 0 ? mSizes : nSizes);
    SmallVector<Value> loops = which == 0 ? iteration(bIdx, xIdx, {}, kIdx)
                                          : iteration(bIdx, {}, xIdx, kIdx);
    return operandIndices(b, loc, op, *operand, loops);
  };
  // Registers: this thread's elements of the tiles of both operands at k0
  // (zero outside the operand or past this part of the reduction).
  auto loadTiles = [&](Value k0) {
    SmallVector<Value> values;
    for (unsigned which = 0; which < 2; ++which) {
      for (int64_t e = 0; e < loadsPerThread; ++e) {
        TileElement element = tileElement(which, e, k0);
        auto ifInside =
            scf::IfOp::create(b, loc, b.getF32Type(), element.inside,
                              /*withElseRegion=*/true);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(&ifInside.getThenRegion().front());
        Value v = memref::LoadOp::create(
            b, loc, op.getDpsInputOperand(which)->get(),
            operandAt(which, element.gk, element.gx, batchIndices));
        scf::YieldOp::create(b, loc, v);
        b.setInsertionPointToStart(&ifInside.getElseRegion().front());
        scf::YieldOp::create(b, loc, zeroF);
        values.push_back(ifInside.getResult(0));
      }
    }
    return values;
  };
  // cp.async: this thread's elements of the tiles at k0 into stage `stage`,
  // one group; an element outside copies no bytes and is filled with zero
  // (its indices, never read, are clamped to the operand's first element).
  SmallVector<Value> safeBatchIndices;
  if (async) {
    safeBatchIndices = delinearize(
        b, loc, arith::SelectOp::create(b, loc, inBatch, batchIndex, zero),
        safeBatchSizes);
  }
  // Whether operand `which` (plan.*Vectors) may be copied 16 bytes at a
  // time in this call: its first element 16-byte aligned, its innermost
  // dimension contiguous and a multiple of 4 long, its other strides
  // multiples of 4 elements (uniform: every thread takes the same branch).
  auto vectorsFit = [&](unsigned which) -> Value {
    Value memref = op.getDpsInputOperand(which)->get();
    auto meta = memref::ExtractStridedMetadataOp::create(b, loc, memref);
    Value address = arith::AddIOp::create(
        b, loc, memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref),
        arith::MulIOp::create(b, loc, meta.getOffset(), index(b, loc, 4)));
    auto multipleOf = [&](Value v, int64_t d) {
      return arith::CmpIOp::create(
                 b, loc, arith::CmpIPredicate::eq,
                 arith::RemUIOp::create(b, loc, v, index(b, loc, d)), zero)
          .getResult();
    };
    Value fits = multipleOf(address, 16);
    int64_t rank = meta.getStrides().size();
    for (int64_t d = 0; d < rank; ++d) {
      Value ok =
          d + 1 < rank
              ? multipleOf(meta.getStrides()[d], 4)
              : arith::AndIOp::create(
                    b, loc,
                    arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                          meta.getStrides()[d], one),
                    multipleOf(meta.getSizes()[d], 4))
                    .getResult();
      fits = arith::AndIOp::create(b, loc, fits, ok);
    }
    return fits;
  };
  Value fitLhs, fitRhs;
  if (inRuns(0)) {
    fitLhs = vectorsFit(0);
  }
  if (inRuns(1)) {
    fitRhs = vectorsFit(1);
  }
  // Runs `body(vectors)` for operand `which`: under a branch on whether its
  // 16-byte copies fit this call where its elements are copied in runs.
  auto perOperand = [&](unsigned which,
                        llvm::function_ref<void(bool vectors)> body) {
    Value fits = which == 0 ? fitLhs : fitRhs;
    if (!fits) {
      body(false);
      return;
    }
    auto branch = scf::IfOp::create(b, loc, fits, /*withElse=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&branch.getThenRegion().front());
    body(true);
    b.setInsertionPointToStart(&branch.getElseRegion().front());
    body(false);
  };
  // Operand `which`'s run of four elements along m or n from its element
  // `first` (a multiple of 4) at k0 into stage `stage`, from (safeK, safeX):
  // the run's start, or the operand's first element where the run lies outside
  // (nothing is read then).
  auto copyRun = [&](unsigned which, int64_t first, Value stage, Value k0,
                     bool vectors) {
    Value tile = which == 0 ? lhsTile : rhsTile;
    Value operand = op.getDpsInputOperand(which)->get();
    auto [kk, xx] = tilePlace(which, first);
    Value gk = arith::AddIOp::create(b, loc, k0, kk);
    Value gx = arith::AddIOp::create(b, loc, which == 0 ? m0 : n0, xx);
    Value extent = which == 0 ? m : n;
    Value inK = arith::AndIOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, gk, kEnd),
        inBatch);
    Value inside = arith::AndIOp::create(
        b, loc, inK,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, gx, extent));
    Value safeK = arith::SelectOp::create(b, loc, inside, gk, zero);
    Value safeX = arith::SelectOp::create(b, loc, inside, gx, zero);
    if (vectors) {
      // One copy; the elements past the extent (none, the innermost
      // size being a multiple of 4) zero-filled.
      Value count = arith::SelectOp::create(
          b, loc, inside,
          arith::MinUIOp::create(b, loc,
                                 arith::SubIOp::create(b, loc, extent, gx),
                                 index(b, loc, kRun)),
          zero);
      nvgpu::DeviceAsyncCopyOp::create(
          b, loc, tile, ValueRange{stage, kk, xx}, operand,
          operandAt(which, safeK, safeX, safeBatchIndices),
          b.getIndexAttr(kRun), /*srcElements=*/count, b.getUnitAttr());
      return;
    }
    // One element at a time: element e from (safeK, safeX + e), read
    // where it lies inside. Past the extent, safeX + e names up to 3
    // elements beyond it (a row on where m or n spans several
    // dimensions) that are never read (srcElements 0); clamping each
    // took a register more than the 128 a thread has.
    for (int64_t e = 0; e < kRun; ++e) {
      Value step = index(b, loc, e);
      Value in = arith::AndIOp::create(
          b, loc, inK,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                arith::AddIOp::create(b, loc, gx, step),
                                extent));
      nvgpu::DeviceAsyncCopyOp::create(
          b, loc, tile,
          ValueRange{stage, kk, arith::AddIOp::create(b, loc, xx, step)},
          operand,
          operandAt(which, safeK, arith::AddIOp::create(b, loc, safeX, step),
                    safeBatchIndices),
          b.getIndexAttr(1),
          /*srcElements=*/arith::SelectOp::create(b, loc, in, one, zero),
          UnitAttr());
    }
  };
  auto copyTiles = [&](Value stage, Value k0) {
    for (unsigned which = 0; which < 2; ++which) {
      Value tile = which == 0 ? lhsTile : rhsTile;
      Value operand = op.getDpsInputOperand(which)->get();
      perOperand(which, [&](bool vectors) {
        if (inRuns(which)) {
          for (int64_t r = 0; r < loadsPerThread / kRun; ++r) {
            copyRun(which, r * kRun, stage, k0, vectors);
          }
          return;
        }
        for (int64_t e = 0; e < loadsPerThread; ++e) {
          TileElement element = tileElement(which, e, k0);
          auto clamped = [&](Value v) {
            return arith::SelectOp::create(b, loc, element.inside, v, zero)
                .getResult();
          };
          Value gk = clamped(element.gk), gx = clamped(element.gx);
          SmallVector<Value> from = operandAt(which, gk, gx, safeBatchIndices);
          nvgpu::DeviceAsyncCopyOp::create(
              b, loc, tile, ValueRange{stage, element.kk, element.xx}, operand,
              from, b.getIndexAttr(1),
              /*srcElements=*/clamped(one), UnitAttr());
        }
      });
    }
    NVVM::CpAsyncCommitGroupOp::create(b, loc);
  };

  std::optional<MmaLanes> lanes;
  if (tensorCores) {
    lanes = MmaLanes::of(b, loc, linearThread);
  }
  // TF32: operands rounded to TF32 (to nearest, ties away: cvt.rna) once
  // per element, as they go into shared memory (registers) or by the thread
  // that copied them once its copies have landed (cp.async); tf32x3 splits
  // them when it reads them.
  // bf16: rounded to bf16 (to nearest even: cvt.rn.bf16.f32), kept as
  // fp32 with the low 16 bits zero.
  bool rounded = math == ContractionMath::tf32 || math == ContractionMath::bf16;
  auto staged = [&](Value v) -> Value {
    if (math == ContractionMath::bf16) {
      Value rounded = arith::TruncFOp::create(b, loc, b.getBF16Type(), v);
      return arith::ExtFOp::create(b, loc, b.getF32Type(), rounded);
    }
    if (math != ContractionMath::tf32) {
      return v;
    }
    Value rounded = NVVM::ConvertFloatToTF32Op::create(
        b, loc, b.getI32Type(), v, NVVM::FPRoundingMode::RNA);
    return arith::BitcastOp::create(b, loc, b.getF32Type(), rounded);
  };

  // The block's products of the tiles in stage `stage` of shared memory,
  // added to `acc`.
  constexpr int64_t kAccumulators = kPerThread * kPerThread;
  auto multiplyTiles = [&](Value stage, ValueRange acc) -> SmallVector<Value> {
    if (tensorCores) {
      return math == ContractionMath::bf16
                 ? multiplyOnTensorCoresBf16(b, loc, *lanes, stage, lhsTile,
                                             rhsTile, acc)
                 : multiplyOnTensorCores(
                       b, loc, *lanes, stage, lhsTile, rhsTile, acc,
                       /*split=*/math == ContractionMath::tf32x3);
    }
    auto inner =
        scf::ForOp::create(b, loc, zero, index(b, loc, depth), one, acc);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(inner.getBody());
    Value kk = inner.getInductionVar();
    // Runs of kRun consecutive elements: 128-bit shared-memory loads.
    SmallVector<Value> a, c;
    for (int64_t r = 0; r < kPerThread; ++r) {
      a.push_back(memref::LoadOp::create(
          b, loc, lhsTile, ValueRange{stage, kk, localOutput(b, loc, ty, r)}));
      c.push_back(memref::LoadOp::create(
          b, loc, rhsTile, ValueRange{stage, kk, localOutput(b, loc, tx, r)}));
    }
    SmallVector<Value> sums;
    for (int64_t i = 0; i < kPerThread; ++i) {
      for (int64_t j = 0; j < kPerThread; ++j) {
        sums.push_back(math::FmaOp::create(
            b, loc, a[i], c[j], inner.getRegionIterArgs()[i * kPerThread + j]));
      }
    }
    scf::YieldOp::create(b, loc, sums);
    return SmallVector<Value>(inner.getResults());
  };

  SmallVector<Value> init(kAccumulators, zeroF);
  scf::ForOp kLoop;
  if (async) {
    // Two stages: step s multiplies stage s % 2 while the copies of step
    // s + 1 fill the other. One barrier a step: after it, every thread's
    // copies into this stage have landed, and every thread has finished
    // reading the other stage (the step before), which the copies issued
    // after it overwrite.
    auto first = scf::IfOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, kBegin, kEnd),
        /*withElse=*/false);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&first.getThenRegion().front());
      copyTiles(zero, kBegin);
    }
    kLoop =
        scf::ForOp::create(b, loc, kBegin, kEnd, index(b, loc, depth), init);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(kLoop.getBody());
    Value k0 = kLoop.getInductionVar();
    Value stage = arith::RemUIOp::create(
        b, loc,
        arith::DivUIOp::create(b, loc,
                               arith::SubIOp::create(b, loc, k0, kBegin),
                               index(b, loc, depth)),
        index(b, loc, 2));
    NVVM::CpAsyncWaitGroupOp::create(b, loc, 0);
    if (rounded) {
      // Each thread rounds what it copied (another's copies may not have
      // landed yet).
      for (unsigned which = 0; which < 2; ++which) {
        Value tile = which == 0 ? lhsTile : rhsTile;
        for (int64_t e = 0; e < loadsPerThread; ++e) {
          auto [kk, xx] = tilePlace(which, e);
          SmallVector<Value, 3> at = {stage, kk, xx};
          memref::StoreOp::create(
              b, loc, staged(memref::LoadOp::create(b, loc, tile, at)), tile,
              at);
        }
      }
    }
    gpu::BarrierOp::create(b, loc);
    Value next = arith::AddIOp::create(b, loc, k0, index(b, loc, depth));
    auto more = scf::IfOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, next, kEnd),
        /*withElse=*/false);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&more.getThenRegion().front());
      copyTiles(arith::SubIOp::create(b, loc, one, stage), next);
    }
    scf::YieldOp::create(b, loc,
                         multiplyTiles(stage, kLoop.getRegionIterArgs()));
  } else {
    // Software pipelining through registers: the next tiles are read from
    // global memory while the block multiplies the ones in shared memory.
    llvm::append_range(init, loadTiles(kBegin));
    kLoop =
        scf::ForOp::create(b, loc, kBegin, kEnd, index(b, loc, depth), init);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(kLoop.getBody());
    Value k0 = kLoop.getInductionVar();
    ValueRange carried = kLoop.getRegionIterArgs();
    for (unsigned which = 0; which < 2; ++which) {
      for (int64_t e = 0; e < loadsPerThread; ++e) {
        auto [kk, xx] = tilePlace(which, e);
        memref::StoreOp::create(
            b, loc, staged(carried[kAccumulators + which * loadsPerThread + e]),
            which == 0 ? lhsTile : rhsTile, ValueRange{zero, kk, xx});
      }
    }
    gpu::BarrierOp::create(b, loc);
    SmallVector<Value> next =
        loadTiles(arith::AddIOp::create(b, loc, k0, index(b, loc, depth)));
    SmallVector<Value> sums =
        multiplyTiles(zero, carried.take_front(kAccumulators));
    gpu::BarrierOp::create(b, loc);
    llvm::append_range(sums, next);
    scf::YieldOp::create(b, loc, sums);
  }

  // Where each accumulator goes in the block's tile (row, column).
  SmallVector<std::pair<Value, Value>> places(kAccumulators);
  for (int64_t i = 0; i < kPerThread; ++i) {
    for (int64_t j = 0; j < kPerThread; ++j) {
      if (!tensorCores) {
        places[i * kPerThread + j] = {localOutput(b, loc, ty, i),
                                      localOutput(b, loc, tx, j)};
        continue;
      }
      // Here i is an m-tile and a row half, j an n-tile and a column.
      int64_t tileM = i / 2, half = i % 2, tileN = j / 2, e = j % 2;
      places[(tileM * kMmaTilesN + tileN) * 4 + half * 2 + e] = {
          arith::AddIOp::create(b, loc, lanes->rowBase,
                                index(b, loc, mmaRowOffset(tileM, half))),
          arith::AddIOp::create(b, loc, lanes->accColBase,
                                index(b, loc, 4 * tileN + e))};
    }
  }

  // out += acc where inside the output, or, split, the part's sums into
  // `partials`.
  OpOperand &output = op.getDpsInitsMutable()[0];
  auto storeOutputs = [&](bool toPartials) {
    for (int64_t i = 0; i < kPerThread; ++i) {
      for (int64_t j = 0; j < kPerThread; ++j) {
        auto [localM, localN] = places[i * kPerThread + j];
        Value gm = arith::AddIOp::create(b, loc, m0, localM);
        Value gn = arith::AddIOp::create(b, loc, n0, localN);
        Value inside = within(gm, m, gn, n);
        auto ifInside = scf::IfOp::create(b, loc, inside, /*withElse=*/false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(&ifInside.getThenRegion().front());
        Value acc = kLoop.getResult(i * kPerThread + j);
        if (toPartials) {
          Value row = arith::AddIOp::create(
              b, loc, arith::MulIOp::create(b, loc, batchIndex, m), gm);
          Value linear = arith::AddIOp::create(
              b, loc, arith::MulIOp::create(b, loc, row, n), gn);
          memref::StoreOp::create(b, loc, acc, partials,
                                  ValueRange{part, linear});
          continue;
        }
        SmallVector<Value> loops =
            iteration(batchIndices, delinearize(b, loc, gm, mSizes),
                      delinearize(b, loc, gn, nSizes), {});
        SmallVector<Value> indices = operandIndices(b, loc, op, output, loops);
        Value old = initial
                        ? initial
                        : memref::LoadOp::create(b, loc, output.get(), indices);
        memref::StoreOp::create(b, loc, arith::AddFOp::create(b, loc, old, acc),
                                output.get(), indices);
      }
    }
  };
  LLVM_DEBUG(
      llvm::dbgs() << DEBUG_TYPE ": contraction "
                   << op->getName().getStringRef()
                   << (maySplit ? ", k may split\n" : ", k never splits\n"));
  if (!maySplit) {
    storeOutputs(/*toPartials=*/false);
    return;
  }
  auto ifSplit = scf::IfOp::create(b, loc, split, /*withElse=*/true);
  b.setInsertionPointToStart(&ifSplit.getThenRegion().front());
  storeOutputs(/*toPartials=*/true);
  b.setInsertionPointToStart(&ifSplit.getElseRegion().front());
  storeOutputs(/*toPartials=*/false);

  // out += the parts' sums in order, one thread per output element (n
  // innermost). Unsplit, its grid has no blocks, which the runtime does not
  // launch (mgpuLaunchKernel); a launch under an scf.if would make the host
  // wait for the stream around it.
  b.setInsertionPointAfter(launch);
  constexpr int64_t kSumThreads = 256;
  Value sumBlocks = arith::SelectOp::create(
      b, loc, split,
      arith::MaxUIOp::create(b, loc, ceilDiv(b, loc, outputs, kSumThreads),
                             one),
      zero);
  auto sum =
      createLaunch(b, loc, sumBlocks, one, index(b, loc, kSumThreads), one);
  // Named apart from the product's kernel (`<function>_kernel`), so that a
  // profile tells them apart.
  if (auto func = op->getParentOfType<func::FuncOp>()) {
    auto name = FlatSymbolRefAttr::get(
        b.getStringAttr(func.getName() + "_split_sum_kernel"));
    sum.setModuleAttr(name);
    sum.setFunctionAttr(name);
  }
  Value linear =
      arith::AddIOp::create(b, loc,
                            arith::MulIOp::create(b, loc, sum.getBlockIds().x,
                                                  index(b, loc, kSumThreads)),
                            sum.getThreadIds().x);
  auto ifActive = scf::IfOp::create(
      b, loc,
      arith::AndIOp::create(b, loc, split,
                            arith::CmpIOp::create(b, loc,
                                                  arith::CmpIPredicate::ult,
                                                  linear, outputs)),
      /*withElse=*/false);
  b.setInsertionPointToStart(&ifActive.getThenRegion().front());
  auto addParts = scf::ForOp::create(
      b, loc, zero, splits, one,
      ValueRange{arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0))});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(addParts.getBody());
    Value v = memref::LoadOp::create(
        b, loc, partials, ValueRange{addParts.getInductionVar(), linear});
    scf::YieldOp::create(b, loc,
                         ValueRange{arith::AddFOp::create(
                             b, loc, addParts.getRegionIterArgs()[0], v)});
  }
  SmallVector<Value> bmn = delinearize(b, loc, linear, {batch, m, n});
  SmallVector<Value> loops = iteration(delinearize(b, loc, bmn[0], batchSizes),
                                       delinearize(b, loc, bmn[1], mSizes),
                                       delinearize(b, loc, bmn[2], nSizes), {});
  SmallVector<Value> indices = operandIndices(b, loc, op, output, loops);
  Value old =
      initial ? initial : memref::LoadOp::create(b, loc, output.get(), indices);
  memref::StoreOp::create(
      b, loc, arith::AddFOp::create(b, loc, old, addParts.getResult(0)),
      output.get(), indices);
  b.setInsertionPointAfter(sum);
  memref::DeallocOp::create(b, loc, partials);
}

struct GpuKernels
    : public mlir::kiln::impl::KilnGpuKernelsPassBase<GpuKernels> {
  using Base::Base;

  void runOnOperation() override {
    // The math is checked against the architecture the module is compiled
    // for before anything changes.
    auto module = getOperation()->getParentOfType<ModuleOp>();
    auto target = module ? module->getAttrOfType<mlir::kiln::TargetAttr>(
                               mlir::kiln::kTargetAttr)
                         : mlir::kiln::TargetAttr();
    if (math != "fp32") {
      std::string why = mlir::kiln::gpuMathError(math, target ? target.getGpu()
                                                              : StringRef());
      if (!why.empty()) {
        getOperation()->emitError() << "kiln-gpu-kernels: " << why;
        return signalPassFailure();
      }
    }
    ContractionMath contractionMath = math == "tf32" ? ContractionMath::tf32
                                      : math == "tf32x3"
                                          ? ContractionMath::tf32x3
                                      : math == "bf16" ? ContractionMath::bf16
                                                       : ContractionMath::fp32;
    // cp.async (sm_80 and newer) where the module names such a GPU.
    Staging staging =
        target && mlir::kiln::gpuChipVersion(target.getGpu()) >= 80
            ? Staging::asyncCopies
            : Staging::registers;
    IRRewriter rewriter(&getContext());
    // Attention: kernels of its own (FlashAttention.cpp).
    SmallVector<Operation *> attention;
    getOperation().walk([&](Operation *op) {
      if (isa<mlir::kiln::FlashAttentionOp, mlir::kiln::FlashAttentionGradOp>(
              op) &&
          cast<DestinationStyleOpInterface>(op).hasPureBufferSemantics()) {
        attention.push_back(op);
      }
    });
    for (Operation *op : attention) {
      LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": flash attention kernels for "
                              << op->getName().getStringRef() << "\n");
      if (auto forward = dyn_cast<mlir::kiln::FlashAttentionOp>(op)) {
        mlir::kiln::buildFlashAttention(rewriter, forward);
      } else {
        mlir::kiln::buildFlashAttentionGrad(
            rewriter, cast<mlir::kiln::FlashAttentionGradOp>(op));
      }
    }
    if (auto func = dyn_cast<func::FuncOp>(getOperation())) {
      SmallVector<linalg::LinalgOp> group;
      if (std::optional<unsigned> rank = planRowGroup(func, group)) {
        LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": row group of " << group.size()
                                << " ops, " << *rank << " row dimensions\n");
        buildRowGroup(rewriter, group, *rank);
        for (linalg::LinalgOp op : llvm::reverse(group)) {
          rewriter.eraseOp(op);
        }
        return;
      }
    }
    SmallVector<linalg::LinalgOp> ops;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op.hasPureBufferSemantics() &&
          llvm::all_of(op.getIndexingMapsArray(), [](AffineMap map) {
            return map.isProjectedPermutation(/*allowZeroInResults=*/true);
          })) {
        ops.push_back(op);
      }
    });
    for (linalg::LinalgOp op : ops) {
      rewriter.setInsertionPoint(op);
      linalg::FillOp fill = fillBefore(op);
      SmallVector<Value> initial = initialValues(op, fill);
      if (auto plan = planContraction(op)) {
        buildContraction(rewriter, op, *plan, initial.front(), contractionMath,
                         staging);
      } else if (auto plan = planReduction(op)) {
        LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": block reduction "
                                << op->getName().getStringRef() << "\n");
        buildReduction(rewriter, op, *plan, initial);
      } else {
        continue;
      }
      LLVM_DEBUG(if (fill) llvm::dbgs()
                 << DEBUG_TYPE ": starts from its fill's value\n");
      rewriter.eraseOp(op);
      if (fill) {
        rewriter.eraseOp(fill);
      }
    }
  }
};

} // namespace
