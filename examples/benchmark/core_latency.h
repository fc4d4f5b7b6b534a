//===- core_latency.h - Round trip of a cache line between two cores ------===//
//
// The machines behind this project are virtual: their two vCPUs sometimes sit
// on cores that share an L3 (a cache line goes from one to the other and back
// in 60-80 ns on Zen 4) and sometimes, for tens of seconds at a time, on
// cores of different L3s (340 ns and more). In the second state everything one core reads
// that the other wrote (a packed block, an activation the other thread
// produced, a barrier) is a cross-die transfer, and a training step whose
// compute is unchanged takes ~18% longer. Both sides of the benchmark print
// this round trip before and after their timed steps, so that a row measured
// in the slow state can be told from a slower program.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_EXAMPLES_BENCHMARK_CORE_LATENCY_H
#define KILN_EXAMPLES_BENCHMARK_CORE_LATENCY_H

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace kiln::bench {

namespace detail {
/// The bounced value, alone on its cache line (on the stack it shared a line
/// with what the probing thread keeps there: 118 ns read where 80 was true).
struct alignas(64) RoundTripLine {
  std::atomic<int64_t> turn{0};
};
inline RoundTripLine roundTripLine;
} // namespace detail

/// The median over 3 probes (after 2 that warm up) of the round trip, in ns, of a cache line bounced
/// between threads pinned to the first two CPUs this process may run on; 0
/// when it may run on fewer than two. It first sleeps past the time an
/// OpenMP worker keeps spinning after a parallel region (200 ms by default
/// in libomp and libgomp), which would otherwise share a CPU with a probe.
inline double measureCoreRoundTripNs() {
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 ||
      CPU_COUNT(&allowed) < 2) {
    return 0;
  }
  int cpus[2], found = 0;
  for (int c = 0; c < CPU_SETSIZE && found < 2; ++c) {
    if (CPU_ISSET(c, &allowed)) {
      cpus[found++] = c;
    }
  }
  auto pin = [&](int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    sched_setaffinity(0, sizeof one, &one); // this thread only
  };
  constexpr int64_t kRounds = 100000;
  double probes[5];
  for (double &probe : probes) {
    std::atomic<int64_t> &turn = detail::roundTripLine.turn;
    turn.store(0);
    std::thread other([&] {
      pin(cpus[1]);
      for (int64_t i = 0; i < kRounds; ++i) {
        while (turn.load(std::memory_order_acquire) != 2 * i + 1) {
        }
        turn.store(2 * i + 2, std::memory_order_release);
      }
    });
    pin(cpus[0]);
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < kRounds; ++i) {
      turn.store(2 * i + 1, std::memory_order_release);
      while (turn.load(std::memory_order_acquire) != 2 * i + 2) {
      }
    }
    probe = std::chrono::duration<double, std::nano>(
                std::chrono::steady_clock::now() - t0)
                .count() /
            double(kRounds);
    other.join();
  }
  sched_setaffinity(0, sizeof allowed, &allowed);
  // The first two warm up: a vCPU back from idle answers slower for a few
  // milliseconds.
  std::sort(probes + 2, probes + 5);
  return probes[3];
}

} // namespace kiln::bench

#endif // KILN_EXAMPLES_BENCHMARK_CORE_LATENCY_H
