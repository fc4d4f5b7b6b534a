//===- ModelGradientsTest.cpp - The reference models differentiate --------===//
//
// kiln-autodiff over the loss graphs of the DSL's reference models (GPT with
// learned positions and a tied head; the encoder-decoder with padding and
// causal masks): the gradient function compiles and runs, every gradient is
// finite, and sampled entries agree with central differences of the
// compiled loss (float, so a wide step and a loose tolerance: this catches a
// wrong sign or a missing path, the per-op tests check the precision).
//
//===----------------------------------------------------------------------===//

#include "../JIT/Reference.h"

#include "compiler/DSL/DSL.h"
#include "compiler/DSL/Models.h"
#include "compiler/InitAll.h"
#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Target/JIT/Jit.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>

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

/// Checks `samples` entries of each parameter gradient against central
/// differences of the compiled loss.
void checkModel(const JitModule &jit, std::vector<Arg> args, int samples) {
  const FunctionSpec &spec = jit.spec("loss_grad");
  std::vector<Tensor> out = jit.call("loss_grad", args);
  size_t result = 1;
  for (size_t i = 0; i < spec.args.size(); ++i) {
    if (!spec.args[i].isParam) {
      continue;
    }
    const Tensor &g = out[result++];
    for (int64_t k = 0; k < g.numel(); ++k) {
      ASSERT_TRUE(std::isfinite(g.data<float>()[k])) << spec.args[i].name;
    }
    Tensor &p = args[i].tensor;
    for (int s = 0; s < samples; ++s) {
      int64_t k = (int64_t(s) * 7919) % p.numel();
      float saved = p.data<float>()[k];
      float h = 1e-2f;
      p.data<float>()[k] = saved + h;
      double up = jit.call("loss", args)[0].data<float>()[0];
      p.data<float>()[k] = saved - h;
      double down = jit.call("loss", args)[0].data<float>()[0];
      p.data<float>()[k] = saved;
      double fd = (up - down) / (2 * h);
      EXPECT_NEAR(g.data<float>()[k], fd, 2e-3 + 5e-2 * std::fabs(fd))
          << spec.args[i].name << "[" << k << "]";
    }
  }
}

/// The module's parameters, initialized as declared, in argument order.
std::vector<Arg> withParameters(const JitModule &jit, std::vector<Arg> inputs) {
  const FunctionSpec &spec = jit.spec("loss");
  Rng rng(3);
  for (const ArgSpec &arg : spec.args) {
    if (arg.isParam) {
      Tensor t = Tensor::empty(arg.shape, DType::f32);
      initialize(t, Init::normal(0.0, 0.3), rng);
      inputs.push_back(t);
    }
  }
  return inputs;
}

} // namespace

TEST(ModelGradients, GptWithLearnedPositionsAndTiedHead) {
  dsl::models::GptConfig config;
  config.vocabSize = 11;
  config.dModel = 8;
  config.numHeads = 2;
  config.numLayers = 2;
  config.dFF = 16;
  config.maxSeqLen = 6;
  dsl::Module module;
  dsl::models::addGptLoss(module, config);
  auto jit = differentiated(module);
  Tensor idx = ref::randomIds({2, 5}, 11, 1),
         targets = ref::randomIds({2, 5}, 11, 2);
  checkModel(*jit, withParameters(*jit, {idx, targets}), 3);
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
  for (int i = 0; i < 8; ++i) {
    mask.data<bool>()[i] = i < 6;
  }
  checkModel(*jit, withParameters(*jit, {src, tgt, mask, targets}), 2);
}
