//===- Files.cpp - Paths that must not name one file ----------------------===//

#include "runtime/Files.h"

#include "runtime/Error.h"

#include <fmt/format.h>

#include <filesystem>
#include <sys/stat.h>

namespace kiln {

bool sameFile(const std::string &a, const std::string &b) {
  struct stat sa, sb;
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 &&
      sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino) {
    return true; // both exist: one file, under any names or links
  }
  namespace fs = std::filesystem;
  auto normalized = [](const std::string &name) {
    std::error_code error;
    fs::path full = fs::absolute(name, error);
    // Symbolic links in the existing part of the path resolved too.
    fs::path canonical = fs::weakly_canonical(full, error);
    return (error ? full : canonical).lexically_normal();
  };
  return normalized(a) == normalized(b);
}

void checkDistinctFiles(const std::vector<NamedPath> &paths) {
  for (size_t i = 0; i < paths.size(); ++i) {
    for (size_t j = i + 1; j < paths.size(); ++j) {
      const NamedPath &a = paths[i], &b = paths[j];
      if (!a.path.empty() && !b.path.empty() && sameFile(a.path, b.path)) {
        throw Error(fmt::format("{} '{}' and {} '{}' name the same file: "
                                "one would overwrite the other",
                                a.option, a.path, b.option, b.path));
      }
    }
  }
}

} // namespace kiln
