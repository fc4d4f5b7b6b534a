//===- TargetInfo.cpp - What CPU code generation needs of the target ------===//

#include "compiler/Codegen/CPU/TargetInfo.h"

#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/bit.h"
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

int64_t TargetInfo::blockKLongReduction() const {
  if (!tileRowsAndPanelInL1()) {
    return blockK();
  }
  int64_t fit = l1DataBytes / ((tileM() + tileN()) * int64_t(sizeof(float)));
  return std::clamp<int64_t>(int64_t(llvm::bit_floor(uint64_t(fit))), 16,
                             blockK());
}

int64_t TargetInfo::blockN(int64_t kc) const {
  int64_t steps = kc > 0 ? kc : blockK();
  int64_t n = l2Bytes / (2 * steps * int64_t(sizeof(float)));
  return std::max(tileN(), n / tileN() * tileN());
}

int64_t TargetInfo::blockM(int64_t kc) const {
  int64_t steps = kc > 0 ? kc : blockK();
  int64_t m = l2Bytes / (2 * steps * int64_t(sizeof(float)));
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

/// `features` as LLVM writes them ("+avx,+avx2,-avx512f"), sorted so that
/// the attribute's text does not depend on a hash table's order.
static std::string featureString(const llvm::StringMap<bool> &features) {
  llvm::SmallVector<std::string> list;
  for (const auto &feature : features) {
    list.push_back((feature.getValue() ? "+" : "-") + feature.getKey().str());
  }
  llvm::sort(list);
  return llvm::join(list, ",");
}

llvm::Expected<TargetAttr>
resolveTarget(MLIRContext *context, llvm::StringRef cpu, llvm::StringRef gpu) {
  if (!gpu.empty() && !isGpuChip(gpu)) {
    return llvm::createStringError(
        "'" + gpu.str() +
        "' is not an NVIDIA GPU architecture (sm_80, sm_90, ...)");
  }
  TargetInfo defaults;
  int64_t l1 = defaults.l1DataBytes, l2 = defaults.l2Bytes;
  std::string name;
  llvm::StringMap<bool> features;
  if (cpu == "host") {
    name = llvm::sys::getHostCPUName().str();
    features = llvm::sys::getHostCPUFeatures();
    // Caches too small to be real (or unreadable) keep the defaults.
    if (int64_t bytes = hostCacheBytes(1); bytes >= 16 * 1024) {
      l1 = std::min<int64_t>(bytes, 128 * 1024);
    }
    if (int64_t bytes = hostCacheBytes(2); bytes >= 128 * 1024) {
      l2 = std::min<int64_t>(bytes, 8 * 1024 * 1024);
    }
  } else {
    if (llvm::X86::parseArchX86(cpu, /*Only64Bit=*/true) ==
        llvm::X86::CK_None) {
      return llvm::createStringError(
          "unknown target CPU '" + cpu.str() +
          "' (use host, or an LLVM CPU name such as x86-64, x86-64-v2, "
          "x86-64-v3, x86-64-v4, znver4)");
    }
    name = cpu.str();
    // The CPU's own features, then every feature they imply (avx2 implies
    // avx; avx512vl implies avx512f).
    llvm::SmallVector<llvm::StringRef> own;
    llvm::X86::getFeaturesForCPU(cpu, own);
    for (llvm::StringRef feature : own) {
      features[feature] = true;
      llvm::X86::updateImpliedFeatures(feature, true, features);
    }
  }
  return TargetAttr::get(context, name, featureString(features), l1, l2, gpu);
}

TargetInfo TargetInfo::of(TargetAttr target) {
  TargetInfo info;
  info.cpu = target.getCpu().str();
  bool avx = false, avx512 = false, amxTile = false, amxBf16 = false;
  llvm::SmallVector<llvm::StringRef> features;
  target.getFeatures().split(features, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef feature : features) {
    avx |= feature == "+avx";
    avx512 |= feature == "+avx512f";
    info.avx512bf16 |= feature == "+avx512bf16";
    amxTile |= feature == "+amx-tile";
    amxBf16 |= feature == "+amx-bf16";
  }
  info.amx = amxTile && amxBf16;
  info.vectorBits = avx512 ? 512 : avx ? 256 : 128;
  info.vectorRegisters = avx512 ? 32 : 16;
  info.l1DataBytes = target.getL1DataBytes();
  info.l2Bytes = target.getL2Bytes();
  return info;
}

std::string cpuPrecisionError(llvm::StringRef precision, TargetAttr target) {
  if (precision == "fp32") {
    return "";
  }
  if (precision != "bf16") {
    return "precision '" + precision.str() +
           "' is not a CPU precision: use fp32 (the default) or bf16";
  }
  if (!target) {
    return "";
  }
  TargetInfo info = TargetInfo::of(target);
  if (!info.avx512bf16) {
    return "precision bf16 needs a CPU with AVX512-BF16 (vdpbf16ps: Zen 4 "
           "and later, Sapphire Rapids and later), and the code is compiled "
           "for '" +
           info.cpu + "', which lacks it; use precision fp32";
  }
  return "";
}

llvm::Expected<Bf16Kernels> bf16Kernels(llvm::StringRef name,
                                        TargetAttr target) {
  if (name != "auto" && name != "dot" && name != "amx" &&
      name != "amx-emulated") {
    return llvm::createStringError(
        "bf16 kernels '" + name.str() +
        "' are none: use auto (the default), dot, amx or amx-emulated");
  }
  if (name == "amx-emulated") {
    return Bf16Kernels::amxEmulated;
  }
  if (name == "dot" || !target) {
    return Bf16Kernels::dot;
  }
  TargetInfo info = TargetInfo::of(target);
  if (name == "amx" && !info.amx) {
    return llvm::createStringError(
        "bf16 kernels amx need a CPU with AMX (amx-tile and amx-bf16: "
        "Sapphire Rapids and later), and the code is compiled for '" +
        info.cpu + "', which lacks it; use auto or dot");
  }
  return info.amx ? Bf16Kernels::amx : Bf16Kernels::dot;
}

TargetAttr getTarget(Operation *op) {
  auto module = dyn_cast<ModuleOp>(op);
  if (!module) {
    module = op->getParentOfType<ModuleOp>();
  }
  return module ? module->getAttrOfType<TargetAttr>(kTargetAttr) : TargetAttr();
}

FailureOr<TargetAttr> requireTarget(Operation *op, llvm::StringRef pass) {
  if (TargetAttr target = getTarget(op)) {
    return target;
  }
  return op->emitError() << pass << " needs the target CPU: the module's '"
                         << kTargetAttr
                         << "' attribute, set by kiln-set-target{cpu=...}";
}

} // namespace mlir::kiln::cpu
