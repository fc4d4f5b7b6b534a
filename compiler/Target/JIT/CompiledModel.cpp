//===- CompiledModel.cpp - A DSL model compiled and ready to run ----------===//
//
// Implements kiln::CompiledModel.
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/JIT/CompiledModel.h"

#include "compiler/DSL/DSL.h"
#include "runtime/Error.h"

#include "mlir/IR/BuiltinOps.h"

namespace kiln {

CompiledModel::CompiledModel(const dsl::Module &module, uint64_t seed,
                             const JitOptions &options) {
  module.verify();
  jit_ = JitModule::compileCached(module.op(), options);
  Rng rng(seed);
  for (const dsl::ParamSpec &spec : module.params()) {
    parameters_.add(spec.name, spec.shape, spec.init, rng);
  }
}

std::vector<Tensor>
CompiledModel::run(const std::string &graph,
                   const std::map<std::string, Arg> &inputs) const {
  const FunctionSpec &spec = jit_->spec(graph);
  std::vector<Arg> args;
  size_t used = 0;
  for (const ArgSpec &arg : spec.args) {
    if (arg.isParam) {
      args.emplace_back(parameters_.get(arg.name));
      continue;
    }
    auto it = inputs.find(arg.name);
    if (it == inputs.end()) {
      throw Error("kiln: graph '" + graph + "' needs the input '" + arg.name +
                  "'");
    }
    args.push_back(it->second);
    ++used;
  }
  if (used != inputs.size()) {
    for (const auto &[name, _] : inputs) {
      bool known = false;
      for (const ArgSpec &arg : spec.args) {
        known |= !arg.isParam && arg.name == name;
      }
      if (!known) {
        throw Error("kiln: graph '" + graph + "' has no input '" + name + "'");
      }
    }
  }
  return jit_->call(graph, args);
}

} // namespace kiln
