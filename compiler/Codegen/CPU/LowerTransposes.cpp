//===- LowerTransposes.cpp - Register transposes as x86 shuffles ----------===//
//
// Implements kiln-lower-transposes.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/CPU/Passes.h"
#include "compiler/Codegen/CPU/TargetInfo.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/Transforms.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kiln-lower-transposes"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNLOWERTRANSPOSESPASS
#include "compiler/Codegen/CPU/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

/// Whether `op` transposes a square `n` x `n` f32 vector.
bool isSquareF32Transpose(vector::TransposeOp op, int64_t n) {
  VectorType type = op.getSourceVectorType();
  return type.getShape() == ArrayRef<int64_t>{n, n} &&
         type.getElementType().isF32() && !type.isScalable() &&
         op.getPermutation() == ArrayRef<int64_t>{1, 0};
}

/// The rows of `op`'s source, one vector each.
SmallVector<Value> sourceRows(PatternRewriter &rewriter,
                              vector::TransposeOp op) {
  SmallVector<Value> rows;
  int64_t n = op.getSourceVectorType().getShape()[0];
  for (int64_t i = 0; i < n; ++i) {
    rows.push_back(vector::ExtractOp::create(rewriter, op.getLoc(),
                                             op.getVector(),
                                             ArrayRef<int64_t>{i}));
  }
  return rows;
}

/// Replaces `op` by its result rows `rows`. Rows read one by one (a
/// transfer_write unrolled into 1-D writes) take them directly: a 2-D value
/// built of all of them would be turned back into per-element inserts by
/// the canonicalizer; other uses get them inserted into one.
void replaceByRows(PatternRewriter &rewriter, vector::TransposeOp op,
                   ArrayRef<Value> rows) {
  VectorType type = op.getResultVectorType();
  int64_t n = type.getShape()[0];
  for (Operation *user : llvm::make_early_inc_range(op->getUsers())) {
    auto extract = dyn_cast<vector::ExtractOp>(user);
    if (extract && extract.getNumIndices() == 1 &&
        extract.getDynamicPosition().empty() &&
        extract.getResult().getType() == rows.front().getType() &&
        extract.getStaticPosition()[0] >= 0 &&
        extract.getStaticPosition()[0] < n) {
      rewriter.replaceOp(extract, rows[extract.getStaticPosition()[0]]);
    }
  }
  if (op->use_empty()) {
    rewriter.eraseOp(op);
    return;
  }
  Value result = ub::PoisonOp::create(rewriter, op.getLoc(), type);
  for (int64_t i = 0; i < n; ++i) {
    result = vector::InsertOp::create(rewriter, op.getLoc(), rows[i], result,
                                      ArrayRef<int64_t>{i});
  }
  rewriter.replaceOp(op, result);
}

/// A 16 x 16 f32 transpose as the 64 two-input shuffles of four stages
/// (unpack within 128-bit lanes, shufps, two shuff32x4), the results of
/// the first three stages each passed through an empty inline asm (no
/// instruction) that neither MLIR's folds nor LLVM's can see through.
struct Transpose16x16 : OpRewritePattern<vector::TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(vector::TransposeOp op,
                                PatternRewriter &rewriter) const override {
    if (!isSquareF32Transpose(op, 16)) {
      return failure();
    }
    Location loc = op.getLoc();
    auto row = VectorType::get({16}, rewriter.getF32Type());
    SmallVector<Value> v = sourceRows(rewriter, op);
    auto opaque = [&](SmallVector<Value> &values) {
      for (Value &value : values) {
        value = LLVM::InlineAsmOp::create(
                    rewriter, loc, row, ValueRange{value}, "", "=v,0",
                    /*has_side_effects=*/false, /*is_align_stack=*/false,
                    LLVM::tailcallkind::TailCallKind::None,
                    /*asm_dialect=*/LLVM::AsmDialectAttr(),
                    /*operand_attrs=*/ArrayAttr())
                    .getResult(0);
      }
    };
    // mask(f): for each of the 16 result elements e, f(lane, position in
    // lane) is an index into the two inputs concatenated (16.. = second).
    auto shuffle = [&](Value a, Value b, auto f) {
      SmallVector<int64_t> mask;
      for (int64_t e = 0; e < 16; ++e) {
        mask.push_back(f(e / 4, e % 4));
      }
      return vector::ShuffleOp::create(rewriter, loc, a, b, mask).getResult();
    };
    // unpcklps / unpckhps of rows 2i and 2i + 1 (per 128-bit lane k:
    // a[4k], b[4k], a[4k+1], b[4k+1] and the same of 4k+2, 4k+3).
    SmallVector<Value> t(16);
    for (int64_t i = 0; i < 8; ++i) {
      for (int64_t high = 0; high < 2; ++high) {
        t[2 * i + high] = shuffle(v[2 * i], v[2 * i + 1],
                                  [&](int64_t k, int64_t j) {
                                    return 4 * k + 2 * high + j / 2 +
                                           (j % 2) * 16;
                                  });
      }
    }
    opaque(t);
    // shufps 0x44 / 0xEE of each group of four rows: u[4g + c] holds, in
    // lane k, column 4k + c of rows 4g .. 4g + 3.
    SmallVector<Value> u(16);
    for (int64_t g = 0; g < 4; ++g) {
      for (int64_t c = 0; c < 4; ++c) {
        Value a = t[4 * g + c / 2], b = t[4 * g + 2 + c / 2];
        int64_t half = c % 2;
        u[4 * g + c] = shuffle(a, b, [&](int64_t k, int64_t j) {
          return 4 * k + 2 * half + j % 2 + (j / 2) * 16;
        });
      }
    }
    opaque(u);
    // shuff32x4 0x88 / 0xDD (lanes 0, 2 or 1, 3 of each input) of the
    // column vectors of groups (0, 1) and (2, 3), then of those: row
    // 4k + c of the result is lane k of u[c], u[4 + c], u[8 + c], u[12 + c].
    auto lanes = [&](Value a, Value b, int64_t odd) {
      return shuffle(a, b, [&](int64_t k, int64_t j) {
        return (k / 2) * 16 + 4 * (2 * (k % 2) + odd) + j;
      });
    };
    SmallVector<Value> w(16);
    for (int64_t c = 0; c < 4; ++c) {
      for (int64_t odd = 0; odd < 2; ++odd) {
        w[4 * c + odd] = lanes(u[c], u[4 + c], odd);
        w[4 * c + 2 + odd] = lanes(u[8 + c], u[12 + c], odd);
      }
    }
    opaque(w);
    // Row 4k + c of the result is lane k of w's pairs for c: k = 0, 2 from
    // the even-lane pair (its lanes 0, 2), k = 1, 3 from the odd-lane one.
    SmallVector<Value> rows(16);
    for (int64_t c = 0; c < 4; ++c) {
      for (int64_t k = 0; k < 4; ++k) {
        int64_t odd = k % 2, second = k / 2;
        rows[4 * k + c] = lanes(w[4 * c + odd], w[4 * c + 2 + odd], second);
      }
    }
    replaceByRows(rewriter, op, rows);
    return success();
  }
};

/// An 8 x 8 f32 transpose on AVX2 as x86vector's 8x8 sequence (unpack,
/// shufps, blends as inline asm, vperm2f128): 32 instructions, where the
/// canonicalizer would make the transpose 8 single-element inserts a row.
struct Transpose8x8 : OpRewritePattern<vector::TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(vector::TransposeOp op,
                                PatternRewriter &rewriter) const override {
    if (!isSquareF32Transpose(op, 8)) {
      return failure();
    }
    SmallVector<Value> rows = sourceRows(rewriter, op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    x86vector::avx2::transpose8x8xf32(b, rows);
    replaceByRows(rewriter, op, rows);
    return success();
  }
};

struct KilnLowerTransposesPass
    : mlir::kiln::impl::KilnLowerTransposesPassBase<KilnLowerTransposesPass> {
  using Base::Base;

  void runOnOperation() override {
    FailureOr<mlir::kiln::TargetAttr> target =
        mlir::kiln::cpu::requireTarget(getOperation(), DEBUG_TYPE);
    if (failed(target)) {
      return signalPassFailure();
    }
    mlir::kiln::cpu::TargetInfo info = mlir::kiln::cpu::TargetInfo::of(*target);
    RewritePatternSet patterns(&getContext());
    if (info.vectorWidth() == 16) {
      patterns.add<Transpose16x16>(&getContext());
    } else if (info.vectorWidth() == 8) {
      patterns.add<Transpose8x8>(&getContext());
    } else {
      LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": nothing to do for "
                              << target->getCpu() << "\n");
      return;
    }
    // Only the transposes: no folding of what the patterns create.
    if (failed(applyPatternsGreedily(
            getOperation(), std::move(patterns),
            GreedyRewriteConfig().enableFolding(false)))) {
      return signalPassFailure();
    }
  }
};

} // namespace
