//===- HostKernels.cpp - The fake driver's emulated GPU -------------------===//
//
// Loads host-kernel images with LLVM's ORC JIT and runs them: a block's
// threads are fibers that run until they wait for other threads, then the
// next runnable one runs (a switch saves the callee-saved registers and the
// stack pointer: x86-64 only; ucontext's switches, a system call each, took
// 70% of the time). The functions kiln-gpu-modules-to-host
// calls (kiln_emu_*) are defined here:
//
// - kiln_emu_sreg(i): thread index x, y, z (0-2), block size (3-5), block
//   index (6-8), grid size (9-11), lane (12), warp size (13);
// - kiln_emu_barrier(): bar.sync 0 (every thread of the block that has not
//   returned);
// - kiln_emu_shfl(kind, mask, bits, offset, clamp): shfl.sync as the PTX ISA
//   defines it (bfly 0, up 1, down 2, idx 3; the clamp's segment mask and
//   maximum lane), the value in the low 32 bits and the predicate in bit 32;
//   the lanes of `mask` (the membermask) that have not returned take part;
// - kiln_emu_mma_m16n8k8_tf32(d, a0-a3, b0-b1, c0-c3): mma.sync.m16n8k8
//   .row.col.f32.tf32.tf32.f32 with the PTX ISA's fragment layouts (an
//   operand's 13 low bits ignored, as the tensor cores do; products summed
//   in double);
// - kiln_emu_mma_m16n8k16_bf16(d, a0-a3, b0-b1, c0-c3): mma.sync.m16n8k16
//   .row.col.f32.bf16.bf16.f32 with the PTX ISA's fragment layouts (two
//   bf16 a register, the lower index in the low half; products summed in
//   double);
// - kiln_emu_cvt_rna_tf32(x): cvt.rna.tf32.f32 (nearest, ties away from
//   zero; NaN canonical);
// - kiln_emu_cp_async(dst, src, bytes, srcBytes),
//   kiln_emu_cp_async_commit(), kiln_emu_cp_async_wait(n): cp.async.ca
//   .shared.global (srcBytes of src, zeros to `bytes`), commit_group and
//   wait_group n. In blocks of even index a copy lands only when its thread
//   waits for its group (never at a barrier or another thread's wait), so a
//   kernel that reads a copy's destination before waiting for it reads what
//   was there before; in blocks of odd index it lands as it is issued, so a
//   kernel that copies into what another thread may still read (no barrier
//   between) overwrites it before that thread runs;
// - kiln_emu_host_address(p): a device pointer's host address;
// - libdevice's __nv_* functions, as the host's libm computes them;
// - __truncsfbf2 (f32 to bf16, to nearest even), which LLVM calls where the
//   host CPU has no bf16 conversion instruction (no AVX512-BF16: Zen 3).
//
//===----------------------------------------------------------------------===//

#include "HostKernels.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ExecutionEngine/Orc/AbsoluteSymbols.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <sys/mman.h>
#include <vector>

// kiln_fiber_switch(void **from, void *to): saves the callee-saved registers
// on the current stack and the stack pointer in *from, then resumes the
// fiber whose stack pointer is `to`.
asm(R"(
  .text
  .p2align 4
  .type kiln_fiber_switch,@function
kiln_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size kiln_fiber_switch, .-kiln_fiber_switch
)");
extern "C" void kiln_fiber_switch(void **from, void *to);

namespace {

using kiln::kHostKernelImageMagic;

struct Module {
  std::unique_ptr<llvm::orc::LLJIT> jit;
};

enum class State { Ready, AtBarrier, AtWarp, Done };

struct Thread {
  void *sp = nullptr; ///< The suspended fiber's stack pointer.
  unsigned index[3] = {0, 0, 0};
  unsigned linear = 0;
  State state = State::Ready;
  /// At a warp operation: the lanes taking part (shfl.sync's membermask).
  uint32_t members = 0;
  /// cp.async copies not landed yet, oldest first, and the number of groups
  /// committed so far.
  struct Copy {
    char *dst;
    const char *src;
    uint32_t bytes, srcBytes;
    /// The group it belongs to (committed), or UINT32_MAX (not yet).
    uint32_t group;
  };
  std::vector<Copy> copies;
  uint32_t groups = 0;
};

/// The block being run (one at a time: launches are serialized).
struct Block {
  kiln::fake::HostKernelEntry entry = nullptr;
  void **params = nullptr;
  unsigned grid[3] = {1, 1, 1}, size[3] = {1, 1, 1}, index[3] = {0, 0, 0};
  std::vector<Thread> threads;
  void *scheduler = nullptr; ///< The scheduler's stack pointer.
  /// Per lane of each warp: what a shuffle or an mma.sync exchanges.
  std::vector<uint32_t> slots, a, b;
  /// Per warp, lanes that have not returned and lanes at a warp operation.
  std::vector<uint32_t> live, atWarp;
  /// Threads that have not returned, and those at the barrier.
  unsigned running = 0, atBarrier = 0;
  /// Whether cp.async copies land as they are issued (odd blocks) rather
  /// than at their thread's wait_group.
  bool copiesLandAtIssue = false;
};

Block *current = nullptr;
Thread *self = nullptr;

/// Fiber stacks, reused across launches: 64 KiB each (a kernel's frame is a
/// few KiB), a guard page below each.
constexpr size_t kStackBytes = 64 * 1024;
constexpr size_t kGuardBytes = 4096;
std::vector<char *> stacks;

char *stack(size_t i) {
  while (stacks.size() <= i) {
    void *p = mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      return nullptr;
    }
    mprotect(p, kGuardBytes, PROT_NONE);
    stacks.push_back(static_cast<char *>(p) + kGuardBytes);
  }
  return stacks[i];
}

/// Makes the lanes of warp `w` that wait at a warp operation runnable once
/// every live lane of its member mask waits there with that mask.
void releaseWarp(unsigned w) {
  Block &b = *current;
  uint32_t waiting = b.atWarp[w];
  while (waiting) {
    const Thread &first = b.threads[w * 32 + __builtin_ctz(waiting)];
    uint32_t members = first.members & b.live[w];
    bool all = (b.atWarp[w] & members) == members;
    for (uint32_t m = members; all && m; m &= m - 1) {
      all = b.threads[w * 32 + __builtin_ctz(m)].members == first.members;
    }
    if (all) {
      for (uint32_t m = members; m; m &= m - 1) {
        b.threads[w * 32 + __builtin_ctz(m)].state = State::Ready;
      }
      b.atWarp[w] &= ~members;
    }
    waiting &= ~(members | (1u << __builtin_ctz(waiting)));
  }
}

/// Makes the threads at the barrier runnable once every live thread is
/// there.
void releaseBarrier() {
  Block &b = *current;
  if (b.atBarrier == 0 || b.atBarrier != b.running) {
    return;
  }
  for (Thread &t : b.threads) {
    if (t.state == State::AtBarrier) {
      t.state = State::Ready;
    }
  }
  b.atBarrier = 0;
}

/// A fiber's first frame, entered by kiln_fiber_switch's `ret` (the stack
/// aligned as after a call); it never returns.
[[noreturn]] void start() {
  current->entry(current->params);
  self->state = State::Done;
  unsigned w = self->linear / 32;
  current->live[w] &= ~(1u << (self->linear % 32));
  --current->running;
  // Those it no longer holds up.
  releaseWarp(w);
  releaseBarrier();
  void *unused;
  kiln_fiber_switch(&unused, current->scheduler);
  __builtin_unreachable();
}

/// A fresh fiber's stack pointer on `stack`: six zero registers, then
/// start() as the return address at a 16-byte boundary.
void *freshFiber(char *stack) {
  auto top = reinterpret_cast<uintptr_t>(stack + kStackBytes) & ~uintptr_t(15);
  auto *slots = reinterpret_cast<void **>(top - 16);
  slots[0] = reinterpret_cast<void *>(&start);
  slots[1] = nullptr;
  void **sp = slots - 6;
  for (int i = 0; i < 6; ++i) {
    sp[i] = nullptr;
  }
  return sp;
}

/// Suspends the calling thread in `state` until the scheduler releases it:
/// at the barrier, or at a warp operation of the lanes `members`.
void wait(State state, uint32_t members = ~0u) {
  self->state = state;
  self->members = members;
  if (state == State::AtWarp) {
    unsigned w = self->linear / 32;
    current->atWarp[w] |= 1u << (self->linear % 32);
    releaseWarp(w);
  } else {
    ++current->atBarrier;
    releaseBarrier();
  }
  kiln_fiber_switch(&self->sp, current->scheduler);
}

unsigned lane() { return self->linear % 32; }
unsigned warp() { return self->linear / 32; }

float tf32(uint32_t bits) {
  bits &= 0xffffe000u;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// The start of an m16n8kK mma.sync: leaves the lane's A and B registers
/// in the block's slots and waits for the warp's other lanes; returns the
/// warp's first slot.
unsigned shareFragments(std::array<uint32_t, 4> aRegs,
                        std::array<uint32_t, 2> bRegs) {
  unsigned base = warp() * 32, l = lane();
  std::copy(aRegs.begin(), aRegs.end(), &current->a[(base + l) * 4]);
  std::copy(bRegs.begin(), bRegs.end(), &current->b[(base + l) * 2]);
  wait(State::AtWarp);
  return base;
}

/// The end of an m16n8kK mma.sync, once every lane has left its operands
/// in the block's slots: the lane's four elements of D = A B + C (C and D:
/// lane 4g + t holds (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1)),
/// products over K steps summed in double from `elementA(row, k)` and
/// `elementB(k, col)`, written to `d` after the warp has read its slots.
template <unsigned K, typename A, typename B>
void finishMma(float *d, std::array<float, 4> c, A elementA, B elementB) {
  unsigned g = lane() / 4, t = lane() % 4;
  float out[4];
  for (unsigned i = 0; i < 4; ++i) {
    unsigned row = g + (i < 2 ? 0 : 8), col = 2 * t + i % 2;
    double sum = c[i];
    for (unsigned k = 0; k < K; ++k) {
      sum += elementA(row, k) * elementB(k, col);
    }
    out[i] = float(sum);
  }
  wait(State::AtWarp);
  std::memcpy(d, out, sizeof(out));
}

} // namespace

extern "C" {

uint32_t kiln_emu_sreg(uint32_t which) {
  switch (which) {
  case 0:
  case 1:
  case 2:
    return self->index[which];
  case 3:
  case 4:
  case 5:
    return current->size[which - 3];
  case 6:
  case 7:
  case 8:
    return current->index[which - 6];
  case 9:
  case 10:
  case 11:
    return current->grid[which - 9];
  case 12:
    return lane();
  default:
    return 32;
  }
}

void kiln_emu_barrier() { wait(State::AtBarrier); }

void kiln_emu_cp_async(char *dst, const char *src, uint32_t bytes,
                       uint32_t srcBytes) {
  srcBytes = std::min(srcBytes, bytes);
  if (current->copiesLandAtIssue) {
    std::memcpy(dst, src, srcBytes);
    std::memset(dst + srcBytes, 0, bytes - srcBytes);
    return;
  }
  self->copies.push_back({dst, src, bytes, srcBytes, UINT32_MAX});
}

void kiln_emu_cp_async_commit() {
  for (Thread::Copy &copy : self->copies) {
    if (copy.group == UINT32_MAX) {
      copy.group = self->groups;
    }
  }
  ++self->groups;
}

void kiln_emu_cp_async_wait(uint32_t n) {
  // Every committed group but the newest n lands, in order.
  auto landed = [&](const Thread::Copy &copy) {
    return copy.group != UINT32_MAX && copy.group + n < self->groups;
  };
  for (const Thread::Copy &copy : self->copies) {
    if (landed(copy)) {
      std::memcpy(copy.dst, copy.src, copy.srcBytes);
      std::memset(copy.dst + copy.srcBytes, 0, copy.bytes - copy.srcBytes);
    }
  }
  llvm::erase_if(self->copies, landed);
}

uint64_t kiln_emu_shfl(uint32_t kind, uint32_t mask, uint32_t value,
                       uint32_t offset, uint32_t clamp) {
  uint32_t *slots = &current->slots[warp() * 32];
  unsigned l = lane();
  slots[l] = value;
  wait(State::AtWarp, mask);
  uint32_t segmask = (clamp >> 8) & 0x1f;
  uint32_t cval = clamp & 0x1f;
  uint32_t maxLane = (l & segmask) | (cval & ~segmask);
  uint32_t minLane = l & segmask;
  int64_t j = l;
  bool valid = false;
  switch (kind) {
  case 1: // up
    j = int64_t(l) - int64_t(offset);
    valid = j >= int64_t(maxLane);
    break;
  case 2: // down
    j = int64_t(l) + int64_t(offset);
    valid = j <= int64_t(maxLane);
    break;
  case 0: // bfly
    j = int64_t(l ^ offset);
    valid = j <= int64_t(maxLane);
    break;
  default: // idx
    j = int64_t(minLane | (offset & 0x1f & ~segmask));
    valid = j <= int64_t(maxLane);
    break;
  }
  if (!valid) {
    j = l;
  }
  uint32_t result = slots[j & 31];
  wait(State::AtWarp, mask);
  return uint64_t(result) | (uint64_t(valid) << 32);
}

void kiln_emu_mma_m16n8k8_tf32(float *d, uint32_t a0, uint32_t a1, uint32_t a2,
                               uint32_t a3, uint32_t b0, uint32_t b1, float c0,
                               float c1, float c2, float c3) {
  unsigned base = shareFragments({a0, a1, a2, a3}, {b0, b1});
  // A (16 x 8, row): lane 4g + t holds (g, t), (g + 8, t), (g, t + 4),
  // (g + 8, t + 4). B (8 x 8, col): lane 4g + t holds (t, g), (t + 4, g).
  // C and D (16 x 8): lane 4g + t holds (g, 2t), (g, 2t + 1), (g + 8, 2t),
  // (g + 8, 2t + 1).
  auto elementA = [&](unsigned row, unsigned k) {
    unsigned from = (row % 8) * 4 + k % 4;
    unsigned reg = (row < 8 ? 0 : 1) + (k < 4 ? 0 : 2);
    return double(tf32(current->a[(base + from) * 4 + reg]));
  };
  auto elementB = [&](unsigned k, unsigned col) {
    unsigned from = col * 4 + k % 4;
    return double(tf32(current->b[(base + from) * 2 + (k < 4 ? 0 : 1)]));
  };
  finishMma<8>(d, {c0, c1, c2, c3}, elementA, elementB);
}

void kiln_emu_mma_m16n8k16_bf16(float *d, uint32_t a0, uint32_t a1, uint32_t a2,
                                uint32_t a3, uint32_t b0, uint32_t b1, float c0,
                                float c1, float c2, float c3) {
  unsigned base = shareFragments({a0, a1, a2, a3}, {b0, b1});
  // A (16 x 16, row): lane 4g + t holds (g, 2t), (g, 2t + 1) in a0,
  // (g + 8, 2t), (g + 8, 2t + 1) in a1, and the same at 2t + 8, 2t + 9 in
  // a2, a3. B (16 x 8, col): lane 4g + t holds (2t, g), (2t + 1, g) in b0
  // and (2t + 8, g), (2t + 9, g) in b1. C and D as for TF32.
  auto half = [](uint32_t reg, unsigned k) {
    uint32_t bits = k % 2 == 0 ? reg << 16 : reg & 0xffff0000u;
    float f;
    std::memcpy(&f, &bits, 4);
    return double(f);
  };
  auto elementA = [&](unsigned row, unsigned k) {
    unsigned from = (row % 8) * 4 + k % 8 / 2;
    unsigned reg = (row < 8 ? 0 : 1) + (k < 8 ? 0 : 2);
    return half(current->a[(base + from) * 4 + reg], k);
  };
  auto elementB = [&](unsigned k, unsigned col) {
    unsigned from = col * 4 + k % 8 / 2;
    return half(current->b[(base + from) * 2 + (k < 8 ? 0 : 1)], k);
  };
  finishMma<16>(d, {c0, c1, c2, c3}, elementA, elementB);
}

uint32_t kiln_emu_cvt_rna_tf32(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u) {
    return (bits & 0x7fffffu) ? 0x7fffffffu : bits;
  }
  // Adding half a TF32 unit to the magnitude rounds half away from zero;
  // a carry into the exponent is right (up to infinity).
  return (bits + 0x1000u) & 0xffffe000u;
}

void *kiln_emu_host_address(void *pointer) {
  auto address = reinterpret_cast<uintptr_t>(pointer);
  return address >= kiln::fake::kDeviceSpace ? kiln::fake::onHost(address)
                                             : pointer;
}

} // extern "C"

namespace {

float rsqrtF(float x) { return 1.0f / std::sqrt(x); }
double rsqrtD(double x) { return 1.0 / std::sqrt(x); }
int isnanF(float x) { return std::isnan(x); }
int isinfF(float x) { return std::isinf(x); }

/// f32 to bf16, rounded to nearest even (`cvt.rn.bf16.f32`), a NaN kept
/// quiet: LLVM's call for an `fptrunc` to bf16 on x86 CPUs without
/// AVX512-BF16 (compiler-rt's `__truncsfbf2`, which the JIT does not link;
/// Zen 3 ran every bf16 kernel into "symbols not found").
__bf16 truncSfBf2(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  uint16_t half = std::isnan(x)
                      ? uint16_t((bits >> 16) | 0x40)
                      : uint16_t((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
  __bf16 result;
  std::memcpy(&result, &half, sizeof result);
  return result;
}

/// The symbols host kernels may call, by name.
std::vector<std::pair<const char *, void *>> symbols() {
  using F1 = float (*)(float);
  using F2 = float (*)(float, float);
  using F3 = float (*)(float, float, float);
  using D1 = double (*)(double);
  using D2 = double (*)(double, double);
  using D3 = double (*)(double, double, double);
  auto p = [](auto f) { return reinterpret_cast<void *>(f); };
  return {
      {"kiln_emu_sreg", p(&kiln_emu_sreg)},
      {"kiln_emu_barrier", p(&kiln_emu_barrier)},
      {"kiln_emu_cp_async", p(&kiln_emu_cp_async)},
      {"kiln_emu_cp_async_commit", p(&kiln_emu_cp_async_commit)},
      {"kiln_emu_cp_async_wait", p(&kiln_emu_cp_async_wait)},
      {"kiln_emu_shfl", p(&kiln_emu_shfl)},
      {"kiln_emu_mma_m16n8k8_tf32", p(&kiln_emu_mma_m16n8k8_tf32)},
      {"kiln_emu_mma_m16n8k16_bf16", p(&kiln_emu_mma_m16n8k16_bf16)},
      {"kiln_emu_cvt_rna_tf32", p(&kiln_emu_cvt_rna_tf32)},
      {"kiln_emu_host_address", p(&kiln_emu_host_address)},
      {"__truncsfbf2", p(&truncSfBf2)},
      {"__nv_expf", p(F1(&::expf))},
      {"__nv_exp2f", p(F1(&::exp2f))},
      {"__nv_expm1f", p(F1(&::expm1f))},
      {"__nv_logf", p(F1(&::logf))},
      {"__nv_log2f", p(F1(&::log2f))},
      {"__nv_log10f", p(F1(&::log10f))},
      {"__nv_log1pf", p(F1(&::log1pf))},
      {"__nv_sqrtf", p(F1(&::sqrtf))},
      {"__nv_rsqrtf", p(F1(&rsqrtF))},
      {"__nv_cbrtf", p(F1(&::cbrtf))},
      {"__nv_sinf", p(F1(&::sinf))},
      {"__nv_cosf", p(F1(&::cosf))},
      {"__nv_tanf", p(F1(&::tanf))},
      {"__nv_tanhf", p(F1(&::tanhf))},
      {"__nv_sinhf", p(F1(&::sinhf))},
      {"__nv_coshf", p(F1(&::coshf))},
      {"__nv_asinf", p(F1(&::asinf))},
      {"__nv_acosf", p(F1(&::acosf))},
      {"__nv_atanf", p(F1(&::atanf))},
      {"__nv_atan2f", p(F2(&::atan2f))},
      {"__nv_erff", p(F1(&::erff))},
      {"__nv_erfcf", p(F1(&::erfcf))},
      {"__nv_powf", p(F2(&::powf))},
      {"__nv_fabsf", p(F1(&::fabsf))},
      {"__nv_floorf", p(F1(&::floorf))},
      {"__nv_ceilf", p(F1(&::ceilf))},
      {"__nv_truncf", p(F1(&::truncf))},
      {"__nv_roundf", p(F1(&::roundf))},
      {"__nv_rintf", p(F1(&::rintf))},
      {"__nv_nearbyintf", p(F1(&::nearbyintf))},
      {"__nv_fmaf", p(F3(&::fmaf))},
      {"__nv_fmaxf", p(F2(&::fmaxf))},
      {"__nv_fminf", p(F2(&::fminf))},
      {"__nv_fmodf", p(F2(&::fmodf))},
      {"__nv_copysignf", p(F2(&::copysignf))},
      {"__nv_isnanf", p(&isnanF)},
      {"__nv_isinff", p(&isinfF)},
      {"__nv_exp", p(D1(&::exp))},
      {"__nv_log", p(D1(&::log))},
      {"__nv_sqrt", p(D1(&::sqrt))},
      {"__nv_rsqrt", p(D1(&rsqrtD))},
      {"__nv_tanh", p(D1(&::tanh))},
      {"__nv_erf", p(D1(&::erf))},
      {"__nv_fabs", p(D1(&::fabs))},
      {"__nv_floor", p(D1(&::floor))},
      {"__nv_ceil", p(D1(&::ceil))},
      {"__nv_pow", p(D2(&::pow))},
      {"__nv_fma", p(D3(&::fma))},
  };
}

} // namespace

namespace kiln::fake {

void *loadHostKernels(const void *image, std::string &error) {
  const char *bytes = static_cast<const char *>(image);
  uint64_t size = 0;
  for (int i = 0; i < 8; ++i) {
    size |= uint64_t(uint8_t(bytes[sizeof(kHostKernelImageMagic) + i]))
            << (8 * i);
  }
  if (size < 64 || size > (1ull << 32)) {
    error = "host kernels: an object of " + std::to_string(size) + " bytes";
    return nullptr;
  }
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit) {
    error = "host kernels: " + llvm::toString(jit.takeError());
    return nullptr;
  }
  llvm::orc::JITDylib &library = (*jit)->getMainJITDylib();
  llvm::orc::SymbolMap defined;
  for (auto [name, address] : symbols()) {
    defined[(*jit)->mangleAndIntern(name)] = {
        llvm::orc::ExecutorAddr::fromPtr(address),
        llvm::JITSymbolFlags::Exported};
  }
  if (llvm::Error e = library.define(llvm::orc::absoluteSymbols(defined))) {
    error = "host kernels: " + llvm::toString(std::move(e));
    return nullptr;
  }
  // memcpy, memset and the like, which the optimizer may call.
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      (*jit)->getDataLayout().getGlobalPrefix());
  if (!process) {
    error = "host kernels: " + llvm::toString(process.takeError());
    return nullptr;
  }
  library.addGenerator(std::move(*process));
  auto object = llvm::MemoryBuffer::getMemBufferCopy(
      llvm::StringRef(bytes + sizeof(kHostKernelImageMagic) + 8, size),
      "host-kernels");
  if (llvm::Error e = (*jit)->addObjectFile(std::move(object))) {
    error = "host kernels: " + llvm::toString(std::move(e));
    return nullptr;
  }
  auto *module = new Module;
  module->jit = std::move(*jit);
  return module;
}

void unloadHostKernels(void *module) { delete static_cast<Module *>(module); }

/// The address of function `name` of a loaded module, or nullptr.
template <typename F>
F lookup(void *module, const char *name) {
  auto found = static_cast<Module *>(module)->jit->lookup(name);
  if (!found) {
    llvm::consumeError(found.takeError());
    return nullptr;
  }
  return found->toPtr<F>();
}

HostKernelEntry hostKernel(void *module, const char *name) {
  return lookup<HostKernelEntry>(module, name);
}

PoisonShared poisonShared(void *module) {
  return lookup<PoisonShared>(module, "kiln_emu_poison_shared");
}

bool runHostKernel(HostKernelEntry entry, PoisonShared poison,
                   const unsigned grid[3], const unsigned block[3],
                   void **params, std::string &error) {
  Block run;
  run.entry = entry;
  run.params = params;
  unsigned threads = block[0] * block[1] * block[2];
  unsigned warps = (threads + 31) / 32;
  for (int d = 0; d < 3; ++d) {
    run.grid[d] = grid[d];
    run.size[d] = block[d];
  }
  run.threads.resize(threads);
  run.slots.assign(warps * 32, 0);
  run.a.assign(warps * 32 * 4, 0);
  run.b.assign(warps * 32 * 2, 0);
  run.live.assign(warps, 0);
  run.atWarp.assign(warps, 0);
  for (unsigned t = 0; t < threads; ++t) {
    Thread &thread = run.threads[t];
    thread.linear = t;
    thread.index[0] = t % block[0];
    thread.index[1] = t / block[0] % block[1];
    thread.index[2] = t / (block[0] * block[1]);
    if (!stack(t)) {
      error = "host kernels: no memory for the threads' stacks";
      return false;
    }
  }
  current = &run;
  for (unsigned z = 0; z < grid[2]; ++z) {
    for (unsigned y = 0; y < grid[1]; ++y) {
      for (unsigned x = 0; x < grid[0]; ++x) {
        run.index[0] = x, run.index[1] = y, run.index[2] = z;
        if (poison) {
          poison();
        }
        bool reverse = (x + y + z) % 2 == 1;
        run.copiesLandAtIssue = reverse;
        for (unsigned t = 0; t < threads; ++t) {
          Thread &thread = run.threads[t];
          thread.sp = freshFiber(stack(t));
          thread.state = State::Ready;
          thread.copies.clear();
          thread.groups = 0;
        }
        run.running = threads;
        run.atBarrier = 0;
        for (unsigned w = 0; w < warps; ++w) {
          unsigned lanes = std::min(32u, threads - w * 32);
          run.live[w] = lanes == 32 ? ~0u : (1u << lanes) - 1;
          run.atWarp[w] = 0;
        }
        // Each pass runs every runnable thread until it waits or returns;
        // waiting threads are released as the last one they wait for
        // arrives (releaseWarp, releaseBarrier).
        while (run.running > 0) {
          bool ran = false;
          for (unsigned i = 0; i < threads; ++i) {
            Thread &thread = run.threads[reverse ? threads - 1 - i : i];
            if (thread.state == State::Ready) {
              self = &thread;
              ran = true;
              kiln_fiber_switch(&run.scheduler, thread.sp);
            }
          }
          if (!ran) {
            error = "block (" + std::to_string(x) + ", " + std::to_string(y) +
                    ", " + std::to_string(z) +
                    "): its threads wait at different barriers or warp "
                    "operations, which none can pass (a barrier some threads "
                    "never reach)";
            current = nullptr;
            return false;
          }
        }
      }
    }
  }
  current = nullptr;
  return true;
}

} // namespace kiln::fake
