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
#include <chrono>
#include <cmath>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

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
  /// `timeout`: the seconds a collective may wait for the other processes.
  MpiCommunicator(bool ownsMpi, double timeout)
      : ownsMpi_(ownsMpi), timeout_(timeout) {
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
      MPI_Request request;
      check(MPI_Iallreduce(MPI_IN_PLACE, data + done, part, MPI_FLOAT,
                           MPI_SUM, comm_, &request),
            "MPI_Iallreduce");
      wait(request, "an all-reduce");
      done += size_t(part);
    }
  }

  void broadcast(void *data, size_t bytes, int root) override {
    auto *p = static_cast<char *>(data);
    for (size_t done = 0; done < bytes;) {
      int part = int(std::min<size_t>(bytes - done, INT_MAX));
      MPI_Request request;
      check(MPI_Ibcast(p + done, part, MPI_BYTE, root, comm_, &request),
            "MPI_Ibcast");
      wait(request, "a broadcast");
      done += size_t(part);
    }
  }

  std::vector<uint64_t> allGather(uint64_t value) override {
    std::vector<uint64_t> values(size_t(size_), 0);
    MPI_Request request;
    check(MPI_Iallgather(&value, 1, MPI_UINT64_T, values.data(), 1,
                         MPI_UINT64_T, comm_, &request),
          "MPI_Iallgather");
    wait(request, "an all-gather");
    return values;
  }

  void barrier() override {
    MPI_Request request;
    check(MPI_Ibarrier(comm_, &request), "MPI_Ibarrier");
    wait(request, "a barrier");
  }

  [[noreturn]] void abort(const std::string &message, int code) override {
    fmt::print(stderr, "{}\n", message);
    std::fflush(stderr);
    std::fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code); // MPI_Abort does not return; should it, end this rank
  }

private:
  /// Waits for `request`, ending the job when the other processes have not
  /// joined within the deadline (a process stopped, or on a hung file
  /// system: they would wait forever). Polls, sleeping a little between
  /// tests once the wait is longer than a fast collective's.
  void wait(MPI_Request &request, const char *what) {
    using Clock = std::chrono::steady_clock;
    auto start = Clock::now();
    auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(timeout_));
    for (int polls = 0;; ++polls) {
      int done = 0;
      check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) {
        return;
      }
      if (polls >= 1000) {
        if (Clock::now() >= deadline) {
          abort(fmt::format("error: rank {} of {}: {} waited {} s for the "
                            "other processes (one stopped, or hangs): "
                            "ending the job (KILN_COLLECTIVE_TIMEOUT sets "
                            "the deadline in seconds)",
                            rank_, size_, what, timeout_),
                1);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

  bool ownsMpi_;
  double timeout_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

} // namespace

double collectiveTimeout() {
  const char *text = std::getenv("KILN_COLLECTIVE_TIMEOUT");
  if (!text) {
    return kDefaultCollectiveTimeout;
  }
  char *end = nullptr;
  double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(seconds) ||
      seconds <= 0 || seconds > 1e6) {
    throw Error(fmt::format("kiln: KILN_COLLECTIVE_TIMEOUT must be a number "
                            "of seconds in (0, 1000000], got '{}'",
                            text));
  }
  return seconds;
}

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
  auto communicator =
      std::make_shared<MpiCommunicator>(!initialized, collectiveTimeout());
  current = communicator;
  return communicator;
}

} // namespace kiln::mpi
