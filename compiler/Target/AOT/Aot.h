//===- Aot.h - Compile kiln IR ahead of time ---------------------*- C++
//-*-===//
//
// Compiles a module of kiln functions into an object file (or a static
// library) plus a C header declaring each public function as
//
//   int <name>_<function>(const kiln_tensor *args, size_t num_args,
//                         kiln_tensor *results, size_t num_results);
//
// and the whole model as `extern const kiln_model <name>_model`. The code
// links against Kiln's runtime library only (no LLVM or MLIR at run time).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_AOT_AOT_H
#define KILN_COMPILER_TARGET_AOT_AOT_H

#include "compiler/Target/Common/Lowering.h"

#include <string>
#include <vector>

namespace kiln {

struct AotOptions {
  /// The C identifier that prefixes every symbol (e.g. "shakespeare").
  std::string name;
  unsigned optLevel = 3;
  /// What to compile and for which CPU: `lowering.cpu` is "host", or an
  /// LLVM CPU name such as "x86-64-v3" for binaries that must run on other
  /// machines.
  LoweringOptions lowering;
};

struct AotResult {
  std::vector<FunctionSpec> functions;
  double pipelineSeconds = 0; ///< MLIR pipelines
  double codegenSeconds = 0;  ///< LLVM optimization and code generation
};


/// Compiles kiln IR `source` (`what` names it in errors) to `objectPath`
/// (an archive when it ends in ".a") and writes the header to `headerPath`
/// (another file). Nothing is written unless everything succeeds, the
/// header included. Throws kiln::Error.
AotResult compileAheadOfTime(const std::string &source, const std::string &what,
                             const AotOptions &options,
                             const std::string &objectPath,
                             const std::string &headerPath);

/// The generated header's text.
std::string aotHeader(const std::vector<FunctionSpec> &functions,
                      const AotOptions &options, const std::string &what);

} // namespace kiln

#endif // KILN_COMPILER_TARGET_AOT_AOT_H
