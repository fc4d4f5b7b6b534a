//===- StrictJson.h - JSON checked before it is parsed ---------*- C++ -*-===//
//
// The first pass over an untrusted JSON document (a safetensors header, a
// sharded checkpoint's index, a Hugging Face config.json): internal to
// Kiln's libraries, not installed.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_STRICTJSON_H
#define KILN_RUNTIME_STRICTJSON_H

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

/// The first pass over a document: sees the top-level keys in file order (the
/// json object itself is sorted), refuses duplicate keys in any object (which
/// json would silently merge), nesting deeper than three levels (a
/// safetensors header's {name: {field: [..]}}) and more than a given number
/// of top-level keys (tensors), before any document is built. Linear in the
/// document's size (nlohmann's parser callback rescans the enclosing object
/// at the end of every nested one: quadratic).
class StrictJsonKeys : public nlohmann::json_sax<nlohmann::json> {
public:
  /// At most `maxKeys` top-level keys besides "__metadata__" (tensors of a
  /// safetensors header), and at most `maxKeysPerObject` in any object.
  /// `what` names the document in the problems ("the header").
  explicit StrictJsonKeys(uint64_t maxKeys,
                          uint64_t maxKeysPerObject = UINT64_MAX,
                          std::string what = "the header")
      : maxKeys_(maxKeys), maxKeysPerObject_(maxKeysPerObject),
        what_(std::move(what)) {}

  std::vector<std::string> order;
  /// Why the document was refused (empty while it is fine).
  std::string problem;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t &) override { return true; }
  bool string(string_t &) override { return true; }
  bool binary(binary_t &) override { return true; }
  bool start_object(std::size_t) override {
    objectKeys_.emplace_back();
    return enter();
  }
  bool end_object() override {
    objectKeys_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override { return enter(); }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool key(string_t &key) override {
    if (objectKeys_.back().size() >= maxKeysPerObject_) {
      problem = fmt::format("an object of {} has more than {} keys", what_,
                            maxKeysPerObject_);
      return false;
    }
    if (!objectKeys_.back().insert(key).second) {
      problem =
          fmt::format("{} has the key '{}' twice in one object", what_, key);
      return false;
    }
    if (objectKeys_.size() == 1) {
      if (key != "__metadata__" && ++tensors_ > maxKeys_) {
        problem = fmt::format("{} describes more than {} tensors", what_,
                              maxKeys_);
        return false;
      }
      order.push_back(key);
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string &,
                   const nlohmann::detail::exception &error) override {
    // Drop the "[json.exception.parse_error.101] " prefix.
    std::string_view message = error.what();
    size_t bracket = message.find("] ");
    if (message.starts_with("[json.") && bracket != std::string_view::npos) {
      message.remove_prefix(bracket + 2);
    }
    problem = fmt::format("{} is not valid JSON: {}", what_, message);
    return false;
  }

private:
  bool enter() {
    if (++depth_ > 3) {
      problem = what_ + " nests deeper than the format allows";
      return false;
    }
    return true;
  }

  std::vector<std::set<std::string>> objectKeys_;
  int depth_ = 0;
  uint64_t tensors_ = 0;
  uint64_t maxKeys_;
  uint64_t maxKeysPerObject_;
  std::string what_;
};

} // namespace kiln

#endif // KILN_RUNTIME_STRICTJSON_H
