//===- SpecFuzzer.cpp - libFuzzer target: the spec text of AOT objects
//-----===//
//
// The function and parameter specs an ahead-of-time object carries are
// untrusted text: parseFunctionSpec and parseParamSpecs either accept it or
// refuse it with a kiln::Error. What they accept serializes to text they
// accept again, with the same meaning.
//
//===----------------------------------------------------------------------===//

#include "runtime/Error.h"
#include "runtime/SpecText.h"

#include <cstdint>
#include <cstdlib>
#include <string_view>

using namespace kiln;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  try {
    FunctionSpec spec = parseFunctionSpec(text);
    std::string again = serialize(spec);
    if (serialize(parseFunctionSpec(again)) != again) {
      std::abort();
    }
  } catch (const Error &) {
  }
  try {
    std::vector<ParamSpec> params = parseParamSpecs(text);
    std::string again = serialize(params);
    if (serialize(parseParamSpecs(again)) != again) {
      std::abort();
    }
  } catch (const Error &) {
  }
  return 0;
}
