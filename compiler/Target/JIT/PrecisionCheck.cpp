//===- PrecisionCheck.cpp - A function in fp32 and bf16, value by value ---===//

#include "compiler/Target/JIT/PrecisionCheck.h"

#include "compiler/DSL/Graph.h"
#include "runtime/Error.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OperationSupport.h"

#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace kiln {

namespace {

/// The error of `low` against `reference` (f32 tensors of one shape).
ValueCheck compare(const std::string &value, const Tensor &low,
                   const Tensor &reference, const PrecisionCheckOptions &o) {
  ValueCheck check;
  check.value = value;
  check.shape = reference.shape();
  if (low.shape() != reference.shape()) {
    throw Error("kiln: checkPrecision: value " + value +
                " has different shapes in the two compiles");
  }
  const float *a = low.data<float>(), *b = reference.data<float>();
  double difference = 0, norm = 0;
  bool lowFinite = true, referenceFinite = true;
  for (int64_t i = 0; i < reference.numel(); ++i) {
    lowFinite &= std::isfinite(a[i]);
    referenceFinite &= std::isfinite(b[i]);
    double d = double(a[i]) - double(b[i]);
    difference += d * d;
    norm += double(b[i]) * b[i];
    check.maxAbsError = std::max(check.maxAbsError, std::fabs(d));
  }
  if (!lowFinite && referenceFinite) {
    check.relativeError = std::numeric_limits<double>::infinity();
  } else if (!referenceFinite) {
    check.relativeError = 0; // fp32 itself is not finite: nothing to compare
    check.maxAbsError = 0;
  } else if (norm > 0) {
    check.relativeError = std::sqrt(difference / norm);
  } else {
    check.relativeError =
        difference > 0 ? std::numeric_limits<double>::infinity() : 0;
  }
  int64_t count = std::max<int64_t>(1, reference.numel());
  check.rms = std::sqrt(norm / double(count));
  double errorRms = std::sqrt(difference / double(count));
  if (!lowFinite && referenceFinite) {
    check.overBudget = true;
  } else if (!referenceFinite) {
    check.overBudget = false;
  } else if (check.rms >= o.floor) {
    check.overBudget = check.relativeError > o.budget;
  } else {
    check.overBudget = errorRms > o.budget * o.floor;
  }
  return check;
}

} // namespace

PrecisionReport checkPrecision(const dsl::Module &module,
                               const std::string &graph,
                               const std::map<std::string, Arg> &inputs,
                               const PrecisionCheckOptions &options) {
  if (!(options.floor >= 0 && std::isfinite(options.floor))) {
    throw Error(fmt::format("kiln: checkPrecision: the floor {} is not a "
                            "root mean square (0 or more)",
                            options.floor));
  }
  if (!(options.budget > 0 && options.budget <= 1)) {
    throw Error(fmt::format("kiln: checkPrecision: the budget {} is not in "
                            "(0, 1] (a relative error)",
                            options.budget));
  }
  if (options.precision == "fp32") {
    throw Error("kiln: checkPrecision: precision fp32 is the reference; "
                "check a reduced one (bf16)");
  }
  if (!module.findGraph(graph)) {
    throw Error("kiln: checkPrecision: the module has no graph '" + graph +
                "'");
  }
  module.verify();
  std::string function = options.gradients ? graph + "_grad" : graph;
  JitOptions reference = options.jit;
  reference.prePipeline =
      (options.gradients ? "kiln-autodiff{function=" + graph + "}," : "") +
      "kiln-expose-values{function=" + function + "}";
  reference.functions = {function};
  reference.prepareWeights = false;
  reference.precision = "fp32";
  JitOptions reduced = reference;
  reduced.precision = options.precision;
  // Compiled from the IR with its locations (the lines of the model's C++
  // that the values are named after); the reduced compile first, so that a
  // precision the CPU lacks is refused before the reference is compiled.
  std::string source;
  llvm::raw_string_ostream os(source);
  module.op()->print(os, mlir::OpPrintingFlags().enableDebugInfo());
  std::shared_ptr<JitModule> low = JitModule::compileSource(source, reduced);
  std::shared_ptr<JitModule> full = JitModule::compileSource(source, reference);
  ParameterStore parameters = full->initParameters(options.seed);
  std::vector<Tensor> want = full->run(function, parameters, inputs);
  std::vector<Tensor> got = low->run(function, parameters, inputs);
  const FunctionSpec &spec = full->spec(function);

  PrecisionReport report;
  report.precision = options.precision;
  report.budget = options.budget;
  report.floor = options.floor;
  // The exposed values are the results named "#<i>:..." after the
  // function's own; they come first, in program order.
  size_t own = 0;
  while (own < spec.results.size() &&
         !llvm::StringRef(spec.results[own].name).starts_with("#")) {
    ++own;
  }
  for (size_t r = own; r < spec.results.size(); ++r) {
    report.values.push_back(
        compare(spec.results[r].name, got[r], want[r], options));
  }
  for (size_t r = 0; r < own; ++r) {
    report.values.push_back(
        compare("output " + spec.results[r].name, got[r], want[r], options));
  }
  for (size_t i = 0; i < report.values.size(); ++i) {
    if (report.values[i].overBudget) {
      report.firstOverBudget = int64_t(i);
      break;
    }
  }
  return report;
}

std::string PrecisionReport::str() const {
  std::string out = fmt::format(
      "{} against fp32, budget {:.3g} (relative L2 error of each value; "
      "values of RMS below {:.3g} judged against it):\n",
      precision, budget, floor);
  for (size_t i = 0; i < values.size(); ++i) {
    const ValueCheck &v = values[i];
    std::string shape;
    for (int64_t size : v.shape) {
      shape += (shape.empty() ? "" : "x") + std::to_string(size);
    }
    out += fmt::format("  {:>10.3e}  max |error| {:>9.3e}  rms {:>9.3e}  "
                       "[{}]  {}{}\n",
                       v.relativeError, v.maxAbsError, v.rms,
                       shape.empty() ? "scalar" : shape, v.value,
                       int64_t(i) == firstOverBudget ? "   <- first over budget"
                       : v.overBudget                ? "   (over budget)"
                                                     : "");
  }
  if (firstOverBudget < 0) {
    out += fmt::format("every value within {:.3g} of fp32\n", budget);
  } else {
    out += fmt::format("first over budget: {} ({:.3g} > {:.3g})\n",
                       values[firstOverBudget].value,
                       values[firstOverBudget].relativeError, budget);
  }
  return out;
}

} // namespace kiln
