//===- World.h - The processes an example trains on -------------*- C++ -*-===//
//
// The training examples run alone or, unchanged, under `mpirun -np N` for
// data-parallel training. exampleWorld() gives the job's processes (a world
// of one without a launcher, or in a build without Open MPI); processes
// other than rank 0 print nothing to stdout (errors still go to stderr).
// failExample() reports an error and ends the whole job (a failure on one
// process must not leave the others waiting).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_EXAMPLES_COMMON_WORLD_H
#define KILN_EXAMPLES_COMMON_WORLD_H

#include <kiln/runtime.h>

#ifdef KILN_WITH_MPI
#include "runtime/MPI/MpiCommunicator.h"
#endif

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>

namespace kiln::examples {

/// The communicator failExample() ends.
inline std::shared_ptr<Communicator> &exampleWorldSlot() {
  static std::shared_ptr<Communicator> world;
  return world;
}

inline std::shared_ptr<Communicator> exampleWorld(int *argc, char ***argv) {
#ifdef KILN_WITH_MPI
  std::shared_ptr<Communicator> world = mpi::world(argc, argv);
#else
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK")) {
    throw Error("this build of Kiln has no MPI (install libopenmpi-dev and "
                "rebuild) and cannot train under mpirun");
  }
  std::shared_ptr<Communicator> world = singleProcess();
#endif
  if (world->rank() != 0 && !std::freopen("/dev/null", "w", stdout)) {
    throw Error("cannot silence the output of rank " +
                std::to_string(world->rank()));
  }
  exampleWorldSlot() = world;
  return world;
}

/// Prints `e` and returns the exit status; in a data-parallel run, ends
/// every process of the job instead.
inline int failExample(const std::exception &e) {
  std::shared_ptr<Communicator> world = exampleWorldSlot();
  if (world && world->size() > 1) {
    world->abort(fmt::format("error: rank {} of {}: {}", world->rank(),
                             world->size(), e.what()),
                 1);
  }
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}

} // namespace kiln::examples

#endif // KILN_EXAMPLES_COMMON_WORLD_H
