//===- BlockForCaches.h - Cache blocks and their copies ---------*- C++ -*-===//
//
// What kiln-block-for-caches leaves for kiln-tile-and-peel: a contraction
// larger than the caches is cut into blocks (n-block, k-block, and m-block
// where A is stored transposed) around its register tiles, and the blocks of
// B (and of a transposed A) are copied into contiguous buffers or
// micro-panels first (TileSelection.h says when and why).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_CODEGEN_CPU_BLOCKFORCACHES_H
#define KILN_COMPILER_CODEGEN_CPU_BLOCKFORCACHES_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::kiln::cpu {

/// Marks the reduction-block loop of a contraction blocked along its
/// reduction (kiln-block-for-caches) whose output's fill was deferred to it:
/// the fills of the blocks' tiles are done in the loop's first iteration only.
constexpr llvm::StringLiteral kFillFirstBlockAttr = "kiln.fill_first_block";

/// The link from an op whose register tiles are to read a block of one of
/// its operands from micro-panels (kiln-block-for-caches) to the buffer
/// that holds them (kiln-tile-and-peel makes each tile read its panel). The
/// op carries `kiln.panel_reads = [array<i64: operand, dim, width, id>,
/// ...]`, the buffer's allocation `kiln.panel_buffer = id`: the buffer is
/// [P, kc + 1, T] and holds the block's columns (along loop `dim`) T =
/// `width` at a time, each panel's kc rows of T contiguous, so that a
/// register tile T wide reads one contiguous stream (a row-major [kc, nc]
/// block gives it rows nc apart: 5-10% slower on Zen 4, where the stream
/// prefetcher follows the panel). Until then the op still reads the
/// original window: the copy only changes where the same values are read.
constexpr llvm::StringLiteral kPanelReadsAttr = "kiln.panel_reads";
constexpr llvm::StringLiteral kPanelBufferAttr = "kiln.panel_buffer";

/// The first `k` rows and `columns` columns of micro-panel `panel` of a
/// [P, kc + 1, T] panel buffer, as a [k, columns] matrix.
Value panelView(OpBuilder &b, Location loc, Value buffer, OpFoldResult panel,
                OpFoldResult k, OpFoldResult columns);

/// `map` reading a matrix operand's last two results, swapped when
/// `transpose` (the op then reads a [k, n] copy of a [.., n, k] operand).
AffineMap matrixMap(AffineMap map, bool transpose);

} // namespace mlir::kiln::cpu

#endif // KILN_COMPILER_CODEGEN_CPU_BLOCKFORCACHES_H
