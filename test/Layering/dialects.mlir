// The dialect layer includes only dialects/ and base/ (and MLIR): with the
// include path its sources compile with (KilnDialect's, in dialects.flags),
// the runtime's and the compiler's headers are not found.
// RUN: not %clangxx @%kiln_layer_flags/dialects.flags -std=c++20 -fsyntax-only %S/Inputs/dialect-includes-runtime.cpp 2>&1 | FileCheck %s --check-prefix=RUNTIME
// RUN: not %clangxx @%kiln_layer_flags/dialects.flags -std=c++20 -fsyntax-only %S/Inputs/dialect-includes-compiler.cpp 2>&1 | FileCheck %s --check-prefix=COMPILER
// The same flags find base/ and dialects/.
// RUN: %clangxx @%kiln_layer_flags/dialects.flags -std=c++20 -fsyntax-only %S/Inputs/dialect-includes-base.cpp

// RUNTIME: fatal error: 'runtime/Tensor.h' file not found
// COMPILER: fatal error: 'compiler/DSL/DSL.h' file not found
