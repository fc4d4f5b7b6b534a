//===- TileAndVectorize.cpp - Register tiles and vectors for the CPU ------===//
//
// Implements kiln-tile-and-vectorize.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/Passes.h"

#include "compiler/Codegen/CPU/TargetInfo.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/Transforms/VectorRewritePatterns.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kiln-tile-and-vectorize"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNTILEANDVECTORIZEPASS
#include "compiler/Codegen/CPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

/// Is `op` a contraction that register tiles suit: one whose columns (its
/// last parallel loop, along which a tile's vectors run) are an `n` loop of
/// linalg's contraction dimensions, indexing the output and one input only
/// (B, as (k, n) or (n, k))? A row-wise dot product (a matrix-vector
/// product, or both inputs indexed by the rows: flash attention's
/// rowsum(dO * O), a layer norm gradient's sum of g * gamma) has no such
/// loop: register tiles would make each vector a gather of elements a row
/// apart (such kernels ran 10-20 times slower than a pass over their
/// input). It is a row reduction, vectorized along its contiguous
/// reduction loop like any other.
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

/// Tile sizes for one linalg op: a register tile for contractions, a vector
/// along the innermost loop for everything else.
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

/// Does linalg::vectorize compute every reduction of `op` exactly?
///
/// The vectorizer reads each input as a vector of the whole (tile's)
/// iteration space and reduces the combiner's other operand over the
/// reduction dimensions with vector.multi_reduction. A value that is not such
/// a vector (a constant, a function argument, a scalar operand, or something
/// computed from those only) is left as it is, and the combiner then applies
/// it ONCE per tile instead of once per reduced element: a count written as
/// `acc + 1.0` over a 16-wide tile adds 1, not 16 (MLIR 22). Index-only
/// bodies get a vector of the innermost loop alone and are no safer. So a
/// reduction is vectorized only when each accumulator has exactly one
/// combiner the vectorizer knows and the value it combines is computed from
/// an input element; anything else stays a scalar loop, which is exact.
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

/// Does `op` read or write buffers of elements narrower than a byte (i1)?
/// A buffer of i1 holds one byte per element, but LLVM loads and stores a
/// vector of i1 as packed bits: vectorized, a 16-wide tile of an attention
/// mask read 2 bytes instead of 16.
bool touchesSubByteElements(linalg::LinalgOp op) {
  return llvm::any_of(op->getOperands(), [](Value v) {
    auto shaped = dyn_cast<ShapedType>(v.getType());
    Type elem = shaped ? shaped.getElementType() : Type();
    return elem && elem.isIntOrFloat() && elem.getIntOrFloatBitWidth() % 8;
  });
}

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

/// The subview of `source` at `offsets` of `sizes`, all but the last two
/// of them 1, with those unit dimensions dropped: a matrix.
Value matrixView(OpBuilder &b, Location loc, Value source,
                 ArrayRef<OpFoldResult> offsets, ArrayRef<OpFoldResult> sizes) {
  auto type = cast<MemRefType>(source.getType());
  SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
  MemRefType full =
      memref::SubViewOp::inferResultType(type, offsets, sizes, strides);
  auto layout = cast<StridedLayoutAttr>(full.getLayout());
  auto matrix =
      MemRefType::get(full.getShape().take_back(2), full.getElementType(),
                      StridedLayoutAttr::get(b.getContext(), layout.getOffset(),
                                             layout.getStrides().take_back(2)));
  return memref::SubViewOp::create(b, loc, matrix, source, offsets, sizes,
                                   strides);
}

/// A matrix operand of a blocked contraction as a matrix: itself, or, for
/// a batched operand (one batch of it: leading dimensions of 1), its last
/// two dimensions.
Value matrixOf(OpBuilder &b, Location loc, Value operand) {
  int64_t rank = cast<MemRefType>(operand.getType()).getRank();
  if (rank == 2) {
    return operand;
  }
  SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0)),
      sizes(rank, b.getIndexAttr(1));
  SmallVector<OpFoldResult> whole = memref::getMixedSizes(b, loc, operand);
  sizes[rank - 2] = whole[rank - 2];
  sizes[rank - 1] = whole[rank - 1];
  return matrixView(b, loc, operand, offsets, sizes);
}

/// `map` reading a matrix operand's last two results, swapped when
/// `transpose` (the op then reads a [k, n] copy of a [.., n, k] operand).
AffineMap matrixMap(AffineMap map, bool transpose) {
  unsigned last = map.getNumResults() - 1;
  SmallVector<AffineExpr> results = {map.getResult(last - 1),
                                     map.getResult(last)};
  if (transpose) {
    std::swap(results[0], results[1]);
  }
  return AffineMap::get(map.getNumDims(), 0, results, map.getContext());
}

/// Marks the reduction-block loop of a contraction blocked along its
/// reduction (blockForCaches) whose output's fill was deferred to it: the
/// fills of the blocks' tiles are done in the loop's first iteration only.
constexpr llvm::StringLiteral kFillFirstBlockAttr = "kiln.fill_first_block";

/// Fills the output of `op` with its kiln.fill value right before it and
/// drops the mark (kiln-defer-fills deferred the fill to the op); inside a
/// reduction-block loop marked kFillFirstBlockAttr, only in its first
/// iteration (the later blocks accumulate onto the first). Returns the
/// fill.
linalg::FillOp materializeFill(RewriterBase &rewriter, linalg::LinalgOp op) {
  auto value = op->getAttrOfType<TypedAttr>(mlir::kiln::cpu::kFillAttr);
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  Value constant = arith::ConstantOp::create(rewriter, loc, value).getResult();
  op->removeAttr(mlir::kiln::cpu::kFillAttr);
  auto fill = [&](OpBuilder &b, Location l) {
    return linalg::FillOp::create(b, l, constant, op.getDpsInits()[0]);
  };
  scf::ForOp blocks = op->getParentOfType<scf::ForOp>();
  while (blocks && !blocks->hasAttr(kFillFirstBlockAttr)) {
    blocks = blocks->getParentOfType<scf::ForOp>();
  }
  if (!blocks) {
    return fill(rewriter, loc);
  }
  Value first =
      arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                            blocks.getInductionVar(), blocks.getLowerBound());
  linalg::FillOp result;
  scf::IfOp::create(rewriter, loc, first, [&](OpBuilder &b, Location l) {
    result = fill(b, l);
    scf::YieldOp::create(b, l);
  });
  return result;
}

/// The product of `op`'s loop ranges along `dims`.
Value loopProduct(RewriterBase &rewriter, linalg::LinalgOp op,
                  ArrayRef<unsigned> dims) {
  Location loc = op.getLoc();
  SmallVector<Range> ranges =
      cast<TilingInterface>(op.getOperation()).getIterationDomain(rewriter);
  Value product = arith::ConstantIndexOp::create(rewriter, loc, 1);
  for (unsigned dim : dims) {
    Value size =
        getValueOrCreateConstantIndexOp(rewriter, loc, ranges[dim].size);
    // Folded: a constant count decides at compile time.
    product = rewriter.createOrFold<arith::MulIOp>(loc, product, size);
  }
  return product;
}

/// One operand of a blocked contraction to copy block by block.
struct Packing {
  unsigned operand;          // operand number
  SmallVector<int64_t> dims; // its two loops, outer first
  Value reuse; // how often a block is read once copied (null: always copy)
  bool transpose = false; // copy [n, k] blocks into [k, n] (B stored as Bᵀ)
  int64_t minReuse = 0; // the least reuse worth the copy (TargetInfo)
  /// The loop the copy is cut into micro-panels along (B's columns), and
  /// the register tile's size along it; -1 and 0: one row-major block.
  int64_t panelDim = -1;
  int64_t panelWidth = 0;
};

/// A block copied as micro-panels: `buffer` [P, kc + 1, T] holds the block's
/// columns (along loop `panelDim`) T at a time, each panel's kc rows of T
/// contiguous, so that a register tile T wide reads one contiguous stream
/// (a row-major [kc, nc] block gives it rows nc apart: 5-10% slower on Zen
/// 4, where the stream prefetcher follows the panel). `op` still reads the
/// original window until its register tiles are made to read their panel
/// (readPanels): the copy only changes where the same values are read.
struct PanelRead {
  linalg::LinalgOp op;
  unsigned operand;
  int64_t panelDim, width;
  Value buffer;
};

/// The first `k` rows and `columns` columns of micro-panel `panel` of a
/// [P, kc + 1, T] panel buffer, as a [k, columns] matrix.
Value panelView(OpBuilder &b, Location loc, Value buffer, OpFoldResult panel,
                OpFoldResult k, OpFoldResult columns) {
  OpFoldResult zero = b.getIndexAttr(0);
  return matrixView(b, loc, buffer, {panel, zero, zero},
                    {b.getIndexAttr(1), k, columns});
}

/// A buffer of `type` allocated right before `outer` and freed right after.
Value allocateAround(RewriterBase &rewriter, Location loc, Operation *outer,
                     MemRefType type) {
  rewriter.setInsertionPoint(outer);
  Value buffer = memref::AllocOp::create(rewriter, loc, type,
                                         rewriter.getI64IntegerAttr(64));
  rewriter.setInsertionPointAfter(outer);
  memref::DeallocOp::create(rewriter, loc, buffer);
  return buffer;
}

/// Copies operand `p.operand` of `blocked` (a [kc, nc] or, transposed,
/// [nc, kc] window) into micro-panels `p.panelWidth` wide along
/// `p.panelDim` (see PanelRead), in a [P, kc + 1, T] buffer allocated around
/// `outer`: the whole panels with one copy of the window viewed as [kc,
/// P', T] (or [P', T, kc]), the last partial panel, if any, with another.
/// The copies are made right before `copyAt`, and only when `when` holds
/// (when given).
PanelRead packPanels(RewriterBase &rewriter, linalg::LinalgOp blocked,
                     Operation *outer, Operation *copyAt, Value when,
                     const Packing &p, ArrayRef<int64_t> bounds,
                     SmallVectorImpl<linalg::LinalgOp> &copies) {
  Location loc = blocked.getLoc();
  Type elementType = cast<MemRefType>(blocked->getOperand(p.operand).getType())
                         .getElementType();
  int64_t width = p.panelWidth;
  // pos: the window's dimension along the panels; the other is k.
  unsigned pos = p.dims[0] == p.panelDim ? 0 : 1;
  int64_t panels = llvm::divideCeil(bounds[pos], width);
  // One row of padding after each panel: panels of 512 (or 64) rows of 32
  // floats lie 64 KiB (8 KiB) apart, a multiple of 4 KiB, and a copy that
  // writes one row of each in turn kept all of them in one cache set (B's
  // copy had taken a quarter of gpt-small's fc2 weight gradient, [2048,
  // 384]^T [2048, 1536], on two Zen 4 cores; 5% padded).
  Value buffer = allocateAround(
      rewriter, loc, outer,
      MemRefType::get({panels, bounds[1 - pos] + 1, width}, elementType));

  rewriter.setInsertionPoint(copyAt);
  if (when) {
    auto onlyWhen = scf::IfOp::create(rewriter, loc, when);
    rewriter.setInsertionPoint(onlyWhen.thenBlock()->getTerminator());
  }
  Value window = matrixOf(rewriter, loc, blocked->getOperand(p.operand));
  SmallVector<OpFoldResult> sizes =
      memref::getMixedSizes(rewriter, loc, window);
  OpFoldResult reduced = sizes[1 - pos];
  AffineExpr d0 = rewriter.getAffineDimExpr(0);
  OpFoldResult whole = affine::makeComposedFoldedAffineApply(
      rewriter, loc, d0.floorDiv(width), {sizes[pos]});
  OpFoldResult wholeColumns = affine::makeComposedFoldedAffineApply(
      rewriter, loc, d0.floorDiv(width) * width, {sizes[pos]});
  OpFoldResult rest = affine::makeComposedFoldedAffineApply(
      rewriter, loc, d0 % width, {sizes[pos]});
  OpFoldResult zero = rewriter.getIndexAttr(0), one = rewriter.getIndexAttr(1);
  SmallVector<OpFoldResult> ones2(2, one), ones3(3, one);

  if (getConstantIntValue(whole) != 0) {
    SmallVector<OpFoldResult> cut(sizes);
    cut[pos] = wholeColumns;
    Value source = memref::SubViewOp::create(
        rewriter, loc, window, SmallVector<OpFoldResult>(2, zero), cut, ones2);
    SmallVector<ReassociationIndices> groups =
        pos == 0 ? SmallVector<ReassociationIndices>{{0, 1}, {2}}
                 : SmallVector<ReassociationIndices>{{0}, {1, 2}};
    SmallVector<OpFoldResult> expandedSizes =
        pos == 0
            ? SmallVector<OpFoldResult>{whole, rewriter.getIndexAttr(width),
                                        reduced}
            : SmallVector<OpFoldResult>{reduced, whole,
                                        rewriter.getIndexAttr(width)};
    Value expanded = memref::ExpandShapeOp::create(
        rewriter, loc, decomposeMixedValues(expandedSizes).first, source,
        groups, expandedSizes);
    Value target = memref::SubViewOp::create(
        rewriter, loc, buffer, SmallVector<OpFoldResult>(3, zero),
        {whole, reduced, rewriter.getIndexAttr(width)}, ones3);
    Operation *copy;
    if (pos == 0) {
      // [P', T, kc] -> [P', kc, T]: T x kc panels of a transposed B, each
      // read row by row and transposed in registers.
      copy = linalg::TransposeOp::create(rewriter, loc, expanded, target,
                                         ArrayRef<int64_t>{0, 2, 1});
    } else {
      // [kc, P', T] -> [P', kc, T], copied in the order it is read: into
      // the panels seen as [kc, P', T], not panel after panel (which reads
      // T elements of each of kc rows per pass).
      AffineMap swap = AffineMap::getPermutationMap(ArrayRef<unsigned>{1, 0, 2},
                                                    rewriter.getContext());
      Value view = memref::TransposeOp::create(rewriter, loc, target,
                                               AffineMapAttr::get(swap));
      copy = linalg::CopyOp::create(rewriter, loc, expanded, view);
    }
    copies.push_back(cast<linalg::LinalgOp>(copy));
  }

  std::optional<int64_t> restSize = getConstantIntValue(rest);
  if (restSize != 0) {
    auto copyRest = [&](OpBuilder &b, Location l) {
      SmallVector<OpFoldResult> offsets(2, zero), cut(sizes);
      offsets[pos] = wholeColumns;
      cut[pos] = rest;
      Value source =
          memref::SubViewOp::create(b, l, window, offsets, cut, ones2);
      Value target = panelView(b, l, buffer, whole, reduced, rest);
      Operation *copy =
          pos == 0
              ? linalg::TransposeOp::create(b, l, source, target,
                                            ArrayRef<int64_t>{1, 0})
                    .getOperation()
              : linalg::CopyOp::create(b, l, source, target).getOperation();
      copies.push_back(cast<linalg::LinalgOp>(copy));
    };
    if (restSize) {
      copyRest(rewriter, loc);
    } else {
      Value any = arith::CmpIOp::create(
          rewriter, loc, arith::CmpIPredicate::sgt,
          getValueOrCreateConstantIndexOp(rewriter, loc, rest),
          arith::ConstantIndexOp::create(rewriter, loc, 0));
      scf::IfOp::create(rewriter, loc, any, [&](OpBuilder &b, Location l) {
        copyRest(b, l);
        scf::YieldOp::create(b, l);
      });
    }
  }
  return PanelRead{blocked, p.operand, p.panelDim, width, buffer};
}

/// Copies operand `p.operand` of `blocked` (a window of a wider matrix)
/// into a contiguous buffer before each use, and makes the op read the copy
/// (when the run-time reuse count is at least `p.minReuse`). The buffer,
/// `bounds` in size, is allocated around `outer`, the outermost block loop
/// (or the op itself when it is not blocked); the copy is made right before
/// `copyAt`. A transposing packing copies the [n, k] window into a [k, n]
/// buffer and makes the op index it (k, n).
void pack(RewriterBase &rewriter, linalg::LinalgOp blocked, Operation *outer,
          Operation *copyAt, const Packing &p, ArrayRef<int64_t> bounds,
          SmallVectorImpl<linalg::LinalgOp> &copies) {
  Location loc = blocked.getLoc();
  rewriter.setInsertionPoint(copyAt);
  Value window = matrixOf(rewriter, loc, blocked->getOperand(p.operand));
  auto windowType = cast<MemRefType>(window.getType());
  Type elementType = windowType.getElementType();
  SmallVector<int64_t> bufferShape(bounds);
  SmallVector<int64_t> viewShape(windowType.getShape());
  if (p.transpose) {
    std::swap(bufferShape[0], bufferShape[1]);
    std::swap(viewShape[0], viewShape[1]);
  }
  Value buffer = allocateAround(rewriter, loc, outer,
                                MemRefType::get(bufferShape, elementType));

  rewriter.setInsertionPoint(copyAt);
  auto anyRowStride = MemRefType::get(
      viewShape, elementType,
      StridedLayoutAttr::get(rewriter.getContext(), ShapedType::kDynamic,
                             {ShapedType::kDynamic, 1}));
  SmallVector<OpFoldResult> sizes =
      memref::getMixedSizes(rewriter, loc, window);
  if (p.transpose) {
    std::swap(sizes[0], sizes[1]);
  }
  auto copied = [&](OpBuilder &b, Location l) {
    SmallVector<OpFoldResult> zeros(2, b.getIndexAttr(0));
    SmallVector<OpFoldResult> ones(2, b.getIndexAttr(1));
    Value view = memref::SubViewOp::create(b, l, buffer, zeros, sizes, ones);
    Operation *copy =
        p.transpose ? linalg::TransposeOp::create(b, l, window, view,
                                                  ArrayRef<int64_t>{1, 0})
                          .getOperation()
                    : linalg::CopyOp::create(b, l, window, view).getOperation();
    copies.push_back(cast<linalg::LinalgOp>(copy));
    return memref::CastOp::create(b, l, anyRowStride, view).getResult();
  };
  if (p.transpose) {
    // The op now reads the copy as (k, n).
    auto generic = cast<linalg::GenericOp>(blocked.getOperation());
    SmallVector<AffineMap> maps = generic.getIndexingMapsArray();
    maps[p.operand] = matrixMap(maps[p.operand], /*transpose=*/true);
    Value operand = copied(rewriter, loc);
    rewriter.modifyOpInPlace(generic, [&] {
      generic->setOperand(p.operand, operand);
      generic.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(maps));
    });
    return;
  }
  Value operand;
  if (getConstantIntValue(p.reuse)) {
    operand = copied(rewriter, loc);
  } else {
    Value enough = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::sge, p.reuse,
        arith::ConstantIndexOp::create(rewriter, loc, p.minReuse));
    auto choose = scf::IfOp::create(
        rewriter, loc, enough,
        [&](OpBuilder &b, Location l) {
          scf::YieldOp::create(b, l, copied(b, l));
        },
        [&](OpBuilder &b, Location l) {
          scf::YieldOp::create(
              b, l,
              memref::CastOp::create(b, l, anyRowStride, window).getResult());
        });
    operand = choose.getResult(0);
  }
  rewriter.modifyOpInPlace(blocked,
                           [&] { blocked->setOperand(p.operand, operand); });
}

/// Blocks a contraction for the caches: loops over `blockN` columns, then
/// `blockK` reduction steps, around the op (whose register tiles then run
/// over a block). Dimensions already within a block are left whole; an op
/// that fits entirely, or is no contraction, is returned as it is.
///
/// A block of an operand that is a strided window of a wider matrix has
/// rows a whole matrix row apart; for N = 1024, 2048 or M = 4096 (multiples
/// of 4 KiB) they fall into a few cache sets and the block does not stay in
/// cache (AVX2 code ran at 70% of its speed for N = 2048, weight gradients
/// at 60%). Such blocks are copied into one contiguous buffer first, when
/// a block is read at least TargetInfo::packMinReuse times (a run-time test for
/// dynamic counts): B's [kc, nc] blocks, and, when A is stored transposed
/// ([K, M]), A's [kc, mc] blocks, rows being blocked by `blockM` then. The
/// copies (and the fill of an output whose fill kiln-defer-fills deferred,
/// done whole before the blocks) are appended to `copies`, to be tiled like
/// any other op.
linalg::LinalgOp blockForCaches(RewriterBase &rewriter, linalg::LinalgOp op,
                                const mlir::kiln::cpu::TargetInfo &target,
                                int64_t blockK, int64_t blockN, int64_t blockM,
                                int64_t tileM, int64_t tileN,
                                SmallVectorImpl<linalg::LinalgOp> &copies,
                                SmallVectorImpl<PanelRead> &panelReads) {
  if (!isTiledContraction(op)) {
    return op;
  }
  SmallVector<unsigned> parallel, reduction;
  op.getParallelDims(parallel);
  op.getReductionDims(reduction);
  if (parallel.size() < 2 || reduction.size() != 1) {
    return op;
  }
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  auto exceeds = [&](unsigned dim, int64_t block) {
    return ShapedType::isDynamic(ranges[dim]) || ranges[dim] > block;
  };
  unsigned m = parallel[parallel.size() - 2], n = parallel.back(),
           k = reduction.front();
  SmallVector<int64_t> sizes(op.getNumLoops(), 0);
  if (exceeds(n, blockN)) {
    sizes[n] = blockN;
  }
  if (exceeds(k, blockK)) {
    sizes[k] = blockK;
  }
  OpOperand *lhsT = matrixOperand(op, k, m);
  if (lhsT && !rowsAlias(lhsT)) {
    lhsT = nullptr; // read in place
  }
  if (lhsT && exceeds(m, blockM)) {
    sizes[m] = blockM;
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
    return op;
  }
  // A deferred fill is done tile by tile in the first reduction block
  // (the later ones accumulate): no pass over the output before the product.
  bool fillFirstBlock =
      sizes[k] != 0 && op->hasAttr(mlir::kiln::cpu::kFillAttr);

  // Which operands to copy: B stored transposed, always; others when their
  // contiguous dimension blocking cuts them (B's rows only when they alias
  // in the caches or the copy is cut into micro-panels, below).
  rewriter.setInsertionPoint(op);
  SmallVector<Packing> packings;
  SmallVector<unsigned> rowDims;
  llvm::copy_if(parallel, std::back_inserter(rowDims),
                [&](unsigned d) { return d != n; });
  if (rhsT) {
    packings.push_back(
        {rhsT->getOperandNumber(), {int64_t(n), int64_t(k)}, Value(), true});
  }
  for (OpOperand *rhs : {matrixOperand(op, k, n), matrixOperand(op, n, k)}) {
    AffineMap map = rhs ? op.getMatchingIndexingMap(rhs) : AffineMap();
    if (rhs && rhs != rhsT && sizes[map.getDimPosition(1)] != 0) {
      packings.push_back({rhs->getOperandNumber(),
                          {map.getDimPosition(0), map.getDimPosition(1)},
                          loopProduct(rewriter, op, rowDims)});
    }
  }
  if (lhsT && sizes[m] != 0) {
    packings.push_back({lhsT->getOperandNumber(),
                        {int64_t(k), int64_t(m)},
                        loopProduct(rewriter, op, {n})});
  }
  for (Packing &p : packings) {
    p.minReuse = target.packMinReuse;
  }
  auto tooFewRows = [](const Packing &p) {
    std::optional<int64_t> reuse =
        p.reuse ? getConstantIntValue(p.reuse) : std::nullopt;
    return reuse && *reuse < p.minReuse;
  };
  llvm::erase_if(packings, tooFewRows);
  auto bounds = [&](const Packing &p) {
    SmallVector<int64_t> result;
    for (int64_t dim : p.dims) {
      result.push_back(sizes[dim] ? sizes[dim] : ranges[dim]);
    }
    return result;
  };
  // A copy of B is cut into micro-panels along its columns when the block
  // is wider than one register tile (a linalg.generic can read a
  // transposed B's panels as (k, n)); then B is copied whatever its stride
  // (+10% for the [2048, 384] B of a weight gradient on Zen 4). A transposed
  // A stays one row-major block (micro-panels of its rows measured slower:
  // a copy scattered over many panels costs more than it saves).
  for (Packing &p : packings) {
    int64_t dim = p.dims[0] == int64_t(k) ? p.dims[1] : p.dims[0];
    int64_t extent = sizes[dim] ? sizes[dim] : ranges[dim];
    bool readable = p.dims[1] == dim || isa<linalg::GenericOp>(op);
    if (dim == int64_t(n) && readable && !ShapedType::isDynamic(extent) &&
        extent > tileN) {
      p.panelDim = dim;
      p.panelWidth = tileN;
    }
  }
  llvm::erase_if(packings, [&](Packing &p) {
    if (p.transpose || rowsAlias(&op->getOpOperand(p.operand))) {
      return false;
    }
    p.minReuse = target.panelMinReuse;
    return !p.panelWidth || tooFewRows(p);
  });
  // With a run-time reuse count, the blocked op runs either on panels or
  // as it is: a copy of it (appended to `copies`, tiled like them) in the
  // other branch of an scf.if.
  auto packOne = [&](linalg::LinalgOp blocked, Operation *outer,
                     Operation *copyAt, const Packing &p) {
    if (!p.panelWidth) {
      pack(rewriter, blocked, outer, copyAt, p, bounds(p), copies);
      return;
    }
    Value enough;
    if (p.reuse && !getConstantIntValue(p.reuse)) {
      Location loc = blocked.getLoc();
      rewriter.setInsertionPoint(outer);
      enough = arith::CmpIOp::create(
          rewriter, loc, arith::CmpIPredicate::sge, p.reuse,
          arith::ConstantIndexOp::create(rewriter, loc, p.minReuse));
      rewriter.setInsertionPoint(blocked);
      auto choose = scf::IfOp::create(rewriter, loc, enough,
                                      /*withElseRegion=*/true);
      rewriter.moveOpBefore(blocked, choose.thenBlock()->getTerminator());
      rewriter.setInsertionPoint(choose.elseBlock()->getTerminator());
      copies.push_back(cast<linalg::LinalgOp>(rewriter.clone(*blocked)));
      if (copyAt == blocked.getOperation()) {
        copyAt = choose;
      }
    }
    panelReads.push_back(packPanels(rewriter, blocked, outer, copyAt, enough, p,
                                    bounds(p), copies));
  };
  if (unblocked) {
    // Only the transposed copy of B, whole, around the op itself.
    packOne(op, op, op, packings.front());
    return op;
  }

  SmallVector<OpFoldResult> tileSizes;
  for (int64_t s : sizes) {
    tileSizes.push_back(rewriter.getIndexAttr(s));
  }
  // Batches (when blocked) outermost, then n-blocks outside k-blocks (a
  // column block of C is finished before the next one starts), then
  // m-blocks.
  SmallVector<int64_t> interchange;
  if (batchedB) {
    interchange.append(batch.begin(), batch.end());
  }
  interchange.append({int64_t(n), int64_t(k), int64_t(m)});
  for (unsigned d = 0; d < op.getNumLoops(); ++d) {
    if (!llvm::is_contained(interchange, int64_t(d))) {
      interchange.push_back(d);
    }
  }
  scf::SCFTilingOptions options;
  options.setTileSizes(tileSizes);
  options.setInterchange(interchange);
  FailureOr<scf::SCFTilingResult> tiled = scf::tileUsingSCF(
      rewriter, cast<TilingInterface>(op.getOperation()), options);
  if (failed(tiled) || tiled->tiledOps.size() != 1) {
    return op;
  }
  rewriter.replaceOp(op, tiled->replacements);
  auto blocked = cast<linalg::LinalgOp>(tiled->tiledOps.front());
  if (tiled->loops.empty()) {
    return blocked;
  }
  // The loops follow `interchange` over the tiled dimensions: the batches
  // (when blocked), n, k, m.
  size_t batchLoops = batchedB ? batch.size() : 0;
  for (size_t i = 0; i < batchLoops; ++i) {
    tiled->loops[i]->setAttr(mlir::kiln::cpu::kParallelAttr,
                             rewriter.getUnitAttr());
  }
  // Buffers are allocated inside the batch loops (one per thread).
  Operation *outer = tiled->loops.size() > batchLoops
                         ? tiled->loops[batchLoops].getOperation()
                         : blocked.getOperation();
  if (fillFirstBlock) {
    Operation *blocks = tiled->loops[batchLoops + (sizes[n] != 0 ? 1 : 0)];
    blocks->setAttr(kFillFirstBlockAttr, rewriter.getUnitAttr());
  }
  // A block of B does not depend on the rows: copied before the row-block
  // loop, when there is one (its subview hoisted out of it), not once per
  // row block.
  Operation *rowBlocks =
      sizes[m] != 0 ? tiled->loops.back().getOperation() : nullptr;
  if (rowBlocks) {
    moveLoopInvariantCode(cast<LoopLikeOpInterface>(rowBlocks));
  }
  // Row blocks on all cores: a block of A is then copied and multiplied by
  // the same thread, from its own caches, with no barrier in between (the
  // head's weight gradient, [2048, 4096]^T [2048, 384], had spent 9% of
  // its time in libomp's barriers, copying and multiplying each of its 128
  // blocks in two parallel loops of their own, and each core read half of
  // the block it multiplied from the other core's copy).
  bool threadRowBlocks =
      rowBlocks && !batchedB && !ShapedType::isDynamic(ranges[m]) &&
      llvm::divideCeil(ranges[m], sizes[m]) >= target.parallelRowBlocks &&
      lhsT &&
      llvm::any_of(packings, [&](const Packing &p) {
        return p.operand == lhsT->getOperandNumber();
      });
  if (threadRowBlocks) {
    rowBlocks->setAttr(mlir::kiln::cpu::kParallelAttr, rewriter.getUnitAttr());
  }
  for (const Packing &p : packings) {
    if (threadRowBlocks && p.operand == lhsT->getOperandNumber()) {
      pack(rewriter, blocked, blocked, blocked, p, bounds(p), copies);
      continue;
    }
    Operation *copyAt = blocked;
    Operation *window = blocked->getOperand(p.operand).getDefiningOp();
    if (rowBlocks && !llvm::is_contained(p.dims, int64_t(m)) &&
        !(window && rowBlocks->isAncestor(window))) {
      copyAt = rowBlocks;
    }
    packOne(blocked, outer, copyAt, p);
  }
  return blocked;
}

/// Marks ops created by tiling with the vector sizes they were tiled for.
constexpr llvm::StringLiteral kTileAttr = "kiln.tile";
constexpr llvm::StringLiteral kLoopAttr = "kiln.tile_loop";

/// The loops of an op to spread across threads, outermost first: every
/// parallel loop outside the innermost one (a contraction's: every one but
/// its column loop; batch, head and row loops together), so that the
/// threads share the product of their trip counts (a batch of 1 still
/// splits its rows). An op with a single parallel loop spreads that one,
/// even when it comes after a reduction loop (a bias gradient summing
/// [B, T, D] into [D]): parallel loops are tiled first, outside the
/// reduction loops, so each thread sums its own columns over every row
/// (the bias gradients had run on one core while the other waited: 1% of
/// the encoder-decoder training step).
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

/// A transpose's tile read (a 2-D transfer_read whose columns run along
/// the source's last dimension: a [K, N] tile of a [N, K] weight, a
/// [dh, T] tile of [B, T, H, dh] keys) becomes a read of contiguous rows and a
/// vector.transpose, which LLVM lowers to shuffles in registers; read as it
/// is, every column of the tile would be a gather of scalar loads.
struct TransposedTileRead : OpRewritePattern<vector::TransferReadOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(vector::TransferReadOp read,
                                PatternRewriter &rewriter) const override {
    VectorType type = read.getVectorType();
    auto source = dyn_cast<MemRefType>(read.getBase().getType());
    if (type.getRank() != 2 || !source || source.getRank() < 2 ||
        read.getMask() || read.hasOutOfBoundsDim()) {
      return failure();
    }
    MLIRContext *context = rewriter.getContext();
    unsigned rank = source.getRank();
    AffineMap map = read.getPermutationMap();
    auto first = dyn_cast<AffineDimExpr>(map.getResult(0));
    auto second = dyn_cast<AffineDimExpr>(map.getResult(1));
    if (!first || !second || first.getPosition() != rank - 1 ||
        second.getPosition() == rank - 1) {
      return failure();
    }
    // Rows along the other dimension, each contiguous along the last.
    AffineMap rowsMap = AffineMap::get(rank, 0, {second, first}, context);
    auto rowsType = VectorType::get({type.getDimSize(1), type.getDimSize(0)},
                                    type.getElementType());
    Value rows = vector::TransferReadOp::create(
        rewriter, read.getLoc(), rowsType, read.getBase(), read.getIndices(),
        read.getPadding(), rowsMap, ArrayRef<bool>{true, true});
    rewriter.replaceOpWithNewOp<vector::TransposeOp>(read, rows,
                                                     ArrayRef<int64_t>{1, 0});
    return success();
  }
};

/// A tile read that spreads contiguous elements along a vector dimension
/// other than the innermost and broadcasts them along another: a register
/// tile's column of A when A is stored transposed ([K, M]: 8 consecutive
/// elements, each broadcast across a row of 32). Read as one vector, every
/// element then needs a shuffle to broadcast it (8 per 16 FMAs, which kept
/// weight gradients at 75% of the other products); read element by
/// element, each is one broadcasting load.
struct SplitBroadcastRead : OpRewritePattern<vector::TransferReadOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(vector::TransferReadOp read,
                                PatternRewriter &rewriter) const override {
    VectorType type = read.getVectorType();
    auto source = dyn_cast<MemRefType>(read.getBase().getType());
    AffineMap map = read.getPermutationMap();
    if (!source || read.getMask() || type.isScalable()) {
      return failure();
    }
    unsigned last = source.getRank() - 1;
    std::optional<unsigned> contiguous, innermost;
    bool broadcasts = false;
    for (unsigned i = 0; i < map.getNumResults(); ++i) {
      if (type.getDimSize(i) > 1) {
        innermost = i;
      }
      if (auto dim = dyn_cast<AffineDimExpr>(map.getResult(i))) {
        if (dim.getPosition() == last) {
          contiguous = i;
        }
        continue;
      }
      auto zero = dyn_cast<AffineConstantExpr>(map.getResult(i));
      if (!zero || zero.getValue() != 0) {
        return failure();
      }
      if (type.getDimSize(i) > 1) {
        broadcasts = true; // a constant 0: broadcast along this dimension
      }
    }
    if (!contiguous || !broadcasts || contiguous == innermost ||
        type.getDimSize(*contiguous) <= 1) {
      return failure();
    }
    Location loc = read.getLoc();
    SmallVector<int64_t> pieceShape(type.getShape());
    pieceShape[*contiguous] = 1;
    auto pieceType = VectorType::get(pieceShape, type.getElementType());
    Value result = arith::ConstantOp::create(rewriter, loc, type,
                                             rewriter.getZeroAttr(type));
    SmallVector<int64_t> strides(type.getRank(), 1);
    for (int64_t j = 0; j < type.getDimSize(*contiguous); ++j) {
      SmallVector<Value> indices(read.getIndices());
      indices[last] = arith::AddIOp::create(
          rewriter, loc, indices[last],
          arith::ConstantIndexOp::create(rewriter, loc, j));
      Value piece = vector::TransferReadOp::create(
          rewriter, loc, pieceType, read.getBase(), indices, read.getPadding(),
          map, read.getInBoundsValues());
      SmallVector<int64_t> offsets(type.getRank(), 0);
      offsets[*contiguous] = j;
      result = vector::InsertStridedSliceOp::create(rewriter, loc, piece,
                                                    result, offsets, strides);
    }
    rewriter.replaceOp(read, result);
    return success();
  }
};

/// A register tile made by tiling an op, and the induction variable of
/// each loop tiling made (by the op's loop dimension).
struct Tiles {
  linalg::LinalgOp op;
  DenseMap<unsigned, Value> ivs;
};

/// Makes the register tile `tiles.op` of `read.op` read its block of
/// operand `read.operand` from its micro-panel: the panel of the tile's
/// first column along `read.panelDim` (the tile is `read.width` wide there,
/// starting at a multiple of it, so it lies in one panel; the partial tiles
/// that peeling and re-tiling cut from it too). A tile not cut along the
/// panels keeps reading the window the panels were copied from.
void readPanels(RewriterBase &rewriter, const PanelRead &read,
                const Tiles &tiles) {
  auto iv = tiles.ivs.find(read.panelDim);
  if (iv == tiles.ivs.end()) {
    return;
  }
  linalg::LinalgOp tile = tiles.op;
  Location loc = tile.getLoc();
  OpOperand &operand = tile->getOpOperand(read.operand);
  AffineMap map = tile.getMatchingIndexingMap(&operand);
  unsigned rank = map.getNumResults();
  unsigned pos = map.getDimPosition(rank - 2) == read.panelDim ? 0 : 1;
  rewriter.setInsertionPoint(tile);
  SmallVector<OpFoldResult> sizes = llvm::to_vector(
      ArrayRef(memref::getMixedSizes(rewriter, loc, operand.get()))
          .take_back(2));
  AffineExpr d0 = rewriter.getAffineDimExpr(0);
  OpFoldResult index = affine::makeComposedFoldedAffineApply(
      rewriter, loc, d0.floorDiv(read.width), {iv->second});
  Value panel =
      panelView(rewriter, loc, read.buffer, index, sizes[1 - pos], sizes[pos]);
  rewriter.modifyOpInPlace(tile, [&] {
    operand.set(panel);
    if (pos == 0 || rank > 2) {
      // The tile now reads (k, column) of one batch.
      auto generic = cast<linalg::GenericOp>(tile.getOperation());
      SmallVector<AffineMap> maps = generic.getIndexingMapsArray();
      maps[read.operand] = matrixMap(maps[read.operand], pos == 0);
      generic.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(maps));
    }
  });
}

struct KilnTileAndVectorizePass
    : mlir::kiln::impl::KilnTileAndVectorizePassBase<KilnTileAndVectorizePass> {
  using Base::Base;

  /// The pattern sets are built once per pass instance, not per function (a
  /// model has hundreds of outlined kernels, and every kernel canonicalizes
  /// three times).
  LogicalResult initialize(MLIRContext *context) override {
    RewritePatternSet canonical(context);
    for (Dialect *dialect : context->getLoadedDialects()) {
      dialect->getCanonicalizationPatterns(canonical);
    }
    for (RegisteredOperationName op : context->getRegisteredOperations()) {
      op.getCanonicalizationPatterns(canonical, context);
    }
    canonicalization = FrozenRewritePatternSet(std::move(canonical));
    RewritePatternSet vectors(context);
    vector::populateCastAwayVectorLeadingOneDimPatterns(vectors);
    vectors.add<TransposedTileRead, SplitBroadcastRead>(context);
    vector::populateVectorTransferDropUnitDimsPatterns(vectors);
    vector::populateDropUnitDimWithShapeCastPatterns(vectors);
    vector::TransferReadOp::getCanonicalizationPatterns(vectors, context);
    vector::TransferWriteOp::getCanonicalizationPatterns(vectors, context);
    vector::BroadcastOp::getCanonicalizationPatterns(vectors, context);
    vector::ShapeCastOp::getCanonicalizationPatterns(vectors, context);
    vector::ExtractOp::getCanonicalizationPatterns(vectors, context);
    vectorCleanup = FrozenRewritePatternSet(std::move(vectors));
    return success();
  }

  void runOnOperation() override {
    MLIRContext *context = &getContext();
    IRRewriter rewriter(context);
    FailureOr<mlir::kiln::TargetAttr> resolved = mlir::kiln::cpu::requireTarget(
        getOperation(), "kiln-tile-and-vectorize");
    if (failed(resolved)) {
      return signalPassFailure();
    }
    mlir::kiln::cpu::TargetInfo target =
        mlir::kiln::cpu::TargetInfo::of(*resolved);
    int64_t rows = tileM ? int64_t(tileM) : target.tileM();
    int64_t columns = tileN ? int64_t(tileN) : target.tileN();
    int64_t width = vectorWidth ? int64_t(vectorWidth) : target.vectorWidth();
    int64_t cacheK = blockK ? int64_t(blockK) : target.blockK();
    int64_t cacheN = blockN ? int64_t(blockN) : target.blockN();
    int64_t cacheM = blockM ? int64_t(blockM) : target.blockM();

    // 1. Tile the parallel loops of every linalg op (on buffers); its
    //    reduction loops are tiled last (step 3), innermost, so that a
    //    register tile's accumulators stay in registers across them.
    SmallVector<linalg::LinalgOp> ops;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op.getNumLoops() > 0) {
        ops.push_back(op);
      } else if (op->hasAttr(mlir::kiln::cpu::kFillAttr)) {
        materializeFill(rewriter, op);
      }
    });
    SmallVector<linalg::LinalgOp> copies;
    SmallVector<PanelRead> panelReads;
    for (linalg::LinalgOp &op : ops) {
      op = blockForCaches(rewriter, op, target, cacheK, cacheN, cacheM, rows, columns,
                          copies, panelReads);
    }
    ops.append(copies);
    for (linalg::LinalgOp op : ops) {
      // The op's panel reads, found before tiling replaces it.
      SmallVector<PanelRead> reads;
      llvm::copy_if(panelReads, std::back_inserter(reads),
                    [&](const PanelRead &read) { return read.op == op; });
      SmallVector<int64_t> sizes = chooseTileSizes(op, rows, columns, width);
      LLVM_DEBUG({
        llvm::dbgs() << DEBUG_TYPE ": tiles";
        for (int64_t size : sizes) {
          llvm::dbgs() << " " << size;
        }
        llvm::dbgs() << " for " << op->getName() << " at " << op->getLoc()
                     << "\n";
      });
      Tiles tiles =
          tileLoops(rewriter, op, sizes, utils::IteratorType::parallel,
                    chooseParallelDims(op));
      for (const PanelRead &read : reads) {
        if (tiles.op) {
          readPanels(rewriter, read, tiles);
        }
      }
    }

    // 2. Peel the partial last tile off every tiled loop, so that the main
    //    loops see full tiles of static size. A partial tile is tiled once
    //    more, one row by one vector (the M remainder of a 6x16 register
    //    tile becomes 1x16 tiles, its N remainder 6x8 ones), so that only
    //    the last columns short of a vector stay scalar: with T = 64 and
    //    6-row tiles, 4 scalar rows in every 64 had cost AVX2 code half its
    //    speed.
    peelTiledLoops(rewriter);
    for (linalg::LinalgOp op : taggedTiles()) {
      retilePartial(rewriter, op, width);
    }
    peelTiledLoops(rewriter);

    // A tile whose output kiln-defer-fills left unfilled is filled right
    // before it is computed (its reduction loops are tiled inside, in step
    // 3): the fill's vector then reaches the accumulators directly
    // (kiln-hoist-vector-transfers), with no pass over memory.
    for (linalg::LinalgOp op : taggedTiles()) {
      if (!op->hasAttr(mlir::kiln::cpu::kFillAttr)) {
        continue;
      }
      ArrayRef<int64_t> sizes =
          op->getAttrOfType<DenseI64ArrayAttr>(kTileAttr).asArrayRef();
      SmallVector<int64_t> fillSizes;
      for (AffineExpr e : op.getMatchingIndexingMap(&op.getDpsInitsMutable()[0])
                              .getResults()) {
        auto dim = dyn_cast<AffineDimExpr>(e);
        fillSizes.push_back(dim ? sizes[dim.getPosition()] : 1);
      }
      linalg::FillOp fill = materializeFill(rewriter, op);
      fill->setAttr(kTileAttr, rewriter.getDenseI64ArrayAttr(fillSizes));
    }

    // 3. Tile the reduction loops inside the parallel ones.
    for (linalg::LinalgOp op : taggedTiles()) {
      auto sizes = op->getAttrOfType<DenseI64ArrayAttr>(kTileAttr);
      tileLoops(rewriter, op, sizes.asArrayRef(),
                utils::IteratorType::reduction, /*parallelDims=*/{});
    }
    peelTiledLoops(rewriter);

    // 4. Vectorize the tiles of static shape; the rest stay scalar loops,
    //    and so do tiles the vectorizer would get wrong (reductions of
    //    values not read from an input element, i1 buffers).
    for (linalg::LinalgOp op : taggedTiles()) {
      op->removeAttr(kTileAttr);
      // A full tile of an op on dynamically sized operands (a transposing
      // copy of a partial weight block) reads static subviews through
      // casts to the dynamic type; read them directly (linalg.transpose's
      // folder does not, unlike linalg.copy's and linalg.generic's).
      rewriter.modifyOpInPlace(op, [&] { (void)memref::foldMemRefCast(op); });
      StringRef scalar;
      if (llvm::any_of(op.getStaticLoopRanges(), ShapedType::isDynamic)) {
        scalar = "its tile has a dynamic size (a loop left whole, or a "
                 "partial tile short of a vector)";
      } else if (!reductionsVectorizeExactly(op)) {
        scalar = "its reduction combines a value not read from an input "
                 "element, which the vectorizer would apply once per tile";
      } else if (touchesSubByteElements(op)) {
        scalar = "it reads or writes i1 buffers, which vectors would read "
                 "as packed bits";
      } else {
        rewriter.setInsertionPoint(op);
        FailureOr<linalg::VectorizationResult> vectorized =
            linalg::vectorize(rewriter, op);
        if (succeeded(vectorized)) {
          rewriter.replaceOp(op, vectorized->replacements);
          continue;
        }
        scalar = "the vectorizer refused it";
      }
      LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": stays scalar, " << scalar << ": "
                              << *op << "\n");
      if (remarks) {
        op->emitRemark() << "stays a scalar loop nest: " << scalar;
      }
    }

    // 5. Drop the unit dimensions of the tiles' vectors (leading batch and
    //    head dims), so that they lower to plain 1-D vector registers.
    (void)applyPatternsGreedily(getOperation(), vectorCleanup);

    // Whatever kept a deferred fill (an op left whole) fills first.
    SmallVector<linalg::LinalgOp> unfilled;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op->hasAttr(mlir::kiln::cpu::kFillAttr)) {
        unfilled.push_back(op);
      }
    });
    for (linalg::LinalgOp op : unfilled) {
      materializeFill(rewriter, op);
    }
    getOperation().walk(
        [](scf::ForOp loop) { loop->removeAttr(kFillFirstBlockAttr); });
  }

  /// The ops tiling has produced (and tagged with their tile sizes).
  SmallVector<linalg::LinalgOp> taggedTiles() {
    SmallVector<linalg::LinalgOp> tiles;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op->hasAttr(kTileAttr)) {
        tiles.push_back(op);
      }
    });
    return tiles;
  }

  /// Tiles the loops of `op` of iterator type `kind` by `sizes` (the others
  /// stay whole), marking the new loops for peeling (and those along
  /// `parallelDims` for threads) and the tiles with `sizes`. An op with no
  /// such loop to tile is tagged as it is. Returns the tile and the
  /// induction variable of each tiled dimension (none when tiling failed).
  Tiles tileLoops(RewriterBase &rewriter, linalg::LinalgOp op,
                  ArrayRef<int64_t> sizes, utils::IteratorType kind,
                  ArrayRef<unsigned> parallelDims) {
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    SmallVector<OpFoldResult> tileSizes;
    bool any = false;
    for (auto [dim, size] : llvm::enumerate(sizes)) {
      int64_t s = iterators[dim] == kind ? size : 0;
      any |= s != 0;
      tileSizes.push_back(rewriter.getIndexAttr(s));
    }
    DenseI64ArrayAttr tag = rewriter.getDenseI64ArrayAttr(sizes);
    if (!any) {
      op->setAttr(kTileAttr, tag);
      Tiles tag;
      tag.op = op;
      return tag;
    }
    rewriter.setInsertionPoint(op);
    scf::SCFTilingOptions options;
    options.setTileSizes(tileSizes);
    FailureOr<scf::SCFTilingResult> tiled = scf::tileUsingSCF(
        rewriter, cast<TilingInterface>(op.getOperation()), options);
    if (failed(tiled)) {
      op->removeAttr(kTileAttr); // Keep the op whole: it lowers to loops.
      return Tiles();
    }
    rewriter.replaceOp(op, tiled->replacements);
    for (Operation *tiledOp : tiled->tiledOps) {
      tiledOp->setAttr(kTileAttr, tag);
    }
    // tileUsingSCF creates loops only for the dimensions it tiles, in order.
    SmallVector<unsigned> tiledDims;
    for (auto [dim, size] : llvm::enumerate(tileSizes)) {
      if (getConstantIntValue(size) != 0) {
        tiledDims.push_back(dim);
      }
    }
    Tiles tiles;
    if (tiled->tiledOps.size() == 1) {
      tiles.op = dyn_cast<linalg::LinalgOp>(tiled->tiledOps.front());
    }
    for (auto [loop, dim] : llvm::zip(tiled->loops, tiledDims)) {
      loop->setAttr(kLoopAttr, rewriter.getUnitAttr());
      if (llvm::is_contained(parallelDims, dim)) {
        loop->setAttr(mlir::kiln::cpu::kParallelAttr, rewriter.getUnitAttr());
      }
      if (auto forOp = dyn_cast<scf::ForOp>(loop.getOperation())) {
        tiles.ivs[dim] = forOp.getInductionVar();
      }
    }
    return tiles;
  }

  /// Peels the partial last iteration off every loop marked for it (also
  /// those inside the partial iterations peeling creates), then
  /// canonicalizes (the full tiles' sizes fold to constants).
  void peelTiledLoops(RewriterBase &rewriter) {
    while (true) {
      SmallVector<scf::ForOp> loops;
      getOperation().walk<WalkOrder::PreOrder>([&](scf::ForOp loop) {
        if (loop->hasAttr(kLoopAttr)) {
          loops.push_back(loop);
        }
      });
      if (loops.empty()) {
        break;
      }
      for (scf::ForOp loop : loops) {
        loop->removeAttr(kLoopAttr);
        scf::ForOp partial;
        rewriter.setInsertionPoint(loop);
        if (succeeded(
                scf::peelForLoopAndSimplifyBounds(rewriter, loop, partial)) &&
            partial) {
          partial->removeAttr(
              mlir::kiln::cpu::kParallelAttr); // one iteration: nothing to
                                               // share
          partial->removeAttr(kLoopAttr);
        }
      }
    }
    (void)applyPatternsGreedily(getOperation(), canonicalization);
  }

  /// Tiles the parallel loops of a partial tile (one cut short along a
  /// dynamic range) again: a loop tiled by at least a vector by one vector,
  /// a narrower one (a register tile's rows) by 1. Nothing happens when that
  /// would not change the tiling (an elementwise op's last partial vector).
  void retilePartial(RewriterBase &rewriter, linalg::LinalgOp op,
                     int64_t width) {
    SmallVector<int64_t> sizes(
        op->getAttrOfType<DenseI64ArrayAttr>(kTileAttr).asArrayRef());
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    SmallVector<int64_t> smaller(sizes);
    bool changed = false;
    for (auto [dim, range] : llvm::enumerate(ranges)) {
      if (iterators[dim] != utils::IteratorType::parallel) {
        continue;
      }
      if (!ShapedType::isDynamic(range)) {
        smaller[dim] = 0; // a full dimension of this tile
        continue;
      }
      smaller[dim] = sizes[dim] >= width ? width : 1;
      changed |= smaller[dim] != sizes[dim];
    }
    if (!changed) {
      return;
    }
    // The reduction loops keep their sizes, tiled in step 3.
    for (auto [dim, range] : llvm::enumerate(ranges)) {
      if (iterators[dim] != utils::IteratorType::parallel) {
        smaller[dim] = sizes[dim];
      }
    }
    tileLoops(rewriter, op, smaller, utils::IteratorType::parallel,
              /*parallelDims=*/{});
  }

  FrozenRewritePatternSet canonicalization, vectorCleanup;
};
} // namespace
