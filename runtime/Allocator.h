//===- Allocator.h - The heap of compiled code --------------------*- C++
//-*-===//
//
// Every buffer compiled CPU code allocates (activations, temporaries,
// results) comes from here: compiled code calls the three C functions below
// (finalize-memref-to-llvm{use-generic-functions}), and the runtime releases
// results it adopts through kiln::memory::release.
//
// Large blocks are kept when freed and handed out again to an allocation of
// (nearly) the same size. A model runs the same allocations every step, so
// from the second step on no buffer is fresh memory: the kernel no longer
// maps, zeroes and unmaps the activations of every step (10-20% of a
// training step's time before). The cache never makes the footprint (live
// + cached blocks) grow past the most ever live at once, which plain malloc
// reaches too: an allocation that finds no block of its size first returns
// cached blocks of other sizes to the system. The cached bytes are also
// capped (KILN_ALLOCATOR_CACHE_MIB, default half the machine's memory) and
// released by kiln::memory::trim().
//
// Planned calls: the runtime runs each compiled function inside a
// PlannedCall. The first call with given input shapes records the large
// allocations the calling thread makes (sizes, and when each is freed);
// from them a plan gives every block that is freed before the call returns
// an offset in one arena, blocks that are never live at once sharing bytes
// (greedy by size, lowest free offset). The next calls with those shapes
// take their blocks from the arena: no allocation, no fresh page, and a
// footprint of the planned peak. A call whose allocations differ from the
// plan (another size at some point) finishes with the general allocator
// and the plan is recorded again. Blocks that outlive the call (results)
// always come from the general allocator.
//
// In a build with AddressSanitizer (runtime/Sanitizer.h) there is no cache,
// no plan and no header: every block is exactly the bytes asked for, from
// the sanitizer's allocator, so that a read or write by compiled code one
// byte before or past a buffer is reported.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ALLOCATOR_H
#define KILN_RUNTIME_ALLOCATOR_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

extern "C" {
void *_mlir_memref_to_llvm_alloc(size_t size);
void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size);
void _mlir_memref_to_llvm_free(void *pointer);
}

namespace kiln::memory {

/// Blocks of at least this many bytes are cached when released.
inline constexpr size_t kCachedBlockBytes = 256 * 1024;

/// `size` bytes aligned to 64 (a cache line, an AVX-512 vector), or null
/// when the system has no memory left.
void *allocate(size_t size);
/// `size` bytes aligned to `alignment` (a power of two up to 1 MiB), or
/// null.
void *allocateAligned(size_t alignment, size_t size);
/// Releases a block from allocate() or allocateAligned() (null is ignored).
void release(void *pointer);

struct Stats {
  size_t cachedBytes = 0;   ///< held in the cache now
  size_t cacheLimit = 0;    ///< the most the cache may hold
  uint64_t reused = 0;      ///< large allocations served from the cache
  uint64_t fresh = 0;       ///< large allocations served by the system
  size_t liveBytes = 0;     ///< large blocks handed out and not released
  size_t peakLiveBytes = 0; ///< the most ever live at once (since trim())
  size_t arenaBytes = 0;    ///< mapped for planned calls, all plans
};
Stats stats();
/// Returns every cached block to the system (and measures the most ever
/// live at once afresh).
void trim();
/// Caps the cached bytes (blocks over the cap are trimmed now).
void setCacheLimit(size_t bytes);

/// The plans of one compiled function, by the shapes of its inputs (the
/// two most recently used are kept, each with its arena).
class CallPlans;
std::shared_ptr<CallPlans> makeCallPlans();

/// While alive, the large allocations of this thread follow the plan of
/// `plans` for `shapes` (recording it on the first call). Calls do not
/// nest: an inner PlannedCall, or one whose plans another thread is using,
/// leaves its allocations to the general allocator.
class PlannedCall {
public:
  PlannedCall(CallPlans &plans, const std::string &shapes);
  ~PlannedCall();
  PlannedCall(const PlannedCall &) = delete;
  PlannedCall &operator=(const PlannedCall &) = delete;

  /// Ends the call: makes the plan from a recording, or checks a replay.
  /// Called by the destructor if not before.
  void finish();
  /// Does `pointer` lie in the arena this call used? Such a block must not
  /// outlive the call (the runtime copies a result found there).
  bool inArena(const void *pointer) const;

  struct State; ///< internal (Allocator.cpp)

private:
  std::unique_ptr<State> state_;
};

} // namespace kiln::memory

#endif // KILN_RUNTIME_ALLOCATOR_H
