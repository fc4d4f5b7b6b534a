//===- Files.cpp - Paths that must not name one file ----------------------===//

#include "runtime/Files.h"

#include "runtime/Error.h"
#include "runtime/FileDescriptor.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

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

std::string readRegularFile(const std::string &path, std::uint64_t maxBytes,
                            const std::string &what) {
  auto fail = [&](const std::string &why) {
    throw Error(fmt::format("{}: {}", path, why));
  };
  FileDescriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (file.get() < 0) {
    fail(fmt::format("cannot open: {}", std::strerror(errno)));
  }
  struct stat status;
  if (::fstat(file.get(), &status) != 0 || !S_ISREG(status.st_mode)) {
    fail("not a regular file");
  }
  if (uint64_t(status.st_size) > maxBytes) {
    fail(fmt::format("{} is {} bytes, more than the limit of {}", what,
                     status.st_size, maxBytes));
  }
  std::string text(size_t(status.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    ssize_t got = ::read(file.get(), text.data() + done, text.size() - done);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      fail(got < 0 ? fmt::format("cannot read: {}", std::strerror(errno))
                   : std::string("the file ended early"));
    }
    done += size_t(got);
  }
  return text;
}

bool writeAll(int fd, const void *data, std::size_t size) {
  const char *bytes = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t written = ::write(fd, bytes, size);
    if (written < 0) {
      if (errno == EINTR) {
        continue;
      }
      return false;
    }
    bytes += written;
    size -= static_cast<size_t>(written);
  }
  return true;
}

void saveFileAtomically(const std::string &path,
                        const std::function<bool(int fd)> &write) {
  auto lastError = [] { return std::string(std::strerror(errno)); };
  // One temporary file per destination, "<path>.tmp": a save killed part
  // way leaves it behind, and the next save of that path reuses it (unique
  // names had piled up, one full-size file per killed save). An exclusive
  // lock keeps two saves of one path, from any processes or threads, from
  // writing it at once.
  std::string temporary = checkpointTemporary(path);
  // Not through a link, and without waiting (a FIFO there had hung the
  // save until something read it): then only a regular file of its own,
  // checked before it is truncated (through a hard link, the truncation
  // and the writes had gone to another file).
  FileDescriptor file(
      ::open(temporary.c_str(),
             O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644));
  if (file.get() < 0) {
    throw Error(fmt::format("{}: cannot save: cannot create '{}': {}", path,
                            temporary, lastError()));
  }
  struct stat made;
  if (::fstat(file.get(), &made) != 0 || !S_ISREG(made.st_mode) ||
      made.st_nlink != 1) {
    throw Error(fmt::format("{}: cannot save: '{}' is in the way: it is not "
                            "a regular file of its own (a FIFO, a device or "
                            "a hard link to another file); remove it",
                            path, temporary));
  }
  int flags = ::fcntl(file.get(), F_GETFL);
  if (flags < 0 || ::fcntl(file.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
    throw Error(
        fmt::format("{}: cannot save: '{}': {}", path, temporary, lastError()));
  }
  // Locked, and still the file at that name (not one another save renamed
  // over `path` after this one opened it).
  struct stat opened, named;
  if (::flock(file.get(), LOCK_EX | LOCK_NB) != 0 ||
      ::fstat(file.get(), &opened) != 0 ||
      ::stat(temporary.c_str(), &named) != 0 || opened.st_dev != named.st_dev ||
      opened.st_ino != named.st_ino) {
    throw Error(fmt::format("{}: cannot save: another save of it is in "
                            "progress (it holds '{}')",
                            path, temporary));
  }
  if (::ftruncate(file.get(), 0) != 0) {
    throw Error(fmt::format("{}: cannot save: cannot truncate '{}': {}", path,
                            temporary, lastError()));
  }
  auto fail = [&](const char *step) {
    std::string reason = lastError();
    ::unlink(temporary.c_str()); // while it is still locked: ours
    file.close();
    throw Error(fmt::format("{}: cannot save: {} '{}': {}", path, step,
                            temporary, reason));
  };
  if (!write(file.get())) {
    fail("cannot write");
  }
  if (::fsync(file.get()) != 0) {
    fail("cannot sync");
  }
  // Renamed while still locked (closing releases the lock).
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    fail("cannot rename over it");
  }
  file.close(); // synced: close has nothing left to report

  // Make the rename itself durable (best effort: some file systems refuse to
  // sync a directory).
  size_t slash = path.rfind('/');
  std::string directory = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  FileDescriptor directoryFile(
      ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (directoryFile.get() >= 0) {
    ::fsync(directoryFile.get());
  }
}

} // namespace kiln
