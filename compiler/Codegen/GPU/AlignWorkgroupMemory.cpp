//===- AlignWorkgroupMemory.cpp - Shared memory aligned for vector access -===//
//
// Implements kiln-align-workgroup-memory.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/GPU/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kiln-align-workgroup-memory"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNALIGNWORKGROUPMEMORYPASS
#include "compiler/Codegen/GPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

/// The alignment every workgroup buffer gets: that of a 128-bit access.
constexpr int64_t kAlignment = 16;

struct AlignWorkgroupMemory
    : mlir::kiln::impl::KilnAlignWorkgroupMemoryPassBase<AlignWorkgroupMemory> {
  void runOnOperation() override {
    StringRef name = LLVM::LLVMDialect::getAlignAttrName();
    getOperation().walk([&](gpu::GPUFuncOp func) {
      for (unsigned i = 0; i < func.getNumWorkgroupAttributions(); ++i) {
        auto current = dyn_cast_or_null<IntegerAttr>(
            func.getWorkgroupAttributionAttr(i, name));
        if (current && current.getInt() >= kAlignment) {
          continue;
        }
        LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": " << func.getName()
                                << " workgroup buffer " << i << "\n");
        func.setWorkgroupAttributionAttr(
            i, name,
            IntegerAttr::get(IntegerType::get(&getContext(), 64), kAlignment));
      }
    });
  }
};

} // namespace
