//===- Passes.td - Passes of Kiln's named pipelines --------*- tablegen -*-===//
//
// Passes that Kiln's pipelines need beyond the upstream ones.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_PIPELINES_PASSES_TD
#define KILN_COMPILER_PIPELINES_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnCheckLoweredPass : Pass<"kiln-check-lowered", "::mlir::ModuleOp"> {
  let summary = "Fail when anything is left above the pipeline's target level";
  let description = [{
    The last pass of every Kiln pipeline. With `stage=linalg` it rejects any
    remaining `kiln` op; with `stage=llvm` it rejects any op outside the
    `llvm` dialect (besides the module and OpenMP regions, which are translated
    to LLVM IR with it). Each leftover op gets an error
    naming it, so a missing lowering is a diagnostic, never a crash later.

    ```mlir
    // kiln-opt --kiln-check-lowered=stage=linalg on:
    %0 = kiln.relu %x : (tensor<4xf32>) -> tensor<4xf32>
    // error: 'kiln.relu' op was not lowered to linalg
    ```
  }];
  let options = [
    Option<"stage", "stage", "std::string", /*default=*/"\"llvm\"",
           "The level everything must have reached: linalg or llvm">
  ];
}

def KilnApproximateMathPass : Pass<"kiln-approximate-math"> {
  let summary = "Replace transcendental math ops with vectorizable polynomials";
  let description = [{
    Rewrites `math.exp`, `math.log`, `math.tanh`, `math.erf`, `math.sin`,
    `math.cos` and friends on f32 into polynomial approximations made of
    arithmetic (MLIR's approximations, accurate to a few ulp), so that they
    vectorize instead of calling libm one element at a time.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def KilnOutlineKernelsPass : Pass<"kiln-outline-kernels", "::mlir::ModuleOp"> {
  let summary = "Move each linalg op on buffers into a private kernel function, "
                "one per distinct op";
  let description = [{
    After bufferization, replaces every linalg op (with the constants its
    body uses) by a call to a private, never-inlined function that holds
    only that op, and gives identical ops (same op, attributes, body and
    operand types) the same function. The layers of a model repeat, so the
    number of kernels, and with it the time spent vectorizing and optimizing
    them, stops growing with the depth; and no function handed to LLVM is
    larger than one op's loop nest.

    ```mlir
    // Two identical linalg.generic ops on memref<4x8xf32> become
    func.call @kiln_kernel_0(%a, %b) : (memref<4x8xf32>, memref<4x8xf32>) -> ()
    func.call @kiln_kernel_0(%b, %c) : (memref<4x8xf32>, memref<4x8xf32>) -> ()
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def KilnApplyNoAliasPass : Pass<"kiln-apply-noalias", "::mlir::ModuleOp"> {
  let summary = "Mark the kernel buffers that never overlap as noalias";
  let description = [{
    Runs after func-to-llvm: puts `llvm.noalias` on the aligned pointers that
    kiln-outline-kernels found never to overlap a written buffer at any call
    (recorded in the kernel's `kiln.noalias_args`), so that LLVM may keep
    loaded values in registers across stores.
  }];
}

def KilnDeviceBuffersPass : Pass<"kiln-device-buffers", "::mlir::ModuleOp"> {
  let summary = "Allocate the buffers of GPU code in device memory";
  let description = [{
    For kiln-to-gpu, after the linalg ops have become GPU kernels: the host
    code's `memref.alloc`/`dealloc`/`copy` become `gpu.alloc`/`dealloc`/
    `memcpy`, so parameters, activations and temporaries live in device
    memory. Host memory the kernels would read (a stack buffer, a global), and
    a load or store left in host code, are errors naming the op.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def KilnHostInterfacePass : Pass<"kiln-host-interface", "::mlir::ModuleOp"> {
  let summary = "Public functions of GPU code take and return host memory";
  let description = [{
    For kiln-to-gpu, after kiln-device-buffers: each public function copies
    its buffer arguments into device memory on entry, and its results back
    into new host buffers before it returns, freeing the device buffers it
    owned. A compiled GPU function is then called exactly like a CPU one,
    by the JIT or from an ahead-of-time object.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::memref::MemRefDialect"];
}

def KilnStridedCopiesToLinalgPass
    : Pass<"kiln-strided-copies-to-linalg", "::mlir::ModuleOp"> {
  let summary = "Turn copies between views into linalg.copy";
  let description = [{
    For kiln-to-gpu: a `memref.copy` whose source or target is a view (not an
    identity layout) becomes `linalg.copy`, which becomes a kernel like any
    linalg op; whole-buffer copies stay, for `gpu.memcpy`.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def KilnSerialNestsToParallelPass
    : Pass<"kiln-serial-nests-to-parallel", "::mlir::func::FuncOp"> {
  let summary = "Put loop nests without parallel loops in a one-iteration scf.parallel";
  let description = [{
    For kiln-to-gpu, after convert-linalg-to-parallel-loops: a run of ops
    between allocations, calls and parallel loops that touches memory (a
    rank-0 fill, a reduction over every element, the mean that follows) is
    wrapped in a one-iteration `scf.parallel`, so that it becomes a kernel
    (of one thread) instead of host code touching device memory. A load whose
    value only parallel loops use (a learning rate) moves into each of them.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::arith::ArithDialect"];
}

def KilnGpuKernelsPass : Pass<"kiln-gpu-kernels", "::mlir::func::FuncOp"> {
  let summary = "Turn contractions and long reductions into tuned GPU kernels";
  let description = [{
    For kiln-to-gpu, on linalg ops on buffers, before the others become
    parallel loops: a contraction (any loop order, any number of batch, m, n
    and k dimensions; f32) becomes a `gpu.launch` that computes 64 x 64
    outputs per block of 16 x 16 threads, 4 x 4 per thread in registers,
    staging 64 x 16 tiles of both operands through shared memory. A reduction
    over at least 64 elements (or a dynamic number) whose outputs each
    accumulate with one commutative combiner (add, mul, max, min) becomes a
    `gpu.launch` with one block per output: the threads stride over the
    reduced elements and combine their partial results with
    `gpu.all_reduce`. Other ops are left as they are.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::affine::AffineDialect",
                           "::mlir::memref::MemRefDialect"];
}

#endif // KILN_COMPILER_PIPELINES_PASSES_TD
