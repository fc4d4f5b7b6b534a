//===- precision_check.cpp - A GPT's values in bf16 against fp32 ----------===//
//
// kiln-precision-check: compiles a GPT's loss (or its gradients) in fp32 and
// in bf16 from the same parameters, runs both on the same random batch and
// prints every value's relative error in program order, marking the first
// over the budget with the kiln op and the line of the model's C++ that
// made it (kiln::checkPrecision, docs/precision.md). Exits 0 when every
// value is within the budget, 1 when one is not, 2 on bad options.
//
//===----------------------------------------------------------------------===//

#include <kiln/kiln.h>

#include <fmt/format.h>

#include <cstdlib>
#include <string>

using namespace kiln;

namespace {

const char *kUsage = R"(usage: kiln-precision-check [options]
Compiles a GPT's loss in fp32 and in bf16 from the same parameters, runs
both on one random batch and prints every value's relative error, marking
the first over the budget (docs/precision.md).
  --model M      gpt-tiny (default) or gpt-small
  --layers N     blocks (default: the model's)
  --batch N      sequences (4)            --seq N   positions (64)
  --gradients    check the loss's gradients too (the backward pass)
  --budget X     the relative error each value may have (0.015625 = 2^-6)
  --floor X      values of RMS below X are judged against X (2^-10)
  --precision P  the precision checked against fp32 (bf16)
  --cpu C        the CPU to compile for (host)
  --seed N       parameters and batch (1)
)";

int64_t positive(const std::string &flag, const char *text, int64_t max) {
  char *end = nullptr;
  long long value = std::strtoll(text, &end, 10);
  if (!*text || *end || value < 1 || value > max) {
    throw Error(
        fmt::format("{}: '{}' is not a count from 1 to {}", flag, text, max));
  }
  return value;
}

double real(const std::string &flag, const char *text) {
  char *end = nullptr;
  double value = std::strtod(text, &end);
  if (!*text || *end) {
    throw Error(fmt::format("{}: '{}' is not a number", flag, text));
  }
  return value;
}

} // namespace

int main(int argc, char **argv) {
  try {
    std::string model = "gpt-tiny";
    int64_t layers = 0, batch = 4, seq = 64;
    uint64_t seed = 1;
    PrecisionCheckOptions options;
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      bool hasValue = i + 1 < argc;
      if (arg == "--model" && hasValue) {
        model = argv[++i];
      } else if (arg == "--layers" && hasValue) {
        layers = positive(arg, argv[++i], 64);
      } else if (arg == "--batch" && hasValue) {
        batch = positive(arg, argv[++i], 1024);
      } else if (arg == "--seq" && hasValue) {
        seq = positive(arg, argv[++i], 1 << 16);
      } else if (arg == "--seed" && hasValue) {
        seed = uint64_t(positive(arg, argv[++i], INT64_MAX));
      } else if (arg == "--gradients") {
        options.gradients = true;
      } else if (arg == "--budget" && hasValue) {
        options.budget = real(arg, argv[++i]);
      } else if (arg == "--floor" && hasValue) {
        options.floor = real(arg, argv[++i]);
      } else if (arg == "--precision" && hasValue) {
        options.precision = argv[++i];
      } else if (arg == "--cpu" && hasValue) {
        options.jit.cpu = argv[++i];
      } else if (arg == "--help" || arg == "-h") {
        fmt::print("{}", kUsage);
        return 0;
      } else {
        fmt::print(stderr, "kiln-precision-check: unknown option '{}'\n{}", arg,
                   kUsage);
        return 2;
      }
    }
    dsl::models::GptConfig config;
    if (model == "gpt-tiny") {
      config = dsl::models::gptTiny();
    } else if (model == "gpt-small") {
      config = dsl::models::gptSmall();
    } else {
      throw Error("--model: '" + model + "' is not gpt-tiny or gpt-small");
    }
    if (layers > 0) {
      config.numLayers = layers;
    }
    if (seq > config.maxSeqLen) {
      throw Error(fmt::format("--seq {} is longer than {}'s {} positions", seq,
                              model, config.maxSeqLen));
    }
    dsl::Module module;
    dsl::models::addGptLoss(module, config);
    options.seed = seed;
    Rng rng(seed);
    Tensor idx = Tensor::empty({batch, seq}, DType::i64),
           targets = Tensor::empty({batch, seq}, DType::i64);
    for (int64_t i = 0; i < idx.numel(); ++i) {
      idx.data<int64_t>()[i] = int64_t(rng.next() % config.vocabSize);
      targets.data<int64_t>()[i] = int64_t(rng.next() % config.vocabSize);
    }
    fmt::print("{} ({} layers), batch {} x {}, {}{}\n", model, config.numLayers,
               batch, seq, options.precision,
               options.gradients ? ", loss and gradients" : ", loss");
    PrecisionReport report = checkPrecision(
        module, "loss", {{"idx", idx}, {"targets", targets}}, options);
    fmt::print("{}", report.str());
    return report.firstOverBudget < 0 ? 0 : 1;
  } catch (const std::exception &e) {
    fmt::print(stderr, "kiln-precision-check: {}\n", e.what());
    return 2;
  }
}
