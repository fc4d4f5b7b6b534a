//===- Allocator.cpp - The heap of compiled code --------------------------===//

#include "runtime/Allocator.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>

namespace kiln::memory {
namespace {

/// Every block starts with this header, one cache line, so that the
/// pointer handed out keeps the 64-byte alignment of the underlying one.
struct alignas(64) Header {
  void *base;      ///< what the system allocated (the header, or before it)
  size_t capacity; ///< usable bytes after the header; 0: never cached
};
static_assert(sizeof(Header) == 64);

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
      std::free(largest->second->base);
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

} // namespace

void *allocate(size_t size) {
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
  size_t total = (sizeof(Header) + capacity + 63) / 64 * 64;
  auto *header = static_cast<Header *>(std::aligned_alloc(64, total));
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

void *allocateAligned(size_t alignment, size_t size) {
  if (alignment == 0 || alignment & (alignment - 1) ||
      alignment > (size_t(1) << 20) || size > SIZE_MAX / 2) {
    return nullptr;
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
  std::free(header->base);
}

Stats stats() {
  Cache &c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return {c.bytes, c.limit, c.reused, c.fresh};
}

void trim() { cache().clear(); }

void setCacheLimit(size_t bytes) {
  Cache &c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.limit = bytes;
  c.evictTo(c.limit);
}

} // namespace kiln::memory

extern "C" {
void *_mlir_memref_to_llvm_alloc(size_t size) {
  return kiln::memory::allocate(size);
}
void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size) {
  return kiln::memory::allocateAligned(alignment, size);
}
void _mlir_memref_to_llvm_free(void *pointer) {
  kiln::memory::release(pointer);
}
}
