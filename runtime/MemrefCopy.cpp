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
  std::vector<int64_t> index(rank, 0);
  int64_t srcOffset = 0, dstOffset = 0;
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(dstBase + dstOffset * elementSize,
                srcBase + srcOffset * elementSize, elementSize);
    for (int64_t k = rank - 1; k >= 0; --k) {
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
