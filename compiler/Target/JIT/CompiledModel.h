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

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln {
namespace dsl {
class Module;
} // namespace dsl

class CompiledModel {
public:
  /// Compiles every graph of `module` (once per process for the same IR)
  /// and allocates its parameters, initialized as the model declares them
  /// from a generator seeded with `seed`.
  explicit CompiledModel(const dsl::Module &module, uint64_t seed = 0,
                         const JitOptions &options = {});

  ParameterStore &parameters() { return parameters_; }
  const ParameterStore &parameters() const { return parameters_; }

  /// Runs graph `graph`: `inputs` are bound by name to the graph's inputs
  /// (a missing or unknown name is an error), parameters come from the
  /// store. Returns the graph's outputs.
  std::vector<Tensor> run(const std::string &graph,
                          const std::map<std::string, Arg> &inputs) const;

  const JitModule &jit() const { return *jit_; }

private:
  std::shared_ptr<JitModule> jit_;
  ParameterStore parameters_;
};

} // namespace kiln

#endif // KILN_COMPILER_TARGET_JIT_COMPILEDMODEL_H
