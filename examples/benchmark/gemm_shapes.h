//===- gemm_shapes.h - The contractions of the benchmark models -----------===//
//
// Every distinct matrix product the BENCHMARKS.md models run, forward and
// backward, as (M, N, K, batch, layout): row-major C[M, N] = op(A)·op(B),
// with "NT" meaning B is stored [N, K] (a Linear's weight), "NN" B [K, N]
// and "TN" A stored [K, M] (a weight gradient). Shared by Kiln's GEMM
// benchmark and its library peer so both measure the same list.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_EXAMPLES_BENCHMARK_GEMM_SHAPES_H
#define KILN_EXAMPLES_BENCHMARK_GEMM_SHAPES_H

#include <cstdint>

namespace kiln::bench {

struct GemmShape {
  const char *name;
  int64_t m, n, k, batch;
  const char *layout; // "NT", "NN" or "TN"
};

inline constexpr GemmShape kGemmShapes[] = {
    // gpt-tiny: B·T = 2048 rows, d 128, d_ff 512, vocab 65, 4 heads of 32.
    {"tiny qkv", 2048, 384, 128, 1, "NT"},
    {"tiny fc1", 2048, 512, 128, 1, "NT"},
    {"tiny fc2", 2048, 128, 512, 1, "NT"},
    {"tiny head", 2048, 65, 128, 1, "NT"},
    {"tiny fc2 dX", 2048, 512, 128, 1, "NN"},
    {"tiny fc2 dW", 128, 512, 2048, 1, "TN"},
    {"tiny scores", 128, 128, 32, 64, "NT"},
    {"tiny attn·V", 128, 32, 128, 64, "NN"},
    // gpt-small: 2048 rows, d 384, d_ff 1536, vocab 4096, 6 heads of 64.
    {"small qkv", 2048, 1152, 384, 1, "NT"},
    {"small fc1", 2048, 1536, 384, 1, "NT"},
    {"small fc2", 2048, 384, 1536, 1, "NT"},
    {"small head", 2048, 4096, 384, 1, "NT"},
    {"small head dX", 2048, 384, 4096, 1, "NN"},
    {"small head dW", 4096, 384, 2048, 1, "TN"},
    {"small qkv dW", 1152, 384, 2048, 1, "TN"},
    {"small fc1 dW", 1536, 384, 2048, 1, "TN"},
    {"small fc2 dW", 384, 1536, 2048, 1, "TN"},
    {"small proj", 2048, 384, 384, 1, "NT"},
    {"small proj dX", 2048, 384, 384, 1, "NN"},
    {"small proj dW", 384, 384, 2048, 1, "TN"},
    {"small fc1 dX", 2048, 384, 1536, 1, "NN"},
    {"small fc2 dX", 2048, 1536, 384, 1, "NN"},
    {"small scores", 256, 256, 64, 48, "NT"},
    {"small attn·V", 256, 64, 256, 48, "NN"},
    {"small qkv b1", 256, 1152, 384, 1, "NT"},
    // encdec: 512 rows, d 512, d_ff 2048, vocab 8000, 8 heads of 64.
    {"encdec linear", 512, 512, 512, 1, "NT"},
    {"encdec linear dX", 512, 512, 512, 1, "NN"},
    {"encdec linear dW", 512, 512, 512, 1, "TN"},
    {"encdec fc1", 512, 2048, 512, 1, "NT"},
    {"encdec fc2", 512, 512, 2048, 1, "NT"},
    {"encdec fc1 dX", 512, 512, 2048, 1, "NN"},
    {"encdec fc2 dX", 512, 2048, 512, 1, "NN"},
    {"encdec fc1 dW", 2048, 512, 512, 1, "TN"},
    {"encdec fc2 dW", 512, 2048, 512, 1, "TN"},
    {"encdec head dX", 512, 512, 8000, 1, "NN"},
    {"encdec head", 512, 8000, 512, 1, "NT"},
    {"encdec head dW", 8000, 512, 512, 1, "TN"},
    {"encdec scores", 64, 64, 64, 64, "NT"},
    // GPT-2 124M prefill: 512 rows, d 768, d_ff 3072 (the vocab-50257 head
    // runs on the last row only: a vector-matrix product, not a GEMM).
    {"gpt2 qkv", 512, 2304, 768, 1, "NT"},
    {"gpt2 proj", 512, 768, 768, 1, "NT"},
    {"gpt2 fc1", 512, 3072, 768, 1, "NT"},
    {"gpt2 fc2", 512, 768, 3072, 1, "NT"},
};

} // namespace kiln::bench

#endif // KILN_EXAMPLES_BENCHMARK_GEMM_SHAPES_H
