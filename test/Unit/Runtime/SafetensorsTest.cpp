//===- SafetensorsTest.cpp - Tests of the safetensors reader and writer ---===//

#include "runtime/Safetensors.h"

#include "test/Unit/Runtime/ExpectError.h"
#include "test/Unit/Runtime/NearestBF16.h"
#include "test/Unit/Runtime/TempDirTest.h"

#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <unistd.h>

using namespace kiln;
namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<uint8_t>;

/// The 8 little-endian bytes of `value`.
Bytes littleEndian64(uint64_t value) {
  Bytes bytes;
  for (int i = 0; i < 8; ++i) {
    bytes.push_back(static_cast<uint8_t>(value >> (8 * i)));
  }
  return bytes;
}

/// A file: the length of `header`, `header`, then `data`.
Bytes fileWithHeader(const std::string &header, const Bytes &data = {}) {
  Bytes bytes = littleEndian64(header.size());
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

class SafetensorsTest : public kiln::test::TempDirTest {
protected:
  static void writeBytes(const std::string &path, const Bytes &bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char *>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good()) << path;
  }

  static Bytes readBytes(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(in),
                 std::istreambuf_iterator<char>());
  }

  /// The names of the files in the test's directory.
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const fs::directory_entry &entry :
         fs::directory_iterator(directory_)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  /// Expects loading `bytes` to be refused with a message that names the
  /// file and contains `fragment`.
  void expectRefused(const Bytes &bytes, const std::string &fragment) {
    std::string file = path("corrupt.safetensors");
    writeBytes(file, bytes);
    try {
      loadSafetensors(file);
      ADD_FAILURE() << "loaded a corrupt file; expected: " << fragment;
    } catch (const Error &error) {
      std::string message = error.what();
      EXPECT_EQ(message.rfind(file + ": ", 0), 0u)
          << "does not start with the path: " << message;
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "message: " << message << "\nexpected to contain: " << fragment;
    }
  }
};

//===----------------------------------------------------------------------===//
// Round trips
//===----------------------------------------------------------------------===//

TEST_F(SafetensorsTest, RoundTripsDTypesAndShapes) {
  std::vector<float> weights;
  for (int i = 0; i < 7 * 13; ++i) {
    weights.push_back(static_cast<float>(i) * 0.37f - 11.0f);
  }
  NamedTensors tensors = {
      {"encoder.layers.0.attn.wq", Tensor::fromVector<float>({7, 13}, weights)},
      {"ids", Tensor::fromVector<int64_t>({2, 3},
                                          {0, -1, INT64_MAX, INT64_MIN, 5, 6})},
      {"empty", Tensor::zeros({0, 3}, DType::f32)},
      {"positions", Tensor::fromVector<int32_t>({3}, {7, -8, INT32_MAX})},
      {"scale", Tensor::full({}, 0.125f)},
      {"mask",
       Tensor::fromVector<bool>({1, 5}, {true, false, true, true, false})},
      {"empty_ids", Tensor::zeros({4, 0}, DType::i64)},
      {"name with \"quotes\" and ünïcödé", Tensor::full({1}, -0.0f)},
  };
  std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"note", "line\nbreak \"quoted\" ✓"}};
  std::string file = path("model.safetensors");
  saveSafetensors(file, tensors, metadata);

  SafetensorsFile loaded = loadSafetensors(file);
  EXPECT_EQ(loaded.metadata, metadata);
  ASSERT_EQ(loaded.tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto &[name, expected] = tensors[i];
    const auto &[loadedName, actual] = loaded.tensors[i];
    EXPECT_EQ(loadedName, name) << "order is kept";
    EXPECT_EQ(actual.dtype(), expected.dtype()) << name;
    EXPECT_EQ(actual.shape(), expected.shape()) << name;
    ASSERT_EQ(actual.nbytes(), expected.nbytes()) << name;
    EXPECT_EQ(std::memcmp(actual.raw(), expected.raw(), actual.nbytes()), 0)
        << name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(actual.raw()) % 64, 0u) << name;
  }
  EXPECT_EQ(loaded.find("scale")->toVector<float>(),
            std::vector<float>{0.125f});
  EXPECT_EQ(loaded.find("mask")->toVector<bool>(),
            (std::vector<bool>{true, false, true, true, false}));
  EXPECT_EQ(loaded.find("missing"), nullptr);
}

TEST_F(SafetensorsTest, RoundTripsNothing) {
  std::string file = path("empty.safetensors");
  saveSafetensors(file, {});
  Bytes bytes = readBytes(file);
  EXPECT_EQ(bytes, fileWithHeader("{}      "));
  SafetensorsFile loaded = loadSafetensors(file);
  EXPECT_TRUE(loaded.tensors.empty());
  EXPECT_TRUE(loaded.metadata.empty());
}

// A tensor with a 0 among huge sizes holds nothing: it had been refused as
// overflowing.
TEST_F(SafetensorsTest, RoundTripsAnEmptyTensorWithHugeSizes) {
  std::string file = path("huge-empty.safetensors");
  const int64_t huge = int64_t(1) << 40;
  Tensor t = Tensor::empty({huge, huge, 0}, DType::f32);
  EXPECT_EQ(t.numel(), 0);
  saveSafetensors(file, {{"e", t}});
  SafetensorsFile loaded = loadSafetensors(file);
  ASSERT_EQ(loaded.tensors.size(), 1u);
  EXPECT_EQ(loaded.tensors[0].second.shape(),
            (std::vector<int64_t>{huge, huge, 0}));
  EXPECT_EQ(loaded.tensors[0].second.numel(), 0);
}

TEST_F(SafetensorsTest, WritesTheFormatByteForByte) {
  std::string file = path("exact.safetensors");
  saveSafetensors(file,
                  {{"b", Tensor::fromVector<int32_t>({1}, {0x01020304})},
                   {"a", Tensor::fromVector<float>({2}, {1.0f, -2.5f})}},
                  {{"format", "pt"}});
  std::string json =
      R"({"__metadata__":{"format":"pt"},)"
      R"("b":{"dtype":"I32","shape":[1],"data_offsets":[0,4]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  std::string header = json;
  header.resize((json.size() + 7) / 8 * 8, ' ');
  ASSERT_GT(header.size(), json.size()) << "this case exercises padding";
  Bytes expected = fileWithHeader(header, {0x04, 0x03, 0x02,
                                           0x01, // 0x01020304 little-endian
                                           0x00, 0x00, 0x80, 0x3F,   // 1.0f
                                           0x00, 0x00, 0x20, 0xC0}); // -2.5f
  Bytes actual = readBytes(file);
  EXPECT_EQ(actual, expected) << std::string(actual.begin(), actual.end());
  EXPECT_EQ(actual[0] % 8, 0) << "the header length is a multiple of 8";
}

// A bf16 tensor is written as BF16, its bits as they are (1.0 = 0x3F80,
// -2.5 = 0xC020, little-endian), and loads widened to F32, exactly.
TEST_F(SafetensorsTest, WritesBf16TensorsAsBF16) {
  std::string file = path("bf16.safetensors");
  Tensor h = Tensor::fromVector<float>({2}, {1.0f, -2.5f}).to(DType::bf16);
  saveSafetensors(file, {{"h", h}});
  std::string json =
      R"({"h":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})";
  std::string header = json;
  header.resize((json.size() + 7) / 8 * 8, ' ');
  EXPECT_EQ(readBytes(file), fileWithHeader(header, {0x80, 0x3F, 0x20, 0xC0}));
  SafetensorsFile loaded = loadSafetensors(file);
  EXPECT_EQ(loaded.find("h")->dtype(), DType::f32);
  EXPECT_EQ(loaded.find("h")->toVector<float>(),
            (std::vector<float>{1.0f, -2.5f}));
}

TEST_F(SafetensorsTest, LoadsAFileBuiltFromTheSpecification) {
  // Laid out the way the reference writer does: keys sorted, 8-byte
  // dtypes first, header padded with spaces.
  std::string header =
      R"({"__metadata__":{"format":"pt","step":"100"},)"
      R"("ids":{"dtype":"I64","shape":[1,2],"data_offsets":[0,16]},)"
      R"("mask":{"dtype":"BOOL","shape":[3],"data_offsets":[28,31]},)"
      R"("n":{"dtype":"I32","shape":[],"data_offsets":[24,28]},)"
      R"("w":{"dtype":"F32","shape":[2],"data_offsets":[16,24]},)"
      R"("z":{"dtype":"F32","shape":[0,4],"data_offsets":[31,31]}})";
  while (header.size() % 8 != 0) {
    header += ' ';
  }
  Bytes data = {
      0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // ids[0] = 3
      0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, // ids[1] = -1
      0x00, 0x00, 0x80, 0x3F,                         // w[0] = 1.0
      0x00, 0x00, 0x20, 0xC0,                         // w[1] = -2.5
      0x04, 0x03, 0x02, 0x01,                         // n = 0x01020304
      0x01, 0x00, 0x01,                               // mask
  };
  std::string file = path("reference.safetensors");
  writeBytes(file, fileWithHeader(header, data));

  SafetensorsFile loaded = loadSafetensors(file);
  EXPECT_EQ(loaded.metadata, (std::map<std::string, std::string>{
                                 {"format", "pt"}, {"step", "100"}}));
  std::vector<std::string> names;
  for (const auto &[name, tensor] : loaded.tensors) {
    names.push_back(name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"ids", "mask", "n", "w", "z"}));
  const Tensor *ids = loaded.find("ids");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->dtype(), DType::i64);
  EXPECT_EQ(ids->shape(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(ids->toVector<int64_t>(), (std::vector<int64_t>{3, -1}));
  EXPECT_EQ(loaded.find("w")->toVector<float>(),
            (std::vector<float>{1.0f, -2.5f}));
  const Tensor *n = loaded.find("n");
  EXPECT_EQ(n->rank(), 0);
  EXPECT_EQ(n->toVector<int32_t>(), std::vector<int32_t>{0x01020304});
  EXPECT_EQ(loaded.find("mask")->toVector<bool>(),
            (std::vector<bool>{true, false, true}));
  EXPECT_EQ(loaded.find("z")->shape(), (std::vector<int64_t>{0, 4}));

  // Unpadded headers are legal too.
  std::string compact = R"({"w":{"dtype":"F32","shape":[1],)"
                        R"("data_offsets":[0,4]}})";
  writeBytes(file, fileWithHeader(compact, {0x00, 0x00, 0x80, 0x3F}));
  EXPECT_EQ(loadSafetensors(file).find("w")->toVector<float>(),
            std::vector<float>{1.0f});
}

TEST_F(SafetensorsTest, SavesAndLoadsAParameterStore) {
  Rng rng(1);
  ParameterStore store;
  store.add("wte", {5, 4}, Init::normal(0, 0.02), rng);
  store.add("blocks.0.ln.g", {4}, Init::ones(), rng);
  std::string file = path("ckpt.safetensors");
  saveParameters(file, store, {{"step", "3"}});

  ParameterStore restored;
  restored.add("wte", {5, 4}, Init::zeros(), rng);
  restored.add("blocks.0.ln.g", {4}, Init::zeros(), rng);
  EXPECT_EQ(loadParameters(file, restored),
            (std::map<std::string, std::string>{{"step", "3"}}));
  for (const std::string &name : store.names()) {
    EXPECT_EQ(restored.get(name).toVector<float>(),
              store.get(name).toVector<float>());
  }

  ParameterStore other;
  other.add("wte", {4, 5}, Init::zeros(), rng);
  EXPECT_KILN_ERROR(loadParameters(file, other),
                    file + ": cannot set 1 parameters from 2 tensors: 'wte' "
                           "has shape [5, 4] but the model expects [4, 5]");
}

//===----------------------------------------------------------------------===//
// Saving safely
//===----------------------------------------------------------------------===//

TEST_F(SafetensorsTest, OverwritesAnExistingFile) {
  std::string file = path("ckpt.safetensors");
  saveSafetensors(file, {{"a", Tensor::full({100}, 1.0f)}});
  saveSafetensors(file, {{"b", Tensor::full({2}, 2.0f)}});
  SafetensorsFile loaded = loadSafetensors(file);
  ASSERT_EQ(loaded.tensors.size(), 1u);
  EXPECT_EQ(loaded.tensors[0].first, "b");
  EXPECT_EQ(listing(), std::vector<std::string>{"ckpt.safetensors"});
}

TEST_F(SafetensorsTest, RefusesBadInputWithoutTouchingTheFile) {
  std::string file = path("ckpt.safetensors");
  saveSafetensors(file, {{"a", Tensor::full({3}, 1.0f)}});
  Bytes before = readBytes(file);
  Tensor t = Tensor::full({1}, 0.0f);
  EXPECT_KILN_ERROR(saveSafetensors(file, {{"x", t}, {"x", t}}),
                    "two tensors are called 'x'");
  EXPECT_KILN_ERROR(saveSafetensors(file, {{"__metadata__", t}}), "reserved");
  EXPECT_KILN_ERROR(saveSafetensors(file, {{"x", Tensor()}}),
                    "tensor 'x' is undefined");
  EXPECT_KILN_ERROR(saveSafetensors(file, {{"bad\xff", t}}),
                    "tensor name \"bad");
  EXPECT_KILN_ERROR(saveSafetensors(file, {{"x", t}}, {{"k", "\xc3"}}),
                    "not valid UTF-8");
  EXPECT_EQ(readBytes(file), before);
  EXPECT_EQ(listing(), std::vector<std::string>{"ckpt.safetensors"});
}

TEST_F(SafetensorsTest, FailedSaveIntoAMissingDirectoryCreatesNothing) {
  std::string file = path("missing/ckpt.safetensors");
  EXPECT_KILN_ERROR(saveSafetensors(file, {{"a", Tensor::full({3}, 1.0f)}}),
                    file + ": cannot save: cannot create");
  EXPECT_FALSE(fs::exists(path("missing")));
  EXPECT_TRUE(listing().empty());
}

TEST_F(SafetensorsTest, FailedRenameLeavesNoTemporaryFile) {
  // The destination is a directory: rename refuses to replace it.
  std::string file = path("ckpt.safetensors");
  fs::create_directory(file);
  EXPECT_KILN_ERROR(saveSafetensors(file, {{"a", Tensor::full({3}, 1.0f)}}),
                    "cannot rename");
  EXPECT_EQ(listing(), std::vector<std::string>{"ckpt.safetensors"});
  EXPECT_TRUE(fs::is_directory(file));
}

TEST_F(SafetensorsTest, FailedWriteKeepsTheOldFile) {
  std::string file = path("ckpt.safetensors");
  saveSafetensors(file, {{"a", Tensor::full({3}, 1.0f)}});
  Bytes before = readBytes(file);

  // A file size limit makes write() fail part way (EFBIG) even for root.
  struct rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto previousHandler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit limited = saved;
  limited.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  try {
    saveSafetensors(file, {{"big", Tensor::zeros({1 << 16}, DType::f32)}});
    ADD_FAILURE() << "expected the write to fail";
  } catch (const Error &error) {
    EXPECT_NE(std::string(error.what()).find("cannot write"), std::string::npos)
        << error.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previousHandler);

  EXPECT_EQ(readBytes(file), before);
  EXPECT_EQ(listing(), std::vector<std::string>{"ckpt.safetensors"});
}

// A save killed part way leaves "<path>.tmp"; the next save of that path
// reuses it, so killed saves do not pile up (they had left one full-size
// file each).
TEST_F(SafetensorsTest, TheNextSaveReusesAKilledSavesTemporaryFile) {
  std::string file = path("ckpt.safetensors");
  {
    std::ofstream left(file + ".tmp", std::ios::binary);
    left << std::string(100000, 'x'); // what a killed save left
  }
  saveSafetensors(file, {{"a", Tensor::full({3}, 1.0f)}});
  EXPECT_EQ(listing(), std::vector<std::string>{"ckpt.safetensors"});
  EXPECT_EQ(loadSafetensors(file).tensors.size(), 1u);
}

// Two saves of one path at once: the second is refused and neither the
// file nor the first save's temporary file is touched.
TEST_F(SafetensorsTest, ASecondSaveOfOnePathAtOnceIsRefused) {
  std::string file = path("ckpt.safetensors");
  saveSafetensors(file, {{"a", Tensor::full({3}, 1.0f)}});
  Bytes before = readBytes(file);
  int fd = ::open((file + ".tmp").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "partial", 7), 7);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0); // a save in progress
  EXPECT_KILN_ERROR(saveSafetensors(file, {{"b", Tensor::full({2}, 2.0f)}}),
                    "cannot save: another save of it is in progress");
  EXPECT_EQ(readBytes(file), before);
  EXPECT_EQ(readBytes(file + ".tmp"),
            (Bytes{'p', 'a', 'r', 't', 'i', 'a', 'l'}));
  ::close(fd);
}

//===----------------------------------------------------------------------===//
// Refusing corrupt files
//===----------------------------------------------------------------------===//

/// A valid entry for a tensor "t" of `count` F32 elements at [0, 4·count].
std::string f32Entry(const std::string &name, int begin, int count) {
  return "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[" +
         std::to_string(count) + "],\"data_offsets\":[" +
         std::to_string(begin) + "," + std::to_string(begin + 4 * count) + "]}";
}

TEST_F(SafetensorsTest, RefusesMissingAndNonRegularFiles) {
  EXPECT_KILN_ERROR(loadSafetensors(path("absent.safetensors")),
                    "absent.safetensors: cannot open: No such file");
  EXPECT_KILN_ERROR(loadSafetensors(directory_.string()), "not a regular file");
}

TEST_F(SafetensorsTest, RefusesTruncatedFile) {
  expectRefused({}, "the file is 0 bytes, too short for the 8-byte header "
                    "length");
  expectRefused({0x10, 0x00, 0x00, 0x00, 0x00},
                "the file is 5 bytes, too short");
}

TEST_F(SafetensorsTest, RefusesHeaderLongerThanFile) {
  Bytes bytes = littleEndian64(1000);
  std::string header = "{}";
  bytes.insert(bytes.end(), header.begin(), header.end());
  expectRefused(bytes, "the header length 1000 is larger than the 2 bytes "
                       "that follow it");
  // A real file cut short inside its header.
  Bytes whole = fileWithHeader("{" + f32Entry("t", 0, 2) + "}", Bytes(8, 0));
  expectRefused(Bytes(whole.begin(), whole.begin() + 20),
                "is larger than the 12 bytes that follow it");
}

TEST_F(SafetensorsTest, RefusesHugeHeaderLength) {
  Bytes bytes = littleEndian64(uint64_t(1) << 63);
  bytes.push_back('{');
  expectRefused(bytes, "the header length 9223372036854775808 exceeds the "
                       "limit of 104857600 bytes (100 MiB)");
  expectRefused(littleEndian64(kMaxSafetensorsHeaderBytes + 1),
                "exceeds the limit");
}

TEST_F(SafetensorsTest, RefusesInvalidJson) {
  expectRefused(fileWithHeader("{\"t\": "), "the header is not valid JSON");
  expectRefused(fileWithHeader(""), "the header is not valid JSON");
  expectRefused(fileWithHeader("{} x"), "the header is not valid JSON");
  expectRefused(fileWithHeader("{\"\xff\":1}"), "not valid JSON");
  expectRefused(fileWithHeader("[1, 2]"), "the header is an array, not a "
                                          "JSON object");
  expectRefused(fileWithHeader("{" + f32Entry("t", 0, 1) + "," +
                                   f32Entry("t", 4, 1) + "}",
                               Bytes(8, 0)),
                "the header has the key 't' twice");
  expectRefused(fileWithHeader("{\"t\":{\"dtype\":{\"a\":[[1]]}}}"),
                "nests deeper than the format allows");
}

TEST_F(SafetensorsTest, RefusesBadEntries) {
  expectRefused(fileWithHeader("{\"t\":[1]}"),
                "tensor 't' is described by [1] instead of an object");
  expectRefused(
      fileWithHeader(R"({"t":{"dtype":"F32","shape":[1]}})", Bytes(4, 0)),
      "tensor 't' has no 'data_offsets'");
  expectRefused(fileWithHeader(R"({"t":{"dtype":"F32","shape":[1],)"
                               R"("data_offsets":[0,4],"x":1}})",
                               Bytes(4, 0)),
                "tensor 't' has an unknown field 'x'");
  expectRefused(fileWithHeader(R"({"__metadata__":{"n":1}})"),
                "__metadata__ entry 'n' is 1, not a string");
  expectRefused(fileWithHeader(R"({"__metadata__":["a"]})"),
                "__metadata__ is [\"a\"], not an object of strings");
}

TEST_F(SafetensorsTest, RefusesUnknownDType) {
  expectRefused(fileWithHeader(R"({"t":{"dtype":"Q7","shape":[1],)"
                               R"("data_offsets":[0,4]}})",
                               Bytes(4, 0)),
                "tensor 't' has unknown dtype \"Q7\" (Kiln reads F32, BF16 and "
                "F16 as F32, I32, I64 and BOOL)");
  expectRefused(fileWithHeader(R"({"t":{"dtype":"F64","shape":[1],)"
                               R"("data_offsets":[0,8]}})",
                               Bytes(8, 0)),
                "tensor 't' has dtype F64, which Kiln does not support");
  expectRefused(fileWithHeader(R"({"t":{"dtype":7,"shape":[1],)"
                               R"("data_offsets":[0,4]}})",
                               Bytes(4, 0)),
                "tensor 't' has dtype 7, not a string");
}

//===----------------------------------------------------------------------===//
// 16-bit floats
//===----------------------------------------------------------------------===//

/// The F32 bits of `value`.
uint32_t bitsOf(float value) { return std::bit_cast<uint32_t>(value); }

/// The F32 values of a loaded tensor, as bits (NaN payloads compared too).
std::vector<uint32_t> bitsOf(const Tensor &tensor) {
  std::vector<uint32_t> bits;
  for (float value : tensor.toVector<float>()) {
    bits.push_back(bitsOf(value));
  }
  return bits;
}

/// The little-endian bytes of 16-bit values.
Bytes halves(const std::vector<uint16_t> &values) {
  Bytes bytes;
  for (uint16_t v : values) {
    bytes.push_back(uint8_t(v));
    bytes.push_back(uint8_t(v >> 8));
  }
  return bytes;
}

TEST_F(SafetensorsTest, WidensBF16ToF32Exactly) {
  // A BF16 value is the upper half of an F32: 1.0, -2.5, the smallest
  // subnormal, the largest finite, -0, infinity, a NaN with a payload.
  std::vector<uint16_t> stored = {0x3F80, 0xC020, 0x0001, 0x7F7F,
                                  0x8000, 0x7F80, 0x7FC1};
  std::vector<uint32_t> expected = {
      bitsOf(1.0f),  bitsOf(-2.5f), bitsOf(0x1p-133f), 0x7F7F0000u,
      bitsOf(-0.0f), 0x7F800000u,   0x7FC10000u};
  std::string file = path("bf16.safetensors");
  writeBytes(file, fileWithHeader(R"({"w":{"dtype":"BF16","shape":[7],)"
                                  R"("data_offsets":[0,14]},)"
                                  R"("n":{"dtype":"I32","shape":[],)"
                                  R"("data_offsets":[14,18]}})",
                                  [&] {
                                    Bytes data = halves(stored);
                                    data.insert(data.end(), {5, 0, 0, 0});
                                    return data;
                                  }()));
  SafetensorsFile loaded = loadSafetensors(file);
  const Tensor *w = loaded.find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype(), DType::f32);
  EXPECT_EQ(w->shape(), std::vector<int64_t>{7});
  EXPECT_EQ(bitsOf(*w), expected);
  EXPECT_EQ(loaded.find("n")->toVector<int32_t>(), std::vector<int32_t>{5});
  EXPECT_EQ(loaded.widened,
            (std::map<std::string, std::string>{{"w", "BF16"}}));
}

TEST_F(SafetensorsTest, WidensF16ToF32Exactly) {
  // binary16: 1.0, -2.0, 65504 (the largest), the smallest subnormal
  // (2^-24), the largest subnormal (1023 * 2^-24), the smallest normal
  // (2^-14), 1/3 rounded (0x3555 = 1365/4096), -0, infinities, a NaN,
  // -2^-24, a subnormal from the middle (0x0155 = 341 * 2^-24).
  std::vector<uint16_t> stored = {0x3C00, 0xC000, 0x7BFF, 0x0001,
                                  0x03FF, 0x0400, 0x3555, 0x8000,
                                  0x7C00, 0xFC00, 0x7E00, 0x8001};
  std::vector<double> values = {1.0,
                                -2.0,
                                65504.0,
                                std::ldexp(1.0, -24),
                                std::ldexp(1023.0, -24),
                                std::ldexp(1.0, -14),
                                1365.0 / 4096.0,
                                -0.0,
                                INFINITY,
                                -INFINITY,
                                0.0, // the NaN: compared below
                                -std::ldexp(1.0, -24),
                                std::ldexp(341.0, -24)};
  // Every value, and a single element (the loader widens in place, last
  // element first).
  for (size_t count : {stored.size(), size_t(1)}) {
    std::vector<uint16_t> part(stored.begin(), stored.begin() + count);
    std::string file = path("f16.safetensors");
    writeBytes(file, fileWithHeader(R"({"h":{"dtype":"F16","shape":[)" +
                                        std::to_string(count) +
                                        R"(],"data_offsets":[0,)" +
                                        std::to_string(2 * count) + "]}}",
                                    halves(part)));
    SafetensorsFile loaded = loadSafetensors(file);
    const Tensor *h = loaded.find("h");
    ASSERT_NE(h, nullptr);
    ASSERT_EQ(h->dtype(), DType::f32);
    std::vector<uint32_t> bits = bitsOf(*h);
    ASSERT_EQ(bits.size(), count);
    for (size_t i = 0; i < count; ++i) {
      if (i == 10) {
        EXPECT_EQ(bits[i], 0x7FC00000u) << "the quiet NaN";
        continue;
      }
      EXPECT_EQ(bits[i], bitsOf(float(values[i])))
          << "element " << i << " (0x" << std::hex << stored[i] << ")";
    }
    EXPECT_EQ(loaded.widened,
              (std::map<std::string, std::string>{{"h", "F16"}}));
  }
}

TEST_F(SafetensorsTest, ChecksBF16AndF16OffsetsInTwoByteElements) {
  // Offsets sized for F32 elements do not fit a BF16 tensor.
  expectRefused(fileWithHeader(R"({"t":{"dtype":"BF16","shape":[2],)"
                               R"("data_offsets":[0,8]}})",
                               Bytes(8, 0)),
                "tensor 't' has data_offsets [0, 8] but shape [2] of BF16 "
                "needs 4 bytes");
  expectRefused(fileWithHeader(R"({"t":{"dtype":"F16","shape":[3],)"
                               R"("data_offsets":[0,4]}})",
                               Bytes(4, 0)),
                "tensor 't' has data_offsets [0, 4] but shape [3] of F16 "
                "needs 6 bytes");
}

TEST_F(SafetensorsTest, WritesF32AsBF16RoundedToNearestEven) {
  // Ties go to the even BF16 (0x3F80 stays, 0x3F81 goes up to 0x3F82);
  // above a tie rounds up; the largest F32 overflows to infinity; NaNs stay
  // NaNs (quiet, with their sign); integers are written as they are.
  std::vector<uint32_t> bits = {0x3F808000u, 0x3F818000u, 0x3F808001u,
                                0x3F807FFFu, 0x7F7FFFFFu, 0xFF800000u,
                                0xFF800001u, 0x00000001u, 0x80000000u};
  std::vector<uint16_t> rounded = {0x3F80, 0x3F82, 0x3F81, 0x3F80, 0x7F80,
                                   0xFF80, 0xFFC0, 0x0000, 0x8000};
  std::vector<float> values;
  for (uint32_t b : bits) {
    values.push_back(std::bit_cast<float>(b));
  }
  Tensor ids = Tensor::fromVector<int64_t>({2}, {3, -1});
  std::string file = path("out.safetensors");
  saveSafetensors(
      file, {{"w", Tensor::fromVector<float>({3, 3}, values)}, {"ids", ids}},
      {}, FloatStorage::bf16);
  std::string header =
      R"({"w":{"dtype":"BF16","shape":[3,3],"data_offsets":[0,18]},)"
      R"("ids":{"dtype":"I64","shape":[2],"data_offsets":[18,34]}})";
  while (header.size() % 8 != 0) {
    header += ' ';
  }
  Bytes expected = fileWithHeader(header, halves(rounded));
  for (uint8_t b : Bytes{3, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                         0xFF, 0xFF, 0xFF}) {
    expected.push_back(b);
  }
  EXPECT_EQ(readBytes(file), expected);

  // And back: each value is its BF16's F32.
  SafetensorsFile loaded = loadSafetensors(file);
  std::vector<uint32_t> widened;
  for (uint16_t r : rounded) {
    widened.push_back(uint32_t(r) << 16);
  }
  EXPECT_EQ(bitsOf(*loaded.find("w")), widened);
  EXPECT_EQ(loaded.find("ids")->toVector<int64_t>(),
            (std::vector<int64_t>{3, -1}));
}

TEST_F(SafetensorsTest, WritesLargeTensorsAsBF16BlockByBlock) {
  // More elements than one block of the writer (4096), not a multiple.
  std::vector<float> values(10000);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = float(i) - 5000.5f; // most of them rounded in BF16
  }
  std::string file = path("large.safetensors");
  ParameterStore store;
  store.add("w", Tensor::fromVector<float>({100, 100}, values));
  saveParameters(file, store, {}, FloatStorage::bf16);
  // Loaded into an F32 parameter of the same shape (widened on load).
  ParameterStore restored;
  restored.add("w", Tensor::fromVector<float>(
                        {100, 100}, std::vector<float>(values.size(), 0.0f)));
  loadParameters(file, restored);
  std::vector<float> loaded = restored.get("w").toVector<float>();
  ASSERT_EQ(loaded.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(loaded[i], test::nearestBF16(values[i])) << "element " << i;
  }
}

TEST_F(SafetensorsTest, RefusesBadShapes) {
  expectRefused(fileWithHeader(R"({"t":{"dtype":"F32","shape":[2,-3],)"
                               R"("data_offsets":[0,24]}})",
                               Bytes(24, 0)),
                "tensor 't' has shape [2,-3]: sizes must be non-negative "
                "integers");
  expectRefused(fileWithHeader(R"({"t":{"dtype":"F32","shape":[2.5],)"
                               R"("data_offsets":[0,8]}})",
                               Bytes(8, 0)),
                "sizes must be non-negative integers");
  expectRefused(fileWithHeader(R"({"t":{"dtype":"F32","shape":"[2]",)"
                               R"("data_offsets":[0,8]}})",
                               Bytes(8, 0)),
                "tensor 't' has shape \"[2]\", not a list");
  expectRefused(
      fileWithHeader(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],)"
                     R"("data_offsets":[0,0]}})"),
      "whose element count overflows");
  expectRefused(
      fileWithHeader(R"({"t":{"dtype":"I64","shape":[4611686018427387904],)"
                     R"("data_offsets":[0,0]}})"),
      "whose byte size overflows");
}

TEST_F(SafetensorsTest, RefusesBadOffsets) {
  expectRefused(fileWithHeader("{" + f32Entry("t", 0, 4) + "}", Bytes(8, 0)),
                "tensor 't' has data_offsets [0, 16] past the end of the "
                "8-byte data buffer");
  expectRefused(fileWithHeader(R"({"t":{"dtype":"F32","shape":[1],)"
                               R"("data_offsets":[4,0]}})",
                               Bytes(4, 0)),
                "tensor 't' has data_offsets [4, 0] whose begin is after its "
                "end");
  expectRefused(fileWithHeader(R"({"t":{"dtype":"F32","shape":[1],)"
                               R"("data_offsets":[0]}})",
                               Bytes(4, 0)),
                "tensor 't' has data_offsets [0], not two non-negative "
                "integers");
  expectRefused(fileWithHeader(R"({"t":{"dtype":"F32","shape":[1],)"
                               R"("data_offsets":[-4,0]}})",
                               Bytes(4, 0)),
                "not two non-negative integers");
}

TEST_F(SafetensorsTest, RefusesOffsetsThatDoNotMatchTheShape) {
  std::string file = path("ckpt.safetensors");
  writeBytes(file, fileWithHeader(R"({"wte":{"dtype":"F32","shape":[65,128],)"
                                  R"("data_offsets":[0,100]}})",
                                  Bytes(100, 0)));
  EXPECT_KILN_ERROR(loadSafetensors(file),
                    file + ": tensor 'wte' has data_offsets [0, 100] but "
                           "shape [65, 128] of F32 needs 33280 bytes");
}

TEST_F(SafetensorsTest, RefusesOverlappingTensors) {
  expectRefused(fileWithHeader("{" + f32Entry("a", 0, 2) + "," +
                                   f32Entry("b", 4, 2) + "}",
                               Bytes(12, 0)),
                "tensors 'a' [0, 8] and 'b' [4, 12] overlap");
  expectRefused(fileWithHeader("{" + f32Entry("a", 0, 2) + "," +
                                   f32Entry("b", 0, 2) + "}",
                               Bytes(8, 0)),
                "overlap");
}

TEST_F(SafetensorsTest, RefusesUncoveredBytes) {
  expectRefused(fileWithHeader("{" + f32Entry("a", 0, 2) + "}", Bytes(12, 0)),
                "the last 4 bytes of the 12-byte data buffer (from offset 8) "
                "are not covered by any tensor");
  expectRefused(fileWithHeader("{" + f32Entry("a", 0, 1) + "," +
                                   f32Entry("b", 8, 1) + "}",
                               Bytes(12, 0)),
                "bytes [4, 8) of the data buffer are not covered by any "
                "tensor");
  expectRefused(fileWithHeader("{}", Bytes(3, 0)),
                "the last 3 bytes of the 3-byte data buffer");
}

TEST_F(SafetensorsTest, AcceptsZeroSizeTensorsAnywhere) {
  std::string file = path("zero.safetensors");
  writeBytes(file, fileWithHeader("{" + f32Entry("a", 0, 2) + "," +
                                      f32Entry("inside", 4, 0) + "," +
                                      f32Entry("end", 8, 0) + "}",
                                  Bytes(8, 0)));
  EXPECT_EQ(loadSafetensors(file).tensors.size(), 3u);
}

/// A header of `count` empty F32 tensors.
std::string emptyTensors(uint64_t count) {
  std::string header = "{";
  for (uint64_t i = 0; i < count; ++i) {
    header += (i ? ",\"t" : "\"t") + std::to_string(i) +
              R"(":{"dtype":"F32","shape":[0],"data_offsets":[0,0]})";
  }
  return header + "}";
}

// Loading is linear in the header: 100k entries had taken minutes (the JSON
// parser's callback rescanned the whole object after every entry: 20k 3 s,
// 80k 269 s); now well under a second. The bound only catches the
// quadratic behaviour back, with room for slow (sanitizer) builds.
TEST_F(SafetensorsTest, LoadsManyTensorsInLinearTime) {
  std::string file = path("many.safetensors");
  writeBytes(file, fileWithHeader(emptyTensors(100000)));
  auto start = std::chrono::steady_clock::now();
  SafetensorsFile loaded = loadSafetensors(file);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ASSERT_EQ(loaded.tensors.size(), 100000u);
  EXPECT_EQ(loaded.tensors[99999].first, "t99999"); // file order
  EXPECT_LT(seconds, 20.0);
}

TEST_F(SafetensorsTest, RefusesMoreTensorsThanTheLimit) {
  expectRefused(fileWithHeader(emptyTensors(kMaxSafetensorsTensors + 1)),
                "the header describes more than 200000 tensors");
}

TEST_F(SafetensorsTest, RefusesBoolBytesOtherThanZeroAndOne) {
  expectRefused(fileWithHeader(R"({"m":{"dtype":"BOOL","shape":[3],)"
                               R"("data_offsets":[0,3]}})",
                               {0x01, 0x00, 0x02}),
                "tensor 'm' of dtype BOOL holds the byte 2 at element 2");
}

} // namespace
