//===- Generator.cpp - The main() of a model generator program ------------===//
//
// Implements kiln::generatorMain.
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/AOT/Generator.h"

#include "compiler/DSL/DSL.h"
#include "compiler/InitAll.h"
#include "compiler/Pipelines/Pipelines.h"
#include "runtime/Error.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <fmt/format.h>

namespace kiln {

int generatorMain(int argc, char **argv, const dsl::Module &module,
                  const GeneratorOptions &options) {
  std::string output;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
      output = argv[++i];
    } else {
      fmt::print(stderr, "usage: {} [-o model.mlir]\n", argv[0]);
      return 2;
    }
  }
  try {
    module.verify();
    mlir::OwningOpRef<mlir::ModuleOp> copy = module.op().clone();
    if (!options.lossGraph.empty()) {
      if (!module.findGraph(options.lossGraph)) {
        throw Error("kiln: the module has no graph '" + options.lossGraph +
                    "'");
      }
      registerAllPasses();
      mlir::PassManager pm(copy->getContext());
      if (failed(mlir::kiln::addPipeline(
              pm,
              trainingStepPipeline(options.lossGraph, options.optimizer))) ||
          failed(pm.run(*copy))) {
        throw Error("kiln: adding the training step failed");
      }
    }
    if (output.empty()) {
      copy->print(llvm::outs());
      return 0;
    }
    std::string temp = output + ".tmp";
    {
      std::error_code ec;
      llvm::raw_fd_ostream os(temp, ec);
      if (ec) {
        throw Error("kiln: cannot write '" + temp + "': " + ec.message());
      }
      copy->print(os);
    }
    if (std::error_code ec = llvm::sys::fs::rename(temp, output)) {
      throw Error("kiln: cannot write '" + output + "': " + ec.message());
    }
    return 0;
  } catch (const std::exception &e) {
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  }
}

} // namespace kiln
