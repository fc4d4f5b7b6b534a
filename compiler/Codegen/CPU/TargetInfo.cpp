//===- TargetInfo.cpp - What CPU code generation needs of the target ------===//

#include "compiler/Codegen/CPU/TargetInfo.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/X86TargetParser.h"

#include <algorithm>

namespace mlir::kiln::cpu {

int64_t TargetInfo::tileM() const {
  int64_t vectorsPerRow = tileN() / f32Lanes();
  int64_t fit = (vectorRegisters - vectorsPerRow - 1) / vectorsPerRow;
  return std::clamp<int64_t>(fit, 1, 8);
}

llvm::Expected<TargetInfo> lookupTarget(llvm::StringRef cpu) {
  TargetInfo info;
  bool avx = false, avx512 = false;
  if (cpu == "host") {
    info.cpu = llvm::sys::getHostCPUName().str();
    llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
    avx = features.lookup("avx");
    avx512 = features.lookup("avx512f");
  } else {
    if (llvm::X86::parseArchX86(cpu, /*Only64Bit=*/true) ==
        llvm::X86::CK_None) {
      return llvm::createStringError(
          "unknown target CPU '" + cpu.str() +
          "' (use host, or an LLVM CPU name such as x86-64, x86-64-v2, "
          "x86-64-v3, x86-64-v4, znver4)");
    }
    info.cpu = cpu.str();
    // The CPU's own features, then every feature they imply (avx2 implies
    // avx; avx512vl implies avx512f).
    llvm::SmallVector<llvm::StringRef> own;
    llvm::X86::getFeaturesForCPU(cpu, own);
    llvm::StringMap<bool> features;
    for (llvm::StringRef feature : own) {
      features[feature] = true;
      llvm::X86::updateImpliedFeatures(feature, true, features);
    }
    avx = features.lookup("avx");
    avx512 = features.lookup("avx512f");
  }
  info.vectorBits = avx512 ? 512 : avx ? 256 : 128;
  info.vectorRegisters = avx512 ? 32 : 16;
  return info;
}

} // namespace mlir::kiln::cpu
