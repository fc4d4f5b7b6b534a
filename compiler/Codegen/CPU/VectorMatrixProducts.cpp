//===- VectorMatrixProducts.cpp - A few rows times a weight, streamed -----===//
//
// Implements kiln-vector-matrix-products.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/Passes.h"

#include "compiler/Codegen/CPU/Contraction.h"
#include "compiler/Codegen/CPU/TargetInfo.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kiln-vector-matrix-products"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNVECTORMATRIXPRODUCTSPASS
#include "compiler/Codegen/CPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

/// A product out[m..., n] += a[m..., k] * b[n, k] that this pass streams:
/// f32 buffers, one n and one k loop, no batch loop, k innermost and
/// contiguous in both inputs, the output indexed (m..., n) in a's order.
struct Product {
  linalg::LinalgOp op;
  unsigned a, b;        // input operand numbers
  unsigned n, k;        // loop dimensions
  SmallVector<unsigned> m;
  int64_t kSize;        // static
};

std::optional<Product> match(linalg::LinalgOp op, int64_t lanes) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 || !linalg::isaContractionOpInterface(op)) {
    return std::nullopt;
  }
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  if (failed(dims) || !dims->batch.empty() || dims->n.size() != 1 ||
      dims->k.size() != 1 || dims->m.empty()) {
    return std::nullopt;
  }
  Product p;
  p.op = op;
  p.n = dims->n.front();
  p.k = dims->k.front();
  p.m.assign(dims->m.begin(), dims->m.end());
  // b is the input the n loop indexes.
  auto operands = mlir::kiln::cpu::operandLoopDims(op);
  if (!operands) {
    return std::nullopt;
  }
  const SmallVector<unsigned> *in0 = &(*operands)[0], *in1 = &(*operands)[1],
                              *out = &(*operands)[2];
  p.b = llvm::is_contained(*in0, p.n) ? 0 : 1;
  p.a = 1 - p.b;
  SmallVector<unsigned> aDims = p.a == 0 ? *in0 : *in1;
  SmallVector<unsigned> bDims = p.b == 0 ? *in0 : *in1;
  SmallVector<unsigned> mk(p.m.begin(), p.m.end()), mn(mk);
  mk.push_back(p.k);
  mn.push_back(p.n);
  // a: (m..., k) in the order the output has its m loops.
  SmallVector<unsigned> aM(aDims.begin(), aDims.end() - 1);
  if (bDims != SmallVector<unsigned>{p.n, p.k} || aDims.back() != p.k ||
      aDims.size() != p.m.size() + 1 || out->size() != p.m.size() + 1 ||
      out->back() != p.n ||
      SmallVector<unsigned>(out->begin(), out->end() - 1) != aM) {
    return std::nullopt;
  }
  p.m = aM;
  Value a = op->getOperand(p.a), b = op->getOperand(p.b);
  auto bType = cast<MemRefType>(b.getType());
  p.kSize = bType.getDimSize(1);
  if (ShapedType::isDynamic(p.kSize) || p.kSize < lanes ||
      p.kSize % lanes != 0 || !mlir::kiln::cpu::isF32InnermostContiguous(a) ||
      !mlir::kiln::cpu::isF32InnermostContiguous(b) ||
      !cast<MemRefType>(op.getDpsInits()[0].getType())
           .getElementType()
           .isF32()) {
    return std::nullopt;
  }
  return p;
}

/// `buffer` with its last dimension (of static size k) split into [k /
/// lanes, lanes].
Value splitLast(OpBuilder &b, Location loc, Value buffer, int64_t lanes) {
  auto type = cast<MemRefType>(buffer.getType());
  int64_t rank = type.getRank();
  SmallVector<int64_t> shape(type.getShape());
  int64_t k = shape.back();
  shape.back() = k / lanes;
  shape.push_back(lanes);
  SmallVector<ReassociationIndices> groups;
  for (int64_t i = 0; i + 1 < rank; ++i) {
    groups.push_back({i});
  }
  groups.push_back({rank - 1, rank});
  SmallVector<OpFoldResult> sizes = memref::getMixedSizes(b, loc, buffer);
  sizes.back() = b.getIndexAttr(k / lanes);
  sizes.push_back(b.getIndexAttr(lanes));
  return memref::ExpandShapeOp::create(b, loc, shape, buffer, groups, sizes);
}

/// Builds, at `b`'s insertion point, the product of `p` as a stream over
/// b[n, k]: partial[m..., n, l] = sum over j of a[m..., j, l] * b[n, j, l]
/// (k split into j and l of one vector each: one FMA into a vector
/// accumulator per vector of a row of b, the loops (n, m..., j, l) so that
/// the rows of a are re-read from L1 for each row of b, which is read from
/// memory once), then out[m..., n] += sum over l of partial[m..., n, l].
void buildStreamedProduct(OpBuilder &b, const Product &p, int64_t lanes) {
  linalg::LinalgOp op = p.op;
  Location loc = op.getLoc();
  MLIRContext *context = b.getContext();
  Value a = op->getOperand(p.a), w = op->getOperand(p.b);
  Value out = op.getDpsInits()[0];
  Value aSplit = splitLast(b, loc, a, lanes);
  Value wSplit = splitLast(b, loc, w, lanes);
  unsigned rows = p.m.size();
  // Loops of the streaming product: n, m_0..m_{r-1}, j, l.
  unsigned loops = rows + 3;
  AffineExpr n = getAffineDimExpr(0, context);
  AffineExpr j = getAffineDimExpr(rows + 1, context);
  AffineExpr l = getAffineDimExpr(rows + 2, context);
  SmallVector<AffineExpr> aExprs, partialExprs;
  for (unsigned i = 0; i < rows; ++i) {
    aExprs.push_back(getAffineDimExpr(1 + i, context));
  }
  partialExprs = aExprs;
  aExprs.append({j, l});
  partialExprs.append({n, l});
  // The partial sums [m..., n, lanes], zeroed tile by tile
  // (kiln-tile-and-peel fills each accumulator in registers).
  auto outType = cast<MemRefType>(out.getType());
  SmallVector<int64_t> partialShape(outType.getShape());
  partialShape.push_back(lanes);
  SmallVector<Value> dynamicSizes;
  for (int64_t i = 0; i < outType.getRank(); ++i) {
    if (outType.isDynamicDim(i)) {
      dynamicSizes.push_back(memref::DimOp::create(b, loc, out, i));
    }
  }
  auto partialType = MemRefType::get(partialShape, b.getF32Type());
  Value partial = memref::AllocOp::create(b, loc, partialType, dynamicSizes,
                                          b.getI64IntegerAttr(64));
  SmallVector<utils::IteratorType> iterators(loops,
                                             utils::IteratorType::parallel);
  iterators[rows + 1] = utils::IteratorType::reduction;
  auto streamed = linalg::GenericOp::create(
      b, loc, TypeRange{}, ValueRange{aSplit, wSplit}, ValueRange{partial},
      ArrayRef<AffineMap>{AffineMap::get(loops, 0, aExprs, context),
                          AffineMap::get(loops, 0, {n, j, l}, context),
                          AffineMap::get(loops, 0, partialExprs, context)},
      iterators, [](OpBuilder &nested, Location nestedLoc, ValueRange args) {
        Value product =
            arith::MulFOp::create(nested, nestedLoc, args[0], args[1]);
        Value sum = arith::AddFOp::create(nested, nestedLoc, args[2], product);
        linalg::YieldOp::create(nested, nestedLoc, sum);
      });
  streamed->setAttr(mlir::kiln::cpu::kFillAttr, b.getF32FloatAttr(0.0f));
  // out[m..., n] += sum over l of partial[m..., n, l]; a fill deferred to
  // the product (its bias or zero) moves to this sum.
  SmallVector<AffineExpr> sumExprs, outExprs;
  for (unsigned i = 0; i <= rows; ++i) {
    outExprs.push_back(getAffineDimExpr(i, context));
  }
  sumExprs = outExprs;
  sumExprs.push_back(getAffineDimExpr(rows + 1, context));
  SmallVector<utils::IteratorType> sumIterators(rows + 2,
                                                utils::IteratorType::parallel);
  sumIterators.back() = utils::IteratorType::reduction;
  auto sum = linalg::GenericOp::create(
      b, loc, TypeRange{}, ValueRange{partial}, ValueRange{out},
      ArrayRef<AffineMap>{AffineMap::get(rows + 2, 0, sumExprs, context),
                          AffineMap::get(rows + 2, 0, outExprs, context)},
      sumIterators, [](OpBuilder &nested, Location nestedLoc, ValueRange args) {
        Value total = arith::AddFOp::create(nested, nestedLoc, args[1], args[0]);
        linalg::YieldOp::create(nested, nestedLoc, total);
      });
  if (Attribute fill = op->getAttr(mlir::kiln::cpu::kFillAttr)) {
    sum->setAttr(mlir::kiln::cpu::kFillAttr, fill);
  }
  memref::DeallocOp::create(b, loc, partial);
}

struct KilnVectorMatrixProductsPass
    : mlir::kiln::impl::KilnVectorMatrixProductsPassBase<
          KilnVectorMatrixProductsPass> {
  using Base::Base;

  void runOnOperation() override {
    int64_t lanes = vectorWidth, rows = maxRows;
    if (lanes <= 0 || rows <= 0) {
      FailureOr<mlir::kiln::TargetAttr> target = mlir::kiln::cpu::requireTarget(
          getOperation(), "kiln-vector-matrix-products");
      if (failed(target)) {
        return signalPassFailure();
      }
      mlir::kiln::cpu::TargetInfo info =
          mlir::kiln::cpu::TargetInfo::of(*target);
      lanes = lanes > 0 ? lanes : info.vectorWidth();
      rows = rows > 0 ? rows : info.maxStreamedRows;
    }
    SmallVector<Product> products;
    getOperation()->walk([&](linalg::LinalgOp op) {
      if (std::optional<Product> p = match(op, lanes)) {
        products.push_back(std::move(*p));
      }
    });
    for (const Product &p : products) {
      rewrite(p, lanes, rows);
    }
  }

  /// The rows (the product of the m loops' sizes) decide at run time, or
  /// at compile time when static: at most maxRows, the streamed product;
  /// more, the op as it was (kiln-tile-and-vectorize's blocked product).
  void rewrite(const Product &p, int64_t lanes, int64_t maxRows) {
    linalg::LinalgOp op = p.op;
    OpBuilder b(op);
    Location loc = op.getLoc();
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    int64_t staticRows = 1;
    bool dynamic = false;
    for (unsigned m : p.m) {
      if (ShapedType::isDynamic(ranges[m])) {
        dynamic = true;
      } else {
        staticRows *= ranges[m];
      }
    }
    if (staticRows > maxRows) {
      return;
    }
    if (!dynamic) {
      LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": " << staticRows
                              << " static rows streamed: " << *op << "\n");
      buildStreamedProduct(b, p, lanes);
      op->erase();
      return;
    }
    // The rows at run time: each m loop's size, from the operand a.
    Value a = op->getOperand(p.a);
    Value rows = arith::ConstantIndexOp::create(b, loc, 1);
    for (unsigned i = 0; i < p.m.size(); ++i) {
      rows = arith::MulIOp::create(b, loc, rows,
                                   memref::DimOp::create(b, loc, a, i));
    }
    Value few = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ule, rows,
        arith::ConstantIndexOp::create(b, loc, maxRows));
    auto choice = scf::IfOp::create(b, loc, few, /*withElseRegion=*/true);
    op->moveBefore(choice.elseBlock()->getTerminator());
    b.setInsertionPoint(choice.thenBlock()->getTerminator());
    buildStreamedProduct(b, p, lanes);
    LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": streamed up to " << maxRows
                            << " dynamic rows: " << *op << "\n");
  }
};

} // namespace
