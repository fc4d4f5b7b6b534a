//===- CostModel.cpp - A static prediction of GPU launch times -----------===//
//
// Implements kiln-gpu-cost-model: every host function's launches, for given
// argument sizes, counted (grid, block, each thread's floating-point
// operations and global-memory bytes) and turned into a predicted time by a
// roofline of the device's rates, the share of its multiprocessors the
// blocks fill, and fixed costs per launch and per copy. The efficiencies
// (what share of the peak rates Kiln's kernels reach) are measured on a
// GPU; docs/gpu.md says when and how.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/Common/Views.h"
#include "compiler/Codegen/GPU/Passes.h"
#include "dialects/Kiln/IR/KilnDialect.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <limits>
#include <optional>

#define DEBUG_TYPE "kiln-gpu-cost-model"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNGPUCOSTMODELPASS
#include "compiler/Codegen/GPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

/// What the prediction knows of a GPU: its published rates.
struct Device {
  llvm::StringLiteral name;
  int64_t multiprocessors;
  /// fp32 FMA and dense TF32 tensor-core rates, FLOP/s.
  double fp32, tf32;
  /// Memory bandwidth, bytes/s.
  double bandwidth;
};

constexpr Device kDevices[] = {
    {"h200", 132, 67e12, 495e12, 4.8e12},
    {"h100", 132, 67e12, 495e12, 3.35e12},
    {"a100", 108, 19.5e12, 156e12, 2.04e12},
};

/// The shares of the rates Kiln's kernels reach, and the fixed costs, as
/// measured on an H200 (docs/gpu.md, "The cost model"):
/// - fp32 contractions: a block of 128 x 128 outputs computed about 86
///   GFLOP/s whether 36 or 144 of them ran (a gpt-small weight gradient:
///   4.66 ms on 36 blocks, 1.18 ms on 144), 0.34 of the fp32 rate over the
///   264 blocks an H200 holds; the large products reached 19 TFLOP/s;
constexpr double kFp32Efficiency = 0.34;
/// - TF32 has not been measured yet: a tenth of the tensor rate is assumed;
constexpr double kTf32Efficiency = 0.1;
/// - kernels bound by memory: about 60% of the bandwidth;
constexpr double kMemoryEfficiency = 0.6;
/// - a thread's access to global memory in a loop, seconds (one thread's
///   serial scatter-add took 120 ns per addition of four accesses);
constexpr double kAccessLatency = 30e-9;
/// - a kernel's own latency (start, drain), seconds;
constexpr double kKernelLatency = 2e-6;
/// - the host's cost of a launch ((17.62 - 15.22) ms of 796 launches per
///   gpt-small step), which the GPU's work hides when it is longer;
constexpr double kLaunchCost = 3e-6;
/// - a copy between host and device: fixed cost, and pageable-memory rate
///   (141 MiB each way in about 37 ms).
constexpr double kCopyCost = 10e-6, kCopyBandwidth = 8e9;
/// Blocks a multiprocessor holds: a kernel with shared-memory tiles (a
/// contraction: 128 registers a thread, 256 threads) two; others by
/// threads, 2048 a multiprocessor, at most 32 blocks.
constexpr int64_t kThreadsPerMultiprocessor = 2048, kTiledBlocks = 2,
                  kMaxBlocks = 32;

/// Whether `memref` is global memory (not shared).
bool isGlobal(Value memref) {
  auto type = dyn_cast<MemRefType>(memref.getType());
  auto space =
      type ? dyn_cast_or_null<gpu::AddressSpaceAttr>(type.getMemorySpace())
           : nullptr;
  return !space || space.getValue() == gpu::AddressSpace::Global;
}

/// Evaluates the integer values of host code and kernels at the given
/// argument sizes: constants, integer arithmetic, comparisons and selects,
/// affine.apply, the sizes of buffers and views; a kernel's arguments are
/// its launch's, its block and thread ids those of the first block and
/// thread (0), its grid and block sizes the launch's.
class Evaluator {
public:
  /// Sizes of function arguments: (argument, dimension) -> size.
  DenseMap<std::pair<Value, unsigned>, int64_t> argumentSizes;
  /// A kernel's arguments: the host values they are, evaluated by the
  /// host's evaluator `host` (with its cache).
  DenseMap<Value, Value> aliases;
  Evaluator *host = nullptr;
  /// The grid and block of the launch being evaluated.
  std::array<int64_t, 3> grid = {1, 1, 1}, block = {1, 1, 1};

  std::optional<int64_t> value(Value v) {
    if (auto it = aliases.find(v); it != aliases.end()) {
      return host->value(it->second);
    }
    if (auto it = cache.find(v); it != cache.end()) {
      return it->second;
    }
    std::optional<int64_t> result = compute(v);
    if (result) {
      cache[v] = *result;
    }
    return result;
  }

  /// Where the evaluation of `v` stops: the first value it depends on that
  /// is not one of the above, for the error message.
  Value unknownLeaf(Value v) {
    if (auto it = aliases.find(v); it != aliases.end()) {
      return host->unknownLeaf(it->second);
    }
    Operation *def = v.getDefiningOp();
    if (value(v)) {
      return Value();
    }
    if (!def) {
      return v;
    }
    for (Value operand : def->getOperands()) {
      if (isa<IndexType, IntegerType>(operand.getType()) && !value(operand)) {
        return unknownLeaf(operand);
      }
    }
    return v;
  }

  std::optional<int64_t> size(Value memref, unsigned d) {
    if (auto it = aliases.find(memref); it != aliases.end()) {
      return host->size(it->second, d);
    }
    auto type = dyn_cast<MemRefType>(memref.getType());
    if (!type || d >= type.getRank()) {
      return std::nullopt;
    }
    if (!type.isDynamicDim(d)) {
      return type.getDimSize(d);
    }
    if (auto arg = dyn_cast<BlockArgument>(memref)) {
      auto it = argumentSizes.find({memref, d});
      return it == argumentSizes.end() ? std::nullopt
                                       : std::optional(it->second);
    }
    Operation *def = memref.getDefiningOp();
    auto dynamicSize = [&](ValueRange sizes) -> std::optional<int64_t> {
      return value(sizes[type.getDynamicDimIndex(d)]);
    };
    return llvm::TypeSwitch<Operation *, std::optional<int64_t>>(def)
        .Case([&](memref::AllocOp op) {
          return dynamicSize(op.getDynamicSizes());
        })
        .Case([&](memref::AllocaOp op) {
          return dynamicSize(op.getDynamicSizes());
        })
        .Case(
            [&](gpu::AllocOp op) { return dynamicSize(op.getDynamicSizes()); })
        .Case([&](memref::ExpandShapeOp op) {
          return fold(op.getMixedOutputShape()[d]);
        })
        .Case([&](memref::CollapseShapeOp op) -> std::optional<int64_t> {
          int64_t product = 1;
          SmallVector<ReassociationIndices> groups =
              op.getReassociationIndices();
          for (int64_t s : groups[d]) {
            std::optional<int64_t> part = size(op.getSrc(), s);
            if (!part) {
              return std::nullopt;
            }
            product *= *part;
          }
          return product;
        })
        .Case([&](memref::SubViewOp op) -> std::optional<int64_t> {
          llvm::SmallBitVector dropped = op.getDroppedDims();
          SmallVector<OpFoldResult> sizes = op.getMixedSizes();
          unsigned kept = 0;
          for (unsigned i = 0; i < sizes.size(); ++i) {
            if (dropped.test(i)) {
              continue;
            }
            if (kept++ == d) {
              return fold(sizes[i]);
            }
          }
          return std::nullopt;
        })
        .Case([&](memref::ReinterpretCastOp op) {
          return fold(op.getMixedSizes()[d]);
        })
        .Case([&](memref::CastOp op) { return size(op.getSource(), d); })
        .Case(
            [&](memref::ReshapeOp op) { return element(op.getShape(), d, op); })
        .Default([](Operation *) { return std::nullopt; });
  }

private:
  DenseMap<Value, int64_t> cache;

  /// Element `i` of a one-dimensional host buffer of sizes (ShapeBuffers.h)
  /// as read at `user`: the value the last store before it in its block
  /// wrote there.
  std::optional<int64_t> element(Value buffer, int64_t i, Operation *user) {
    for (Operation *op = user->getPrevNode(); op; op = op->getPrevNode()) {
      auto store = dyn_cast<memref::StoreOp>(op);
      if (!store || store.getMemRef() != buffer ||
          store.getIndices().size() != 1) {
        continue;
      }
      std::optional<int64_t> at = value(store.getIndices()[0]);
      if (!at) {
        return std::nullopt;
      }
      if (*at == i) {
        return value(store.getValueToStore());
      }
    }
    return std::nullopt;
  }

  std::optional<int64_t> fold(OpFoldResult r) {
    if (auto attr = dyn_cast<Attribute>(r)) {
      if (auto i = dyn_cast<IntegerAttr>(attr)) {
        return i.getInt();
      }
      return std::nullopt;
    }
    return value(cast<Value>(r));
  }

  static int64_t dimension(gpu::Dimension d) { return static_cast<int64_t>(d); }

  std::optional<int64_t> compute(Value v) {
    Operation *def = v.getDefiningOp();
    if (!def) {
      return std::nullopt;
    }
    // Sizes are non-negative and far below 2^63: an overflow, a division by
    // zero or an unsigned op on a negative value is not evaluated.
    auto binary = [&](Operation *op, auto f) -> std::optional<int64_t> {
      std::optional<int64_t> a = value(op->getOperand(0)),
                             b = value(op->getOperand(1));
      if (!a || !b) {
        return std::nullopt;
      }
      return f(*a, *b);
    };
    using Result = std::optional<int64_t>;
    auto unsignedOp = [](auto f) {
      return [f](int64_t a, int64_t b) -> Result {
        if (a < 0 || b <= 0) {
          return std::nullopt;
        }
        return f(a, b);
      };
    };
    return llvm::TypeSwitch<Operation *, std::optional<int64_t>>(def)
        .Case([&](arith::ConstantOp op) -> std::optional<int64_t> {
          if (auto i = dyn_cast<IntegerAttr>(op.getValue())) {
            // i1 true is 1 (as zero-extended), not -1.
            return i.getType().isInteger(1)
                       ? int64_t(i.getValue().getZExtValue())
                       : i.getValue().getSExtValue();
          }
          return std::nullopt;
        })
        .Case([&](arith::AddIOp op) {
          return binary(
              op, [](int64_t a, int64_t b) { return llvm::checkedAdd(a, b); });
        })
        .Case([&](arith::SubIOp op) {
          return binary(
              op, [](int64_t a, int64_t b) { return llvm::checkedSub(a, b); });
        })
        .Case([&](arith::MulIOp op) {
          return binary(
              op, [](int64_t a, int64_t b) { return llvm::checkedMul(a, b); });
        })
        .Case([&](arith::DivUIOp op) {
          return binary(op,
                        unsignedOp([](int64_t a, int64_t b) { return a / b; }));
        })
        .Case([&](arith::CeilDivUIOp op) {
          return binary(op, unsignedOp([](int64_t a, int64_t b) {
                          return llvm::divideCeil(uint64_t(a), uint64_t(b));
                        }));
        })
        .Case([&](arith::RemUIOp op) {
          return binary(op,
                        unsignedOp([](int64_t a, int64_t b) { return a % b; }));
        })
        .Case<arith::DivSIOp, arith::FloorDivSIOp, arith::CeilDivSIOp,
              arith::RemSIOp>([&](Operation *op) {
          return binary(op, [op](int64_t a, int64_t b) -> Result {
            if (b == 0 ||
                (b == -1 && a == std::numeric_limits<int64_t>::min())) {
              return std::nullopt;
            }
            if (isa<arith::FloorDivSIOp>(op)) {
              return llvm::divideFloorSigned(a, b);
            }
            if (isa<arith::CeilDivSIOp>(op)) {
              return llvm::divideCeilSigned(a, b);
            }
            return isa<arith::RemSIOp>(op) ? a % b : a / b;
          });
        })
        .Case<arith::MinUIOp, arith::MinSIOp>([&](Operation *op) {
          return binary(op, [](int64_t a, int64_t b) -> Result {
            return std::min(a, b);
          });
        })
        .Case<arith::MaxUIOp, arith::MaxSIOp>([&](Operation *op) {
          return binary(op, [](int64_t a, int64_t b) -> Result {
            return std::max(a, b);
          });
        })
        .Case([&](arith::CmpIOp op) -> std::optional<int64_t> {
          std::optional<int64_t> a = value(op.getLhs()), b = value(op.getRhs());
          if (!a || !b) {
            return std::nullopt;
          }
          switch (op.getPredicate()) {
          case arith::CmpIPredicate::eq:
            return *a == *b;
          case arith::CmpIPredicate::ne:
            return *a != *b;
          case arith::CmpIPredicate::slt:
          case arith::CmpIPredicate::ult:
            return *a < *b;
          case arith::CmpIPredicate::sle:
          case arith::CmpIPredicate::ule:
            return *a <= *b;
          case arith::CmpIPredicate::sgt:
          case arith::CmpIPredicate::ugt:
            return *a > *b;
          case arith::CmpIPredicate::sge:
          case arith::CmpIPredicate::uge:
            return *a >= *b;
          }
          return std::nullopt;
        })
        .Case([&](arith::SelectOp op) -> std::optional<int64_t> {
          std::optional<int64_t> c = value(op.getCondition());
          if (!c) {
            return std::nullopt;
          }
          return value(*c ? op.getTrueValue() : op.getFalseValue());
        })
        .Case([&](arith::AndIOp op) {
          return binary(op,
                        [](int64_t a, int64_t b) -> Result { return a & b; });
        })
        .Case([&](arith::OrIOp op) {
          return binary(op,
                        [](int64_t a, int64_t b) -> Result { return a | b; });
        })
        .Case<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
              arith::ExtUIOp>(
            [&](Operation *op) { return value(op->getOperand(0)); })
        .Case([&](arith::TruncIOp op) -> std::optional<int64_t> {
          std::optional<int64_t> v = value(op.getIn());
          if (v && op.getType().isInteger(1)) {
            return *v & 1;
          }
          return v;
        })
        .Case([&](affine::AffineApplyOp op) -> std::optional<int64_t> {
          SmallVector<Attribute> operands;
          for (Value operand : op.getOperands()) {
            std::optional<int64_t> o = value(operand);
            if (!o) {
              return std::nullopt;
            }
            operands.push_back(IntegerAttr::get(operand.getType(), *o));
          }
          SmallVector<Attribute> results;
          if (failed(op.getAffineMap().constantFold(operands, results)) ||
              results.size() != 1) {
            return std::nullopt;
          }
          return cast<IntegerAttr>(results[0]).getInt();
        })
        .Case([&](memref::LoadOp op) -> std::optional<int64_t> {
          if (op.getIndices().size() != 1) {
            return std::nullopt;
          }
          std::optional<int64_t> i = value(op.getIndices()[0]);
          if (!i) {
            return std::nullopt;
          }
          std::optional<int64_t> stored = element(op.getMemRef(), *i, op);
          // An integer in shared memory that the block's threads may set (the
          // flash attention kernels' "a row saw no key" flag, which sends a
          // causal block over its remaining key tiles): priced clear, the
          // common case.
          auto type = cast<MemRefType>(op.getMemRef().getType());
          if (!stored && !isGlobal(op.getMemRef()) &&
              type.getElementType().isInteger()) {
            return 0;
          }
          return stored;
        })
        .Case([&](memref::DimOp op) -> std::optional<int64_t> {
          std::optional<int64_t> d = value(op.getIndex());
          if (!d) {
            return std::nullopt;
          }
          return size(op.getSource(), *d);
        })
        .Case<gpu::ThreadIdOp, gpu::BlockIdOp, gpu::LaneIdOp>(
            [](Operation *) { return 0; })
        .Case([&](gpu::BlockDimOp op) {
          return block[dimension(op.getDimension())];
        })
        .Case([&](gpu::GridDimOp op) {
          return grid[dimension(op.getDimension())];
        })
        .Default([](Operation *) { return std::nullopt; });
  }
};

/// What one thread of a kernel does.
struct Work {
  double flops = 0, bytes = 0;
  bool tensor = false;
  /// The first loop bound the evaluator could not evaluate (counted once).
  Value unknown;

  double weight() const { return flops + bytes; }
};

/// Floating-point operations of `op`, other than a tensor-core product.
double flopsOf(Operation *op) {
  if (isa<math::FmaOp>(op)) {
    return 2;
  }
  if (isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
          arith::MaximumFOp, arith::MinimumFOp, arith::MaxNumFOp,
          arith::MinNumFOp, arith::NegFOp, arith::CmpFOp>(op)) {
    return 1;
  }
  if (op->getDialect() && isa<math::MathDialect>(op->getDialect())) {
    return 1;
  }
  return 0;
}

double elementBytes(Value memref) {
  Type element = cast<MemRefType>(memref.getType()).getElementType();
  return element.isIntOrFloat()
             ? double((element.getIntOrFloatBitWidth() + 7) / 8)
             : 8;
}

void count(Evaluator &eval, Block &block, double times, Work &work) {
  for (Operation &op : block) {
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      std::optional<int64_t> lb = eval.value(loop.getLowerBound()),
                             ub = eval.value(loop.getUpperBound()),
                             step = eval.value(loop.getStep());
      double trips = 1;
      if (lb && ub && step && *step > 0) {
        trips = *ub > *lb ? double((*ub - *lb + *step - 1) / *step) : 0;
      } else if (!work.unknown) {
        work.unknown = loop.getUpperBound();
      }
      count(eval, *loop.getBody(), times * trips, work);
      continue;
    }
    if (auto branch = dyn_cast<scf::IfOp>(op)) {
      // The larger branch (bounds checks guard the work; else yields 0).
      Work then, other;
      then.unknown = other.unknown = work.unknown;
      count(eval, branch.getThenRegion().front(), times, then);
      if (!branch.getElseRegion().empty()) {
        count(eval, branch.getElseRegion().front(), times, other);
      }
      const Work &larger = then.weight() >= other.weight() ? then : other;
      work.flops += larger.flops;
      work.bytes += larger.bytes;
      work.tensor |= larger.tensor;
      work.unknown = then.unknown ? then.unknown : other.unknown;
      continue;
    }
    if (isa<gpu::AllReduceOp>(op)) {
      // Warp shuffles and a shared-memory step: a few operations a thread.
      work.flops += times * 10;
      continue;
    }
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      if (isGlobal(load.getMemRef())) {
        work.bytes += times * elementBytes(load.getMemRef());
      }
      continue;
    }
    if (auto store = dyn_cast<memref::StoreOp>(op)) {
      if (isGlobal(store.getMemRef())) {
        work.bytes += times * elementBytes(store.getMemRef());
      }
      continue;
    }
    if (auto copy = dyn_cast<nvgpu::DeviceAsyncCopyOp>(op)) {
      // cp.async: the elements it reads from global memory (all of them
      // where the source is counted as inside: an upper bound).
      if (isGlobal(copy.getSrc())) {
        work.bytes += times * double(copy.getDstElements().getZExtValue()) *
                      elementBytes(copy.getSrc());
      }
      continue;
    }
    if (auto mma = dyn_cast<NVVM::MmaOp>(op)) {
      NVVM::MMAShapeAttr shape = mma.getShape();
      // The warp's m x n x k multiply-adds, a 32nd of them per thread.
      work.flops +=
          times * 2.0 * shape.getM() * shape.getN() * shape.getK() / 32;
      work.tensor = true;
      continue;
    }
    work.flops += times * flopsOf(&op);
    for (Region &region : op.getRegions()) {
      for (Block &nested : region) {
        count(eval, nested, times, work);
      }
    }
  }
}

/// Whether `memref` (a view of one) is device memory in host function
/// `func`: a gpu.alloc, or (`resident`: kiln-host-interface{resident}) an
/// argument the caller keeps on the device.
bool onDevice(func::FuncOp func, Value memref, bool resident) {
  Value root = mlir::kiln::viewRoot(memref);
  if (auto arg = dyn_cast<BlockArgument>(root)) {
    return resident && arg.getOwner()->getParentOp() == func &&
           mlir::kiln::isResidentArgument(func, arg.getArgNumber());
  }
  return root.getDefiningOp<gpu::AllocOp>() != nullptr;
}

/// Parses `name=8x256,other=4` into (name, sizes) pairs.
FailureOr<SmallVector<std::pair<std::string, SmallVector<int64_t>>>>
parseSizes(StringRef text) {
  SmallVector<std::pair<std::string, SmallVector<int64_t>>> result;
  SmallVector<StringRef> entries;
  text.split(entries, ',', -1, /*KeepEmpty=*/false);
  for (StringRef entry : entries) {
    auto [name, dims] = entry.trim().split('=');
    if (name.empty() || dims.empty()) {
      return failure();
    }
    SmallVector<int64_t> sizes;
    SmallVector<StringRef> parts;
    dims.split(parts, 'x');
    for (StringRef part : parts) {
      int64_t v = 0;
      if (part.getAsInteger(10, v) || v < 0 || v >= (int64_t(1) << 40)) {
        return failure();
      }
      sizes.push_back(v);
    }
    result.push_back({name.str(), sizes});
  }
  return result;
}

struct KilnGpuCostModel
    : mlir::kiln::impl::KilnGpuCostModelPassBase<KilnGpuCostModel> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    const Device *gpu = llvm::find_if(
        kDevices, [&](const Device &d) { return d.name == device; });
    if (gpu == std::end(kDevices)) {
      module.emitError() << "kiln-gpu-cost-model: no device '" << device
                         << "': use h200, h100 or a100";
      return signalPassFailure();
    }
    FailureOr<SmallVector<std::pair<std::string, SmallVector<int64_t>>>>
        bindings = parseSizes(sizes);
    if (failed(bindings)) {
      module.emitError() << "kiln-gpu-cost-model: sizes '" << sizes
                         << "' are not name=AxB,... with sizes from 0 to 2^40";
      return signalPassFailure();
    }
    SmallVector<NamedAttribute> predictions;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() || func.isPrivate()) {
        continue;
      }
      FailureOr<DictionaryAttr> prediction = predict(func, *gpu, *bindings);
      if (failed(prediction)) {
        return signalPassFailure();
      }
      predictions.push_back(NamedAttribute(func.getSymNameAttr(), *prediction));
    }
    for (const auto &binding : *bindings) {
      if (!used.contains(binding.first)) {
        module.emitError() << "kiln-gpu-cost-model: sizes name '"
                           << binding.first
                           << "', which is no buffer argument of a function "
                              "(kiln.name or number)";
        return signalPassFailure();
      }
    }
    module->setAttr(mlir::kiln::kGpuCostAttr,
                    DictionaryAttr::get(&getContext(), predictions));
  }

  /// The names in `sizes` that named an argument.
  llvm::StringSet<> used;

  FailureOr<DictionaryAttr>
  predict(func::FuncOp func, const Device &gpu,
          ArrayRef<std::pair<std::string, SmallVector<int64_t>>> bindings) {
    Evaluator eval;
    for (BlockArgument arg : func.getArguments()) {
      auto type = dyn_cast<MemRefType>(arg.getType());
      if (!type) {
        continue;
      }
      auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                    mlir::kiln::kNameAttr);
      std::string number = std::to_string(arg.getArgNumber());
      const auto *binding = llvm::find_if(bindings, [&](const auto &b) {
        return b.first == number || (name && b.first == name.getValue());
      });
      if (binding == bindings.end()) {
        continue; // a launch that needs it says so
      }
      used.insert(binding->first);
      if (binding->second.size() != size_t(type.getRank())) {
        func.emitError() << "kiln-gpu-cost-model: sizes of '" << binding->first
                         << "' have " << binding->second.size()
                         << " dimensions, the argument " << type.getRank();
        return failure();
      }
      for (unsigned d = 0; d < type.getRank(); ++d) {
        if (type.isDynamicDim(d)) {
          eval.argumentSizes[{arg, d}] = binding->second[d];
        } else if (type.getDimSize(d) != binding->second[d]) {
          func.emitError() << "kiln-gpu-cost-model: '" << binding->first
                           << "' has size " << type.getDimSize(d)
                           << " in dimension " << d << ", not "
                           << binding->second[d];
          return failure();
        }
      }
    }

    int64_t launches = 0, copies = 0;
    double flops = 0, bytes = 0, kernelSeconds = 0, seconds = 0;
    // Per kernel, in the order of their first launch.
    struct KernelCost {
      int64_t launches = 0;
      double flops = 0, bytes = 0, seconds = 0;
      std::string shape; // of its first launch
      size_t first = 0;  // its place in the order of first launches
    };
    llvm::StringMap<KernelCost> kernels;
    SmallVector<StringRef> order;
    llvm::raw_ostream &os = llvm::outs();
    WalkResult walked = func.walk([&](Operation *op) -> WalkResult {
      if (isa<gpu::MemcpyOp, gpu::LaunchFuncOp>(op) &&
          op->getParentOp() != func) {
        op->emitError() << "kiln-gpu-cost-model: host code that launches or "
                           "copies inside a loop or branch is not counted";
        return WalkResult::interrupt();
      }
      if (auto copy = dyn_cast<gpu::MemcpyOp>(op)) {
        auto type = cast<MemRefType>(copy.getDst().getType());
        double moved = elementBytes(copy.getDst());
        for (unsigned d = 0; d < type.getRank(); ++d) {
          std::optional<int64_t> s = eval.size(copy.getDst(), d);
          if (!s) {
            copy.emitError() << "kiln-gpu-cost-model: the size of this "
                                "copy is unknown at the given argument sizes "
                                "(give every dynamic size in 'sizes')";
            return WalkResult::interrupt();
          }
          moved *= double(*s);
        }
        // Between device buffers: read and written at the device's
        // bandwidth; else over the host link.
        if (onDevice(func, copy.getSrc(), resident) &&
            onDevice(func, copy.getDst(), resident)) {
          seconds += kKernelLatency + 2 * moved / gpu.bandwidth;
          return WalkResult::advance();
        }
        ++copies;
        seconds += kCopyCost + moved / kCopyBandwidth;
        return WalkResult::advance();
      }
      auto launch = dyn_cast<gpu::LaunchFuncOp>(op);
      if (!launch) {
        return WalkResult::advance();
      }
      gpu::KernelDim3 g = launch.getGridSizeOperandValues(),
                      b = launch.getBlockSizeOperandValues();
      Value dims[6] = {g.x, g.y, g.z, b.x, b.y, b.z};
      int64_t values[6];
      for (int i = 0; i < 6; ++i) {
        std::optional<int64_t> v = eval.value(dims[i]);
        if (!v) {
          InFlightDiagnostic error = launch.emitError()
                                     << "kiln-gpu-cost-model: this launch's "
                                        "grid or block is unknown at the "
                                        "given argument sizes (give every "
                                        "dynamic size in 'sizes')";
          if (Value leaf = eval.unknownLeaf(dims[i])) {
            error.attachNote(leaf.getLoc()) << "it depends on " << leaf;
          }
          return WalkResult::interrupt();
        }
        values[i] = *v;
      }
      // CUDA's limits: grids below 2^31 a dimension, blocks of 1024.
      if (llvm::any_of(values,
                       [](int64_t v) { return v >= (int64_t(1) << 31); })) {
        launch.emitError() << "kiln-gpu-cost-model: this launch's grid or "
                              "block is beyond what a GPU launches";
        return WalkResult::interrupt();
      }
      int64_t blocks = values[0] * values[1] * values[2],
              threads = values[3] * values[4] * values[5];
      if (values[0] <= 0 || values[1] <= 0 || values[2] <= 0) {
        return WalkResult::advance(); // not launched (mgpuLaunchKernel)
      }
      if (values[3] <= 0 || values[4] <= 0 || values[5] <= 0) {
        launch.emitError() << "kiln-gpu-cost-model: this launch's block has "
                           << values[3] << "x" << values[4] << "x" << values[5]
                           << " threads";
        return WalkResult::interrupt();
      }
      auto kernel = SymbolTable::lookupNearestSymbolFrom<gpu::GPUFuncOp>(
          launch, launch.getKernel());
      if (!kernel) {
        launch.emitError() << "kiln-gpu-cost-model: no kernel "
                           << launch.getKernel();
        return WalkResult::interrupt();
      }
      Evaluator inKernel;
      inKernel.host = &eval;
      inKernel.grid = {values[0], values[1], values[2]};
      inKernel.block = {values[3], values[4], values[5]};
      for (auto [arg, operand] :
           llvm::zip(kernel.getArguments(), launch.getKernelOperands())) {
        inKernel.aliases[arg] = operand;
      }
      Work work;
      count(inKernel, kernel.getBody().front(), 1, work);
      if (work.unknown) {
        InFlightDiagnostic error = launch.emitError()
                                   << "kiln-gpu-cost-model: a loop bound of "
                                      "kernel "
                                   << launch.getKernel()
                                   << " is unknown at the given sizes";
        if (Value leaf = inKernel.unknownLeaf(work.unknown)) {
          error.attachNote(leaf.getLoc()) << "it depends on " << leaf;
        }
        return WalkResult::interrupt();
      }
      bool tiled = !kernel.getWorkgroupAttributions().empty();
      int64_t perMultiprocessor =
          tiled ? kTiledBlocks
                : std::clamp<int64_t>(kThreadsPerMultiprocessor /
                                          std::max<int64_t>(threads, 1),
                                      1, kMaxBlocks);
      int64_t slots = gpu.multiprocessors * perMultiprocessor;
      int64_t waves = (blocks + slots - 1) / slots;
      double filled = double(blocks) / double(waves * slots);
      double kernelThreads = double(blocks) * double(threads);
      double kernelFlops = kernelThreads * work.flops;
      double kernelBytes = kernelThreads * work.bytes;
      double rate =
          work.tensor ? gpu.tf32 * kTf32Efficiency : gpu.fp32 * kFp32Efficiency;
      // A thread's accesses to global memory, one after another, wave
      // after wave: what bounds a kernel of few threads with long loops.
      double latency = work.bytes / 4 * kAccessLatency * double(waves);
      // Memory: the multiprocessors with a block each share the bandwidth.
      double busy = std::min(1.0, double(blocks) / double(gpu.multiprocessors));
      double time =
          std::max({kernelFlops / (rate * filled),
                    kernelBytes / (gpu.bandwidth * kMemoryEfficiency * busy),
                    latency}) +
          kKernelLatency;
      ++launches;
      flops += kernelFlops;
      bytes += kernelBytes;
      kernelSeconds += time;
      seconds += std::max(time, kLaunchCost);
      // The kernel's module names it uniquely (host code turned into
      // kernels shares the function's name).
      auto [entry, added] = kernels.try_emplace(
          launch.getKernelModuleName().getValue(), KernelCost{});
      KernelCost &k = entry->second;
      if (added) {
        k.first = order.size();
        order.push_back(entry->first());
        llvm::raw_string_ostream shape(k.shape);
        shape << "grid=" << values[0] << "x" << values[1] << "x" << values[2]
              << " block=" << values[3] << "x" << values[4] << "x" << values[5]
              << " filled=" << llvm::format("%.3f", filled)
              << " tensor=" << (work.tensor ? 1 : 0);
      }
      ++k.launches;
      k.flops += kernelFlops;
      k.bytes += kernelBytes;
      k.seconds += time;
      LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": " << launch.getKernelName()
                              << " " << time * 1e6 << " us\n");
      return WalkResult::advance();
    });
    if (walked.wasInterrupted()) {
      return failure();
    }
    Builder b(func.getContext());
    DictionaryAttr prediction = b.getDictionaryAttr({
        b.getNamedAttr("device", b.getStringAttr(gpu.name)),
        b.getNamedAttr("launches", b.getI64IntegerAttr(launches)),
        b.getNamedAttr("copies", b.getI64IntegerAttr(copies)),
        b.getNamedAttr("flops", b.getF64FloatAttr(flops)),
        b.getNamedAttr("bytes", b.getF64FloatAttr(bytes)),
        b.getNamedAttr("kernel_ms", b.getF64FloatAttr(kernelSeconds * 1e3)),
        b.getNamedAttr("ms", b.getF64FloatAttr(seconds * 1e3)),
    });
    if (report) {
      // The kernels that take the most time first.
      llvm::sort(order, [&](StringRef a, StringRef b) {
        const KernelCost &x = kernels[a], &y = kernels[b];
        return x.seconds != y.seconds ? x.seconds > y.seconds
                                      : x.first < y.first;
      });
      for (StringRef name : order) {
        const KernelCost &k = kernels[name];
        os << "COST function=" << func.getName() << " kernel=" << name
           << " launches=" << k.launches
           << " us=" << llvm::format("%.2f", k.seconds * 1e6)
           << " flops=" << llvm::format("%.0f", k.flops)
           << " bytes=" << llvm::format("%.0f", k.bytes) << " " << k.shape
           << "\n";
      }
      os << "COST function=" << func.getName() << " total device=" << gpu.name
         << " launches=" << launches << " copies=" << copies
         << " gflop=" << llvm::format("%.3f", flops * 1e-9)
         << " gbytes=" << llvm::format("%.3f", bytes * 1e-9)
         << " kernel_ms=" << llvm::format("%.3f", kernelSeconds * 1e3)
         << " ms=" << llvm::format("%.3f", seconds * 1e3) << "\n";
      os.flush();
    }
    return prediction;
  }
};

} // namespace
