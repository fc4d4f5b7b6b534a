//===- CompiledModel.cpp - A DSL model compiled and ready to run ----------===//
//
// Implements kiln::CompiledModel.
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/JIT/CompiledModel.h"

#include "compiler/Codegen/CPU/TargetInfo.h"
#include "compiler/DSL/DSL.h"

#include "mlir/IR/BuiltinOps.h"
#include "runtime/Cuda.h"
#include "runtime/Error.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>

namespace kiln {

/// `options` with JitOptions::prepareWeights decided: as they say, else as
/// the target CPU's default (TargetInfo::prepareWeightsByDefault; on where
/// the CPU cannot be resolved, which the compile then reports). The GPU's
/// code ignores it.
static JitOptions withPreparedWeights(const dsl::Module &module,
                                      JitOptions options) {
  if (options.prepareWeights) {
    return options;
  }
  llvm::Expected<mlir::kiln::TargetAttr> target =
      mlir::kiln::cpu::resolveTarget(module.op()->getContext(), options.cpu);
  if (!target) {
    llvm::consumeError(target.takeError());
    options.prepareWeights = true;
    return options;
  }
  options.prepareWeights =
      mlir::kiln::cpu::TargetInfo::of(*target).prepareWeightsByDefault();
  return options;
}

CompiledModel::CompiledModel(const dsl::Module &module, uint64_t seed,
                             const JitOptions &options)
    : options_(withPreparedWeights(module, options)) {
  module.verify();
  jit_ = JitModule::compileCached(module.op(), options_);
  parameters_ = jit_->initParameters(seed);
  llvm::raw_string_ostream os(source_);
  module.op()->print(os, mlir::OpPrintingFlags().enableDebugInfo());
}

LossAndGradients
CompiledModel::gradients(const std::string &graph,
                         const std::map<std::string, Arg> &inputs) const {
  const FunctionSpec &spec = jit_->spec(graph); // throws naming the graphs
  if (spec.results.empty() || !spec.results[0].shape.empty()) {
    throw Error("kiln: gradients of graph '" + graph +
                "' need a scalar loss as its first output, but it returns " +
                (spec.results.empty()
                     ? std::string("nothing")
                     : formatShape(spec.results[0].shape)) +
                " first");
  }
  std::string gradName = graph + "_grad";
  std::shared_ptr<JitModule> jit;
  {
    std::lock_guard<std::mutex> lock(gradientsMutex_);
    std::shared_ptr<JitModule> &slot = gradientJits_[graph];
    if (!slot) {
      JitOptions options = options_;
      options.prePipeline = "kiln-autodiff{function=" + graph + "}";
      options.functions = {gradName};
      slot = JitModule::compileSource(source_, options);
    }
    jit = slot;
  }
  std::vector<Tensor> results = jit->run(
      gradName, callParameters(jit->spec(gradName)), inputs, &prepared_);
  const FunctionSpec &gradSpec = jit->spec(gradName);
  LossAndGradients out;
  out.loss = results[0].data<float>()[0];
  for (size_t r = 1; r < results.size(); ++r) {
    llvm::StringRef name = gradSpec.results[r].name;
    if (!name.consume_front("grad.")) {
      throw Error("kiln: gradient function '" + gradName + "' returned '" +
                  name.str() + "', which names no parameter's gradient");
    }
    out.gradients.emplace(name.str(), results[r]);
  }
  return out;
}

const ParameterStore &
CompiledModel::callParameters(const FunctionSpec &spec) const {
  bool onDevice = std::any_of(spec.args.begin(), spec.args.end(),
                              [](const ArgSpec &a) { return a.onDevice; });
  if (!onDevice) {
    return parameters_;
  }
  std::lock_guard<std::mutex> lock(deviceMutex_);
  if (deviceStale_) {
    cuda::mirror(parameters_, deviceParameters_);
    deviceStale_ = false;
  }
  return deviceParameters_;
}

std::vector<Tensor>
CompiledModel::run(const std::string &graph,
                   const std::map<std::string, Arg> &inputs) const {
  return jit_->run(graph, callParameters(jit_->spec(graph)), inputs,
                   &prepared_);
}

} // namespace kiln
