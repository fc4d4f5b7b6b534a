//===- MemrefCopy.cpp - Strided copies for compiled code ------------------===//
//
// Compiled code copies non-contiguous memrefs through `memrefCopy`, a symbol
// MLIR's lowering expects from its C runner utilities. Kiln provides it
// itself so that JIT and AOT code need nothing from MLIR at run time.
//
//===----------------------------------------------------------------------===//

#include "runtime/MemrefCopy.h"

#include <cstring>
#include <vector>

namespace {
/// The ranked descriptor behind an unranked memref: allocated, aligned,
/// offset, then `rank` sizes and `rank` strides (in elements).
struct Descriptor {
  char *allocated;
  char *aligned;
  int64_t offset;
  int64_t dims[];
};
} // namespace

extern "C" void memrefCopy(int64_t elementSize, kiln::UnrankedMemref *src,
                           kiln::UnrankedMemref *dst) {
  int64_t rank = src->rank;
  auto *s = static_cast<Descriptor *>(src->descriptor);
  auto *d = static_cast<Descriptor *>(dst->descriptor);
  const int64_t *sizes = s->dims;
  const int64_t *srcStrides = s->dims + rank;
  const int64_t *dstStrides = d->dims + rank;
  char *srcBase = s->aligned + s->offset * elementSize;
  char *dstBase = d->aligned + d->offset * elementSize;
  int64_t count = 1;
  for (int64_t k = 0; k < rank; ++k) {
    count *= sizes[k];
  }
  if (count == 0) {
    return;
  }
  if (rank == 0) {
    std::memcpy(dstBase, srcBase, elementSize);
    return;
  }
  // The innermost dimensions that are contiguous in both (or of size 1)
  // form runs copied with one memcpy each: a cache of keys concatenated
  // along positions copies whole rows, not one element at a time.
  int64_t inner = rank, run = 1;
  while (inner > 0) {
    int64_t k = inner - 1;
    if (sizes[k] != 1 && (srcStrides[k] != run || dstStrides[k] != run)) {
      break;
    }
    run *= sizes[k];
    --inner;
  }
  int64_t runBytes = run * elementSize;
  std::vector<int64_t> index(inner, 0);
  int64_t srcOffset = 0, dstOffset = 0;
  for (int64_t i = 0; i < count / run; ++i) {
    std::memcpy(dstBase + dstOffset * elementSize,
                srcBase + srcOffset * elementSize, runBytes);
    for (int64_t k = inner - 1; k >= 0; --k) {
      srcOffset += srcStrides[k];
      dstOffset += dstStrides[k];
      if (++index[k] < sizes[k]) {
        break;
      }
      srcOffset -= srcStrides[k] * sizes[k];
      dstOffset -= dstStrides[k] * sizes[k];
      index[k] = 0;
    }
  }
}
