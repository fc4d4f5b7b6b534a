//===- translate.cpp - English to French with seed 002's Transformer ------===//
//
// Trains the encoder-decoder of seed 002 (pre-LN, padding and causal masks,
// cross-attention, dropout) on 4,500 of the 5,000 Tatoeba English-French
// pairs with label smoothing, then reports on the 500 held-out pairs: the
// teacher-forced token accuracy beside a trivial baseline (always the most
// frequent target word), and greedy translations decoded with the key/value
// cache. Run with --help for the options; under `mpirun -np N` it trains
// data-parallel (rank 0 reports).
//
//===----------------------------------------------------------------------===//

#include "../common/CommandLine.h"
#include "../common/World.h"

#include <kiln/kiln.h>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>

using namespace kiln;

namespace {

struct Options {
  std::string data = KILN_SOURCE_DIR "/examples/data/eng-fra-tatoeba-5k.tsv";
  int64_t epochs = 12, batch = 32;
  int64_t dModel = 128, layers = 2, heads = 4, dFF = 512;
  double lr = 2e-3, dropout = 0.1, labelSmoothing = 0.1;
  int64_t warmup = 200, show = 8;
  std::string csv;
  uint64_t seed = 1;
};

const char *kUsage = R"(usage: kiln-example-translate [options]
Trains seed 002's encoder-decoder on Tatoeba English-French pairs.
  --epochs N           passes over the 4,500 training pairs (12)
  --batch N            pairs per step (32)
  --d-model N          width (128)       --d-ff N  feed-forward width (512)
  --layers N           encoder and decoder layers each (2)
  --heads N            attention heads (4)
  --dropout P          dropout (0.1)     --label-smoothing X  (0.1)
  --lr X               peak learning rate (2e-3), warm-up then cosine
  --warmup N           warm-up steps (200)
  --show N             held-out translations to print (8)
  --csv PATH           a CSV log of every step
  --data PATH          the pairs (examples/data/eng-fra-tatoeba-5k.tsv)
  --seed N             initialization, shuffle and dropout seed (1)
)";

Options parseOptions(int argc, char **argv) {
  Options o;
  examples::CommandLine cl;
  constexpr int64_t kMaxSize = 1 << 16;
  cl.integers = {{"--epochs", {&o.epochs, 1, 1 << 20}},
                 {"--batch", {&o.batch, 1, kMaxSize}},
                 {"--d-model", {&o.dModel, 1, kMaxSize}},
                 {"--layers", {&o.layers, 1, 1024}},
                 {"--heads", {&o.heads, 1, kMaxSize}},
                 {"--d-ff", {&o.dFF, 1, 1 << 20}},
                 {"--warmup", {&o.warmup, 0, int64_t(1) << 40}},
                 {"--show", {&o.show, 0, 1 << 20}}};
  cl.unsignedIntegers = {{"--seed", &o.seed}};
  cl.reals = {{"--lr", {&o.lr, 0, 1e4}},
              {"--dropout", {&o.dropout, 0, 0.99}},
              {"--label-smoothing", {&o.labelSmoothing, 0, 1}}};
  cl.strings = {{"--csv", &o.csv}, {"--data", &o.data}};
  cl.parse(argc, argv, kUsage);
  checkDistinctFiles({{"--data", o.data}, {"--csv", o.csv}});
  if (o.dModel % o.heads != 0) {
    throw Error(fmt::format("--heads {} does not divide --d-model {}", o.heads,
                            o.dModel));
  }
  return o;
}

std::map<std::string, Arg> inputsOf(const PairBatch &b) {
  return {{"src", b.src},
          {"src_mask", b.srcMask},
          {"tgt", b.tgt},
          {"targets", b.targets}};
}

} // namespace

int main(int argc, char **argv) try {
  std::shared_ptr<Communicator> world = examples::exampleWorld(&argc, &argv);
  Options o = parseOptions(argc, argv);
  PairOptions split;
  split.seed = o.seed;
  PairDataset data = PairDataset::fromFile(o.data, split);
  const WordVocab &srcVocab = data.sourceVocab(),
                  &tgtVocab = data.targetVocab();

  dsl::nn::TransformerConfig config =
      dsl::models::seed002Transformer(srcVocab.size(), tgtVocab.size());
  config.numEncoderLayers = config.numDecoderLayers = o.layers;
  config.block.dModel = o.dModel;
  config.block.numHeads = o.heads;
  config.block.dFF = o.dFF;
  config.block.dropout = o.dropout;

  dsl::Module module;
  dsl::LossOptions smoothed{.ignoreIndex = WordVocab::pad,
                            .labelSmoothing = o.labelSmoothing};
  dsl::models::addEncDecLoss(module, config, {.training = o.dropout > 0},
                             "loss", smoothed);
  dsl::models::addEncDecForward(module, config); // evaluation mode
  dsl::models::addEncDecEncode(module, config);
  // The longest translation shown (the decode graph's cache capacity).
  constexpr int64_t kMaxOutput = 24;
  dsl::models::addEncDecDecode(module, config, kMaxOutput);

  OptimizerConfig adamw;
  adamw.beta2 = 0.98;
  adamw.weightDecay = 0.01;
  adamw.clipNorm = 1.0;
  fmt::print("{} training pairs, {} held out; vocabularies: {} English, {} "
             "French words\n",
             data.size(Split::train), data.size(Split::validation),
             srcVocab.size(), tgtVocab.size());
  auto compiled =
      compileTraining(module, "loss", adamw, {}, stepKindFor(*world));
  const JitModule &jit = *compiled;
  Trainer trainer(compiled, o.seed, world);
  fmt::print("seed 002 Transformer: d_model {}, {}+{} layers, {} heads, d_ff "
             "{}, dropout {}, label smoothing {}; {} parameters, compiled in "
             "{:.1f} s\n",
             o.dModel, o.layers, o.layers, o.heads, o.dFF, o.dropout,
             o.labelSmoothing, trainer.parameters().numParameters(),
             jit.pipelineSeconds() + jit.codegenSeconds());

  size_t trainPairs = data.size(Split::train);
  int64_t perEpoch = int64_t((trainPairs + o.batch - 1) / o.batch);
  Rng shuffle(o.seed);
  // Target-token counts: the baseline's answer and the tokens per step.
  std::vector<int64_t> counts(tgtVocab.size(), 0);
  int64_t targetTokens = 0;
  for (size_t i = 0; i < trainPairs; i += 256) {
    PairBatch b =
        data.batch(Split::train, i, std::min<size_t>(256, trainPairs - i));
    for (int64_t t : b.targets.toVector<int64_t>()) {
      counts[t] += t != WordVocab::pad;
      targetTokens += t != WordVocab::pad;
    }
  }
  int64_t frequent =
      std::max_element(counts.begin(), counts.end()) - counts.begin();

  TrainingHooks hooks = trainer.hooks([&](int64_t step) {
    int64_t index = (step - 1) % perEpoch;
    if (index == 0) {
      data.shuffle(shuffle);
    }
    size_t first = size_t(index * o.batch);
    PairBatch b = data.batch(Split::train, first,
                             std::min<size_t>(o.batch, trainPairs - first));
    return inputsOf(b);
  });
  TrainingOptions run;
  run.steps = o.epochs * perEpoch;
  run.schedule = LrSchedule::warmupCosine(
      o.lr, std::min(o.warmup, run.steps - 1), run.steps, o.lr / 20);
  run.tokensPerStep = targetTokens / perEpoch; // target tokens, on average
  run.csvPath = o.csv;
  run.inputs = {{"--data", o.data}};
  fmt::print("training: {} epochs of {} steps, AdamW, {}\n", o.epochs, perEpoch,
             run.schedule.describe());
  TrainingResult result = runTraining(run, hooks);
  fmt::print("trained in {:.0f} s, last loss {:.3f}\n", result.seconds,
             result.losses.back());
  if (world->rank() != 0) {
    return 0; // rank 0 reports
  }

  // Held-out token accuracy (teacher forced) against always answering the
  // most frequent training target token.
  int64_t correct = 0, baseline = 0, total = 0;
  size_t heldOut = data.size(Split::validation);
  for (size_t i = 0; i < heldOut; i += 64) {
    PairBatch b =
        data.batch(Split::validation, i, std::min<size_t>(64, heldOut - i));
    Tensor out = trainer.run(
        "forward",
        {{"src", b.src}, {"src_mask", b.srcMask}, {"tgt", b.tgt}})[0];
    int64_t v = tgtVocab.size();
    const float *p = out.data<float>();
    std::vector<int64_t> targets = b.targets.toVector<int64_t>();
    for (size_t k = 0; k < targets.size(); ++k) {
      if (targets[k] == WordVocab::pad) {
        continue;
      }
      int64_t best = std::max_element(p + k * v, p + (k + 1) * v) - (p + k * v);
      correct += best == targets[k];
      baseline += frequent == targets[k];
      ++total;
    }
  }
  fmt::print("held-out token accuracy: {:.1f}% (baseline, always '{}': "
             "{:.1f}%) over {} tokens\n",
             100.0 * double(correct) / double(total), tgtVocab.word(frequent),
             100.0 * double(baseline) / double(total), total);

  // Greedy translations of held-out sentences, decoded with the cache.
  size_t shown = std::min<size_t>(size_t(o.show), heldOut);
  if (shown > 0) {
    PairBatch b = data.batch(Split::validation, 0, shown);
    std::vector<std::vector<int64_t>> outputs = translateGreedy(
        [&](const std::string &graph, const std::map<std::string, Arg> &in) {
          return trainer.run(graph, in);
        },
        dsl::models::decodeShape(config, kMaxOutput), b.src, b.srcMask,
        WordVocab::bos, WordVocab::eos, kMaxOutput);
    for (size_t i = 0; i < shown; ++i) {
      const SentencePair &pair = data.pair(Split::validation, i);
      fmt::print("  {}\n    reference: {}\n    kiln:      {}\n", pair.source,
                 pair.target, tgtVocab.decode(outputs[i]));
    }
  }
  return 0;
} catch (const std::exception &e) { // kiln::Error, or bad_alloc and the like
  return examples::failExample(e);
}
