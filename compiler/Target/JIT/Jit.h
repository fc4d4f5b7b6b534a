//===- Jit.h - Compile kiln IR in-process and call it ------------*- C++
//-*-===//
//
// Lowers a module of kiln functions to LLVM, JIT-compiles it at O3 for the
// host CPU and calls its functions on kiln::Tensor arguments without copying
// them. Calls are checked as runtime/Function.h describes; every problem is a
// kiln::Error.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_JIT_JIT_H
#define KILN_COMPILER_TARGET_JIT_JIT_H

#include "runtime/Function.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace kiln {

struct LoweredModule;

struct JitOptions {
  /// LLVM optimization level (0-3).
  unsigned optLevel = 3;
  /// When non-empty, the IR of every stage is written there as
  /// <stem>.kiln.mlir, <stem>.linalg.mlir, <stem>.llvm.mlir and <stem>.ll.
  std::string dumpDirectory;
  std::string dumpStem = "module";
  /// A textual pass pipeline run on the kiln module before it is compiled
  /// (e.g. "kiln-training-step{optimizer=adamw}" to add a training step).
  std::string prePipeline;
  /// The public functions to compile (after prePipeline); empty: all.
  std::vector<std::string> functions;
  /// Where the functions run: empty, the CPU; "native", this machine's
  /// NVIDIA GPU (kernels compiled for its architecture); or an NVIDIA
  /// architecture, "sm_80", "sm_90" (the spelling of kiln-compile's --gpu
  /// and kiln-to-gpu's gpu=). Functions take host tensors either way; on the
  /// GPU, every buffer they use lives in device memory during the call, and
  /// parameters and optimizer state may also be passed as GPU tensors (kept
  /// there across calls, as a Trainer does), while a training step returns
  /// its new parameters and optimizer state as GPU tensors
  /// (ArgSpec/ResultSpec::onDevice; runtime/Cuda.h moves tensors). A GPU
  /// where there is no usable one, or a name that is neither, is a
  /// kiln::Error that says why, before anything is compiled.
  std::string gpu;
  /// With gpu: the arithmetic of matrix products and other contractions.
  /// "fp32" (the default): FMA on the CUDA cores, results as the CPU's to
  /// fp32 rounding. "tf32": tensor cores (mma.sync), operands rounded to
  /// TF32's 10-bit mantissa (to nearest) and products summed in fp32; several
  /// times faster, each product's error up to about 2^-10 of
  /// sum |a| |b| (docs/gpu.md). "tf32x3": each operand split into two TF32
  /// parts and three tensor-core products summed, about fp32's accuracy.
  /// "bf16": tensor cores with operands rounded to bf16 (to nearest even)
  /// and fp32 sums, each product's error up to about 2^-7 of sum |a| |b|:
  /// the GPU's counterpart of the CPU's precision "bf16". All three need
  /// sm_80 or newer. Anything else, or one of them without a GPU or on an
  /// older one, is a kiln::Error before anything is compiled.
  std::string gpuMath = "fp32";
  /// The CPU code is generated for: "host" (this machine's CPU and
  /// features), or an LLVM CPU name as kiln-compile's --cpu takes
  /// ("x86-64-v3", "x86-64-v4", "znver4"). Code for a CPU the host lacks
  /// features of compiles, but calling it may fault.
  std::string cpu = "host";
  /// The CPU code's precision: "fp32" (the default: every product in f32,
  /// results that match the reference loops to f32 rounding), or "bf16"
  /// (mixed precision: the operands of matrix products rounded to bf16 as
  /// they are packed, products and sums in f32 on AVX512-BF16's vdpbf16ps;
  /// parameters, optimizer state, activations, normalization, softmax and
  /// the loss stay f32). bf16 needs a CPU with AVX512-BF16 (Zen 4 and
  /// later, Sapphire Rapids and later): on any other, or with `gpu`, it is
  /// a kiln::Error before anything is compiled. See docs/precision.md.
  std::string precision = "fp32";
  /// With precision "bf16": the products' kernels. "auto" (the default):
  /// AMX's tiles (tdpbf16ps) where the CPU has AMX (Sapphire Rapids and
  /// later; each product falls back to vdpbf16ps when Linux does not grant
  /// the process the tile state), else vdpbf16ps register tiles; "dot":
  /// vdpbf16ps always; "amx": AMX's tiles (an error on a CPU without AMX);
  /// "amx-emulated": the AMX kernels with each tile
  /// instruction computed by vdpbf16ps code, to check them on a CPU
  /// without AMX (slower than "dot"). Anything else, or a name other than
  /// "auto" with precision fp32, is a kiln::Error before anything is
  /// compiled.
  std::string bf16Kernels = "auto";
  /// Instruments the generated CPU code with AddressSanitizer: every load
  /// and store is checked against the sanitizer's shadow memory, so that
  /// compiled code that reads or writes outside a buffer is reported where
  /// it happens (the fuzzers run accepted IR this way). Needs the
  /// sanitizer's runtime in the process (a program linked with
  /// -fsanitize=address), else it is a kiln::Error before anything is
  /// compiled. Unset: on when Kiln itself was built with AddressSanitizer.
  std::optional<bool> addressSanitizer;
  /// CPU target: products read the 2-D parameters they take transposed (a
  /// linear layer's weight, [out, in]) from copies in the layout they
  /// multiply by, made once per parameter set instead of inside every call.
  /// Functions that read one gain an argument per such parameter, after
  /// the others (ArgSpec::Role::prepared): run() fills it, keeping it in the
  /// PreparedWeights it is given; a positional call() must pass the
  /// parameter's transpose. Functions that update arguments in place
  /// (training and decoding steps) are left as they are. The copies take
  /// as much memory as the weights they are made of. Unset: off, except in
  /// a CompiledModel (which keeps the copies) for a CPU whose vectors hold
  /// fewer than 16 f32 (AVX2 and older: with AVX-512 the copies inside the
  /// products cost nothing measurable; TargetInfo::prepareWeightsByDefault).
  std::optional<bool> prepareWeights;
};

/// Why JitOptions::precision `precision` cannot be compiled for CPU `cpu`
/// ("host" or an LLVM CPU name), empty when it can: the check compile()
/// makes, for a program to make before anything else (an unknown name, bf16
/// on a CPU without AVX512-BF16, an unknown CPU).
std::string precisionError(const std::string &precision,
                           const std::string &cpu = "host");

class JitModule : public Executable {
public:
  ~JitModule() override;

  /// Compiles every public function of a module of kiln IR (the module is
  /// cloned, not modified). Throws kiln::Error with the compiler's
  /// diagnostics.
  static std::shared_ptr<JitModule> compile(mlir::ModuleOp module,
                                            const JitOptions &options = {});
  /// Like compile(), but returns the already compiled module when the same
  /// IR was compiled before in this process with the same options.
  static std::shared_ptr<JitModule>
  compileCached(mlir::ModuleOp module, const JitOptions &options = {});
  /// Parses and compiles kiln IR text.
  static std::shared_ptr<JitModule>
  compileSource(const std::string &source, const JitOptions &options = {});

  /// Seconds spent in the MLIR pipeline and in LLVM code generation.
  double pipelineSeconds() const;
  double codegenSeconds() const;
  /// Bytes of compiled code, constants and data the module's sections take
  /// (pages, all in one reservation: compiler/Target/JIT/JitMemory.h).
  size_t codeBytes() const;

private:
  struct Impl;
  static std::shared_ptr<JitModule> compileLowered(LoweredModule lowered,
                                                   const JitOptions &options);
  explicit JitModule(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace kiln

#endif // KILN_COMPILER_TARGET_JIT_JIT_H
