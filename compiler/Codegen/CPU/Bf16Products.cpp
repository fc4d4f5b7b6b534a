//===- Bf16Products.cpp - Matrix products in bf16 with f32 sums -----------===//
//
// Implements kiln-bf16-products.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/Passes.h"

#include "compiler/Codegen/CPU/Contraction.h"
#include "compiler/Codegen/CPU/TargetInfo.h"

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kiln-bf16-products"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNBF16PRODUCTSPASS
#include "compiler/Codegen/CPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

/// f32 lanes of a 512-bit register, and bf16 pairs in one.
constexpr int64_t kLanes = 16;
/// The register tile: 8 rows of two accumulator registers (16 of the 32
/// registers, two for the panel's pairs, one for the broadcast pair of A).
constexpr int64_t kRows = 8;
constexpr int64_t kCols = 2 * kLanes;
/// Pairs of the reduction packed per step (a 16 x 16 block of pairs is
/// transposed in registers when the source holds the other dimension
/// contiguous); the packed buffers' reduction extent is a multiple of it.
constexpr int64_t kPairBlock = 16;
/// AMX: a tile holds 16 rows of 64 bytes (16 f32 sums, or 16 bf16 pairs);
/// the register tile is 2 x 2 tiles of sums (32 rows by one 32-column
/// panel), with two tiles of a and two of b: the eight tile registers.
constexpr int64_t kTileRows = 16;
constexpr int64_t kAmxRows = 2 * kTileRows;

using mlir::kiln::cpu::Bf16Kernels;

/// A contraction out[batch.., m.., n..] += a * b on f32 buffers: each
/// operand's batch loops first (in one order), then its other loops in two
/// runs (a: m.. and k.., in either order; b: n.. and k..; out: m.. then
/// n..), each run in the same order wherever it appears, so that collapsing
/// the runs gives 2-D buffers (3-D with the batch loops collapsed in
/// front); the innermost dimension of each with stride 1.
struct Product {
  linalg::LinalgOp op;
  Value a, b, out;
  /// The runs of each operand, in its order (collapse_shape's groups): the
  /// batch run first when there is one.
  SmallVector<ReassociationIndices> aRuns, bRuns, outRuns;
  bool batched = false;
  unsigned aM, aK; // the dimensions of the collapsed a that m and k index
  unsigned bN, bK; // the dimensions of the collapsed b that n and k index
  std::optional<FloatAttr> fill; // the value out holds before (kiln.fill)
};

enum class Role { batch, m, n, k };

/// `dims` after its first `batch` (the batch loops) split into two runs of
/// the roles `first` then `second`: the groups of positions (the batch
/// positions first when there are any) and the loops of each run; none when
/// the roles do not come in those runs.
std::optional<
    std::pair<SmallVector<ReassociationIndices>,
              std::pair<SmallVector<unsigned>, SmallVector<unsigned>>>>
runsOf(ArrayRef<unsigned> dims, const DenseMap<unsigned, Role> &roles,
       Role first, Role second, size_t batch) {
  ReassociationIndices one, two, batchRun;
  SmallVector<unsigned> oneLoops, twoLoops;
  for (auto [position, dim] : llvm::enumerate(dims)) {
    if (position < batch) {
      batchRun.push_back(position);
      continue;
    }
    Role role = roles.lookup(dim);
    if (role == first && two.empty()) {
      one.push_back(position);
      oneLoops.push_back(dim);
    } else if (role == second) {
      two.push_back(position);
      twoLoops.push_back(dim);
    } else {
      return std::nullopt;
    }
  }
  if (one.empty() || two.empty()) {
    return std::nullopt;
  }
  SmallVector<ReassociationIndices> groups;
  if (!batchRun.empty()) {
    groups.push_back(batchRun);
  }
  groups.append({one, two});
  return std::make_pair(groups, std::make_pair(oneLoops, twoLoops));
}

/// Whether `buffer` is f32 with its innermost stride 1 and collapses by
/// `runs` into a 2-D (3-D with a batch run) buffer.
bool collapsible(Value buffer, ArrayRef<ReassociationIndices> runs) {
  return mlir::kiln::cpu::isF32InnermostContiguous(buffer) &&
         memref::CollapseShapeOp::isGuaranteedCollapsible(
             cast<MemRefType>(buffer.getType()), runs);
}

std::optional<Product> match(linalg::LinalgOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 || !linalg::isaContractionOpInterface(op)) {
    return std::nullopt;
  }
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  if (failed(dims) || dims->m.empty() || dims->n.empty() || dims->k.empty()) {
    return std::nullopt;
  }
  DenseMap<unsigned, Role> roles;
  for (unsigned d : dims->batch) {
    roles[d] = Role::batch;
  }
  for (unsigned d : dims->m) {
    roles[d] = Role::m;
  }
  for (unsigned d : dims->n) {
    roles[d] = Role::n;
  }
  for (unsigned d : dims->k) {
    roles[d] = Role::k;
  }
  auto operands = mlir::kiln::cpu::operandLoopDims(op);
  if (!operands) {
    return std::nullopt;
  }
  const SmallVector<unsigned> *in0 = &(*operands)[0], *in1 = &(*operands)[1],
                              *out = &(*operands)[2];
  unsigned bIndex = llvm::is_contained(*in0, dims->n.front()) ? 0 : 1;
  SmallVector<unsigned> aDims = bIndex == 0 ? *in1 : *in0;
  SmallVector<unsigned> bDims = bIndex == 0 ? *in0 : *in1;
  // The batch loops lead every operand, in one order.
  size_t batch = dims->batch.size();
  ArrayRef<unsigned> batchLoops =
      ArrayRef<unsigned>(*out).take_front(std::min(batch, out->size()));
  for (ArrayRef<unsigned> operand :
       {ArrayRef<unsigned>(aDims), ArrayRef<unsigned>(bDims),
        ArrayRef<unsigned>(*out)}) {
    if (operand.size() < batch || operand.take_front(batch) != batchLoops) {
      return std::nullopt;
    }
  }
  for (unsigned d : batchLoops) {
    if (roles.lookup(d) != Role::batch) {
      return std::nullopt;
    }
  }
  auto outRuns = runsOf(*out, roles, Role::m, Role::n, batch);
  auto aMK = runsOf(aDims, roles, Role::m, Role::k, batch);
  auto aKM = runsOf(aDims, roles, Role::k, Role::m, batch);
  auto bNK = runsOf(bDims, roles, Role::n, Role::k, batch);
  auto bKN = runsOf(bDims, roles, Role::k, Role::n, batch);
  if (!outRuns || (!aMK && !aKM) || (!bNK && !bKN)) {
    return std::nullopt;
  }
  Product p;
  p.op = op;
  p.a = op->getOperand(1 - bIndex);
  p.b = op->getOperand(bIndex);
  p.out = op.getDpsInits()[0];
  p.batched = batch > 0;
  p.aM = aMK ? 0 : 1;
  p.aK = 1 - p.aM;
  p.bN = bNK ? 0 : 1;
  p.bK = 1 - p.bN;
  auto &aRuns = aMK ? *aMK : *aKM;
  auto &bRuns = bNK ? *bNK : *bKN;
  const SmallVector<unsigned> &aM =
      p.aM == 0 ? aRuns.second.first : aRuns.second.second;
  const SmallVector<unsigned> &aK =
      p.aK == 0 ? aRuns.second.first : aRuns.second.second;
  const SmallVector<unsigned> &bN =
      p.bN == 0 ? bRuns.second.first : bRuns.second.second;
  const SmallVector<unsigned> &bK =
      p.bK == 0 ? bRuns.second.first : bRuns.second.second;
  // Each run in one order wherever it appears.
  if (aM != outRuns->second.first || bN != outRuns->second.second || aK != bK) {
    return std::nullopt;
  }
  p.aRuns = aRuns.first;
  p.bRuns = bRuns.first;
  p.outRuns = outRuns->first;
  if (!collapsible(p.a, p.aRuns) || !collapsible(p.b, p.bRuns) ||
      !collapsible(p.out, p.outRuns)) {
    return std::nullopt;
  }
  if (Attribute fill = op->getAttr(mlir::kiln::cpu::kFillAttr)) {
    auto value = dyn_cast<FloatAttr>(fill);
    if (!value || !value.getType().isF32()) {
      return std::nullopt;
    }
    p.fill = value;
  }
  return p;
}

/// `buffer` collapsed by `runs`, one dimension each (itself when it has as
/// many).
Value collapse(ImplicitLocOpBuilder &b, Value buffer,
               ArrayRef<ReassociationIndices> runs) {
  if (cast<MemRefType>(buffer.getType()).getRank() == int64_t(runs.size())) {
    return buffer;
  }
  return memref::CollapseShapeOp::create(b, buffer, runs);
}

/// The slice `[index, ...]` of `buffer` without its first dimension.
Value slice(ImplicitLocOpBuilder &b, Value buffer, Value index) {
  auto type = cast<MemRefType>(buffer.getType());
  int64_t rank = type.getRank();
  SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0));
  offsets[0] = index;
  SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1)};
  SmallVector<int64_t> shape;
  for (int64_t d = 1; d < rank; ++d) {
    sizes.push_back(
        type.isDynamicDim(d)
            ? OpFoldResult(memref::DimOp::create(b, buffer, d).getResult())
            : OpFoldResult(b.getIndexAttr(type.getDimSize(d))));
    shape.push_back(type.getDimSize(d));
  }
  SmallVector<OpFoldResult> strides(rank, b.getIndexAttr(1));
  auto sliceType = memref::SubViewOp::inferRankReducedResultType(
      shape, type, offsets, sizes, strides);
  return memref::SubViewOp::create(b, cast<MemRefType>(sliceType), buffer,
                                   offsets, sizes, strides);
}

/// Builds the packing and the register tiles of one product.
class Builder {
public:
  Builder(const Product &product, Bf16Kernels kernels, int64_t l2Bytes)
      : p(product), kernels(kernels), l2Bytes(l2Bytes),
        b(p.op.getLoc(), p.op) {
    p.a = collapse(b, p.a, p.aRuns);
    p.b = collapse(b, p.b, p.bRuns);
    p.out = collapse(b, p.out, p.outRuns);
  }

  /// Without batch loops, one product whose packing and tiles run on all
  /// cores; with them, a loop over the batch on all cores, each iteration a
  /// product of its own on one core (in slices of packed buffers allocated
  /// for every batch at once).
  void build() {
    unsigned first = p.batched ? 1 : 0;
    Value m = memref::DimOp::create(b, p.a, first + p.aM);
    Value k = memref::DimOp::create(b, p.a, first + p.aK);
    Value n = memref::DimOp::create(b, p.b, first + p.bN);
    Value pairs = ceilDiv(k, 2);
    Value pairsPadded = mul(ceilDiv(pairs, kPairBlock), kPairBlock);
    // AMX's register tiles take 32 rows of a at a time.
    int64_t rowPad = amx() ? kAmxRows : kPairBlock;
    Value rowsPadded = mul(ceilDiv(m, rowPad), rowPad);
    Value panels = ceilDiv(n, kCols);
    auto i32 = b.getI32Type();
    // a as bf16 pairs along k, [rows, pairs]; b as panels of 32 columns,
    // [panel, pair, column] (the VNNI layout vdpbf16ps reads).
    // (A batch dimension in front of each when batched.)
    SmallVector<int64_t> aShape(2, ShapedType::kDynamic),
        bShape = {ShapedType::kDynamic, ShapedType::kDynamic, kCols};
    SmallVector<Value> aSizes = {rowsPadded, pairsPadded},
                       bSizes = {panels, pairsPadded};
    Value batches;
    if (p.batched) {
      batches = memref::DimOp::create(b, p.out, 0);
      aShape.insert(aShape.begin(), ShapedType::kDynamic);
      aSizes.insert(aSizes.begin(), batches);
      bShape.insert(bShape.begin(), ShapedType::kDynamic);
      bSizes.insert(bSizes.begin(), batches);
    }
    if (kernels == Bf16Kernels::amx) {
      tilesGranted = requestTiles();
    }
    Value aPacked = memref::AllocOp::create(b, MemRefType::get(aShape, i32),
                                            aSizes, b.getI64IntegerAttr(64));
    Value bPacked = memref::AllocOp::create(b, MemRefType::get(bShape, i32),
                                            bSizes, b.getI64IntegerAttr(64));
    if (!p.batched) {
      buildOne(m, k, n, pairs, pairsPadded, rowsPadded, panels, aPacked,
               bPacked);
    } else {
      Value a3 = p.a, b3 = p.b, out3 = p.out;
      loop(batches, /*parallel=*/true, [&](Value index) {
        p.a = slice(b, a3, index);
        p.b = slice(b, b3, index);
        p.out = slice(b, out3, index);
        threads = false;
        buildOne(m, k, n, pairs, pairsPadded, rowsPadded, panels,
                 slice(b, aPacked, index), slice(b, bPacked, index));
        threads = true;
      });
    }
    memref::DeallocOp::create(b, aPacked);
    memref::DeallocOp::create(b, bPacked);
  }

private:
  /// One 2-D product of p.a, p.b into p.out through the packed buffers.
  void buildOne(Value m, Value k, Value n, Value pairs, Value pairsPadded,
                Value rowsPadded, Value panels, Value aPacked, Value bPacked) {
    if (p.aK == 1) {
      packRowsAlongK(m, amx() ? rowsPadded : m, pairsPadded, aPacked);
    } else {
      packColumnsAlongK(m, k, rowsPadded, pairsPadded, aPacked);
    }
    if (p.bK == 1) {
      packPanelsFromRowsAlongK(n, k, panels, pairsPadded, bPacked);
    } else {
      packPanelsFromColumns(n, k, panels, amx() ? pairsPadded : pairs, bPacked);
    }
    if (kernels == Bf16Kernels::dot) {
      multiply(m, n, panels, pairs, pairsPadded, aPacked, bPacked);
    } else if (kernels == Bf16Kernels::amxEmulated) {
      multiplyTiles(m, n, rowsPadded, panels, pairsPadded, aPacked, bPacked);
    } else {
      // AMX's tiles where Linux granted them, else (an older kernel, a
      // sandbox that refuses, a CPU without AMX running code compiled for
      // one) the vdpbf16ps register tiles on the same packed buffers.
      auto ifOp = scf::IfOp::create(b, tilesGranted, /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
      multiplyTiles(m, n, rowsPadded, panels, pairsPadded, aPacked, bPacked);
      b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
      multiply(m, n, panels, pairs, pairsPadded, aPacked, bPacked);
    }
  }

  /// Whether the products run on AMX's tiles (or their emulation).
  bool amx() const { return kernels != Bf16Kernels::dot; }

  Product p; // collapsed a, b and out (2-D slices inside a batch loop)
  Bf16Kernels kernels;
  /// The target's L2 per core (TargetInfo::l2Bytes).
  int64_t l2Bytes;
  /// With AMX's kernels: whether Linux granted the tile state (an i1).
  Value tilesGranted;
  /// Whether the loops a product marks run on all cores (not inside a
  /// batch loop that does).
  bool threads = true;

  ImplicitLocOpBuilder b;

  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value add(Value x, int64_t v) {
    return arith::AddIOp::create(b, x, index(v));
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, x, y); }
  Value mul(Value x, int64_t v) {
    return arith::MulIOp::create(b, x, index(v));
  }
  Value ceilDiv(Value x, int64_t v) {
    return arith::DivUIOp::create(b, add(x, v - 1), index(v));
  }
  Value ceilDiv(Value x, Value y) {
    return arith::DivUIOp::create(
        b, add(x, arith::SubIOp::create(b, y, index(1))), y);
  }
  VectorType vector(int64_t n, Type element) {
    return VectorType::get({n}, element);
  }

  /// A loop over [0, upper) by one, its body built by `body` at the
  /// insertion point; marked to run on all cores when `parallel`
  /// (kiln-parallelize-loops).
  void loop(Value upper, bool parallel, llvm::function_ref<void(Value)> body) {
    auto forOp = scf::ForOp::create(b, index(0), upper, index(1));
    if (parallel && threads) {
      forOp->setAttr(mlir::kiln::cpu::kParallelAttr, b.getUnitAttr());
    }
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(forOp.getBody()->getTerminator());
    body(forOp.getInductionVar());
  }

  /// Indices into `buffer` (a or b) of element (outer, inner), where
  /// `innerDim` is the dimension the `inner` index is for.
  SmallVector<Value> at(unsigned innerDim, Value outer, Value inner) {
    return innerDim == 1 ? SmallVector<Value>{outer, inner}
                         : SmallVector<Value>{inner, outer};
  }

  /// `lanes` f32 of `buffer` along its innermost dimension from `indices`,
  /// zero past its end.
  Value read(Value buffer, ValueRange indices, int64_t lanes) {
    Value zero = arith::ConstantOp::create(b, b.getF32FloatAttr(0.0f));
    return vector::TransferReadOp::create(b, vector(lanes, b.getF32Type()),
                                          buffer, indices, zero,
                                          ArrayRef<bool>{false});
  }

  /// read(), or zeros when `row` (the outer index) is not below `rows`; the
  /// read itself is of a row in range.
  Value readRowOrZero(Value buffer, unsigned innerDim, Value row, Value rows,
                      Value inner, int64_t lanes) {
    Value last = arith::SubIOp::create(b, rows, index(1));
    Value clamped = arith::MinUIOp::create(b, row, last);
    Value v = read(buffer, at(innerDim, clamped, inner), lanes);
    Value inside =
        arith::CmpIOp::create(b, arith::CmpIPredicate::ult, row, rows);
    Value zeros = arith::ConstantOp::create(
        b, DenseElementsAttr::get(vector(lanes, b.getF32Type()), 0.0f));
    return arith::SelectOp::create(b, inside, v, zeros);
  }

  /// f32 lanes rounded to bf16 (to nearest, ties to even).
  Value toBf16(Value v) {
    int64_t lanes = cast<VectorType>(v.getType()).getNumElements();
    return arith::TruncFOp::create(b, vector(lanes, b.getBF16Type()), v);
  }
  Value asPairs(Value bf16) {
    int64_t lanes = cast<VectorType>(bf16.getType()).getNumElements();
    return vector::BitCastOp::create(b, vector(lanes / 2, b.getI32Type()),
                                     bf16);
  }

  /// The 16 x 16 pairs `rows[i]` holds for i = 0..15, transposed: row j of
  /// the result holds pair j of every row.
  Value transposed(ArrayRef<Value> rows) {
    auto tileType = VectorType::get({kLanes, kLanes}, b.getI32Type());
    Value tile = arith::ConstantOp::create(
        b, DenseElementsAttr::get(tileType, b.getI32IntegerAttr(0)));
    for (auto [i, row] : llvm::enumerate(rows)) {
      tile = vector::InsertOp::create(b, row, tile, int64_t(i));
    }
    return vector::TransposeOp::create(b, tile, ArrayRef<int64_t>{1, 0});
  }

  /// a[m, k] with k contiguous: each row's 32 values from k = 32 kb are 16
  /// pairs of its packed row; `rows` of them (rows past m are zeros).
  void packRowsAlongK(Value m, Value rows, Value pairsPadded, Value aPacked) {
    loop(rows, /*parallel=*/true, [&](Value row) {
      loop(arith::DivUIOp::create(b, pairsPadded, index(kPairBlock)), false,
           [&](Value block) {
             Value k0 = mul(block, 2 * kPairBlock);
             Value v =
                 amx() ? readRowOrZero(p.a, p.aK, row, m, k0, 2 * kPairBlock)
                       : read(p.a, at(p.aK, row, k0), 2 * kPairBlock);
             vector::StoreOp::create(b, asPairs(toBf16(v)), aPacked,
                                     ValueRange{row, mul(block, kPairBlock)});
           });
    });
  }

  /// a stored [k, m] (m contiguous: a weight gradient's gᵀ): 16 rows by 32
  /// values of k at a time, rows k and k + 1 interleaved into pairs, the
  /// 16 x 16 pairs transposed into 16 packed rows. The cores split the
  /// blocks of k, and each sweeps m along its 32 rows of a: reads along
  /// the rows, which the prefetchers follow (sweeping k for one block of m
  /// would read one cache line of every row of a wide gᵀ: 4096 columns
  /// took 15% longer that way on Zen 4).
  void packColumnsAlongK(Value m, Value k, Value rowsPadded, Value pairsPadded,
                         Value aPacked) {
    loop(arith::DivUIOp::create(b, pairsPadded, index(kPairBlock)), true,
         [&](Value block) {
           loop(arith::DivUIOp::create(b, rowsPadded, index(kLanes)), false,
                [&](Value rowBlock) {
                  Value row0 = mul(rowBlock, kLanes);
                  Value k0 = mul(block, 2 * kPairBlock);
                  SmallVector<Value> columns;
                  for (int64_t j = 0; j < kPairBlock; ++j) {
                    Value even = toBf16(readRowOrZero(p.a, p.aM, add(k0, 2 * j),
                                                      k, row0, kLanes));
                    Value odd = toBf16(readRowOrZero(
                        p.a, p.aM, add(k0, 2 * j + 1), k, row0, kLanes));
                    columns.push_back(
                        asPairs(vector::InterleaveOp::create(b, even, odd)));
                  }
                  Value rows = transposed(columns);
                  for (int64_t i = 0; i < kLanes; ++i) {
                    vector::StoreOp::create(
                        b, vector::ExtractOp::create(b, rows, i), aPacked,
                        ValueRange{add(row0, i), mul(block, kPairBlock)});
                  }
                });
         });
  }

  /// b stored [n, k] (k contiguous: a linear's weight read transposed):
  /// per panel, 16 columns by 32 values of k at a time, transposed into 16
  /// pair rows of the panel. Columns past n repeat the last (their sums are
  /// never stored).
  void packPanelsFromRowsAlongK(Value n, Value k, Value panels,
                                Value pairsPadded, Value bPacked) {
    loop(panels, true, [&](Value panel) {
      loop(arith::DivUIOp::create(b, pairsPadded, index(kPairBlock)), false,
           [&](Value block) {
             Value last = arith::SubIOp::create(b, n, index(1));
             for (int64_t half = 0; half < 2; ++half) {
               SmallVector<Value> columns;
               for (int64_t c = 0; c < kLanes; ++c) {
                 Value column = arith::MinUIOp::create(
                     b, add(mul(panel, kCols), half * kLanes + c), last);
                 Value v =
                     read(p.b, at(p.bK, column, mul(block, 2 * kPairBlock)),
                          2 * kPairBlock);
                 columns.push_back(asPairs(toBf16(v)));
               }
               Value rows = transposed(columns);
               for (int64_t j = 0; j < kPairBlock; ++j) {
                 vector::StoreOp::create(
                     b, vector::ExtractOp::create(b, rows, j), bPacked,
                     ValueRange{panel, add(mul(block, kPairBlock), j),
                                index(half * kLanes)});
               }
             }
           });
    });
  }

  /// b stored [k, n] (n contiguous): rows k and k + 1 of a panel's 32
  /// columns interleaved into its pair row, for `pairs` pairs (those past k
  /// zeros).
  void packPanelsFromColumns(Value n, Value k, Value panels, Value pairs,
                             Value bPacked) {
    loop(panels, true, [&](Value panel) {
      loop(pairs, false, [&](Value pair) {
        Value column = mul(panel, kCols);
        Value k0 = mul(pair, 2);
        Value even = toBf16(readRowOrZero(p.b, p.bN, k0, k, column, kCols));
        Value odd =
            toBf16(readRowOrZero(p.b, p.bN, add(k0, 1), k, column, kCols));
        vector::StoreOp::create(
            b, asPairs(vector::InterleaveOp::create(b, even, odd)), bPacked,
            ValueRange{panel, pair, index(0)});
      });
    });
  }

  /// out[m, n] (+)= the packed product: per block of rows, panel, and tile
  /// of 8 rows, 16 accumulators over every pair of k (one vdpbf16ps per
  /// accumulator and pair, each pair of a broadcast to all lanes), then the
  /// rows in range stored (masked only in a last panel past n).
  void multiply(Value m, Value n, Value panels, Value pairs,
                Value pairsPadded, Value aPacked, Value bPacked) {
    auto f32x16 = vector(kLanes, b.getF32Type());
    auto bf16x32 = vector(2 * kLanes, b.getBF16Type());
    auto i32x16 = vector(kLanes, b.getI32Type());
    Value rowTiles = ceilDiv(m, kRows);
    Value lastRow = arith::SubIOp::create(b, m, index(1));
    // Row blocks whose packed rows of a fill at most half of L2: every
    // panel of b multiplies one block's rows from L2 (not the whole of a
    // from L3 per panel), and the block's rows of out are stored panel
    // after panel (a few pages, not one page of every row per panel).
    // (A tile of k = 0 counts as one byte: no division by zero.)
    Value tileBytes =
        arith::MaxUIOp::create(b, mul(pairsPadded, 4 * kRows), index(1));
    Value perBlock = arith::MaxUIOp::create(
        b, arith::DivUIOp::create(b, index(l2Bytes / 2), tileBytes), index(1));
    Value rowBlocks = ceilDiv(rowTiles, perBlock);
    loop(rowBlocks, false, [&](Value rowBlock) {
      Value firstTile = arith::MulIOp::create(b, rowBlock, perBlock);
      Value blockTiles = arith::MinUIOp::create(
          b, perBlock, arith::SubIOp::create(b, rowTiles, firstTile));
      loop(panels, true, [&](Value panel) {
        Value column = mul(panel, kCols);
        SmallVector<Value> columns = {column, add(column, kLanes)};
        Value panelInside = arith::CmpIOp::create(
            b, arith::CmpIPredicate::ule, add(column, kCols), n);
        loop(blockTiles, true, [&](Value blockTile) {
          Value row0 = mul(add(firstTile, blockTile), kRows);
          SmallVector<Value> init;
          for (int64_t r = 0; r < kRows; ++r) {
            if (p.fill) {
              init.append(2, arith::ConstantOp::create(
                                 b, DenseElementsAttr::get(
                                        f32x16, p.fill->getValue())));
              continue;
            }
            // Unmasked loads inside n, masked ones in the last panel.
            Value row = arith::MinUIOp::create(b, add(row0, r), lastRow);
            auto full = scf::IfOp::create(b, TypeRange{f32x16, f32x16},
                                          panelInside, /*withElseRegion=*/true);
            OpBuilder::InsertionGuard guard(b);
            for (bool inside : {true, false}) {
              Block *block = inside ? full.thenBlock() : full.elseBlock();
              b.setInsertionPointToStart(block);
              SmallVector<Value> halves;
              for (Value at : columns) {
                halves.push_back(
                    inside ? Value(vector::LoadOp::create(b, f32x16, p.out,
                                                          ValueRange{row, at}))
                           : read(p.out, ValueRange{row, at}, kLanes));
              }
              scf::YieldOp::create(b, halves);
            }
            init.append(full.getResults().begin(), full.getResults().end());
          }
          auto sums = scf::ForOp::create(
              b, index(0), pairs, index(1), init,
              [&](OpBuilder &nested, Location loc, Value pair, ValueRange acc) {
                ImplicitLocOpBuilder ib(loc, nested);
                Value panelPairs[2];
                for (int64_t h = 0; h < 2; ++h) {
                  Value start = arith::ConstantIndexOp::create(ib, h * kLanes);
                  Value v = vector::LoadOp::create(
                      ib, i32x16, bPacked, ValueRange{panel, pair, start});
                  panelPairs[h] = vector::BitCastOp::create(ib, bf16x32, v);
                }
                SmallVector<Value> next;
                for (int64_t r = 0; r < kRows; ++r) {
                  Value row = arith::AddIOp::create(
                      ib, row0, arith::ConstantIndexOp::create(ib, r));
                  Value aPair = memref::LoadOp::create(ib, aPacked,
                                                       ValueRange{row, pair});
                  Value broadcast = vector::BitCastOp::create(
                      ib, bf16x32,
                      vector::BroadcastOp::create(ib, i32x16, aPair));
                  for (int64_t h = 0; h < 2; ++h) {
                    next.push_back(x86vector::DotBF16Op::create(
                        ib, f32x16, acc[2 * r + h], broadcast, panelPairs[h]));
                  }
                }
                scf::YieldOp::create(ib, next);
              });
          for (int64_t r = 0; r < kRows; ++r) {
            Value row = add(row0, r);
            Value inside =
                arith::CmpIOp::create(b, arith::CmpIPredicate::ult, row, m);
            auto store = scf::IfOp::create(b, inside, /*withElseRegion=*/false);
            OpBuilder::InsertionGuard guard(b);
            b.setInsertionPoint(store.thenBlock()->getTerminator());
            // A panel inside n stores its rows unmasked: a masked store that
            // misses the caches is slow on AMD's cores (a product whose
            // output streams to memory ran at 2/3 of its speed on Zen 5);
            // the last panel, past n, masks.
            auto full =
                scf::IfOp::create(b, panelInside, /*withElseRegion=*/true);
            for (int64_t h = 0; h < 2; ++h) {
              SmallVector<Value> at = {row, columns[h]};
              b.setInsertionPoint(full.thenBlock()->getTerminator());
              vector::StoreOp::create(b, sums.getResult(2 * r + h), p.out, at);
              b.setInsertionPoint(full.elseBlock()->getTerminator());
              vector::TransferWriteOp::create(b, sums.getResult(2 * r + h),
                                              p.out, at, ArrayRef<bool>{false});
            }
          }
        });
      });
    });
  }

  /// Asks Linux for AMX's tile state for this process (arch_prctl
  /// ARCH_REQ_XCOMP_PERM, 0x1023, component XTILEDATA, 18; a tile
  /// instruction without it faults): a system call per product, granted
  /// once and answered at once afterwards, so that objects compiled ahead
  /// of time need nothing of the program that calls them, and nothing is
  /// asked of a process that multiplies no product on tiles. Whether it was
  /// granted (Linux 5.16 and later, unless a sandbox refuses).
  Value requestTiles() {
    auto i64 = b.getI64Type();
    auto constant = [&](int64_t v) {
      return arith::ConstantOp::create(b, b.getI64IntegerAttr(v)).getResult();
    };
    auto call = LLVM::InlineAsmOp::create(
        b, TypeRange{i64},
        ValueRange{constant(158 /* SYS_arch_prctl */), constant(0x1023),
                   constant(18)},
        "syscall",
        "={rax},{rax},{rdi},{rsi},~{rcx},~{r11},~{memory},~{dirflag},~{fpsr},"
        "~{flags}",
        /*has_side_effects=*/true, /*is_align_stack=*/false,
        LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(),
        ArrayAttr());
    return arith::CmpIOp::create(b, arith::CmpIPredicate::eq, call.getResult(0),
                                 constant(0));
  }

  // The tile instructions: AMX's, or with Bf16Kernels::amxEmulated, the
  // same arithmetic by vdpbf16ps: sums as vector<16x16xf32>, and the tiles
  // of bf16 pairs read where the tile load would read them.

  Type sumTile() {
    return kernels == Bf16Kernels::amx
               ? Type(amx::TileType::get({kTileRows, kLanes}, b.getF32Type()))
               : Type(VectorType::get({kTileRows, kLanes}, b.getF32Type()));
  }
  Value tileZero(ImplicitLocOpBuilder &ib) {
    if (kernels == Bf16Kernels::amx) {
      return amx::TileZeroOp::create(ib, sumTile());
    }
    return arith::ConstantOp::create(
        ib, DenseElementsAttr::get(cast<VectorType>(sumTile()), 0.0f));
  }
  /// The tile of 16 x 16 sums from `indices` of `buffer` (its rows the
  /// second-innermost dimension; every element in bounds).
  Value tileLoad(ImplicitLocOpBuilder &ib, Value buffer, ValueRange indices) {
    if (kernels == Bf16Kernels::amx) {
      return amx::TileLoadOp::create(ib, sumTile(), buffer, indices);
    }
    Value pad = arith::ConstantOp::create(ib, ib.getF32FloatAttr(0.0f));
    return vector::TransferReadOp::create(ib, cast<VectorType>(sumTile()),
                                          buffer, indices, pad,
                                          ArrayRef<bool>{true, true});
  }
  void tileStore(ImplicitLocOpBuilder &ib, Value tile, Value buffer,
                 ValueRange indices) {
    if (kernels == Bf16Kernels::amx) {
      amx::TileStoreOp::create(ib, buffer, indices, tile);
      return;
    }
    vector::TransferWriteOp::create(ib, tile, buffer, indices,
                                    ArrayRef<bool>{true, true});
  }

  /// A tile of 16 rows of 16 bf16 pairs (of a: rows by pairs of k; of b:
  /// pairs of k by columns) at `indices` of a packed buffer of i32 pairs:
  /// loaded (AMX), or where the emulation reads it.
  struct PairTile {
    Value tile;
    Value buffer;
    SmallVector<Value> indices;
  };
  PairTile pairTile(ImplicitLocOpBuilder &ib, Value buffer,
                    ValueRange indices) {
    PairTile t{Value(), buffer, SmallVector<Value>(indices)};
    if (kernels == Bf16Kernels::amx) {
      t.tile = amx::TileLoadOp::create(
          ib, amx::TileType::get({kTileRows, 2 * kLanes}, ib.getBF16Type()),
          buffer, indices);
    }
    return t;
  }
  /// `t`'s element at `indices` moved by `row` rows and `column` pairs.
  static SmallVector<Value> within(ImplicitLocOpBuilder &ib, const PairTile &t,
                                   Value row, Value column) {
    SmallVector<Value> at = t.indices;
    size_t rank = at.size();
    at[rank - 2] = arith::AddIOp::create(ib, at[rank - 2], row);
    if (column) {
      at[rank - 1] = arith::AddIOp::create(ib, at[rank - 1], column);
    }
    return at;
  }

  /// acc += a b (tdpbf16ps): sum (m, n) adds a's pair (m, p) times b's pair
  /// (p, n) for the 16 pairs p. Emulated: per pair, row p of b (16 pairs,
  /// one per column) against the broadcast pair (m, p) of each row of a.
  Value tileMul(ImplicitLocOpBuilder &ib, Value acc, const PairTile &a,
                const PairTile &bTile) {
    if (kernels == Bf16Kernels::amx) {
      return amx::TileMulFOp::create(ib, sumTile(), a.tile, bTile.tile, acc);
    }
    auto bf16x32 = vector(2 * kLanes, ib.getBF16Type());
    auto i32x16 = vector(kLanes, ib.getI32Type());
    SmallVector<Value> rows;
    for (int64_t r = 0; r < kTileRows; ++r) {
      rows.push_back(vector::ExtractOp::create(ib, acc, r));
    }
    auto pairs = scf::ForOp::create(
        ib, arith::ConstantIndexOp::create(ib, 0),
        arith::ConstantIndexOp::create(ib, kLanes),
        arith::ConstantIndexOp::create(ib, 1), rows,
        [&](OpBuilder &nested, Location loc, Value pair, ValueRange sums) {
          ImplicitLocOpBuilder lb(loc, nested);
          Value columns = vector::BitCastOp::create(
              lb, bf16x32,
              vector::LoadOp::create(lb, i32x16, bTile.buffer,
                                     within(lb, bTile, pair, Value())));
          SmallVector<Value> next;
          for (int64_t r = 0; r < kTileRows; ++r) {
            Value aPair = memref::LoadOp::create(
                lb, a.buffer,
                within(lb, a, arith::ConstantIndexOp::create(lb, r), pair));
            Value broadcast = vector::BitCastOp::create(
                lb, bf16x32, vector::BroadcastOp::create(lb, i32x16, aPair));
            next.push_back(x86vector::DotBF16Op::create(
                lb, vector(kLanes, lb.getF32Type()), sums[r], broadcast,
                columns));
          }
          scf::YieldOp::create(lb, next);
        });
    Value result = tileZero(ib);
    for (int64_t r = 0; r < kTileRows; ++r) {
      result = vector::InsertOp::create(ib, pairs.getResult(r), result, r);
    }
    return result;
  }

  /// out[m, n] (+)= the packed product on tiles: per panel (two tiles of 16
  /// columns) and block of 32 rows (two tiles of a), four tiles of sums over
  /// every 16 pairs of k (the padded pairs are zeros in both packed
  /// buffers). A block wholly inside out loads and stores its sums there
  /// (or starts from zero tiles for a zero fill); one on an edge goes
  /// through a 32 x 32 buffer of its own (a few per product: the edges),
  /// whose rows and columns in range are copied in and out.
  void multiplyTiles(Value m, Value n, Value rowsPadded, Value panels,
                     Value pairsPadded, Value aPacked, Value bPacked) {
    Value rowTiles = arith::DivUIOp::create(b, rowsPadded, index(kAmxRows));
    Value steps = arith::DivUIOp::create(b, pairsPadded, index(kPairBlock));
    bool zeroFill = p.fill && p.fill->getValue().isPosZero();
    auto f32x16 = vector(kLanes, b.getF32Type());
    loop(panels, true, [&](Value panel) {
      Value column = mul(panel, kCols);
      loop(rowTiles, true, [&](Value tile) {
        Value row0 = mul(tile, kAmxRows);
        // The four tiles of sums from `initial`, summed over k, given to
        // `store`.
        auto sums =
            [&](llvm::function_ref<Value(int64_t, int64_t)> initial,
                llvm::function_ref<void(int64_t, int64_t, Value)> store) {
              SmallVector<Value> init;
              for (int64_t i = 0; i < 2; ++i) {
                for (int64_t j = 0; j < 2; ++j) {
                  init.push_back(initial(i, j));
                }
              }
              auto forOp = scf::ForOp::create(
                  b, index(0), steps, index(1), init,
                  [&](OpBuilder &nested, Location loc, Value step,
                      ValueRange acc) {
                    ImplicitLocOpBuilder ib(loc, nested);
                    Value pair0 = arith::MulIOp::create(
                        ib, step,
                        arith::ConstantIndexOp::create(ib, kPairBlock));
                    PairTile aTiles[2], bTiles[2];
                    for (int64_t i = 0; i < 2; ++i) {
                      Value row = arith::AddIOp::create(
                          ib, row0,
                          arith::ConstantIndexOp::create(ib, i * kTileRows));
                      aTiles[i] = pairTile(ib, aPacked, ValueRange{row, pair0});
                    }
                    for (int64_t j = 0; j < 2; ++j) {
                      bTiles[j] =
                          pairTile(ib, bPacked,
                                   ValueRange{panel, pair0,
                                              arith::ConstantIndexOp::create(
                                                  ib, j * kLanes)});
                    }
                    SmallVector<Value> next;
                    for (int64_t i = 0; i < 2; ++i) {
                      for (int64_t j = 0; j < 2; ++j) {
                        next.push_back(
                            tileMul(ib, acc[2 * i + j], aTiles[i], bTiles[j]));
                      }
                    }
                    scf::YieldOp::create(ib, next);
                  });
              for (int64_t i = 0; i < 2; ++i) {
                for (int64_t j = 0; j < 2; ++j) {
                  store(i, j, forOp.getResult(2 * i + j));
                }
              }
            };
        // The block through a buffer: rows and columns past out's are
        // zeros going in and dropped coming out.
        auto throughBuffer = [&]() {
          Value block = memref::AllocOp::create(
              b, MemRefType::get({kAmxRows, kCols}, b.getF32Type()),
              b.getI64IntegerAttr(64));
          loop(index(kAmxRows), false, [&](Value r) {
            Value row = add(row0, r);
            for (int64_t h = 0; h < 2; ++h) {
              Value v = p.fill ? arith::ConstantOp::create(
                                     b, DenseElementsAttr::get(
                                            f32x16, p.fill->getValue()))
                                     .getResult()
                               : readRowOrZero(p.out, 1, row, m,
                                               add(column, h * kLanes), kLanes);
              vector::StoreOp::create(b, v, block,
                                      ValueRange{r, index(h * kLanes)});
            }
          });
          sums(
              [&](int64_t i, int64_t j) {
                return tileLoad(
                    b, block,
                    ValueRange{index(i * kTileRows), index(j * kLanes)});
              },
              [&](int64_t i, int64_t j, Value sum) {
                tileStore(b, sum, block,
                          ValueRange{index(i * kTileRows), index(j * kLanes)});
              });
          Value rowsLeft = arith::SubIOp::create(b, m, row0);
          Value rows = arith::MinUIOp::create(b, rowsLeft, index(kAmxRows));
          loop(rows, false, [&](Value r) {
            for (int64_t h = 0; h < 2; ++h) {
              Value v = vector::LoadOp::create(
                  b, f32x16, block, ValueRange{r, index(h * kLanes)});
              vector::TransferWriteOp::create(
                  b, v, p.out,
                  ValueRange{add(row0, r), add(column, h * kLanes)},
                  ArrayRef<bool>{false});
            }
          });
          memref::DeallocOp::create(b, block);
        };
        if (p.fill && !zeroFill) {
          throughBuffer();
          return;
        }
        Value rowsInside = arith::CmpIOp::create(b, arith::CmpIPredicate::ule,
                                                 add(row0, kAmxRows), m);
        Value columnsInside = arith::CmpIOp::create(
            b, arith::CmpIPredicate::ule, add(column, kCols), n);
        Value inside = arith::AndIOp::create(b, rowsInside, columnsInside);
        auto ifOp = scf::IfOp::create(b, inside, /*withElseRegion=*/true);
        {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
          auto at = [&](int64_t i, int64_t j) {
            return SmallVector<Value>{add(row0, i * kTileRows),
                                      add(column, j * kLanes)};
          };
          sums(
              [&](int64_t i, int64_t j) {
                return zeroFill ? tileZero(b) : tileLoad(b, p.out, at(i, j));
              },
              [&](int64_t i, int64_t j, Value sum) {
                tileStore(b, sum, p.out, at(i, j));
              });
          b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
          throughBuffer();
        }
      });
    });
  }
};

struct KilnBf16ProductsPass
    : mlir::kiln::impl::KilnBf16ProductsPassBase<KilnBf16ProductsPass> {
  using Base::Base;

  void runOnOperation() override {
    FailureOr<mlir::kiln::TargetAttr> target =
        mlir::kiln::cpu::requireTarget(getOperation(), DEBUG_TYPE);
    if (failed(target)) {
      return signalPassFailure();
    }
    if (std::string why = mlir::kiln::cpu::cpuPrecisionError("bf16", *target);
        !why.empty()) {
      getOperation().emitError() << DEBUG_TYPE << ": " << why;
      return signalPassFailure();
    }
    llvm::Expected<Bf16Kernels> chosen =
        mlir::kiln::cpu::bf16Kernels(kernels, *target);
    if (!chosen) {
      getOperation().emitError()
          << DEBUG_TYPE << ": " << llvm::toString(chosen.takeError());
      return signalPassFailure();
    }
    int64_t l2Bytes = mlir::kiln::cpu::TargetInfo::of(*target).l2Bytes;
    SmallVector<Product> products;
    getOperation()->walk([&](linalg::LinalgOp op) {
      if (std::optional<Product> p = match(op)) {
        products.push_back(std::move(*p));
      }
    });
    for (const Product &p : products) {
      LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE << ": " << *p.op << "\n");
      Builder(p, *chosen, l2Bytes).build();
      p.op->erase();
    }
  }
};

} // namespace
