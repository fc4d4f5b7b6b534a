//===- ArgumentChecks.h - Checks of a call's arguments ----------*- C++ -*-===//
//
// The checks of the arguments of a call of a compiled function
// (runtime/Function.h), run before anything is called or written. Internal
// to Kiln (not installed).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ARGUMENTCHECKS_H
#define KILN_RUNTIME_ARGUMENTCHECKS_H

#include "runtime/Function.h"

#include <cstddef>
#include <string>
#include <vector>

namespace kiln {

/// "argument #<index> '<name>' of '<function>'", for messages.
std::string describeArg(const FunctionSpec &spec, size_t index);
/// Checks that `args` fit `spec`: throws kiln::Error saying which argument
/// does not, and why.
void checkArguments(const FunctionSpec &spec, const std::vector<Arg> &args);

} // namespace kiln

#endif // KILN_RUNTIME_ARGUMENTCHECKS_H
