//===- FileDescriptor.h - A file descriptor closed on scope exit -*- C++
//-*-===//
//
// Internal to the runtime (the safetensors reader and the atomic writer of
// Files.cpp), not installed.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_FILEDESCRIPTOR_H
#define KILN_RUNTIME_FILEDESCRIPTOR_H

#include <unistd.h>

namespace kiln {

/// Closes a file descriptor on scope exit.
class FileDescriptor {
public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor &) = delete;
  FileDescriptor &operator=(const FileDescriptor &) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  int get() const { return fd_; }
  /// Closes now and reports whether close succeeded (it can report a
  /// deferred write error).
  bool close() {
    int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

private:
  int fd_;
};

} // namespace kiln

#endif // KILN_RUNTIME_FILEDESCRIPTOR_H
