//===- TargetInfo.h - What CPU code generation needs ------------*- C++ -*-===//
//
// The target CPU, resolved once per compile into the module's `kiln.target`
// attribute (resolveTarget, kiln-set-target), and the register tile, vector
// and cache block sizes CPU tiling derives from it (TileSelection.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_CODEGEN_CPU_TARGETINFO_H
#define KILN_COMPILER_CODEGEN_CPU_TARGETINFO_H

#include "dialects/Kiln/IR/KilnDialect.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace mlir::kiln::cpu {

struct TargetInfo {
  /// The LLVM CPU name ("host" resolved to the host's, e.g. "znver5").
  std::string cpu;
  /// The widest vector register for f32 arithmetic: 512 bits with AVX-512,
  /// 256 with AVX, else 128 (SSE2, the x86-64 baseline).
  int64_t vectorBits = 128;
  /// Architectural vector registers: 32 with AVX-512, else 16.
  int64_t vectorRegisters = 16;
  /// Per-core data cache sizes: the host's as Linux reports them (sysfs);
  /// for a named CPU, the smallest of the x86-64 server cores Kiln runs on
  /// (32 KiB L1d, 512 KiB L2: Zen 3), so that blocks fit everywhere.
  int64_t l1DataBytes = 32 * 1024;
  int64_t l2Bytes = 512 * 1024;
  /// AVX512-BF16 (`vdpbf16ps`: a dot product of bf16 pairs into f32 lanes,
  /// twice the f32 FMA rate): Zen 4 and later, Cooper Lake, Sapphire Rapids
  /// and later. What the bf16 precision needs (kiln-bf16-products).
  bool avx512bf16 = false;
  /// AMX with bf16 tiles (`amx-tile` and `amx-bf16`: `tdpbf16ps` multiplies
  /// a 16 x 32 tile of bf16 by a 32 x 16 one into 16 x 16 f32 sums):
  /// Sapphire Rapids and later. kiln-bf16-products' kernels use it when the
  /// target has it.
  bool amx = false;

  /// Thresholds measured on particular CPUs (the same for every target
  /// until a family measures otherwise).
  ///
  /// The most rows a product may have for kiln-vector-matrix-products to
  /// stream its weight once, split across the cores, instead of tiling it
  /// as a matrix product (kiln-prepare-weights leaves such products'
  /// weights as stored).
  int64_t maxStreamedRows = 4;
  /// Row counts below this read a block of B too few times to repay
  /// copying it (a decoding step multiplies one row by each weight); so do
  /// column counts for a block of A.
  int64_t packMinReuse = 32;
  /// Rows below this do not repay copying a block of B whose rows do not
  /// alias in the caches into micro-panels: the copy costs more than the
  /// faster register tiles save (a [2048, 512] B with 128 rows: 205 -> 173
  /// GFLOP/s on two cores of a Zen 4; with 1536 rows, 10% faster; with 384
  /// rows, gpt-small's weight gradients [2048, 384]^T [2048, 1536] and
  /// [2048, 384]^T [2048, 384] on one Zen 4 core: 83-87 -> 96-97 and 85-92
  /// -> 105-106 GFLOP/s, two cores 153-174 -> 174-189 and unchanged).
  int64_t panelMinReuse = 256;
  /// A contraction that copies its transposed A block by block runs its
  /// row blocks on all cores, each thread copying the blocks it multiplies
  /// into a buffer of its own, when it has at least this many of them (of
  /// static count); with fewer, its register tiles are spread instead, as
  /// in any other contraction, and every block is copied by all threads
  /// together.
  int64_t parallelRowBlocks = 8;

  /// The facts of a resolved target.
  static TargetInfo of(TargetAttr target);

  /// f32 elements in one vector register.
  int64_t f32Lanes() const { return vectorBits / 32; }
  /// Elements per vector for elementwise ops and reductions: one register.
  int64_t vectorWidth() const { return f32Lanes(); }
  /// Columns of a contraction's register tile: two vector registers, so
  /// that each broadcast of an A element feeds two FMAs.
  int64_t tileN() const { return 2 * f32Lanes(); }
  /// Rows of a contraction's register tile: as many rows of accumulators
  /// (tileN / lanes registers each) as fit beside the loaded B vectors and
  /// one broadcast register, at most 8 (the largest measured without
  /// spills through vector.contract's outer-product lowering). AVX2 (16
  /// registers): 6 x 16; AVX-512 (32 registers): 8 x 32.
  int64_t tileM() const;
  /// The reduction (K) block of a contraction: a register tile's rows of A
  /// (tileM x kc) fill at most half of the L1 data cache, so they are
  /// reused from L1 across a row of tiles; at most 512 (measured on Zen 5,
  /// model shapes: 512 x 256 blocks beat 304 x 416 by 3-10%, fewer passes
  /// over C), a multiple of 16.
  int64_t blockK() const;
  /// The reduction block of a contraction with an operand stored
  /// transposed (a linear's weight, [N, K]; a weight gradient's A, [K, M])
  /// whose reduction is dynamic or longer than two blockK blocks, on
  /// targets with 8 f32 lanes (AVX2): the largest power of two of steps for
  /// which a register tile's rows of A and one panel of B ((tileM + tileN)
  /// x kc floats, 6 + 16 with AVX2) fit in L1 together, so that the rows of
  /// A stay in L1 while the panels of a block stream past them (at 512
  /// steps the 32 KiB panel of AVX2 code evicts them from a 32 KiB L1); 256
  /// on a Zen 3, with 256 columns a block. Other contractions, and other
  /// targets (AVX-512 on Zen 5 measured 512 x 256 blocks 3-10% faster than
  /// smaller k-blocks), take blockK. One Zen 3 core, K dynamic, the two
  /// choices compiled in one process and called alternately (medians of 12
  /// pairs, two sweeps): the weight gradients 1.02-1.20x (gpt-small's
  /// q|k|v 1.12/1.12, the encoder-decoder's head 1.18/1.12), the products
  /// with K of 1536-3072 1.15-1.25x; the products with K of 768 lost 20%
  /// and those of K <= 512 up to 7% (they keep blockK).
  int64_t blockKLongReduction() const;
  /// Whether a register tile's rows of A and one panel of B are to stay in
  /// L1 together, as blockKLongReduction sizes them: targets with 8 f32
  /// lanes (AVX2). A weight gradient's A ([K, M], read transposed) then
  /// has its row blocks copied into micro-panels of tileM rows
  /// (chooseCacheBlocking): read in place or as one row-major block, a
  /// tile's column of A is one 64-byte line per step, kc lines, and with
  /// the panel it fills a 32 KiB L1 at kc = 256; in micro-panels it is 24
  /// bytes a step.
  bool tileRowsAndPanelInL1() const { return f32Lanes() == 8; }
  /// The column (N) block: a kc x nc block of B fills at most half of L2,
  /// so every row tile of the contraction reads it from L2 rather than
  /// from memory. A multiple of tileN. `kc`: the k-block's steps (0:
  /// blockK).
  int64_t blockN(int64_t kc = 0) const;
  /// The row (M) block of a product whose A is stored transposed ([K, M],
  /// a weight gradient gᵀ·x): a kc x mc block of A, copied contiguously,
  /// fills at most half of L2 (measured on Zen 5 with AVX2 code: 60 rows
  /// 100 GFLOP/s, 126 rows 103, 252 rows 109, unblocked 77; each n-block
  /// copies A again, so larger blocks copy less). A multiple of tileM.
  /// `kc`: the k-block's steps (0: blockK).
  int64_t blockM(int64_t kc = 0) const;
  /// Whether a CompiledModel prepares its weights (JitOptions::
  /// prepareWeights) when its options leave it open: only where vectors
  /// hold fewer than 16 f32. With AVX-512 the transposed copy of each
  /// weight block that the products make instead costs nothing measurable
  /// (kiln-lower-transposes' 16x16 shuffles; one Zen 5, 2026-12-02,
  /// `kiln-bench --prepared-ab`, unprepared / prepared: gpt-small forward
  /// 0.99-1.01, batch 1 0.97-1.02, the encoder-decoder's 0.98-1.00,
  /// gpt-tiny 1.03), while the copies hold every linear weight twice (183
  /// MiB for the encoder-decoder); AVX2 code on the same machine gains 2-4%
  /// at batch 1 from them.
  bool prepareWeightsByDefault() const { return f32Lanes() < 16; }
};

/// Resolves "host" (this machine's CPU, features and caches) or an LLVM CPU
/// name (its features and every feature they imply, the caches of
/// TargetInfo's defaults) into the attribute every decision reads: the one
/// place a CPU name is parsed. An unknown name is an error that lists the
/// usual ones. `gpu`, when not empty, is the NVIDIA architecture of GPU
/// code's kernels (the CPU is then the host code's); one that is not such an
/// architecture (isGpuChip) is an error.
llvm::Expected<TargetAttr> resolveTarget(MLIRContext *context,
                                         llvm::StringRef cpu,
                                         llvm::StringRef gpu = "");

/// The one check of a CPU precision (kiln-to-llvm's `precision`,
/// JitOptions::precision, kiln-compile's --precision, kiln-bf16-products)
/// against the target: "fp32" runs anywhere; "bf16" (matrix products of
/// bf16 values with f32 sums: kiln-bf16-products) needs AVX512-BF16. Empty
/// when `precision` can run there, else why not; with a null `target`, only
/// whether `precision` names one.
std::string cpuPrecisionError(llvm::StringRef precision, TargetAttr target);

/// The kernels of the bf16 precision's products (kiln-bf16-products'
/// `kernels`): vdpbf16ps register tiles (`dot`), AMX tiles (`amx`), or AMX's
/// kernels with each tile instruction computed by vdpbf16ps code
/// (`amx-emulated`: the AMX kernels' packing, tiling and edges checked on a
/// CPU without AMX; slower than `dot`).
enum class Bf16Kernels { dot, amx, amxEmulated };

/// The kernels `name` asks for on `target`: "auto" (AMX where the target has
/// it, else dot), "dot", "amx" (an error where the target lacks AMX) or
/// "amx-emulated"; an error that says why for any other name. With a null
/// target, only whether `name` is one of those.
llvm::Expected<Bf16Kernels> bf16Kernels(llvm::StringRef name,
                                        TargetAttr target);

/// The `kiln.target` of the module that holds `op` (or of `op` itself), or
/// null when there is none.
TargetAttr getTarget(Operation *op);

/// getTarget(op), or an error on `op` that names `pass` and says how to set
/// the target.
FailureOr<TargetAttr> requireTarget(Operation *op, llvm::StringRef pass);

} // namespace mlir::kiln::cpu

#endif // KILN_COMPILER_CODEGEN_CPU_TARGETINFO_H
