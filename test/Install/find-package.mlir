// find_package(Kiln) from an installed Kiln: a user's project (the minimal
// CMake of docs/aot.md) builds a DSL model ahead of time and links it.
// RUN: rm -rf %t && mkdir -p %t
// RUN: cmake --install %kiln_obj --prefix %t/prefix > %t/install.log
// RUN: cmake -S %S/project -B %t/build -G Ninja -DCMAKE_CXX_COMPILER=%clangxx "-DCMAKE_CXX_FLAGS=%kiln_sanitize" -DCMAKE_PREFIX_PATH=%t/prefix > %t/configure.log
// RUN: cmake --build %t/build > %t/build.log
// RUN: %t/build/app | FileCheck %s
// RUN: llvm-readelf -d %t/build/app | FileCheck %s --check-prefix=DEPS

// CHECK: loss {{[0-9.]+}} -> {{[0-9.]+}}, logits [2, 6, 11]
// DEPS-NOT: libLLVM
// DEPS-NOT: libMLIR
// DEPS-NOT: libkiln.so
