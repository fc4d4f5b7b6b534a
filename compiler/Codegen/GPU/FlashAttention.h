//===- FlashAttention.h - Attention kernels of kiln-gpu-kernels -*- C++ -*-===//
//
// The GPU kernels of kiln.flash_attention and kiln.flash_attention_grad on
// buffers, which kiln-gpu-kernels (GpuKernels.cpp) builds. Internal to
// compiler/Codegen/GPU.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_CODEGEN_GPU_FLASHATTENTION_H
#define KILN_COMPILER_CODEGEN_GPU_FLASHATTENTION_H

namespace mlir {
class RewriterBase;
namespace kiln {
class FlashAttentionOp;
class FlashAttentionGradOp;

/// Replaces `op` (on buffers) with its kernel: a block of 4 warps per 16
/// query rows of a head, each warp 4 rows; keys and values staged 32 at a
/// time in shared memory; per row an online softmax (running maximum and
/// sum, the output rescaled when the maximum grows), lane j scoring key j
/// of the tile, lanes owning columns of the output. Causal blocks stop at
/// their last visible key unless a row of the block saw no visible key
/// (it then attends uniformly to every key, as on whole scores).
void buildFlashAttention(RewriterBase &b, FlashAttentionOp op);

/// Replaces `op` (on buffers) with two kernels: one per 16 query rows of a
/// head recomputes each row's maximum and sum, stores them with
/// D = grad · output, and computes dQ; one per 16 keys of a key/value head
/// computes dK and dV from them, over the head's group of query heads in
/// order. Heads wider than 127 take 8 rows a block (their tiles then fit in
/// 48 KiB of shared memory).
void buildFlashAttentionGrad(RewriterBase &b, FlashAttentionGradOp op);

} // namespace kiln
} // namespace mlir

#endif // KILN_COMPILER_CODEGEN_GPU_FLASHATTENTION_H
