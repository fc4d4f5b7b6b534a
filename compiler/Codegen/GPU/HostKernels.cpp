//===- HostKernels.cpp - Kernel modules compiled for the host CPU ---------===//
//
// Implements kiln-gpu-modules-to-host: each gpu.module (lowered to the LLVM
// and NVVM dialects) becomes a gpu.binary holding an ELF object for the host
// CPU, which a CUDA driver that emulates a GPU on the host runs (the fake
// driver of test/Unit/Cuda). The NVVM operations become calls into that
// driver (kiln_emu_*: the contract is written out in FakeDriver.cpp).
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/GPU/HostKernelImage.h"
#include "compiler/Codegen/GPU/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/DataLayoutInterfaces.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#define DEBUG_TYPE "kiln-gpu-modules-to-host"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNGPUMODULESTOHOSTPASS
#include "compiler/Codegen/GPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

using ::kiln::kHostKernelImageMagic;

/// The kernels run in tests, where compiling them costs more than running
/// them: LLVM's O1 and its quicker code generation.
constexpr unsigned kOptLevel = 1;
constexpr llvm::CodeGenOptLevel kCodeGenLevel = llvm::CodeGenOptLevel::Less;

/// The special registers the driver answers, by kiln_emu_sreg's index.
int specialRegister(StringRef name) {
  return llvm::StringSwitch<int>(name)
      .Case("nvvm.read.ptx.sreg.tid.x", 0)
      .Case("nvvm.read.ptx.sreg.tid.y", 1)
      .Case("nvvm.read.ptx.sreg.tid.z", 2)
      .Case("nvvm.read.ptx.sreg.ntid.x", 3)
      .Case("nvvm.read.ptx.sreg.ntid.y", 4)
      .Case("nvvm.read.ptx.sreg.ntid.z", 5)
      .Case("nvvm.read.ptx.sreg.ctaid.x", 6)
      .Case("nvvm.read.ptx.sreg.ctaid.y", 7)
      .Case("nvvm.read.ptx.sreg.ctaid.z", 8)
      .Case("nvvm.read.ptx.sreg.nctaid.x", 9)
      .Case("nvvm.read.ptx.sreg.nctaid.y", 10)
      .Case("nvvm.read.ptx.sreg.nctaid.z", 11)
      .Case("nvvm.read.ptx.sreg.laneid", 12)
      .Case("nvvm.read.ptx.sreg.warpsize", 13)
      .Default(-1);
}

/// Rewrites one gpu.module's NVVM operations into calls to the driver, and
/// gives each kernel its entry.
class Rewriter {
public:
  explicit Rewriter(gpu::GPUModuleOp module)
      : module(module), builder(module.getContext()) {}

  LogicalResult run() {
    SmallVector<Operation *> nvvm;
    module.walk([&](Operation *op) {
      if (isa<NVVM::NVVMDialect>(op->getDialect())) {
        nvvm.push_back(op);
      }
    });
    for (Operation *op : nvvm) {
      if (failed(rewrite(op))) {
        return failure();
      }
    }
    for (auto func :
         llvm::to_vector(module.getBody()->getOps<LLVM::LLVMFuncOp>())) {
      if (func->hasAttr(NVVM::NVVMDialect::getKernelFuncAttrName())) {
        addEntry(func);
      }
    }
    addPoison();
    return success();
  }

private:
  /// The driver's function `name`, declared once.
  LLVM::LLVMFuncOp declare(StringRef name, Type result, TypeRange params) {
    if (auto found = module.lookupSymbol<LLVM::LLVMFuncOp>(name)) {
      return found;
    }
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(module.getBody());
    return LLVM::LLVMFuncOp::create(
        builder, module.getLoc(), name,
        LLVM::LLVMFunctionType::get(result, llvm::to_vector(params)));
  }

  Value call(Location loc, StringRef name, Type result, ValueRange args) {
    LLVM::LLVMFuncOp callee = declare(name, result, args.getTypes());
    auto op = LLVM::CallOp::create(builder, loc, callee, args);
    return isa<LLVM::LLVMVoidType>(result) ? Value() : op.getResult();
  }

  Value i32(Location loc, int64_t value) {
    return LLVM::ConstantOp::create(builder, loc, builder.getI32Type(),
                                    builder.getI32IntegerAttr(value));
  }

  /// An i32 of a 32-bit value's bits.
  Value bits(Location loc, Value v) {
    return v.getType().isInteger(32)
               ? v
               : LLVM::BitcastOp::create(builder, loc, builder.getI32Type(), v)
                     .getResult();
  }

  LogicalResult rewrite(Operation *op) {
    Location loc = op->getLoc();
    builder.setInsertionPoint(op);
    Type i32Type = builder.getI32Type();
    Type voidType = LLVM::LLVMVoidType::get(op->getContext());
    int sreg = specialRegister(op->getName().getStringRef());
    if (sreg >= 0) {
      Value v = call(loc, "kiln_emu_sreg", i32Type, {i32(loc, sreg)});
      op->getResult(0).replaceAllUsesWith(v);
      op->erase();
      return success();
    }
    if (isa<NVVM::Barrier0Op>(op)) {
      call(loc, "kiln_emu_barrier", voidType, {});
      op->erase();
      return success();
    }
    if (auto shfl = dyn_cast<NVVM::ShflOp>(op)) {
      Type valueType = shfl.getVal().getType();
      if (!valueType.isInteger(32) && !valueType.isF32()) {
        return op->emitOpError("has no host emulation for values of type ")
               << valueType;
      }
      // kiln_emu_shfl(kind, mask, bits, offset, clamp) returns the value's
      // bits in its low 32 bits and whether the source lane was valid in
      // bit 32.
      Value packed = call(loc, "kiln_emu_shfl", builder.getI64Type(),
                          {i32(loc, int64_t(shfl.getKind())),
                           shfl.getThreadMask(), bits(loc, shfl.getVal()),
                           shfl.getOffset(), shfl.getMaskAndClamp()});
      Value low = LLVM::TruncOp::create(builder, loc, i32Type, packed);
      Value value = valueType.isF32()
                        ? LLVM::BitcastOp::create(builder, loc, valueType, low)
                              .getResult()
                        : low;
      Value result = value;
      if (shfl.getReturnValueAndIsValid()) {
        Value shift = LLVM::ConstantOp::create(
            builder, loc, builder.getI64Type(), builder.getI64IntegerAttr(32));
        Value high = LLVM::LShrOp::create(builder, loc, packed, shift);
        Value valid =
            LLVM::TruncOp::create(builder, loc, builder.getI1Type(), high);
        Type structType = shfl.getRes().getType();
        result = LLVM::UndefOp::create(builder, loc, structType);
        result = LLVM::InsertValueOp::create(builder, loc, result, value,
                                             ArrayRef<int64_t>{0});
        result = LLVM::InsertValueOp::create(builder, loc, result, valid,
                                             ArrayRef<int64_t>{1});
      }
      shfl.getRes().replaceAllUsesWith(result);
      op->erase();
      return success();
    }
    if (auto cvt = dyn_cast<NVVM::ConvertFloatToTF32Op>(op)) {
      if (cvt.getRnd() != NVVM::FPRoundingMode::RNA || cvt.getRelu() ||
          cvt.getSat() != NVVM::SaturationMode::NONE) {
        return op->emitOpError(
            "has no host emulation but with rounding rna, without relu or "
            "saturation");
      }
      Value v = call(loc, "kiln_emu_cvt_rna_tf32", i32Type, {cvt.getSrc()});
      cvt.getRes().replaceAllUsesWith(v);
      op->erase();
      return success();
    }
    if (auto copy = dyn_cast<NVVM::CpAsyncOp>(op)) {
      // kiln_emu_cp_async(dst, src, bytes, srcBytes): the copy lands at
      // the thread's wait for its group.
      Type ptr = LLVM::LLVMPointerType::get(op->getContext());
      auto generic = [&](Value p) {
        return LLVM::AddrSpaceCastOp::create(builder, loc, ptr, p).getResult();
      };
      Value bytes = i32(loc, copy.getSize());
      call(loc, "kiln_emu_cp_async", voidType,
           {generic(copy.getDst()), generic(copy.getSrc()), bytes,
            copy.getCpSize() ? copy.getCpSize() : bytes});
      op->erase();
      return success();
    }
    if (isa<NVVM::CpAsyncCommitGroupOp>(op)) {
      call(loc, "kiln_emu_cp_async_commit", voidType, {});
      op->erase();
      return success();
    }
    if (auto wait = dyn_cast<NVVM::CpAsyncWaitGroupOp>(op)) {
      call(loc, "kiln_emu_cp_async_wait", voidType, {i32(loc, wait.getN())});
      op->erase();
      return success();
    }
    if (auto mma = dyn_cast<NVVM::MmaOp>(op)) {
      NVVM::MMAShapeAttr shape = mma.getShape();
      std::optional<NVVM::MMATypes> type = mma.getMultiplicandAPtxType();
      bool bf16 = type == NVVM::MMATypes::bf16;
      if (shape.getM() != 16 || shape.getN() != 8 ||
          shape.getK() != (bf16 ? 16 : 8) ||
          (type != NVVM::MMATypes::tf32 && !bf16) ||
          mma.getMultiplicandBPtxType() != type ||
          mma.getLayoutA() != NVVM::MMALayout::row ||
          mma.getLayoutB() != NVVM::MMALayout::col ||
          mma.getOperandA().size() != 4 || mma.getOperandB().size() != 2 ||
          mma.getOperandC().size() != 4 ||
          !mma.getOperandC()[0].getType().isF32()) {
        return op->emitOpError(
            "has no host emulation but for m16n8k8 TF32 and m16n8k16 bf16, A "
            "(row) and B (col), f32 C and D");
      }
      // kiln_emu_mma_m16n8k8_tf32 and kiln_emu_mma_m16n8k16_bf16(d, a0..a3,
      // b0, b1, c0..c3) write the lane's four results to d[0..3].
      Type f32 = builder.getF32Type();
      Type array = LLVM::LLVMArrayType::get(f32, 4);
      Type ptr = LLVM::LLVMPointerType::get(op->getContext());
      Value d;
      {
        OpBuilder::InsertionGuard guard(builder);
        auto func = op->getParentOfType<LLVM::LLVMFuncOp>();
        builder.setInsertionPointToStart(&func.getBody().front());
        d = LLVM::AllocaOp::create(builder, loc, ptr, array, i32(loc, 1));
      }
      SmallVector<Value> args{d};
      llvm::append_range(args, mma.getOperandA());
      llvm::append_range(args, mma.getOperandB());
      llvm::append_range(args, mma.getOperandC());
      call(loc,
           bf16 ? "kiln_emu_mma_m16n8k16_bf16" : "kiln_emu_mma_m16n8k8_tf32",
           voidType, args);
      Value result =
          LLVM::UndefOp::create(builder, loc, mma.getRes().getType());
      for (int64_t i = 0; i < 4; ++i) {
        Value at = LLVM::GEPOp::create(builder, loc, ptr, array, d,
                                       ArrayRef<LLVM::GEPArg>{0, int32_t(i)});
        Value v = LLVM::LoadOp::create(builder, loc, f32, at);
        result = LLVM::InsertValueOp::create(builder, loc, result, v,
                                             ArrayRef<int64_t>{i});
      }
      mma.getRes().replaceAllUsesWith(result);
      op->erase();
      return success();
    }
    return op->emitOpError("has no host emulation "
                           "(kiln-gpu-modules-to-host)");
  }

  /// Renames kernel `func` to `<name>.body` (internal, so that it inlines)
  /// and adds `<name>(void **params)`, which loads each argument from
  /// params[i], turns pointers into host ones (kiln_emu_host_address) and
  /// calls the body.
  void addEntry(LLVM::LLVMFuncOp func) {
    std::string name = func.getName().str();
    Location loc = func.getLoc();
    MLIRContext *ctx = func.getContext();
    func.setName(name + ".body");
    func.setLinkage(LLVM::Linkage::Internal);
    for (NamedAttribute attr : llvm::to_vector(func->getDiscardableAttrs())) {
      StringRef attrName = attr.getName().getValue();
      if (attrName.starts_with("nvvm.") || attrName.starts_with("gpu.")) {
        func->removeAttr(attr.getName());
      }
    }
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    builder.setInsertionPointToEnd(module.getBody());
    auto entry = LLVM::LLVMFuncOp::create(
        builder, loc, name,
        LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {ptr}));
    Block *body = entry.addEntryBlock(builder);
    builder.setInsertionPointToStart(body);
    Value params = body->getArgument(0);
    SmallVector<Value> args;
    for (auto [i, type] : llvm::enumerate(func.getFunctionType().getParams())) {
      Value slot = LLVM::GEPOp::create(builder, loc, ptr, ptr, params,
                                       ArrayRef<LLVM::GEPArg>{int32_t(i)});
      Value at = LLVM::LoadOp::create(builder, loc, ptr, slot);
      Value arg = LLVM::LoadOp::create(builder, loc, type, at);
      if (isa<LLVM::LLVMPointerType>(type)) {
        arg = call(loc, "kiln_emu_host_address", ptr, {arg});
      }
      args.push_back(arg);
    }
    LLVM::CallOp::create(builder, loc, func, args);
    LLVM::ReturnOp::create(builder, loc, ValueRange());
  }

  /// Adds `kiln_emu_poison_shared()`, which fills the module's shared
  /// memory (its address space 3 globals) with 0xff bytes: the driver calls
  /// it before each block, so that a kernel that reads shared memory before
  /// writing it reads NaNs, not the last block's values.
  void addPoison() {
    MLIRContext *ctx = module.getContext();
    Location loc = module.getLoc();
    builder.setInsertionPointToEnd(module.getBody());
    auto poison = LLVM::LLVMFuncOp::create(
        builder, loc, "kiln_emu_poison_shared",
        LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {}));
    Block *body = poison.addEntryBlock(builder);
    builder.setInsertionPointToStart(body);
    DataLayout layout = DataLayout::closest(module);
    Value ones = LLVM::ConstantOp::create(builder, loc, builder.getI8Type(),
                                          builder.getI8IntegerAttr(-1));
    for (auto global : module.getBody()->getOps<LLVM::GlobalOp>()) {
      if (global.getAddrSpace() != 3) {
        continue;
      }
      Value at = LLVM::AddressOfOp::create(builder, loc, global);
      Value bytes = LLVM::ConstantOp::create(
          builder, loc, builder.getI64Type(),
          builder.getI64IntegerAttr(
              int64_t(layout.getTypeSize(global.getGlobalType()))));
      LLVM::MemsetOp::create(builder, loc, at, ones, bytes,
                             /*isVolatile=*/false);
    }
    LLVM::ReturnOp::create(builder, loc, ValueRange());
  }

  gpu::GPUModuleOp module;
  OpBuilder builder;
};

/// This machine's CPU, for host kernels.
FailureOr<std::unique_ptr<llvm::TargetMachine>> hostMachine(Operation *op) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  auto machineBuilder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!machineBuilder) {
    return op->emitError("kiln-gpu-modules-to-host: no target for this "
                         "machine: ")
           << llvm::toString(machineBuilder.takeError());
  }
  machineBuilder->setCodeGenOptLevel(kCodeGenLevel);
  machineBuilder->setRelocationModel(llvm::Reloc::PIC_);
  auto machine = machineBuilder->createTargetMachine();
  if (!machine) {
    return op->emitError("kiln-gpu-modules-to-host: ")
           << llvm::toString(machine.takeError());
  }
  return std::move(*machine);
}

/// The host-kernel image of `module` (rewritten): an object for `machine`
/// behind the image header.
FailureOr<std::string> compile(gpu::GPUModuleOp module,
                               llvm::TargetMachine &machine) {
  // A builtin module holding the kernel module's functions and globals.
  OwningOpRef<ModuleOp> host = ModuleOp::create(module.getLoc());
  OpBuilder builder(host->getBodyRegion());
  for (Operation &op : module.getBody()->getOperations()) {
    builder.clone(op);
  }
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(host.get(), context, module.getName());
  if (!llvmModule) {
    return module.emitError("kiln-gpu-modules-to-host: the kernels do not "
                            "translate to LLVM IR");
  }
  llvmModule->setDataLayout(machine.createDataLayout());
  llvmModule->setTargetTriple(machine.getTargetTriple());
  if (llvm::Error e =
          makeOptimizingTransformer(kOptLevel, 0, &machine)(llvmModule.get())) {
    return module.emitError("kiln-gpu-modules-to-host: ")
           << llvm::toString(std::move(e));
  }
  llvm::SmallString<0> object;
  {
    llvm::raw_svector_ostream os(object);
    llvm::legacy::PassManager passes;
    if (machine.addPassesToEmitFile(passes, os, nullptr,
                                    llvm::CodeGenFileType::ObjectFile)) {
      return module.emitError("kiln-gpu-modules-to-host: this machine's "
                              "target emits no objects");
    }
    passes.run(*llvmModule);
  }
  std::string image(kHostKernelImageMagic, sizeof(kHostKernelImageMagic));
  uint64_t size = object.size();
  for (int i = 0; i < 8; ++i) {
    image.push_back(char((size >> (8 * i)) & 0xff));
  }
  image.append(object.begin(), object.end());
  return image;
}

struct KilnGpuModulesToHostPass
    : mlir::kiln::impl::KilnGpuModulesToHostPassBase<KilnGpuModulesToHostPass> {
  void runOnOperation() override {
    ModuleOp top = getOperation();
    if (top.getBody()->getOps<gpu::GPUModuleOp>().empty()) {
      return;
    }
    FailureOr<std::unique_ptr<llvm::TargetMachine>> machine = hostMachine(top);
    if (failed(machine)) {
      return signalPassFailure();
    }
    for (auto module :
         llvm::to_vector(top.getBody()->getOps<gpu::GPUModuleOp>())) {
      if (failed(Rewriter(module).run())) {
        return signalPassFailure();
      }
      FailureOr<std::string> image = compile(module, **machine);
      if (failed(image)) {
        return signalPassFailure();
      }
      LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": " << module.getName() << ": "
                              << image->size() << " bytes\n");
      // The object keeps the module's target (its architecture) and says
      // what it is in its properties.
      MLIRContext *ctx = module.getContext();
      Attribute target = module.getTargetsAttr()
                             ? module.getTargetsAttr()[0]
                             : Attribute(NVVM::NVVMTargetAttr::get(ctx));
      auto properties = DictionaryAttr::get(
          ctx, {NamedAttribute(StringAttr::get(ctx, "kiln.host_kernels"),
                               UnitAttr::get(ctx))});
      auto object =
          gpu::ObjectAttr::get(ctx, target, gpu::CompilationTarget::Binary,
                               StringAttr::get(ctx, *image), properties,
                               /*kernels=*/nullptr);
      OpBuilder builder(module);
      gpu::BinaryOp::create(builder, module.getLoc(), module.getName(),
                            /*offloadingHandler=*/nullptr,
                            ArrayRef<Attribute>{object});
      module.erase();
    }
  }
};

} // namespace
