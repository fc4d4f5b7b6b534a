//===- JitMemory.cpp - One address range for a JIT'd module ---------------===//

#include "compiler/Target/JIT/JitMemory.h"

#include "runtime/Error.h"

#include "llvm/Support/Memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include <sys/mman.h>
#include <unistd.h>

using namespace kiln;
using llvm::sys::Memory;
using llvm::sys::MemoryBlock;

static size_t pageSize() { return size_t(::sysconf(_SC_PAGESIZE)); }

static size_t roundUpToPages(size_t bytes) {
  size_t page = pageSize();
  return (bytes + page - 1) / page * page;
}

static int protection(unsigned flags) {
  int result = PROT_NONE;
  if (flags & Memory::MF_READ) {
    result |= PROT_READ;
  }
  if (flags & Memory::MF_WRITE) {
    result |= PROT_WRITE;
  }
  if (flags & Memory::MF_EXEC) {
    result |= PROT_EXEC;
  }
  return result;
}

ContiguousMemoryMapper::ContiguousMemoryMapper(size_t reservation)
    : reserved_(roundUpToPages(reservation)) {
  void *p = ::mmap(nullptr, reserved_, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    throw Error(fmt::format("kiln: cannot reserve {} MiB of address space for "
                            "compiled code ({})",
                            reserved_ >> 20, std::strerror(errno)));
  }
  base_ = static_cast<char *>(p);
}

ContiguousMemoryMapper::~ContiguousMemoryMapper() {
  ::munmap(base_, reserved_);
}

MemoryBlock ContiguousMemoryMapper::allocateMappedMemory(
    llvm::SectionMemoryManager::AllocationPurpose, size_t numBytes,
    const MemoryBlock *, unsigned flags, std::error_code &error) {
  // What is left is a whole number of pages: a size that fits still fits
  // rounded up (and is compared before rounding, which could wrap).
  size_t wanted = std::max<size_t>(numBytes, 1);
  if (wanted > reserved_ - used_) {
    error = std::make_error_code(std::errc::not_enough_memory);
    return MemoryBlock();
  }
  size_t bytes = roundUpToPages(wanted);
  char *p = base_ + used_;
  if (::mprotect(p, bytes, protection(flags)) != 0) {
    error = std::error_code(errno, std::generic_category());
    return MemoryBlock();
  }
  used_ += bytes;
  error = std::error_code();
  return MemoryBlock(p, bytes);
}

std::error_code
ContiguousMemoryMapper::protectMappedMemory(const MemoryBlock &block,
                                            unsigned flags) {
  if (!block.base() || block.allocatedSize() == 0) {
    return std::error_code(); // an empty section: nothing to protect
  }
  // Blocks are sections within the pages handed out: protect whole pages.
  uintptr_t page = pageSize();
  uintptr_t start = reinterpret_cast<uintptr_t>(block.base()) / page * page;
  uintptr_t end = roundUpToPages(reinterpret_cast<uintptr_t>(block.base()) +
                                 block.allocatedSize());
  if (::mprotect(reinterpret_cast<void *>(start), end - start,
                 protection(flags)) != 0) {
    return std::error_code(errno, std::generic_category());
  }
  if (flags & Memory::MF_EXEC) {
    Memory::InvalidateInstructionCache(block.base(), block.allocatedSize());
  }
  return std::error_code();
}

std::error_code
ContiguousMemoryMapper::releaseMappedMemory(MemoryBlock &block) {
  if (!block.base() || block.allocatedSize() == 0) {
    return std::error_code();
  }
  // Back to an inaccessible reservation: the pages are freed, the addresses
  // stay ours until the mapper goes.
  void *p =
      ::mmap(block.base(), block.allocatedSize(), PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  if (p == MAP_FAILED) {
    return std::error_code(errno, std::generic_category());
  }
  block = MemoryBlock();
  return std::error_code();
}
