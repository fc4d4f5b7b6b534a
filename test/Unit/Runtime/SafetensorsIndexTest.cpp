//===- SafetensorsIndexTest.cpp - Checkpoints sharded over several files --===//
//
// loadShardedSafetensors: Hugging Face's model.safetensors.index.json and
// its shards, read as untrusted input.
//
//===----------------------------------------------------------------------===//

#include "runtime/Safetensors.h"

#include "runtime/StateDict.h"
#include "test/Unit/Runtime/ExpectError.h"
#include "test/Unit/Runtime/TempDirTest.h"

#include <gtest/gtest.h>

#include <fstream>

#include <sys/stat.h>

using namespace kiln;

namespace {

class SafetensorsIndexTest : public kiln::test::TempDirTest {
protected:
  /// Two shards as Hugging Face writes them (the embedding and the first
  /// layer in one, the rest in the other; the second shard in BF16), and
  /// their index.
  void SetUp() override {
    TempDirTest::SetUp();
    saveSafetensors(path("model-00001-of-00002.safetensors"),
                    {{"embed.weight", ramp({4, 3}, 0)},
                     {"layers.0.weight", ramp({3, 3}, 100)}},
                    {{"format", "pt"}});
    saveSafetensors(path("model-00002-of-00002.safetensors"),
                    {{"layers.1.weight", ramp({3, 3}, 200)},
                     {"norm.weight", ramp({3}, 240)}},
                    {{"format", "pt"}}, FloatStorage::bf16);
    writeIndex(R"({"metadata": {"total_size": 136},
      "weight_map": {
        "embed.weight": "model-00001-of-00002.safetensors",
        "layers.0.weight": "model-00001-of-00002.safetensors",
        "layers.1.weight": "model-00002-of-00002.safetensors",
        "norm.weight": "model-00002-of-00002.safetensors"}})");
  }

  /// `base`, `base` + 1, ... in `shape` (integers below 256 are exact in
  /// BF16).
  static Tensor ramp(std::vector<int64_t> shape, float base) {
    int64_t n = 1;
    for (int64_t s : shape) {
      n *= s;
    }
    std::vector<float> values(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      values[size_t(i)] = base + float(i);
    }
    return Tensor::fromVector<float>(shape, values);
  }

  void writeIndex(const std::string &text,
                  const std::string &name = "model.safetensors.index.json") {
    std::ofstream out(path(name));
    out << text;
    ASSERT_TRUE(out.good());
  }

  std::string index() const { return path("model.safetensors.index.json"); }
};

} // namespace

TEST_F(SafetensorsIndexTest, LoadsEveryShardsTensors) {
  SafetensorsFile loaded = loadShardedSafetensors(index());
  std::vector<std::string> names;
  for (const auto &[name, tensor] : loaded.tensors) {
    names.push_back(name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"embed.weight", "layers.0.weight",
                                             "layers.1.weight",
                                             "norm.weight"}));
  EXPECT_EQ(loaded.find("layers.0.weight")->toVector<float>(),
            ramp({3, 3}, 100).toVector<float>());
  EXPECT_EQ(loaded.find("norm.weight")->toVector<float>(),
            (std::vector<float>{240, 241, 242}));
  EXPECT_EQ(loaded.find("layers.1.weight")->shape(),
            (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(loaded.metadata,
            (std::map<std::string, std::string>{{"total_size", "136"}}));
  EXPECT_EQ(loaded.widened,
            (std::map<std::string, std::string>{{"layers.1.weight", "BF16"},
                                                {"norm.weight", "BF16"}}));
  // loadCheckpointTensors tells an index from a safetensors file.
  EXPECT_EQ(loadCheckpointTensors(index()).tensors.size(), 4u);
  EXPECT_EQ(loadCheckpointTensors(path("model-00001-of-00002.safetensors"))
                .tensors.size(),
            2u);
}

TEST_F(SafetensorsIndexTest, LoadsIntoParametersDirectlyAndThroughAMapping) {
  Rng rng(1);
  auto model = [&] {
    ParameterStore store;
    store.add("embed.weight", {4, 3}, Init::zeros(), rng);
    store.add("layers.0.weight", {3, 3}, Init::zeros(), rng);
    store.add("layers.1.weight", {3, 3}, Init::zeros(), rng);
    store.add("norm.weight", {3}, Init::zeros(), rng);
    return store;
  };
  ParameterStore direct = model();
  loadParameters(index(), direct);
  EXPECT_EQ(direct.get("layers.1.weight").toVector<float>(),
            ramp({3, 3}, 200).toVector<float>());

  ParameterStore mapped = model();
  loadParameters(index(), mapped, StateDictMapping{.transpose = {"layers.*.weight"}});
  // layers.0.weight transposed: element [r, c] is the file's [c, r].
  EXPECT_EQ(mapped.get("layers.0.weight").toVector<float>(),
            (std::vector<float>{100, 103, 106, 101, 104, 107, 102, 105, 108}));
  EXPECT_EQ(mapped.get("embed.weight").toVector<float>(),
            ramp({4, 3}, 0).toVector<float>());
}

TEST_F(SafetensorsIndexTest, RefusesMalformedIndexes) {
  auto refused = [&](const std::string &text, const std::string &fragment) {
    writeIndex(text, "bad.index.json");
    EXPECT_KILN_ERROR(loadShardedSafetensors(path("bad.index.json")),
                      path("bad.index.json") + ": " + fragment);
  };
  refused("[1]", "the index is not a JSON object with a weight_map");
  refused("{", "the index is not valid JSON");
  refused(R"({"metadata": {}})",
          "the index has no weight_map object (tensor name: shard file)");
  refused(R"({"weight_map": {}, "extra": 1})",
          "the index has an unknown field 'extra' (it has metadata and "
          "weight_map)");
  refused(R"({"metadata": [], "weight_map": {}})",
          "the index's metadata is [], not an object");
  refused(R"({"metadata": {"a": [1]}, "weight_map": {}})",
          "the index's metadata 'a' is [1], not a string or a number");
  refused(R"({"weight_map": {"a": "x.safetensors", "a": "y.safetensors"}})",
          "the index has the key 'a' twice in one object");
  refused(R"({"weight_map": {"a": 7}})",
          "the index gives tensor 'a' the shard 7, not a file name");
  for (const char *shard : {"../model-00001-of-00002.safetensors",
                            "/etc/passwd", "sub/x.safetensors", "..", ""}) {
    refused(std::string(R"({"weight_map": {"a": ")") + shard + R"("}})",
            std::string("the index puts tensor 'a' in '") + shard +
                "', which is not a file name of the index's directory");
  }
}

TEST_F(SafetensorsIndexTest, RefusesShardsThatDoNotHoldWhatTheIndexSays) {
  // A tensor the index puts in a shard that does not hold it.
  writeIndex(R"({"weight_map": {
      "embed.weight": "model-00001-of-00002.safetensors",
      "layers.0.weight": "model-00001-of-00002.safetensors",
      "lm_head.weight": "model-00001-of-00002.safetensors"}})",
             "missing.index.json");
  EXPECT_KILN_ERROR(
      loadShardedSafetensors(path("missing.index.json")),
      "the index puts tensor 'lm_head.weight' in shard "
      "'model-00001-of-00002.safetensors', which does not hold it");
  // A shard tensor the index does not put there.
  writeIndex(R"({"weight_map": {
      "embed.weight": "model-00001-of-00002.safetensors"}})",
             "extra.index.json");
  EXPECT_KILN_ERROR(loadShardedSafetensors(path("extra.index.json")),
                    "shard 'model-00001-of-00002.safetensors' holds tensor "
                    "'layers.0.weight', which the index does not put there");
  // A shard that is not there, and one that is corrupt: named.
  writeIndex(R"({"weight_map": {"a": "gone.safetensors"}})",
             "gone.index.json");
  EXPECT_KILN_ERROR(loadShardedSafetensors(path("gone.index.json")),
                    path("gone.safetensors") + ": cannot open");
  {
    std::ofstream out(path("corrupt.safetensors"));
    out << "short";
  }
  writeIndex(R"({"weight_map": {"a": "corrupt.safetensors"}})",
             "corrupt.index.json");
  EXPECT_KILN_ERROR(loadShardedSafetensors(path("corrupt.index.json")),
                    path("corrupt.safetensors") + ": the file is 5 bytes");
}

TEST_F(SafetensorsIndexTest, RefusesAShardThatIsAFifoWithoutWaiting) {
  ASSERT_EQ(::mkfifo(path("fifo.safetensors").c_str(), 0600), 0);
  writeIndex(R"({"weight_map": {"a": "fifo.safetensors"}})", "fifo.index.json");
  EXPECT_KILN_ERROR(loadShardedSafetensors(path("fifo.index.json")),
                    path("fifo.safetensors") + ": not a regular file");
  ASSERT_EQ(::mkfifo(path("fifo.index.json.2").c_str(), 0600), 0);
  EXPECT_KILN_ERROR(loadShardedSafetensors(path("fifo.index.json.2")),
                    path("fifo.index.json.2") + ": not a regular file");
}

TEST_F(SafetensorsIndexTest, RefusesAnIndexThatIsNoRegularFile) {
  EXPECT_KILN_ERROR(loadShardedSafetensors(path("none.index.json")),
                    path("none.index.json") + ": cannot open");
  std::filesystem::create_directory(path("dir.index.json"));
  EXPECT_KILN_ERROR(loadShardedSafetensors(path("dir.index.json")),
                    path("dir.index.json") + ": not a regular file");
}
