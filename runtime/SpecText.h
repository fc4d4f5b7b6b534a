//===- SpecText.h - Function and parameter specs as text ---------*- C++ -*-===//
//
// The line-oriented text forms of FunctionSpec and ParamSpec
// (runtime/Function.h) that ahead-of-time objects embed: written by
// kiln-compile, read back by the runtime. Internal to Kiln (not installed).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SPECTEXT_H
#define KILN_RUNTIME_SPECTEXT_H

#include "runtime/Function.h"

#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// The text form of `spec`. Throws kiln::Error for a name that is not one
/// token (empty or with white space).
std::string serialize(const FunctionSpec &spec);
/// Reads a spec written by serialize(), treating it as untrusted: throws
/// kiln::Error naming the line for anything malformed.
FunctionSpec parseFunctionSpec(std::string_view text);
std::string serialize(const std::vector<ParamSpec> &params);
std::vector<ParamSpec> parseParamSpecs(std::string_view text);

} // namespace kiln

#endif // KILN_RUNTIME_SPECTEXT_H
