//===- JitMemoryTest.cpp - Compiled code's sections in one range ---------===//
//
// ContiguousMemoryMapper (compiler/Target/JIT/JitMemory.h) places every
// section of a JIT'd module in one reservation, so that RuntimeDyld's 32-bit
// offsets reach from the code to its data and GOT. The examples built with
// AddressSanitizer (docs/testing.md, "Sanitizers") show what it is for:
// without it their compiled code jumped to an unmapped address.
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/JIT/JitMemory.h"
#include "compiler/Target/JIT/Jit.h"
#include "runtime/Tensor.h"

#include "llvm/Support/Memory.h"

#include <gtest/gtest.h>

#include <cstring>

#include <sys/mman.h>

using namespace kiln;
using llvm::sys::Memory;
using llvm::sys::MemoryBlock;
using Purpose = llvm::SectionMemoryManager::AllocationPurpose;

namespace {

bool inside(const ContiguousMemoryMapper &mapper, const MemoryBlock &block) {
  char *p = static_cast<char *>(block.base());
  return p >= mapper.base() &&
         p + block.allocatedSize() <= mapper.base() + mapper.reserved();
}

TEST(JitMemory, EverySectionLiesInOneReservation) {
  ContiguousMemoryMapper mapper;
  ASSERT_LT(mapper.reserved(), size_t(1) << 31); // 32-bit offsets reach
  // Big and small blocks of each purpose, as RuntimeDyld asks for them.
  // A kernel left to itself puts the small ones into holes between the
  // libraries and the big ones elsewhere.
  std::vector<MemoryBlock> blocks;
  for (size_t bytes :
       {size_t(1), size_t(4096), size_t(5000), size_t(3) << 20}) {
    for (Purpose purpose : {Purpose::Code, Purpose::ROData, Purpose::RWData}) {
      std::error_code error;
      MemoryBlock block = mapper.allocateMappedMemory(
          purpose, bytes, nullptr, Memory::MF_READ | Memory::MF_WRITE, error);
      ASSERT_FALSE(error) << error.message();
      ASSERT_GE(block.allocatedSize(), bytes);
      EXPECT_TRUE(inside(mapper, block));
      std::memset(block.base(), 0x5a, bytes); // writable
      blocks.push_back(block);
    }
  }
  for (size_t i = 1; i < blocks.size(); ++i) { // none overlaps the one before
    EXPECT_GE(static_cast<char *>(blocks[i].base()),
              static_cast<char *>(blocks[i - 1].base()) +
                  blocks[i - 1].allocatedSize());
  }
  EXPECT_LE(mapper.used(), mapper.reserved());
}

TEST(JitMemory, ProtectsAndReleases) {
  ContiguousMemoryMapper mapper(1 << 20);
  std::error_code error;
  MemoryBlock block = mapper.allocateMappedMemory(
      Purpose::Code, 100, nullptr, Memory::MF_READ | Memory::MF_WRITE, error);
  ASSERT_FALSE(error);
  static_cast<unsigned char *>(block.base())[0] = 0xc3; // ret
  EXPECT_FALSE(
      mapper.protectMappedMemory(block, Memory::MF_READ | Memory::MF_EXEC));
  EXPECT_EQ(static_cast<unsigned char *>(block.base())[0], 0xc3);
  // A section inside the block (not page-aligned) protects its pages.
  MemoryBlock section(static_cast<char *>(block.base()) + 16, 32);
  EXPECT_FALSE(mapper.protectMappedMemory(section, Memory::MF_READ));
  EXPECT_EQ(static_cast<unsigned char *>(block.base())[0], 0xc3);
  // Read-only now: a write faults.
  auto *bytes = static_cast<volatile unsigned char *>(block.base());
  EXPECT_DEATH(bytes[1] = 0, "");
  MemoryBlock released = block;
  EXPECT_FALSE(mapper.releaseMappedMemory(block));
  EXPECT_EQ(block.base(), nullptr);
  // Released pages stay reserved and inaccessible (not unmapped: the
  // addresses are the mapper's until it goes).
  EXPECT_DEATH((void)static_cast<volatile unsigned char *>(released.base())[0],
               "");
  unsigned char residency = 0;
  EXPECT_EQ(::mincore(released.base(), 1, &residency), 0);
  EXPECT_TRUE(inside(mapper, released));
}

TEST(JitMemory, AReservationThatIsUsedUpIsAnError) {
  ContiguousMemoryMapper mapper(1 << 20);
  std::error_code error;
  MemoryBlock fits =
      mapper.allocateMappedMemory(Purpose::RWData, 1 << 19, nullptr,
                                  Memory::MF_READ | Memory::MF_WRITE, error);
  EXPECT_FALSE(error);
  EXPECT_TRUE(inside(mapper, fits));
  MemoryBlock tooBig =
      mapper.allocateMappedMemory(Purpose::RWData, (1 << 19) + 1, nullptr,
                                  Memory::MF_READ | Memory::MF_WRITE, error);
  EXPECT_EQ(error, std::errc::not_enough_memory);
  EXPECT_EQ(tooBig.base(), nullptr);
  // A size that would wrap when rounded up to pages.
  MemoryBlock huge =
      mapper.allocateMappedMemory(Purpose::RWData, SIZE_MAX - 10, nullptr,
                                  Memory::MF_READ | Memory::MF_WRITE, error);
  EXPECT_EQ(error, std::errc::not_enough_memory);
  EXPECT_EQ(huge.base(), nullptr);
  // An empty section has nothing to protect.
  EXPECT_FALSE(mapper.protectMappedMemory(MemoryBlock(), Memory::MF_READ));
}

// The JIT places its modules' sections through the mapper.
TEST(JitMemory, CompiledModulesUseIt) {
  auto jit = JitModule::compileSource(R"mlir(
    func.func @scale(%x: tensor<?x17xf32>) -> tensor<?x17xf32> {
      %0 = kiln.add %x, %x : (tensor<?x17xf32>, tensor<?x17xf32>) -> tensor<?x17xf32>
      return %0 : tensor<?x17xf32>
    })mlir");
  EXPECT_GT(jit->codeBytes(), 0u);
  EXPECT_LT(jit->codeBytes(), ContiguousMemoryMapper::kDefaultReservation);
  Tensor x = Tensor::full({3, 17}, 1.5f);
  std::vector<Tensor> out = jit->call("scale", {x});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].toVector<float>(), std::vector<float>(3 * 17, 3.0f));
}

} // namespace
