//===- TrainingStepTest.cpp - Compiled training steps ---------------------===//
//
// kiln-training-step: loss, gradients and update in one compiled call. SGD
// on softmax regression is compared step by step with an independent
// double-precision implementation; AdamW overfits one batch of a small MLP.
//
//===----------------------------------------------------------------------===//

#include "Reference.h"

#include "compiler/Target/JIT/Jit.h"
#include "runtime/Error.h"
#include "test/Unit/Runtime/ExpectError.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace kiln;

namespace {
const char *kSoftmaxRegression = R"(
    func.func @loss(%x: tensor<?x3xf32> {kiln.kind = "input"},
                    %t: tensor<?xi64> {kiln.kind = "input"},
                    %w: tensor<4x3xf32> {kiln.kind = "param", kiln.name = "w"},
                    %b: tensor<4xf32> {kiln.kind = "param", kiln.name = "b"}) -> tensor<f32> {
      %0 = kiln.linear %x, %w, %b : (tensor<?x3xf32>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<?x4xf32>
      %1 = kiln.cross_entropy %0, %t : (tensor<?x4xf32>, tensor<?xi64>) -> tensor<f32>
      return %1 : tensor<f32>
    })";

bool sameBits(const Tensor &a, const Tensor &b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

std::shared_ptr<JitModule> withTrainingStep(const std::string &source,
                                            const std::string &options) {
  JitOptions jit;
  jit.prePipeline = "kiln-training-step{" + options + "},canonicalize";
  return JitModule::compileSource(source, jit);
}
} // namespace

TEST(TrainingStep, SgdMatchesAnIndependentReference) {
  auto jit = withTrainingStep(kSoftmaxRegression,
                              "optimizer=sgd momentum=0.9 weight-decay=0.01");
  const int n = 5;
  Tensor x = ref::randomTensor({n, 3}, 1, -2, 2);
  Tensor t = Tensor::fromVector<int64_t>({n}, {0, 3, 1, 2, 3});
  Tensor w = ref::randomTensor({4, 3}, 2), b = ref::randomTensor({4}, 3);
  Tensor bw = Tensor::zeros({4, 3}, DType::f32),
         bb = Tensor::zeros({4}, DType::f32);
  std::vector<double> rw(w.data<float>(), w.data<float>() + 12),
      rb(b.data<float>(), b.data<float>() + 4), mw(12, 0.0), mb(4, 0.0);
  for (int64_t step = 1; step <= 4; ++step) {
    std::vector<Tensor> out = jit->call(
        "train_step", {x, t, w, b, bw, bb, Tensor::full({}, 0.5f), step});
    // Reference: softmax regression, mean cross-entropy, torch.optim.SGD.
    double loss = 0;
    std::vector<double> gw(12, 0.0), gb(4, 0.0);
    for (int r = 0; r < n; ++r) {
      double z[4], mx = -1e300, sum = 0;
      for (int o = 0; o < 4; ++o) {
        z[o] = rb[o];
        for (int i = 0; i < 3; ++i) {
          z[o] += rw[o * 3 + i] * x.data<float>()[r * 3 + i];
        }
        mx = std::max(mx, z[o]);
      }
      for (double v : z) {
        sum += std::exp(v - mx);
      }
      int64_t target = t.data<int64_t>()[r];
      loss += (mx + std::log(sum) - z[target]) / n;
      for (int o = 0; o < 4; ++o) {
        double d = (std::exp(z[o] - mx) / sum - (o == target)) / n;
        gb[o] += d;
        for (int i = 0; i < 3; ++i) {
          gw[o * 3 + i] += d * x.data<float>()[r * 3 + i];
        }
      }
    }
    EXPECT_NEAR(out[0].data<float>()[0], loss, 1e-5) << "step " << step;
    auto sgd = [](std::vector<double> &p, std::vector<double> &buf,
                  const std::vector<double> &g) {
      for (size_t i = 0; i < p.size(); ++i) {
        buf[i] = 0.9 * buf[i] + g[i] + 0.01 * p[i];
        p[i] -= 0.5 * buf[i];
      }
    };
    sgd(rw, mw, gw);
    sgd(rb, mb, gb);
    for (int i = 0; i < 12; ++i) {
      EXPECT_NEAR(out[1].data<float>()[i], rw[i], 1e-4) << "w " << i;
    }
    for (int i = 0; i < 4; ++i) {
      EXPECT_NEAR(out[2].data<float>()[i], rb[i], 1e-4) << "b " << i;
    }
    w = out[1];
    b = out[2];
    bw = out[3];
    bb = out[4];
  }
}

TEST(TrainingStep, AdamWOverfitsOneBatch) {
  auto jit =
      withTrainingStep(R"(
    func.func @loss(%x: tensor<?x6xf32> {kiln.kind = "input"},
                    %t: tensor<?xi64> {kiln.kind = "input"},
                    %w1: tensor<16x6xf32> {kiln.kind = "param"}, %b1: tensor<16xf32> {kiln.kind = "param"},
                    %w2: tensor<5x16xf32> {kiln.kind = "param"}, %b2: tensor<5xf32> {kiln.kind = "param"})
        -> tensor<f32> {
      %0 = kiln.linear %x, %w1, %b1 : (tensor<?x6xf32>, tensor<16x6xf32>, tensor<16xf32>) -> tensor<?x16xf32>
      %1 = kiln.gelu %0 : (tensor<?x16xf32>) -> tensor<?x16xf32>
      %2 = kiln.linear %1, %w2, %b2 : (tensor<?x16xf32>, tensor<5x16xf32>, tensor<5xf32>) -> tensor<?x5xf32>
      %3 = kiln.cross_entropy %2, %t : (tensor<?x5xf32>, tensor<?xi64>) -> tensor<f32>
      return %3 : tensor<f32>
    })",
                       "optimizer=adamw weight-decay=0.01 clip-norm=5.0");
  Tensor x = ref::randomTensor({8, 6}, 4, -1, 1);
  Tensor t = ref::randomIds({8}, 5, 5);
  std::vector<Tensor> params = {ref::randomTensor({16, 6}, 6, -0.4f, 0.4f),
                                Tensor::zeros({16}, DType::f32),
                                ref::randomTensor({5, 16}, 7, -0.3f, 0.3f),
                                Tensor::zeros({5}, DType::f32)};
  std::vector<Tensor> state;
  for (const Tensor &p : params) {
    state.push_back(Tensor::zeros(p.shape(), DType::f32));
    state.push_back(Tensor::zeros(p.shape(), DType::f32));
  }
  float first = 0, last = 0;
  for (int64_t step = 1; step <= 150; ++step) {
    std::vector<Arg> args = {x, t};
    for (const Tensor &p : params) {
      args.emplace_back(p);
    }
    for (const Tensor &s : state) {
      args.emplace_back(s);
    }
    args.emplace_back(Tensor::full({}, 0.02f));
    args.emplace_back(step);
    std::vector<Tensor> out = jit->call("train_step", args);
    last = out[0].data<float>()[0];
    if (step == 1) {
      first = last;
    }
    for (size_t k = 0; k < params.size(); ++k) {
      params[k] = out[1 + k];
    }
    for (size_t k = 0; k < state.size(); ++k) {
      state[k] = out[1 + params.size() + k];
    }
  }
  EXPECT_GT(first, 1.0f);
  EXPECT_LT(last, 0.05f) << "loss " << first << " -> " << last;
}

TEST(TrainingStep, AFailingPipelineIsAnErrorWithTheDiagnostics) {
  // The diagnostics are collected in the compiler's own context, which must
  // outlive the collector while the error propagates.
  JitOptions options;
  options.prePipeline = "kiln-training-step{function=nope}";
  try {
    JitModule::compileSource(R"(
      func.func @loss(%x: tensor<4xf32> {kiln.name = "x"}) -> tensor<4xf32> {
        %r = kiln.relu %x : (tensor<4xf32>) -> tensor<4xf32>
        return %r : tensor<4xf32>
      })",
                             options);
    FAIL() << "a training step of a missing function was made";
  } catch (const kiln::Error &e) {
    EXPECT_NE(std::string(e.what()).find("the pipeline"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos)
        << e.what();
  }
}

// The new parameters and moments are written into the arguments (no second
// copy of them during a step): the results are the argument tensors.
TEST(TrainingStep, UpdatesParametersAndStateInPlace) {
  auto jit = withTrainingStep(kSoftmaxRegression, "optimizer=adamw");
  const FunctionSpec &spec = jit->spec("train_step");
  ASSERT_EQ(spec.results.size(), 7u);
  EXPECT_EQ(spec.results[0].updates, -1); // the loss
  for (size_t r = 1; r < 7; ++r) {
    EXPECT_EQ(spec.results[r].updates, int64_t(r + 1)) << "result " << r;
  }
  Tensor x = ref::randomTensor({5, 3}, 1), w = ref::randomTensor({4, 3}, 2),
         b = ref::randomTensor({4}, 3);
  Tensor t = Tensor::fromVector<int64_t>({5}, {0, 3, 1, 2, 3});
  Tensor wm = Tensor::zeros({4, 3}, DType::f32),
         wv = Tensor::zeros({4, 3}, DType::f32),
         bm = Tensor::zeros({4}, DType::f32),
         bv = Tensor::zeros({4}, DType::f32);
  Tensor before = w.clone();
  std::vector<Tensor> out =
      jit->call("train_step", {x, t, w, b, wm, wv, bm, bv,
                               Tensor::full({}, 0.1f), int64_t(1)});
  const Tensor *args[] = {&w, &b, &wm, &wv, &bm, &bv};
  for (size_t k = 0; k < 6; ++k) {
    EXPECT_EQ(out[1 + k].raw(), args[k]->raw()) << "result " << 1 + k;
  }
  EXPECT_FALSE(sameBits(w, before)) << "the step did not update w";
  // AdamW's first step moves every weight by about lr (m̂/√v̂ = ±1).
  for (int64_t i = 0; i < 12; ++i) {
    EXPECT_NEAR(std::fabs(w.data<float>()[i] - before.data<float>()[i]), 0.1,
                1e-3)
        << i;
  }
  x.data<float>()[0] = 0; // inputs are never written: still ours to change
}

// A loss that is NaN or infinite leaves every parameter and moment as it was,
// bit for bit, with SGD and with AdamW (clipping on: the gradients are NaN).
TEST(TrainingStep, ANonFiniteLossChangesNothing) {
  for (const char *options :
       {"optimizer=sgd momentum=0.9", "optimizer=adamw clip-norm=1.0"}) {
    auto jit = withTrainingStep(kSoftmaxRegression, options);
    bool adam = std::string(options).find("adamw") != std::string::npos;
    for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
      Tensor x = ref::randomTensor({5, 3}, 1);
      x.data<float>()[4] = bad;
      Tensor t = Tensor::fromVector<int64_t>({5}, {0, 3, 1, 2, 3});
      // w, b, then the state of each: (w.m, w.v, b.m, b.v) or (w.momentum,
      // b.momentum).
      std::vector<Tensor> state = {ref::randomTensor({4, 3}, 2),
                                   ref::randomTensor({4}, 3),
                                   ref::randomTensor({4, 3}, 4, 0.0f, 1.0f)};
      if (adam) {
        state.push_back(ref::randomTensor({4, 3}, 5, 0.0f, 1.0f));
      }
      state.push_back(ref::randomTensor({4}, 6, 0.0f, 1.0f));
      if (adam) {
        state.push_back(ref::randomTensor({4}, 7, 0.0f, 1.0f));
      }
      std::vector<Tensor> copies;
      std::vector<Arg> args = {x, t};
      for (const Tensor &s : state) {
        copies.push_back(s.clone());
        args.emplace_back(s);
      }
      args.emplace_back(Tensor::full({}, 0.1f));
      args.emplace_back(int64_t(2));
      std::vector<Tensor> out = jit->call("train_step", args);
      EXPECT_FALSE(std::isfinite(out[0].data<float>()[0])) << options;
      for (size_t k = 0; k < state.size(); ++k) {
        EXPECT_TRUE(sameBits(state[k], copies[k]))
            << options << ": argument " << k << " changed";
        EXPECT_TRUE(sameBits(out[1 + k], copies[k]));
      }
    }
  }
}

// An argument updated in place must not share memory with another one.
TEST(TrainingStep, ArgumentsUpdatedInPlaceMustNotShareMemory) {
  auto jit = withTrainingStep(kSoftmaxRegression, "optimizer=adamw");
  Tensor x = ref::randomTensor({5, 3}, 1), w = ref::randomTensor({4, 3}, 2),
         b = ref::randomTensor({4}, 3);
  Tensor t = Tensor::fromVector<int64_t>({5}, {0, 3, 1, 2, 3});
  Tensor wm = Tensor::zeros({4, 3}, DType::f32),
         bm = Tensor::zeros({4}, DType::f32),
         bv = Tensor::zeros({4}, DType::f32);
  Tensor lr = Tensor::full({}, 0.1f);
  Tensor before = w.clone();
  auto expectRefused = [&](const std::vector<Arg> &args,
                           const std::string &what) {
    try {
      jit->call("train_step", args);
      ADD_FAILURE() << what << ": the call was not refused";
    } catch (const kiln::Error &e) {
      EXPECT_NE(std::string(e.what()).find("shares memory with"),
                std::string::npos)
          << e.what();
    }
    EXPECT_TRUE(sameBits(w, before)) << what << ": w was written";
  };
  // The same tensor as both moments of w.
  expectRefused({x, t, w, b, wm, wm, bm, bv, lr, int64_t(1)}, "m = v");
  // A moment that is a view of a parameter's storage (reshape shares it).
  expectRefused({x, t, w, b, wm, w.reshape({4, 3}), bm, bv, lr, int64_t(1)},
                "v = w");
  // An input (read) that is the parameter being written.
  Tensor t4 = Tensor::fromVector<int64_t>({4}, {0, 3, 1, 2});
  expectRefused({w.reshape({4, 3}), t4, w, b, wm,
                 Tensor::zeros({4, 3}, DType::f32), bm, bv, lr, int64_t(1)},
                "x = w");
  // Distinct tensors: accepted.
  jit->call("train_step", {x, t, w, b, wm, Tensor::zeros({4, 3}, DType::f32),
                           bm, bv, lr, int64_t(1)});
  EXPECT_FALSE(sameBits(w, before));
}

// A model input named like an argument the trainer passes ("lr", "step")
// had silently taken its place: the runtime binds arguments by name, so two
// arguments of one name are refused at compile time, naming both. The
// step's own arguments have roles (kiln.kind = "lr", "step"): a runtime
// finds them by role, whatever they are called.
TEST(TrainingStep, AModelInputNamedLikeTheOptimizersOwnIsRefused) {
  std::string source = R"(
    func.func @loss(%x: tensor<?x3xf32> {kiln.kind = "input", kiln.name = "lr"},
                    %t: tensor<?xi64> {kiln.kind = "input"},
                    %w: tensor<4x3xf32> {kiln.kind = "param", kiln.name = "w"}) -> tensor<f32> {
      %0 = kiln.linear %x, %w : (tensor<?x3xf32>, tensor<4x3xf32>) -> tensor<?x4xf32>
      %1 = kiln.cross_entropy %0, %t : (tensor<?x4xf32>, tensor<?xi64>) -> tensor<f32>
      return %1 : tensor<f32>
    })";
  EXPECT_KILN_ERROR(withTrainingStep(source, "optimizer=sgd"),
                    "function 'train_step': arguments #0 and #4 are both "
                    "called 'lr' (the runtime binds arguments by name)");
  auto jit = withTrainingStep(kSoftmaxRegression, "optimizer=sgd");
  const FunctionSpec &spec = jit->spec("train_step");
  std::vector<ArgSpec::Role> roles;
  for (const ArgSpec &a : spec.args) {
    roles.push_back(a.role);
  }
  using R = ArgSpec::Role;
  EXPECT_EQ(roles, (std::vector<R>{R::input, R::input, R::param, R::param,
                                   R::state, R::state, R::learningRate,
                                   R::step}));
}
