//===- LlamaHuggingFaceTest.cpp - Llama checkpoints in Hugging Face's layout
//===//
//
// A Llama model saved as Hugging Face lays a checkpoint out (config.json,
// model.safetensors or a sharded index) reloads exactly; config.json files
// written here by hand, as Hugging Face writes them, read into the right
// configuration; what Kiln does not implement is refused by name, before
// anything is built.
//
//===----------------------------------------------------------------------===//

#include "../JIT/Reference.h"
#include "../Runtime/TempDirTest.h"

#include "compiler/DSL/DSL.h"
#include "compiler/DSL/Models.h"
#include "compiler/Target/JIT/CompiledModel.h"
#include "runtime/Error.h"
#include "runtime/Safetensors.h"
#include "runtime/StateDict.h"

#include <gtest/gtest.h>

#include <fstream>

using namespace kiln;
using dsl::models::LlamaConfig;

namespace {

class LlamaHuggingFace : public test::TempDirTest {
protected:
  void write(const std::string &name, const std::string &text) {
    std::ofstream(path(name)) << text;
  }

  /// readLlamaConfig's error for a config.json of `text`.
  std::string refusal(const std::string &text) {
    write("config.json", text);
    try {
      dsl::models::readLlamaConfig(path("config.json"));
    } catch (const Error &e) {
      return e.what();
    }
    ADD_FAILURE() << "accepted: " << text;
    return "";
  }
};

/// TinyLlama-1.1B's config.json with smaller sizes (as Hugging Face writes
/// it, fields in its order), with `extra` fields appended.
std::string tinyLlamaJson(const std::string &extra = "") {
  return R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 64,
  "initializer_range": 0.02,
  "intermediate_size": 176,
  "max_position_embeddings": 2048,
  "model_type": "llama",
  "num_attention_heads": 4,
  "num_hidden_layers": 2,
  "num_key_value_heads": 2,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "rope_theta": 10000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.35.0",
  "use_cache": true,
  "vocab_size": 65)" +
         extra + "\n}\n";
}

/// A Llama's forward graph, compiled, with random parameters (seeded).
std::unique_ptr<CompiledModel> llama(const LlamaConfig &config, uint64_t seed) {
  dsl::Module module;
  dsl::models::addLlamaForward(module, config);
  auto model = std::make_unique<CompiledModel>(module, seed);
  uint32_t s = uint32_t(seed) * 1000;
  for (const std::string &name : model->parameters().names()) {
    Tensor &t = model->parameters().get(name);
    Tensor r = ref::randomTensor(t.shape(), s++, -0.5f, 0.5f);
    std::copy(r.data<float>(), r.data<float>() + r.numel(), t.data<float>());
  }
  return model;
}

} // namespace

TEST_F(LlamaHuggingFace, ReadsAConfigAsHuggingFaceWritesIt) {
  write("config.json", tinyLlamaJson(R"(,
  "rope_interleaved": false)"));
  std::vector<std::string> notes;
  LlamaConfig c = dsl::models::readLlamaConfig(path("config.json"), &notes);
  EXPECT_EQ(c.vocabSize, 65);
  EXPECT_EQ(c.dModel, 64);
  EXPECT_EQ(c.numLayers, 2);
  EXPECT_EQ(c.numHeads, 4);
  EXPECT_EQ(c.numKvHeads, 2);
  EXPECT_EQ(c.dFF, 176);
  EXPECT_EQ(c.maxSeqLen, 2048);
  EXPECT_EQ(c.rmsNormEps, 1e-5);
  EXPECT_EQ(c.ropeTheta, 10000.0);
  EXPECT_FALSE(c.tiedHead);
  EXPECT_EQ(c.initStd, 0.02);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[0].find("field 'rope_interleaved' is not used"),
            std::string::npos)
      << notes[0];
  EXPECT_NE(notes[1].find("stored as bfloat16; they are widened to f32"),
            std::string::npos)
      << notes[1];
  // Defaults: key/value heads = heads, 2048 positions, eps 1e-6, theta 1e4.
  write("config.json", R"({"model_type": "llama", "hidden_act": "silu",
    "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1,
    "num_attention_heads": 2, "intermediate_size": 16})");
  c = dsl::models::readLlamaConfig(path("config.json"));
  EXPECT_EQ(c.numKvHeads, 2);
  EXPECT_EQ(c.maxSeqLen, 2048);
  EXPECT_EQ(c.rmsNormEps, 1e-6);
  EXPECT_EQ(c.ropeTheta, 10000.0);
  // transformers 5's form of the default rotation; "swish" is SiLU.
  write("config.json", R"({"model_type": "llama", "hidden_act": "swish",
    "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1,
    "num_attention_heads": 2, "intermediate_size": 16,
    "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}})");
  c = dsl::models::readLlamaConfig(path("config.json"));
  EXPECT_EQ(c.ropeTheta, 500000.0);
}

TEST_F(LlamaHuggingFace, RefusesWhatKilnDoesNotImplementByName) {
  auto expectRefused = [&](const std::string &text, const std::string &what) {
    std::string message = refusal(text);
    EXPECT_NE(message.find(path("config.json") + ": "), std::string::npos)
        << message;
    EXPECT_NE(message.find(what), std::string::npos) << message;
  };
  expectRefused(
      tinyLlamaJson(R"(, "rope_scaling": {"type": "linear", "factor": 2.0})"),
      "has the key 'rope_scaling' twice");
  std::string scaled = tinyLlamaJson();
  scaled.replace(scaled.find("\"rope_scaling\": null"),
                 std::string("\"rope_scaling\": null").size(),
                 R"("rope_scaling": {"rope_type": "llama3", "factor": 8.0})");
  expectRefused(scaled,
                "rope_scaling {\"factor\":8.0,\"rope_type\":\"llama3\"} "
                "is not implemented");
  auto replaced = [](std::string text, const std::string &from,
                     const std::string &to) {
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  std::string base = tinyLlamaJson();
  expectRefused(replaced(base, "\"silu\"", "\"gelu\""),
                "hidden_act is \"gelu\"");
  expectRefused(replaced(base, "\"llama\"", "\"gpt2\""),
                "model_type is \"gpt2\"");
  expectRefused(
      replaced(base, "\"attention_bias\": false", "\"attention_bias\": true"),
      "attention_bias is true");
  expectRefused(
      replaced(base, "\"pretraining_tp\": 1", "\"pretraining_tp\": 2"),
      "pretraining_tp is not 1");
  expectRefused(replaced(base, "\"vocab_size\": 65", "\"vocab_size\": \"65\""),
                "'vocab_size' is \"65\", not an integer");
  expectRefused(replaced(base, "\"vocab_size\": 65", "\"vocab_size\": -65"),
                "'vocab_size' is -65, not in [1, 16777216]");
  expectRefused(replaced(base, "\"vocab_size\": 65",
                         "\"vocab_size\": 18446744073709551615"),
                "not in [1, 16777216]");
  expectRefused(replaced(base, ",\n  \"vocab_size\": 65", ""),
                "has no 'vocab_size'");
  expectRefused(replaced(base, "\"num_key_value_heads\": 2",
                         "\"num_key_value_heads\": 3"),
                "num_key_value_heads (3) does not divide num_attention_heads "
                "(4)");
  expectRefused(replaced(base, "\"num_attention_heads\": 4",
                         "\"num_attention_heads\": 64"),
                "into heads of even width");
  expectRefused(tinyLlamaJson(",\n  \"head_dim\": 32"),
                "head_dim is 32, not hidden_size / num_attention_heads (16)");
  expectRefused(replaced(base, "\"rope_theta\": 10000.0", "\"rope_theta\": 0"),
                "rope_theta >= 1");
  expectRefused(
      replaced(base, "\"rope_theta\": 10000.0", "\"rope_theta\": 1e-300"),
      "rope_theta >= 1");
  // 0 (an unsigned literal to the parser) is no size; a head count of 0
  // had divided by zero.
  expectRefused(replaced(base, "\"num_attention_heads\": 4",
                         "\"num_attention_heads\": 0"),
                "'num_attention_heads' is 0, not in [1, 4096]");
  expectRefused(replaced(base, "\"num_key_value_heads\": 2",
                         "\"num_key_value_heads\": 0"),
                "'num_key_value_heads' is 0, not in [1, 4096]");
  expectRefused(replaced(base, "\"num_hidden_layers\": 2",
                         "\"num_hidden_layers\": 2000000000"),
                "'num_hidden_layers' is 2000000000, not in [1, 4096]");
  // transformers 5's rope_parameters: only the default rotation.
  expectRefused(replaced(base, "\"rope_scaling\": null",
                         R"("rope_parameters": {"rope_type": "llama3", )"
                         R"("rope_theta": 500000.0, "factor": 8.0})"),
                "rope_parameters {\"factor\":8.0,\"rope_theta\":500000.0,"
                "\"rope_type\":\"llama3\"} is not implemented");
  expectRefused(replaced(base, "\"rope_scaling\": null",
                         R"("rope_parameters": {"rope_type": "default", )"
                         R"("rope_theta": 500000.0})"),
                "rope_theta (10000) and rope_parameters' rope_theta (500000) "
                "differ");
  expectRefused(replaced(base, "\"tie_word_embeddings\": false",
                         "\"tie_word_embeddings\": 0"),
                "'tie_word_embeddings' is 0, not true or false");
  expectRefused("[1, 2]", "not a JSON object");
  expectRefused("{\"model_type\": ", "the configuration is not valid JSON");
  // Not a regular file: refused, not waited on or read.
  std::filesystem::create_directory(path("dir"));
  EXPECT_THROW(dsl::models::readLlamaConfig(path("dir")), Error);
  EXPECT_THROW(dsl::models::readLlamaConfig(path("missing.json")), Error);
  write("big.json", std::string((1 << 20) + 1, ' '));
  try {
    dsl::models::readLlamaConfig(path("big.json"));
    ADD_FAILURE() << "a file over 1 MiB was read";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("more than the limit of 1048576"),
              std::string::npos)
        << e.what();
  }
}

// Saved as Hugging Face lays a checkpoint out, read back through its
// config.json and the state dict mapping: the same logits, bit for bit.
TEST_F(LlamaHuggingFace, RoundTripsTheHuggingFaceLayout) {
  for (bool tied : {false, true}) {
    LlamaConfig config = dsl::models::llamaTiny();
    config.tiedHead = tied;
    config.ropeTheta = 5e5;
    auto saved = llama(config, 3);
    saveParameters(path("model.safetensors"), saved->parameters());
    dsl::models::saveLlamaConfig(path("config.json"), config);

    LlamaConfig read = dsl::models::readLlamaConfig(path("config.json"));
    EXPECT_EQ(read.vocabSize, config.vocabSize);
    EXPECT_EQ(read.dModel, config.dModel);
    EXPECT_EQ(read.numLayers, config.numLayers);
    EXPECT_EQ(read.numHeads, config.numHeads);
    EXPECT_EQ(read.numKvHeads, config.numKvHeads);
    EXPECT_EQ(read.dFF, config.dFF);
    EXPECT_EQ(read.maxSeqLen, config.maxSeqLen);
    EXPECT_EQ(read.rmsNormEps, config.rmsNormEps);
    EXPECT_EQ(read.ropeTheta, config.ropeTheta);
    EXPECT_EQ(read.tiedHead, tied);
    EXPECT_EQ(read.initStd, config.initStd);

    auto loaded = llama(read, 4); // other parameters until loaded
    Tensor idx = ref::randomIds({2, 17}, config.vocabSize, 9);
    Tensor want = saved->run("forward", {{"idx", idx}})[0];
    EXPECT_NE(loaded->run("forward", {{"idx", idx}})[0].toVector<float>(),
              want.toVector<float>());
    loadParameters(path("model.safetensors"), loaded->parameters(),
                   dsl::models::llamaStateDictMapping(read));
    EXPECT_EQ(loaded->run("forward", {{"idx", idx}})[0].toVector<float>(),
              want.toVector<float>());
  }
}

// A sharded checkpoint as Hugging Face writes one (an index and two shards),
// with the rotary inv_freq buffers older checkpoints hold and, for a tied
// head, an lm_head.weight copy: both ignored.
TEST_F(LlamaHuggingFace, LoadsAShardedCheckpointWithBuffers) {
  LlamaConfig config = dsl::models::llamaTiny();
  config.tiedHead = true;
  auto saved = llama(config, 5);
  NamedTensors first, second;
  std::string weightMap;
  int i = 0;
  for (const auto &[name, tensor] : saved->parameters().namedTensors()) {
    bool one = i++ % 2 == 0;
    (one ? first : second).emplace_back(name, tensor);
    weightMap += (weightMap.empty() ? "" : ", ") + ("\"" + name + "\": \"") +
                 (one ? "model-00001-of-00002.safetensors"
                      : "model-00002-of-00002.safetensors") +
                 "\"";
  }
  first.emplace_back("model.layers.0.self_attn.rotary_emb.inv_freq",
                     Tensor::zeros({8}, DType::f32));
  second.emplace_back("lm_head.weight",
                      saved->parameters().get("model.embed_tokens.weight"));
  weightMap += ", \"model.layers.0.self_attn.rotary_emb.inv_freq\": "
               "\"model-00001-of-00002.safetensors\", \"lm_head.weight\": "
               "\"model-00002-of-00002.safetensors\"";
  saveSafetensors(path("model-00001-of-00002.safetensors"), first);
  saveSafetensors(path("model-00002-of-00002.safetensors"), second);
  write("model.safetensors.index.json",
        "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {" + weightMap +
            "}}");

  auto loaded = llama(config, 6);
  loadParameters(path("model.safetensors.index.json"), loaded->parameters(),
                 dsl::models::llamaStateDictMapping(config));
  Tensor idx = ref::randomIds({1, 9}, config.vocabSize, 2);
  EXPECT_EQ(loaded->run("forward", {{"idx", idx}})[0].toVector<float>(),
            saved->run("forward", {{"idx", idx}})[0].toVector<float>());
  // Without the mapping the buffers are refused by name, nothing loaded.
  auto untouched = llama(config, 6);
  try {
    loadParameters(path("model.safetensors.index.json"),
                   untouched->parameters());
    ADD_FAILURE() << "loaded the buffers";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("inv_freq"), std::string::npos)
        << e.what();
  }
}
