//===- CompiledModel.h - A DSL model compiled and ready to run ---*- C++
//-*-===//
//
// Ties a DSL Module, the JIT and a ParameterStore together: compile once,
// initialize (or load) the parameters, run any graph with inputs by name.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_JIT_COMPILEDMODEL_H
#define KILN_COMPILER_TARGET_JIT_COMPILEDMODEL_H

#include "compiler/Target/JIT/Jit.h"
#include "runtime/ParameterStore.h"
#include "runtime/PreparedWeights.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiln {
namespace dsl {
class Module;
} // namespace dsl

/// A loss and its gradient with respect to every parameter
/// (CompiledModel::gradients).
struct LossAndGradients {
  double loss = 0;
  /// By parameter name ("h.0.attn.qkv.weight"), each of its parameter's
  /// shape.
  std::map<std::string, Tensor> gradients;
};

class CompiledModel {
public:
  /// Compiles every graph of `module` (once per process for the same IR)
  /// and allocates its parameters, initialized as the model declares them
  /// from a generator seeded with `seed`. CPU code is compiled with
  /// JitOptions::prepareWeights as `options` say, else on for CPUs without
  /// AVX-512 only (JitOptions::prepareWeights): the model keeps the
  /// prepared layouts of its parameters.
  explicit CompiledModel(const dsl::Module &module, uint64_t seed = 0,
                         const JitOptions &options = {});

  /// The parameters. The model keeps copies made from them: on the CPU,
  /// the parameters that products read transposed in the layout they
  /// multiply by (JitOptions::prepareWeights); compiled for the GPU, all of
  /// them in device memory. Each copy is made again on the first run()
  /// after parameters() was called on a non-const model (which may have
  /// changed them): change parameters through the reference this returns,
  /// not through tensors kept from before the last run().
  ParameterStore &parameters() {
    deviceStale_ = true;
    prepared_.clear();
    return parameters_;
  }
  const ParameterStore &parameters() const { return parameters_; }

  /// Runs graph `graph`: `inputs` are bound by name to the graph's inputs
  /// (a missing or unknown name is an error), parameters come from the
  /// store. Returns the graph's outputs.
  std::vector<Tensor> run(const std::string &graph,
                          const std::map<std::string, Arg> &inputs) const;

  /// Runs graph `graph`, whose first output is a scalar loss, and returns
  /// the loss and its gradient with respect to every parameter, by name
  /// (reverse mode, as kiln-autodiff). Inputs are bound as run() binds them.
  /// The gradient function is compiled on the first call for `graph` (only
  /// that function; later calls reuse it). Throws kiln::Error when there is
  /// no such graph or its first output is not a scalar.
  LossAndGradients gradients(const std::string &graph,
                             const std::map<std::string, Arg> &inputs) const;

  const JitModule &jit() const { return *jit_; }

private:
  std::shared_ptr<JitModule> jit_;
  /// The parameters the compiled functions take: parameters_, or its copy
  /// on the GPU (brought up to date) when they read it from there.
  const ParameterStore &callParameters(const FunctionSpec &spec) const;

  ParameterStore parameters_;
  mutable std::mutex deviceMutex_;
  mutable ParameterStore deviceParameters_;
  mutable bool deviceStale_ = true;
  /// The CPU functions' prepared parameters (ArgSpec::Role::prepared).
  mutable PreparedWeights prepared_;
  /// What gradients() compiles from: the module's IR (with locations, so
  /// errors name the user's lines) and the options.
  std::string source_;
  JitOptions options_;
  mutable std::mutex gradientsMutex_;
  mutable std::map<std::string, std::shared_ptr<JitModule>> gradientJits_;
};

} // namespace kiln

#endif // KILN_COMPILER_TARGET_JIT_COMPILEDMODEL_H
