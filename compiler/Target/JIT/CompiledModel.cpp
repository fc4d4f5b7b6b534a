//===- CompiledModel.cpp - A DSL model compiled and ready to run ----------===//
//
// Implements kiln::CompiledModel.
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/JIT/CompiledModel.h"

#include "compiler/DSL/DSL.h"

#include "mlir/IR/BuiltinOps.h"

namespace kiln {

CompiledModel::CompiledModel(const dsl::Module &module, uint64_t seed,
                             const JitOptions &options) {
  module.verify();
  jit_ = JitModule::compileCached(module.op(), options);
  parameters_ = jit_->initParameters(seed);
}

std::vector<Tensor>
CompiledModel::run(const std::string &graph,
                   const std::map<std::string, Arg> &inputs) const {
  return jit_->run(graph, parameters_, inputs);
}

} // namespace kiln
