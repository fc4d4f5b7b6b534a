//===- GpuTest.cpp - The GPU target against the CPU -----------------------===//
//
// Every kiln op (each function of test/Dialect/Kiln/ops.mlir), a GPT and an
// encoder-decoder forward pass, and a few training steps of each, compiled
// for the GPU and for the CPU from the same IR and run on the same inputs:
// results must agree within floating-point tolerance. These need an NVIDIA
// GPU and skip with the reason where there is none. What runs everywhere:
// asking for the GPU where there is none, or for an unknown target, is a
// clear error before anything is compiled.
//
//===----------------------------------------------------------------------===//

#include "Reference.h"

#include "compiler/DSL/DSL.h"
#include "compiler/DSL/Models.h"
#include "compiler/Target/JIT/CompiledModel.h"
#include "compiler/Target/JIT/Jit.h"
#include "compiler/Target/Common/Lowering.h"
#include "compiler/Target/JIT/Training.h"
#include "runtime/Cuda.h"
#include "runtime/Error.h"
#include "runtime/Trainer.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <sstream>

using namespace kiln;

namespace {

std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  return "(no error)";
}

#define SKIP_WITHOUT_GPU()                                                     \
  do {                                                                         \
    std::string why;                                                           \
    if (!cuda::available(&why)) {                                              \
      GTEST_SKIP() << "needs an NVIDIA GPU: " << why;                          \
    }                                                                          \
  } while (false)

/// Skips a test that runs only under ctest's GpuTarget.FakeDriver (the fake
/// driver named by KILN_CUDA_DRIVER).
#define SKIP_WITHOUT_FAKE_DRIVER()                                             \
  do {                                                                         \
    const char *driver = std::getenv("KILN_CUDA_DRIVER");                      \
    if (!driver || !std::strstr(driver, "fake")) {                             \
      GTEST_SKIP() << "runs under ctest's GpuTarget.FakeDriver";               \
    }                                                                          \
  } while (false)

const char *kTinySource = R"(
  func.func @f(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
    %0 = kiln.gelu %x : (tensor<?x8xf32>) -> tensor<?x8xf32>
    return %0 : tensor<?x8xf32>
  })";

/// Inputs for a function: f32 uniform in [0.1, 1.1) (positive, for logs,
/// square roots and Adam's second moments), ids within their tables, i1
/// masks mostly true, dynamic sizes from `dynamic`, scalars 3.
std::vector<Arg> inputsFor(const FunctionSpec &spec, int64_t dynamic,
                           uint64_t seed) {
  std::mt19937_64 rng(seed);
  // Dynamic sizes that must agree share one value; a static member wins.
  std::map<std::pair<size_t, int64_t>, int64_t> sizes;
  for (const DimGroup &group : spec.groups) {
    for (auto dim : group.dims) {
      sizes[dim] = group.size >= 0 ? group.size : dynamic;
    }
  }
  std::vector<Arg> args;
  for (size_t i = 0; i < spec.args.size(); ++i) {
    const ArgSpec &a = spec.args[i];
    if (a.isScalar) {
      args.emplace_back(int64_t(3));
      continue;
    }
    std::vector<int64_t> shape;
    for (size_t d = 0; d < a.shape.size(); ++d) {
      auto found = sizes.find({i, int64_t(d)});
      shape.push_back(a.shape[d] >= 0        ? a.shape[d]
                      : found != sizes.end() ? found->second
                                             : dynamic);
    }
    Tensor t = Tensor::empty(shape, a.dtype);
    for (int64_t k = 0; k < t.numel(); ++k) {
      uint64_t r = rng();
      switch (a.dtype) {
      case DType::f32:
        t.data<float>()[k] = 0.1f + float(r >> 40) / float(1 << 24);
        break;
      case DType::i64:
        t.data<int64_t>()[k] =
            int64_t(r % uint64_t(a.idBound > 0 ? a.idBound : 2));
        break;
      case DType::i32:
        t.data<int32_t>()[k] =
            int32_t(r % uint64_t(a.idBound > 0 ? a.idBound : 2));
        break;
      case DType::i1:
        t.data<bool>()[k] = k == 0 || r % 4 != 0;
        break;
      case DType::bf16:
        t.data<BFloat16>()[k] =
            BFloat16::round(0.1f + float(r >> 40) / float(1 << 24));
        break;
      }
    }
    args.emplace_back(t);
  }
  return args;
}

/// |gpu - cpu| <= atol + rtol |cpu| everywhere (NaN only where both are).
void expectClose(const Tensor &gpu, const Tensor &cpu, const std::string &what,
                 double rtol = 1e-4, double atol = 1e-5) {
  ASSERT_EQ(gpu.shape(), cpu.shape()) << what;
  ASSERT_EQ(gpu.dtype(), cpu.dtype()) << what;
  if (cpu.dtype() != DType::f32) {
    ASSERT_EQ(std::memcmp(gpu.raw(), cpu.raw(), cpu.nbytes()), 0) << what;
    return;
  }
  int64_t bad = 0;
  for (int64_t i = 0; i < cpu.numel(); ++i) {
    double g = gpu.data<float>()[i], c = cpu.data<float>()[i];
    bool ok = std::isnan(c) ? std::isnan(g)
                            : std::abs(g - c) <= atol + rtol * std::abs(c);
    if (!ok && bad++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << g
                    << " on the GPU, " << c << " on the CPU";
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << cpu.numel()
                    << " elements differ";
}

std::string readFile(const std::string &path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

JitOptions gpuOptions(const std::string &gpu) {
  JitOptions options;
  options.gpu = gpu;
  return options;
}

/// The models the tests compile both ways: forward and training loss.
dsl::models::GptConfig gptConfig() {
  dsl::models::GptConfig config = dsl::models::gptTiny();
  config.numLayers = 2;
  return config;
}

void buildGpt(dsl::Module &module) {
  dsl::models::addGptForward(module, gptConfig());
  dsl::models::addGptLoss(module, gptConfig(), {.training = true});
}

const OptimizerConfig kGptOptimizer{
    .kind = "adamw", .weightDecay = 0.1, .clipNorm = 1.0};

void buildEncDec(dsl::Module &module) {
  dsl::models::addEncDecForward(module, dsl::models::encdecTiny());
  dsl::models::addEncDecLoss(module, dsl::models::encdecTiny());
}

const OptimizerConfig kEncDecOptimizer{.kind = "adam"};

/// Three source sentences of 10 tokens (rows 1 and 2 padded after 7) and
/// three targets of 6, for encdecTiny.
std::map<std::string, Arg> encdecInputs() {
  dsl::nn::TransformerConfig config = dsl::models::encdecTiny();
  Tensor mask = Tensor::empty({3, 10}, DType::i1);
  for (int64_t i = 0; i < mask.numel(); ++i) {
    mask.data<bool>()[i] = i % 10 < 7 || i < 10; // padding in rows 1 and 2
  }
  return {{"src", ref::randomIds({3, 10}, config.srcVocab, 4)},
          {"tgt", ref::randomIds({3, 6}, config.tgtVocab, 5)},
          {"src_mask", mask}};
}

/// The optimizers the training steps are compared with, GPU against CPU.
/// Not Adam: it divides each gradient element by its own running norm, so an
/// element whose true gradient is zero (an attention key bias: softmax
/// ignores a shift common to all of a query's scores) steps by about lr in a
/// direction set by rounding noise, which differs between devices (seen on
/// an H200: the w_k biases 3e-4 apart after three steps at lr 1e-3). With
/// SGD a parameter moves by lr times its gradient, so parameters agree as
/// closely as the gradients do. Adam's update itself is compared op by op
/// (@optimizers in ops.mlir); clipping still runs its global-norm reduction.
constexpr float kCompareLr = 0.05f;
const OptimizerConfig kGptCompareOptimizer{
    .kind = "sgd", .momentum = 0.9, .clipNorm = 1.0};
const OptimizerConfig kEncDecCompareOptimizer{.kind = "sgd", .momentum = 0.9};

} // namespace

//===----------------------------------------------------------------------===//
// Everywhere
//===----------------------------------------------------------------------===//

TEST(GpuTarget, UnknownTargetsAreRefusedBeforeCompiling) {
  for (const char *gpu : {"tpu", "cuda", "cuda:sm_90", "sm_4", "volta"}) {
    std::string message = errorOf(
        [&] { JitModule::compileSource(kTinySource, gpuOptions(gpu)); });
    EXPECT_NE(message.find("'" + std::string(gpu) +
                           "' is not an NVIDIA GPU architecture: use native"),
              std::string::npos)
        << message;
  }
}

TEST(GpuTarget, WithoutAGpuTheTargetIsRefusedWithTheReason) {
  std::string why;
  if (cuda::available(&why)) {
    GTEST_SKIP() << "this machine has a GPU";
  }
  for (const char *gpu : {"native", "sm_90"}) {
    std::string message = errorOf(
        [&] { JitModule::compileSource(kTinySource, gpuOptions(gpu)); });
    EXPECT_NE(message.find("the GPU target needs an NVIDIA GPU, but " + why),
              std::string::npos)
        << message;
  }
}

// No GPU is needed to compile: kernels become PTX, host code LLVM IR.
TEST(GpuTarget, EveryOpAndTheModelsTrainingAndDecodingStepsCompileForTheGpu) {
  LoweringOptions options;
  options.gpuChip = "sm_90";
  std::string ops = readFile(KILN_SOURCE_DIR "/test/Dialect/Kiln/ops.mlir");
  ASSERT_FALSE(ops.empty());
  LoweredModule lowered = lowerSourceToLLVMDialect(ops, "ops.mlir", options);
  EXPECT_EQ(lowered.functions.size(), 19u);
  for (auto [build, optimizer] : {std::pair{&buildGpt, kGptOptimizer},
                                  std::pair{&buildEncDec, kEncDecOptimizer}}) {
    dsl::Module module;
    build(module);
    options.prePipeline = trainingStepPipeline("loss", optimizer);
    lowered = lowerToLLVMDialect(module.op(), options);
    EXPECT_EQ(lowered.functions.size(), 3u); // forward, loss, train_step
  }
  // The decoding graphs, whose key/value caches are written in place
  // (kiln.update_slice, attention at an offset), with the caches staged
  // through device buffers (ahead of time) and resident (the JIT's).
  options.prePipeline = {};
  for (bool resident : {false, true}) {
    SCOPED_TRACE(resident ? "resident" : "staged");
    options.gpuResidentState = resident;
    dsl::Module decoding;
    dsl::models::addGptDecode(decoding, gptConfig());
    dsl::models::addEncDecEncode(decoding, dsl::models::encdecTiny());
    dsl::models::addEncDecDecode(decoding, dsl::models::encdecTiny(), 8,
                                 "translate");
    lowered = lowerToLLVMDialect(decoding.op(), options);
    ASSERT_EQ(lowered.functions.size(), 3u); // decode, encode, translate
    // Resident: the parameters and the caches stay the caller's device
    // buffers; the encoder's keys and values, read only, are staged as any
    // input.
    for (const FunctionSpec &fn : lowered.functions) {
      for (const ArgSpec &arg : fn.args) {
        bool cache = arg.name.rfind("past.", 0) == 0;
        bool param = arg.role == ArgSpec::Role::param;
        EXPECT_EQ(arg.onDevice, resident && (cache || param))
            << fn.name << " " << arg.name;
      }
    }
  }
  options.gpuResidentState = false;
  options.gpuChip = "sm_9O";
  EXPECT_NE(errorOf([&] {
              lowerSourceToLLVMDialect(ops, "ops", options);
            }).find("'sm_9O' is not an NVIDIA GPU architecture"),
            std::string::npos);
}

// JitOptions::gpuMath = "tf32" (LoweringOptions::gpuMath) puts the products
// on the tensor cores: the kernels' PTX multiplies with mma.sync on TF32
// operands rounded by cvt.rna, and has no fp32 FMA left in the product's
// kernel. TF32 on a GPU without it (before sm_80), on the CPU, or a math
// mode that does not exist is refused before anything is compiled.
TEST(GpuTarget, Tf32PutsProductsOnTheTensorCores) {
  const char *source = R"(
    func.func @nn(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
      %0 = kiln.matmul %a, %b : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
      return %0 : tensor<?x?xf32>
    })";
  auto ptxOf = [&](const std::string &math) {
    LoweringOptions options;
    options.gpuChip = "sm_80";
    options.gpuMath = math;
    LoweredModule lowered = lowerSourceToLLVMDialect(source, "nn", options);
    std::string text;
    llvm::raw_string_ostream os(text);
    lowered.module->print(os);
    return text;
  };
  std::string tf32 = ptxOf("tf32"), fp32 = ptxOf("fp32"),
              tf32x3 = ptxOf("tf32x3");
  EXPECT_NE(tf32.find("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"),
            std::string::npos);
  EXPECT_NE(tf32x3.find("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"),
            std::string::npos);
  EXPECT_NE(tf32.find("cvt.rna.tf32.f32"), std::string::npos);
  EXPECT_EQ(fp32.find("mma.sync"), std::string::npos);
  EXPECT_NE(fp32.find("fma.rn.f32"), std::string::npos);

  auto refusal = [&](const std::string &chip, const std::string &math) {
    LoweringOptions options;
    options.gpuChip = chip;
    options.gpuMath = math;
    return errorOf([&] { lowerSourceToLLVMDialect(source, "nn", options); });
  };
  EXPECT_NE(refusal("sm_75", "tf32")
                .find("math tf32 (tensor cores, mma.sync) needs an NVIDIA GPU "
                      "of sm_80 or newer, and the code is compiled for "
                      "'sm_75'"),
            std::string::npos);
  EXPECT_NE(refusal("", "tf32").find("GPU math 'tf32' without a GPU"),
            std::string::npos);
  EXPECT_NE(refusal("sm_90", "TF32")
                .find("math 'TF32' is not a GPU math "
                      "mode: use fp32 (the default), tf32, "
                      "tf32x3 or bf16"),
            std::string::npos);
}

// Against test/Unit/Cuda's stand-in driver (ctest's GpuTarget.FakeDriver
// sets KILN_CUDA_DRIVER to it and KILN_FAKE_CUDA_PTX=1): its kernels do
// nothing, but its device pointers crash the host like a GPU's. Compiling for
// the GPU goes through translation to LLVM IR (the gpu.binary embedded
// through the offloading interface), code generation and the loading of the
// PTX; the calls then run the host side of compiled GPU code (allocations,
// copies, launches, frees) for every op (LaunchAndCopyBudgetsHold runs a
// GPT's and an encoder-decoder's forward passes and training steps the same
// way). The results are garbage and not looked at (but finite: the fake
// driver's memory starts zeroed, so the trainer's check of the loss passes
// every time): the JIT crashed on this path before any GPU ran it, and this
// runs it everywhere.
TEST(GpuTarget, HostSideRunsAgainstAFakeDriver) {
  SKIP_WITHOUT_FAKE_DRIVER();
  std::string source = readFile(KILN_SOURCE_DIR "/test/Dialect/Kiln/ops.mlir");
  ASSERT_FALSE(source.empty());
  auto gpu = JitModule::compileSource(source, gpuOptions("native"));
  for (const std::string &name : gpu->functions()) {
    for (int64_t dynamic : {1, 5}) {
      std::vector<Arg> args = inputsFor(gpu->spec(name), dynamic, 17);
      std::vector<Tensor> results = gpu->call(name, args);
      EXPECT_FALSE(results.empty()) << name;
    }
  }
}

// What a GPT's calls cost the GPU, counted by the runtime's profiler against
// the fake driver (the host side is the same as on a GPU): launches per
// call, launches of one block (serial code among them), and the bytes copied
// each way.
// The budgets are today's, so that a change that adds launches, serial
// kernels or copies fails here; lower them as the GPU path improves.
TEST(GpuTarget, LaunchAndCopyBudgetsHold) {
  SKIP_WITHOUT_FAKE_DRIVER();
  dsl::Module module;
  buildGpt(module);
  Trainer trainer(
      compileTraining(module, "loss", kGptOptimizer, gpuOptions("native")), 5);
  dsl::models::GptConfig config = gptConfig();
  Tensor idx = ref::randomIds({4, 32}, config.vocabSize, 3);
  // Before the first step: nothing to copy back yet.
  double parameterBytes = double(trainer.parameters().numParameters()) * 4;
  trainer.run("forward", {{"idx", idx}});
  trainer.step({{"idx", idx}, {"targets", idx}}, 1e-3f);
  struct Cost {
    long launches = 0, serial = 0, copies = 0;
    double in = 0, out = 0;
  };
  auto measure = [](const std::function<void()> &call) {
    kiln::cuda::setProfiling(true);
    call();
    kiln::cuda::setProfiling(false);
    kiln::cuda::Profile p = kiln::cuda::profile();
    Cost c;
    for (const kiln::cuda::KernelProfile &k : p.kernels) {
      c.launches += k.launches;
      c.serial += k.singleThreadLaunches;
    }
    c.in = p.toDevice.bytes;
    c.out = p.toHost.bytes;
    c.copies = long(p.toDevice.count + p.toHost.count);
    return c;
  };
  Cost forward = measure([&] { trainer.run("forward", {{"idx", idx}}); });
  Cost step = measure(
      [&] { trainer.step({{"idx", idx}, {"targets", idx}}, 1e-3f); });
  double batchBytes = double(idx.numel()) * 8;
  RecordProperty("forward_launches", int(forward.launches));
  RecordProperty("step_launches", int(step.launches));
  std::printf("GPT (2 layers) forward: %ld launches (%ld of one thread), "
              "%.0f bytes in, %.0f out; training step: %ld launches (%ld of "
              "one thread), %.0f bytes in, %.0f out; parameters %.0f bytes\n",
              forward.launches, forward.serial, forward.in, forward.out,
              step.launches, step.serial, step.in, step.out, parameterBytes);
  // Launches: one per kernel of each layer, no more than today. A product
  // of one 128 x 128 block over k = 512 (the MLP's down projection forward,
  // its input gradient backward) splits k and launches the kernel that adds
  // the parts: 2 of the forward pass's 36 launches, 4 of the step's 182;
  // the token embedding's gradient sorts the positions by token, then adds
  // the rows (2 launches); attention is one kernel forward
  // (kiln.flash_attention), two backward.
  // The fills that initialize a block reduction or a product launch
  // nothing (kiln-outline-kernels{group-fills}, each op its own fill:
  // kiln-clone-fills-per-use); softmax, layer norm, the loss's per-row
  // terms and its mean are one kernel each (group-rows, a block per row).
  // Without either: 74 and 287; on whole attention scores: 42 and 196.
  EXPECT_LE(forward.launches, 36);
  EXPECT_LE(step.launches, 182);
  // The static cost model (kiln-gpu-cost-model: the same lowering, nothing
  // run) counts the launches and the copies over the host link that the
  // runtime makes at these sizes.
  LoweringOptions lowering;
  lowering.gpuChip = "sm_90";
  lowering.gpuResidentState = true;
  lowering.prePipeline = trainingStepPipeline("loss", kGptOptimizer);
  lowering.functions = {"forward", "train_step"};
  lowering.gpuCostSizes = "idx=4x32,targets=4x32";
  std::map<std::string, GpuCostPrediction> predicted =
      gpuCostPredictions(lowerToLLVMDialect(module.op(), lowering));
  EXPECT_EQ(predicted["forward"].launches, forward.launches);
  EXPECT_EQ(predicted["train_step"].launches, step.launches);
  EXPECT_EQ(predicted["forward"].copies, forward.copies);
  EXPECT_EQ(predicted["train_step"].copies, step.copies);
  EXPECT_GT(predicted["train_step"].milliseconds,
            predicted["forward"].milliseconds);
  // No serial kernel (one thread): no scatter-add, no scalar code on its own.
  EXPECT_EQ(forward.serial, 0);
  EXPECT_EQ(step.serial, 0);
  // Copies: the parameters and AdamW's two moments stay on the device, so
  // a forward pass copies in its batch and out its logits, a training step
  // its batch (ids and targets) and learning rate in and its loss out.
  EXPECT_LE(forward.in, batchBytes + 64);
  EXPECT_LE(forward.out, double(idx.numel()) * config.vocabSize * 4 + 64);
  EXPECT_LE(step.in, 2 * batchBytes + 64);
  EXPECT_LE(step.out, 64);

  // Reading the parameters copies them and the moments out once; the next
  // step copies them back in once (the caller may have changed them), and
  // the one after is back to the batch.
  Cost inspect = measure([&] { trainer.parameters(); });
  EXPECT_EQ(inspect.out, 3 * parameterBytes);
  EXPECT_EQ(inspect.in, 0);
  Cost again = measure([&] { trainer.parameters(); });
  EXPECT_EQ(again.out, 0);
  Cost back = measure(
      [&] { trainer.step({{"idx", idx}, {"targets", idx}}, 1e-3f); });
  EXPECT_GE(back.in, 3 * parameterBytes);
  EXPECT_LE(back.in, 3 * parameterBytes + 2 * batchBytes + 64);
  EXPECT_LE(back.out, 64);
  Cost next = measure(
      [&] { trainer.step({{"idx", idx}, {"targets", idx}}, 1e-3f); });
  EXPECT_LE(next.in, 2 * batchBytes + 64);

  // A compiled model keeps its parameters on the device too: copied in on
  // the first call and after a change through parameters(), not otherwise.
  CompiledModel model(module, 5, gpuOptions("native"));
  const CompiledModel &unchanged = model;
  auto run = [&] { model.run("forward", {{"idx", idx}}); };
  EXPECT_GE(measure(run).in, parameterBytes);
  EXPECT_LE(measure(run).in, batchBytes + 64);
  EXPECT_LE(measure([&] { (void)unchanged.parameters(); run(); }).in,
            batchBytes + 64);
  model.parameters();
  EXPECT_GE(measure(run).in, parameterBytes);

  // Generation keeps its key/value caches on the device: the first decode
  // call copies them in (and the parameters), later ones only the token;
  // only the logits come out. The caches come back as GPU tensors, which
  // the next call takes as they are.
  dsl::Module decoder;
  dsl::models::addGptDecode(decoder, config);
  CompiledModel decoding(decoder, 5, gpuOptions("native"));
  std::map<std::string, Arg> inputs;
  double cacheBytes = 0;
  for (int64_t i = 0; i < config.numLayers; ++i) {
    for (const char *kind : {"key", "value"}) {
      Tensor cache =
          Tensor::zeros({1, config.maxSeqLen, config.dModel}, DType::f32);
      cacheBytes += double(cache.nbytes());
      inputs.emplace("past." + std::to_string(i) + "." + kind, cache);
    }
  }
  for (int64_t pos = 0; pos < 3; ++pos) {
    inputs.insert_or_assign("idx", Tensor::fromVector<int64_t>({1, 1}, {1}));
    inputs.insert_or_assign("pos", Arg(pos));
    std::vector<Tensor> out;
    Cost c = measure([&] { out = decoding.run("decode", inputs); });
    ASSERT_EQ(out.size(), size_t(1 + 2 * config.numLayers));
    EXPECT_FALSE(out[0].onGpu());
    EXPECT_LE(c.out, double(config.vocabSize) * 4 + 64);
    if (pos == 0) {
      EXPECT_GE(c.in, cacheBytes);
    } else {
      EXPECT_LE(c.in, 64) << "decode step " << pos;
    }
    for (int64_t i = 0; i < config.numLayers; ++i) {
      EXPECT_TRUE(out[1 + 2 * i].onGpu());
      inputs.insert_or_assign("past." + std::to_string(i) + ".key",
                              out[1 + 2 * i]);
      inputs.insert_or_assign("past." + std::to_string(i) + ".value",
                              out[2 + 2 * i]);
    }
  }

  // The encoder-decoder (padding mask, cross-attention, label-smoothed
  // loss): its forward pass and Adam training step, to budgets of their
  // own, no serial kernel, the batch in and the result out.
  dsl::Module encdec;
  buildEncDec(encdec);
  dsl::nn::TransformerConfig encdecConfig = dsl::models::encdecTiny();
  Trainer translator(
      compileTraining(encdec, "loss", kEncDecOptimizer, gpuOptions("native")),
      9);
  std::map<std::string, Arg> pairs = encdecInputs();
  std::map<std::string, Arg> labelled = pairs;
  labelled.emplace("targets", ref::randomIds({3, 6}, encdecConfig.tgtVocab, 6));
  double pairBytes = (3 * 10 + 3 * 6) * 8 + 3 * 10;
  EXPECT_EQ(translator.run("forward", pairs)[0].shape(),
            (std::vector<int64_t>{3, 6, encdecConfig.tgtVocab}));
  translator.step(labelled, 1e-3f);
  Cost encdecForward = measure([&] { translator.run("forward", pairs); });
  Cost encdecStep = measure([&] { translator.step(labelled, 1e-3f); });
  std::printf("encoder-decoder forward: %ld launches (%ld of one thread), "
              "%.0f bytes in, %.0f out; training step: %ld launches (%ld of "
              "one thread), %.0f bytes in, %.0f out\n",
              encdecForward.launches, encdecForward.serial, encdecForward.in,
              encdecForward.out, encdecStep.launches, encdecStep.serial,
              encdecStep.in, encdecStep.out);
  // On whole attention scores: 107 and 379.
  EXPECT_LE(encdecForward.launches, 85);
  EXPECT_LE(encdecStep.launches, 329);
  EXPECT_EQ(encdecForward.serial, 0);
  EXPECT_EQ(encdecStep.serial, 0);
  EXPECT_LE(encdecForward.in, pairBytes + 64);
  EXPECT_LE(encdecForward.out, 3.0 * 6 * encdecConfig.tgtVocab * 4 + 64);
  EXPECT_LE(encdecStep.in, pairBytes + 3 * 6 * 8 + 64);
  EXPECT_LE(encdecStep.out, 64);
}

//===----------------------------------------------------------------------===//
// On a GPU
//===----------------------------------------------------------------------===//

TEST(GpuTarget, EveryOpMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  std::string source = readFile(KILN_SOURCE_DIR "/test/Dialect/Kiln/ops.mlir");
  ASSERT_FALSE(source.empty());
  auto cpu = JitModule::compileSource(source);
  auto gpu = JitModule::compileSource(source, gpuOptions("native"));
  ASSERT_EQ(gpu->functions(), cpu->functions());
  for (const std::string &name : cpu->functions()) {
    // 67 crosses the GPU's 64-wide output tiles and 16-wide thread tiles.
    for (int64_t dynamic : {1, 5, 67}) {
      std::vector<Arg> args = inputsFor(cpu->spec(name), dynamic, 17);
      std::vector<Tensor> expected = cpu->call(name, args);
      std::vector<Tensor> actual = gpu->call(name, args);
      ASSERT_EQ(actual.size(), expected.size()) << name;
      for (size_t r = 0; r < expected.size(); ++r) {
        expectClose(actual[r], expected[r],
                    name + " result " + std::to_string(r) + " at size " +
                        std::to_string(dynamic));
      }
    }
  }
}

/// bf16 tensors (DType::bf16: storage in bf16, every op computed in f32
/// between casts, kiln-widen-bf16) in GPU code against the same functions on
/// the CPU: casts, moves and gathers bit for bit; ops that compute, within
/// one bf16 rounding of each other's f32 results (2^-8 relative) with
/// slack for a rounding that lands on the other side and is carried
/// through a second op: 2^-6 relative plus 2^-10 (fixed before the test).
TEST(GpuTarget, Bf16TensorsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  const char *source = R"(
    func.func @to_bf16(%x: tensor<?x?xf32>) -> tensor<?x?xbf16> {
      %0 = kiln.cast %x : (tensor<?x?xf32>) -> tensor<?x?xbf16>
      return %0 : tensor<?x?xbf16>
    }
    func.func @to_f32(%x: tensor<?x?xbf16>) -> tensor<?x?xf32> {
      %0 = kiln.cast %x : (tensor<?x?xbf16>) -> tensor<?x?xf32>
      return %0 : tensor<?x?xf32>
    }
    func.func @moves(%x: tensor<?x?xbf16>) -> (tensor<?x?xbf16>, tensor<?x?xbf16>) {
      %t = kiln.transpose %x [1, 0] : (tensor<?x?xbf16>) -> tensor<?x?xbf16>
      %c = kiln.concat %x, %x {axis = 1 : i64} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
      return %t, %c : tensor<?x?xbf16>, tensor<?x?xbf16>
    }
    func.func @embedding(%ids: tensor<?xi64>, %table: tensor<40x?xbf16>) -> tensor<?x?xbf16> {
      %0 = kiln.embedding %ids, %table : (tensor<?xi64>, tensor<40x?xbf16>) -> tensor<?x?xbf16>
      return %0 : tensor<?x?xbf16>
    }
    func.func @chain(%a: tensor<?x?xbf16>, %b: tensor<?xbf16>) -> tensor<?x?xbf16> {
      %0 = kiln.add %a, %b : (tensor<?x?xbf16>, tensor<?xbf16>) -> tensor<?x?xbf16>
      %1 = kiln.gelu %0 : (tensor<?x?xbf16>) -> tensor<?x?xbf16>
      %2 = kiln.scale %1 {factor = 3.0 : f64} : (tensor<?x?xbf16>) -> tensor<?x?xbf16>
      return %2 : tensor<?x?xbf16>
    }
    func.func @linear(%x: tensor<?x?xbf16>, %w: tensor<?x?xbf16>, %b: tensor<?xbf16>) -> tensor<?x?xbf16> {
      %0 = kiln.linear %x, %w, %b : (tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?xbf16>) -> tensor<?x?xbf16>
      return %0 : tensor<?x?xbf16>
    }
    func.func @layernorm(%x: tensor<?x?xbf16>, %g: tensor<?xbf16>, %b: tensor<?xbf16>) -> tensor<?x?xbf16> {
      %0 = kiln.layernorm %x, %g, %b {eps = 1.0e-5 : f64} : (tensor<?x?xbf16>, tensor<?xbf16>, tensor<?xbf16>) -> tensor<?x?xbf16>
      return %0 : tensor<?x?xbf16>
    }
    func.func @softmax(%x: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
      %0 = kiln.softmax %x {axis = -1 : i64} : (tensor<?x?xbf16>) -> tensor<?x?xbf16>
      return %0 : tensor<?x?xbf16>
    })";
  auto cpu = JitModule::compileSource(source);
  auto gpu = JitModule::compileSource(source, gpuOptions("native"));
  const std::set<std::string> exact = {"to_bf16", "to_f32", "moves",
                                       "embedding"};
  for (const std::string &name : cpu->functions()) {
    for (int64_t dynamic : {1, 5, 67}) {
      std::vector<Arg> args = inputsFor(cpu->spec(name), dynamic, 23);
      std::vector<Tensor> expected = cpu->call(name, args);
      std::vector<Tensor> actual = gpu->call(name, args);
      ASSERT_EQ(actual.size(), expected.size()) << name;
      for (size_t r = 0; r < expected.size(); ++r) {
        std::string what = name + " result " + std::to_string(r) + " at size " +
                           std::to_string(dynamic);
        if (exact.count(name)) {
          expectClose(actual[r], expected[r], what, 0.0, 0.0);
        } else {
          ASSERT_EQ(actual[r].dtype(), DType::bf16) << what;
          expectClose(actual[r].to(DType::f32), expected[r].to(DType::f32),
                      what, std::ldexp(1.0, -6), std::ldexp(1.0, -10));
        }
      }
    }
  }
}

/// Matrix products whose sizes cross the GPU contraction's 128-wide output
/// tiles, its 4-wide runs and 8-deep k steps, and the reduction lengths that
/// split k over several blocks (statically and at run time), against loops
/// in double: |gpu - ref| <= 3e-5 * sum_k |a| |b| + 1e-6 (fp32 rounding of
/// sums of up to 4,099 terms in another order; fixed before the kernels).
/// Matrix products in plain, transposed and batched forms, compiled for
/// `gpu` (this machine's GPU by default) with `math` (JitOptions::gpuMath),
/// against loops in double: |error| at most `tolerance` of sum |a| |b|,
/// plus 1e-6.
void checkContractions(const std::string &math, double tolerance,
                       const std::string &gpu = "native") {
  const char *source = R"(
    func.func @nn(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
      %0 = kiln.matmul %a, %b : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
      return %0 : tensor<?x?xf32>
    }
    func.func @tn(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
      %0 = kiln.matmul %a, %b {transpose_lhs} : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
      return %0 : tensor<?x?xf32>
    }
    func.func @nt(%a: tensor<?x?x?xf32>, %b: tensor<?x?x?xf32>) -> tensor<?x?x?xf32> {
      %0 = kiln.matmul %a, %b {transpose_rhs} : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
      return %0 : tensor<?x?x?xf32>
    }
    func.func @bnn(%a: tensor<?x?x?xf32>, %b: tensor<?x?x?xf32>) -> tensor<?x?x?xf32> {
      %0 = kiln.matmul %a, %b : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
      return %0 : tensor<?x?x?xf32>
    }
    func.func @split(%a: tensor<70x3000xf32>, %b: tensor<3000x90xf32>) -> tensor<70x90xf32> {
      %0 = kiln.matmul %a, %b : (tensor<70x3000xf32>, tensor<3000x90xf32>) -> tensor<70x90xf32>
      return %0 : tensor<70x90xf32>
    })";
  JitOptions options = gpuOptions(gpu);
  options.gpuMath = math;
  auto compiled = JitModule::compileSource(source, options);
  std::mt19937_64 rng(29);
  auto random = [&](std::vector<int64_t> shape) {
    Tensor t = Tensor::empty(shape, DType::f32);
    for (int64_t i = 0; i < t.numel(); ++i) {
      t.data<float>()[i] = float(rng() >> 40) / float(1 << 23) - 1.0f;
    }
    return t;
  };
  // a is [batch, m, k] (tn: [k, m]), b [batch, k, n] (nt: [batch, n, k]).
  auto check = [&](const std::string &name, int64_t batch, int64_t m, int64_t n,
                   int64_t k) {
    bool batched = name == "nt" || name == "bnn", lhsT = name == "tn",
         rhsT = name == "nt";
    auto shapeOf = [&](int64_t rows, int64_t cols) {
      return batched ? std::vector<int64_t>{batch, rows, cols}
                     : std::vector<int64_t>{rows, cols};
    };
    Tensor a = random(lhsT ? shapeOf(k, m) : shapeOf(m, k));
    Tensor b = random(rhsT ? shapeOf(n, k) : shapeOf(k, n));
    std::vector<Tensor> out = compiled->call(name, {a, b});
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].shape(), shapeOf(m, n)) << name;
    std::string what = name + " " + std::to_string(batch) + "x" +
                       std::to_string(m) + "x" + std::to_string(n) + "x" +
                       std::to_string(k);
    int64_t bad = 0;
    for (int64_t p = 0; p < batch; ++p) {
      const float *pa = a.data<float>() + p * m * k;
      const float *pb = b.data<float>() + p * k * n;
      const float *po = out[0].data<float>() + p * m * n;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0, magnitude = 0;
          for (int64_t l = 0; l < k; ++l) {
            double x = lhsT ? pa[l * m + i] : pa[i * k + l];
            double y = rhsT ? pb[j * k + l] : pb[l * n + j];
            sum += x * y;
            magnitude += std::abs(x * y);
          }
          double got = po[i * n + j];
          if (!(std::abs(got - sum) <= tolerance * magnitude + 1e-6) &&
              bad++ < 5) {
            ADD_FAILURE() << math << " " << what << ": [" << p << ", " << i
                          << ", " << j << "] is " << got << ", not " << sum;
          }
        }
      }
    }
    EXPECT_EQ(bad, 0) << what;
  };
  // (m, n, k): one element; empty outputs and an empty reduction; across
  // the 128 tiles and the 4-wide runs; long reductions split at run time
  // (a small grid) and kept whole (a full one: 140 blocks, 264 / 140 = 1);
  // m and n multiples of 4 (16-byte copies of nn's b and tn's a on sm_80
  // and newer) across the tiles, with and without a split.
  std::vector<std::array<int64_t, 3>> sizes = {
      {1, 1, 1},      {0, 5, 7},      {5, 0, 7},      {5, 7, 0},
      {129, 131, 33}, {17, 257, 515}, {65, 33, 4099}, {3, 2, 1030},
      {255, 129, 9},  {1, 300, 777},  {132, 260, 37}, {4, 8, 1030},
      {256, 4, 9}};
  for (const char *name : {"nn", "tn"}) {
    for (auto [m, n, k] : sizes) {
      check(name, 1, m, n, k);
    }
  }
  for (auto [m, n, k] : sizes) {
    check("nt", 3, m, n, k);
  }
  check("nt", 0, 4, 4, 4);
  check("nt", 40, 130, 70, 600);
  check("nt", 140, 65, 33, 300);
  // Batched with b read along n (16-byte copies from each batch's b where
  // n is a multiple of 4), and an empty batch.
  check("bnn", 3, 132, 260, 37);
  check("bnn", 2, 5, 7, 9);
  check("bnn", 0, 4, 4, 4);
  check("split", 1, 70, 90, 3000);
}

TEST(GpuTarget, ContractionsMatchDoubleLoopsAcrossTilesAndSplits) {
  SKIP_WITHOUT_GPU();
  checkContractions("fp32", 3e-5);
}

// Compiled for sm_75, which has no cp.async, the operand tiles go through
// registers into one shared buffer (this machine's GPU, sm_80 or newer,
// runs the code as an older one would); the same sizes and tolerance.
TEST(GpuTarget, ContractionsStagedThroughRegistersMatchDoubleLoops) {
  SKIP_WITHOUT_GPU();
  checkContractions("fp32", 3e-5, "sm_75");
}

/// x times x at every element of a 128 x 1 by 1 x 128 product on this
/// machine's GPU with `math`: a's column is copied by 32 threads one
/// element at a time, b's row by 32 others in runs of 4 (16 bytes at a
/// time on sm_80 and newer), and every warp multiplies its own part of the
/// tile. The tests take an x that rounds up (to nearest) where dropping its
/// low bits, as tensor cores do with what they are given, would round it
/// down: each result shows that both of its operands were rounded, by
/// whichever thread copied them.
std::vector<float> squareOnGpu(const std::string &math, float x) {
  JitOptions options = gpuOptions("native");
  options.gpuMath = math;
  auto gpu = JitModule::compileSource(R"(
    func.func @nn(%a: tensor<128x1xf32>, %b: tensor<1x128xf32>) -> tensor<128x128xf32> {
      %0 = kiln.matmul %a, %b : (tensor<128x1xf32>, tensor<1x128xf32>) -> tensor<128x128xf32>
      return %0 : tensor<128x128xf32>
    })",
                                      options);
  Tensor a = Tensor::empty({128, 1}, DType::f32);
  Tensor b = Tensor::empty({1, 128}, DType::f32);
  std::fill(a.data<float>(), a.data<float>() + 128, x);
  std::fill(b.data<float>(), b.data<float>() + 128, x);
  Tensor out = gpu->call("nn", {a, b})[0];
  return std::vector<float>(out.data<float>(), out.data<float>() + 128 * 128);
}

// TF32 (JitOptions::gpuMath): each operand rounded to nearest with a 10-bit
// mantissa is off by at most 2^-11 of itself, a product by about 2^-10
// (9.8e-4) of |a| |b|; the tolerance is twice that, fixed before the code.
// The products run where the fp32 ones do (the same tiles, splits and
// sums), so the same sizes cross the same boundaries.
TEST(GpuTarget, Tf32ContractionsMatchDoubleLoopsWithinTf32Rounding) {
  SKIP_WITHOUT_GPU();
  checkContractions("tf32", 2e-3);
  // And both operands are rounded to TF32 before they are multiplied:
  // 1 + 3 * 2^-12 (three quarters of TF32's last place above 1) becomes
  // 1 + 2^-10, whose square fp32 holds exactly.
  float up = 1.0f + std::ldexp(1.0f, -10);
  EXPECT_EQ(squareOnGpu("tf32", 1.0f + 3 * std::ldexp(1.0f, -12)),
            std::vector<float>(128 * 128, up * up));
}

// tf32x3: each operand split into two TF32 parts, three tensor-core
// products; only small_a small_b (about 2^-22 of |a| |b|) and the parts'
// own rounding (as small) are lost, so fp32's tolerance holds: 1 + 3 *
// 2^-12 (big 1 + 2^-10, small -2^-12, both exact) squared is 1 + 3 * 2^-11
// + 2^-21, the exact square less small_a small_b = 2^-24.
TEST(GpuTarget, Tf32x3ContractionsMatchDoubleLoopsWithinFp32Tolerance) {
  SKIP_WITHOUT_GPU();
  checkContractions("tf32x3", 3e-5);
  EXPECT_EQ(squareOnGpu("tf32x3", 1.0f + 3 * std::ldexp(1.0f, -12)),
            std::vector<float>(128 * 128, 1.0f + 3 * std::ldexp(1.0f, -11) +
                                              std::ldexp(1.0f, -21)));
}

// bf16 (JitOptions::gpuMath "bf16": the GPU's counterpart of the CPU's bf16
// precision): each operand rounded to nearest even with an 8-bit
// significand is off by at most 2^-8 of itself, a product by 2^-7 + 2^-16
// of |a| |b|, and the sums are fp32's (3e-5 above); fixed before the code.
TEST(GpuTarget, Bf16ContractionsMatchDoubleLoopsWithinBf16Rounding) {
  SKIP_WITHOUT_GPU();
  checkContractions("bf16", std::ldexp(1.0, -7) + std::ldexp(1.0, -16) + 3e-5);
  // 1 + 3 * 2^-9 (three quarters of bf16's last place above 1) becomes
  // 1 + 2^-7.
  float up = 1.0f + std::ldexp(1.0f, -7);
  EXPECT_EQ(squareOnGpu("bf16", 1.0f + 3 * std::ldexp(1.0f, -9)),
            std::vector<float>(128 * 128, up * up));
}

/// The attention kernels (kiln.flash_attention and kiln.flash_attention_grad)
/// against loops in double: forward output and dQ, dK, dV, with query and
/// key lengths across the kernels' 16-row blocks and 32-key tiles (1, 15,
/// 16, 17, 33, 65) and empty ones (no keys: an output of 0, as the sum over
/// no keys), heads of 8, 40 (columns not a multiple
/// of 32) and 128 (the widest) floats, cross-attention, causal with padding
/// (rows that see no key attend to every key), grouped-query heads with
/// dropout, and a cached decoder's queries at an offset. Tolerances (fixed
/// before the kernels): |gpu - ref| <= 2e-5 (1 + |ref|) forward, 1e-4 (1 +
/// |ref|) for the gradients, inputs in [-1, 1).
struct AttentionCase {
  std::string name;
  int64_t heads, kvHeads, headDim;
  bool causal, masked;
  double dropout;
  int64_t cache; // > 0: the keys are a cache this long, queries at `offset`.
};

struct AttentionReference {
  std::vector<double> out, dq, dk, dv;
};

/// Attention and its gradients in double. q [B, Tq, H·dh], k and v [B, Tk,
/// Hkv·dh] of which the first `used` positions are the keys, mask [B, Tk]
/// (non-zero: attend) or empty, g [B, Tq, H·dh].
AttentionReference attentionInDouble(const AttentionCase &c, int64_t B,
                                     int64_t Tq, int64_t Tk, int64_t used,
                                     const Tensor &q, const Tensor &k,
                                     const Tensor &v, const Tensor *mask,
                                     const Tensor &g, uint64_t seed,
                                     int64_t stream) {
  int64_t H = c.heads, dh = c.headDim, G = c.heads / c.kvHeads;
  int64_t D = H * dh, Dkv = c.kvHeads * dh, shift = used - Tq;
  AttentionReference r;
  r.out.assign(B * Tq * D, 0.0);
  r.dq.assign(B * Tq * D, 0.0);
  r.dk.assign(B * Tk * Dkv, 0.0);
  r.dv.assign(B * Tk * Dkv, 0.0);
  auto at = [](const Tensor &t, int64_t i) {
    return double(t.data<float>()[i]);
  };
  std::vector<double> p(used), drop(used), dp(used);
  std::vector<bool> vis(used);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      int64_t kvh = h / G;
      for (int64_t i = 0; i < Tq; ++i) {
        double mx = -1e300;
        for (int64_t j = 0; j < used; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < dh; ++d) {
            dot += at(q, (b * Tq + i) * D + h * dh + d) *
                   at(k, (b * Tk + j) * Dkv + kvh * dh + d);
          }
          vis[j] = (!mask || mask->data<int64_t>()[b * Tk + j] != 0) &&
                   (!c.causal || j <= i + shift);
          p[j] = vis[j] ? dot / std::sqrt(double(dh)) : -1e9;
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < used; ++j) {
          p[j] = std::exp(p[j] - mx);
          sum += p[j];
        }
        double rowDot = 0;
        for (int64_t j = 0; j < used; ++j) {
          p[j] /= sum;
          drop[j] = c.dropout > 0
                        ? ref::dropoutScale(
                              seed, stream, c.dropout,
                              uint64_t(((b * H + h) * Tq + i) * used + j))
                        : 1.0;
          double gv = 0;
          for (int64_t d = 0; d < dh; ++d) {
            gv += at(g, (b * Tq + i) * D + h * dh + d) *
                  at(v, (b * Tk + j) * Dkv + kvh * dh + d);
          }
          dp[j] = drop[j] * gv;
          rowDot += p[j] * dp[j];
        }
        for (int64_t j = 0; j < used; ++j) {
          double ds =
              vis[j] ? p[j] * (dp[j] - rowDot) / std::sqrt(double(dh)) : 0.0;
          for (int64_t d = 0; d < dh; ++d) {
            int64_t qi = (b * Tq + i) * D + h * dh + d;
            int64_t kj = (b * Tk + j) * Dkv + kvh * dh + d;
            r.out[qi] += p[j] * drop[j] * at(v, kj);
            r.dq[qi] += ds * at(k, kj);
            r.dk[kj] += ds * at(q, qi);
            r.dv[kj] += p[j] * drop[j] * at(g, qi);
          }
        }
      }
    }
  }
  return r;
}

void expectNear(const Tensor &actual, const std::vector<double> &expected,
                double tolerance, const std::string &what) {
  ASSERT_EQ(size_t(actual.numel()), expected.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    double got = actual.data<float>()[i];
    if (!(std::abs(got - expected[i]) <=
          tolerance * (1 + std::abs(expected[i]))) &&
        bad++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << got << ", not "
                    << expected[i];
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

TEST(GpuTarget, FlashAttentionMatchesDoubleLoops) {
  SKIP_WITHOUT_GPU();
  std::vector<AttentionCase> cases = {
      {"cross", 2, 2, 8, false, false, 0.0, 0},
      {"causal_padded", 2, 2, 40, true, true, 0.0, 0},
      {"grouped_dropout", 4, 2, 128, true, false, 0.2, 0},
      {"decode", 2, 2, 16, true, false, 0.0, 40},
  };
  std::string source;
  for (const AttentionCase &c : cases) {
    int64_t D = c.heads * c.headDim, Dkv = c.kvHeads * c.headDim;
    std::string qt = "tensor<?x?x" + std::to_string(D) + "xf32>";
    std::string kt = "tensor<?x" +
                     (c.cache ? std::to_string(c.cache) : std::string("?")) +
                     "x" + std::to_string(Dkv) + "xf32>";
    std::string attrs =
        "{num_heads = " + std::to_string(c.heads) +
        " : i64, num_kv_heads = " + std::to_string(c.kvHeads) + " : i64" +
        (c.causal ? ", causal" : "") +
        (c.dropout > 0 ? ", dropout = 0.2 : f64, stream = 3 : i64" : "") + "}";
    if (c.cache) {
      source += "func.func @" + c.name + "(%q: " + qt + ", %k: " + kt +
                ", %v: " + kt + ", %pos: i64) -> " + qt +
                " {\n  %o = kiln.attention %q, %k, %v offset %pos " + attrs +
                " : (" + qt + ", " + kt + ", " + kt + ", i64) -> " + qt +
                "\n  return %o : " + qt + "\n}\n";
      continue;
    }
    std::string mask = c.masked ? " mask %m" : "";
    std::string seed = c.dropout > 0 ? " seed %s" : "";
    std::string extraArgs =
        std::string(c.masked ? ", %m: tensor<?x?xi64>" : "") +
        (c.dropout > 0 ? ", %s: i64" : "");
    std::string extraTypes = std::string(c.masked ? ", tensor<?x?xi64>" : "") +
                             (c.dropout > 0 ? ", i64" : "");
    source += "func.func @" + c.name + "(%q: " + qt + ", %k: " + kt +
              ", %v: " + kt + ", %g: " + qt + extraArgs + ") -> (" + qt + ", " +
              qt + ", " + kt + ", " + kt + ") {\n  %o = kiln.attention " +
              "%q, %k, %v" + mask + seed + " " + attrs + " : (" + qt + ", " +
              kt + ", " + kt + extraTypes + ") -> " + qt +
              "\n  %d:3 = kiln.attention_grad %g, %q, %k, %v output %o" + mask +
              seed + " " + attrs + " : (" + qt + ", " + qt + ", " + kt + ", " +
              kt + ", " + qt + extraTypes + ") -> (" + qt + ", " + kt + ", " +
              kt + ")\n  return %o, %d#0, %d#1, %d#2 : " + qt + ", " + qt +
              ", " + kt + ", " + kt + "\n}\n";
  }
  auto gpu = JitModule::compileSource(source, gpuOptions("native"));
  std::mt19937_64 rng(41);
  auto random = [&](std::vector<int64_t> shape) {
    Tensor t = Tensor::empty(shape, DType::f32);
    for (int64_t i = 0; i < t.numel(); ++i) {
      t.data<float>()[i] = float(rng() >> 40) / float(1 << 23) - 1.0f;
    }
    return t;
  };
  const uint64_t seed = 1234567;
  for (const AttentionCase &c : cases) {
    int64_t D = c.heads * c.headDim, Dkv = c.kvHeads * c.headDim;
    // (B, Tq, Tk; for the decoder: B, Tq, offset).
    std::vector<std::array<int64_t, 3>> sizes =
        c.cache ? std::vector<std::array<int64_t, 3>>{{2, 1, 0},
                                                      {2, 1, 39},
                                                      {1, 5, 20},
                                                      {1, 17, 23}}
        : c.causal
            ? std::vector<std::array<int64_t, 3>>{{1, 1, 1},   {2, 15, 17},
                                                  {2, 16, 16}, {1, 17, 33},
                                                  {2, 33, 65}, {1, 65, 65}}
            : std::vector<std::array<int64_t, 3>>{
                  {1, 1, 1},   {2, 15, 17}, {1, 16, 16},
                  {2, 17, 33}, {1, 33, 65}, {1, 65, 65},
                  {2, 0, 5},   {0, 3, 4},   {1, 3, 0}};
    if (c.name == "grouped_dropout") {
      sizes = {{1, 1, 16}, {1, 17, 33}, {2, 65, 65}};
    }
    for (auto [B, Tq, third] : sizes) {
      int64_t Tk = c.cache ? c.cache : third;
      int64_t used = c.cache ? third + Tq : Tk;
      std::string what = c.name + " " + std::to_string(B) + "x" +
                         std::to_string(Tq) + "x" + std::to_string(third);
      Tensor q = random({B, Tq, D}), k = random({B, Tk, Dkv}),
             v = random({B, Tk, Dkv}), g = random({B, Tq, D});
      Tensor mask = Tensor::empty({B, Tk}, DType::i64);
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t j = 0; j < Tk; ++j) {
          // The last batch row pads its first 20 keys (its first queries
          // see no key: causal blocks then visit every key tile, and the
          // dK/dV kernel every query tile); elsewhere about one key in five
          // is padding.
          mask.data<int64_t>()[b * Tk + j] =
              (b == B - 1 && j < 20) ? 0 : (rng() % 5 != 0);
        }
      }
      std::vector<Arg> args = {q, k, v};
      if (c.cache) {
        args.push_back(third);
      } else {
        args.push_back(g);
        if (c.masked) {
          args.push_back(mask);
        }
        if (c.dropout > 0) {
          args.push_back(int64_t(seed));
        }
      }
      std::vector<Tensor> out = gpu->call(c.name, args);
      AttentionReference ref = attentionInDouble(
          c, B, Tq, Tk, used, q, k, v, c.masked ? &mask : nullptr, g, seed, 3);
      expectNear(out[0], ref.out, 2e-5, what + " output");
      if (!c.cache) {
        expectNear(out[1], ref.dq, 1e-4, what + " dQ");
        expectNear(out[2], ref.dk, 1e-4, what + " dK");
        expectNear(out[3], ref.dv, 1e-4, what + " dV");
      }
    }
  }
}

TEST(GpuTarget, GptForwardAndTrainingStepsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  dsl::Module module;
  buildGpt(module);
  dsl::models::GptConfig config = gptConfig();
  auto cpu = compileTraining(module, "loss", kGptCompareOptimizer);
  auto gpu = compileTraining(module, "loss", kGptCompareOptimizer,
                             gpuOptions("native"));
  Trainer onCpu(cpu, 5), onGpu(gpu, 5);
  Tensor idx = ref::randomIds({4, 32}, config.vocabSize, 3);
  expectClose(onGpu.run("forward", {{"idx", idx}})[0],
              onCpu.run("forward", {{"idx", idx}})[0], "GPT logits");
  for (int step = 0; step < 3; ++step) {
    std::map<std::string, Arg> batch{
        {"idx", ref::randomIds({4, 32}, config.vocabSize, 10 + step)},
        {"targets", ref::randomIds({4, 32}, config.vocabSize, 20 + step)}};
    float c = onCpu.step(batch, kCompareLr),
          g = onGpu.step(batch, kCompareLr);
    EXPECT_NEAR(g, c, 1e-4 * std::abs(c)) << "loss at step " << step;
    if (step == 0) {
      // The GPU trainer keeps its parameters on the device: reading them
      // copies them out, and a change made on the host goes back in before
      // the next step.
      for (Trainer *t : {&onCpu, &onGpu}) {
        Tensor &wte = t->parameters().get("wte.weight");
        for (int64_t i = 0; i < wte.numel(); ++i) {
          wte.data<float>()[i] *= 0.5f;
        }
      }
    }
  }
  for (const std::string &name : onCpu.parameters().names()) {
    expectClose(onGpu.parameters().get(name), onCpu.parameters().get(name),
                name, 1e-3, 1e-5);
  }
}

TEST(GpuTarget, EncoderDecoderForwardAndTrainingStepsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  dsl::Module module;
  buildEncDec(module);
  dsl::nn::TransformerConfig config = dsl::models::encdecTiny();
  auto cpu = compileTraining(module, "loss", kEncDecCompareOptimizer);
  auto gpu = compileTraining(module, "loss", kEncDecCompareOptimizer,
                             gpuOptions("native"));
  Trainer onCpu(cpu, 9), onGpu(gpu, 9);
  std::map<std::string, Arg> inputs = encdecInputs();
  expectClose(onGpu.run("forward", inputs)[0], onCpu.run("forward", inputs)[0],
              "encoder-decoder output");
  for (int step = 0; step < 3; ++step) {
    std::map<std::string, Arg> batch = inputs;
    batch.emplace("targets",
                  ref::randomIds({3, 6}, config.tgtVocab, 30 + step));
    float c = onCpu.step(batch, kCompareLr),
          g = onGpu.step(batch, kCompareLr);
    EXPECT_NEAR(g, c, 1e-4 * std::abs(c)) << "loss at step " << step;
  }
  for (const std::string &name : onCpu.parameters().names()) {
    expectClose(onGpu.parameters().get(name), onCpu.parameters().get(name),
                name, 1e-3, 1e-5);
  }
}
