//===- TargetInfo.cpp - What CPU code generation needs of the target ------===//

#include "compiler/Codegen/CPU/TargetInfo.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/X86TargetParser.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <string>

namespace mlir::kiln::cpu {

int64_t TargetInfo::tileM() const {
  int64_t vectorsPerRow = tileN() / f32Lanes();
  int64_t fit = (vectorRegisters - vectorsPerRow - 1) / vectorsPerRow;
  return std::clamp<int64_t>(fit, 1, 8);
}

int64_t TargetInfo::blockK() const {
  int64_t k = l1DataBytes / (2 * tileM() * int64_t(sizeof(float)));
  return std::clamp<int64_t>(k / 16 * 16, 16, 512);
}

int64_t TargetInfo::blockN() const {
  int64_t n = l2Bytes / (2 * blockK() * int64_t(sizeof(float)));
  return std::max(tileN(), n / tileN() * tileN());
}

int64_t TargetInfo::blockM() const {
  int64_t m = l2Bytes / (2 * blockK() * int64_t(sizeof(float)));
  return std::max(tileM(), m / tileM() * tileM());
}

namespace {
/// The size of this machine's per-core level-`level` data (or unified)
/// cache as Linux reports it, or 0 when it does not.
int64_t hostCacheBytes(int level) {
  for (int index = 0; index < 8; ++index) {
    std::string dir =
        "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    auto read = [&](const char *name) {
      std::ifstream in(dir + "/" + name);
      std::string value;
      std::getline(in, value);
      return value;
    };
    std::string type = read("type");
    if (read("level") != std::to_string(level) || type == "Instruction") {
      continue;
    }
    std::string size = read("size"); // "48K", "1024K", "32M"
    int64_t bytes = 0;
    size_t i = 0;
    for (; i < size.size() && std::isdigit((unsigned char)size[i]); ++i) {
      bytes = bytes * 10 + (size[i] - '0');
      if (bytes > (int64_t(1) << 40)) {
        return 0;
      }
    }
    if (i < size.size() && size[i] == 'K') {
      bytes *= 1024;
    } else if (i < size.size() && size[i] == 'M') {
      bytes *= 1024 * 1024;
    }
    return bytes;
  }
  return 0;
}
} // namespace

llvm::Expected<TargetInfo> lookupTarget(llvm::StringRef cpu) {
  TargetInfo info;
  bool avx = false, avx512 = false;
  if (cpu == "host") {
    info.cpu = llvm::sys::getHostCPUName().str();
    llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
    avx = features.lookup("avx");
    avx512 = features.lookup("avx512f");
    // Caches too small to be real (or unreadable) keep the defaults.
    if (int64_t l1 = hostCacheBytes(1); l1 >= 16 * 1024) {
      info.l1DataBytes = std::min<int64_t>(l1, 128 * 1024);
    }
    if (int64_t l2 = hostCacheBytes(2); l2 >= 128 * 1024) {
      info.l2Bytes = std::min<int64_t>(l2, 8 * 1024 * 1024);
    }
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
