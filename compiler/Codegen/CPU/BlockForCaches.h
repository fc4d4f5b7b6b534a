//===- BlockForCaches.h - Cache blocks and packed copies of products -*- C++
//-*-===//
//
// The cache blocking of kiln-tile-and-vectorize: a contraction larger than
// the caches is cut into blocks (n-block, k-block, and m-block where A is
// stored transposed) around its register tiles, and the blocks of B (and of
// a transposed A) are copied into contiguous buffers or micro-panels first
// (BlockForCaches.cpp says when and why).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_CODEGEN_CPU_BLOCKFORCACHES_H
#define KILN_COMPILER_CODEGEN_CPU_BLOCKFORCACHES_H

#include "compiler/Codegen/CPU/TargetInfo.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::kiln::cpu {

/// Marks the reduction-block loop of a contraction blocked along its
/// reduction (blockForCaches) whose output's fill was deferred to it: the
/// fills of the blocks' tiles are done in the loop's first iteration only.
constexpr llvm::StringLiteral kFillFirstBlockAttr = "kiln.fill_first_block";

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
                                SmallVectorImpl<PanelRead> &panelReads);

/// The first `k` rows and `columns` columns of micro-panel `panel` of a
/// [P, kc + 1, T] panel buffer, as a [k, columns] matrix.
Value panelView(OpBuilder &b, Location loc, Value buffer, OpFoldResult panel,
                OpFoldResult k, OpFoldResult columns);

/// `map` reading a matrix operand's last two results, swapped when
/// `transpose` (the op then reads a [k, n] copy of a [.., n, k] operand).
AffineMap matrixMap(AffineMap map, bool transpose);

} // namespace mlir::kiln::cpu

#endif // KILN_COMPILER_CODEGEN_CPU_BLOCKFORCACHES_H
