//===- TileSelection.cpp - The tiles CPU code generation chooses ----------===//
//
// Implements TileSelection.h.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/TileSelection.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <numeric>

namespace mlir::kiln::cpu {

bool isTiledContraction(linalg::LinalgOp op) {
  if (!linalg::isaContractionOpInterface(op)) {
    return false;
  }
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  SmallVector<unsigned> parallel;
  op.getParallelDims(parallel);
  return succeeded(dims) && !parallel.empty() &&
         llvm::is_contained(dims->n, parallel.back());
}

SmallVector<int64_t> chooseTileSizes(linalg::LinalgOp op, int64_t tileM,
                                     int64_t tileN, int64_t width) {
  int64_t loops = op.getNumLoops();
  SmallVector<int64_t> sizes(loops, 1);
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  auto clampTo = [&](int64_t dim, int64_t size) {
    int64_t range = ranges[dim];
    sizes[dim] = ShapedType::isDynamic(range) ? size : std::min(size, range);
  };
  if (isTiledContraction(op)) {
    SmallVector<unsigned> parallel;
    op.getParallelDims(parallel);
    if (!parallel.empty()) {
      clampTo(parallel.back(), tileN);
    }
    if (parallel.size() >= 2) {
      clampTo(parallel[parallel.size() - 2], tileM);
    }
    return sizes;
  }
  if (loops > 0) {
    clampTo(loops - 1, width);
  }
  // A transpose reads its input along another loop than the one it writes
  // along: square width x width tiles, read row by row and transposed in
  // registers, instead of a column of scalar loads per output vector.
  if (auto transpose = dyn_cast<linalg::TransposeOp>(op.getOperation())) {
    ArrayRef<int64_t> perm = transpose.getPermutation();
    auto read = llvm::find(perm, int64_t(perm.size()) - 1);
    if (read != perm.end() && int64_t(read - perm.begin()) != loops - 1) {
      clampTo(read - perm.begin(), width);
    }
  }
  return sizes;
}

bool reductionsVectorizeExactly(linalg::LinalgOp op) {
  if (op.getNumReductionLoops() == 0) {
    return true;
  }
  Block *body = op.getBlock();
  auto readsAnInputElement = [&](Value value) {
    SmallVector<Value> worklist = {value};
    DenseSet<Value> seen;
    while (!worklist.empty()) {
      Value v = worklist.pop_back_val();
      if (!seen.insert(v).second) {
        continue;
      }
      if (auto arg = dyn_cast<BlockArgument>(v)) {
        if (arg.getOwner() == body &&
            arg.getArgNumber() < unsigned(op.getNumDpsInputs()) &&
            isa<ShapedType>(op.getDpsInputs()[arg.getArgNumber()].getType())) {
          return true;
        }
        continue;
      }
      Operation *def = v.getDefiningOp();
      if (def && def->getBlock() == body) {
        llvm::append_range(worklist, def->getOperands());
      }
    }
    return false;
  };
  for (OpOperand &init : op.getDpsInitsMutable()) {
    if (op.getMatchingIndexingMap(&init).isPermutation()) {
      continue; // not reduced: every iteration has its own element
    }
    unsigned position = init.getOperandNumber() - op.getNumDpsInputs();
    SmallVector<Operation *> combiners;
    Value reduced =
        matchReduction(op.getRegionOutputArgs(), position, combiners);
    if (!reduced || combiners.size() != 1 ||
        !linalg::getCombinerOpKind(combiners.front()) ||
        !readsAnInputElement(reduced)) {
      return false;
    }
  }
  return true;
}

bool touchesSubByteElements(linalg::LinalgOp op) {
  return llvm::any_of(op->getOperands(), [](Value v) {
    auto shaped = dyn_cast<ShapedType>(v.getType());
    Type elem = shaped ? shaped.getElementType() : Type();
    return elem && elem.isIntOrFloat() && elem.getIntOrFloatBitWidth() % 8;
  });
}

SmallVector<unsigned> chooseParallelDims(linalg::LinalgOp op) {
  SmallVector<unsigned> parallel;
  op.getParallelDims(parallel);
  bool contraction = isTiledContraction(op);
  if (parallel.size() >= 2 &&
      (contraction || parallel.back() == op.getNumLoops() - 1)) {
    parallel.pop_back(); // the columns: vectors (and register tiles)
  }
  return parallel;
}

TileParams TileParams::of(const TargetInfo &target, int64_t tileM,
                          int64_t tileN, int64_t width, int64_t blockK,
                          int64_t blockN, int64_t blockM) {
  auto either = [](int64_t given, int64_t derived) {
    return given > 0 ? given : derived;
  };
  int64_t longK = either(blockK, target.blockKLongReduction());
  return {either(tileM, target.tileM()),
          either(tileN, target.tileN()),
          either(width, target.vectorWidth()),
          either(blockK, target.blockK()),
          either(blockN, target.blockN()),
          either(blockM, target.blockM()),
          longK,
          either(blockN, target.blockN(longK)),
          either(blockM, target.blockM(longK)),
          target.packMinReuse,
          target.panelMinReuse,
          target.parallelRowBlocks,
          target.tileRowsAndPanelInL1(),
          target.l1DataBytes,
          target.l2Bytes};
}

namespace {

/// The unbatched input of a contraction indexed by exactly the loops
/// `outer` and `inner` in that order (A [K, M] stored transposed: (k, m);
/// B: (k, n) or (n, k)), with its innermost dimension contiguous, or null.
OpOperand *matrixOperand(linalg::LinalgOp op, unsigned outer, unsigned inner) {
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    auto type = dyn_cast<MemRefType>(input->get().getType());
    int64_t offset;
    SmallVector<int64_t> strides;
    if (type && map.getNumResults() == 2 && map.isProjectedPermutation() &&
        map.getDimPosition(0) == outer && map.getDimPosition(1) == inner &&
        succeeded(type.getStridesAndOffset(strides, offset)) &&
        strides.back() == 1) {
      return input;
    }
  }
  return nullptr;
}

/// Do the rows of a matrix operand lie a multiple of 4 KiB apart (or a
/// dynamic stride apart, which may be)? Such rows share cache sets, and a
/// block of them does not stay in cache unless copied; rows of other
/// strides spread over the sets, and copying them into a row-major block
/// measured slower (N = 8000: 196 -> 190 GFLOP/s on one core; M = 1536
/// gradients: 206 -> 187).
bool rowsAlias(OpOperand *operand) {
  auto type = cast<MemRefType>(operand->get().getType());
  int64_t offset;
  SmallVector<int64_t> strides;
  return succeeded(type.getStridesAndOffset(strides, offset)) &&
         (ShapedType::isDynamic(strides.front()) ||
          strides.front() * type.getElementTypeBitWidth() / 8 % 4096 == 0);
}

/// Do the rows of A stored transposed ([K, M], `operand`), read in place,
/// fall out of the caches between the panels of B that read them? A
/// register tile's column of A is one cache line per row, a row stride
/// apart; the kc = min(K, k-block) rows of a k-block fall into 4096 /
/// gcd(stride, 4096) of an x86 L1's 64 sets (each way 4 KiB), and when
/// those sets hold fewer than kc lines every panel of B reads them again
/// from L2, which keeps them only while the k-block of A ([kc, M]) fits in
/// it. Beyond that they come from L3, a line a row apart, and a copy of A
/// into contiguous [kc, blockM] blocks is faster. One Zen 5 core (1 MiB
/// L2), K dynamic as the models compile it, medians of five alternating
/// runs: gpt-small's fc1 weight gradient ([2048, 1536]ᵀ · [2048, 384], 6
/// KiB rows in 2 sets, a 3 MiB k-block) 177.3 -> 202.5 GFLOP/s, its q|k|v
/// one (1152 columns, 8 sets) 170.0 -> 195.8, the encoder-decoder's head
/// gradient ([512, 8000]ᵀ · [512, 512], 16 sets, 16 MiB) 182.9 -> 204.9;
/// two cores 363 -> 391, 381 -> 386 and 365 -> 402. Read in place stays
/// faster where the k-block fits in L2 (the encoder-decoder's 512 x 512
/// gradients, 1 MiB: 230 in place, 221 copied; gpt-small's 384-column ones,
/// 768 KiB: 204-207 against 183-198).
bool transposedLhsLeavesCaches(OpOperand *operand, int64_t k, int64_t kc,
                               const TileParams &p) {
  auto type = cast<MemRefType>(operand->get().getType());
  int64_t offset;
  SmallVector<int64_t> strides;
  if (failed(type.getStridesAndOffset(strides, offset)) ||
      ShapedType::isDynamic(strides.front()) ||
      ShapedType::isDynamic(type.getShape().back())) {
    return false; // rowsAlias decides
  }
  int64_t elementBytes =
      std::max<int64_t>(type.getElementTypeBitWidth() / 8, 1);
  int64_t rowBytes = strides.front() * elementBytes;
  int64_t rows = ShapedType::isDynamic(k) ? kc : std::min(k, kc);
  int64_t sets =
      std::min<int64_t>(64, 4096 / std::gcd<int64_t>(rowBytes, 4096));
  int64_t ways = std::max<int64_t>(p.l1DataBytes / 4096, 1);
  int64_t blockBytes = rows * type.getShape().back() * elementBytes;
  return sets * ways < rows && blockBytes > p.l2Bytes;
}

/// The input of a linalg.generic contraction stored as B transposed: indexed
/// by exactly the loops (n, k), of static shape, contiguous along k (a
/// kiln.linear weight [N, K]). Its register tiles would read a column of N
/// scattered elements per vector, so it is always copied, transposed, into
/// contiguous [kc, nc] blocks (the copy kiln.linear made of the whole
/// weight once per call, now made block by block while the block is in
/// cache). Null when there is none.
OpOperand *transposedOperand(linalg::LinalgOp op, unsigned n, unsigned k,
                             ArrayRef<unsigned> batch) {
  if (!isa<linalg::GenericOp>(op.getOperation())) {
    return nullptr;
  }
  SmallVector<unsigned> dims(batch);
  dims.append({n, k});
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    auto type = dyn_cast<MemRefType>(input->get().getType());
    int64_t offset;
    SmallVector<int64_t> strides;
    if (!type || map.getNumResults() != int64_t(dims.size()) ||
        !map.isProjectedPermutation() ||
        failed(type.getStridesAndOffset(strides, offset)) ||
        strides.back() != 1) {
      continue;
    }
    if (llvm::all_of(llvm::enumerate(dims), [&](auto d) {
          return map.getDimPosition(d.index()) == d.value();
        })) {
      return input;
    }
  }
  return nullptr;
}

/// A candidate copy of one operand (CpuPackAttr's fields).
struct Packing {
  unsigned operand;
  SmallVector<int64_t> dims;  // its two loops, outer first
  SmallVector<int64_t> reuse; // loops whose product is a block's reads
  bool transpose = false;
  int64_t minReuse = 0;
  int64_t panelDim = -1;
  int64_t panelWidth = 0;
};

} // namespace

CacheBlocking chooseCacheBlocking(linalg::LinalgOp op, const TileParams &p) {
  if (!isTiledContraction(op)) {
    return {};
  }
  SmallVector<unsigned> parallel, reduction;
  op.getParallelDims(parallel);
  op.getReductionDims(reduction);
  if (parallel.size() < 2 || reduction.size() != 1) {
    return {};
  }
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  auto exceeds = [&](unsigned dim, int64_t block) {
    return ShapedType::isDynamic(ranges[dim]) || ranges[dim] > block;
  };
  unsigned m = parallel[parallel.size() - 2], n = parallel.back(),
           k = reduction.front();
  SmallVector<int64_t> sizes(op.getNumLoops(), 0);
  OpOperand *lhsT = matrixOperand(op, k, m);
  // A long or dynamic reduction with an operand stored transposed takes the
  // target's k-block for those (TargetInfo::blockKLongReduction).
  int64_t blockK = p.blockK, blockN = p.blockN, blockM = p.blockM;
  if ((lhsT || transposedOperand(op, n, k, {})) &&
      (ShapedType::isDynamic(ranges[k]) || ranges[k] > 2 * p.blockK)) {
    blockK = p.blockKLong;
    blockN = p.blockNLong;
    blockM = p.blockMLong;
  }
  if (exceeds(n, blockN)) {
    sizes[n] = blockN;
  }
  if (exceeds(k, blockK)) {
    sizes[k] = blockK;
  }
  // The row block of a transposed A that is copied block by block: the
  // target's, or enough to run the blocks on all cores, each thread copying
  // the blocks it multiplies (below): smaller blocks where the target's
  // would be fewer, down to 8 register tiles. Copied by both threads
  // together, block after block, gpt-small's q|k|v weight gradient
  // ([2048, 1152]ᵀ · [2048, 384], 5 blocks of 256 rows) ran at 261 GFLOP/s
  // on two Zen 5 cores against 311 read in place; in 8 blocks of 144,
  // 306-361 (four runs alternating with in place's 265-316).
  int64_t rows = ranges[m], rowBlock = 0;
  if (exceeds(m, blockM)) {
    rowBlock = blockM;
    if (!ShapedType::isDynamic(rows) &&
        llvm::divideCeil(rows, rowBlock) < uint64_t(p.parallelRowBlocks)) {
      int64_t smaller =
          llvm::divideCeil(llvm::divideCeil(rows, p.parallelRowBlocks),
                           p.tileM) *
          p.tileM;
      if (smaller >= 8 * p.tileM) {
        rowBlock = smaller;
      }
    }
  }
  bool threadRows = rowBlock != 0 && !ShapedType::isDynamic(rows) &&
                    llvm::divideCeil(rows, rowBlock) >=
                        uint64_t(p.parallelRowBlocks);
  // Where a register tile's rows of A are to stay in L1 beside a panel of B
  // (AVX2), a transposed A whose row blocks run on all cores is always
  // copied, into micro-panels of its tile's rows (each thread its own
  // blocks, below). One Zen 3 core, K dynamic as the models compile it,
  // both choices compiled in one process and called alternately (medians
  // of 12 or more pairs, two sweeps): the weight gradients of gpt-small
  // 1.04-1.12x and of the encoder-decoder 1.01-1.25x (read in place or
  // copied row-major before). With rows that do not make enough blocks
  // for the threads, each block's copy would be shared by both cores (the
  // tiles' row loop runs on all of them): gpt-tiny's fc2 gradient
  // ([2048, 128]ᵀ · [2048, 512]) ran at 0.64x on two cores; those, and
  // columns too few (or too dynamic) to repay a copy, keep the rules below.
  bool lhsPanels = lhsT && p.lhsPanels && threadRows &&
                   !ShapedType::isDynamic(ranges[n]) &&
                   ranges[n] >= p.packMinReuse;
  if (lhsT && !lhsPanels && !rowsAlias(lhsT) &&
      !transposedLhsLeavesCaches(lhsT, ranges[k], blockK, p)) {
    lhsT = nullptr; // read in place
  }
  if (lhsT) {
    sizes[m] = rowBlock;
  }
  // The other parallel loops are batch loops (batch, heads). A B stored
  // transposed per batch (attention's keys) is copied batch by batch: the
  // batch loops are blocked by one, outermost, and run on all cores, each
  // thread copying into a buffer of its own.
  SmallVector<unsigned> batch;
  llvm::copy_if(parallel, std::back_inserter(batch),
                [&](unsigned d) { return d != m && d != n; });
  OpOperand *rhsT = transposedOperand(op, n, k, {});
  bool batchedB = false;
  if (!rhsT && !batch.empty()) {
    rhsT = transposedOperand(op, n, k, batch);
    batchedB = rhsT != nullptr;
  }
  if (batchedB) {
    for (unsigned d : batch) {
      sizes[d] = 1;
    }
  }
  bool unblocked = llvm::all_of(sizes, [](int64_t s) { return s == 0; });
  if (unblocked && !rhsT) {
    return {};
  }

  // Which operands to copy: B stored transposed, always; others when their
  // contiguous dimension blocking cuts them (B's rows only when they alias
  // in the caches or the copy is cut into micro-panels, below).
  SmallVector<Packing> packings;
  SmallVector<int64_t> rowDims;
  llvm::copy_if(parallel, std::back_inserter(rowDims),
                [&](unsigned d) { return d != n; });
  if (rhsT) {
    packings.push_back(
        {rhsT->getOperandNumber(), {int64_t(n), int64_t(k)}, {}, true});
  }
  for (OpOperand *rhs : {matrixOperand(op, k, n), matrixOperand(op, n, k)}) {
    AffineMap map = rhs ? op.getMatchingIndexingMap(rhs) : AffineMap();
    if (rhs && rhs != rhsT && sizes[map.getDimPosition(1)] != 0) {
      packings.push_back({rhs->getOperandNumber(),
                          {map.getDimPosition(0), map.getDimPosition(1)},
                          rowDims});
    }
  }
  if (lhsT && sizes[m] != 0) {
    packings.push_back(
        {lhsT->getOperandNumber(), {int64_t(k), int64_t(m)}, {int64_t(n)}});
  }
  for (Packing &packing : packings) {
    packing.minReuse = p.packMinReuse;
  }
  // The reads of a block, when known at compile time.
  auto staticReuse = [&](const Packing &packing) -> std::optional<int64_t> {
    int64_t product = 1;
    for (int64_t dim : packing.reuse) {
      if (ShapedType::isDynamic(ranges[dim])) {
        return std::nullopt;
      }
      product *= ranges[dim];
    }
    return product;
  };
  auto tooFewRows = [&](const Packing &packing) {
    std::optional<int64_t> reuse = staticReuse(packing);
    return !packing.reuse.empty() && reuse && *reuse < packing.minReuse;
  };
  llvm::erase_if(packings, tooFewRows);
  // A copy of B is cut into micro-panels along its columns when the block
  // is wider than one register tile (a linalg.generic can read a
  // transposed B's panels as (k, n)); then B is copied whatever its stride
  // (+10% for the [2048, 384] B of a weight gradient on Zen 4). A transposed
  // A is cut into micro-panels of its tile's rows where lhsPanels says
  // (above); elsewhere it stays one row-major block (AVX-512 on Zen 5
  // measured micro-panels of its rows slower: a copy scattered over many
  // panels cost more than it saved).
  for (Packing &packing : packings) {
    int64_t dim =
        packing.dims[0] == int64_t(k) ? packing.dims[1] : packing.dims[0];
    int64_t extent = sizes[dim] ? sizes[dim] : ranges[dim];
    bool readable = packing.dims[1] == dim || isa<linalg::GenericOp>(op);
    if (dim == int64_t(n) && readable && !ShapedType::isDynamic(extent) &&
        extent > p.tileN) {
      packing.panelDim = dim;
      packing.panelWidth = p.tileN;
    } else if (lhsPanels && packing.operand == lhsT->getOperandNumber()) {
      packing.panelDim = dim;
      packing.panelWidth = p.tileM;
    }
  }
  llvm::erase_if(packings, [&](Packing &packing) {
    // (A transposed A is copied as chosen above: its rows alias, or leave
    // the caches.)
    if (packing.transpose || rowsAlias(&op->getOpOperand(packing.operand)) ||
        (lhsT && packing.operand == lhsT->getOperandNumber())) {
      return false;
    }
    packing.minReuse = p.panelMinReuse;
    return !packing.panelWidth || tooFewRows(packing);
  });

  CacheBlocking result;
  if (!unblocked) {
    result.blocks = sizes;
  }
  // Batch blocks (one batch each) on all cores. Row blocks too when A is
  // copied block by block and there are enough of them: a block of A is
  // then copied and multiplied by the same thread, from its own caches,
  // with no barrier in between (the head's weight gradient, [2048, 4096]^T
  // [2048, 384], had spent 9% of its time in libomp's barriers, copying and
  // multiplying each of its 128 blocks in two parallel loops of their own,
  // and each core read half of the block it multiplied from the other
  // core's copy).
  if (batchedB) {
    llvm::append_range(result.threads, batch);
  } else if (threadRows && lhsT &&
             llvm::any_of(packings, [&](const Packing &packing) {
               return packing.operand == lhsT->getOperandNumber();
             })) {
    result.threads.push_back(m);
  }
  llvm::sort(result.threads);
  Builder b(op->getContext());
  for (const Packing &packing : packings) {
    // A run-time test only where the reads are not known here.
    bool dynamic = !packing.reuse.empty() && !staticReuse(packing);
    result.packs.push_back(CpuPackAttr::get(
        op->getContext(), packing.operand, b.getDenseI64ArrayAttr(packing.dims),
        packing.transpose, packing.panelDim, packing.panelWidth,
        dynamic ? b.getDenseI64ArrayAttr(packing.reuse) : DenseI64ArrayAttr(),
        dynamic ? packing.minReuse : 0));
  }
  return result;
}

CpuTilesAttr selectCpuTiles(linalg::LinalgOp op, const TileParams &params) {
  Builder b(op->getContext());
  SmallVector<int64_t> threads;
  for (unsigned dim : chooseParallelDims(op)) {
    threads.push_back(dim);
  }
  CacheBlocking blocking = chooseCacheBlocking(op, params);
  auto optional = [&](ArrayRef<int64_t> values, bool present) {
    return present ? b.getDenseI64ArrayAttr(values) : DenseI64ArrayAttr();
  };
  SmallVector<Attribute> packs(blocking.packs.begin(), blocking.packs.end());
  return CpuTilesAttr::get(
      op->getContext(),
      b.getDenseI64ArrayAttr(
          chooseTileSizes(op, params.tileM, params.tileN, params.width)),
      b.getDenseI64ArrayAttr(threads),
      optional(blocking.blocks, !blocking.blocks.empty()),
      optional(blocking.threads, !blocking.threads.empty()),
      packs.empty() ? ArrayAttr() : b.getArrayAttr(packs));
}

} // namespace mlir::kiln::cpu
