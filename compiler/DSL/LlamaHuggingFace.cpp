//===- LlamaHuggingFace.cpp - Hugging Face Llama configurations -----------===//
//
// readLlamaConfig, saveLlamaConfig and llamaStateDictMapping (Models.h): a
// Hugging Face checkpoint's config.json, checked field by field, and the
// state dict's names.
//
//===----------------------------------------------------------------------===//

#include "compiler/DSL/Models.h"

#include "runtime/Error.h"
#include "runtime/Files.h"
#include "runtime/StrictJson.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <set>

namespace kiln::dsl::models {

using json = nlohmann::json;

namespace {

/// The largest config.json read (real ones are a few KiB).
constexpr uint64_t kMaxConfigBytes = 1 << 20;
/// The largest value each size may take: far beyond any published Llama
/// (at most 126 layers, 128 heads, 16,384 wide, feed-forward blocks of
/// 53,248, vocabularies of 256K), they keep a forged file from building
/// billions of layers before anything fails.
constexpr int64_t kMaxLayers = 4096, kMaxHeads = 4096, kMaxWidth = 1 << 17,
                  kMaxFeedForward = 1 << 20, kMaxVocab = 1 << 24,
                  kMaxPositions = int64_t(1) << 31;

/// The fields Kiln reads or knows to be harmless to ignore.
const std::set<std::string> &knownFields() {
  static const std::set<std::string> fields = {
      // Read.
      "model_type", "vocab_size", "hidden_size", "num_hidden_layers",
      "num_attention_heads", "num_key_value_heads", "intermediate_size",
      "max_position_embeddings", "rms_norm_eps", "rope_theta",
      "tie_word_embeddings", "initializer_range", "head_dim", "hidden_act",
      "rope_scaling", "rope_parameters", "attention_bias", "mlp_bias",
      "pretraining_tp", "attention_dropout", "torch_dtype", "dtype",
      // Harmless: names, token ids, generation and library settings.
      "architectures", "bos_token_id", "eos_token_id", "pad_token_id",
      "transformers_version", "use_cache", "_name_or_path"};
  return fields;
}

/// Reads the fields of one config.json, each problem naming the file.
class ConfigReader {
public:
  ConfigReader(std::string path, const json &document)
      : path_(std::move(path)), doc_(document) {}

  [[noreturn]] void fail(const std::string &why) const {
    throw Error(fmt::format("{}: {}", path_, why));
  }

  const json *find(const char *field) const {
    auto it = doc_.find(field);
    return it == doc_.end() || it->is_null() ? nullptr : &*it;
  }

  /// A positive integer field in [1, max]; `fallback` when absent (required
  /// when there is none).
  int64_t size(const char *field, int64_t max,
               std::optional<int64_t> fallback = {}) const {
    const json *v = find(field);
    if (!v) {
      if (!fallback) {
        fail(fmt::format("has no '{}' (a positive integer)", field));
      }
      return *fallback;
    }
    if (!v->is_number_integer()) {
      fail(fmt::format("'{}' is {}, not an integer", field, v->dump()));
    }
    // (nlohmann keeps a literal without a sign as unsigned, 0 included.)
    bool inRange =
        v->is_number_unsigned()
            ? v->get<uint64_t>() >= 1 && v->get<uint64_t>() <= uint64_t(max)
            : v->get<int64_t>() >= 1 && v->get<int64_t>() <= max;
    if (!inRange) {
      fail(fmt::format("'{}' is {}, not in [1, {}]", field, v->dump(), max));
    }
    return v->get<int64_t>();
  }

  /// A finite number field, `fallback` when absent.
  double number(const char *field, double fallback) const {
    const json *v = find(field);
    if (!v) {
      return fallback;
    }
    if (!v->is_number()) {
      fail(fmt::format("'{}' is {}, not a number", field, v->dump()));
    }
    double value = v->get<double>();
    if (!std::isfinite(value)) {
      fail(fmt::format("'{}' is {}, not a finite number", field, v->dump()));
    }
    return value;
  }

  bool flag(const char *field, bool fallback) const {
    const json *v = find(field);
    if (!v) {
      return fallback;
    }
    if (!v->is_boolean()) {
      fail(fmt::format("'{}' is {}, not true or false", field, v->dump()));
    }
    return v->get<bool>();
  }

  std::optional<std::string> text(const char *field) const {
    const json *v = find(field);
    if (!v) {
      return std::nullopt;
    }
    if (!v->is_string()) {
      fail(fmt::format("'{}' is {}, not a string", field, v->dump()));
    }
    return v->get<std::string>();
  }

private:
  std::string path_;
  const json &doc_;
};

} // namespace

LlamaConfig readLlamaConfig(const std::string &path,
                            std::vector<std::string> *notes) {
  std::string text = readRegularFile(path, kMaxConfigBytes, "the file");
  StrictJsonKeys keys(/*maxKeys=*/UINT64_MAX, /*maxKeysPerObject=*/512,
                      "the configuration");
  if (!json::sax_parse(text, &keys)) {
    throw Error(fmt::format("{}: {}", path,
                            keys.problem.empty()
                                ? "the configuration is not valid JSON"
                                : keys.problem));
  }
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  ConfigReader r(path, doc);
  if (!doc.is_object()) {
    r.fail("the configuration is not a JSON object");
  }

  // What Kiln does not implement, by name, first.
  std::optional<std::string> type = r.text("model_type");
  if (type != "llama") {
    r.fail(fmt::format("model_type is {}: Kiln reads Llama-architecture "
                       "checkpoints (model_type \"llama\")",
                       type ? "\"" + *type + "\"" : std::string("missing")));
  }
  if (std::optional<std::string> act = r.text("hidden_act");
      act != "silu" && act != "swish") {
    r.fail(fmt::format("hidden_act is {}: Kiln's Llama feed-forward block is "
                       "SwiGLU (\"silu\")",
                       act ? "\"" + *act + "\"" : std::string("missing")));
  }
  if (const json *scaling = r.find("rope_scaling")) {
    r.fail(fmt::format("rope_scaling {} is not implemented (Kiln rotates by "
                       "rope_theta alone)",
                       scaling->dump()));
  }
  for (const char *bias : {"attention_bias", "mlp_bias"}) {
    if (r.flag(bias, false)) {
      r.fail(fmt::format("{} is true: Kiln's Llama projections have no "
                         "biases",
                         bias));
    }
  }
  // transformers 5 writes the rotary settings as rope_parameters: only the
  // default rotation, whose theta is read below.
  std::optional<double> ropeParametersTheta;
  if (const json *rope = r.find("rope_parameters")) {
    bool plain = rope->is_object();
    if (plain) {
      for (const auto &[key, value] : rope->items()) {
        plain = plain && ((key == "rope_type" && value == "default") ||
                          (key == "rope_theta" && value.is_number()));
      }
    }
    if (!plain) {
      r.fail(fmt::format("rope_parameters {} is not implemented (Kiln rotates "
                         "by rope_theta alone: rope_type \"default\")",
                         rope->dump()));
    }
    if (rope->contains("rope_theta")) {
      ropeParametersTheta = (*rope)["rope_theta"].get<double>();
    }
  }
  if (r.size("pretraining_tp", kMaxHeads, 1) != 1) {
    r.fail("pretraining_tp is not 1 (slicing the projections is not "
           "implemented)");
  }
  if (r.number("attention_dropout", 0.0) != 0.0) {
    r.fail("attention_dropout is not 0 (Kiln's Llama has no dropout)");
  }

  LlamaConfig c;
  c.vocabSize = r.size("vocab_size", kMaxVocab);
  c.dModel = r.size("hidden_size", kMaxWidth);
  c.numLayers = r.size("num_hidden_layers", kMaxLayers);
  c.numHeads = r.size("num_attention_heads", kMaxHeads);
  c.numKvHeads = r.size("num_key_value_heads", kMaxHeads, c.numHeads);
  c.dFF = r.size("intermediate_size", kMaxFeedForward);
  c.maxSeqLen = r.size("max_position_embeddings", kMaxPositions, 2048);
  c.rmsNormEps = r.number("rms_norm_eps", 1e-6);
  c.ropeTheta = r.number("rope_theta", ropeParametersTheta.value_or(10000.0));
  if (ropeParametersTheta && *ropeParametersTheta != c.ropeTheta) {
    r.fail(fmt::format("rope_theta ({}) and rope_parameters' rope_theta ({}) "
                       "differ",
                       c.ropeTheta, *ropeParametersTheta));
  }
  c.tiedHead = r.flag("tie_word_embeddings", false);
  c.initStd = r.number("initializer_range", 0.02);
  if (c.dModel % c.numHeads != 0 || c.headDim() % 2 != 0) {
    r.fail(fmt::format("num_attention_heads ({}) does not divide hidden_size "
                       "({}) into heads of even width (rotary pairs)",
                       c.numHeads, c.dModel));
  }
  if (c.numHeads % c.numKvHeads != 0) {
    r.fail(fmt::format("num_key_value_heads ({}) does not divide "
                       "num_attention_heads ({})",
                       c.numKvHeads, c.numHeads));
  }
  if (int64_t headDim = r.size("head_dim", kMaxWidth, c.headDim());
      headDim != c.headDim()) {
    r.fail(fmt::format("head_dim is {}, not hidden_size / "
                       "num_attention_heads ({})",
                       headDim, c.headDim()));
  }
  // (A theta below 1 makes the frequencies theta^(-2i/d) grow, past f32's
  // range for small thetas; every published model's is 10,000 or more.)
  if (c.rmsNormEps < 0.0 || c.ropeTheta < 1.0 || c.initStd < 0.0) {
    r.fail("rms_norm_eps and initializer_range must be >= 0 and rope_theta "
           ">= 1");
  }
  if (notes) {
    for (const auto &[key, value] : doc.items()) {
      if (!knownFields().count(key)) {
        notes->push_back(fmt::format("{}: field '{}' is not used", path, key));
      }
    }
    for (const char *field : {"torch_dtype", "dtype"}) {
      std::optional<std::string> dtype = r.text(field);
      if (dtype == "bfloat16" || dtype == "float16") {
        notes->push_back(fmt::format(
            "{}: the weights are stored as {}; they are widened to f32 when "
            "loaded (Kiln computes in f32)",
            path, *dtype));
      }
    }
  }
  return c;
}

void saveLlamaConfig(const std::string &path, const LlamaConfig &c) {
  json doc = {{"architectures", {"LlamaForCausalLM"}},
              {"model_type", "llama"},
              {"vocab_size", c.vocabSize},
              {"hidden_size", c.dModel},
              {"num_hidden_layers", c.numLayers},
              {"num_attention_heads", c.numHeads},
              {"num_key_value_heads", c.kvHeads()},
              {"head_dim", c.headDim()},
              {"intermediate_size", c.dFF},
              {"max_position_embeddings", c.maxSeqLen},
              {"rms_norm_eps", c.rmsNormEps},
              {"rope_theta", c.ropeTheta},
              {"rope_scaling", nullptr},
              {"tie_word_embeddings", c.tiedHead},
              {"hidden_act", "silu"},
              {"attention_bias", false},
              {"mlp_bias", false},
              {"initializer_range", c.initStd},
              {"torch_dtype", "float32"}};
  std::string text = doc.dump(2) + "\n";
  saveFileAtomically(
      path, [&](int fd) { return writeAll(fd, text.data(), text.size()); });
}

StateDictMapping llamaStateDictMapping(const LlamaConfig &config) {
  StateDictMapping mapping;
  mapping.ignore = {"model.layers.*.self_attn.rotary_emb.inv_freq"};
  if (config.tiedHead) {
    mapping.ignore.push_back("lm_head.weight");
  }
  return mapping;
}

} // namespace kiln::dsl::models
