//===- Safetensors.h - Checkpoints in the safetensors format ----*- C++ -*-===//
//
// Reads and writes https://huggingface.co/docs/safetensors: an 8-byte
// little-endian header length N, N bytes of JSON header
//   {"__metadata__": {"key": "value"},
//    "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...}
// padded with spaces to a multiple of 8, then the data buffer, which the
// tensors' [begin, end) byte ranges cover exactly. Kiln's dtypes map to F32,
// I32, I64 and BOOL; BF16 and F16 tensors (the usual storage of published
// weights) load widened to F32, exactly, and F32 tensors may be written as
// BF16. Files written here load in PyTorch, and back.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SAFETENSORS_H
#define KILN_RUNTIME_SAFETENSORS_H

#include "runtime/Files.h"
#include "runtime/ParameterStore.h"
#include "runtime/Tensor.h"

#include <cstdint>
#include <map>
#include <string>

namespace kiln {

/// The largest JSON header loadSafetensors accepts (as the reference
/// implementation: 100 MiB).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;
/// The most tensors a header may describe: a model with 100 times the 580
/// tensors of GPT-2 XL, with its optimizer state, stays below it; a 100 MiB
/// header of empty tensors (1.5 million of them) would hold gigabytes of
/// parsed JSON.
inline constexpr uint64_t kMaxSafetensorsTensors = 200000;

/// How saveSafetensors writes F32 tensors: as they are, or rounded to BF16
/// (to the nearest, ties to even; NaN stays NaN, a value beyond BF16's
/// largest becomes infinity), half the bytes. Other dtypes are written as
/// they are either way.
enum class FloatStorage { f32, bf16 };

/// A loaded safetensors file.
struct SafetensorsFile {
  /// The tensors, in the order of the file's header. BF16 and F16 tensors
  /// are F32 tensors here: every BF16 and F16 value is an F32 value, so
  /// nothing is lost.
  NamedTensors tensors;
  /// The tensors the file stores as BF16 or F16, widened to F32 on load:
  /// each name and its stored dtype ("BF16", "F16").
  std::map<std::string, std::string> widened;
  /// The "__metadata__" entries (empty when the file has none).
  std::map<std::string, std::string> metadata;

  /// The tensor called `name`, or nullptr.
  const Tensor *find(const std::string &name) const;
};

/// Writes `tensors` (data in the given order) and `metadata` to `path`.
/// Atomic: the file is written to the temporary file `path`.tmp (locked:
/// a second save of `path` at once is refused), synced, then renamed over
/// `path`, so a failure leaves any existing file intact; a save killed part
/// way leaves `path`.tmp, which the next save of `path` reuses (only a
/// regular file with no other name: a FIFO, a device, a directory, a
/// symbolic or a hard link there is refused, and nothing is written).
/// Throws kiln::Error naming `path` for a duplicate, reserved
/// ("__metadata__") or non-UTF-8 name, an undefined tensor, or an I/O error.
/// `floats` says how F32 tensors are stored.
void saveSafetensors(const std::string &path, const NamedTensors &tensors,
                     const std::map<std::string, std::string> &metadata = {},
                     FloatStorage floats = FloatStorage::f32);

/// Reads `path`, treating it as untrusted: any file that does not follow the
/// format exactly (header length, JSON, dtypes, shapes, offsets that cover
/// the data buffer exactly without overlap, BOOL bytes that are 0 or 1) is
/// refused with a kiln::Error naming the file and the problem. BF16 and F16
/// tensors are widened to F32 (SafetensorsFile::widened lists them); other
/// dtypes Kiln does not hold (F64, I8, ...) are refused by name.
SafetensorsFile loadSafetensors(const std::string &path);

/// Reads a checkpoint sharded over several files as Hugging Face writes
/// them: `indexPath` (model.safetensors.index.json) is a JSON object
/// {"metadata": {...}, "weight_map": {tensor name: shard file name}}, each
/// shard a safetensors file in the index's directory. Returns every shard's
/// tensors (shards by file name, each in its header's order; widened as
/// loadSafetensors does) and the index's metadata (numbers as their JSON
/// text). Untrusted like a safetensors file: an index that is not such an
/// object (duplicate or unknown keys, more than kMaxSafetensorsTensors
/// names), a shard name with a directory part, a shard that does not hold
/// exactly the tensors the index puts there, or a malformed shard is a
/// kiln::Error naming the file and the problem.
SafetensorsFile loadShardedSafetensors(const std::string &indexPath);

/// loadShardedSafetensors for a path ending in ".index.json", else
/// loadSafetensors.
SafetensorsFile loadCheckpointTensors(const std::string &path);

/// Saves every parameter of `store`, in insertion order (F32 ones stored as
/// `floats` says).
void saveParameters(const std::string &path, const ParameterStore &store,
                    const std::map<std::string, std::string> &metadata = {},
                    FloatStorage floats = FloatStorage::f32);

/// Loads `path` (a safetensors file, or a sharded checkpoint's index:
/// loadCheckpointTensors) into `store` (ParameterStore::setFrom: every
/// parameter with its shape and dtype, nothing else) and returns the file's
/// metadata.
std::map<std::string, std::string> loadParameters(const std::string &path,
                                                  ParameterStore &store);

} // namespace kiln

#endif // KILN_RUNTIME_SAFETENSORS_H
