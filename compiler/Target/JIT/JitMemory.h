//===- JitMemory.h - One address range for a JIT'd module -------*- C++ -*-===//
//
// MLIR's ExecutionEngine links with RuntimeDyld, whose x86-64 code reaches
// its data, constants and GOT through 32-bit PC-relative offsets, while
// LLVM's default section memory maps each section wherever the kernel finds
// room. Next to a large reservation (AddressSanitizer's heap is 4 TiB) the
// code and its GOT had landed 64 TiB apart: the offsets wrapped and compiled
// code jumped to an unmapped address. This mapper hands out every section of
// a module from one reservation, so all of them lie within its size.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_JIT_JITMEMORY_H
#define KILN_COMPILER_TARGET_JIT_JITMEMORY_H

#include "llvm/ExecutionEngine/SectionMemoryManager.h"

#include <cstddef>

namespace kiln {

/// One mapper per compiled module (not thread-safe: RuntimeDyld links a
/// module's object on one thread). A module whose sections need more than
/// the reservation fails to link ("Unable to allocate section memory").
class ContiguousMemoryMapper final
    : public llvm::SectionMemoryManager::MemoryMapper {
public:
  /// The reservation (address space only, nothing committed); must stay
  /// under 2 GiB for 32-bit offsets to reach across it.
  static constexpr size_t kDefaultReservation = size_t(1) << 30;

  /// Reserves `reservation` bytes of address space (rounded up to pages);
  /// throws kiln::Error when it cannot.
  explicit ContiguousMemoryMapper(size_t reservation = kDefaultReservation);
  ~ContiguousMemoryMapper() override;
  ContiguousMemoryMapper(const ContiguousMemoryMapper &) = delete;
  ContiguousMemoryMapper &operator=(const ContiguousMemoryMapper &) = delete;

  /// The next pages of the reservation (the near hint is moot: everything
  /// is near); ENOMEM once it is used up.
  llvm::sys::MemoryBlock
  allocateMappedMemory(llvm::SectionMemoryManager::AllocationPurpose purpose,
                       size_t numBytes, const llvm::sys::MemoryBlock *nearBlock,
                       unsigned flags, std::error_code &error) override;
  std::error_code protectMappedMemory(const llvm::sys::MemoryBlock &block,
                                      unsigned flags) override;
  /// Gives the pages back to the system; their addresses are not reused.
  std::error_code releaseMappedMemory(llvm::sys::MemoryBlock &block) override;

  char *base() const { return base_; }
  size_t reserved() const { return reserved_; }
  size_t used() const { return used_; }

private:
  char *base_ = nullptr;
  size_t reserved_ = 0, used_ = 0;
};

} // namespace kiln

#endif // KILN_COMPILER_TARGET_JIT_JITMEMORY_H
