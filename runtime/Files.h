//===- Files.h - Paths that must not name one file ----------------*- C++ -*-===//
//
// The one place that decides whether two paths name one file: the programs'
// options (a corpus, a training log, a checkpoint and the temporary file its
// save creates), kiln-compile's outputs and IR dumps against its input.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_FILES_H
#define KILN_RUNTIME_FILES_H

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

} // namespace kiln

#endif // KILN_RUNTIME_FILES_H
