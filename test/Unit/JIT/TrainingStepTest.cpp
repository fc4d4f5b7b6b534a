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

#include <gtest/gtest.h>

#include <cmath>

using namespace kiln;

namespace {
std::shared_ptr<JitModule> withTrainingStep(const std::string &source,
                                            const std::string &options) {
  JitOptions jit;
  jit.prePipeline = "kiln-training-step{" + options + "},canonicalize";
  return JitModule::compileSource(source, jit);
}
} // namespace

TEST(TrainingStep, SgdMatchesAnIndependentReference) {
  auto jit = withTrainingStep(R"(
    func.func @loss(%x: tensor<?x3xf32> {kiln.kind = "input"},
                    %t: tensor<?xi64> {kiln.kind = "input"},
                    %w: tensor<4x3xf32> {kiln.kind = "param", kiln.name = "w"},
                    %b: tensor<4xf32> {kiln.kind = "param", kiln.name = "b"}) -> tensor<f32> {
      %0 = kiln.linear %x, %w, %b : (tensor<?x3xf32>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<?x4xf32>
      %1 = kiln.cross_entropy %0, %t : (tensor<?x4xf32>, tensor<?xi64>) -> tensor<f32>
      return %1 : tensor<f32>
    })",
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
