//===- kiln_bench.cpp - Kiln's side of the benchmark ----------------------===//
//
// The forward pass (eval, mean cross-entropy over every target, reading the
// loss) and the training step (forward, loss, backward and AdamW as one
// compiled call) of the BENCHMARKS.md models, compiled by Kiln: 3 warm-up
// steps, then the median and minimum of the timed steps. For the GPT models
// also inference through the cached decoding graph (addGptDecode): a prefill
// of 512 tokens (batch 1) and 128 tokens decoded one at a time after it
// (generateGpt, greedy), with the bytes each token reads and the bound the
// measured memory bandwidth sets. Prints a table and one
// `RESULT peer=kiln ...` line per measurement (the libtorch peer prints the
// same lines; run.sh puts them side by side). Each model and mode runs in a
// process of its own; its peak resident set is measured from the end of
// compilation on, the JIT compiler's own peak reported apart.
//
//===----------------------------------------------------------------------===//

#include "examples/benchmark/core_latency.h"
#include "examples/benchmark/fma_peak.h"
#include "examples/benchmark/memory_bandwidth.h"

#include <kiln/kiln.h>
// The GPU's profile and device queries, and the GPU cost model's
// prediction (lowering without compiling): not part of the public headers.
#include "compiler/Target/Common/Lowering.h"
#include "compiler/Target/Common/TrainingStep.h"
#include "runtime/Cuda.h"

#include <fmt/format.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace kiln;

namespace {

struct Shape {
  int64_t vocab, d, heads, layers, dff, t, b;
};

/// BENCHMARKS.md's rows: each model's sizes and batch (gpt2's training
/// step at batch 4 of 64 positions).
Shape rowShape(const std::string &model) {
  if (model == "gpt-tiny") {
    return {65, 128, 4, 4, 512, 128, 16};
  }
  if (model == "gpt-small") {
    return {4096, 384, 6, 6, 1536, 256, 8};
  }
  if (model == "gpt2") {
    return {50257, 768, 12, 12, 3072, 64, 4};
  }
  return {8000, 512, 8, 6, 2048, 64, 8}; // encdec
}

// Matmul FLOPs of one forward pass (BENCHMARKS.md: dense T x T attention).
double gptFlops(const Shape &c) {
  double t = c.t, d = c.d;
  return c.b *
         (c.layers * (24 * t * d * d + 4 * t * t * d) + 2 * t * d * c.vocab);
}
// A Llama layer: q and o 2·d² each, k and v 2·d·dkv each, SwiGLU 6·d·dff
// per position, plus 4·T·d of dense attention; the head 2·d·V.
double llamaFlops(const dsl::models::LlamaConfig &c, int64_t b, int64_t t) {
  double d = c.dModel, dkv = c.kvDim(), tt = t;
  double perPosition = 4 * d * d + 4 * d * dkv + 6 * d * c.dFF;
  return b * (c.numLayers * (tt * perPosition + 4 * tt * tt * d) +
              2 * tt * d * c.vocabSize);
}
// Encoder layer 24·S·d² + 4·S²·d; decoder layer 28·T·d² + 4·S·d² (cross
// K|V) + 4·T²·d + 4·T·S·d; head 2·T·d·V (50.50 GFLOP for the doc's model).
double encdecFlops(const Shape &c) {
  double s = c.t, t = c.t, d = c.d;
  double enc = 24 * s * d * d + 4 * s * s * d;
  double dec = 28 * t * d * d + 4 * s * d * d + 4 * t * t * d + 4 * t * s * d;
  return c.b * (c.layers * (enc + dec) + 2 * t * d * c.vocab);
}

Tensor randomIds(int64_t b, int64_t t, int64_t vocab, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int64_t> dist(0, vocab - 1);
  Tensor ids = Tensor::empty({b, t}, DType::i64);
  for (int64_t i = 0; i < b * t; ++i) {
    ids.data<int64_t>()[i] = dist(gen);
  }
  return ids;
}

/// The most this process has had resident (VmHWM), in MiB.
double peakResidentMiB() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) {
      return std::atof(line.c_str() + 6) / 1024.0; // "VmHWM:  123 kB"
    }
  }
  return 0;
}

/// Returns the peak resident set so far (the JIT compiler's, measured
/// right after compiling) and restarts the count, so that the steps'
/// peak is measured apart from the compiler's.
double takeCompilePeak() {
  double peak = peakResidentMiB();
  if (std::FILE *f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f); // resets VmHWM to the current resident set
    std::fclose(f);
  }
  return peak;
}

struct Options {
  std::vector<std::string> models = {"gpt-tiny", "gpt-small", "encdec"};
  std::vector<std::string> modes = {"forward", "train"};
  int steps = 10;
  bool batch1 = true;
  /// The CPU the models are compiled for (JitOptions::cpu).
  std::string cpu = "host";
  /// The GPU they run on (JitOptions::gpu): empty for the CPU, "native"
  /// or an architecture (sm_90).
  std::string gpu;
  /// With gpu: the products' arithmetic (JitOptions::gpuMath), "fp32" or
  /// "tf32"; the RESULT lines name the peer "kiln" or "kiln-tf32".
  std::string gpuMath = "fp32";
  /// CPU code's precision (JitOptions::precision), "fp32" or "bf16"; the
  /// RESULT lines name the peer "kiln" or "kiln-bf16".
  std::string precision = "fp32";
  /// With bf16: the products' kernels (JitOptions::bf16Kernels); any but
  /// "auto" names the peer (kiln-bf16-amx, kiln-bf16-dot).
  std::string bf16Kernels = "auto";
  /// The GPT models' activations (GptConfig::activations): f32, or bf16
  /// (the RESULT lines' peer gains "-bf16act").
  DType activations = DType::f32;
  /// Not empty: instead of running the rows, predict their time on this
  /// GPU (h200, h100, a100) with the static cost model, without a GPU.
  std::string gpuPredict;
  /// Where each compiled stage is written (JitOptions::dumpDirectory).
  std::string dumpDirectory;
  /// On the GPU: after the timed steps, profile a few more (each kernel's
  /// launches and time, the bytes copied each way) and print them per step.
  bool gpuProfile = false;
  /// JitOptions::prepareWeights: unset, the model's default (on for CPUs
  /// without AVX-512); off, the models' weights are transposed inside
  /// every call (to measure what preparing saves); on, prepared.
  std::optional<bool> prepareWeights;
  /// Forward rows: also time the model compiled without prepared weights,
  /// call by call alternating with the prepared one in this process (both
  /// in the same vCPU layout), and print both medians.
  bool preparedAB = false;
  /// Threads (libomp's: OMP_NUM_THREADS, else every core) and their
  /// measured FMA peak.
  int threads = 1;
  double peak = 0;
  /// The measured DRAM read bandwidth, GB/s (decode rows only).
  double bandwidth = 0;
};

/// How every model is compiled: for options.cpu, run on options.gpu when
/// given.
/// The name of this side in RESULT, PROFILE and KERNEL lines.
std::string peerName(const Options &options) {
  std::string activations =
      options.activations == DType::bf16 ? "-bf16act" : "";
  if (options.precision != "fp32") {
    std::string kernels =
        options.bf16Kernels == "auto" ? "" : "-" + options.bf16Kernels;
    return "kiln-" + options.precision + kernels + activations;
  }
  return (options.gpuMath == "fp32" ? "kiln" : "kiln-" + options.gpuMath) +
         activations;
}

JitOptions jitOptions(const Options &options) {
  JitOptions jit;
  jit.cpu = options.cpu;
  jit.gpu = options.gpu;
  jit.gpuMath = options.gpuMath;
  jit.precision = options.precision;
  jit.bf16Kernels = options.bf16Kernels;
  jit.dumpDirectory = options.dumpDirectory;
  jit.prepareWeights = options.prepareWeights;
  return jit;
}

/// Runs `step` a few times with GPU profiling on and prints, per step, the
/// launches, the kernels' time and the bytes copied, then the kernels that
/// took the most time.
void printGpuProfile(const std::string &peer, const std::string &name,
                     const std::string &mode,
                     const std::function<float()> &step) {
  constexpr int kSteps = 2, kKernels = 15;
  kiln::cuda::setProfiling(true);
  for (int i = 0; i < kSteps; ++i) {
    step();
  }
  kiln::cuda::setProfiling(false);
  kiln::cuda::Profile profile = kiln::cuda::profile();
  long launches = 0, serial = 0;
  double total = 0;
  for (const kiln::cuda::KernelProfile &k : profile.kernels) {
    launches += k.launches;
    serial += k.singleThreadLaunches;
    total += k.milliseconds;
  }
  auto mib = [&](const kiln::cuda::Profile::Copies &c) {
    return c.bytes / kSteps / (1 << 20);
  };
  fmt::print("PROFILE peer={} model={} mode={} launches_per_step={} "
             "single_thread_launches_per_step={} "
             "kernels={} kernel_ms_per_step={:.3f} to_device_mib={:.3f} "
             "to_device_copies={} to_host_mib={:.3f} to_host_copies={} "
             "on_device_mib={:.3f}\n",
             peer, name, mode, launches / kSteps, serial / kSteps,
             profile.kernels.size(), total / kSteps, mib(profile.toDevice),
             profile.toDevice.count / kSteps, mib(profile.toHost),
             profile.toHost.count / kSteps, mib(profile.onDevice));
  for (size_t i = 0; i < profile.kernels.size() && i < size_t(kKernels); ++i) {
    const kiln::cuda::KernelProfile &k = profile.kernels[i];
    fmt::print("KERNEL peer={} model={} mode={} ms_per_step={:.3f} "
               "share={:.1f}% launches_per_step={} grid={}x{}x{} "
               "block={}x{}x{} name={}\n",
               peer, name, mode, k.milliseconds / kSteps,
               total > 0 ? 100 * k.milliseconds / total : 0.0,
               k.launches / kSteps, k.grid[0], k.grid[1], k.grid[2], k.block[0],
               k.block[1], k.block[2], k.name);
  }
}

void measure(const std::string &name, const std::string &mode, const Shape &c,
             double flops, const Options &options, double compilePeak,
             const std::function<float()> &step) {
  std::vector<double> ms;
  float first = 0, last = 0;
  double roundTripBefore = kiln::bench::measureCoreRoundTripNs();
  for (int i = 0; i < 3 + options.steps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    last = step();
    auto t1 = std::chrono::steady_clock::now();
    if (i == 0) {
      first = last;
    }
    if (i >= 3) {
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
  }
  double roundTripAfter = kiln::bench::measureCoreRoundTripNs();
  if (options.gpuProfile) {
    printGpuProfile(peerName(options), name, mode, step);
  }
  std::sort(ms.begin(), ms.end());
  if (mode == "train") {
    flops *= 3; // BENCHMARKS.md: training = 3 x forward
  }
  double median = ms.size() % 2
                      ? ms[ms.size() / 2]
                      : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
  double gflops = flops * 1e-9 / (median * 1e-3);
  // The steps' peak: resident memory from the end of compilation on,
  // including what the compiler left resident (its own peak is reported
  // apart); and the resident set after the steps.
  double peak = peakResidentMiB();
  long pages = 0, resident = 0;
  if (std::FILE *statm = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(statm, "%ld %ld", &pages, &resident) != 2) {
      resident = 0;
    }
    std::fclose(statm);
  }
  double residentMiB =
      double(resident) * double(sysconf(_SC_PAGESIZE)) / (1 << 20);
  // The most the compiled code had allocated at once (blocks of 256 KiB and
  // more: activations and temporaries), or its planned arena.
  memory::Stats stats = memory::stats();
  double livePeak =
      double(std::max(stats.peakLiveBytes, stats.arenaBytes)) / (1 << 20);
  fmt::print("{:<10} {:<11} {:>9.2f} ms  {:>9.0f} tok/s  {:>6.1f} GFLOP/s  "
             "{:>5.1f}% of peak  peak RSS {:>5.0f} MiB (now {:.0f}, JIT "
             "compiler {:.0f}, buffers live at once {:.0f}), core round "
             "trip {:.0f} ns before, {:.0f} after\n",
             name, mode, median, c.b * c.t / (median * 1e-3), gflops,
             (options.peak > 0 ? 100 * gflops / options.peak : 0.0), peak,
             residentMiB, compilePeak, livePeak, roundTripBefore,
             roundTripAfter);
  fmt::print("RESULT peer={} model={} mode={} median_ms={:.2f} min_ms={:.2f} "
             "tokens_per_s={:.0f} gflops={:.1f} peak_pct={:.1f} rss_mib={:.0f} "
             "rss_now_mib={:.0f} jit_rss_mib={:.0f} live_peak_mib={:.0f} "
             "loss_first={:.4f} loss_last={:.4f} core_ns_before={:.0f} "
             "core_ns_after={:.0f}\n",
             peerName(options), name, mode, median, ms.front(),
             c.b * c.t / (median * 1e-3), gflops,
             (options.peak > 0 ? 100 * gflops / options.peak : 0.0), peak,
             residentMiB, compilePeak, livePeak, first, last, roundTripBefore,
             roundTripAfter);
  std::fflush(stdout);
}

/// Times `prepared` and `unprepared` (the same step of a model compiled
/// with and without JitOptions::prepareWeights) call by call in turn, so
/// that both see the same vCPU layout, and prints their medians.
void measurePreparedAB(const std::string &name, const std::string &mode,
                       const Options &options,
                       const std::function<float()> &prepared,
                       const std::function<float()> &unprepared) {
  std::vector<double> ms[2];
  float loss[2] = {0, 0};
  for (int i = 0; i < 3 + 2 * options.steps; ++i) {
    for (int side = 0; side < 2; ++side) {
      auto t0 = std::chrono::steady_clock::now();
      loss[side] = side == 0 ? prepared() : unprepared();
      auto t1 = std::chrono::steady_clock::now();
      if (i >= 3) {
        ms[side].push_back(
            std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
    }
  }
  double median[2];
  for (int side = 0; side < 2; ++side) {
    std::sort(ms[side].begin(), ms[side].end());
    size_t n = ms[side].size();
    median[side] =
        n % 2 ? ms[side][n / 2] : (ms[side][n / 2 - 1] + ms[side][n / 2]) / 2;
  }
  fmt::print("AB model={} mode={} prepared_ms={:.2f} unprepared_ms={:.2f} "
             "unprepared/prepared={:.3f} loss_prepared={:.4f} "
             "loss_unprepared={:.4f} core_ns={:.0f}\n",
             name, mode, median[0], median[1], median[1] / median[0], loss[0],
             loss[1], kiln::bench::measureCoreRoundTripNs());
  std::fflush(stdout);
}

bool wants(const Options &options, const std::string &mode) {
  return std::find(options.modes.begin(), options.modes.end(), mode) !=
         options.modes.end();
}

/// BENCHMARKS.md's training step: AdamW lr 3e-4, betas 0.9/0.999, eps 1e-8,
/// weight decay 0.01 on every parameter, no clipping.
void benchTrain(const std::string &name, const dsl::Module &module,
                const Shape &shape, double flops, const Options &options,
                const std::map<std::string, Arg> &inputs) {
  OptimizerConfig adamw;
  adamw.weightDecay = 0.01;
  auto start = std::chrono::steady_clock::now();
  Trainer trainer(
      compileTraining(module, "loss", adamw, jitOptions(options)), 1);
  fmt::print(
      "{}: training step compiled in {:.1f} s\n", name,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count());
  double compilePeak = takeCompilePeak();
  measure(name, "train", shape, flops, options, compilePeak,
          [&] { return trainer.step(inputs, 3e-4f); });
}

void benchGpt(const std::string &name, dsl::models::GptConfig config,
              const Shape &shape, const Options &options, bool batch1) {
  dsl::Module module;
  config.activations = options.activations;
  dsl::models::addGptLoss(module, config);
  Tensor idx = randomIds(shape.b, shape.t, shape.vocab, 1);
  Tensor targets = randomIds(shape.b, shape.t, shape.vocab, 2);
  if (wants(options, "train")) {
    benchTrain(name, module, shape, gptFlops(shape), options,
               {{"idx", idx}, {"targets", targets}});
  }
  // forward-b1 alone: the batch-1 row without the full batch (to profile).
  bool full = wants(options, "forward");
  batch1 = batch1 && (full || wants(options, "forward-b1"));
  if (!full && !batch1) {
    return;
  }
  auto start = std::chrono::steady_clock::now();
  CompiledModel model(module, 1, jitOptions(options));
  fmt::print(
      "{}: compiled in {:.1f} s\n", name,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count());
  double compilePeak = takeCompilePeak();
  if (full) {
    measure(name, "forward", shape, gptFlops(shape), options, compilePeak,
            [&] {
              return model.run("loss", {{"idx", idx}, {"targets", targets}})[0]
                  .data<float>()[0];
            });
  }
  Shape one = shape;
  one.b = 1;
  Tensor idx1 = randomIds(1, shape.t, shape.vocab, 3);
  Tensor targets1 = randomIds(1, shape.t, shape.vocab, 4);
  if (batch1) {
    measure(name, "forward-b1", one, gptFlops(one), options, compilePeak, [&] {
      return model.run("loss", {{"idx", idx1}, {"targets", targets1}})[0]
          .data<float>()[0];
    });
  }
  if (options.preparedAB) {
    JitOptions off = jitOptions(options);
    off.prepareWeights = false;
    CompiledModel unprepared(module, 1, off);
    auto run = [](const CompiledModel &m, const Tensor &i, const Tensor &t) {
      return m.run("loss", {{"idx", i}, {"targets", t}})[0].data<float>()[0];
    };
    if (full) {
      measurePreparedAB(
          name, "forward", options, [&] { return run(model, idx, targets); },
          [&] { return run(unprepared, idx, targets); });
    }
    if (batch1) {
      measurePreparedAB(
          name, "forward-b1", options,
          [&] { return run(model, idx1, targets1); },
          [&] { return run(unprepared, idx1, targets1); });
    }
  }
}

/// llama-small (gpt-small's sizes as a Llama-architecture model): the
/// training step and the forward pass over the loss, batch 8 of 256.
void benchLlama(const std::string &name, const Options &options) {
  dsl::models::LlamaConfig config = dsl::models::llamaSmall();
  constexpr int64_t kBatch = 8;
  int64_t t = config.maxSeqLen;
  dsl::Module module;
  dsl::models::addLlamaLoss(module, config);
  Tensor idx = randomIds(kBatch, t, config.vocabSize, 1);
  Tensor targets = randomIds(kBatch, t, config.vocabSize, 2);
  Shape shape{config.vocabSize,
              config.dModel,
              config.numHeads,
              config.numLayers,
              config.dFF,
              t,
              kBatch};
  double flops = llamaFlops(config, kBatch, t);
  if (wants(options, "train")) {
    benchTrain(name, module, shape, flops, options,
               {{"idx", idx}, {"targets", targets}});
  }
  if (wants(options, "forward")) {
    CompiledModel model(module, 1, jitOptions(options));
    double compilePeak = takeCompilePeak();
    measure(name, "forward", shape, flops, options, compilePeak, [&] {
      return model.run("loss", {{"idx", idx}, {"targets", targets}})[0]
          .data<float>()[0];
    });
  }
}

/// Inference through the decoding graph: "prefill" runs 512 positions of
/// one sequence into empty caches (tokens/s); "decode" continues a
/// 16-token prompt by 128 tokens one at a time (generateGptBatch, greedy:
/// each call reads every weight once, and the cache so far); "decode-b4"
/// continues four such prompts together (each call reads every weight once
/// for four tokens). The bound is the measured bandwidth over the bytes a
/// token must read: every parameter (the tied head's table once) per call,
/// shared by the call's tokens, plus each sequence's cached keys and values.
void benchGptDecode(const std::string &name, dsl::models::GptConfig config,
                    const std::string &mode, const Options &options) {
  dsl::Module module;
  dsl::models::addGptDecode(module, config);
  auto start = std::chrono::steady_clock::now();
  CompiledModel model(module, 1, jitOptions(options));
  fmt::print(
      "{}: decoding graph compiled in {:.1f} s\n", name,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count());
  double compilePeak = takeCompilePeak();
  GptShape shape = dsl::models::decodeShape(config);
  GraphRunner run = [&](const std::string &graph,
                        const std::map<std::string, Arg> &inputs) {
    return model.run(graph, inputs);
  };
  if (mode == "prefill") {
    constexpr int64_t kPrefill = 512;
    Tensor idx = randomIds(1, kPrefill, config.vocabSize, 8);
    std::map<std::string, Arg> inputs = {{"idx", idx}, {"pos", Arg(int64_t(0))}};
    for (int64_t i = 0; i < config.numLayers; ++i) {
      for (const char *kind : {"key", "value"}) {
        inputs.emplace(
            fmt::format("past.{}.{}", i, kind),
            Tensor::zeros({1, config.maxSeqLen, config.dModel}, DType::f32));
      }
    }
    double t = kPrefill, d = config.dModel;
    // Every position through every layer; the head for the last one.
    double flops = config.numLayers * (24 * t * d * d + 4 * t * t * d) +
                   2 * d * double(config.vocabSize);
    Shape one{config.vocabSize, config.dModel, config.numHeads,
              config.numLayers, config.dFF, kPrefill, 1};
    measure(name, "prefill", one, flops, options, compilePeak, [&] {
      return model.run("decode", inputs)[0].data<float>()[0];
    });
    return;
  }
  // decode: one sequence; decode-b4: four sequences together (one call per
  // position for all four, the weights read once for them).
  constexpr int64_t kPrompt = 16, kTokens = 128;
  int64_t batch = mode == "decode-b4" ? 4 : 1;
  std::vector<std::vector<int64_t>> prompts(batch,
                                            std::vector<int64_t>(kPrompt));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < kPrompt; ++i) {
      prompts[b][i] = (i * 7919 + b * 104729) % config.vocabSize;
    }
  }
  SamplingOptions greedy;
  greedy.temperature = 0;
  Rng rng(1);
  // A warm-up: the first calls page the weights in and size the buffers.
  generateGptBatch(run, shape, prompts, 8, greedy, rng);
  std::vector<double> ms;
  auto last = std::chrono::steady_clock::now();
  double roundTripBefore = kiln::bench::measureCoreRoundTripNs();
  last = std::chrono::steady_clock::now();
  auto first = last;
  generateGptBatch(
      run, shape, prompts, kTokens + 1, greedy, rng,
      [&](const std::vector<int64_t> &) {
        auto now = std::chrono::steady_clock::now();
        ms.push_back(
            std::chrono::duration<double, std::milli>(now - last).count());
        last = now;
      });
  double roundTripAfter = kiln::bench::measureCoreRoundTripNs();
  // Token 0 came from the prompt's prefill; tokens 1..kTokens one at a time.
  double total = std::chrono::duration<double, std::milli>(last - first).count() -
                 ms.front();
  ms.erase(ms.begin());
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  double median = sorted[sorted.size() / 2];
  double tokensPerSecond = double(batch * kTokens) / (total * 1e-3);
  double parameterBytes = double(model.parameters().numParameters()) * 4;
  // The caches read per position, on average over the decoded positions.
  double meanContext = kPrompt + (kTokens + 1) / 2.0;
  double cacheBytes =
      2.0 * config.numLayers * meanContext * config.dModel * 4 * batch;
  // Bytes read per call; each call yields `batch` tokens.
  double bytesPerToken = (parameterBytes + cacheBytes) / batch;
  double bound = options.bandwidth * 1e9 / bytesPerToken;
  fmt::print("{:<10} {:<11} {:>9.2f} ms  {:>9.1f} tok/s  {:.0f} MB a token, "
             "{:.1f} GB/s read: bound {:.1f} tok/s, {:.1f}% of it  peak RSS "
             "{:>5.0f} MiB (JIT compiler {:.0f}), core round trip {:.0f} ns "
             "before, {:.0f} after\n",
             name, mode, median, tokensPerSecond, bytesPerToken * 1e-6,
             options.bandwidth, bound, 100 * tokensPerSecond / bound,
             peakResidentMiB(), compilePeak, roundTripBefore, roundTripAfter);
  fmt::print("RESULT peer=kiln model={} mode={} median_ms={:.2f} "
             "min_ms={:.2f} tokens_per_s={:.1f} bytes_per_token={:.0f} "
             "bandwidth_gbs={:.1f} bound_tokens_per_s={:.1f} bound_pct={:.1f} "
             "rss_mib={:.0f} jit_rss_mib={:.0f} core_ns_before={:.0f} "
             "core_ns_after={:.0f}\n",
             name, mode, median, sorted.front(), tokensPerSecond, bytesPerToken,
             options.bandwidth, bound, 100 * tokensPerSecond / bound,
             peakResidentMiB(), compilePeak, roundTripBefore, roundTripAfter);
  std::fflush(stdout);
}

void benchEncDec(const Options &options) {
  Shape shape = rowShape("encdec");
  dsl::Module module;
  dsl::models::addEncDecLoss(module, dsl::models::encdecBase());
  Tensor src = randomIds(shape.b, shape.t, shape.vocab, 5);
  Tensor tgt = randomIds(shape.b, shape.t, shape.vocab, 6);
  Tensor targets = randomIds(shape.b, shape.t, shape.vocab, 7);
  Tensor srcMask = Tensor::zeros({shape.b, shape.t}, DType::i1);
  std::fill(srcMask.data<bool>(), srcMask.data<bool>() + srcMask.numel(), true);
  if (wants(options, "train")) {
    benchTrain("encdec", module, shape, encdecFlops(shape), options,
               {{"src", src},
                {"tgt", tgt},
                {"src_mask", srcMask},
                {"targets", targets}});
  }
  if (!wants(options, "forward")) {
    return;
  }
  auto start = std::chrono::steady_clock::now();
  CompiledModel model(module, 1, jitOptions(options));
  fmt::print(
      "encdec: compiled in {:.1f} s\n",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count());
  double compilePeak = takeCompilePeak();
  auto run = [&](const CompiledModel &m) {
    return m
        .run("loss", {{"src", src},
                      {"tgt", tgt},
                      {"src_mask", srcMask},
                      {"targets", targets}})[0]
        .data<float>()[0];
  };
  measure("encdec", "forward", shape, encdecFlops(shape), options, compilePeak,
          [&] { return run(model); });
  if (options.preparedAB) {
    JitOptions off = jitOptions(options);
    off.prepareWeights = false;
    CompiledModel unprepared(module, 1, off);
    measurePreparedAB(
        "encdec", "forward", options, [&] { return run(model); },
        [&] { return run(unprepared); });
  }
}

/// The row `model`/`mode` predicted by the GPU cost model
/// (kiln-gpu-cost-model) for options.gpuPredict: the model lowered for the
/// GPU as the JIT lowers it (sm_90, parameters resident) at the row's
/// sizes, nothing run. Prints a PREDICT line like the RESULT lines.
void predictRow(const std::string &model, const std::string &mode,
                const Options &options) {
  dsl::Module module;
  Shape shape = rowShape(model);
  int64_t b = mode == "forward-b1" ? 1 : shape.b, t = shape.t;
  std::vector<std::string> inputs = {"idx", "targets"};
  if (model == "gpt-tiny") {
    dsl::models::addGptLoss(module, dsl::models::gptTiny());
  } else if (model == "gpt-small") {
    dsl::models::addGptLoss(module, dsl::models::gptSmall());
  } else if (model == "encdec") {
    dsl::models::addEncDecLoss(module, dsl::models::encdecBase());
    inputs = {"src", "tgt", "src_mask", "targets"};
  } else {
    throw Error("kiln-bench: no GPU prediction for " + model);
  }
  LoweringOptions lowering;
  lowering.gpuChip = "sm_90";
  lowering.gpuResidentState = true;
  lowering.gpuMath = options.gpuMath;
  lowering.gpuCostDevice = options.gpuPredict;
  lowering.gpuCostReport = true;
  std::string function = "loss";
  if (mode == "train") {
    OptimizerConfig adamw;
    adamw.weightDecay = 0.01;
    lowering.prePipeline = trainingStepPipeline("loss", adamw);
    function = "train_step";
  }
  lowering.functions = {function};
  for (const std::string &input : inputs) {
    lowering.gpuCostSizes += (lowering.gpuCostSizes.empty() ? "" : ",") +
                             input + "=" + std::to_string(b) + "x" +
                             std::to_string(t);
  }
  LoweredModule lowered = lowerToLLVMDialect(module.op(), lowering);
  std::map<std::string, GpuCostPrediction> predictions =
      gpuCostPredictions(lowered);
  auto it = predictions.find(function);
  if (it == predictions.end()) {
    throw Error("kiln-bench: no prediction for " + function);
  }
  const GpuCostPrediction &p = it->second;
  fmt::print("PREDICT peer={} model={} mode={} device={} predicted_ms={:.2f} "
             "kernel_ms={:.2f} launches={} copies={} gflop={:.1f} "
             "gbytes={:.2f}\n",
             peerName(options), model, mode, options.gpuPredict, p.milliseconds,
             p.kernelMilliseconds, p.launches, p.copies, p.flops * 1e-9,
             p.bytes * 1e-9);
}

} // namespace

int main(int argc, char **argv) try {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--steps" && i + 1 < argc) {
      options.steps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--cpu" && i + 1 < argc) {
      options.cpu = argv[++i];
    } else if (arg == "--gpu" && i + 1 < argc) {
      options.gpu = argv[++i];
    } else if (arg == "--gpu-math" && i + 1 < argc) {
      options.gpuMath = argv[++i];
    } else if (arg == "--precision" && i + 1 < argc) {
      options.precision = argv[++i];
    } else if (arg == "--bf16-kernels" && i + 1 < argc) {
      options.bf16Kernels = argv[++i];
    } else if (arg == "--activations" && i + 1 < argc &&
               (std::string(argv[i + 1]) == "f32" ||
                std::string(argv[i + 1]) == "bf16")) {
      options.activations =
          std::string(argv[++i]) == "bf16" ? DType::bf16 : DType::f32;
    } else if (arg == "--gpu-predict" && i + 1 < argc) {
      options.gpuPredict = argv[++i];
    } else if (arg == "--gpu-profile") {
      options.gpuProfile = true;
    } else if (arg == "--unprepared-weights") {
      options.prepareWeights = false;
    } else if (arg == "--prepared-weights") {
      options.prepareWeights = true;
    } else if (arg == "--prepared-ab") {
      options.preparedAB = true;
    } else if (arg == "--dump" && i + 1 < argc) {
      options.dumpDirectory = argv[++i];
    } else if ((arg == "--models" || arg == "--modes") && i + 1 < argc) {
      std::vector<std::string> &out =
          arg == "--models" ? options.models : options.modes;
      out.clear();
      std::string list = argv[++i];
      for (size_t start = 0; start <= list.size();) {
        size_t comma = list.find(',', start);
        out.push_back(list.substr(start, comma - start));
        start = comma == std::string::npos ? list.size() + 1 : comma + 1;
      }
    } else {
      fmt::print(
          stderr,
          "usage: kiln-bench [--models "
          "gpt-tiny,gpt-small,gpt2,encdec,llama-small] "
          "[--modes forward,forward-b1,train,prefill,decode,decode-b4] "
          "[--steps N] "
          "[--cpu host|x86-64-v3|"
          "x86-64-v4|<llvm cpu>] [--gpu native|sm_XX] [--gpu-math "
          "fp32|tf32|tf32x3|bf16] [--precision fp32|bf16] [--bf16-kernels "
          "auto|dot|amx|amx-emulated] [--activations f32|bf16] "
          "[--gpu-profile] [--gpu-predict h200|h100|a100] "
          "[--unprepared-weights|--prepared-weights] [--prepared-ab] "
          "[--dump DIR]\n");
      return 2;
    }
  }
  if (options.preparedAB) {
    if (options.prepareWeights == false) {
      fmt::print(stderr, "--prepared-ab compares prepared weights with "
                         "unprepared ones: drop --unprepared-weights\n");
      return 2;
    }
    options.prepareWeights = true; // the second model is unprepared
  }
  if (options.gpuProfile && options.gpu.empty()) {
    fmt::print(stderr, "--gpu-profile needs --gpu\n");
    return 2;
  }
  if (options.gpuMath != "fp32" && options.gpu.empty() &&
      options.gpuPredict.empty()) {
    fmt::print(stderr, "--gpu-math needs --gpu or --gpu-predict\n");
    return 2;
  }
  if (!options.gpuPredict.empty()) {
    // Predictions only: no GPU, nothing run; one row after another.
    for (const std::string &m : options.models) {
      for (const std::string &mode : options.modes) {
        if (mode == "forward-b1" && m != "gpt-small") {
          continue;
        }
        predictRow(m, mode, options);
        std::fflush(stdout);
      }
    }
    return 0;
  }
  for (const std::string &m : options.modes) {
    if (m != "forward" && m != "forward-b1" && m != "train" && m != "prefill" &&
        m != "decode" && m != "decode-b4") {
      fmt::print(stderr,
                 "unknown mode '{}' (forward, forward-b1, train, prefill, "
                 "decode, decode-b4)\n",
                 m);
      return 2;
    }
  }
  options.threads = int(std::thread::hardware_concurrency());
  if (const char *env = std::getenv("OMP_NUM_THREADS");
      env && std::atoi(env) > 0) {
    options.threads = std::atoi(env);
  }
  options.threads = std::max(1, options.threads);
  // The share of the CPU's FMA peak; none on the GPU (peak_pct 0).
  bool onGpu = !options.gpu.empty();
  options.peak = onGpu ? 0 : kiln::bench::measureFmaPeak(options.threads);
  if (!onGpu && (wants(options, "decode") || wants(options, "decode-b4"))) {
    options.bandwidth = kiln::bench::measureReadBandwidth(options.threads);
    fmt::print("measured memory read bandwidth {:.1f} GB/s on {} threads\n",
               options.bandwidth, options.threads);
  }
  fmt::print(
      "Kiln forward pass (+ mean cross-entropy) and training step "
      "(+ backward + AdamW), target {}, {} threads, measured CPU FMA "
      "peak {}\n",
      onGpu ? "GPU " + options.gpu + " (" + options.gpuMath + " products)"
            : "CPU " + options.cpu + " (" + options.precision + " products" +
                  (options.precision == "bf16"
                       ? ": peak_pct is of the fp32 FMA peak, which "
                         "vdpbf16ps doubles and AMX's tiles exceed"
                       : "") +
                  ")",
      options.threads,
      onGpu ? std::string("not measured (GPU target)")
            : fmt::format("{:.1f} GFLOP/s", options.peak));
  // Each model and mode in a process of its own (as the libtorch peer
  // runs), so that one row's peak resident set is its own.
  for (const std::string &m : options.models) {
    if (m != "gpt-tiny" && m != "gpt-small" && m != "gpt2" && m != "encdec" &&
        m != "llama-small") {
      fmt::print(stderr, "unknown model '{}'\n", m);
      return 2;
    }
  }
  bool failed = false;
  for (const std::string &m : options.models) {
    for (const std::string &mode : options.modes) {
      // The encoder-decoder has no decoding rows; GPT-2 124M no forward
      // pass over a loss (its rows are prefill, decode and train).
      bool decoding =
          mode == "prefill" || mode == "decode" || mode == "decode-b4";
      // forward-b1 is gpt-small's batch-1 row alone.
      if (((m == "encdec" || m == "llama-small") && decoding) ||
          (m == "gpt2" && mode == "forward") ||
          (m != "gpt-small" && mode == "forward-b1")) {
        continue;
      }
      std::fflush(stdout);
      pid_t child = fork();
      if (child < 0) {
        throw Error("kiln-bench: fork failed");
      }
      if (child == 0) {
        Options one = options;
        one.modes = {mode};
        try {
          dsl::models::GptConfig gpt = m == "gpt-tiny"    ? dsl::models::gptTiny()
                                       : m == "gpt-small" ? dsl::models::gptSmall()
                                                          : dsl::models::gpt2();
          if (m == "llama-small") {
            benchLlama(m, one);
          } else if (decoding) {
            benchGptDecode(m, gpt, mode, one);
          } else if (m == "gpt2") {
            // BENCHMARKS.md's training step at batch 4 of 64 positions.
            benchGpt(m, gpt, rowShape(m), one, false);
          } else if (m == "gpt-tiny") {
            benchGpt(m, dsl::models::gptTiny(), rowShape(m), one, false);
          } else if (m == "gpt-small") {
            benchGpt(m, dsl::models::gptSmall(), rowShape(m), one, true);
          } else {
            benchEncDec(one);
          }
        } catch (const std::exception &e) {
          fmt::print(stderr, "error: {} {}: {}\n", m, mode, e.what());
          std::fflush(stdout);
          _exit(1);
        }
        std::fflush(stdout);
        _exit(0);
      }
      int status = 0;
      waitpid(child, &status, 0);
      if (WIFSIGNALED(status)) {
        fmt::print(stderr, "kiln-bench: {} {} was killed by signal {} ({})\n",
                   m, mode, WTERMSIG(status), strsignal(WTERMSIG(status)));
        failed = true;
      } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fmt::print(stderr, "kiln-bench: {} {} failed\n", m, mode);
        failed = true;
      }
    }
  }
  return failed ? 1 : 0;
} catch (const std::exception &e) { // kiln::Error, or bad_alloc and the like
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
