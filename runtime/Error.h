//===- Error.h - Kiln's user-facing error type -------------------*- C++
//-*-===//
//
// Every error Kiln reports to a user (bad shapes in a model, malformed files,
// out-of-range inputs) is a kiln::Error with a message that names the values.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ERROR_H
#define KILN_RUNTIME_ERROR_H

#include <stdexcept>
#include <string>

namespace kiln {

/// An error caused by the user's model, inputs or files (never a Kiln bug).
class Error : public std::runtime_error {
public:
  explicit Error(const std::string &message) : std::runtime_error(message) {}
};

} // namespace kiln

#endif // KILN_RUNTIME_ERROR_H
