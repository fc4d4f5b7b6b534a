//===- Checkpoint.cpp - Training checkpoints ------------------------------===//
//
// Implements saveCheckpoint/loadCheckpoint on top of the safetensors reader
// and writer.
//
//===----------------------------------------------------------------------===//

#include "runtime/Checkpoint.h"

#include "runtime/Error.h"
#include "runtime/Safetensors.h"

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string_view>

#include <climits>
#include <sys/stat.h>
#include <unistd.h>

using namespace kiln;

static constexpr const char *kFormat = "kiln-checkpoint";
static constexpr const char *kVersion = "1";
static constexpr std::string_view kOptimizerPrefix = "optimizer/";

/// Adam's second moments: the state kiln-training-step names "<param>.v".
static bool isSecondMoment(std::string_view stateName) {
  return stateName.ends_with(".v");
}

/// The first element of an f32 `tensor` that is not finite, or (with
/// `nonNegative`) is negative, described for an error message; empty when
/// there is none.
static std::string firstBadElement(const Tensor &tensor, bool nonNegative) {
  if (!tensor.defined() || tensor.dtype() != DType::f32) {
    return "";
  }
  const float *data = tensor.data<float>();
  for (int64_t i = 0, n = tensor.numel(); i < n; ++i) {
    if (!std::isfinite(data[i]) || (nonNegative && data[i] < 0.0f)) {
      return fmt::format("{} at element {}", data[i], i);
    }
  }
  return "";
}

void kiln::checkCheckpointWritable(const std::string &path) {
  namespace fs = std::filesystem;
  fs::path directory = fs::path(path).parent_path();
  if (directory.empty()) {
    directory = ".";
  }
  auto refuse = [&](const std::string &why) {
    return Error(
        fmt::format("{}: cannot save checkpoints there: {}", path, why));
  };
  std::error_code error;
  fs::file_status status = fs::status(directory, error);
  if (error && error != std::errc::no_such_file_or_directory) {
    throw refuse(fmt::format("'{}': {}", directory.string(), error.message()));
  }
  if (!fs::exists(status)) {
    throw refuse(
        fmt::format("the directory '{}' does not exist", directory.string()));
  }
  if (!fs::is_directory(status)) {
    throw refuse(fmt::format("'{}' is not a directory", directory.string()));
  }
  // access() answers for the caller's rights and the file system (EROFS for
  // a read-only one, also for root).
  if (::access(directory.c_str(), W_OK | X_OK) != 0) {
    throw refuse(fmt::format("the directory '{}' is not writable ({})",
                             directory.string(), std::strerror(errno)));
  }
  if (fs::is_directory(fs::status(path, error))) {
    throw refuse("it is a directory");
  }
  // What the save will create: its temporary file's name must fit the file
  // system, and whatever is at it must be a file the save can reuse.
  std::string temporary = checkpointTemporary(path);
  long nameMax = ::pathconf(directory.c_str(), _PC_NAME_MAX);
  std::string name = fs::path(temporary).filename().string();
  if (nameMax > 0 && name.size() > size_t(nameMax)) {
    throw refuse(fmt::format("the temporary file '{}' it is written to first "
                             "would have a name of {} bytes, more than the "
                             "file system's {}",
                             name, name.size(), nameMax));
  }
  if (temporary.size() >= PATH_MAX) {
    throw refuse(fmt::format("the temporary file it is written to first "
                             "would have a path of {} bytes, more than {}",
                             temporary.size(), PATH_MAX - 1));
  }
  struct stat found;
  if (::lstat(temporary.c_str(), &found) == 0 &&
      (!S_ISREG(found.st_mode) || found.st_nlink != 1)) {
    throw refuse(fmt::format("'{}', the temporary file a save writes first, "
                             "is in the way: it is not a regular file of its "
                             "own (a FIFO, a directory, a link or a hard link "
                             "to another file); remove it",
                             temporary));
  }
}

void kiln::saveCheckpoint(const std::string &path,
                          const ParameterStore &parameters,
                          const ParameterStore &optimizerState,
                          const TrainingState &state) {
  if (state.step < 0) {
    throw Error(fmt::format("{}: cannot save a checkpoint at step {}", path,
                            state.step));
  }
  // A checkpoint is what a run resumes from: one holding NaN would replace
  // the last good one with a run that cannot continue.
  for (const auto &[name, tensor] : parameters.namedTensors()) {
    if (std::string bad = firstBadElement(tensor, false); !bad.empty()) {
      throw Error(fmt::format("{}: not saved: parameter '{}' holds {}; any "
                              "earlier checkpoint there is kept",
                              path, name, bad));
    }
  }
  for (const auto &[name, tensor] : optimizerState.namedTensors()) {
    if (std::string bad = firstBadElement(tensor, isSecondMoment(name));
        !bad.empty()) {
      throw Error(fmt::format("{}: not saved: optimizer state '{}' holds {}; "
                              "any earlier checkpoint there is kept",
                              path, name, bad));
    }
  }
  NamedTensors tensors = parameters.namedTensors();
  for (auto &[name, tensor] : optimizerState.namedTensors()) {
    tensors.emplace_back(std::string(kOptimizerPrefix) + name, tensor);
  }
  std::map<std::string, std::string> metadata;
  metadata["format"] = kFormat;
  metadata["format_version"] = kVersion;
  metadata["step"] = std::to_string(state.step);
  for (const auto &[name, value] : state.rngs) {
    metadata["rng." + name] = std::to_string(value);
  }
  for (const auto &[key, value] : state.info) {
    metadata["info." + key] = value;
  }
  saveSafetensors(path, tensors, metadata);
}

/// Parses a whole decimal string as T; false when it is not one.
template <typename T>
static bool parseInteger(const std::string &text, T &out) {
  const char *end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return !text.empty() && ec == std::errc() && ptr == end;
}

TrainingState
kiln::loadCheckpoint(const std::string &path, ParameterStore &parameters,
                     ParameterStore *optimizerState,
                     const std::map<std::string, std::string> *expectedInfo) {
  SafetensorsFile file = loadSafetensors(path);
  auto fail = [&](const std::string &why) -> Error {
    return Error(
        fmt::format("{}: not a usable Kiln checkpoint: {}", path, why));
  };
  const std::map<std::string, std::string> &meta = file.metadata;
  auto format = meta.find("format");
  if (format == meta.end() || format->second != kFormat) {
    throw fail("its metadata has no \"format\": \"kiln-checkpoint\" (a plain "
               "weights file loads with kiln::loadParameters)");
  }
  auto version = meta.find("format_version");
  if (version == meta.end() || version->second != kVersion) {
    throw fail(fmt::format("format version '{}' is not the supported '{}'",
                           version == meta.end() ? "" : version->second,
                           kVersion));
  }
  TrainingState state;
  auto step = meta.find("step");
  if (step == meta.end() || !parseInteger(step->second, state.step) ||
      state.step < 0) {
    throw fail(fmt::format("the step '{}' is not a count of steps",
                           step == meta.end() ? "" : step->second));
  }
  for (const auto &[key, value] : meta) {
    if (key.starts_with("rng.")) {
      uint64_t rng = 0;
      if (!parseInteger(value, rng)) {
        throw fail(
            fmt::format("'{}' = '{}' is not a generator state", key, value));
      }
      state.rngs[key.substr(4)] = rng;
    } else if (key.starts_with("info.")) {
      state.info[key.substr(5)] = value;
    }
  }
  for (const auto &[key, value] :
       expectedInfo ? *expectedInfo : std::map<std::string, std::string>{}) {
    auto saved = state.info.find(key);
    if (saved != state.info.end() && saved->second != value) {
      throw fail(fmt::format("it was saved with {} = '{}', this run has '{}'",
                             key, saved->second, value));
    }
  }
  NamedTensors weights, optimizer;
  for (auto &[name, tensor] : file.tensors) {
    if (std::string_view(name).starts_with(kOptimizerPrefix)) {
      optimizer.emplace_back(name.substr(kOptimizerPrefix.size()), tensor);
    } else {
      weights.emplace_back(name, tensor);
    }
  }
  // Values a run cannot continue from: non-finite parameters or state, or
  // negative second moments (sqrt(v) is NaN on the first step).
  for (const auto &[name, tensor] : weights) {
    if (std::string bad = firstBadElement(tensor, false); !bad.empty()) {
      throw fail(fmt::format("parameter '{}' holds {}", name, bad));
    }
  }
  for (const auto &[name, tensor] :
       optimizerState ? optimizer : NamedTensors{}) {
    if (std::string bad = firstBadElement(tensor, isSecondMoment(name));
        !bad.empty()) {
      throw fail(fmt::format(
          "optimizer state '{}' holds {}{}", name, bad,
          isSecondMoment(name) ? " (second moments are finite and >= 0)" : ""));
    }
  }
  try {
    parameters.check(weights);
  } catch (const Error &error) {
    throw fail(fmt::format("parameters: {}", error.what()));
  }
  if (optimizerState) {
    try {
      optimizerState->check(optimizer);
    } catch (const Error &error) {
      throw fail(fmt::format("optimizer state: {}", error.what()));
    }
    optimizerState->setFrom(optimizer);
  }
  parameters.setFrom(weights);
  return state;
}
