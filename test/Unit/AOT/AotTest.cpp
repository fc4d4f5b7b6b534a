//===- AotTest.cpp - Ahead-of-time compiled models against the JIT --------===//
//
// tiny_gpt.h, tiny_llama.h and their objects come from kiln_add_model
// (generator, kiln-compile) at build time; the same modules are JIT-compiled
// here. Both run the same pipeline for the same CPU, so results must agree
// bit for bit. (The models' vocabularies are both 13: randomIds serves both.)
//
//===----------------------------------------------------------------------===//

#include "TinyGpt.h"
#include "TinyLlama.h"
#include "tiny_gpt.h"
#include "tiny_llama.h"

#include "../Runtime/ExpectError.h"
#include "../Runtime/TempDirTest.h"
#include "runtime/Aot.h"
#include "runtime/Checkpoint.h"
#include "runtime/Error.h"
#include "runtime/Generate.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include <cstring>

using namespace kiln;

namespace {

/// Compiled once for all tests.
std::shared_ptr<JitModule> jitTinyGpt() {
  static std::shared_ptr<JitModule> jit = [] {
    dsl::Module module;
    test::buildTinyGpt(module);
    return compileTraining(module, "loss", test::tinyGptOptimizer());
  }();
  return jit;
}

Tensor randomIds(std::vector<int64_t> shape, uint64_t seed) {
  Tensor t = Tensor::empty(shape, DType::i64);
  Rng rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) {
    t.data<int64_t>()[i] =
        int64_t(rng.next() % uint64_t(test::tinyGptConfig().vocabSize));
  }
  return t;
}

/// A view of `t` for the C entry points (f32 or i64).
kiln_tensor cTensor(const Tensor &t) {
  kiln_tensor k{};
  k.data = t.raw();
  k.dtype = t.dtype() == DType::f32 ? KILN_F32 : KILN_I64;
  k.rank = int32_t(t.rank());
  for (int64_t d = 0; d < t.rank(); ++d) {
    k.shape[d] = t.shape()[d];
  }
  return k;
}

void expectIdentical(const Tensor &a, const Tensor &b,
                     const std::string &what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  EXPECT_EQ(0, std::memcmp(a.raw(), b.raw(), a.numel() * sizeOf(a.dtype())))
      << what << " differs";
}

} // namespace

TEST(Aot, ForwardAndTrainingStepsMatchTheJitBitForBit) {
  auto jit = jitTinyGpt();
  auto aot = std::make_shared<AotModule>(tiny_gpt_model);
  EXPECT_EQ(aot->functions(), jit->functions());
  ASSERT_EQ(aot->params().size(), jit->params().size());
  for (size_t i = 0; i < aot->params().size(); ++i) {
    EXPECT_EQ(aot->params()[i].name, jit->params()[i].name);
    EXPECT_EQ(aot->params()[i].shape, jit->params()[i].shape);
  }

  ParameterStore params = aot->initParameters(5);
  Tensor ids = randomIds({3, 8}, 1);
  Tensor aotLogits = aot->run("forward", params, {{"idx", ids}})[0];
  Tensor jitLogits = jit->run("forward", params, {{"idx", ids}})[0];
  expectIdentical(aotLogits, jitLogits, "forward logits");

  Trainer aotTrainer(aot, /*seed=*/7), jitTrainer(jit, /*seed=*/7);
  for (int step = 0; step < 3; ++step) {
    std::map<std::string, Arg> batch{{"idx", randomIds({4, 8}, 10 + step)},
                                     {"targets", randomIds({4, 8}, 20 + step)}};
    float a = aotTrainer.step(batch, 1e-2f);
    float j = jitTrainer.step(batch, 1e-2f);
    EXPECT_EQ(a, j) << "loss of step " << step;
  }
  for (const std::string &name : aotTrainer.parameters().names()) {
    expectIdentical(aotTrainer.parameters().get(name),
                    jitTrainer.parameters().get(name), name);
  }
  for (const std::string &name : aotTrainer.state().names()) {
    expectIdentical(aotTrainer.state().get(name), jitTrainer.state().get(name),
                    name);
  }
  std::map<std::string, Arg> eval{{"idx", ids}, {"targets", ids}};
  expectIdentical(aotTrainer.run("eval_loss", eval)[0],
                  jitTrainer.run("eval_loss", eval)[0], "eval_loss");
}

TEST(Aot, CachedGenerationMatchesTheJit) {
  auto jit = jitTinyGpt();
  auto aot = std::make_shared<AotModule>(tiny_gpt_model);
  ParameterStore params = aot->initParameters(3);
  auto generate = [&](const Executable &exe) {
    Rng rng(11);
    return generateGpt(
        [&](const std::string &graph, const std::map<std::string, Arg> &in) {
          return exe.run(graph, params, in);
        },
        dsl::models::decodeShape(test::tinyGptConfig()), {1, 2, 3}, 12,
        {.temperature = 1.0}, rng);
  };
  EXPECT_EQ(generate(*aot), generate(*jit));
}

// The Llama architecture (grouped-query attention, rotary positions, SwiGLU,
// caches of the key/value heads) compiled ahead of time: the forward pass,
// training steps and cached generation match the JIT bit for bit.
TEST(Aot, LlamaMatchesTheJitBitForBit) {
  dsl::Module module;
  test::buildTinyLlama(module);
  auto jit = compileTraining(module, "loss", test::tinyGptOptimizer());
  auto aot = std::make_shared<AotModule>(tiny_llama_model);
  EXPECT_EQ(aot->functions(), jit->functions());
  ParameterStore params = aot->initParameters(5);
  Tensor ids = randomIds({3, 8}, 1);
  expectIdentical(aot->run("forward", params, {{"idx", ids}})[0],
                  jit->run("forward", params, {{"idx", ids}})[0],
                  "forward logits");
  Trainer aotTrainer(aot, /*seed=*/7), jitTrainer(jit, /*seed=*/7);
  for (int step = 0; step < 2; ++step) {
    std::map<std::string, Arg> batch{{"idx", randomIds({4, 8}, 10 + step)},
                                     {"targets", randomIds({4, 8}, 20 + step)}};
    EXPECT_EQ(aotTrainer.step(batch, 1e-2f), jitTrainer.step(batch, 1e-2f))
        << "loss of step " << step;
  }
  for (const std::string &name : aotTrainer.parameters().names()) {
    expectIdentical(aotTrainer.parameters().get(name),
                    jitTrainer.parameters().get(name), name);
  }
  auto generate = [&](const Executable &exe) {
    Rng rng(11);
    return generateGpt(
        [&](const std::string &graph, const std::map<std::string, Arg> &in) {
          return exe.run(graph, params, in);
        },
        dsl::models::decodeShape(test::tinyLlamaConfig()), {1, 2, 3}, 12,
        {.temperature = 1.0}, rng);
  };
  EXPECT_EQ(generate(*aot), generate(*jit));
}

// A GPT decode step's key and value caches of different lengths (100000
// against 1 had crashed; 4 against 3 read a row past the values) are refused
// before the call, in the ahead-of-time model as in the JIT. (The caches
// are concatenated with new keys and values of a dynamic length: both parts
// of each concatenation are dynamic.)
TEST(Aot, DecodeRefusesCachesThatDisagree) {
  auto aot = std::make_shared<AotModule>(tiny_gpt_model);
  auto jit = jitTinyGpt();
  ParameterStore params = aot->initParameters(2);
  int64_t d = test::tinyGptConfig().dModel;
  int64_t capacity = test::tinyGptConfig().maxSeqLen;
  for (const Executable *exe : {static_cast<const Executable *>(aot.get()),
                                static_cast<const Executable *>(jit.get())}) {
    // Caches of `length` positions, the values' batch `valueBatch`; `n`
    // new positions at `pos`.
    auto decode = [&](int64_t length, int64_t valueBatch, int64_t n,
                      int64_t pos) {
      std::map<std::string, Arg> in{
          {"idx", Tensor::fromVector<int64_t>({1, n},
                                              std::vector<int64_t>(n, 3))},
          {"pos", Arg(pos)}};
      for (int layer = 0; layer < test::tinyGptConfig().numLayers; ++layer) {
        in.emplace(fmt::format("past.{}.key", layer),
                   Tensor::zeros({1, length, d}, DType::f32));
        in.emplace(fmt::format("past.{}.value", layer),
                   Tensor::zeros({valueBatch, length, d}, DType::f32));
      }
      return exe->run("decode", params, in);
    };
    EXPECT_EQ(decode(capacity, 1, 1, 0).size(), size_t(1 + 2 * 2));
    EXPECT_EQ(decode(capacity, 1, 2, capacity - 2).size(), size_t(1 + 2 * 2));
    EXPECT_KILN_ERROR(decode(capacity + 1, 1, 1, 0), "must have shape");
    EXPECT_KILN_ERROR(decode(capacity - 1, 1, 1, 0), "must have shape");
    EXPECT_KILN_ERROR(decode(capacity, 2, 1, 0), "must equal");
    EXPECT_KILN_ERROR(decode(capacity, 1, 2, capacity - 1), "exceed");
    EXPECT_KILN_ERROR(decode(capacity, 1, 1, -1), "exceed");
  }
}

TEST(Aot, TheCEntryPointsCheckTheirArguments) {
  AotModule aot(tiny_gpt_model);
  ParameterStore params = aot.initParameters(5);
  Tensor ids = randomIds({2, 8}, 4);
  Tensor expected = aot.run("forward", params, {{"idx", ids}})[0];

  // The C interface: arguments in the header's order.
  const FunctionSpec &spec = aot.spec("forward");
  ASSERT_EQ(spec.args.size(), size_t(TINY_GPT_FORWARD_NUM_ARGS));
  std::vector<kiln_tensor> args;
  for (const ArgSpec &a : spec.args) {
    args.push_back(cTensor(a.role == ArgSpec::Role::param ? params.get(a.name) : ids));
  }
  kiln_tensor result{};
  ASSERT_EQ(0, tiny_gpt_forward(args.data(), args.size(), &result, 1))
      << kiln_last_error();
  ASSERT_EQ(result.rank, 3);
  EXPECT_EQ(result.shape[0], 2);
  EXPECT_EQ(result.shape[2], test::tinyGptConfig().vocabSize);
  EXPECT_EQ(0, std::memcmp(result.data, expected.raw(),
                           expected.numel() * sizeof(float)));
  kiln_tensor_release(&result);
  EXPECT_EQ(result.data, nullptr);

  kiln_tensor untouched{};
  EXPECT_NE(0, tiny_gpt_forward(args.data(), args.size() - 1, &untouched, 1));
  EXPECT_NE(std::string(kiln_last_error()).find("arguments"), std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(untouched.data, nullptr);

  // A token id past the table, and a wrong rank: refused with the reason.
  Tensor bad = ids.clone();
  bad.data<int64_t>()[5] = 99;
  size_t idx = 0;
  while (spec.args[idx].role == ArgSpec::Role::param) {
    ++idx;
  }
  args[idx].data = bad.raw();
  EXPECT_NE(0, tiny_gpt_forward(args.data(), args.size(), &untouched, 1));
  EXPECT_NE(std::string(kiln_last_error()).find("99"), std::string::npos)
      << kiln_last_error();
  args[idx].data = ids.raw();
  args[idx].rank = 1;
  EXPECT_NE(0, tiny_gpt_forward(args.data(), args.size(), &untouched, 1));
  EXPECT_NE(std::string(kiln_last_error()).find("shape"), std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(untouched.data, nullptr);
}

// train_step through the C interface writes the parameters and moments into
// the caller's buffers: those results point at the arguments, releasing them
// frees nothing of the caller's, and the values equal the C++ call's.
TEST(Aot, TheCTrainingStepUpdatesTheCallersBuffersInPlace) {
  AotModule aot(tiny_gpt_model);
  const FunctionSpec &spec = aot.spec("train_step");
  ASSERT_EQ(spec.args.size(), size_t(TINY_GPT_TRAIN_STEP_NUM_ARGS));
  ASSERT_EQ(spec.results.size(), size_t(TINY_GPT_TRAIN_STEP_NUM_RESULTS));
  ParameterStore params = aot.initParameters(5);
  Tensor ids = randomIds({2, 8}, 4), targets = randomIds({2, 8}, 5);
  // Two copies of every argument: one for C, one for the C++ call.
  std::vector<Tensor> mine, theirs;
  std::vector<Arg> cxx;
  int64_t seed = 11, step = 1;
  for (const ArgSpec &a : spec.args) {
    Tensor t;
    if (a.isScalar) {
      t = Tensor::fromVector<int64_t>({}, {a.name == "step" ? step : seed});
    } else if (a.role == ArgSpec::Role::param) {
      t = params.get(a.name);
    } else if (a.role == ArgSpec::Role::state) {
      t = Tensor::full(a.shape, 0.0f);
    } else if (a.name == "lr") {
      t = Tensor::full({}, 0.01f);
    } else {
      t = a.name == "idx" ? ids : targets;
    }
    mine.push_back(t.clone());
    theirs.push_back(t.clone());
    if (a.isScalar) {
      cxx.emplace_back(t.data<int64_t>()[0]);
    } else {
      cxx.emplace_back(theirs.back());
    }
  }
  std::vector<kiln_tensor> args;
  for (const Tensor &t : mine) {
    args.push_back(cTensor(t));
  }
  std::vector<kiln_tensor> results(spec.results.size());
  ASSERT_EQ(0, tiny_gpt_train_step(args.data(), args.size(), results.data(),
                                   results.size()))
      << kiln_last_error();
  std::vector<Tensor> expected = aot.call("train_step", cxx);
  EXPECT_EQ(0, std::memcmp(results[0].data, expected[0].raw(), sizeof(float)));
  for (size_t r = 1; r < results.size(); ++r) {
    int64_t arg = spec.results[r].updates;
    ASSERT_GE(arg, 0) << "result " << r;
    EXPECT_EQ(results[r].data, mine[arg].raw()) << "result " << r;
    expectIdentical(mine[arg], expected[r], spec.args[arg].name);
  }
  for (kiln_tensor &r : results) {
    kiln_tensor_release(&r);
  }
  // The caller's buffers outlive the release (ASan would see a free).
  expectIdentical(mine[spec.results[1].updates],
                  theirs[spec.results[1].updates], "after release");
}

// The C training step refuses a step below 1 and a learning rate that is
// not finite or is negative (each had made every parameter NaN and
// returned success), and then leaves the caller's buffers as they were.
TEST(Aot, TheCTrainingStepRefusesABadStepOrLearningRate) {
  AotModule aot(tiny_gpt_model);
  const FunctionSpec &spec = aot.spec("train_step");
  ParameterStore params = aot.initParameters(5);
  auto attempt = [&](int64_t step, float lr) {
    std::vector<Tensor> mine;
    for (const ArgSpec &a : spec.args) {
      if (a.isScalar) {
        mine.push_back(
            Tensor::fromVector<int64_t>({}, {a.name == "step" ? step : 3}));
      } else if (a.role == ArgSpec::Role::param) {
        mine.push_back(params.get(a.name).clone());
      } else if (a.role == ArgSpec::Role::state) {
        mine.push_back(Tensor::full(a.shape, 0.0f));
      } else if (a.name == "lr") {
        mine.push_back(Tensor::full({}, lr));
      } else {
        mine.push_back(randomIds({2, 8}, a.name == "idx" ? 4 : 5));
      }
    }
    std::vector<kiln_tensor> args;
    for (const Tensor &t : mine) {
      args.push_back(cTensor(t));
    }
    std::vector<kiln_tensor> results(spec.results.size());
    int status = tiny_gpt_train_step(args.data(), args.size(), results.data(),
                                     results.size());
    std::string error = status ? kiln_last_error() : "";
    for (size_t i = 0; i < spec.args.size(); ++i) {
      if (spec.args[i].role == ArgSpec::Role::param) {
        expectIdentical(mine[i], params.get(spec.args[i].name),
                        spec.args[i].name);
      }
    }
    return error;
  };
  EXPECT_NE(attempt(0, 0.01f).find("'step' of 'train_step' must be at least "
                                   "1, got 0"),
            std::string::npos);
  EXPECT_NE(attempt(-1, 0.01f).find("must be at least 1"), std::string::npos);
  for (float lr : {NAN, INFINITY, -0.01f}) {
    EXPECT_NE(attempt(1, lr).find("'lr' of 'train_step' must be finite and "
                                  ">= 0"),
              std::string::npos)
        << lr;
  }
}

class AotCheckpoint : public test::TempDirTest {};

TEST_F(AotCheckpoint, AWrongCheckpointIsRefusedAndChangesNothing) {
  AotModule aot(tiny_gpt_model);
  ParameterStore params = aot.initParameters(5);
  Tensor before = params.get("wte.weight").clone();

  // A checkpoint missing a tensor, and one with a wrong shape.
  ParameterStore missing, reshaped;
  for (const auto &[name, tensor] : params.namedTensors()) {
    if (name != "ln_f.weight") {
      missing.add(name, tensor.clone());
    }
    reshaped.add(name, name == "wte.weight" ? Tensor::zeros({7, 16}, DType::f32)
                                            : tensor.clone());
  }
  saveCheckpoint(path("missing.safetensors"), missing, {}, {});
  saveCheckpoint(path("reshaped.safetensors"), reshaped, {}, {});
  ParameterStore target = aot.initParameters(9);
  try {
    loadCheckpoint(path("missing.safetensors"), target);
    FAIL() << "a checkpoint without ln_f.weight was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("ln_f.weight"), std::string::npos)
        << e.what();
  }
  try {
    loadCheckpoint(path("reshaped.safetensors"), target);
    FAIL() << "a checkpoint with a wrong shape was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("wte.weight"), std::string::npos)
        << e.what();
  }
  expectIdentical(params.get("wte.weight"), before, "wte.weight");
}
