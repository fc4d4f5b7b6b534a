//===- Checkpoint.h - Training checkpoints -----------------------*- C++
//-*-===//
//
// A checkpoint is one safetensors file: the parameters under their own names
// (so any safetensors reader sees the weights), the optimizer state under
// "optimizer/<name>", and in the metadata the step, the state of every
// random generator the run draws from and free-form information. Saving is
// atomic (a crash mid-save leaves the previous file intact); loading checks
// everything before it changes anything.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CHECKPOINT_H
#define KILN_RUNTIME_CHECKPOINT_H

#include "runtime/ParameterStore.h"

#include <cstdint>
#include <map>
#include <string>

namespace kiln {

/// What a checkpoint records besides tensors.
struct TrainingState {
  /// Optimizer steps taken.
  int64_t step = 0;
  /// Random generators' states by name ("data", ...).
  std::map<std::string, uint64_t> rngs;
  /// Free-form strings (the model's configuration, the run's settings).
  std::map<std::string, std::string> info;
};

/// Throws kiln::Error, naming `path` and the reason, when no checkpoint
/// could be saved at `path`: its directory does not exist, is not a
/// directory or is not writable (a read-only file system included), or
/// `path` is a directory, or the temporary file a save creates first
/// (checkpointTemporary) would have too long a name or is something a save
/// cannot reuse (a FIFO, a directory, a link). runTraining checks before its
/// first step;
/// programs can check before they compile anything. (A full disk shows only
/// when saving: then saveCheckpoint throws and the old file stays.)
void checkCheckpointWritable(const std::string &path);

/// Writes `parameters`, `optimizerState` (may be empty) and `state` to
/// `path` atomically. Refuses (kiln::Error; the file at `path` stays as it
/// was) parameters or state holding a value that is not finite, or a
/// negative Adam second moment (state "<param>.v").
void saveCheckpoint(const std::string &path, const ParameterStore &parameters,
                    const ParameterStore &optimizerState,
                    const TrainingState &state);

/// Reads a checkpoint into `parameters` and, when given, `optimizerState`
/// (without it the optimizer tensors are skipped: enough to sample or
/// evaluate). Throws kiln::Error naming the file and every problem (not a
/// checkpoint, corrupt, missing or unexpected tensors, wrong shapes, bad
/// metadata, values that are not finite, negative second moments, an info
/// entry whose value differs from the one `expectedInfo` has for that key);
/// then nothing was changed.
TrainingState loadCheckpoint(
    const std::string &path, ParameterStore &parameters,
    ParameterStore *optimizerState = nullptr,
    const std::map<std::string, std::string> *expectedInfo = nullptr);

} // namespace kiln

#endif // KILN_RUNTIME_CHECKPOINT_H
