//===- MpiCommunicator.h - Data-parallel runs on Open MPI -------*- C++ -*-===//
//
// The Communicator of a job started by an MPI launcher (`mpirun -np N`, on
// one machine or several with -H or a hostfile): Open MPI brings the
// rendezvous, the shared-memory and TCP transports and the ring all-reduce.
// Library Kiln::MPI; the core runtime does not depend on it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_MPI_MPICOMMUNICATOR_H
#define KILN_RUNTIME_MPI_MPICOMMUNICATOR_H

#include "runtime/Communicator.h"

#include <memory>

namespace kiln::mpi {

/// The seconds a collective (an all-reduce, a broadcast, a barrier) waits
/// for the other processes before it ends the job with a message naming
/// this rank: KILN_COLLECTIVE_TIMEOUT when set (a positive number of
/// seconds; anything else is a kiln::Error), else this default, far above
/// any step's imbalance.
inline constexpr double kDefaultCollectiveTimeout = 600;
double collectiveTimeout();

/// Whether this process was started by an MPI launcher (Open MPI's mpirun,
/// or a PMI/PMIx launcher such as srun).
bool launchedByMpi();

/// The processes of this job: MPI_COMM_WORLD when started by a launcher
/// (MPI is initialized on the first call unless the program did, and then
/// finalized when the last reference goes: once per process), else a world
/// of one without initializing MPI, so a program run on its own needs no
/// mpirun. Throws kiln::Error when MPI cannot be initialized.
///
/// A process that fails on its own must end the job with
/// Communicator::abort() (runTraining does for what fails in it): returning
/// normally, it would wait in MPI_Finalize for processes that wait for it.
std::shared_ptr<Communicator> world(int *argc, char ***argv);

} // namespace kiln::mpi

#endif // KILN_RUNTIME_MPI_MPICOMMUNICATOR_H
