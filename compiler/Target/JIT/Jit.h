//===- Jit.h - Compile kiln IR in-process and call it ------------*- C++
//-*-===//
//
// Lowers a module of kiln functions to LLVM, JIT-compiles it at O3 for the
// host CPU and calls its functions on kiln::Tensor arguments without copying
// them. Inputs are checked against each function's signature (and token ids
// against their tables) before the call; every problem is a kiln::Error.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_JIT_JIT_H
#define KILN_COMPILER_TARGET_JIT_JIT_H

#include "runtime/ParameterStore.h"
#include "runtime/Tensor.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace kiln {

/// One argument of a compiled function: a tensor or an i64 scalar (a dropout
/// seed, a start position).
struct Arg {
  Arg(Tensor tensor) : tensor(std::move(tensor)) {}
  Arg(int64_t scalar) : scalar(scalar), isScalar(true) {}
  Tensor tensor;
  int64_t scalar = 0;
  bool isScalar = false;
};

/// What a function argument must be.
struct ArgSpec {
  std::string name;           ///< kiln.name if the IR has one, else "arg<i>".
  bool isParam = false;       ///< kiln.kind = "param": bound from a store.
  bool isState = false;       ///< kiln.kind = "state": optimizer state.
  bool isScalar = false;      ///< An i64 scalar rather than a tensor.
  DType dtype = DType::f32;   ///< Element type of a tensor argument.
  std::vector<int64_t> shape; ///< -1 for a dynamic size.
  int64_t idBound = -1;       ///< When >= 0: values must lie in [0, idBound).
  int64_t ignoredId =
      INT64_MIN; ///< A value exempt from idBound (ignore_index).
};

struct FunctionSpec {
  std::string name;
  std::vector<ArgSpec> args;
  std::vector<std::vector<int64_t>> results; ///< Result shapes, -1 dynamic.
};

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
};

class JitModule {
public:
  ~JitModule();

  /// Compiles every function of a module of kiln IR (the module is cloned,
  /// not modified). Throws kiln::Error with the compiler's diagnostics.
  static std::shared_ptr<JitModule> compile(mlir::ModuleOp module,
                                            const JitOptions &options = {});
  /// Like compile(), but returns the already compiled module when the same
  /// IR was compiled before in this process with the same options.
  static std::shared_ptr<JitModule>
  compileCached(mlir::ModuleOp module, const JitOptions &options = {});
  /// Parses and compiles kiln IR text.
  static std::shared_ptr<JitModule>
  compileSource(const std::string &source, const JitOptions &options = {});

  /// Calls function `name`. Throws kiln::Error for a wrong argument count,
  /// dtype, rank or static size, inconsistent dynamic sizes, and token ids
  /// outside their table.
  std::vector<Tensor> call(const std::string &name,
                           const std::vector<Arg> &args) const;

  /// Calls function `name` with its parameters taken from `parameters` and
  /// every other argument from `inputs` by name. Throws kiln::Error for a
  /// missing or an unknown input, and whatever call() throws.
  std::vector<Tensor> run(const std::string &name,
                          const ParameterStore &parameters,
                          const std::map<std::string, Arg> &inputs) const;

  const FunctionSpec &spec(const std::string &name) const;
  std::vector<std::string> functions() const;

  /// Seconds spent in the MLIR pipeline and in LLVM code generation.
  double pipelineSeconds() const;
  double codegenSeconds() const;

private:
  struct Impl;
  explicit JitModule(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace kiln

#endif // KILN_COMPILER_TARGET_JIT_JIT_H
