//===- AotMain.h - The main() of the ahead-of-time Shakespeare binaries ---===//
//
// kiln-shakespeare-train and kiln-shakespeare-generate differ only in the
// options they take: both run the compiled model (shakespeare.h) through the
// Shakespeare example's training and sampling code.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_EXAMPLES_SHAKESPEARE_AOT_AOTMAIN_H
#define KILN_EXAMPLES_SHAKESPEARE_AOT_AOTMAIN_H

#include "../shakespeare/Shakespeare.h"

#include <kiln/runtime.h>
#include "shakespeare.h"

inline int aotMain(int argc, char **argv, const char *usage,
                   kiln::shakespeare::Program program) {
  try {
    using namespace kiln;
    shakespeare::Options o =
        shakespeare::parseOptions(argc, argv, usage, program);
    CharDataset data = shakespeare::loadCorpus(o);
    shakespeare::run(o, std::make_shared<AotModule>(shakespeare_model), data);
    return 0;
  } catch (const std::exception &e) { // kiln::Error, or bad_alloc and the like
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

#endif // KILN_EXAMPLES_SHAKESPEARE_AOT_AOTMAIN_H
