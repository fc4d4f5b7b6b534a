//===- SafetensorsFuzzer.cpp - libFuzzer target: safetensors and checkpoints
//===//
//
// Any bytes given to loadSafetensors and loadCheckpoint (into a small model
// with Adam state) either load or are refused with a kiln::Error; nothing
// else (a crash, a sanitizer report, a hang, a runaway allocation) is
// allowed. A loaded file saves and loads back to the same tensors.
//
//===----------------------------------------------------------------------===//

#include "runtime/Checkpoint.h"
#include "runtime/Error.h"
#include "runtime/Safetensors.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <unistd.h>

using namespace kiln;

namespace {

/// A file of this process's own under /dev/shm (or /tmp), rewritten for
/// every input.
const std::string &scratch(const char *suffix) {
  static const std::string directory =
      access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  static std::string paths[2];
  std::string &path = paths[suffix[0] == 'a' ? 0 : 1];
  if (path.empty()) {
    path = directory + "/kiln-fuzz-" + std::to_string(getpid()) + "-" + suffix;
  }
  return path;
}

void write(const std::string &path, const uint8_t *data, size_t size) {
  std::FILE *file = std::fopen(path.c_str(), "wb");
  if (!file || std::fwrite(data, 1, size, file) != size ||
      std::fclose(file) != 0) {
    std::abort(); // the harness itself failed
  }
}

/// The model checkpoints are loaded into: two parameters with Adam moments.
struct Model {
  Model() {
    parameters.add("w", Tensor::zeros({2, 3}, DType::f32));
    parameters.add("b", Tensor::zeros({3}, DType::f32));
    for (const char *name : {"w.m", "w.v"}) {
      state.add(name, Tensor::zeros({2, 3}, DType::f32));
    }
    for (const char *name : {"b.m", "b.v"}) {
      state.add(name, Tensor::zeros({3}, DType::f32));
    }
  }
  ParameterStore parameters, state;
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &input = scratch("a");
  write(input, data, size);
  try {
    SafetensorsFile file = loadSafetensors(input);
    // What loads saves and loads back the same.
    const std::string &copy = scratch("b");
    saveSafetensors(copy, file.tensors, file.metadata);
    SafetensorsFile back = loadSafetensors(copy);
    if (back.tensors.size() != file.tensors.size() ||
        back.metadata != file.metadata) {
      std::abort();
    }
    for (size_t i = 0; i < file.tensors.size(); ++i) {
      const Tensor &a = file.tensors[i].second, &b = back.tensors[i].second;
      if (a.shape() != b.shape() || a.dtype() != b.dtype() ||
          std::memcmp(a.raw(), b.raw(), a.nbytes()) != 0) {
        std::abort();
      }
    }
  } catch (const Error &) {
  }
  try {
    Model model;
    std::map<std::string, std::string> info = {{"d_model", "3"}};
    loadCheckpoint(input, model.parameters, &model.state, &info);
  } catch (const Error &) {
  }
  return 0;
}
