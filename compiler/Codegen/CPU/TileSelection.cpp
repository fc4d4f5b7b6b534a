//===- TileSelection.cpp - The tiles CPU code generation chooses ----------===//
//
// Implements TileSelection.h.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/TileSelection.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"

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

CpuTilesAttr selectCpuTiles(linalg::LinalgOp op, int64_t tileM, int64_t tileN,
                            int64_t width) {
  Builder b(op->getContext());
  SmallVector<int64_t> threads;
  for (unsigned dim : chooseParallelDims(op)) {
    threads.push_back(dim);
  }
  return CpuTilesAttr::get(
      op->getContext(),
      b.getDenseI64ArrayAttr(chooseTileSizes(op, tileM, tileN, width)),
      b.getDenseI64ArrayAttr(threads));
}

} // namespace mlir::kiln::cpu
