// The runtime layer includes only runtime/ and base/: with the include path
// its sources compile with (KilnRuntime's, in runtime.flags), the dialects'
// and the compiler's headers are not found, nor LLVM's and MLIR's.
// RUN: not %clangxx @%kiln_layer_flags/runtime.flags -std=c++20 -fsyntax-only %S/Inputs/runtime-includes-dialects.cpp 2>&1 | FileCheck %s --check-prefix=DIALECTS
// RUN: not %clangxx @%kiln_layer_flags/runtime.flags -std=c++20 -fsyntax-only %S/Inputs/runtime-includes-compiler.cpp 2>&1 | FileCheck %s --check-prefix=COMPILER
// Nor LLVM's and MLIR's: the runtime is a plain C++ library.
// RUN: not %clangxx @%kiln_layer_flags/runtime.flags -std=c++20 -fsyntax-only %S/Inputs/runtime-includes-mlir.cpp 2>&1 | FileCheck %s --check-prefix=MLIR
// The same flags find base/, runtime/ and <kiln/runtime.h>.
// RUN: %clangxx @%kiln_layer_flags/runtime.flags -std=c++20 -fsyntax-only %S/Inputs/runtime-includes-base.cpp

// DIALECTS: fatal error: 'dialects/Kiln/IR/KilnDialect.h' file not found
// COMPILER: fatal error: 'compiler/DSL/DSL.h' file not found
// MLIR: fatal error: 'mlir/IR/MLIRContext.h' file not found
