//===- MemrefCopy.h - Strided copies for compiled code -----------*- C++
//-*-===//
//
// The C entry points that compiled Kiln code calls into.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_MEMREFCOPY_H
#define KILN_RUNTIME_MEMREFCOPY_H

#include <cstdint>

namespace kiln {
/// MLIR's unranked memref descriptor: a rank and a pointer to the ranked one.
struct UnrankedMemref {
  int64_t rank;
  void *descriptor;
};
} // namespace kiln

/// Copies a strided memref into another of the same shape.
extern "C" void memrefCopy(int64_t elementSize, kiln::UnrankedMemref *src,
                           kiln::UnrankedMemref *dst);

#endif // KILN_RUNTIME_MEMREFCOPY_H
