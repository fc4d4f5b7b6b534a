//===- TileSelection.h - The tiles CPU code generation chooses -*- C++ -*-===//
//
// The decisions of CPU tiling apart from the code that applies them (written
// as each op's #kiln.cpu_tiles by kiln-select-cpu-tiles): which ops get
// register tiles, each op's tile sizes, the loops its threads share, the
// cache blocks of a large contraction and the operands copied block by
// block, and whether the vectorizer computes a tile exactly.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_CODEGEN_CPU_TILESELECTION_H
#define KILN_COMPILER_CODEGEN_CPU_TILESELECTION_H

#include "compiler/Codegen/CPU/TargetInfo.h"
#include "dialects/Kiln/IR/KilnDialect.h"

#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"

namespace mlir::kiln::cpu {

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
bool isTiledContraction(linalg::LinalgOp op);

/// Tile sizes for one linalg op: a register tile for contractions, a vector
/// along the innermost loop for everything else.
SmallVector<int64_t> chooseTileSizes(linalg::LinalgOp op, int64_t tileM,
                                     int64_t tileN, int64_t width);

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
bool reductionsVectorizeExactly(linalg::LinalgOp op);

/// Does `op` read or write buffers of elements narrower than a byte (i1)?
/// A buffer of i1 holds one byte per element, but LLVM loads and stores a
/// vector of i1 as packed bits: vectorized, a 16-wide tile of an attention
/// mask read 2 bytes instead of 16.
bool touchesSubByteElements(linalg::LinalgOp op);

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
SmallVector<unsigned> chooseParallelDims(linalg::LinalgOp op);

/// The sizes and thresholds the tiling decisions derive from: the target's
/// (TargetInfo), each size overridden by a pass option when positive.
struct TileParams {
  int64_t tileM, tileN, width, blockK, blockN, blockM;
  /// The k-block of a contraction with an operand stored transposed and a
  /// long or dynamic reduction (TargetInfo::blockKLongReduction), and the
  /// column and row blocks that go with it (from L2 for that k-block). A
  /// given `block-k`, `block-n` or `block-m` sets the long reduction's
  /// block too.
  int64_t blockKLong, blockNLong, blockMLong;
  int64_t packMinReuse, panelMinReuse, parallelRowBlocks;
  /// A transposed A's row blocks, when they run on all cores, are copied
  /// into micro-panels of tileM rows (TargetInfo::tileRowsAndPanelInL1).
  bool lhsPanels;
  int64_t l1DataBytes, l2Bytes; // the target's per-core caches

  static TileParams of(const TargetInfo &target, int64_t tileM = 0,
                       int64_t tileN = 0, int64_t width = 0, int64_t blockK = 0,
                       int64_t blockN = 0, int64_t blockM = 0);
};

/// How a contraction larger than the caches is blocked around its register
/// tiles (the `blocks`, `block_threads` and `packs` of a #kiln.cpu_tiles):
/// loops over `blockN` columns, then `blockK` reduction steps (and `blockM`
/// rows where A is stored transposed and copied), and which operands are
/// copied block by block.
///
/// A block of an operand that is a strided window of a wider matrix has
/// rows a whole matrix row apart; for N = 1024, 2048 or M = 4096 (multiples
/// of 4 KiB) they fall into a few cache sets and the block does not stay in
/// cache (AVX2 code ran at 70% of its speed for N = 2048, weight gradients
/// at 60%). Such blocks are copied into one contiguous buffer first, when a
/// block is read at least packMinReuse times (a run-time test for dynamic
/// counts): B's [kc, nc] blocks, and, when A is stored transposed ([K, M]),
/// A's [kc, mc] blocks, rows being blocked by `blockM` then (or in at least
/// parallelRowBlocks smaller blocks); such an A is copied too when its rows
/// would leave the caches between the panels that read them (few L1 sets,
/// a k-block larger than L2), and, where TileParams::lhsPanels (AVX2),
/// whenever its row blocks run on all cores, cut into micro-panels of
/// tileM rows. A linear's weight (B stored transposed) is always copied,
/// transposed. A copy of B is cut into micro-panels along its columns when
/// the block is wider than one register tile. Empty `blocks` and `packs`:
/// the op is left as it is.
struct CacheBlocking {
  SmallVector<int64_t> blocks;
  SmallVector<int64_t> threads;
  SmallVector<CpuPackAttr> packs;
};
CacheBlocking chooseCacheBlocking(linalg::LinalgOp op, const TileParams &p);

/// The tile (chooseTileSizes), thread loops (chooseParallelDims) and cache
/// blocking (chooseCacheBlocking) of `op` as the attribute
/// kiln-select-cpu-tiles writes (kCpuTilesAttr).
CpuTilesAttr selectCpuTiles(linalg::LinalgOp op, const TileParams &params);

} // namespace mlir::kiln::cpu

#endif // KILN_COMPILER_CODEGEN_CPU_TILESELECTION_H
