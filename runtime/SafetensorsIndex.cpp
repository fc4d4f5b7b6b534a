//===- SafetensorsIndex.cpp - Checkpoints sharded over several files ------===//
//
// Implements loadShardedSafetensors (Safetensors.h): Hugging Face's
// model.safetensors.index.json and the shards it names.
//
//===----------------------------------------------------------------------===//

#include "runtime/Safetensors.h"

#include "runtime/Error.h"
#include "runtime/StrictJson.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <set>

using namespace kiln;
using json = nlohmann::json;

namespace {

/// Whether `name` is a file name of the index's directory: no directory
/// part, not "." or "..", no NUL, at most 255 bytes.
bool isPlainFileName(const std::string &name) {
  return !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
         name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

} // namespace

SafetensorsFile kiln::loadShardedSafetensors(const std::string &indexPath) {
  auto fail = [&](const std::string &why) {
    throw Error(fmt::format("{}: {}", indexPath, why));
  };
  std::string text =
      readRegularFile(indexPath, kMaxSafetensorsHeaderBytes, "the index");
  StrictJsonKeys keys(/*maxKeys=*/UINT64_MAX,
                      /*maxKeysPerObject=*/kMaxSafetensorsTensors, "the index");
  if (!json::sax_parse(text, &keys)) {
    fail(keys.problem.empty() ? "the index is not valid JSON" : keys.problem);
  }
  json index = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!index.is_object()) {
    fail("the index is not a JSON object with a weight_map");
  }
  for (const auto &[key, value] : index.items()) {
    if (key != "metadata" && key != "weight_map") {
      fail(fmt::format("the index has an unknown field '{}' (it has "
                       "metadata and weight_map)",
                       key));
    }
  }
  SafetensorsFile result;
  if (index.contains("metadata")) {
    const json &metadata = index["metadata"];
    if (!metadata.is_object()) {
      fail(fmt::format("the index's metadata is {}, not an object",
                       metadata.dump()));
    }
    for (const auto &[key, value] : metadata.items()) {
      if (!value.is_string() && !value.is_number()) {
        fail(fmt::format("the index's metadata '{}' is {}, not a string or "
                         "a number",
                         key, value.dump()));
      }
      result.metadata.emplace(
          key, value.is_string() ? value.get<std::string>() : value.dump());
    }
  }
  if (!index.contains("weight_map") || !index["weight_map"].is_object()) {
    fail("the index has no weight_map object (tensor name: shard file)");
  }
  const json &weightMap = index["weight_map"];
  // Each shard's tensors, as the index says (shards by name: loaded in
  // order, each once).
  std::map<std::string, std::set<std::string>> shards;
  for (const auto &[name, shard] : weightMap.items()) {
    if (!shard.is_string()) {
      fail(fmt::format("the index gives tensor '{}' the shard {}, not a file "
                       "name",
                       name, shard.dump()));
    }
    const std::string &file = shard.get_ref<const std::string &>();
    if (!isPlainFileName(file)) {
      fail(fmt::format("the index puts tensor '{}' in '{}', which is not a "
                       "file name of the index's directory",
                       name, file));
    }
    shards[file].insert(name);
  }
  size_t slash = indexPath.rfind('/');
  std::string directory =
      slash == std::string::npos ? "" : indexPath.substr(0, slash + 1);
  for (const auto &[file, names] : shards) {
    SafetensorsFile shard = loadSafetensors(directory + file);
    std::set<std::string> found;
    for (auto &[name, tensor] : shard.tensors) {
      if (!names.count(name)) {
        fail(fmt::format("shard '{}' holds tensor '{}', which the index "
                         "does not put there",
                         file, name));
      }
      found.insert(name);
      if (auto widened = shard.widened.find(name);
          widened != shard.widened.end()) {
        result.widened.insert(*widened);
      }
      result.tensors.emplace_back(std::move(name), std::move(tensor));
    }
    for (const std::string &name : names) {
      if (!found.count(name)) {
        fail(fmt::format("the index puts tensor '{}' in shard '{}', which "
                         "does not hold it",
                         name, file));
      }
    }
  }
  return result;
}

SafetensorsFile kiln::loadCheckpointTensors(const std::string &path) {
  return path.ends_with(".index.json") ? loadShardedSafetensors(path)
                                       : loadSafetensors(path);
}
