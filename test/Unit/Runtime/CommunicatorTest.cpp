//===- CommunicatorTest.cpp - Shards and data-parallel training loops ----===//
//
// Without MPI: shardBatch, hashStore, and runTraining's data-parallel side
// driven by a scripted communicator that stands for rank `rank` of a world
// whose other processes hold the same values (sums are `size` times the
// local value). The real multi-process runs are test/Distributed.
//
//===----------------------------------------------------------------------===//

#include "runtime/Communicator.h"
#include "runtime/TrainingLoop.h"

#include "test/Unit/Runtime/ExpectError.h"
#include "test/Unit/Runtime/TempDirTest.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

using namespace kiln;

namespace {

struct Aborted {
  std::string message;
  int code;
};

class ScriptedWorld final : public Communicator {
public:
  ScriptedWorld(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void allReduceSum(float *data, size_t count) override {
    if (others.size() == count) { // what the other processes add
      for (size_t i = 0; i < count; ++i) {
        data[i] += others[i];
      }
      return;
    }
    for (size_t i = 0; i < count; ++i) {
      data[i] *= float(size_);
    }
  }
  void broadcast(void *, size_t, int) override { ++broadcasts; }
  std::vector<uint64_t> allGather(uint64_t value) override {
    std::vector<uint64_t> values(size_t(size_), value);
    if (drifted >= 0) {
      values[size_t(drifted)] ^= 1;
    }
    return values;
  }
  void barrier() override { ++barriers; }
  [[noreturn]] void abort(const std::string &message, int code) override {
    throw Aborted{message, code};
  }

  int drifted = -1; ///< A rank whose hash differs, or -1.
  /// When as long as a sum: what the other processes add to it (else
  /// they hold this process's values).
  std::vector<float> others;
  int broadcasts = 0, barriers = 0;

private:
  int rank_, size_;
};

std::map<std::string, Arg> batch() {
  return {{"ids",
           Tensor::fromVector<int64_t>({5, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9})},
          {"mask", Tensor::fromVector<float>({5}, {1, 1, 1, 0, 0})},
          {"seed", Arg(int64_t(42))}};
}

class DataParallelLoop : public test::TempDirTest {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    parameters.add("w", Tensor::full({3}, 1.0f));
    state.add("w.m", Tensor::zeros({3}, DType::f32));
  }

  TrainingHooks hooks(std::shared_ptr<Communicator> world) {
    TrainingHooks h;
    h.step = [this](int64_t step, float) {
      if (failAt == step) {
        throw Error("step failed");
      }
      return 1.0f / float(step);
    };
    h.evaluate = [] { return 0.5; };
    h.parameters = &parameters;
    h.optimizerState = &state;
    h.restoreStep = [](int64_t) {};
    h.communicator = std::move(world);
    return h;
  }

  ParameterStore parameters, state;
  int64_t failAt = -1;
};

} // namespace

TEST(Communicator, ShardsSplitEveryTensorAlongItsRows) {
  // 5 rows over 3 processes: [0, 1), [1, 3), [3, 5).
  const int64_t firstRow[] = {0, 1, 3}, rows[] = {1, 2, 2};
  for (int rank = 0; rank < 3; ++rank) {
    std::map<std::string, Arg> shard = shardBatch(batch(), rank, 3);
    const Tensor &ids = shard.at("ids").tensor;
    ASSERT_EQ(ids.shape(), (std::vector<int64_t>{rows[rank], 2}));
    EXPECT_EQ(ids.data<int64_t>()[0], 2 * firstRow[rank]);
    EXPECT_EQ(shard.at("mask").tensor.dim(0), rows[rank]);
    EXPECT_EQ(shard.at("mask").tensor.data<float>()[0],
              rank == 2 ? 0.0f : 1.0f);
    EXPECT_TRUE(shard.at("seed").isScalar);
    EXPECT_EQ(shard.at("seed").scalar, 42);
  }
  // A world of one keeps the batch.
  std::map<std::string, Arg> whole = batch();
  EXPECT_EQ(shardBatch(whole, 0, 1).at("ids").tensor.raw(),
            whole.at("ids").tensor.raw());
  EXPECT_KILN_ERROR(shardBatch(batch(), 0, 6),
                    "a global batch of 5 rows cannot be split over 6 "
                    "processes");
  std::map<std::string, Arg> ragged = batch();
  ragged.emplace("other", Tensor::zeros({4}, DType::f32));
  EXPECT_KILN_ERROR(shardBatch(ragged, 0, 2), "has 5 rows and 'other' has 4");
  std::map<std::string, Arg> scalar = {{"x", Tensor::full({}, 1.0f)}};
  EXPECT_KILN_ERROR(shardBatch(scalar, 0, 2), "it is a scalar tensor");
  EXPECT_KILN_ERROR(shardBatch(batch(), 2, 2), "rank 2 of 2 processes");
}

TEST(Communicator, HashesSeeEveryByteAndName) {
  ParameterStore a, b, c;
  a.add("w", Tensor::full({3}, 1.0f));
  b.add("w", Tensor::full({3}, 1.0f));
  c.add("v", Tensor::full({3}, 1.0f));
  EXPECT_EQ(hashStore(a), hashStore(b));
  EXPECT_NE(hashStore(a), hashStore(c));
  b.get("w").data<float>()[2] = std::nextafter(1.0f, 2.0f);
  EXPECT_NE(hashStore(a), hashStore(b));
}

// Processes whose models differ (one host's corpus had one more character,
// so one more vocabulary row) had corrupted the heap in the first copy of
// the parameters: they compare layouts first, and every one stops with the
// ranks that differ before anything is copied.
TEST(Communicator, ProcessesWithDifferentModelsStopBeforeTheFirstCopy) {
  ParameterStore store;
  store.add("wte.weight", Tensor::zeros({65, 8}, DType::f32));
  ScriptedWorld same(1, 3);
  broadcastStore(same, store);
  EXPECT_EQ(same.broadcasts, 1);
  ScriptedWorld world(0, 3);
  world.drifted = 2;
  EXPECT_KILN_ERROR(broadcastStore(world, store),
                    "the parameters of rank 2 differ from rank 0's in names, "
                    "dtypes or shapes (this is rank 0, with 1 parameters)");
  EXPECT_EQ(world.broadcasts, 0);
  // The layout hash sees names, shapes and dtypes, not values.
  ParameterStore other, wider, integer, valued;
  other.add("wpe.weight", Tensor::zeros({65, 8}, DType::f32));
  wider.add("wte.weight", Tensor::zeros({66, 8}, DType::f32));
  integer.add("wte.weight", Tensor::zeros({65, 8}, DType::i32));
  valued.add("wte.weight", Tensor::full({65, 8}, 3.0f));
  for (const ParameterStore *s : {&other, &wider, &integer}) {
    EXPECT_NE(hashStoreLayout(*s), hashStoreLayout(store));
  }
  EXPECT_EQ(hashStoreLayout(valued), hashStoreLayout(store));
}

TEST_F(DataParallelLoop, OnlyRankZeroWritesAndTheOthersWaitForIt) {
  for (int rank : {0, 1}) {
    auto world = std::make_shared<ScriptedWorld>(rank, 2);
    std::string checkpoint = path("rank" + std::to_string(rank));
    TrainingOptions options;
    options.steps = 4;
    options.checkpointPath = checkpoint;
    options.checkpointEvery = 2;
    options.out = nullptr;
    TrainingResult result = runTraining(options, hooks(world));
    EXPECT_EQ(std::filesystem::exists(checkpoint), rank == 0);
    EXPECT_EQ(world->barriers, 2); // after each checkpoint
    // The evaluations of the processes are averaged.
    ASSERT_TRUE(result.validationLoss);
    EXPECT_DOUBLE_EQ(*result.validationLoss, 0.5);
  }
}

// Validation losses are averaged weighted by the tokens each process
// evaluated (a share of a batch can hold fewer rows than another): this
// process's 1.0 over 30 tokens and the other's 4.0 over 10 give 1.75, not
// the plain mean 2.5.
TEST_F(DataParallelLoop, ValidationLossesAreWeightedByTokens) {
  auto world = std::make_shared<ScriptedWorld>(0, 2);
  world->others = {4.0f * 10.0f, 10.0f, 4.0f};
  TrainingOptions options;
  options.steps = 1;
  options.out = nullptr;
  TrainingHooks h = hooks(world);
  h.evaluate = [] { return Evaluation(1.0, 30.0); };
  TrainingResult result = runTraining(options, h);
  ASSERT_TRUE(result.validationLoss);
  EXPECT_DOUBLE_EQ(*result.validationLoss, 1.75);
  // No tokens anywhere: the plain mean.
  world->others = {0.0f, 0.0f, 4.0f};
  h.evaluate = [] { return Evaluation(1.0, 0.0); };
  EXPECT_DOUBLE_EQ(*runTraining(options, h).validationLoss, 2.5);
  h.evaluate = [] { return Evaluation(1.0, -1.0); };
  try {
    runTraining(options, h);
    FAIL() << "a negative weight was taken";
  } catch (const Aborted &a) {
    EXPECT_NE(a.message.find("the evaluation's weight must be finite and >= "
                             "0, got -1"),
              std::string::npos)
        << a.message;
  }
}

TEST_F(DataParallelLoop, ProcessesThatDriftApartStopTheJob) {
  auto world = std::make_shared<ScriptedWorld>(0, 3);
  world->drifted = 2;
  TrainingOptions options;
  options.steps = 6;
  options.driftCheckEvery = 3;
  options.out = nullptr;
  try {
    runTraining(options, hooks(world));
    FAIL() << "the drift went unnoticed";
  } catch (const Aborted &a) {
    EXPECT_NE(a.message.find("rank 0 of 3"), std::string::npos) << a.message;
    EXPECT_NE(a.message.find("after step 3 the parameters of rank(s) 2 differ"),
              std::string::npos)
        << a.message;
    EXPECT_EQ(a.code, 1);
  }
}

TEST_F(DataParallelLoop, AFailureEndsEveryProcessNamingItsRank) {
  auto world = std::make_shared<ScriptedWorld>(1, 2);
  failAt = 2;
  TrainingOptions options;
  options.steps = 4;
  options.out = nullptr;
  try {
    runTraining(options, hooks(world));
    FAIL() << "the failure did not end the job";
  } catch (const Aborted &a) {
    EXPECT_EQ(a.message, "error: rank 1 of 2: step failed");
  }
  // In a world of one the error is the caller's to handle.
  EXPECT_KILN_ERROR(runTraining(options, hooks(nullptr)), "step failed");
}

TEST_F(DataParallelLoop, OnlyRankZeroReadsTheCheckpoint) {
  std::string checkpoint = path("ckpt");
  TrainingOptions options;
  options.steps = 2;
  options.checkpointPath = checkpoint;
  options.out = nullptr;
  runTraining(options, hooks(std::make_shared<ScriptedWorld>(0, 2)));
  ASSERT_TRUE(std::filesystem::exists(checkpoint));
  // Rank 1 follows rank 0's word (here: its own, since the scripted
  // broadcast copies nothing) and gets the parameters, state, step and
  // generators by broadcast: it never reads the file itself.
  auto world = std::make_shared<ScriptedWorld>(1, 2);
  options.steps = 3;
  options.resume = true;
  TrainingResult result = runTraining(options, hooks(world));
  EXPECT_EQ(result.resumedFrom, 0);
  EXPECT_EQ(result.losses.size(), 3u);
  EXPECT_EQ(world->broadcasts, 1); // the flag
  // Rank 0 resumes from it.
  auto first = std::make_shared<ScriptedWorld>(0, 2);
  result = runTraining(options, hooks(first));
  EXPECT_EQ(result.resumedFrom, 2);
  // The flag, the step, the world size, then the two tensors.
  EXPECT_EQ(first->broadcasts, 5);
}
