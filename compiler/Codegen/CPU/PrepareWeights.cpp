//===- PrepareWeights.cpp - Products read weights transposed once ---------===//
//
// Implements kiln-prepare-weights.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/Passes.h"

#include "compiler/Codegen/CPU/TargetInfo.h"

#include "dialects/Kiln/IR/KilnDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kiln-prepare-weights"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNPREPAREWEIGHTSPASS
#include "compiler/Codegen/CPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

/// Whether operand `operand` of `op` is the B of a product that reads it
/// transposed: `op` a contraction of two inputs with one n and one k loop,
/// no batch loop, the operand indexed exactly (n, k), and more rows (the
/// product of the m loops' sizes) than a streamed product takes, or rows
/// only known at run time.
bool readsTransposed(linalg::GenericOp op, OpOperand &operand,
                     int64_t maxStreamedRows) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      !op.isDpsInput(&operand) || !linalg::isaContractionOpInterface(op)) {
    return false;
  }
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  if (failed(dims) || !dims->batch.empty() || dims->n.size() != 1 ||
      dims->k.size() != 1 || dims->m.empty()) {
    return false;
  }
  AffineMap map = op.getMatchingIndexingMap(&operand);
  if (map.getNumResults() != 2 || !map.isProjectedPermutation() ||
      map.getDimPosition(0) != dims->n.front() ||
      map.getDimPosition(1) != dims->k.front()) {
    return false;
  }
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  int64_t rows = 1;
  for (unsigned m : dims->m) {
    if (ShapedType::isDynamic(ranges[m])) {
      return true;
    }
    rows *= ranges[m];
  }
  return rows > maxStreamedRows;
}

/// `op` reading operand `operand` from `prepared`, the transpose of what it
/// read: indexed (k, n) instead of (n, k).
void readPrepared(OpBuilder &b, linalg::GenericOp op, OpOperand &operand,
                  Value prepared) {
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  AffineMap map = maps[operand.getOperandNumber()];
  maps[operand.getOperandNumber()] =
      AffineMap::get(map.getNumDims(), 0, {map.getResult(1), map.getResult(0)},
                     op.getContext());
  operand.set(prepared);
  op.setIndexingMapsAttr(b.getAffineMapArrayAttr(maps));
}

/// The uses of `value` that are transposed reads (readsTransposed).
SmallVector<OpOperand *> transposedReads(Value value, int64_t maxStreamedRows) {
  SmallVector<OpOperand *> reads;
  for (OpOperand &use : value.getUses()) {
    auto generic = dyn_cast<linalg::GenericOp>(use.getOwner());
    if (generic && readsTransposed(generic, use, maxStreamedRows)) {
      reads.push_back(&use);
    }
  }
  return reads;
}

struct KilnPrepareWeightsPass
    : mlir::kiln::impl::KilnPrepareWeightsPassBase<KilnPrepareWeightsPass> {
  using Base::Base;

  void runOnOperation() override {
    int64_t rows = maxStreamedRows;
    if (rows <= 0) {
      FailureOr<mlir::kiln::TargetAttr> target = mlir::kiln::cpu::requireTarget(
          getOperation(), "kiln-prepare-weights");
      if (failed(target)) {
        return signalPassFailure();
      }
      rows = mlir::kiln::cpu::TargetInfo::of(*target).maxStreamedRows;
    }
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!func.isExternal() && !func.isPrivate()) {
        prepare(func, rows);
      }
    }
  }

  /// A function that updates arguments in place (a decoding step: its
  /// products of a few rows stream the weights as they are stored; a
  /// training step: its parameters change every call) keeps its signature.
  bool updatesInPlace(func::FuncOp func) {
    for (unsigned r = 0; r < func.getNumResults(); ++r) {
      if (func.getResultAttr(r, mlir::kiln::kUpdatesAttr)) {
        return true;
      }
    }
    return false;
  }

  void prepare(func::FuncOp func, int64_t maxRows) {
    if (updatesInPlace(func)) {
      LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": " << func.getName()
                              << " updates arguments in place: unchanged\n");
      return;
    }
    OpBuilder b(func.getContext());
    unsigned params = func.getNumArguments();
    for (unsigned i = 0; i < params; ++i) {
      auto kind = func.getArgAttrOfType<StringAttr>(i, mlir::kiln::kKindAttr);
      auto name = func.getArgAttrOfType<StringAttr>(i, mlir::kiln::kNameAttr);
      auto type = dyn_cast<RankedTensorType>(func.getArgumentTypes()[i]);
      if (!kind ||
          kind.getValue() !=
              mlir::kiln::stringifyArgKind(mlir::kiln::ArgKind::param) ||
          !name || !type || type.getRank() != 2 || !type.hasStaticShape() ||
          !type.getElementType().isF32()) {
        continue;
      }
      BlockArgument param = func.getArgument(i);
      SmallVector<OpOperand *> direct = transposedReads(param, maxRows);
      // Row blocks of the parameter (the query, key and value weights cut
      // from one [3d, d] weight) whose every use reads them transposed.
      SmallVector<std::pair<tensor::ExtractSliceOp, SmallVector<OpOperand *>>>
          slices;
      for (Operation *user : param.getUsers()) {
        auto slice = dyn_cast<tensor::ExtractSliceOp>(user);
        if (!slice || slice.getSourceType().getRank() != 2 ||
            slice.getResultType().getRank() != 2 || !slice.hasUnitStride()) {
          continue;
        }
        SmallVector<OpOperand *> reads =
            transposedReads(slice.getResult(), maxRows);
        if (!reads.empty() &&
            reads.size() == llvm::range_size(slice->getUses())) {
          slices.push_back({slice, reads});
        }
      }
      if (direct.empty() && slices.empty()) {
        continue;
      }
      auto preparedType = RankedTensorType::get(
          {type.getDimSize(1), type.getDimSize(0)}, type.getElementType());
      NamedAttribute attrs[] = {
          b.getNamedAttr(mlir::kiln::kKindAttr,
                         b.getStringAttr(mlir::kiln::stringifyArgKind(
                             mlir::kiln::ArgKind::prepared))),
          b.getNamedAttr(mlir::kiln::kNameAttr, name)};
      unsigned index = func.getNumArguments();
      if (failed(func.insertArgument(index, preparedType,
                                     b.getDictionaryAttr(attrs),
                                     param.getLoc()))) {
        func.emitOpError("kiln-prepare-weights: cannot add an argument for '")
            << name.getValue() << "'";
        return signalPassFailure();
      }
      Value prepared = func.getArgument(index);
      for (OpOperand *read : direct) {
        readPrepared(b, cast<linalg::GenericOp>(read->getOwner()), *read,
                     prepared);
      }
      for (auto &[slice, reads] : slices) {
        b.setInsertionPoint(slice);
        SmallVector<OpFoldResult> offsets = slice.getMixedOffsets();
        SmallVector<OpFoldResult> sizes = slice.getMixedSizes();
        std::swap(offsets[0], offsets[1]);
        std::swap(sizes[0], sizes[1]);
        Value columns = tensor::ExtractSliceOp::create(
            b, slice.getLoc(), prepared, offsets, sizes,
            SmallVector<OpFoldResult>(2, b.getIndexAttr(1)));
        for (OpOperand *read : reads) {
          readPrepared(b, cast<linalg::GenericOp>(read->getOwner()), *read,
                       columns);
        }
        slice.erase();
      }
      LLVM_DEBUG(llvm::dbgs()
                 << DEBUG_TYPE ": " << func.getName() << " reads '"
                 << name.getValue() << "' transposed in " << direct.size()
                 << " products and " << slices.size() << " row blocks\n");
    }
  }
};

} // namespace
