// Sums each rank's number + 1 over the job (test/Install/mpi-package.mlir).
#include "runtime/MPI/MpiCommunicator.h"

#include <cstdio>

int main(int argc, char **argv) {
  std::shared_ptr<kiln::Communicator> world = kiln::mpi::world(&argc, &argv);
  float x = float(world->rank() + 1);
  world->allReduceSum(&x, 1);
  std::printf("rank %d of %d: sum %g\n", world->rank(), world->size(), x);
  return 0;
}
