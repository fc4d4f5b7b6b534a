//===- TrainingTest.cpp - Schedules, checkpoints and the training loop ----===//
//
// The loop is driven here by a hand-written step (SGD on a least-squares
// problem held in a ParameterStore) so that these tests need no compiler;
// the compiled training steps are tested with it in Unit/Models.
//
//===----------------------------------------------------------------------===//

#include "runtime/Checkpoint.h"
#include "runtime/Safetensors.h"
#include "runtime/TrainingLoop.h"

#include "test/Unit/Runtime/ExpectError.h"
#include "test/Unit/Runtime/TempDirTest.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include <csignal>
#include <random>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace kiln;
namespace fs = std::filesystem;

//===----------------------------------------------------------------------===//
// Schedules
//===----------------------------------------------------------------------===//

TEST(LrSchedule, Constant) {
  LrSchedule s = LrSchedule::constant(0.5);
  EXPECT_EQ(s(1), 0.5);
  EXPECT_EQ(s(1000000), 0.5);
  EXPECT_KILN_ERROR(s(0), "count steps from 1");
  EXPECT_KILN_ERROR(LrSchedule::constant(-1), "finite number >= 0");
  EXPECT_KILN_ERROR(LrSchedule::constant(NAN), "finite number >= 0");
}

TEST(LrSchedule, WarmupCosine) {
  LrSchedule s = LrSchedule::warmupCosine(1.0, 10, 110, 0.1);
  EXPECT_DOUBLE_EQ(s(1), 0.1); // 1/10 of the peak
  EXPECT_DOUBLE_EQ(s(5), 0.5);
  EXPECT_DOUBLE_EQ(s(10), 1.0);    // the peak at the end of the warm-up
  EXPECT_NEAR(s(60), 0.55, 1e-12); // half-way down: (1 + 0.1) / 2
  // A quarter of the way: min + (peak - min)·(1 + cos(pi/4))/2.
  EXPECT_NEAR(s(35), 0.1 + 0.9 * (1 + std::sqrt(0.5)) / 2, 1e-12);
  EXPECT_DOUBLE_EQ(s(110), 0.1);
  EXPECT_DOUBLE_EQ(s(500), 0.1); // stays at the minimum
  for (int64_t step = 11; step < 110; ++step) {
    EXPECT_LT(s(step + 1), s(step)) << step;
  }
  EXPECT_KILN_ERROR(LrSchedule::warmupCosine(1.0, 10, 10),
                    "0 <= warm-up steps < total steps");
  EXPECT_KILN_ERROR(LrSchedule::warmupCosine(1.0, -1, 10),
                    "0 <= warm-up steps < total steps");
  EXPECT_KILN_ERROR(LrSchedule::warmupCosine(0.1, 1, 10, 0.2),
                    "minimum rate 0.2 is above the peak 0.1");
}

TEST(LrSchedule, InverseSqrt) {
  // Vaswani et al.: d_model^-0.5 · min(s^-0.5, s · warmup^-1.5).
  LrSchedule s = LrSchedule::inverseSqrt(512, 4000);
  EXPECT_NEAR(s(1), 1.0 / std::sqrt(512.0) * 1.0 / std::pow(4000.0, 1.5),
              1e-15);
  EXPECT_NEAR(s(4000), 1.0 / std::sqrt(512.0 * 4000.0), 1e-15); // the peak
  EXPECT_NEAR(s(16000), 1.0 / std::sqrt(512.0 * 16000.0), 1e-15);
  EXPECT_LT(s(3999), s(4000));
  EXPECT_LT(s(4001), s(4000));
  EXPECT_NEAR(LrSchedule::inverseSqrt(512, 4000, 2.0)(100), 2 * s(100), 1e-15);
  EXPECT_KILN_ERROR(LrSchedule::inverseSqrt(0, 10), "d_model > 0");
  EXPECT_KILN_ERROR(LrSchedule::inverseSqrt(8, 0), "warm-up steps > 0");
}

TEST(LrSchedule, Describe) {
  EXPECT_EQ(LrSchedule::warmupCosine(0.003, 100, 2000, 0.0003).describe(),
            "warmup-cosine(peak=0.003, warmup=100, total=2000, min=0.0003)");
  EXPECT_EQ(LrSchedule::constant(0.01).describe(), "constant(0.01)");
}

//===----------------------------------------------------------------------===//
// A tiny problem to train: fit w·x ≈ y by SGD, with random batches
//===----------------------------------------------------------------------===//

namespace {

using TrainingTest = kiln::test::TempDirTest;

/// Parameters w [4], optimizer state "w.momentum" [4], a data generator: a
/// step draws a random x, computes the loss (w·x - t·x)² for the fixed target
/// t = (1, -2, 3, 0.5) and takes an SGD step with momentum.
struct Problem {
  Problem() {
    Rng init(5);
    parameters.add("w", {4}, Init::normal(0.0, 1.0), init);
    state.add("w.momentum", Tensor::zeros({4}, DType::f32));
  }

  float step(float lr) {
    const float target[4] = {1.0f, -2.0f, 3.0f, 0.5f};
    float x[4], error = 0.0f;
    float *w = parameters.get("w").data<float>();
    float *m = state.get("w.momentum").data<float>();
    for (int i = 0; i < 4; ++i) {
      x[i] = float(data.normal());
      error += (w[i] - target[i]) * x[i];
    }
    for (int i = 0; i < 4; ++i) {
      m[i] = 0.9f * m[i] + 2.0f * error * x[i];
      w[i] -= lr * m[i];
    }
    ++steps;
    return error * error;
  }

  TrainingHooks hooks() {
    TrainingHooks h;
    h.step = [this](int64_t, float lr) { return step(lr); };
    h.parameters = &parameters;
    h.optimizerState = &state;
    h.rngs["data"] = &data;
    h.restoreStep = [this](int64_t s) { steps = s; };
    h.info["model"] = "least-squares";
    return h;
  }

  ParameterStore parameters, state;
  Rng data{11};
  int64_t steps = 0;
};

std::vector<float> values(const Tensor &t) { return t.toVector<float>(); }

std::string readText(const std::string &path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

} // namespace

//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

TEST_F(TrainingTest, CheckpointRoundTrip) {
  Problem a;
  a.step(0.01f);
  TrainingState saved;
  saved.step = 7;
  saved.rngs["data"] = a.data.state();
  saved.rngs["big"] = ~uint64_t(0);
  saved.info["config"] = "d=4";
  saveCheckpoint(path("c.safetensors"), a.parameters, a.state, saved);

  Problem b;
  TrainingState loaded =
      loadCheckpoint(path("c.safetensors"), b.parameters, &b.state);
  EXPECT_EQ(loaded.step, 7);
  EXPECT_EQ(loaded.rngs, saved.rngs);
  EXPECT_EQ(loaded.info, saved.info);
  EXPECT_EQ(values(b.parameters.get("w")), values(a.parameters.get("w")));
  EXPECT_EQ(values(b.state.get("w.momentum")),
            values(a.state.get("w.momentum")));

  // The weights alone (to sample from a checkpoint), and the file is plain
  // safetensors to other readers: weights under their own names.
  Problem c;
  loadCheckpoint(path("c.safetensors"), c.parameters);
  EXPECT_EQ(values(c.parameters.get("w")), values(a.parameters.get("w")));
  SafetensorsFile file = loadSafetensors(path("c.safetensors"));
  ASSERT_NE(file.find("w"), nullptr);
  ASSERT_NE(file.find("optimizer/w.momentum"), nullptr);
  EXPECT_EQ(file.metadata.at("format"), "kiln-checkpoint");
}

TEST_F(TrainingTest, RefusesBadCheckpointsAndChangesNothing) {
  Problem a;
  a.step(0.01f);
  TrainingState state;
  state.step = 3;
  std::string good = path("good.safetensors");
  saveCheckpoint(good, a.parameters, a.state, state);

  Problem b;
  std::vector<float> w = values(b.parameters.get("w"));
  std::vector<float> m = values(b.state.get("w.momentum"));
  auto unchanged = [&] {
    EXPECT_EQ(values(b.parameters.get("w")), w);
    EXPECT_EQ(values(b.state.get("w.momentum")), m);
  };

  // Corrupted bytes: a flipped byte in the header, a truncated file.
  std::string bytes = readText(good);
  std::string flipped = bytes;
  flipped[12] = '\x01';
  std::ofstream(path("flipped.safetensors"), std::ios::binary) << flipped;
  EXPECT_KILN_ERROR(
      loadCheckpoint(path("flipped.safetensors"), b.parameters, &b.state),
      "flipped.safetensors");
  unchanged();
  std::ofstream(path("short.safetensors"), std::ios::binary)
      << bytes.substr(0, bytes.size() - 5);
  EXPECT_KILN_ERROR(
      loadCheckpoint(path("short.safetensors"), b.parameters, &b.state),
      "short.safetensors");
  unchanged();

  // A plain weights file is not a checkpoint.
  saveParameters(path("weights.safetensors"), a.parameters);
  EXPECT_KILN_ERROR(
      loadCheckpoint(path("weights.safetensors"), b.parameters, &b.state),
      "no \"format\": \"kiln-checkpoint\"");

  // The optimizer state of another model: refused before the weights change.
  ParameterStore otherState;
  otherState.add("w.m", Tensor::zeros({4}, DType::f32));
  saveCheckpoint(path("other.safetensors"), a.parameters, otherState, state);
  EXPECT_KILN_ERROR(
      loadCheckpoint(path("other.safetensors"), b.parameters, &b.state),
      "optimizer state: cannot set 1 parameters from 1 tensors: unexpected "
      "tensor 'w.m'");
  unchanged();

  // A wrong shape.
  ParameterStore wide;
  wide.add("w", Tensor::zeros({5}, DType::f32));
  saveCheckpoint(path("wide.safetensors"), wide, a.state, state);
  EXPECT_KILN_ERROR(
      loadCheckpoint(path("wide.safetensors"), b.parameters, &b.state),
      "'w' has shape [5] but the model expects [4]");
  unchanged();

  // Bad metadata.
  NamedTensors tensors = a.parameters.namedTensors();
  saveSafetensors(path("step.safetensors"), tensors,
                  {{"format", "kiln-checkpoint"},
                   {"format_version", "1"},
                   {"step", "12x"}});
  EXPECT_KILN_ERROR(loadCheckpoint(path("step.safetensors"), b.parameters),
                    "the step '12x' is not a count of steps");
  saveSafetensors(path("rng.safetensors"), tensors,
                  {{"format", "kiln-checkpoint"},
                   {"format_version", "1"},
                   {"step", "1"},
                   {"rng.data", "-4"}});
  EXPECT_KILN_ERROR(loadCheckpoint(path("rng.safetensors"), b.parameters),
                    "'rng.data' = '-4' is not a generator state");
  saveSafetensors(path("version.safetensors"), tensors,
                  {{"format", "kiln-checkpoint"}, {"format_version", "9"}});
  EXPECT_KILN_ERROR(loadCheckpoint(path("version.safetensors"), b.parameters),
                    "format version '9'");
  unchanged();
}

// A checkpoint that a run cannot continue from is refused on load: values
// that are not finite, and negative Adam second moments (one had loaded,
// the first resumed step made every parameter NaN, and the run then saved
// those over the checkpoint).
TEST_F(TrainingTest, RefusesCheckpointsARunCannotContinueFrom) {
  Problem b;
  std::vector<float> w = values(b.parameters.get("w"));
  // w [4] with element 1 = `weight`, moments w.m and w.v [4] with element 2
  // = `m` and `v`.
  auto write = [&](const std::string &name, float weight, float m, float v) {
    NamedTensors tensors = {
        {"w", Tensor::fromVector<float>({4}, {0.5f, weight, 1.0f, 2.0f})},
        {"optimizer/w.m", Tensor::fromVector<float>({4}, {0, 0, m, 0})},
        {"optimizer/w.v", Tensor::fromVector<float>({4}, {0, 0, v, 0})}};
    saveSafetensors(path(name), tensors,
                    {{"format", "kiln-checkpoint"},
                     {"format_version", "1"},
                     {"step", "3"}});
    return path(name);
  };
  ParameterStore adam;
  adam.add("w.m", Tensor::zeros({4}, DType::f32));
  adam.add("w.v", Tensor::zeros({4}, DType::f32));
  EXPECT_KILN_ERROR(
      loadCheckpoint(write("negative.safetensors", 1.0f, 0.0f, -1e-3f),
                     b.parameters, &adam),
      "optimizer state 'w.v' holds -0.001 at element 2 (second moments are "
      "finite and >= 0)");
  EXPECT_KILN_ERROR(loadCheckpoint(write("nan.safetensors", 1.0f, NAN, 0.0f),
                                   b.parameters, &adam),
                    "optimizer state 'w.m' holds nan at element 2");
  EXPECT_KILN_ERROR(
      loadCheckpoint(write("inf.safetensors", INFINITY, 0.0f, 0.0f),
                     b.parameters, &adam),
      "parameter 'w' holds inf at element 1");
  EXPECT_EQ(values(b.parameters.get("w")), w);
  EXPECT_EQ(adam.get("w.v").toVector<float>()[2], 0.0f);
  // A negative first moment is a value like any other.
  loadCheckpoint(write("fine.safetensors", 1.0f, -1e-3f, 1e-3f), b.parameters,
                 &adam);
  EXPECT_EQ(adam.get("w.m").toVector<float>()[2], -1e-3f);
}

// No checkpoint is ever written from values that are not finite: the save
// is refused and the previous file stays as it was.
TEST_F(TrainingTest, NeverSavesValuesThatAreNotFinite) {
  Problem a;
  TrainingState state;
  state.step = 1;
  std::string file = path("c.safetensors");
  saveCheckpoint(file, a.parameters, a.state, state);
  std::string before = readText(file);
  a.parameters.get("w").data<float>()[3] = NAN;
  EXPECT_KILN_ERROR(saveCheckpoint(file, a.parameters, a.state, state),
                    "not saved: parameter 'w' holds nan at element 3; any "
                    "earlier checkpoint there is kept");
  EXPECT_EQ(readText(file), before);
  a.parameters.get("w").data<float>()[3] = 1.0f;
  a.state.get("w.momentum").data<float>()[0] = -INFINITY;
  EXPECT_KILN_ERROR(saveCheckpoint(file, a.parameters, a.state, state),
                    "optimizer state 'w.momentum' holds -inf at element 0");
  EXPECT_EQ(readText(file), before);
}

// A run whose parameters turn NaN while its loss is still finite stops at
// its next checkpoint with the previous one intact.
TEST_F(TrainingTest, ARunThatDivergesKeepsItsLastCheckpoint) {
  Problem p;
  TrainingOptions options;
  options.steps = 6;
  options.checkpointPath = path("run.safetensors");
  options.checkpointEvery = 2;
  options.schedule = LrSchedule::constant(0.01);
  options.out = nullptr;
  TrainingHooks hooks = p.hooks();
  hooks.step = [&](int64_t step, float lr) {
    float loss = p.step(lr);
    if (step == 3) {
      p.parameters.get("w").data<float>()[0] = NAN;
    }
    return loss;
  };
  EXPECT_KILN_ERROR(runTraining(options, hooks),
                    "not saved: parameter 'w' holds nan");
  Problem q;
  EXPECT_EQ(loadCheckpoint(options.checkpointPath, q.parameters, &q.state).step,
            2);
}

//===----------------------------------------------------------------------===//
// The loop
//===----------------------------------------------------------------------===//

TEST_F(TrainingTest, LossFallsAndLogsAreWritten) {
  Problem p;
  TrainingOptions options;
  options.steps = 200;
  options.schedule = LrSchedule::warmupCosine(0.02, 10, 200);
  options.tokensPerStep = 4;
  options.evalEvery = 50;
  options.csvPath = path("log.csv");
  options.checkpointPath = path("ckpt.safetensors");
  options.out = nullptr;
  int evaluations = 0;
  TrainingHooks hooks = p.hooks();
  hooks.evaluate = [&] {
    ++evaluations;
    return 1.0;
  };
  TrainingResult result = runTraining(options, hooks);
  ASSERT_EQ(result.losses.size(), 200u);
  EXPECT_EQ(evaluations, 4);
  auto mean = [&](size_t from) {
    double sum = 0;
    for (size_t i = from; i < from + 20; ++i) {
      sum += result.losses[i];
    }
    return sum / 20;
  };
  EXPECT_LT(mean(180), 0.01 * mean(0)) << mean(0) << " -> " << mean(180);

  std::string csv = readText(path("log.csv"));
  std::istringstream lines(csv);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "step,loss,lr,tokens_per_s,elapsed_s,val_loss");
  int rows = 0, withValidation = 0;
  while (std::getline(lines, line)) {
    ++rows;
    withValidation += line.back() != ',';
  }
  EXPECT_EQ(rows, 200);
  EXPECT_EQ(withValidation, 4);

  TrainingState state;
  Problem q;
  state = loadCheckpoint(path("ckpt.safetensors"), q.parameters, &q.state);
  EXPECT_EQ(state.step, 200);
  EXPECT_EQ(state.rngs.at("data"), p.data.state());
  EXPECT_EQ(state.info.at("model"), "least-squares");
  EXPECT_EQ(values(q.parameters.get("w")), values(p.parameters.get("w")));
}

TEST_F(TrainingTest, ResumeContinuesBitForBit) {
  TrainingOptions options;
  options.steps = 60;
  options.schedule = LrSchedule::warmupCosine(0.02, 5, 60);
  options.out = nullptr;

  Problem whole;
  std::vector<float> uninterrupted = runTraining(options, whole.hooks()).losses;

  // Stop after 25 steps (a crash: the process dies after the checkpoint),
  // then a fresh process resumes from the checkpoint.
  options.checkpointPath = path("ckpt.safetensors");
  options.checkpointEvery = 25;
  options.csvPath = path("log.csv");
  Problem first;
  TrainingHooks hooks = first.hooks();
  hooks.step = [&first](int64_t step, float lr) -> float {
    if (step == 31) {
      throw Error("simulated crash");
    }
    return first.step(lr);
  };
  EXPECT_KILN_ERROR(runTraining(options, hooks), "simulated crash");
  std::string csvBefore = readText(path("log.csv"));

  Problem second; // fresh initialization, fresh generator
  options.resume = true;
  TrainingResult resumed = runTraining(options, second.hooks());
  EXPECT_EQ(resumed.resumedFrom, 25);
  EXPECT_EQ(second.steps, 60);
  ASSERT_EQ(resumed.losses.size(), 35u);
  for (size_t i = 0; i < 35; ++i) {
    EXPECT_EQ(resumed.losses[i], uninterrupted[25 + i]) << "step " << 26 + i;
  }
  EXPECT_EQ(values(second.parameters.get("w")),
            values(whole.parameters.get("w")));
  EXPECT_EQ(values(second.state.get("w.momentum")),
            values(whole.state.get("w.momentum")));

  // The log continues from step 25: steps 26..30 of the crashed run are gone.
  std::string csv = readText(path("log.csv"));
  EXPECT_NE(csvBefore.find("\n30,"), std::string::npos);
  size_t rows = std::count(csv.begin(), csv.end(), '\n');
  EXPECT_EQ(rows, 61u); // the header and steps 1..60, once each
  EXPECT_NE(csv.find("\n25,"), std::string::npos);
  EXPECT_EQ(csv.find("\n26,"), csv.rfind("\n26,"));

  // Resuming a finished run does nothing.
  Problem third;
  EXPECT_TRUE(runTraining(options, third.hooks()).losses.empty());
}

// A CSV log that cannot be written (a full disk) stops the run with an
// error naming it; it had dropped rows and the run exited 0.
TEST_F(TrainingTest, ACsvLogThatCannotBeWrittenStopsTheRun) {
  TrainingOptions options;
  options.steps = 5;
  options.out = nullptr;
  options.csvPath = "/dev/full"; // every write fails with ENOSPC
  Problem p;
  EXPECT_KILN_ERROR(runTraining(options, p.hooks()),
                    "/dev/full: cannot write the training log (No space left "
                    "on device)");
}

// A checkpoint path where no checkpoint can be saved (a missing directory, a
// file for a directory, a directory for the file) stops the run before its
// first step, not after the training it would lose. (A read-only file
// system: test/Examples/unwritable-output.mlir.)
TEST_F(TrainingTest, RefusesACheckpointPathThatCannotBeWritten) {
  std::ofstream(path("file")) << "x";
  fs::create_directory(path("dir"));
  struct Case {
    std::string checkpoint, error;
  };
  for (const Case &c :
       {Case{path("missing/ckpt.safetensors"),
             "cannot save checkpoints there: the directory '" +
                 path("missing") + "' does not exist"},
        Case{path("file/ckpt.safetensors"), "cannot save checkpoints there: '" +
                                                path("file") +
                                                "' is not a directory"},
        Case{path("dir"),
             "cannot save checkpoints there: it is a directory"}}) {
    TrainingOptions options;
    options.steps = 3;
    options.out = nullptr;
    options.checkpointPath = c.checkpoint;
    Problem p;
    EXPECT_KILN_ERROR(runTraining(options, p.hooks()), c.error);
    EXPECT_EQ(p.steps, 0) << c.checkpoint;
  }
  EXPECT_NO_THROW(checkCheckpointWritable(path("ckpt.safetensors")));
  EXPECT_FALSE(fs::exists(path("ckpt.safetensors"))); // checking writes nothing
}

// Outputs that name an input or each other: the log over the corpus, the
// checkpoint over the corpus, the log over the checkpoint (with --resume it
// had truncated the checkpoint into the log), also under other names (a
// hard link, "dir/../x"). Refused before the first step; nothing written.
TEST_F(TrainingTest, RefusesOutputsThatNameAnInputOrEachOther) {
  std::ofstream(path("corpus.txt")) << "to be or not to be";
  fs::create_hard_link(path("corpus.txt"), path("corpus-link.txt"));
  fs::create_directory(path("sub"));
  struct Case {
    std::string csv, checkpoint, error;
  };
  std::string other = path("sub") + "/../other.csv";
  for (const Case &c : {
           Case{path("corpus.txt"), "",
                "--data '" + path("corpus.txt") +
                    "' and the training log '" + path("corpus.txt") +
                    "' name the same file"},
           Case{"", path("corpus-link.txt"),
                "--data '" + path("corpus.txt") + "' and the checkpoint '" +
                    path("corpus-link.txt") + "' name the same file"},
           Case{path("c.safetensors"), path("c.safetensors"),
                "the training log '" + path("c.safetensors") +
                    "' and the checkpoint '" + path("c.safetensors") +
                    "' name the same file"},
           Case{path("c.safetensors.tmp"), path("c.safetensors"),
                "and the checkpoint's temporary file"},
           Case{other, path("other.csv"), "name the same file"}}) {
    TrainingOptions options;
    options.steps = 3;
    options.out = nullptr;
    options.resume = !c.checkpoint.empty();
    options.csvPath = c.csv;
    options.checkpointPath = c.checkpoint;
    options.inputs = {{"--data", path("corpus.txt")}};
    Problem p;
    EXPECT_KILN_ERROR(runTraining(options, p.hooks()), c.error);
    EXPECT_EQ(p.steps, 0) << c.error;
  }
  EXPECT_EQ(readText(path("corpus.txt")), "to be or not to be");
  EXPECT_FALSE(fs::exists(path("c.safetensors")));
  EXPECT_FALSE(fs::exists(path("other.csv")));
}

// Whatever is at <checkpoint>.tmp, the file a save writes first, must be a
// file the save can reuse: a FIFO had hung the first save, a hard link had
// been truncated and overwritten (the other file with it), a directory
// failed only after the training. Refused before the first step, and a save
// that meets one (put there during the run) writes nothing through it.
TEST_F(TrainingTest, RefusesATemporaryFileInTheWay) {
  std::string checkpoint = path("ckpt.safetensors");
  std::string temporary = checkpointTemporary(checkpoint);
  std::ofstream(path("precious")) << "keep me";
  auto run = [&] {
    TrainingOptions options;
    options.steps = 3;
    options.out = nullptr;
    options.checkpointPath = checkpoint;
    Problem p;
    EXPECT_KILN_ERROR(runTraining(options, p.hooks()),
                      "the temporary file a save writes first, is in the way");
    EXPECT_EQ(p.steps, 0);
  };
  ASSERT_EQ(::mkfifo(temporary.c_str(), 0644), 0);
  run();
  Problem p;
  EXPECT_KILN_ERROR(saveCheckpoint(checkpoint, p.parameters, p.state, {}),
                    "cannot create '" + temporary + "'");
  fs::remove(temporary);
  fs::create_hard_link(path("precious"), temporary);
  run();
  EXPECT_KILN_ERROR(saveCheckpoint(checkpoint, p.parameters, p.state, {}),
                    "is in the way: it is not a regular file of its own");
  EXPECT_EQ(readText(path("precious")), "keep me");
  fs::remove(temporary);
  fs::create_directory(temporary);
  run();
  fs::remove(temporary);
  fs::create_symlink(path("precious"), temporary);
  run();
  EXPECT_KILN_ERROR(saveCheckpoint(checkpoint, p.parameters, p.state, {}),
                    "cannot create '" + temporary + "'");
  EXPECT_EQ(readText(path("precious")), "keep me");
  EXPECT_FALSE(fs::exists(checkpoint));
  // A leftover regular file (a save killed part way) is reused.
  fs::remove(temporary);
  std::ofstream(temporary) << "half a checkpoint";
  saveCheckpoint(checkpoint, p.parameters, p.state, {});
  EXPECT_FALSE(fs::exists(temporary));
  // A name whose temporary file would be too long for the file system.
  std::string longName = path(std::string(252, 'c'));
  TrainingOptions options;
  options.steps = 3;
  options.out = nullptr;
  options.checkpointPath = longName;
  EXPECT_KILN_ERROR(runTraining(options, p.hooks()),
                    "would have a name of 256 bytes, more than the file "
                    "system's 255");
}

// Resuming with a setting the checkpoint recorded otherwise (same tensor
// shapes, another model) is refused before anything changes.
TEST_F(TrainingTest, ResumeRefusesACheckpointOfOtherSettings) {
  TrainingOptions options;
  options.steps = 4;
  options.checkpointPath = path("ckpt.safetensors");
  options.out = nullptr;
  Problem first;
  runTraining(options, first.hooks()); // info: model = least-squares
  options.steps = 8;
  options.resume = true;
  Problem second;
  std::vector<float> w = values(second.parameters.get("w"));
  TrainingHooks hooks = second.hooks();
  hooks.info["model"] = "least-cubes";
  EXPECT_KILN_ERROR(runTraining(options, hooks),
                    "it was saved with model = 'least-squares', this run has "
                    "'least-cubes'");
  EXPECT_EQ(values(second.parameters.get("w")), w);
  // A key the checkpoint does not record is no conflict.
  hooks.info["model"] = "least-squares";
  hooks.info["new"] = "x";
  EXPECT_EQ(runTraining(options, hooks).resumedFrom, 4);
}

// SIGKILL at random moments of a run that checkpoints every step (so most
// kills land in a save): the checkpoint left always loads, at most the one
// temporary file is left beside it, and a resumed run ends exactly where the
// uninterrupted run does.
TEST_F(TrainingTest, KillsDuringCheckpointWritesLoseNothing) {
  constexpr int64_t kSteps = 400;
  TrainingOptions options;
  options.steps = kSteps;
  options.schedule = LrSchedule::constant(0.002);
  options.out = nullptr;
  // A large parameter beside w makes each save take a while.
  auto problem = [] {
    auto p = std::make_unique<Problem>();
    p->parameters.add("ballast", Tensor::zeros({1 << 18}, DType::f32));
    return p;
  };
  auto whole = problem();
  runTraining(options, whole->hooks());

  options.checkpointPath = path("ckpt.safetensors");
  options.checkpointEvery = 1;
  options.resume = true;
  std::mt19937 random(7);
  int killed = 0;
  for (int round = 0; round < 40; ++round) {
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto p = problem();
      try {
        runTraining(options, p->hooks());
      } catch (...) {
        ::_exit(2);
      }
      ::_exit(0);
    }
    ::usleep(std::uniform_int_distribution<int>(0, 30000)(random));
    killed += ::kill(child, SIGKILL) == 0;
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status) || WEXITSTATUS(status) == 0)
        << "the run failed: " << status;
    if (std::filesystem::exists(options.checkpointPath)) {
      auto p = problem();
      loadCheckpoint(options.checkpointPath, p->parameters, &p->state);
    }
    for (const auto &entry : std::filesystem::directory_iterator(directory_)) {
      std::string name = entry.path().filename().string();
      EXPECT_TRUE(name == "ckpt.safetensors" || name == "ckpt.safetensors.tmp")
          << name;
    }
  }
  EXPECT_GT(killed, 20);
  auto resumed = problem();
  runTraining(options, resumed->hooks());
  EXPECT_EQ(values(resumed->parameters.get("w")),
            values(whole->parameters.get("w")));
  EXPECT_EQ(values(resumed->state.get("w.momentum")),
            values(whole->state.get("w.momentum")));
}

TEST_F(TrainingTest, RefusesBadOptions) {
  Problem p;
  TrainingOptions options;
  options.out = nullptr;
  EXPECT_KILN_ERROR(runTraining(options, p.hooks()),
                    "the number of steps must be > 0");
  options.steps = 3;
  EXPECT_KILN_ERROR(runTraining(options, TrainingHooks{}),
                    "hooks.step (one training step) is required");
  options.resume = true;
  EXPECT_KILN_ERROR(runTraining(options, p.hooks()),
                    "resume needs a checkpointPath");
  options.resume = false;
  options.checkpointPath = path("c.safetensors");
  TrainingHooks noStores = p.hooks();
  noStores.parameters = nullptr;
  EXPECT_KILN_ERROR(runTraining(options, noStores),
                    "checkpoints need hooks.parameters");
  // A checkpoint of another run's generators is refused on resume.
  runTraining(options, p.hooks());
  options.resume = true;
  options.steps = 5;
  TrainingHooks extra = p.hooks();
  Rng other(3);
  extra.rngs["dropout"] = &other;
  EXPECT_KILN_ERROR(runTraining(options, extra),
                    "no state for the random generator 'dropout'");
}
