//===- Safetensors.cpp - Checkpoints in the safetensors format -----------===//
//
// The loader validates everything before it allocates anything a file could
// make large, and reads each tensor straight into its aligned storage. The
// writer lays tensors out in the order given and pads the header with spaces
// so that the data buffer starts at a multiple of 8.
//
//===----------------------------------------------------------------------===//

#include "runtime/Safetensors.h"

#include "runtime/Error.h"
#include "runtime/FileDescriptor.h"
#include "runtime/Files.h"
#include "runtime/StrictJson.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace kiln;
using json = nlohmann::json;

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would "
              "need byte swapping here");

//===----------------------------------------------------------------------===//
// Dtypes
//===----------------------------------------------------------------------===//

/// The safetensors name of a Kiln dtype.
static const char *safetensorsName(DType dtype) {
  switch (dtype) {
  case DType::f32:
    return "F32";
  case DType::i32:
    return "I32";
  case DType::i64:
    return "I64";
  case DType::i1:
    return "BOOL";
  case DType::bf16:
    return "BF16";
  }
  return "?";
}

/// The Kiln dtype of a safetensors dtype name, if Kiln has one.
static std::optional<DType> parseDType(std::string_view name) {
  for (DType dtype : {DType::f32, DType::i32, DType::i64, DType::i1}) {
    if (name == safetensorsName(dtype)) {
      return dtype;
    }
  }
  return std::nullopt;
}

/// Whether `name` is a dtype of the safetensors format that Kiln does not
/// hold (so the message can say "unsupported" rather than "unknown").
static bool isOtherSafetensorsDType(std::string_view name) {
  static constexpr std::string_view others[] = {
      "F64",     "I8",      "I16",     "U8",      "U16",     "U32", "U64",
      "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4",  "C64"};
  return std::find(std::begin(others), std::end(others), name) !=
         std::end(others);
}

//===----------------------------------------------------------------------===//
// 16-bit floats
//===----------------------------------------------------------------------===//

namespace {
/// The 16-bit float formats a file may store F32 tensors in.
enum class Half { none, bf16, f16 };
} // namespace

static const char *halfName(Half half) {
  return half == Half::bf16 ? "BF16" : "F16";
}

/// The F32 bits of a BF16 value: its 16 bits are the F32's upper half.
static uint32_t widenBF16(uint16_t bits) {
  return std::bit_cast<uint32_t>(BFloat16{bits}.toFloat());
}

/// The F32 bits of an IEEE 754 binary16 value (1 sign, 5 exponent, 10
/// fraction bits): every one is an F32 value, subnormals included.
static uint32_t widenF16(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000) << 16;
  uint32_t exponent = (bits >> 10) & 0x1f;
  uint32_t fraction = bits & 0x3ff;
  if (exponent == 0x1f) { // infinity, NaN (payload kept)
    return sign | 0x7f800000u | (fraction << 13);
  }
  if (exponent == 0) {
    if (fraction == 0) {
      return sign; // zero
    }
    // Subnormal: fraction * 2^-24, normalized for F32.
    int shift = std::countl_zero(uint16_t(fraction)) - 5; // to bit 10
    fraction = (fraction << shift) & 0x3ff;
    return sign | (uint32_t(113 - shift) << 23) | (fraction << 13);
  }
  return sign | ((exponent + 112) << 23) | (fraction << 13);
}

/// strerror of the current errno.
static std::string lastError() { return std::strerror(errno); }

//===----------------------------------------------------------------------===//
// Saving
//===----------------------------------------------------------------------===//

/// The JSON string literal for `text`; throws kiln::Error when `text` is not
/// valid UTF-8 (JSON cannot hold it).
static std::string jsonString(const std::string &path, const std::string &text,
                              const char *what) {
  try {
    return json(text).dump();
  } catch (const json::exception &) {
    throw Error(fmt::format(
        "{}: cannot save: {} {} is not valid UTF-8", path, what,
        json(text).dump(-1, ' ', true, json::error_handler_t::replace)));
  }
}

/// Whether `tensor` is stored as BF16 (FloatStorage::bf16 and an F32).
static bool storedAsBF16(const Tensor &tensor, FloatStorage floats) {
  return floats == FloatStorage::bf16 && tensor.dtype() == DType::f32;
}

/// Builds the header (JSON padded with spaces to a multiple of 8) for
/// `tensors` laid out in order.
static std::string
buildHeader(const std::string &path, const NamedTensors &tensors,
            const std::map<std::string, std::string> &metadata,
            FloatStorage floats) {
  std::string header = "{";
  bool first = true;
  auto separate = [&] {
    if (!first) {
      header += ',';
    }
    first = false;
  };
  if (!metadata.empty()) {
    separate();
    header += "\"__metadata__\":{";
    bool firstEntry = true;
    for (const auto &[key, value] : metadata) {
      if (!firstEntry) {
        header += ',';
      }
      firstEntry = false;
      header += jsonString(path, key, "metadata key");
      header += ':';
      header += jsonString(path, value, "the value of metadata key");
    }
    header += '}';
  }

  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto &[name, tensor] : tensors) {
    if (name == "__metadata__") {
      throw Error(fmt::format("{}: cannot save: the tensor name "
                              "'__metadata__' is reserved by the format",
                              path));
    }
    if (!seen.insert(name).second) {
      throw Error(fmt::format("{}: cannot save: two tensors are called '{}'",
                              path, name));
    }
    if (!tensor.defined()) {
      throw Error(
          fmt::format("{}: cannot save: tensor '{}' is undefined", path, name));
    }
    bool bf16 = storedAsBF16(tensor, floats);
    uint64_t end =
        offset + (bf16 ? uint64_t(tensor.numel()) * 2 : tensor.nbytes());
    separate();
    header += fmt::format(
        "{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
        jsonString(path, name, "tensor name"),
        bf16 ? "BF16" : safetensorsName(tensor.dtype()),
        fmt::join(tensor.shape(), ","), offset, end);
    offset = end;
  }
  header += '}';
  header.resize((header.size() + 7) / 8 * 8, ' ');
  return header;
}

/// Writes `tensor`'s elements rounded to BF16 (roundToBF16), a block at a
/// time.
static bool writeBF16(int fd, const Tensor &tensor) {
  const float *values = static_cast<const float *>(tensor.raw());
  uint16_t block[4096];
  for (int64_t start = 0, n = tensor.numel(); start < n;) {
    int64_t count = std::min<int64_t>(n - start, std::size(block));
    for (int64_t i = 0; i < count; ++i) {
      block[i] = BFloat16::round(values[start + i]).bits;
    }
    if (!writeAll(fd, block, size_t(count) * 2)) {
      return false;
    }
    start += count;
  }
  return true;
}

void kiln::saveSafetensors(const std::string &path, const NamedTensors &tensors,
                           const std::map<std::string, std::string> &metadata,
                           FloatStorage floats) {
  // Everything that can be refused is refused before the file system is
  // touched.
  std::string header = buildHeader(path, tensors, metadata, floats);

  saveFileAtomically(path, [&](int fd) {
    unsigned char length[8];
    uint64_t headerSize = header.size();
    for (int i = 0; i < 8; ++i) {
      length[i] = static_cast<unsigned char>(headerSize >> (8 * i));
    }
    if (!writeAll(fd, length, sizeof(length)) ||
        !writeAll(fd, header.data(), header.size())) {
      return false;
    }
    for (const auto &[name, tensor] : tensors) {
      if (!(storedAsBF16(tensor, floats)
                ? writeBF16(fd, tensor)
                : writeAll(fd, tensor.raw(), tensor.nbytes()))) {
        return false;
      }
    }
    return true;
  });
}

void kiln::saveParameters(const std::string &path, const ParameterStore &store,
                          const std::map<std::string, std::string> &metadata,
                          FloatStorage floats) {
  saveSafetensors(path, store.namedTensors(), metadata, floats);
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

namespace {
/// One validated header entry.
struct Entry {
  std::string name;
  DType dtype;
  /// The 16-bit format an F32 tensor is stored in (none: as `dtype`).
  Half stored = Half::none;
  std::vector<int64_t> shape;
  uint64_t begin;
  uint64_t end;
};

/// Reads and validates one file.
class Loader {
public:
  explicit Loader(const std::string &path) : path_(path) {}
  SafetensorsFile load();

private:
  /// A kiln::Error naming the file.
  template <typename... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> format,
                         Args &&...args) const {
    throw Error(fmt::format("{}: {}", path_,
                            fmt::format(format, std::forward<Args>(args)...)));
  }
  /// Reads exactly `size` bytes at `offset`.
  void readAt(int fd, void *data, uint64_t size, uint64_t offset) const;
  json parseHeader(const std::string &text, std::vector<std::string> &order);
  Entry parseEntry(const std::string &name, const json &value,
                   uint64_t bufferSize) const;
  std::map<std::string, std::string> parseMetadata(const json &value) const;
  void checkCoverage(std::vector<const Entry *> entries,
                     uint64_t bufferSize) const;

  const std::string &path_;
};
} // namespace

void Loader::readAt(int fd, void *data, uint64_t size, uint64_t offset) const {
  char *bytes = static_cast<char *>(data);
  while (size > 0) {
    ssize_t got = ::pread(fd, bytes, size, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) {
        continue;
      }
      fail("cannot read: {}", lastError());
    }
    if (got == 0) {
      fail("the file ended early (was it truncated while being read?)");
    }
    bytes += got;
    size -= static_cast<uint64_t>(got);
    offset += static_cast<uint64_t>(got);
  }
}

json Loader::parseHeader(const std::string &text,
                         std::vector<std::string> &order) {
  StrictJsonKeys keys(kMaxSafetensorsTensors);
  if (!json::sax_parse(text, &keys)) {
    fail("{}",
         keys.problem.empty() ? "the header is not valid JSON" : keys.problem);
  }
  order = std::move(keys.order);
  try {
    return json::parse(text);
  } catch (const json::exception &error) { // the first pass accepted it
    fail("the header is not valid JSON: {}", error.what());
  }
}

/// A JSON value that is a non-negative integer, or nullopt.
static std::optional<uint64_t> asUnsigned(const json &value) {
  if (value.is_number_unsigned()) {
    return value.get<uint64_t>();
  }
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    return static_cast<uint64_t>(value.get<int64_t>());
  }
  return std::nullopt;
}

Entry Loader::parseEntry(const std::string &name, const json &value,
                         uint64_t bufferSize) const {
  if (!value.is_object()) {
    fail("tensor '{}' is described by {} instead of an object with dtype, "
         "shape and data_offsets",
         name, value.dump());
  }
  for (const auto &[key, field] : value.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      fail("tensor '{}' has an unknown field '{}'", name, key);
    }
  }
  for (const char *key : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(key)) {
      fail("tensor '{}' has no '{}'", name, key);
    }
  }

  Entry entry;
  entry.name = name;

  const json &dtype = value["dtype"];
  if (!dtype.is_string()) {
    fail("tensor '{}' has dtype {}, not a string", name, dtype.dump());
  }
  const std::string &dtypeName = dtype.get_ref<const std::string &>();
  std::optional<DType> parsed = parseDType(dtypeName);
  if (dtypeName == "BF16" || dtypeName == "F16") {
    parsed = DType::f32;
    entry.stored = dtypeName == "BF16" ? Half::bf16 : Half::f16;
  }
  if (!parsed) {
    if (isOtherSafetensorsDType(dtypeName)) {
      fail("tensor '{}' has dtype {}, which Kiln does not support (it reads "
           "F32, BF16 and F16 as F32, I32, I64 and BOOL)",
           name, dtypeName);
    }
    fail("tensor '{}' has unknown dtype {} (Kiln reads F32, BF16 and F16 as "
         "F32, I32, I64 and BOOL)",
         name, dtype.dump());
  }
  entry.dtype = *parsed;

  const json &shape = value["shape"];
  if (!shape.is_array()) {
    fail("tensor '{}' has shape {}, not a list", name, shape.dump());
  }
  uint64_t numel = 1;
  for (const json &size : shape) {
    std::optional<uint64_t> parsedSize = asUnsigned(size);
    if (!parsedSize || *parsedSize > static_cast<uint64_t>(
                                         std::numeric_limits<int64_t>::max())) {
      fail("tensor '{}' has shape {}: sizes must be non-negative integers",
           name, shape.dump());
    }
    entry.shape.push_back(static_cast<int64_t>(*parsedSize));
  }
  bool empty = std::find(entry.shape.begin(), entry.shape.end(), 0) !=
               entry.shape.end(); // holds nothing, whatever the other sizes
  for (int64_t size : empty ? std::vector<int64_t>{0} : entry.shape) {
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(size), &numel) ||
        numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail("tensor '{}' has shape {} whose element count overflows", name,
           shape.dump());
    }
  }
  uint64_t nbytes = 0;
  uint64_t elementBytes =
      entry.stored == Half::none ? sizeOf(entry.dtype) : uint64_t(2);
  if (__builtin_mul_overflow(numel, elementBytes, &nbytes)) {
    fail("tensor '{}' has shape {} of {} whose byte size overflows", name,
         shape.dump(), dtypeName);
  }

  const json &offsets = value["data_offsets"];
  std::optional<uint64_t> begin, end;
  if (offsets.is_array() && offsets.size() == 2) {
    begin = asUnsigned(offsets[0]);
    end = asUnsigned(offsets[1]);
  }
  if (!begin || !end) {
    fail("tensor '{}' has data_offsets {}, not two non-negative integers "
         "[begin, end]",
         name, offsets.dump());
  }
  if (*begin > *end) {
    fail("tensor '{}' has data_offsets [{}, {}] whose begin is after its end",
         name, *begin, *end);
  }
  if (*end > bufferSize) {
    fail("tensor '{}' has data_offsets [{}, {}] past the end of the {}-byte "
         "data buffer",
         name, *begin, *end, bufferSize);
  }
  if (*end - *begin != nbytes) {
    fail("tensor '{}' has data_offsets [{}, {}] but shape {} of {} needs {} "
         "bytes",
         name, *begin, *end, formatShape(entry.shape), dtypeName, nbytes);
  }
  entry.begin = *begin;
  entry.end = *end;
  return entry;
}

std::map<std::string, std::string>
Loader::parseMetadata(const json &value) const {
  if (!value.is_object()) {
    fail("__metadata__ is {}, not an object of strings", value.dump());
  }
  std::map<std::string, std::string> metadata;
  for (const auto &[key, entry] : value.items()) {
    if (!entry.is_string()) {
      fail("__metadata__ entry '{}' is {}, not a string", key, entry.dump());
    }
    metadata.emplace(key, entry.get<std::string>());
  }
  return metadata;
}

void Loader::checkCoverage(std::vector<const Entry *> entries,
                           uint64_t bufferSize) const {
  // Zero-size tensors cover no bytes: they cannot overlap anything.
  std::erase_if(entries,
                [](const Entry *entry) { return entry->begin == entry->end; });
  std::sort(entries.begin(), entries.end(), [](const Entry *a, const Entry *b) {
    return std::tie(a->begin, a->end) < std::tie(b->begin, b->end);
  });
  uint64_t covered = 0;
  const Entry *previous = nullptr;
  for (const Entry *entry : entries) {
    if (entry->begin < covered) {
      fail("tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", previous->name,
           previous->begin, previous->end, entry->name, entry->begin,
           entry->end);
    }
    if (entry->begin > covered) {
      fail("bytes [{}, {}) of the data buffer are not covered by any tensor",
           covered, entry->begin);
    }
    covered = entry->end;
    previous = entry;
  }
  if (covered < bufferSize) {
    fail("the last {} bytes of the {}-byte data buffer (from offset {}) are "
         "not covered by any tensor",
         bufferSize - covered, bufferSize, covered);
  }
}

SafetensorsFile Loader::load() {
  // Without waiting: a FIFO there (a shard an index names, say) is refused
  // below instead of blocking the open.
  FileDescriptor file(::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (file.get() < 0) {
    fail("cannot open: {}", lastError());
  }
  struct stat status;
  if (::fstat(file.get(), &status) != 0) {
    fail("cannot stat: {}", lastError());
  }
  if (!S_ISREG(status.st_mode)) {
    fail("not a regular file");
  }
  uint64_t fileSize = static_cast<uint64_t>(status.st_size);
  if (fileSize < 8) {
    fail("the file is {} bytes, too short for the 8-byte header length; it "
         "is truncated or not a safetensors file",
         fileSize);
  }

  unsigned char length[8];
  readAt(file.get(), length, sizeof(length), 0);
  uint64_t headerSize = 0;
  for (int i = 0; i < 8; ++i) {
    headerSize |= static_cast<uint64_t>(length[i]) << (8 * i);
  }
  if (headerSize > kMaxSafetensorsHeaderBytes) {
    fail("the header length {} exceeds the limit of {} bytes (100 MiB); the "
         "file is corrupt or not a safetensors file",
         headerSize, kMaxSafetensorsHeaderBytes);
  }
  if (headerSize > fileSize - 8) {
    fail("the header length {} is larger than the {} bytes that follow it; "
         "the file is truncated or corrupt",
         headerSize, fileSize - 8);
  }
  uint64_t bufferSize = fileSize - 8 - headerSize;

  std::string text(headerSize, '\0');
  readAt(file.get(), text.data(), headerSize, 8);
  std::vector<std::string> order;
  json header = parseHeader(text, order);
  if (!header.is_object()) {
    fail("the header is {}, not a JSON object",
         header.is_array() ? "an array" : "a scalar");
  }

  SafetensorsFile result;
  std::vector<Entry> entries;
  entries.reserve(order.size());
  for (const std::string &name : order) {
    const json &value = header.at(name);
    if (name == "__metadata__") {
      result.metadata = parseMetadata(value);
    } else {
      entries.push_back(parseEntry(name, value, bufferSize));
    }
  }
  std::vector<const Entry *> pointers;
  pointers.reserve(entries.size());
  for (const Entry &entry : entries) {
    pointers.push_back(&entry);
  }
  checkCoverage(std::move(pointers), bufferSize);

  // Every check passed: the allocations below add up to the file's size
  // (twice the bytes of BF16 and F16 tensors, widened to F32).
  uint64_t dataStart = 8 + headerSize;
  result.tensors.reserve(entries.size());
  for (Entry &entry : entries) {
    Tensor tensor = Tensor::empty(std::move(entry.shape), entry.dtype);
    readAt(file.get(), tensor.raw(), entry.end - entry.begin,
           dataStart + entry.begin);
    if (entry.stored != Half::none) {
      // Widened in place, last element first: element i's 4 bytes cover
      // the 2-byte elements 2i and 2i + 1, both read by then (i = 0: its
      // own, read before it is written).
      auto *bytes = static_cast<unsigned char *>(tensor.raw());
      for (int64_t i = tensor.numel() - 1; i >= 0; --i) {
        uint16_t bits;
        std::memcpy(&bits, bytes + 2 * i, sizeof(bits));
        uint32_t word =
            entry.stored == Half::bf16 ? widenBF16(bits) : widenF16(bits);
        std::memcpy(bytes + 4 * i, &word, sizeof(word));
      }
      result.widened.emplace(entry.name, halfName(entry.stored));
    }
    if (entry.dtype == DType::i1) {
      // A bool holding any byte but 0 or 1 is undefined behavior in C++.
      const unsigned char *bytes =
          static_cast<const unsigned char *>(tensor.raw());
      for (uint64_t i = 0, e = entry.end - entry.begin; i < e; ++i) {
        if (bytes[i] > 1) {
          fail("tensor '{}' of dtype BOOL holds the byte {} at element {} "
               "(only 0 and 1 are booleans)",
               entry.name, bytes[i], i);
        }
      }
    }
    result.tensors.emplace_back(std::move(entry.name), std::move(tensor));
  }
  return result;
}

SafetensorsFile kiln::loadSafetensors(const std::string &path) {
  return Loader(path).load();
}

const Tensor *SafetensorsFile::find(const std::string &name) const {
  for (const auto &[tensorName, tensor] : tensors) {
    if (tensorName == name) {
      return &tensor;
    }
  }
  return nullptr;
}

std::map<std::string, std::string> kiln::loadParameters(const std::string &path,
                                                        ParameterStore &store) {
  SafetensorsFile file = loadCheckpointTensors(path);
  try {
    store.setFrom(file.tensors);
  } catch (const Error &error) {
    throw Error(fmt::format("{}: {}", path, error.what()));
  }
  return std::move(file.metadata);
}
