//===- memory_bandwidth.h - The machine's measured DRAM read bandwidth ----===//
//
// Decoding one token at a time reads every weight once per token: its bound
// is the rate at which the cores stream memory, measured here, not assumed.
// Each thread sums its share of a buffer far larger than the last-level cache
// (8 independent 64-bit accumulators, which the compiler vectorizes), five
// times; the best pass's bytes per second is the bandwidth.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_EXAMPLES_BENCHMARK_MEMORY_BANDWIDTH_H
#define KILN_EXAMPLES_BENCHMARK_MEMORY_BANDWIDTH_H

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace kiln::bench {

/// GB/s (1e9 bytes) that `threads` threads read from a `bytes` buffer.
inline double measureReadBandwidth(int threads,
                                   int64_t bytes = int64_t(512) << 20) {
  threads = std::max(1, threads);
  int64_t words = bytes / 8;
  auto *data = static_cast<uint64_t *>(std::aligned_alloc(64, words * 8));
  if (!data) {
    return 0;
  }
  std::vector<std::thread> workers;
  std::vector<uint64_t> sums(threads * 8);
  double best = 0;
  // Pass 0 writes (the pages become resident, each thread's on its own
  // core); passes 1..5 read.
  for (int pass = 0; pass < 6; ++pass) {
    auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        int64_t begin = words * t / threads / 8 * 8;
        int64_t end = words * (t + 1) / threads / 8 * 8;
        if (pass == 0) {
          std::memset(data + begin, t + 1, (end - begin) * 8);
          return;
        }
        uint64_t acc[8] = {};
        for (int64_t i = begin; i < end; i += 8) {
          for (int j = 0; j < 8; ++j) {
            acc[j] += data[i + j];
          }
        }
        std::copy(acc, acc + 8, sums.begin() + t * 8);
      });
    }
    for (std::thread &w : workers) {
      w.join();
    }
    workers.clear();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                             t0)
                   .count();
    if (pass > 0) {
      best = std::max(best, double(words / 8 * 8) * 8 / s * 1e-9);
    }
  }
  volatile uint64_t sink = 0;
  for (uint64_t v : sums) {
    sink = sink + v;
  }
  std::free(data);
  return best;
}

} // namespace kiln::bench

#endif // KILN_EXAMPLES_BENCHMARK_MEMORY_BANDWIDTH_H
