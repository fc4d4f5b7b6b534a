//===- Aot.h - Load ahead-of-time compiled models ----------------*- C++
//-*-===//
//
// An object that kiln-compile made holds a `kiln_model` (runtime/AotAbi.h);
// AotModule presents it as an Executable, so that Trainer, generateGpt and
// the training loop run compiled-ahead models exactly as JIT-compiled ones.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_AOT_H
#define KILN_RUNTIME_AOT_H

#include "runtime/AotAbi.h"
#include "runtime/Function.h"

namespace kiln {

class AotModule : public Executable {
public:
  /// Reads the model's functions and parameters. Throws kiln::Error when
  /// the embedded specs are malformed.
  explicit AotModule(const kiln_model &model);
};

} // namespace kiln

#endif // KILN_RUNTIME_AOT_H
