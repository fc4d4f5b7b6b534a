// find_package(Kiln) from an installed Kiln: a program outside Kiln's tree
// includes <kiln/kiln.h>, links Kiln::Kiln, and writes a model in C++,
// JIT-runs it, takes its gradients by name, trains it, and loads a state
// dict saved under PyTorch's names through a mapping.
// RUN: rm -rf %t && mkdir -p %t
// RUN: cmake --install %kiln_obj --prefix %t/prefix > %t/install.log
// RUN: cmake -S %S/jit-project -B %t/build -G Ninja -DCMAKE_CXX_COMPILER=%clangxx "-DCMAKE_CXX_FLAGS=%kiln_sanitize" -DCMAKE_PREFIX_PATH=%t/prefix > %t/configure.log
// RUN: cmake --build %t/build > %t/build.log
// RUN: %t/build/app %t | FileCheck %s
// The internal headers stay out of the install; the base/ header the
// runtime's headers include is in it.
// RUN: ls %t/prefix/include/kiln/runtime | FileCheck %s --check-prefix=HEADERS
// RUN: ls %t/prefix/include/kiln/base | FileCheck %s --check-prefix=BASE

// CHECK: logits [2, 6, 11], loss {{[0-9.]+}}, 16 gradients, c_attn [48, 16]
// CHECK: trained: loss {{[0-9.]+}} -> {{[0-9.]+}}
// CHECK: state dict: max difference 0
// CHECK: refused: kiln: {{.*}}gpt2.safetensors: the state dict does not fit the model (1 problem):
// CHECK-NEXT: 'h.0.attn.bias' (file: 'transformer.h.0.attn.bias') [1, 1, 8, 8] names no parameter of the model

// HEADERS-NOT: MemrefCopy.h
// HEADERS-NOT: Cuda.h
// HEADERS-NOT: SpecText.h
// HEADERS-NOT: ArgumentChecks.h
// HEADERS: Tensor.h

// BASE-NOT: {{BoundaryNames|SplitMix64}}.h
// BASE: DType.h
// BASE-NOT: {{BoundaryNames|SplitMix64}}.h
