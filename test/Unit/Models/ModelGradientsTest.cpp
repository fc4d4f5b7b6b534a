//===- ModelGradientsTest.cpp - The reference models differentiate --------===//
//
// kiln-autodiff over the loss graphs of the DSL's reference models (GPT with
// learned positions and a tied head; a Llama with grouped-query attention,
// rotary positions and SwiGLU; the encoder-decoder with padding and
// causal masks): every element of every parameter's gradient agrees with
// central differences of an independent double-precision implementation of
// the model (DoubleReference.h), and the compiled loss with its value.
// At realistic sizes (gptTiny's widths, T = 64, static and dynamic shapes;
// the encoder-decoder without ignore_index at 17-33 positions), where
// central differences of every element would take minutes, the gradients
// are checked element by element at the first, last and tile-boundary
// positions of each parameter and along random directions over all of its
// elements.
//
//===----------------------------------------------------------------------===//

#include "../JIT/Differential.h"
#include "DoubleReference.h"

#include "compiler/DSL/DSL.h"
#include "compiler/DSL/Models.h"
#include "compiler/InitAll.h"
#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Target/JIT/CompiledModel.h"
#include "compiler/Target/JIT/Jit.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numeric>

using namespace kiln;

namespace {

std::shared_ptr<JitModule> differentiated(dsl::Module &module) {
  registerAllPasses();
  mlir::PassManager pm(&module.context());
  EXPECT_TRUE(mlir::succeeded(mlir::kiln::addPipeline(
      pm, "kiln-autodiff{function=loss},canonicalize")));
  EXPECT_TRUE(mlir::succeeded(pm.run(module.op())));
  return JitModule::compile(module.op());
}

using Reference = std::function<double(const dref::Params &)>;

/// Compares the elements `indices` of `g`, the gradient of parameter `name`,
/// with central differences (step 1e-6) of `reference` in `params`; returns
/// how many it compared.
int64_t expectElementsMatch(const Tensor &g, dref::Params &params,
                            const std::string &name,
                            const std::vector<int64_t> &indices,
                            const Reference &reference) {
  dref::Vec &p = params[name];
  for (int64_t k : indices) {
    double saved = p[k], h = 1e-6;
    p[k] = saved + h;
    double up = reference(params);
    p[k] = saved - h;
    double down = reference(params);
    p[k] = saved;
    double fd = (up - down) / (2 * h);
    EXPECT_NEAR(g.data<float>()[k], fd, 1e-4 + 2e-3 * std::fabs(fd))
        << name << "[" << k << "]";
  }
  return int64_t(indices.size());
}

std::vector<int64_t> everyIndex(const Tensor &t) {
  std::vector<int64_t> indices(t.numel());
  std::iota(indices.begin(), indices.end(), 0);
  return indices;
}

/// Checks the gradient of every parameter of `loss_grad` against central
/// differences (step 1e-6) of `reference`, a double-precision loss of the
/// parameters by name: every element (`everyElement`), or, for models too
/// large for that, the elements at each parameter's probe positions
/// (diff::detail::probeIndices: first, last, tile boundaries); and along
/// two random +-1 directions over all of its elements.
void checkModel(const JitModule &jit, const std::vector<Arg> &args,
                const Reference &reference, bool everyElement = true) {
  const FunctionSpec &spec = jit.spec("loss_grad");
  std::vector<Tensor> out = jit.call("loss_grad", args);
  dref::Params params;
  for (size_t i = 0; i < spec.args.size(); ++i) {
    if (spec.args[i].role == ArgSpec::Role::param) {
      std::vector<float> v = args[i].tensor.toVector<float>();
      params[spec.args[i].name] = dref::Vec(v.begin(), v.end());
    }
  }
  double loss = reference(params);
  EXPECT_NEAR(out[0].data<float>()[0], loss, 1e-5 * std::fabs(loss) + 1e-5);
  size_t result = 1;
  int64_t checked = 0;
  for (size_t i = 0; i < spec.args.size(); ++i) {
    if (spec.args[i].role != ArgSpec::Role::param) {
      continue;
    }
    const std::string &name = spec.args[i].name;
    const Tensor &g = out[result++];
    const float *grad = g.data<float>();
    dref::Vec &p = params[name];
    ASSERT_EQ(int64_t(p.size()), g.numel()) << name;
    checked += expectElementsMatch(
        g, params, name,
        everyElement ? everyIndex(g)
                     : diff::detail::probeIndices(spec.args[i].shape),
        reference);
    for (uint32_t trial = 0; trial < 2; ++trial) {
      std::mt19937 gen(1000 + uint32_t(i) * 2 + trial);
      dref::Vec saved = p, v(p.size());
      double dot = 0, scale = 0;
      for (size_t e = 0; e < p.size(); ++e) {
        v[e] = gen() % 2 ? 1.0 : -1.0;
        dot += grad[e] * v[e];
        scale += std::fabs(grad[e]);
      }
      double h = 1e-6;
      for (size_t e = 0; e < p.size(); ++e) {
        p[e] = saved[e] + h * v[e];
      }
      double up = reference(params);
      for (size_t e = 0; e < p.size(); ++e) {
        p[e] = saved[e] - h * v[e];
      }
      double down = reference(params);
      p = saved;
      double fd = (up - down) / (2 * h);
      EXPECT_NEAR(dot, fd, 1e-5 + 1e-3 * scale)
          << name << ": directional derivative " << trial;
    }
  }
  if (everyElement) {
    EXPECT_GT(checked, 500);
  }
}

std::vector<std::vector<int64_t>> rows(const Tensor &ids) {
  int64_t b = ids.shape()[0], t = ids.shape()[1];
  std::vector<std::vector<int64_t>> out(b);
  for (int64_t r = 0; r < b; ++r) {
    out[r].assign(ids.data<int64_t>() + r * t,
                  ids.data<int64_t>() + (r + 1) * t);
  }
  return out;
}

/// The module's parameters, initialized as declared, in argument order.
std::vector<Arg> withParameters(const JitModule &jit, std::vector<Arg> inputs) {
  const FunctionSpec &spec = jit.spec("loss");
  Rng rng(3);
  for (const ArgSpec &arg : spec.args) {
    if (arg.role == ArgSpec::Role::param) {
      Tensor t = Tensor::empty(arg.shape, DType::f32);
      initialize(t, Init::normal(0.0, 0.3), rng);
      inputs.push_back(t);
    }
  }
  return inputs;
}

/// A GPT small enough for central differences of every element.
dsl::models::GptConfig smallGpt(int64_t layers) {
  dsl::models::GptConfig config;
  config.vocabSize = 11;
  config.dModel = 8;
  config.numHeads = 2;
  config.numLayers = layers;
  config.dFF = 16;
  config.maxSeqLen = 6;
  return config;
}

} // namespace

TEST(ModelGradients, GptWithLearnedPositionsAndTiedHead) {
  dsl::models::GptConfig config = smallGpt(2);
  dsl::Module module;
  dsl::models::addGptLoss(module, config);
  auto jit = differentiated(module);
  Tensor idx = ref::randomIds({2, 5}, 11, 1),
         targets = ref::randomIds({2, 5}, 11, 2);
  checkModel(
      *jit, withParameters(*jit, {idx, targets}), [&](const dref::Params &p) {
        return dref::gptLoss(p, 8, 2, 2, 16, 11, rows(idx), rows(targets));
      });
}

// The Llama architecture: RMSNorm, rotary positions, grouped-query attention
// (2 query heads over 1 key/value head), SwiGLU; untied and tied heads.
TEST(ModelGradients, LlamaWithGroupedQueriesAndRotaryPositions) {
  for (bool tied : {false, true}) {
    dsl::models::LlamaConfig config;
    config.vocabSize = 11;
    config.dModel = 8;
    config.numHeads = 2;
    config.numKvHeads = 1;
    config.numLayers = 2;
    config.dFF = 12;
    config.maxSeqLen = 8;
    config.rmsNormEps = 1e-5;
    config.ropeTheta = 100.0;
    config.tiedHead = tied;
    dsl::Module module;
    dsl::models::addLlamaLoss(module, config);
    auto jit = differentiated(module);
    Tensor idx = ref::randomIds({2, 5}, 11, 1),
           targets = ref::randomIds({2, 5}, 11, 2);
    dref::LlamaSizes sizes{8, 2, 1, 2, 12, 11, 1e-5, 100.0, tied};
    checkModel(*jit, withParameters(*jit, {idx, targets}),
               [&](const dref::Params &p) {
                 return dref::llamaLoss(p, sizes, rows(idx), rows(targets));
               });
  }
}

// The C++ API: CompiledModel::gradients returns the loss and every
// parameter's gradient by name, each against central differences of the
// double-precision GPT; a graph that is not a scalar loss, or none, is
// refused.
TEST(ModelGradients, CompiledModelGradientsByName) {
  dsl::models::GptConfig config = smallGpt(1);
  dsl::Module module;
  dsl::models::addGptForward(module, config);
  dsl::models::addGptLoss(module, config);
  CompiledModel model(module, /*seed=*/4);
  Rng rng(9);
  for (const Parameter &p : model.parameters()) {
    Tensor shared = p.tensor; // the store's storage
    initialize(shared, Init::normal(0.0, 0.3), rng);
  }
  Tensor idx = ref::randomIds({2, 5}, 11, 6),
         targets = ref::randomIds({2, 5}, 11, 7);
  LossAndGradients got =
      model.gradients("loss", {{"idx", idx}, {"targets", targets}});
  // The same again, from the function compiled by the first call.
  LossAndGradients again =
      model.gradients("loss", {{"idx", idx}, {"targets", targets}});
  EXPECT_EQ(again.loss, got.loss);

  dref::Params params;
  for (const Parameter &p : model.parameters()) {
    std::vector<float> v = p.tensor.toVector<float>();
    params[p.name] = dref::Vec(v.begin(), v.end());
  }
  auto reference = [&](const dref::Params &p) {
    return dref::gptLoss(p, 8, 2, 1, 16, 11, rows(idx), rows(targets));
  };
  double loss = reference(params);
  EXPECT_NEAR(got.loss, loss, 1e-5 * std::fabs(loss) + 1e-5);
  ASSERT_EQ(got.gradients.size(), model.parameters().size());
  for (const Parameter &p : model.parameters()) {
    ASSERT_TRUE(got.gradients.count(p.name)) << p.name;
    const Tensor &g = got.gradients.at(p.name);
    ASSERT_EQ(g.shape(), p.tensor.shape()) << p.name;
    EXPECT_EQ(g.toVector<float>(), again.gradients.at(p.name).toVector<float>())
        << p.name;
    expectElementsMatch(g, params, p.name, everyIndex(g), reference);
  }

  auto expectError = [&](const std::string &graph, const std::string &what) {
    try {
      model.gradients(graph, {{"idx", idx}, {"targets", targets}});
      ADD_FAILURE() << "expected an error for graph '" << graph << "'";
    } catch (const kiln::Error &e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos)
          << e.what();
    }
  };
  expectError("forward", "gradients of graph 'forward' need a scalar loss as "
                         "its first output, but it returns [?, ?, 11] first");
  expectError("nope", "no function 'nope'");
}

TEST(ModelGradients, EncoderDecoderWithMasks) {
  auto config = dsl::models::encdecTiny();
  config.block.dModel = 8;
  config.block.numHeads = 2;
  config.block.dFF = 16;
  config.srcVocab = config.tgtVocab = 13;
  config.numEncoderLayers = config.numDecoderLayers = 1;
  dsl::Module module;
  dsl::models::addEncDecLoss(module, config);
  auto jit = differentiated(module);
  Tensor src = ref::randomIds({2, 4}, 13, 3),
         tgt = ref::randomIds({2, 3}, 13, 4),
         targets = ref::randomIds({2, 3}, 13, 5);
  Tensor mask = Tensor::zeros({2, 4}, DType::i1);
  std::vector<std::vector<bool>> keep(2, std::vector<bool>(4));
  for (int i = 0; i < 8; ++i) {
    mask.data<bool>()[i] = i < 6; // the second source has 2 pads
    keep[i / 4][i % 4] = i < 6;
  }
  checkModel(*jit, withParameters(*jit, {src, tgt, mask, targets}),
             [&](const dref::Params &p) {
               return dref::encdecLoss(p, 8, 2, 1, 16, 13, rows(src), keep,
                                       rows(tgt), rows(targets));
             });
}

// gptTiny's widths (d 128, 4 heads, d_ff 512, vocabulary 65) with one layer,
// T = 64 (every tile full) and a mean loss without ignore_index: the case
// whose gradients were 16x too large. Static shapes (a graph written with
// fixed sizes) and the dynamic graph of addGptLoss.
TEST(ModelGradients, GptTinyWidthsAtT64StaticAndDynamic) {
  dsl::models::GptConfig config = dsl::models::gptTiny();
  config.numLayers = 1;
  config.maxSeqLen = 64;
  const int64_t batch = 2, seq = 64;
  Tensor idx = ref::randomIds({batch, seq}, 65, 11),
         targets = ref::randomIds({batch, seq}, 65, 12);
  auto reference = [&](const dref::Params &p) {
    return dref::gptLoss(p, 128, 4, 1, 512, 65, rows(idx), rows(targets));
  };
  for (bool dynamic : {false, true}) {
    SCOPED_TRACE(dynamic ? "dynamic shapes" : "static shapes");
    dsl::Module module;
    if (dynamic) {
      dsl::models::addGptLoss(module, config);
    } else {
      dsl::Graph &graph = module.addGraph("loss");
      dsl::Var in = graph.input("idx", {batch, seq}, DType::i64);
      dsl::Var out = graph.input("targets", {batch, seq}, DType::i64);
      dsl::models::Gpt gpt(graph, config);
      graph.finish({dsl::crossEntropy(gpt(in), out)});
    }
    auto jit = differentiated(module);
    checkModel(*jit, withParameters(*jit, {idx, targets}), reference,
               /*everyElement=*/false);
  }
}

// The encoder-decoder with a mean loss without ignore_index (the default
// LossOptions), at sizes that fill and cross 16-wide tiles: 33 source and
// 17 target positions, width 32, 4 heads, vocabulary 33.
TEST(ModelGradients, EncoderDecoderWithoutIgnoreIndexAcrossTiles) {
  auto config = dsl::models::encdecTiny();
  config.srcVocab = config.tgtVocab = 33;
  config.numEncoderLayers = config.numDecoderLayers = 1;
  dsl::Module module;
  dsl::models::addEncDecLoss(module, config);
  auto jit = differentiated(module);
  const int64_t batch = 2, srcLen = 33, tgtLen = 17;
  Tensor src = ref::randomIds({batch, srcLen}, 33, 13),
         tgt = ref::randomIds({batch, tgtLen}, 33, 14),
         targets = ref::randomIds({batch, tgtLen}, 33, 15);
  Tensor mask = Tensor::zeros({batch, srcLen}, DType::i1);
  std::vector<std::vector<bool>> keep(batch, std::vector<bool>(srcLen));
  for (int64_t i = 0; i < batch * srcLen; ++i) {
    bool real = i % srcLen < srcLen - 5 * (i / srcLen); // 0 and 5 pads
    mask.data<bool>()[i] = real;
    keep[i / srcLen][i % srcLen] = real;
  }
  checkModel(
      *jit, withParameters(*jit, {src, tgt, mask, targets}),
      [&](const dref::Params &p) {
        return dref::encdecLoss(p, 32, 4, 1, 64, 33, rows(src), keep, rows(tgt),
                                rows(targets));
      },
      /*everyElement=*/false);
}

namespace {
/// Expects `got` to have `want`'s gradients (f32, the same names and sizes),
/// each within 2^`exponent` of its norm in L2.
void expectGradientsNear(const LossAndGradients &got,
                         const LossAndGradients &want, int exponent) {
  ASSERT_EQ(got.gradients.size(), want.gradients.size());
  for (const auto &[name, g] : want.gradients) {
    ASSERT_TRUE(got.gradients.count(name)) << name;
    ASSERT_EQ(got.gradients.at(name).dtype(), DType::f32) << name;
    std::vector<float> a = got.gradients.at(name).toVector<float>(),
                       b = g.toVector<float>();
    ASSERT_EQ(a.size(), b.size()) << name;
    double difference = 0, norm = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      difference += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
      norm += double(b[i]) * b[i];
    }
    EXPECT_LE(std::sqrt(difference), std::ldexp(std::sqrt(norm), exponent))
        << name << ": |got - want| " << std::sqrt(difference) << ", |want| "
        << std::sqrt(norm);
  }
}

/// The GPT both bf16 tests compare: products wide enough to take every
/// packing path (d 64 = 32 pairs, 65 rows, feed-forward 160), two layers.
dsl::models::GptConfig bf16TestGpt() {
  dsl::models::GptConfig config;
  config.vocabSize = 50;
  config.dModel = 64;
  config.numHeads = 2;
  config.numLayers = 2;
  config.dFF = 160;
  config.maxSeqLen = 16;
  return config;
}
} // namespace

// The bf16 precision (JitOptions::precision) on a whole GPT: its loss and
// every parameter's gradient against the same model compiled in fp32 from
// the same parameters and inputs, with tolerances fixed from bf16's 8-bit
// significand before the code: the loss within 2^-7 of its value, each
// gradient within 2^-4 of its norm (errors of about 2^-8 per product
// operand, through two layers forward and back). Products wide enough to
// take every packing path (d 64 = 32 pairs, 65 rows, feed-forward 160).
// With the host's kernels (AMX's tiles where it has AMX, else vdpbf16ps)
// and with AMX's kernels emulated.
TEST(ModelGradients, Bf16GptAgainstFp32) {
  if (!__builtin_cpu_supports("avx512bf16")) {
    GTEST_SKIP() << "this CPU has no AVX512-BF16 (the refusal is "
                    "Bf16ProductsErrors.RefusedWhereTheTargetLacksAvx512Bf16)";
  }
  dsl::models::GptConfig config = bf16TestGpt();
  dsl::Module module;
  dsl::models::addGptLoss(module, config);
  CompiledModel full(module, /*seed=*/5);
  Tensor idx = ref::randomIds({5, 13}, 50, 21),
         targets = ref::randomIds({5, 13}, 50, 22);
  LossAndGradients want =
      full.gradients("loss", {{"idx", idx}, {"targets", targets}});
  for (std::string kernels : {"auto", "amx-emulated"}) {
    SCOPED_TRACE(kernels);
    JitOptions bf16;
    bf16.precision = "bf16";
    bf16.bf16Kernels = kernels;
    // The emulation's unrolled tile arithmetic takes LLVM's optimizer a
    // while; unoptimized, it computes the same.
    bf16.optLevel = kernels == "amx-emulated" ? 0 : 3;
    CompiledModel reduced(module, /*seed=*/5, bf16);
    LossAndGradients got =
        reduced.gradients("loss", {{"idx", idx}, {"targets", targets}});
    EXPECT_NEAR(got.loss, want.loss, std::ldexp(std::fabs(want.loss), -7));
    EXPECT_NE(got.loss, want.loss) << "no product was rounded to bf16";
    expectGradientsNear(got, want, -4);
  }
}

// A GPT with bf16 activations (GptConfig::activations: every value between
// the embeddings and the logits stored in bf16, computed in f32; f32
// parameters cast where they are used, their gradients cast back; the
// gradients of bf16 values bf16 too) against the same GPT in f32, from the
// same parameters and inputs. Every op's result and every gradient is
// rounded once more than in f32 (about 2^-8 each, through two layers
// forward and back), so the tolerances, fixed before the code, are the
// loss within 2^-6 of its value and each gradient within 2^-3 of its norm.
// Runs on every CPU (the bf16 conversions need no AVX512-BF16), and also
// with the bf16 precision where the host has it.
TEST(ModelGradients, Bf16ActivationsGptAgainstFp32) {
  dsl::models::GptConfig config = bf16TestGpt();
  dsl::Module fp32Module, bf16Module;
  dsl::models::addGptLoss(fp32Module, config);
  config.activations = DType::bf16;
  dsl::models::addGptLoss(bf16Module, config);
  EXPECT_NE(bf16Module.str().find("xbf16>"), std::string::npos);
  Tensor idx = ref::randomIds({5, 13}, 50, 23),
         targets = ref::randomIds({5, 13}, 50, 24);
  CompiledModel full(fp32Module, /*seed=*/7);
  LossAndGradients want =
      full.gradients("loss", {{"idx", idx}, {"targets", targets}});
  std::vector<std::string> precisions = {"fp32"};
  if (__builtin_cpu_supports("avx512bf16")) {
    precisions.push_back("bf16");
  }
  for (const std::string &precision : precisions) {
    SCOPED_TRACE(precision);
    JitOptions options;
    options.precision = precision;
    CompiledModel reduced(bf16Module, /*seed=*/7, options);
    LossAndGradients got =
        reduced.gradients("loss", {{"idx", idx}, {"targets", targets}});
    EXPECT_NEAR(got.loss, want.loss, std::ldexp(std::fabs(want.loss), -6));
    EXPECT_NE(got.loss, want.loss) << "no activation was rounded to bf16";
    expectGradientsNear(got, want, -3);
  }
}
