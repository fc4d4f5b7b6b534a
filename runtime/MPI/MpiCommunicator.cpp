//===- MpiCommunicator.cpp - Data-parallel runs on Open MPI ---------------===//
//
// Implements kiln::mpi::world(). Every MPI call returns its error (the
// communicator's handler is MPI_ERRORS_RETURN) and a failure becomes a
// kiln::Error naming the call; messages above INT_MAX elements go in parts.
//
//===----------------------------------------------------------------------===//

#include "runtime/MPI/MpiCommunicator.h"

#include "runtime/Error.h"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace kiln::mpi {

namespace {

void check(int code, const char *call) {
  if (code == MPI_SUCCESS) {
    return;
  }
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
    length = 0;
  }
  throw Error(fmt::format("kiln: {} failed: {}", call,
                          std::string(text, size_t(length))));
}

class MpiCommunicator final : public Communicator {
public:
  /// `ownsMpi`: MPI was initialized for it, and is finalized with it.
  explicit MpiCommunicator(bool ownsMpi) : ownsMpi_(ownsMpi) {
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN),
          "MPI_Comm_set_errhandler");
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }
  ~MpiCommunicator() override {
    MPI_Comm_free(&comm_);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (ownsMpi_ && !finalized) {
      MPI_Finalize();
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allReduceSum(float *data, size_t count) override {
    for (size_t done = 0; done < count;) {
      int part = int(std::min<size_t>(count - done, INT_MAX));
      check(MPI_Allreduce(MPI_IN_PLACE, data + done, part, MPI_FLOAT, MPI_SUM,
                          comm_),
            "MPI_Allreduce");
      done += size_t(part);
    }
  }

  void broadcast(void *data, size_t bytes, int root) override {
    auto *p = static_cast<char *>(data);
    for (size_t done = 0; done < bytes;) {
      int part = int(std::min<size_t>(bytes - done, INT_MAX));
      check(MPI_Bcast(p + done, part, MPI_BYTE, root, comm_), "MPI_Bcast");
      done += size_t(part);
    }
  }

  std::vector<uint64_t> allGather(uint64_t value) override {
    std::vector<uint64_t> values(size_t(size_), 0);
    check(MPI_Allgather(&value, 1, MPI_UINT64_T, values.data(), 1, MPI_UINT64_T,
                        comm_),
          "MPI_Allgather");
    return values;
  }

  void barrier() override { check(MPI_Barrier(comm_), "MPI_Barrier"); }

  [[noreturn]] void abort(const std::string &message, int code) override {
    fmt::print(stderr, "{}\n", message);
    std::fflush(stderr);
    std::fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code); // MPI_Abort does not return; should it, end this rank
  }

private:
  bool ownsMpi_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

} // namespace

bool launchedByMpi() {
  for (const char *variable :
       {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (std::getenv(variable)) {
      return true;
    }
  }
  return false;
}

std::shared_ptr<Communicator> world(int *argc, char ***argv) {
  static std::mutex mutex;
  static std::weak_ptr<Communicator> current;
  std::lock_guard<std::mutex> lock(mutex);
  if (!launchedByMpi()) {
    return singleProcess();
  }
  if (std::shared_ptr<Communicator> live = current.lock()) {
    return live;
  }
  int initialized = 0, finalized = 0;
  check(MPI_Initialized(&initialized), "MPI_Initialized");
  check(MPI_Finalized(&finalized), "MPI_Finalized");
  if (finalized) {
    throw Error("kiln: MPI was finalized already; a process can start it "
                "only once");
  }
  if (!initialized) {
    // Only the thread that initialized MPI calls it (the compiled code's
    // threads never do).
    int provided = 0;
    check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided),
          "MPI_Init_thread");
    if (provided < MPI_THREAD_FUNNELED) {
      MPI_Finalize();
      throw Error("kiln: this MPI library cannot be used from a threaded "
                  "program (MPI_THREAD_FUNNELED not provided)");
    }
  }
  auto communicator = std::make_shared<MpiCommunicator>(!initialized);
  current = communicator;
  return communicator;
}

} // namespace kiln::mpi
