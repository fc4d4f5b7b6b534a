//===- Communicator.h - The processes of a data-parallel run ----*- C++ -*-===//
//
// What data-parallel training needs from the processes it runs on: ranks, a
// sum of gradients over every process, broadcasts, a gather for the drift
// check, a barrier and a way to end the whole job. The core runtime knows
// only this interface and a world of one process; the Open MPI
// implementation lives in its own optional library (runtime/MPI, target
// Kiln::MPI), so programs that train in one process link nothing new.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_COMMUNICATOR_H
#define KILN_RUNTIME_COMMUNICATOR_H

#include "runtime/Function.h"
#include "runtime/ParameterStore.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

class Communicator {
public:
  virtual ~Communicator();

  /// This process's rank, in [0, size()).
  virtual int rank() const = 0;
  /// The number of processes.
  virtual int size() const = 0;
  /// Replaces `data[0, count)` on every process by its sum over the
  /// processes. Throws kiln::Error when the transport fails.
  virtual void allReduceSum(float *data, size_t count) = 0;
  /// Copies `bytes` bytes of `root`'s `data` into every other process's.
  virtual void broadcast(void *data, size_t bytes, int root) = 0;
  /// Every process's `value`, in rank order.
  virtual std::vector<uint64_t> allGather(uint64_t value) = 0;
  /// Returns once every process has called it.
  virtual void barrier() = 0;
  /// Prints `message` to stderr and ends every process of the job with exit
  /// status `code` (a failure on one process must not leave the others
  /// waiting in a collective).
  [[noreturn]] virtual void abort(const std::string &message, int code) = 0;
};

/// A world of one process: reductions and broadcasts leave data as it is;
/// abort() prints and exits.
std::shared_ptr<Communicator> singleProcess();

/// The share of `rank` (of `size` processes) of a global batch: every tensor
/// of `inputs` split along its first dimension into `size` contiguous parts
/// whose sizes differ by at most one (rank r gets rows [r·n/size,
/// (r+1)·n/size)); scalars are kept. Throws kiln::Error when the tensors'
/// first dimensions differ, or there are fewer rows than processes.
std::map<std::string, Arg> shardBatch(const std::map<std::string, Arg> &inputs,
                                      int rank, int size);

/// Copies every tensor of `store` from `root` to the other processes. First
/// the processes compare the layouts of their stores (names, dtypes and
/// shapes, hashStoreLayout): when any differs from root's, every process
/// throws kiln::Error naming the processes that differ and nothing is
/// copied (models built from different data, one more character in one
/// host's corpus, had corrupted the heap in the copy).
void broadcastStore(Communicator &communicator, ParameterStore &store,
                    int root = 0);

/// A 64-bit hash of the names, dtypes and shapes of the tensors of `store`.
uint64_t hashStoreLayout(const ParameterStore &store);

/// A 64-bit hash of the names and the bytes of every tensor of `store`:
/// equal stores give equal hashes on any machine.
uint64_t hashStore(const ParameterStore &store);

} // namespace kiln

#endif // KILN_RUNTIME_COMMUNICATOR_H
