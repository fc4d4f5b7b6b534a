//===- DataParallelCheck.cpp - Data-parallel training against one process -===//
//
// kiln-data-parallel-check trains a small seed-002 encoder-decoder (source
// padding masks, targets padded with ignore_index 0, AdamW with clipping, no
// dropout) with runTraining on the processes mpirun starts, on global
// batches whose rows keep different numbers of tokens, so the processes'
// shares keep different counts. With --compare, rank 0 then trains one
// process with the fused train_step on the same global batches and checks
// the losses and parameters; every run prints whether the ranks hold
// bitwise identical parameters. --bucket-floats sums the gradients in small
// buckets (tensors cut between them). --fail-rank/--fail-step make one rank
// throw (--kill: die of SIGKILL instead; --stop: stop itself with SIGSTOP,
// so that the others wait in a collective until its deadline); --load reads
// a checkpoint in one process (the checkpoint a failed job left must load).
// --other-model-rank R builds rank R's model with one more vocabulary entry
// (a host whose corpus had one more character). --llama trains a small
// Llama-architecture decoder (grouped-query attention, rotary positions,
// SwiGLU) on random token windows instead.
//
//===----------------------------------------------------------------------===//

#include "compiler/DSL/DSL.h"
#include "compiler/DSL/Models.h"
#include "compiler/Target/JIT/Training.h"
#include "runtime/Checkpoint.h"
#include "runtime/Error.h"
#include "runtime/MPI/MpiCommunicator.h"
#include "runtime/TrainingLoop.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace kiln;

namespace {

constexpr int64_t kVocab = 23, kBatch = 8, kSrcLen = 7, kTgtLen = 6;
/// Fixed before the code: fp32 sums in another order (per process, then
/// over processes) against one process summing the whole batch.
constexpr double kLossTolerance = 2e-5;  // relative
constexpr double kParamTolerance = 2e-5; // absolute

struct Options {
  int64_t steps = 4;
  bool compare = false, resume = false, kill = false, stop = false;
  bool llama = false;
  int otherModelRank = -1;
  std::string checkpoint, load;
  int64_t checkpointEvery = 0;
  int failRank = -1;
  int64_t failStep = -1;
  size_t bucketFloats = 0; ///< 0: the Trainer's default
};

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        throw Error(flag + " needs a value");
      }
      return argv[++i];
    };
    if (flag == "--steps") {
      o.steps = std::stoll(value());
    } else if (flag == "--compare") {
      o.compare = true;
    } else if (flag == "--checkpoint") {
      o.checkpoint = value();
    } else if (flag == "--checkpoint-every") {
      o.checkpointEvery = std::stoll(value());
    } else if (flag == "--resume") {
      o.resume = true;
    } else if (flag == "--fail-rank") {
      o.failRank = std::stoi(value());
    } else if (flag == "--fail-step") {
      o.failStep = std::stoll(value());
    } else if (flag == "--bucket-floats") {
      o.bucketFloats = size_t(std::stoull(value()));
    } else if (flag == "--kill") {
      o.kill = true;
    } else if (flag == "--stop") {
      o.stop = true;
    } else if (flag == "--other-model-rank") {
      o.otherModelRank = std::stoi(value());
    } else if (flag == "--llama") {
      o.llama = true;
    } else if (flag == "--load") {
      o.load = value();
    } else {
      throw Error("unknown flag '" + flag + "'");
    }
  }
  return o;
}

/// Global batch `step`: the same on every process. Sources of 1..kSrcLen
/// tokens padded with 0 (mask 0), decoder inputs <bos>=1 + tokens, targets
/// tokens + <eos>=2 padded with 0 (ignored).
std::map<std::string, Arg> globalBatch(int64_t step) {
  Rng rng(1000 + uint64_t(step));
  std::vector<int64_t> src(kBatch * kSrcLen, 0), tgt(kBatch * kTgtLen, 0),
      targets(kBatch * kTgtLen, 0);
  std::vector<uint8_t> mask(kBatch * kSrcLen, 0);
  for (int64_t b = 0; b < kBatch; ++b) {
    int64_t s = 1 + int64_t(rng.next() % kSrcLen);
    // Rows of very different lengths: shares keep different token counts.
    int64_t t = b % 3 == 0 ? 1 : 1 + int64_t(rng.next() % (kTgtLen - 1));
    for (int64_t i = 0; i < s; ++i) {
      src[b * kSrcLen + i] = 3 + int64_t(rng.next() % (kVocab - 3));
      mask[b * kSrcLen + i] = 1;
    }
    tgt[b * kTgtLen] = 1;
    for (int64_t i = 0; i < t; ++i) {
      int64_t token = 3 + int64_t(rng.next() % (kVocab - 3));
      targets[b * kTgtLen + i] = token;
      if (i + 1 < kTgtLen) {
        tgt[b * kTgtLen + i + 1] = token;
      }
    }
    if (t < kTgtLen) {
      targets[b * kTgtLen + t] = 2;
    }
  }
  Tensor maskTensor = Tensor::empty({kBatch, kSrcLen}, DType::i1);
  std::memcpy(maskTensor.raw(), mask.data(), mask.size());
  return {{"src", Tensor::fromVector<int64_t>({kBatch, kSrcLen}, src)},
          {"src_mask", maskTensor},
          {"tgt", Tensor::fromVector<int64_t>({kBatch, kTgtLen}, tgt)},
          {"targets", Tensor::fromVector<int64_t>({kBatch, kTgtLen}, targets)}};
}

/// Global batch `step` of the Llama: random windows of kTgtLen tokens and
/// their targets, the same on every process.
std::map<std::string, Arg> llamaBatch(int64_t step) {
  Rng rng(2000 + uint64_t(step));
  std::vector<int64_t> idx(kBatch * kTgtLen), targets(kBatch * kTgtLen);
  for (size_t i = 0; i < idx.size(); ++i) {
    idx[i] = int64_t(rng.next() % kVocab);
    targets[i] = int64_t(rng.next() % kVocab);
  }
  return {{"idx", Tensor::fromVector<int64_t>({kBatch, kTgtLen}, idx)},
          {"targets", Tensor::fromVector<int64_t>({kBatch, kTgtLen}, targets)}};
}

std::map<std::string, Arg> batchFor(const Options &o, int64_t step) {
  return o.llama ? llamaBatch(step) : globalBatch(step);
}

void buildModule(dsl::Module &module, const Options &o,
                 int64_t extraVocab = 0) {
  if (o.llama) {
    dsl::models::LlamaConfig config;
    config.vocabSize = kVocab + extraVocab;
    config.dModel = 16;
    config.numHeads = 4;
    config.numKvHeads = 2;
    config.numLayers = 1;
    config.dFF = 24;
    config.maxSeqLen = kTgtLen;
    dsl::models::addLlamaLoss(module, config, {}, "loss");
    return;
  }
  dsl::nn::TransformerConfig config =
      dsl::models::seed002Transformer(kVocab + extraVocab, kVocab);
  config.numEncoderLayers = config.numDecoderLayers = 1;
  config.block.dModel = 16;
  config.block.numHeads = 2;
  config.block.dFF = 32;
  config.block.dropout = 0.0;
  dsl::models::addEncDecLoss(module, config, {}, "loss",
                             {.ignoreIndex = 0, .labelSmoothing = 0.1});
}

OptimizerConfig adamw() {
  OptimizerConfig o;
  o.beta2 = 0.98;
  o.weightDecay = 0.01;
  o.clipNorm = 0.5; // below the first steps' gradient norms: clipping acts
  return o;
}

TrainingOptions runOptions(const Options &o) {
  TrainingOptions run;
  run.steps = o.steps;
  run.schedule = LrSchedule::constant(3e-3);
  run.checkpointPath = o.checkpoint;
  run.checkpointEvery = o.checkpointEvery;
  run.resume = o.resume;
  run.printEvery = 1;
  run.driftCheckEvery = 1;
  return run;
}

/// Trains one process with the fused step on the same global batches and
/// compares with the data-parallel run. Returns whether they agree.
bool compareWithOneProcess(const dsl::Module &module, const Options &o,
                           Trainer &parallel,
                           const std::vector<float> &losses) {
  Trainer single(compileTraining(module, "loss", adamw()), 0);
  double lossDiff = 0.0, paramDiff = 0.0;
  for (int64_t step = 1; step <= o.steps; ++step) {
    float loss = single.step(batchFor(o, step), 3e-3f);
    lossDiff = std::max(lossDiff, std::abs(double(loss) - losses[step - 1]) /
                                      std::max(1.0, std::abs(double(loss))));
  }
  for (const auto &[name, tensor] : single.parameters().namedTensors()) {
    std::vector<float> a = tensor.toVector<float>();
    std::vector<float> b = parallel.parameters().get(name).toVector<float>();
    for (size_t i = 0; i < a.size(); ++i) {
      paramDiff = std::max(paramDiff, std::abs(double(a[i]) - b[i]));
    }
  }
  bool ok = lossDiff <= kLossTolerance && paramDiff <= kParamTolerance;
  fmt::print("compare with one process: max loss difference {:.2e} (at most "
             "{:.0e}), max parameter difference {:.2e} (at most {:.0e}): {}\n",
             lossDiff, kLossTolerance, paramDiff, kParamTolerance,
             ok ? "ok" : "FAILED");
  return ok;
}

} // namespace

int main(int argc, char **argv) {
  std::shared_ptr<Communicator> world;
  try {
    world = mpi::world(&argc, &argv);
    Options o = parse(argc, argv);
    dsl::Module module;
    buildModule(module, o);
    if (!o.load.empty()) {
      Trainer trainer(compileTraining(module, "loss", adamw()), 0);
      TrainingState state =
          loadCheckpoint(o.load, trainer.parameters(), &trainer.state());
      fmt::print("loaded {} at step {}, written by {} process(es)\n", o.load,
                 state.step, state.info["world_size"]);
      return 0;
    }
    int rank = world->rank();
    dsl::Module own;
    buildModule(own, o, rank == o.otherModelRank ? 1 : 0);
    Trainer trainer(compileTraining(own, "loss", adamw(), {}, StepKind::split),
                    0, world);
    if (o.bucketFloats > 0) {
      trainer.setBucketFloats(o.bucketFloats);
    }
    TrainingHooks hooks = trainer.hooks([&](int64_t step) {
      if (rank == o.failRank && step == o.failStep) {
        if (o.kill) {
          std::raise(SIGKILL);
        }
        if (o.stop) {
          std::raise(SIGSTOP);
        }
        throw Error(fmt::format("injected failure at step {}", step));
      }
      return batchFor(o, step);
    });
    hooks.info["model"] = "data-parallel check";
    TrainingOptions run = runOptions(o);
    run.out = rank == 0 ? stdout : nullptr;
    TrainingResult result = runTraining(run, hooks);
    uint64_t hash =
        hashStore(trainer.parameters()) * 31 + hashStore(trainer.state());
    std::vector<uint64_t> hashes = world->allGather(hash);
    bool same = std::all_of(hashes.begin(), hashes.end(),
                            [&](uint64_t h) { return h == hashes[0]; });
    int status = same ? 0 : 1;
    if (rank == 0) {
      for (size_t k = 0; k < result.losses.size(); ++k) {
        fmt::print("loss {} {:.7f}\n", result.resumedFrom + 1 + int64_t(k),
                   result.losses[k]);
      }
      fmt::print("parameters and state of {} ranks {}; hash {:016x}\n",
                 world->size(), same ? "bitwise identical" : "DIFFER", hash);
      if (o.compare &&
          !compareWithOneProcess(module, o, trainer, result.losses)) {
        status = 1;
      }
    }
    world->barrier();
    return status;
  } catch (const std::exception &e) {
    if (world && world->size() > 1) {
      world->abort(fmt::format("error: rank {}: {}", world->rank(), e.what()),
                   1);
    }
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
