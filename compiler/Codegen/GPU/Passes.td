//===- Passes.td - GPU code generation passes --------------*- tablegen -*-===//
//
// GPU code generation (kiln-to-gpu), in pipeline order: copies and serial
// code that become kernels, tuned kernels for contractions and reductions,
// device memory, and host functions that take and return host memory.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_CODEGEN_GPU_PASSES_TD
#define KILN_COMPILER_CODEGEN_GPU_PASSES_TD

include "mlir/Pass/PassBase.td"

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

def KilnGpuKernelsPass : Pass<"kiln-gpu-kernels", "::mlir::func::FuncOp"> {
  let summary = "Turn contractions and long reductions into tuned GPU kernels";
  let description = [{
    For kiln-to-gpu, on linalg ops on buffers, before the others become
    parallel loops: a contraction (any loop order, any number of batch, m, n
    and k dimensions; f32) becomes a `gpu.launch` that computes 128 x 128
    outputs per block of 16 x 16 threads, 8 x 8 per thread in registers,
    staging 8 x 128 tiles of both operands through shared memory: where
    the module's `kiln.target` names sm_80 or newer, copied by `cp.async`
    (`nvgpu.device_async_copy`, zero-filled outside the operand) into two
    stages, the next filling while the block multiplies the current one,
    one barrier a step; elsewhere the next ones read into registers during
    the current step and stored to one stage. A grid of B blocks,
    B at most 132, splits the reduction into up to 264 / B parts (grid z;
    no more than k / 128, every part a multiple of 8 steps but the last; at
    run time when sizes are dynamic): each part's sums go to a buffer, which
    a second `gpu.launch` (`<function>_split_sum_kernel`) adds to the output
    in order; sizes that cannot split emit neither. A reduction
    over at least 32 elements (or a dynamic number) whose outputs each
    accumulate with one commutative combiner (add, mul, max, min) becomes a
    `gpu.launch` with one block per output: the threads stride over the
    reduced elements and combine their partial results with
    `gpu.all_reduce`. Other ops are left as they are.

    With `math=tf32` (sm_80 and newer), contractions multiply on the tensor
    cores: operands rounded to TF32 (10-bit mantissa, to nearest) as they
    are staged in shared memory, each warp 64 x 32 outputs as 4 x 4
    `mma.sync.m16n8k8` tiles accumulating in fp32; the block's tile, the
    split and the order of the additions into the output are as in fp32.
    With `math=tf32x3`, operands are staged in fp32 and each fragment is
    split into big = tf32(x) and small = tf32(x - big); every tile takes
    three `mma.sync` (small_a big_b, big_a small_b, big_a big_b), about
    fp32's accuracy. With `math=bf16`, operands are rounded to bf16 (to
    nearest even) as they are staged, the tiles are 16 steps of k deep,
    and each warp's 4 x 4 tiles are `mma.sync.m16n8k16` with bf16 operands
    (two steps of k in a register) and fp32 sums: the GPU counterpart of
    the CPU's bf16 precision.
  }];
  let options = [
    Option<"math", "math", "std::string", /*default=*/"\"fp32\"",
           "The contractions' arithmetic: fp32 (FMA on the CUDA cores, "
           "the CPU's results to rounding), tf32 (tensor cores, "
           "mma.sync), tf32x3 (three TF32 products, about fp32's "
           "accuracy) or bf16 (bf16 operands, fp32 sums); tensor cores on "
           "sm_80 and newer">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::nvgpu::NVGPUDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::affine::AffineDialect",
                           "::mlir::memref::MemRefDialect"];
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
    First, a nest `scf.for %n { ...; scf.if { scf.for %d { body } } }` whose
    inner iterations never touch the same memory (every buffer it writes is
    a fresh allocation, accessed only in the inner loop with `%d` as the
    last index: embedding_grad's scatter-add of rows) becomes
    `scf.parallel %d { scf.for %n { ...; scf.if { body } } }`: one thread
    per column, each in the outer loop's order (the same sums, bit for bit).
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::arith::ArithDialect"];
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

def KilnGpuLoopTilesPass
    : Pass<"kiln-gpu-loop-tiles", "::mlir::func::FuncOp"> {
  let summary = "Tile parallel loops into blocks and threads, innermost dimension first";
  let description = [{
    For kiln-to-gpu, before gpu-map-parallel-loops, which puts a tiled
    loop's first dimensions on blocks and threads x, y, z (later ones stay
    serial in each thread). Each outermost `scf.parallel` of two or more
    dimensions without reductions or a mapping gets its dimensions in
    reverse order, so that the innermost one (the contiguous dimension of
    the buffers an elementwise op reads and writes) is on `threadIdx.x` and
    the threads of a warp touch consecutive elements, where the outermost
    one (the batch: 8 elements, 1 at batch 1) left threads idle and each on
    another row. Then each innermost `scf.parallel` without reductions is
    tiled: by 16 x 16 on its first two dimensions, or by 256 when it has
    one (blocks of 8 warps, where 16 threads left half of each warp idle
    and the multiprocessors short of blocks), or by its trip count when
    that is constant and smaller (one thread for serial code). The iterations are the same;
    only their mapping changes.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect"];
}

def KilnHostInterfacePass : Pass<"kiln-host-interface", "::mlir::ModuleOp"> {
  let summary = "Public functions of GPU code take and return host memory";
  let description = [{
    For kiln-to-gpu, after kiln-device-buffers: each public function copies
    its buffer arguments into device memory on entry, and its results back
    into new host buffers before it returns, freeing the device buffers it
    owned. A compiled GPU function is then called exactly like a CPU one,
    by the JIT or from an ahead-of-time object.

    With `resident`, the state a caller keeps across calls stays on the
    device: arguments of kiln.kind "param" or "state", and those a result
    updates (kiln.updates: a decoder's key/value caches), are device buffers
    the caller owns (read in place, never copied or written), and results
    that update an argument (a training step's new parameters and optimizer
    state, a decoder's new caches) are returned in device buffers of their
    own, which the caller then owns (a buffer computed for the result when
    it is one, else a device copy).
    mlir::kiln::isResidentArgument/isResidentResult say which.
  }];
  let options = [
    Option<"resident", "resident", "bool", /*default=*/"false",
           "Parameters and optimizer state stay in device memory">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::memref::MemRefDialect"];
}

def KilnGpuCostModelPass : Pass<"kiln-gpu-cost-model", "::mlir::ModuleOp"> {
  let summary = "Predict the time of each function's GPU launches (a static cost model)";
  let description = [{
    For kiln-to-gpu, after the kernels are outlined and the host code is on
    device buffers: evaluates every host function's sizes for the argument
    sizes given in `sizes` (`name=8x256,...`, the name an argument's
    `kiln.name` or its number; every dynamic size of an argument must be
    given), then each `gpu.launch_func`'s grid and block, and counts what
    one thread of its kernel does: floating-point operations (a
    `nvvm.mma.sync` counts its share of the warp's), bytes loaded from and
    stored to global memory (shared memory not counted), loops by their trip
    counts (bounds that depend on the block or thread evaluated for the
    first one), the larger branch of an `scf.if`. A kernel's predicted
    time is the largest of its operations over the device's fp32 (or TF32
    tensor) rate scaled by the share of the device's block slots its waves
    fill, its bytes over the memory bandwidth scaled by the share of
    multiprocessors with a block, and a thread's accesses one after
    another; plus a fixed latency. A function's time adds each launch's, at
    least the host's cost of one launch each, and its copies (over the host
    link, or within the device at its bandwidth, read and written). The
    device (`device`: h200, h100, a100) gives the rates; the efficiencies
    are measured (docs/gpu.md). The module gets `kiln.gpu_cost`, per
    function its launches, copies, flops, bytes, kernel and total
    milliseconds; with `report`, one line per kernel (its launches summed)
    and per function is printed to standard output. Sizes it cannot
    evaluate, a size that names no argument, and launches or copies in host
    loops or branches are errors.
  }];
  let options = [
    Option<"device", "device", "std::string", /*default=*/"\"h200\"",
           "The GPU whose rates the prediction uses: h200, h100, a100">,
    Option<"sizes", "sizes", "std::string", /*default=*/"\"\"",
           "The dynamic argument sizes: name=8x256,... (name: kiln.name or "
           "the argument's number)">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print one line per kernel (its launches summed) and per function">,
    Option<"resident", "resident", "bool", /*default=*/"false",
           "Parameters and optimizer state are device buffers (as "
           "kiln-host-interface{resident} made them): copies between them "
           "and device buffers stay on the device">
  ];
}

def KilnAttachGpuTargetPass
    : Pass<"kiln-attach-gpu-target", "::mlir::ModuleOp"> {
  let summary = "Attach the module's GPU architecture to its GPU modules";
  let description = [{
    For kiln-to-gpu, after kernel outlining: reads the NVIDIA architecture
    from the module's `kiln.target` (`#kiln.target<..., gpu = "sm_90">`,
    written by kiln-set-target{gpu=...}) and attaches it to every
    `gpu.module` as upstream `nvvm-attach-target` does (`#nvvm.target<O = 3,
    chip = "sm_90">`), so that the architecture is named once, in the IR,
    and a dumped module says what its kernels were compiled for. A module
    whose target names no GPU is an error that says how to set one.
  }];
  let dependentDialects = ["::mlir::NVVM::NVVMDialect"];
}

def KilnAlignWorkgroupMemoryPass
    : Pass<"kiln-align-workgroup-memory", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Align every kernel's workgroup (shared) memory to 16 bytes";
  let description = [{
    For kiln-to-gpu, after kernel outlining: every workgroup attribution of
    a `gpu.func` gets `llvm.align = 16` (an alignment already at least 16 is
    kept), so the shared-memory globals are declared `.align 16` in the PTX.
    LLVM assumes a large global without an explicit alignment is 16-byte
    aligned and merges four 32-bit shared loads into one 128-bit
    `ld.shared.v4` (the tiled contractions read their operand tiles that
    way), but NVPTX declares such a global with its element's alignment (4),
    which would let a 128-bit access be misaligned.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def KilnGpuModulesToHostPass
    : Pass<"kiln-gpu-modules-to-host", "::mlir::ModuleOp"> {
  let summary = "Compile each kernel module for the host CPU, for an "
                "emulated GPU";
  let description = [{
    In place of `gpu-module-to-binary`, for a CUDA driver that runs kernels
    on the host (the fake driver of test/Unit/Cuda, which the runtime asks
    through `kiln_cuda_runs_host_kernels`): each `gpu.module`, lowered to the
    LLVM and NVVM dialects, is compiled for the host CPU into a
    `gpu.binary` whose object is an ELF object behind a `KILNHOSTKERNELS`
    header. The NVVM operations become calls into the driver: the special
    registers (thread, block, grid, lane) read the emulated thread's,
    `nvvm.barrier0` waits for the block's threads, `nvvm.shfl.sync` and
    `nvvm.mma.sync` (m16n8k8, TF32) exchange values between the lanes of a
    warp, `nvvm.convert.float.to.tf32` rounds as `cvt.rna` does; libdevice's
    `__nv_*` functions are the driver's. Each kernel `K` gets an entry
    `K(void **params)` that reads its arguments as `cuLaunchKernel` passes
    them and turns device pointers into host ones. Any other NVVM operation
    is an error naming it. The driver runs each block's threads as fibers
    (docs/gpu.md, "Kernels on the host").
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect",
                           "::mlir::gpu::GPUDialect"];
}

#endif // KILN_COMPILER_CODEGEN_GPU_PASSES_TD
