//===- Allocator.cpp - The heap of compiled code --------------------------===//

#include "runtime/Allocator.h"
#include "runtime/Sanitizer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <list>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace kiln::memory {
namespace {

/// Every block starts with this header, one cache line, so that the
/// pointer handed out keeps the 64-byte alignment of the underlying one.
struct alignas(64) Header {
  void *base;      ///< what the system allocated (the header, or before it)
  size_t capacity; ///< usable bytes after the header; 0: never cached
};
static_assert(sizeof(Header) == 64);

/// Blocks of kCachedBlockBytes and more are mapped pages of their own, and
/// unmapped when they leave the cache, so that the resident set follows
/// what is live and cached; from malloc they would come, once glibc has
/// raised its mmap threshold, from a heap that keeps freed holes resident.
size_t mappedBytes(size_t capacity) {
  constexpr size_t page = 4096;
  return (sizeof(Header) + capacity + page - 1) / page * page;
}

void *mapBlock(size_t capacity) {
  void *p = mmap(nullptr, mappedBytes(capacity), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

/// Gives a block back to the system.
void freeBlock(Header *header) {
  if (header->capacity >= kCachedBlockBytes) {
    munmap(header->base, mappedBytes(header->capacity));
  } else {
    std::free(header->base);
  }
}

struct Cache {
  std::mutex mutex;
  std::multimap<size_t, Header *> blocks; ///< by capacity
  size_t bytes = 0;
  size_t limit = 0;
  /// Large blocks handed out and not yet released, and their most so far.
  size_t live = 0, peakLive = 0;
  uint64_t reused = 0, fresh = 0;

  /// Frees cached blocks, largest first, until at most `keep` bytes stay.
  void evictTo(size_t keep) {
    while (bytes > keep && !blocks.empty()) {
      auto largest = std::prev(blocks.end());
      bytes -= largest->first;
      freeBlock(largest->second);
      blocks.erase(largest);
    }
  }

  Cache() {
    long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
    limit = pages > 0 && pageSize > 0 ? size_t(pages) * size_t(pageSize) / 2
                                      : size_t(1) << 30;
    if (const char *mib = std::getenv("KILN_ALLOCATOR_CACHE_MIB")) {
      char *end = nullptr;
      unsigned long long value = std::strtoull(mib, &end, 10);
      if (end != mib && *end == '\0' && value < (1ull << 40)) {
        limit = size_t(value) << 20;
      }
    }
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mutex);
    evictTo(0);
    peakLive = live; // a fresh start: the high-water mark is measured again
  }
};

Cache &cache() {
  static Cache *instance = new Cache; // outlives every static destructor
  return *instance;
}

/// Large sizes are rounded up to whole pages, so that sizes a few bytes
/// apart share blocks.
size_t roundedSize(size_t size) {
  constexpr size_t page = 4096;
  return size < kCachedBlockBytes ? size : (size + page - 1) / page * page;
}

/// Small blocks a thread released, kept for its next allocations of
/// (nearly) the same size: compiled code allocates the same few small
/// blocks in every iteration of a loop (flash attention's blocks of scores
/// and row statistics, in each thread of its parallel loop), where malloc's
/// bins cost more than the work on some of them.
struct SmallCache {
  static constexpr int kSlots = 16;
  static constexpr size_t kMaxBytes = 64 * 1024;
  Header *blocks[kSlots] = {};
  int count = 0;

  Header *take(size_t capacity) {
    for (int i = count - 1; i >= 0; --i) {
      Header *header = blocks[i];
      if (header->capacity >= capacity &&
          header->capacity <= capacity + capacity / 4) {
        blocks[i] = blocks[--count];
        return header;
      }
    }
    return nullptr;
  }
  /// Keeps `header` (a small block of this allocator's), or frees it when
  /// the cache is full.
  void keep(Header *header) {
    if (count == kSlots) {
      freeBlock(blocks[0]); // the oldest
      std::copy(blocks + 1, blocks + count, blocks);
      --count;
    }
    blocks[count++] = header;
  }
  ~SmallCache();
};

/// Set when the thread's cache is gone (the thread is ending), for releases
/// from destructors that run after it.
thread_local bool smallCacheGone = false;

SmallCache::~SmallCache() {
  for (int i = 0; i < count; ++i) {
    freeBlock(blocks[i]);
  }
  smallCacheGone = true;
}

/// This thread's small blocks, or null while it ends.
SmallCache *smallCache() {
  if (smallCacheGone) {
    return nullptr;
  }
  thread_local SmallCache instance;
  return &instance;
}

} // namespace

namespace {
void *allocateUnplanned(size_t size) {
  if (size > SIZE_MAX / 2) {
    return nullptr; // no system has it; and the rounding below must not wrap
  }
  size_t capacity = roundedSize(size == 0 ? 1 : size);
  if (capacity >= kCachedBlockBytes) {
    Cache &c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    // The smallest cached block that fits, if it wastes at most 1/8.
    auto it = c.blocks.lower_bound(capacity);
    if (it != c.blocks.end() && it->first <= capacity + capacity / 8) {
      Header *header = it->second;
      c.bytes -= it->first;
      c.blocks.erase(it);
      c.live += header->capacity;
      c.peakLive = std::max(c.peakLive, c.live);
      ++c.reused;
      return header + 1;
    }
    // A miss: the cache must not make the footprint (live + cached) grow
    // past the most ever live at once, which plain malloc would also reach;
    // cached blocks of other sizes go back to the system first.
    ++c.fresh;
    c.live += capacity;
    c.peakLive = std::max(c.peakLive, c.live);
    c.evictTo(c.peakLive - c.live);
  }
  if (SmallCache *small =
          capacity <= SmallCache::kMaxBytes ? smallCache() : nullptr) {
    if (Header *header = small->take(capacity)) {
      return header + 1;
    }
  }
  auto *header = static_cast<Header *>(
      capacity >= kCachedBlockBytes
          ? mapBlock(capacity)
          : std::aligned_alloc(64, (sizeof(Header) + capacity + 63) / 64 * 64));
  if (!header) {
    if (capacity >= kCachedBlockBytes) {
      Cache &c = cache();
      std::lock_guard<std::mutex> lock(c.mutex);
      c.live -= std::min(c.live, capacity);
    }
    return nullptr;
  }
  header->base = header;
  header->capacity = capacity;
  return header + 1;
}

void releaseUnplanned(void *pointer) {
  Header *header = static_cast<Header *>(pointer) - 1;
  if (header->capacity >= kCachedBlockBytes) {
    Cache &c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    c.live -= std::min(c.live, header->capacity);
    if (c.bytes + header->capacity <= c.limit) {
      c.blocks.emplace(header->capacity, header);
      c.bytes += header->capacity;
      return;
    }
  }
  if (header->capacity > 0 && header->capacity <= SmallCache::kMaxBytes &&
      header->base == header) {
    if (SmallCache *small = smallCache()) {
      small->keep(header);
      return;
    }
  }
  freeBlock(header);
}

//===----------------------------------------------------------------------===//
// Planned calls
//===----------------------------------------------------------------------===//

constexpr size_t kNoOffset = SIZE_MAX;

/// Every live arena, so that release() recognises its blocks whichever
/// thread frees them.
struct Arenas {
  std::mutex mutex;
  std::map<uintptr_t, uintptr_t> ranges; // begin -> end
  bool contains(const void *p) {
    auto at = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> lock(mutex);
    auto it = ranges.upper_bound(at);
    return it != ranges.begin() && at < std::prev(it)->second;
  }
};

Arenas &arenas() {
  static Arenas *instance = new Arenas; // outlives every static destructor
  return *instance;
}

/// One plan: the large allocations of a call, in order, and where each
/// lives in the arena (kNoOffset: it outlives the call).
struct Plan {
  std::string shapes;
  /// Each block's room in the arena (at least its recorded size), and
  /// where it starts.
  std::vector<size_t> sizes, offsets;
  char *arena = nullptr;
  size_t arenaBytes = 0;
  bool ready = false;
  /// A replay needed more room for a block than the plan had (its sizes
  /// depend on more than the input shapes: a decoding step's attention over
  /// the positions so far): recordings leave blocks room to grow.
  bool grows = false;

  Plan() = default;
  Plan(const Plan &) = delete;
  Plan &operator=(const Plan &) = delete;
  ~Plan() { unmap(); }

  /// Gives the arena back (and forgets it in the registry).
  void unmap() {
    if (!arena) {
      return;
    }
    {
      std::lock_guard<std::mutex> lock(arenas().mutex);
      arenas().ranges.erase(reinterpret_cast<uintptr_t>(arena));
    }
    munmap(arena, arenaBytes);
    arena = nullptr;
    arenaBytes = 0;
  }
};

/// Places blocks [allocated, freed) (event times) of `sizes` in one
/// arena: largest first, each at the lowest offset clear of every placed
/// block live at the same time. Returns the arena's size.
size_t place(const std::vector<size_t> &sizes,
             const std::vector<size_t> &allocated,
             const std::vector<size_t> &freed, std::vector<size_t> &offsets) {
  constexpr size_t page = 4096;
  std::vector<size_t> order;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (offsets[i] != kNoOffset) {
      order.push_back(i);
    }
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return sizes[a] != sizes[b] ? sizes[a] > sizes[b] : a < b;
  });
  std::vector<size_t> placed;
  size_t total = 0;
  for (size_t i : order) {
    std::vector<std::pair<size_t, size_t>> taken; // [begin, end)
    for (size_t j : placed) {
      if (allocated[j] < freed[i] && allocated[i] < freed[j]) {
        taken.push_back({offsets[j], offsets[j] + sizes[j]});
      }
    }
    std::sort(taken.begin(), taken.end());
    size_t offset = 0;
    for (auto [begin, end] : taken) {
      if (begin >= offset + sizes[i]) {
        break;
      }
      offset = std::max(offset, (end + page - 1) / page * page);
    }
    offsets[i] = offset;
    total = std::max(total, offset + sizes[i]);
    placed.push_back(i);
  }
  return total;
}

} // namespace

class CallPlans {
public:
  std::mutex mutex;      ///< held by the call using the plans
  std::list<Plan> plans; ///< most recently used first
  static constexpr size_t kKept = 2;
};

std::shared_ptr<CallPlans> makeCallPlans() {
  return std::make_shared<CallPlans>();
}

struct PlannedCall::State {
  CallPlans *plans = nullptr;
  std::unique_lock<std::mutex> lock;
  Plan *plan = nullptr;
  bool replaying = false, diverged = false, finished = false;
  size_t next = 0;  ///< the index of the next large allocation
  size_t clock = 0; ///< allocation and release events so far
  // Recording: when each block was allocated and released.
  std::vector<size_t> sizes, allocated, freed;
  std::unordered_map<void *, size_t> open; ///< live recorded block -> index

  /// The arena blocks handed out in this call and not yet released: start
  /// -> end (offsets).
  std::map<size_t, size_t> liveArena;

  /// Whether [begin, end) of the arena is clear of every live block.
  bool clear(size_t begin, size_t end) const {
    for (auto [b, e] : liveArena) {
      if (b < end && begin < e) {
        return false;
      }
    }
    return true;
  }

  void *allocate(size_t capacity) {
    size_t index = next++;
    ++clock;
    if (replaying && !diverged) {
      // A block that fits its room, and whose room no live block holds
      // (checked, not assumed from the recorded lifetimes: a call of other
      // sizes may free its blocks in another order).
      if (index < plan->sizes.size() && capacity <= plan->sizes[index]) {
        if (plan->offsets[index] == kNoOffset) {
          return allocateUnplanned(capacity);
        }
        size_t begin = plan->offsets[index], end = begin + plan->sizes[index];
        if (clear(begin, end)) {
          liveArena.emplace(begin, end);
          return plan->arena + begin;
        }
      } else if (index < plan->sizes.size()) {
        plan->grows = true;
      }
      diverged = true; // another call than the one planned
    }
    void *p = allocateUnplanned(capacity);
    if (!replaying && p) {
      open[p] = sizes.size();
      sizes.push_back(capacity);
      allocated.push_back(clock);
      freed.push_back(kNoOffset);
    }
    return p;
  }

  /// True when `pointer` was handled (an arena block: nothing to free).
  bool release(void *pointer) {
    ++clock;
    if (replaying) {
      if (!inArena(pointer)) {
        return false;
      }
      liveArena.erase(size_t(static_cast<char *>(pointer) - plan->arena));
      return true;
    }
    if (auto it = open.find(pointer); it != open.end()) {
      freed[it->second] = clock;
      open.erase(it);
    }
    return false;
  }

  bool inArena(const void *pointer) const {
    auto *p = static_cast<const char *>(pointer);
    return plan && plan->arena && p >= plan->arena &&
           p < plan->arena + plan->arenaBytes;
  }
};

namespace {
thread_local PlannedCall::State *activeCall = nullptr;
} // namespace

PlannedCall::PlannedCall(CallPlans &plans, const std::string &shapes)
    : state_(std::make_unique<State>()) {
  if (activeCall || kAddressSanitizer) {
    return; // nested: unplanned
  }
  std::unique_lock<std::mutex> lock(plans.mutex, std::try_to_lock);
  if (!lock.owns_lock()) {
    return; // another thread runs this function now: unplanned
  }
  state_->plans = &plans;
  state_->lock = std::move(lock);
  auto found = std::find_if(plans.plans.begin(), plans.plans.end(),
                            [&](const Plan &p) { return p.shapes == shapes; });
  if (found == plans.plans.end()) {
    plans.plans.emplace_front();
    plans.plans.front().shapes = shapes;
    while (plans.plans.size() > CallPlans::kKept) {
      plans.plans.pop_back(); // unmaps its arena
    }
  } else {
    plans.plans.splice(plans.plans.begin(), plans.plans, found);
  }
  state_->plan = &plans.plans.front();
  state_->replaying = state_->plan->ready;
  activeCall = state_.get();
}

void PlannedCall::finish() {
  State &s = *state_;
  if (s.finished || !s.plan) {
    return;
  }
  s.finished = true;
  if (activeCall == &s) {
    activeCall = nullptr;
  }
  Plan &plan = *s.plan;
  if (s.replaying) {
    // A call that took other sizes (or fewer blocks) records afresh next.
    if (s.diverged || s.next != plan.sizes.size()) {
      plan.ready = false;
    }
    return;
  }
  // Blocks still open outlive the call: the general allocator's. A plan
  // whose blocks grew gives each an eighth more room (rounded to pages), so
  // that the next calls' slightly larger blocks still replay.
  if (plan.grows) {
    for (size_t &size : s.sizes) {
      size = roundedSize(size + size / 8);
    }
  }
  std::vector<size_t> offsets(s.sizes.size(), 0);
  for (size_t i = 0; i < s.sizes.size(); ++i) {
    if (s.freed[i] == kNoOffset) {
      offsets[i] = kNoOffset;
    }
  }
  size_t bytes = place(s.sizes, s.allocated, s.freed, offsets);
  if (bytes > plan.arenaBytes || !plan.arena) {
    plan.unmap();
    size_t mapped = std::max<size_t>(bytes, 4096);
    void *arena = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (arena == MAP_FAILED) {
      plan.arenaBytes = 0;
      return; // no arena: calls stay unplanned
    }
    plan.arena = static_cast<char *>(arena);
    plan.arenaBytes = mapped;
    std::lock_guard<std::mutex> guard(arenas().mutex);
    arenas().ranges[reinterpret_cast<uintptr_t>(plan.arena)] =
        reinterpret_cast<uintptr_t>(plan.arena) + mapped;
  }
  plan.sizes = std::move(s.sizes);
  plan.offsets = std::move(offsets);
  plan.ready = true;
  // The recorded call's blocks went back to the cache; the arena replaces
  // them, so they go back to the system.
  trim();
}

PlannedCall::~PlannedCall() { finish(); }

bool PlannedCall::inArena(const void *pointer) const {
  return state_->inArena(pointer);
}

/// Under AddressSanitizer: a block of exactly `size` bytes (its redzones
/// right before and after), released by std::free.
void *allocateExact(size_t alignment, size_t size) {
  void *pointer = nullptr;
  return posix_memalign(&pointer, std::max(alignment, sizeof(void *)),
                        size) == 0
             ? pointer
             : nullptr;
}

void *allocate(size_t size) {
  if constexpr (kAddressSanitizer) {
    return size > SIZE_MAX / 2 ? nullptr : allocateExact(64, size);
  }
  if (activeCall && size <= SIZE_MAX / 2 &&
      roundedSize(size == 0 ? 1 : size) >= kCachedBlockBytes) {
    return activeCall->allocate(roundedSize(size));
  }
  return allocateUnplanned(size);
}

void *allocateAligned(size_t alignment, size_t size) {
  if (alignment == 0 || alignment & (alignment - 1) ||
      alignment > (size_t(1) << 20) || size > SIZE_MAX / 2) {
    return nullptr;
  }
  if constexpr (kAddressSanitizer) {
    return allocateExact(std::max<size_t>(alignment, 64), size);
  }
  if (alignment <= alignof(Header)) {
    return allocate(size);
  }
  // Rare (Kiln's pipeline asks for 64): room for the header before an
  // aligned pointer; such blocks go straight back to the system.
  auto *base = static_cast<char *>(
      std::aligned_alloc(64, (size + 2 * alignment + 63) / 64 * 64));
  if (!base) {
    return nullptr;
  }
  uintptr_t first = reinterpret_cast<uintptr_t>(base) + sizeof(Header);
  auto *data =
      reinterpret_cast<char *>((first + alignment - 1) & ~(alignment - 1));
  Header *header = reinterpret_cast<Header *>(data) - 1;
  header->base = base;
  header->capacity = 0;
  return data;
}

void release(void *pointer) {
  if (!pointer) {
    return;
  }
  if constexpr (kAddressSanitizer) {
    std::free(pointer);
    return;
  }
  if (activeCall && activeCall->release(pointer)) {
    return; // an arena block
  }
  if (arenas().contains(pointer)) {
    return; // an arena block freed by another thread
  }
  releaseUnplanned(pointer);
}

Stats stats() {
  Cache &c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  Stats out{c.bytes, c.limit, c.reused, c.fresh, c.live, c.peakLive, 0};
  std::lock_guard<std::mutex> arenaLock(arenas().mutex);
  for (auto [begin, end] : arenas().ranges) {
    out.arenaBytes += end - begin;
  }
  return out;
}

void trim() { cache().clear(); }

void setCacheLimit(size_t bytes) {
  Cache &c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.limit = bytes;
  c.evictTo(c.limit);
}

} // namespace kiln::memory

namespace {
/// Compiled code has no way to report an error and would write through a
/// null pointer: a failed allocation ends the process with the reason.
void *orDie(void *pointer, size_t size) {
  if (!pointer && size > 0) {
    std::fprintf(stderr,
                 "kiln: out of memory: compiled code could not allocate %zu "
                 "bytes\n",
                 size);
    std::abort();
  }
  return pointer;
}
} // namespace

extern "C" {
void *_mlir_memref_to_llvm_alloc(size_t size) {
  return orDie(kiln::memory::allocate(size), size);
}
void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size) {
  return orDie(kiln::memory::allocateAligned(alignment, size), size);
}
void _mlir_memref_to_llvm_free(void *pointer) {
  kiln::memory::release(pointer);
}
}
