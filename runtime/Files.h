//===- Files.h - Paths that must not name one file, atomic saves -*- C++
//-*-===//
//
// The one place that decides whether two paths name one file: the programs'
// options (a corpus, a training log, a checkpoint and the temporary file its
// save creates), kiln-compile's outputs and IR dumps against its input; and
// the one way files are saved (checkpoints, safetensors, Hugging Face
// configurations): atomically, through a temporary file.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_FILES_H
#define KILN_RUNTIME_FILES_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln {

/// Whether paths `a` and `b` name one file: one existing file under any
/// names, hard links or symbolic links (device and inode), or one name once
/// made absolute and without "." and ".." (for files yet to be created).
bool sameFile(const std::string &a, const std::string &b);

/// A path a program reads or writes, and the option that names it.
struct NamedPath {
  std::string option; ///< "--data"
  std::string path;   ///< empty: not given (ignored)
};

/// Throws kiln::Error naming both options when two of `paths` name one
/// file (sameFile). Called before anything is written.
void checkDistinctFiles(const std::vector<NamedPath> &paths);

/// The temporary file a save of `path` writes first: "<path>.tmp".
inline std::string checkpointTemporary(const std::string &path) {
  return path + ".tmp";
}

/// Saves `path` atomically: `write` writes the whole content to the file
/// descriptor it is given (writeAll) and returns false on an I/O error
/// (errno set); the content goes to the temporary file `path`.tmp (locked:
/// a second save of `path` at once is refused), is synced, then renamed
/// over `path`, so a failure leaves any existing file intact; a save killed
/// part way leaves `path`.tmp, which the next save of `path` reuses (only a
/// regular file with no other name: a FIFO, a device, a directory, a
/// symbolic or a hard link there is refused, and nothing is written).
/// Throws kiln::Error naming `path` and the step that failed.
void saveFileAtomically(const std::string &path,
                        const std::function<bool(int fd)> &write);

/// The whole text of the regular file `path`, of at most `maxBytes` bytes
/// (`what`, "the index", names it in the problem), opened without waiting:
/// a FIFO there is refused, not waited on. Throws kiln::Error naming `path`.
std::string readRegularFile(const std::string &path, std::uint64_t maxBytes,
                            const std::string &what);

/// Writes all of [data, data + size) to `fd` (again after an interrupted
/// write); false on an error (errno set).
bool writeAll(int fd, const void *data, std::size_t size);

} // namespace kiln

#endif // KILN_RUNTIME_FILES_H
