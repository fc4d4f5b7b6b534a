//===- TrainingLoop.h - A training loop with logs and checkpoints -*- C++
//-*-===//
//
// runTraining() drives any step function (a JIT-compiled or an ahead-of-time
// training step) for a number of steps under a learning-rate schedule, with
// periodic evaluation, a progress line (step, loss, learning rate, tokens/s,
// ETA), a CSV log, atomic checkpoints and exact resume. TrainingLog is the
// progress and CSV part on its own, for loops written by hand.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TRAININGLOOP_H
#define KILN_RUNTIME_TRAININGLOOP_H

#include "runtime/Checkpoint.h"
#include "runtime/Files.h"
#include "runtime/Init.h"
#include "runtime/Schedule.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

class Communicator;

/// The progress line and the CSV log of a run.
class TrainingLog {
public:
  /// Progress goes to `out` (one line rewritten in place on a terminal, a
  /// line every `printEvery` steps otherwise; 0 picks about 20 lines per run);
  /// when `csvPath` is set every step is a CSV row (step, loss, lr,
  /// tokens_per_s, elapsed_s, val_loss). With `resumeFrom` > 0 the rows of
  /// later steps of an earlier run are dropped and the log continues;
  /// otherwise the file is replaced.
  TrainingLog(int64_t totalSteps, int64_t tokensPerStep, std::FILE *out,
              const std::string &csvPath = "", int64_t printEvery = 0,
              int64_t resumeFrom = 0);
  ~TrainingLog();

  /// Records a finished step.
  void step(int64_t step, double loss, double lr);
  /// Records an evaluation after `step` (printed on a line of its own).
  void evaluation(int64_t step, double valLoss);
  /// Prints a line of its own (ending the progress line first).
  void note(const std::string &line);
  /// Seconds since the log was created.
  double elapsed() const;
  /// Writes the last row and checks that the whole log reached the file.
  void finish();

private:
  void endProgressLine();
  /// Flushes the CSV log; throws kiln::Error when it did not reach the file
  /// (a full disk), naming it.
  void flushCsv();

  int64_t totalSteps_, tokensPerStep_, printEvery_, firstStep_;
  std::FILE *out_;
  bool terminal_;
  bool progressOpen_ = false;
  std::ofstream csv_;
  std::chrono::steady_clock::time_point start_, lastPrint_, afterFirst_;
  int64_t lastPrintStep_;
  double lossSum_ = 0.0;
  int64_t lossCount_ = 0;
  std::optional<int64_t> pendingStep_;
  std::string pendingRow_;
  std::string csvPath_;
};

struct TrainingOptions {
  /// Total optimizer steps of the run (> 0).
  int64_t steps = 0;
  LrSchedule schedule = LrSchedule::constant(1e-3);
  /// Tokens a step trains on (for tokens/s; 0 hides it).
  int64_t tokensPerStep = 0;
  /// Evaluate every this many steps (0: only after the last step).
  int64_t evalEvery = 0;
  /// Where checkpoints go ("" : none); written every `checkpointEvery` steps
  /// (0: only after the last step) and after the last step.
  std::string checkpointPath;
  int64_t checkpointEvery = 0;
  /// Continue from `checkpointPath` when that file exists.
  bool resume = false;
  /// The CSV log ("" : none).
  std::string csvPath;
  /// The files the run reads (a corpus), by the options that name them:
  /// no output (the log, the checkpoint, its temporary file) may be one of
  /// them, nor two outputs one file (runTraining refuses before the first
  /// step).
  std::vector<NamedPath> inputs;
  /// Progress lines when not on a terminal (0: about 20 per run).
  int64_t printEvery = 0;
  std::FILE *out = stdout;
  /// Data-parallel runs: every this many steps (and after the last) the
  /// processes compare a hash of their parameters and optimizer state and
  /// stop with an error naming the ranks that drifted apart (0: never).
  int64_t driftCheckEvery = 100;
};

/// A validation loss and what it stands for: in a data-parallel run the
/// processes' losses are averaged weighted by it (the tokens each process
/// evaluated; a loss alone weighs 1).
struct Evaluation {
  Evaluation(double loss, double weight = 1.0) : loss(loss), weight(weight) {}
  double loss;
  double weight; ///< finite, >= 0
};

/// What runTraining() drives and what its checkpoints hold.
struct TrainingHooks {
  /// Trains step `step` (from 1) with learning rate `lr`; returns the loss.
  /// Throwing (a non-finite loss) ends the run; the last checkpoint stays.
  std::function<float(int64_t step, float lr)> step;
  /// The validation loss (optional), with its weight (the tokens it is a
  /// mean over) when the processes' shares differ.
  std::function<Evaluation()> evaluate;
  /// Saved in checkpoints and restored on resume.
  ParameterStore *parameters = nullptr;
  ParameterStore *optimizerState = nullptr;
  /// Called (when set) before the loop reads or writes *parameters and
  /// *optimizerState (a checkpoint, a resume, a drift check): a trainer
  /// whose state lives on the GPU copies it into those stores, and back to
  /// the GPU before its next step.
  std::function<void()> toHost;
  std::map<std::string, Rng *> rngs;
  /// Told the step a resumed run continues from (the optimizer's count).
  std::function<void(int64_t step)> restoreStep;
  /// Stored in the checkpoints' metadata. On resume, a checkpoint that
  /// records one of these keys with another value is refused (the model's
  /// configuration, its vocabulary: same tensor shapes, another model).
  std::map<std::string, std::string> info;
  /// The processes of a data-parallel run (Trainer::hooks() sets it; null:
  /// one process). Then rank 0 alone prints, logs and writes checkpoints
  /// (behind a barrier), a resumed run loads on rank 0 and copies the
  /// parameters, state, step and generators to the others, evaluations are
  /// averaged over the processes, and a failure on any process ends the
  /// whole job (Communicator::abort) naming its rank.
  std::shared_ptr<Communicator> communicator;
};

struct TrainingResult {
  /// The step the run started after (0, or the checkpoint's on resume).
  int64_t resumedFrom = 0;
  /// The loss of every step this call ran, in order.
  std::vector<float> losses;
  /// The last evaluation's loss, if any.
  std::optional<double> validationLoss;
  double seconds = 0.0;
};

/// Runs steps resumedFrom+1 .. options.steps. Throws kiln::Error for bad
/// options or hooks, an unusable checkpoint, a CSV log that cannot be
/// written (a full disk), and what hooks.step throws.
TrainingResult runTraining(const TrainingOptions &options,
                           const TrainingHooks &hooks);

} // namespace kiln

#endif // KILN_RUNTIME_TRAININGLOOP_H
