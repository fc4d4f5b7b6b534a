//===- Sanitizer.h - Whether this build runs under AddressSanitizer -------===//
//
// Code built with -fsanitize=address changes two things so that the
// sanitizer sees every buffer compiled code touches: the allocator hands
// out blocks of exactly the bytes asked for, straight from the (checked)
// system allocator (runtime/Allocator.h), and the JIT instruments the code
// it generates (compiler/Target/JIT/Jit.h, JitOptions::addressSanitizer).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SANITIZER_H
#define KILN_RUNTIME_SANITIZER_H

namespace kiln {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

} // namespace kiln

#endif // KILN_RUNTIME_SANITIZER_H
