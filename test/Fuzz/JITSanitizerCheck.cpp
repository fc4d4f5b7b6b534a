//===- JITSanitizerCheck.cpp - The JIT's AddressSanitizer checks work -----===//
//
// kiln-fuzz-ir counts on the JIT instrumenting the code it generates
// (JitOptions::addressSanitizer) in its sanitized build: compiled code that
// reads past a buffer must be reported there, where without the checks it
// reads whatever lies next to it. This program calls a compiled function
// with a tensor whose memory is shorter than its shape says (the runtime
// cannot see that; compiled code reads all of it):
//   kiln-jit-sanitizer-check checked   the sanitizer reports a
//                                      heap-buffer-overflow in compiled code
//   kiln-jit-sanitizer-check unchecked the same call without the checks
//                                      runs to the end ("no report")
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/JIT/Jit.h"
#include "runtime/Allocator.h"

#include <cstdio>
#include <cstring>

int main(int argc, char **argv) {
  if (argc != 2 || (std::strcmp(argv[1], "checked") != 0 &&
                    std::strcmp(argv[1], "unchecked") != 0)) {
    std::fprintf(stderr, "usage: %s checked|unchecked\n", argv[0]);
    return 2;
  }
  kiln::JitOptions options;
  options.addressSanitizer = std::strcmp(argv[1], "checked") == 0;
  auto jit = kiln::JitModule::compileSource(R"(
    func.func @double(%x: tensor<?xf32>) -> tensor<?xf32> {
      %0 = kiln.add %x, %x : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
      return %0 : tensor<?xf32>
    })",
                                            options);
  // 4 floats of memory, 64 by the shape: compiled code reads 240 bytes past
  // the block (inside the heap's own memory, so nothing faults).
  void *data = kiln::memory::allocate(4 * sizeof(float));
  std::memset(data, 0, 4 * sizeof(float));
  kiln::Tensor x = kiln::Tensor::adopt(data, {64}, kiln::DType::f32,
                                       [data] { kiln::memory::release(data); });
  auto results = jit->function("double").call({x});
  std::printf("no report: %lld elements\n",
              static_cast<long long>(results[0].numel()));
  return 0;
}
