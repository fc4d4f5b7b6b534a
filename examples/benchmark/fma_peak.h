//===- fma_peak.h - The machine's measured fp32 FMA peak ------------------===//
//
// Both sides of the benchmark print their rate as a share of the peak they
// measure on the machine at hand, not of a figure from another CPU: each
// thread runs 12 independent chains of the widest FMA the CPU has (AVX-512,
// else AVX2) for ~0.2 s, and the sum of their rates is the peak.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_EXAMPLES_BENCHMARK_FMA_PEAK_H
#define KILN_EXAMPLES_BENCHMARK_FMA_PEAK_H

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace kiln::bench {

namespace detail {
typedef float V16 __attribute__((vector_size(64)));
typedef float V8 __attribute__((vector_size(32)));
// 12 chains acc = acc·m + a (one FMA each per iteration: the compiler
// contracts them and cannot shorten a chain).
#define KILN_FMA_CHAINS(V, LANES)                                              \
  V acc[12], m, a;                                                             \
  for (int l = 0; l < LANES; ++l) {                                            \
    m[l] = 0.999999f;                                                          \
    a[l] = 1e-7f;                                                              \
  }                                                                            \
  for (int j = 0; j < 12; ++j) {                                               \
    acc[j] = m * float(j);                                                     \
  }                                                                            \
  for (int64_t i = 0; i < iterations; ++i) {                                   \
    _Pragma("GCC unroll 12") for (int j = 0; j < 12; ++j) {                    \
      acc[j] = acc[j] * m + a;                                                 \
    }                                                                          \
  }                                                                            \
  float sum = 0;                                                               \
  for (int j = 0; j < 12; ++j) {                                               \
    sum += acc[j][0];                                                          \
  }                                                                            \
  return sum;
__attribute__((target("avx512f,fma"))) inline double
chains512(int64_t iterations) {
  KILN_FMA_CHAINS(V16, 16)
}
__attribute__((target("avx2,fma"))) inline double
chains256(int64_t iterations) {
  KILN_FMA_CHAINS(V8, 8)
}
#undef KILN_FMA_CHAINS
} // namespace detail

/// GFLOP/s of `threads` threads of FMA chains.
inline double measureFmaPeak(int threads) {
  __builtin_cpu_init();
  bool avx512 = __builtin_cpu_supports("avx512f");
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (!avx512 && !avx2) {
    return 0;
  }
  int lanes = avx512 ? 16 : 8;
  int64_t iterations = avx512 ? 20'000'000 : 30'000'000;
  std::vector<double> rates(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      auto t0 = std::chrono::steady_clock::now();
      volatile double sink = avx512 ? detail::chains512(iterations)
                                    : detail::chains256(iterations);
      (void)sink;
      double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count();
      rates[t] = 12.0 * lanes * 2 * double(iterations) / s * 1e-9;
    });
  }
  for (std::thread &w : workers) {
    w.join();
  }
  double sum = 0;
  for (double r : rates) {
    sum += r;
  }
  return sum;
}

} // namespace kiln::bench

#endif // KILN_EXAMPLES_BENCHMARK_FMA_PEAK_H
