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

#include <charconv>

using namespace kiln;

static constexpr const char *kFormat = "kiln-checkpoint";
static constexpr const char *kVersion = "1";
static constexpr std::string_view kOptimizerPrefix = "optimizer/";

void kiln::saveCheckpoint(const std::string &path,
                          const ParameterStore &parameters,
                          const ParameterStore &optimizerState,
                          const TrainingState &state) {
  if (state.step < 0) {
    throw Error(fmt::format("{}: cannot save a checkpoint at step {}", path,
                            state.step));
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

TrainingState kiln::loadCheckpoint(const std::string &path,
                                   ParameterStore &parameters,
                                   ParameterStore *optimizerState) {
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
  NamedTensors weights, optimizer;
  for (auto &[name, tensor] : file.tensors) {
    if (std::string_view(name).starts_with(kOptimizerPrefix)) {
      optimizer.emplace_back(name.substr(kOptimizerPrefix.size()), tensor);
    } else {
      weights.emplace_back(name, tensor);
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
