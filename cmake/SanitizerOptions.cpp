//===- SanitizerOptions.cpp - AddressSanitizer's defaults for Kiln --------===//
//
// Linked into every target of a KILN_SANITIZE build and into kiln-fuzz-ir.
// LLVM's headers poison and unpoison BumpPtrAllocator slabs when the code
// that includes them is built with ASan; Kiln's instrumented code then
// poisons slabs (of MLIR's uniquer, say) that Debian's uninstrumented
// libMLIR.so allocates from without unpoisoning: false use-after-poison
// reports. Manual poisoning is switched off; everything else ASan checks.
// An allocation the sanitizer cannot serve returns null, as the system's
// would, so that Kiln's own report of it (a kiln::Error, or the message of
// compiled code's allocator) is what the user sees.
//
//===----------------------------------------------------------------------===//

extern "C" const char *__asan_default_options() {
  return "allow_user_poisoning=0:allocator_may_return_null=1";
}
