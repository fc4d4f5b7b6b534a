//===- ConvertVectorToLLVM.cpp - Vectors to LLVM for the target -----------===//
//
// Implements kiln-convert-vector-to-llvm.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/Passes.h"
#include "compiler/Codegen/CPU/TargetInfo.h"

#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/AMX/Transforms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kiln-convert-vector-to-llvm"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNCONVERTVECTORTOLLVMPASS
#include "compiler/Codegen/CPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

/// MLIR's convert-vector-to-llvm with outer-product contractions and
/// `transposes`; `x86` lowers x86vector ops (kiln-bf16-products' dots) to
/// their intrinsics.
std::unique_ptr<Pass> vectorToLLVM(vector::VectorTransposeLowering transposes,
                                   bool x86 = false) {
  return createConvertVectorToLLVMPass(
      {.x86Vector = x86,
       .vectorContractLowering = vector::VectorContractLowering::OuterProduct,
       .vectorTransposeLowering = transposes});
}

/// Whether a transfer moves a 0-d vector, unmasked, from or to a memref.
template <typename TransferOp>
bool isScalarOnMemref(TransferOp op) {
  return op.getVectorType().getRank() == 0 && !op.getMask() &&
         isa<MemRefType>(op.getBase().getType());
}

/// A 0-d transfer_read from a memref (a single element at its indices, which
/// fold-memref-alias-ops leaves on the underlying view of a rank-0
/// subview) becomes a memref.load and a broadcast: convert-vector-to-llvm
/// lowers transfers only where the innermost stride is 1.
struct ScalarTransferRead : OpRewritePattern<vector::TransferReadOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(vector::TransferReadOp op,
                                PatternRewriter &rewriter) const override {
    if (!isScalarOnMemref(op)) {
      return failure();
    }
    Value element = memref::LoadOp::create(rewriter, op.getLoc(), op.getBase(),
                                           op.getIndices());
    rewriter.replaceOpWithNewOp<vector::BroadcastOp>(op, op.getVectorType(),
                                                     element);
    return success();
  }
};

/// A 0-d transfer_write to a memref becomes an extract and a memref.store.
struct ScalarTransferWrite : OpRewritePattern<vector::TransferWriteOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(vector::TransferWriteOp op,
                                PatternRewriter &rewriter) const override {
    if (!isScalarOnMemref(op)) {
      return failure();
    }
    Value element = vector::ExtractOp::create(
        rewriter, op.getLoc(), op.getVector(), ArrayRef<int64_t>{});
    rewriter.replaceOpWithNewOp<memref::StoreOp>(op, element, op.getBase(),
                                                 op.getIndices());
    return success();
  }
};

struct KilnConvertVectorToLLVMPass
    : mlir::kiln::impl::KilnConvertVectorToLLVMPassBase<
          KilnConvertVectorToLLVMPass> {
  using Base::Base;

  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    vectorToLLVM(vector::VectorTransposeLowering::Shuffle1D, /*x86=*/true)
        ->getDependentDialects(registry);
  }

  /// AMX's tile ops to their intrinsics on LLVM's x86_amx values, with the
  /// branches that carry tiles (the sums of a loop over k) and their
  /// blocks: convert-vector-to-llvm's AMX patterns alone leave such
  /// branches unconvertible.
  LogicalResult lowerTiles() {
    MLIRContext *context = &getContext();
    LLVMTypeConverter converter(context);
    RewritePatternSet patterns(context);
    populateAMXLegalizeForLLVMExportPatterns(converter, patterns);
    cf::populateControlFlowToLLVMConversionPatterns(converter, patterns);
    LLVMConversionTarget target(*context);
    configureAMXLegalizeForExportTarget(target);
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    target.addDynamicallyLegalDialect<cf::ControlFlowDialect>(
        [](Operation *op) {
          return llvm::none_of(op->getOperandTypes(), [](Type type) {
            return isa<amx::TileType>(type);
          });
        });
    return applyPartialConversion(getOperation(), target, std::move(patterns));
  }

  void runOnOperation() override {
    FailureOr<mlir::kiln::TargetAttr> target =
        mlir::kiln::cpu::requireTarget(getOperation(), DEBUG_TYPE);
    if (failed(target)) {
      return signalPassFailure();
    }
    mlir::kiln::cpu::TargetInfo info = mlir::kiln::cpu::TargetInfo::of(*target);
    bool wide = info.vectorWidth() == 16;
    LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": transposes as "
                            << (wide ? "16x16 shuffles" : "1-D shuffles")
                            << " for " << target->getCpu() << "\n");
    RewritePatternSet prelude(&getContext());
    prelude.add<ScalarTransferRead, ScalarTransferWrite>(&getContext());
    // bf16 conversions (kiln.cast's): vcvtneps2bf16 where the target has
    // AVX512-BF16; elsewhere integer arithmetic (round to nearest even), not
    // LLVM's calls to __truncsfbf2 per element.
    if (!info.avx512bf16) {
      arith::populateExpandBFloat16Patterns(prelude);
    }
    if (failed(applyPatternsGreedily(getOperation(), std::move(prelude)))) {
      return signalPassFailure();
    }
    // x86vector's and AMX's patterns only where their ops are (bf16
    // products).
    auto uses = [&](auto isDialect) {
      return getOperation()
          ->walk([&](Operation *op) {
            return isDialect(op->getDialect()) ? WalkResult::interrupt()
                                               : WalkResult::advance();
          })
          .wasInterrupted();
    };
    bool x86 =
        uses([](Dialect *d) { return isa<x86vector::X86VectorDialect>(d); });
    if (uses([](Dialect *d) { return isa<amx::AMXDialect>(d); }) &&
        failed(lowerTiles())) {
      return signalPassFailure();
    }
    OpPassManager pm(ModuleOp::getOperationName());
    pm.addPass(vectorToLLVM(wide ? vector::VectorTransposeLowering::Shuffle16x16
                                 : vector::VectorTransposeLowering::Shuffle1D,
                            x86));
    if (failed(runPipeline(pm, getOperation()))) {
      return signalPassFailure();
    }
  }
};

} // namespace
