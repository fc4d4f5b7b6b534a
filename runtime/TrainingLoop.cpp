//===- TrainingLoop.cpp - A training loop with logs and checkpoints -------===//
//
// Implements kiln::TrainingLog and kiln::runTraining.
//
//===----------------------------------------------------------------------===//

#include "runtime/TrainingLoop.h"

#include "runtime/Communicator.h"
#include "runtime/Error.h"
#include "runtime/Safetensors.h"

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <tuple>

#include <unistd.h>

using namespace kiln;

static double secondsBetween(std::chrono::steady_clock::time_point a,
                             std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// "42s", "3m05s", "1h02m".
static std::string formatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) {
    return "?";
  }
  auto s = int64_t(std::llround(seconds));
  if (s < 60) {
    return fmt::format("{}s", s);
  }
  if (s < 3600) {
    return fmt::format("{}m{:02}s", s / 60, s % 60);
  }
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

/// "812", "12.3k", "1.20M".
static std::string formatRate(double rate) {
  if (rate >= 1e6) {
    return fmt::format("{:.2f}M", rate / 1e6);
  }
  if (rate >= 1e3) {
    return fmt::format("{:.1f}k", rate / 1e3);
  }
  return fmt::format("{:.0f}", rate);
}

static constexpr const char *kCsvHeader =
    "step,loss,lr,tokens_per_s,elapsed_s,val_loss";

/// Keeps the header and the rows of steps <= `lastStep` of an existing log.
static std::string keptRows(const std::string &path, int64_t lastStep) {
  std::ifstream in(path);
  std::string kept = std::string(kCsvHeader) + "\n", line;
  if (!in || !std::getline(in, line) || line != kCsvHeader) {
    return kept;
  }
  while (std::getline(in, line)) {
    int64_t step = 0;
    auto [ptr, ec] =
        std::from_chars(line.data(), line.data() + line.size(), step);
    if (ec == std::errc() && ptr != line.data() + line.size() && *ptr == ',' &&
        step <= lastStep) {
      kept += line + "\n";
    }
  }
  return kept;
}

TrainingLog::TrainingLog(int64_t totalSteps, int64_t tokensPerStep,
                         std::FILE *out, const std::string &csvPath,
                         int64_t printEvery, int64_t resumeFrom)
    : totalSteps_(totalSteps), tokensPerStep_(tokensPerStep),
      printEvery_(printEvery > 0 ? printEvery
                                 : std::max<int64_t>(1, totalSteps / 20)),
      firstStep_(resumeFrom), out_(out),
      terminal_(out && ::isatty(fileno(out))),
      start_(std::chrono::steady_clock::now()), lastPrint_(start_),
      lastPrintStep_(resumeFrom) {
  if (csvPath.empty()) {
    return;
  }
  std::string kept = resumeFrom > 0 ? keptRows(csvPath, resumeFrom)
                                    : std::string(kCsvHeader) + "\n";
  csvPath_ = csvPath;
  csv_.open(csvPath, std::ios::trunc);
  if (!csv_) {
    throw Error(fmt::format("{}: cannot write the training log", csvPath));
  }
  csv_ << kept;
  flushCsv();
}

void TrainingLog::flushCsv() {
  csv_.flush();
  if (!csv_) {
    std::string reason = std::strerror(errno);
    csv_.close(); // nothing more goes to a log that lost rows
    throw Error(fmt::format("{}: cannot write the training log ({}); rows "
                            "were lost, the run stops",
                            csvPath_, reason));
  }
}

void TrainingLog::finish() {
  if (pendingStep_ && csv_.is_open()) {
    csv_ << pendingRow_ << ",\n";
    pendingStep_.reset();
    flushCsv();
  }
}

TrainingLog::~TrainingLog() {
  endProgressLine();
  if (pendingStep_ && csv_.is_open()) {
    csv_ << pendingRow_ << ",\n";
  }
}

double TrainingLog::elapsed() const {
  return secondsBetween(start_, std::chrono::steady_clock::now());
}

void TrainingLog::endProgressLine() {
  if (progressOpen_ && out_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
  progressOpen_ = false;
}

void TrainingLog::step(int64_t step, double loss, double lr) {
  auto now = std::chrono::steady_clock::now();
  double seconds = secondsBetween(start_, now);
  int64_t done = step - firstStep_;
  double tokensPerSecond =
      seconds > 0 ? double(done * tokensPerStep_) / seconds : 0.0;
  if (csv_.is_open()) {
    if (pendingStep_) {
      csv_ << pendingRow_ << ",\n";
      flushCsv();
    }
    pendingStep_ = step;
    pendingRow_ = fmt::format("{},{:.6g},{:.6g},{:.1f},{:.3f}", step, loss, lr,
                              tokensPerSecond, seconds);
  }
  lossSum_ += loss;
  ++lossCount_;
  bool last = step == totalSteps_;
  bool due = terminal_ ? secondsBetween(lastPrint_, now) >= 0.25
                       : (step - lastPrintStep_) >= printEvery_;
  if (!out_ || !(due || last || step == firstStep_ + 1)) {
    return;
  }
  // The first step can be slow (memory first touched): the ETA uses the
  // steps after it.
  if (done == 1) {
    afterFirst_ = now;
  }
  double eta = done > 1 ? secondsBetween(afterFirst_, now) / double(done - 1) *
                              double(totalSteps_ - step)
                        : NAN;
  std::string line =
      fmt::format("step {:>{}}/{} | loss {:.4f} | lr {:.2e}", step,
                  std::to_string(totalSteps_).size(), totalSteps_,
                  lossSum_ / double(lossCount_), lr);
  if (tokensPerStep_ > 0) {
    line += fmt::format(" | {} tok/s", formatRate(tokensPerSecond));
  }
  line += fmt::format(" | {} | ETA {}", formatDuration(seconds),
                      formatDuration(eta));
  if (terminal_) {
    fmt::print(out_, "\r{}\x1b[K", line);
    progressOpen_ = true;
  } else {
    fmt::print(out_, "{}\n", line);
  }
  std::fflush(out_);
  lastPrint_ = now;
  lastPrintStep_ = step;
  lossSum_ = 0.0;
  lossCount_ = 0;
}

void TrainingLog::evaluation(int64_t step, double valLoss) {
  if (csv_.is_open()) {
    if (pendingStep_ && *pendingStep_ == step) {
      csv_ << pendingRow_ << fmt::format(",{:.6g}\n", valLoss);
      pendingStep_.reset();
    } else {
      csv_ << fmt::format("{},,,,{:.3f},{:.6g}\n", step, elapsed(), valLoss);
    }
    flushCsv();
  }
  note(fmt::format("step {}: validation loss {:.4f}", step, valLoss));
}

void TrainingLog::note(const std::string &line) {
  endProgressLine();
  if (out_) {
    fmt::print(out_, "{}\n", line);
    std::fflush(out_);
  }
}

//===----------------------------------------------------------------------===//
// runTraining
//===----------------------------------------------------------------------===//

static void checkOptions(const TrainingOptions &options,
                         const TrainingHooks &hooks, bool writer) {
  auto bad = [](const std::string &why) {
    return Error("kiln: runTraining: " + why);
  };
  if (options.steps <= 0) {
    throw bad(
        fmt::format("the number of steps must be > 0, got {}", options.steps));
  }
  if (options.evalEvery < 0 || options.checkpointEvery < 0 ||
      options.printEvery < 0 || options.tokensPerStep < 0 ||
      options.driftCheckEvery < 0) {
    throw bad("evalEvery, checkpointEvery, printEvery, tokensPerStep and "
              "driftCheckEvery must be >= 0");
  }
  if (!hooks.step) {
    throw bad("hooks.step (one training step) is required");
  }
  if (!options.checkpointPath.empty() &&
      (!hooks.parameters || !hooks.optimizerState)) {
    throw bad("checkpoints need hooks.parameters and hooks.optimizerState");
  }
  if (options.resume && options.checkpointPath.empty()) {
    throw bad("resume needs a checkpointPath");
  }
  if (writer) {
    std::vector<NamedPath> files = options.inputs;
    files.push_back({"the training log", options.csvPath});
    if (!options.checkpointPath.empty()) {
      files.push_back({"the checkpoint", options.checkpointPath});
      files.push_back({"the checkpoint's temporary file",
                       checkpointTemporary(options.checkpointPath)});
    }
    checkDistinctFiles(files);
  }
  if (!options.checkpointPath.empty() && writer) {
    checkCheckpointWritable(options.checkpointPath);
  }
  if (options.resume && !hooks.restoreStep) {
    throw bad("resume needs hooks.restoreStep (to set the optimizer's step "
              "count)");
  }
  for (const auto &[name, rng] : hooks.rngs) {
    if (!rng) {
      throw bad(fmt::format("the generator '{}' is null", name));
    }
  }
  if (hooks.communicator && hooks.communicator->size() > 1 &&
      (!hooks.parameters || !hooks.optimizerState)) {
    throw bad("a data-parallel run needs hooks.parameters and "
              "hooks.optimizerState (to check that the processes agree)");
  }
}

/// The metadata key of the number of processes that wrote a checkpoint.
static constexpr const char *kWorldSizeKey = "world_size";

static void saveRun(const TrainingOptions &options, const TrainingHooks &hooks,
                    int64_t step, int world) {
  TrainingState state;
  state.step = step;
  for (const auto &[name, rng] : hooks.rngs) {
    state.rngs[name] = rng->state();
  }
  state.info = hooks.info;
  state.info["schedule"] = options.schedule.describe();
  state.info["steps"] = std::to_string(options.steps);
  state.info[kWorldSizeKey] = std::to_string(world);
  if (hooks.toHost) {
    hooks.toHost();
  }
  saveCheckpoint(options.checkpointPath, *hooks.parameters,
                 *hooks.optimizerState, state);
}

/// Loads the checkpoint (on rank 0 of a data-parallel run) and returns its
/// state.
static TrainingState loadRun(const TrainingOptions &options,
                             const TrainingHooks &hooks) {
  TrainingState state =
      loadCheckpoint(options.checkpointPath, *hooks.parameters,
                     hooks.optimizerState, &hooks.info);
  for (const auto &[name, rng] : hooks.rngs) {
    if (!state.rngs.count(name)) {
      throw Error(fmt::format("{}: the checkpoint has no state for the random "
                              "generator '{}'",
                              options.checkpointPath, name));
    }
  }
  return state;
}

/// Resumes every process from the checkpoint rank 0 reads: the parameters,
/// the optimizer state, the step and the generators. Returns the step, and
/// the world size the checkpoint was written with (1 when it says none).
static std::pair<int64_t, int64_t> resumeRun(const TrainingOptions &options,
                                             const TrainingHooks &hooks,
                                             Communicator &communicator) {
  if (hooks.toHost) {
    hooks.toHost();
  }
  TrainingState state;
  int64_t writtenBy = 1;
  if (communicator.rank() == 0) {
    state = loadRun(options, hooks);
    auto it = state.info.find(kWorldSizeKey);
    if (it != state.info.end()) {
      auto [ptr, ec] = std::from_chars(
          it->second.data(), it->second.data() + it->second.size(), writtenBy);
      if (ec != std::errc() || ptr != it->second.data() + it->second.size() ||
          writtenBy < 1) {
        throw Error(fmt::format("{}: the checkpoint's {} '{}' is not a "
                                "positive number",
                                options.checkpointPath, kWorldSizeKey,
                                it->second));
      }
    }
  }
  if (communicator.size() > 1) {
    communicator.broadcast(&state.step, sizeof state.step, 0);
    communicator.broadcast(&writtenBy, sizeof writtenBy, 0);
    for (const auto &[name, rng] : hooks.rngs) {
      uint64_t value = state.rngs[name];
      communicator.broadcast(&value, sizeof value, 0);
      state.rngs[name] = value;
    }
    broadcastStore(communicator, *hooks.parameters);
    broadcastStore(communicator, *hooks.optimizerState);
  }
  for (const auto &[name, rng] : hooks.rngs) {
    rng->setState(state.rngs.at(name));
  }
  hooks.restoreStep(state.step);
  return {state.step, writtenBy};
}

/// Stops every process, naming the ranks, when their parameters and
/// optimizer state are not the same.
static void checkDrift(const TrainingHooks &hooks, Communicator &communicator,
                       int64_t step) {
  if (hooks.toHost) {
    hooks.toHost();
  }
  uint64_t hash =
      hashStore(*hooks.parameters) * 31 + hashStore(*hooks.optimizerState);
  std::vector<uint64_t> hashes = communicator.allGather(hash);
  std::string differ;
  for (size_t r = 1; r < hashes.size(); ++r) {
    if (hashes[r] != hashes[0]) {
      differ += (differ.empty() ? "" : ", ") + std::to_string(r);
    }
  }
  if (!differ.empty()) {
    throw Error(fmt::format(
        "kiln: after step {} the parameters of rank(s) {} differ from rank "
        "0's: the processes drifted apart (a non-deterministic step, or "
        "processes that did not all apply the same update)",
        step, differ));
  }
}

static TrainingResult train(const TrainingOptions &options,
                            const TrainingHooks &hooks,
                            Communicator &communicator) {
  int rank = communicator.rank(), world = communicator.size();
  bool writer = rank == 0;
  checkOptions(options, hooks, writer);
  TrainingResult result;
  int resume = writer && options.resume &&
               std::filesystem::exists(options.checkpointPath);
  if (world > 1) {
    communicator.broadcast(&resume, sizeof resume, 0);
  }
  int64_t writtenBy = world;
  if (resume) {
    std::tie(result.resumedFrom, writtenBy) =
        resumeRun(options, hooks, communicator);
  }
  TrainingLog log(options.steps, options.tokensPerStep,
                  writer ? options.out : nullptr,
                  writer ? options.csvPath : std::string(), options.printEvery,
                  result.resumedFrom);
  if (result.resumedFrom > 0) {
    log.note(fmt::format("resumed from {} at step {}", options.checkpointPath,
                         result.resumedFrom));
  }
  if (writtenBy != world) {
    log.note(fmt::format(
        "the checkpoint was written by {} process(es), this run has {}: the "
        "global batches are the same, but the steps from here draw other "
        "dropout masks and sum in another order than an uninterrupted run",
        writtenBy, world));
  }
  if (result.resumedFrom >= options.steps) {
    log.note(fmt::format("the checkpoint is at step {}: nothing left of {} "
                         "steps",
                         result.resumedFrom, options.steps));
    return result;
  }
  if (world > 1) {
    log.note(fmt::format("data-parallel: {} processes, each on its share of "
                         "every batch",
                         world));
  }
  for (int64_t step = result.resumedFrom + 1; step <= options.steps; ++step) {
    double lr = options.schedule(step);
    float loss = hooks.step(step, float(lr));
    result.losses.push_back(loss);
    log.step(step, loss, lr);
    bool last = step == options.steps;
    if (world > 1 && options.driftCheckEvery > 0 &&
        (last || step % options.driftCheckEvery == 0)) {
      checkDrift(hooks, communicator, step);
    }
    if (hooks.evaluate &&
        (last || (options.evalEvery > 0 && step % options.evalEvery == 0))) {
      // Each process evaluates (its share); the run reports the mean,
      // each process's loss weighted by the tokens it stands for.
      Evaluation e = hooks.evaluate();
      if (!std::isfinite(e.weight) || e.weight < 0) {
        throw Error(fmt::format("kiln: runTraining: the evaluation's weight "
                                "must be finite and >= 0, got {}",
                                e.weight));
      }
      double value = e.loss;
      if (world > 1) {
        float sums[3] = {float(e.loss * e.weight), float(e.weight),
                         float(e.loss)};
        communicator.allReduceSum(sums, 3);
        // No tokens anywhere: the plain mean of the processes' losses.
        value = sums[1] > 0 ? double(sums[0]) / double(sums[1])
                            : double(sums[2]) / double(world);
      }
      result.validationLoss = value;
      log.evaluation(step, *result.validationLoss);
    }
    if (!options.checkpointPath.empty() &&
        (last || (options.checkpointEvery > 0 &&
                  step % options.checkpointEvery == 0))) {
      if (writer) {
        saveRun(options, hooks, step, world);
      }
      // No process runs ahead of a checkpoint being written.
      communicator.barrier();
    }
  }
  log.finish();
  result.seconds = log.elapsed();
  return result;
}

TrainingResult kiln::runTraining(const TrainingOptions &options,
                                 const TrainingHooks &hooks) {
  std::shared_ptr<Communicator> communicator =
      hooks.communicator ? hooks.communicator : singleProcess();
  if (communicator->size() == 1) {
    return train(options, hooks, *communicator);
  }
  try {
    return train(options, hooks, *communicator);
  } catch (const std::exception &e) {
    // The other processes may be waiting for this one in a collective: end
    // them all (the last checkpoint stays as it was written).
    communicator->abort(fmt::format("error: rank {} of {}: {}",
                                    communicator->rank(), communicator->size(),
                                    e.what()),
                        1);
  } catch (...) {
    communicator->abort(fmt::format("error: rank {} of {}: an unknown "
                                    "exception",
                                    communicator->rank(), communicator->size()),
                        1);
  }
}
