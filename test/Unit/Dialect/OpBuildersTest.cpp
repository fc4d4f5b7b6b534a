//===- OpBuildersTest.cpp - Building kiln ops from C++ --------------------===//
//
// The DSL builds ops without spelling result types and relies on the
// verifiers for shape errors: check both from the C++ builders.
//
//===----------------------------------------------------------------------===//

#include "compiler/InitAll.h"
#include "dialects/Kiln/IR/KilnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::kiln;

namespace {
constexpr int64_t kDyn = ShapedType::kDynamic;

class OpBuildersTest : public ::testing::Test {
protected:
  OpBuildersTest() : builder(&context) {
    DialectRegistry registry;
    ::kiln::registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
    module = ModuleOp::create(builder.getUnknownLoc());
    builder.setInsertionPointToEnd(module->getBody());
  }

  /// Creates a function with arguments of `types` and returns them.
  Block::BlockArgListType arguments(ArrayRef<Type> types) {
    auto func = func::FuncOp::create(builder, builder.getUnknownLoc(), "f",
                                     builder.getFunctionType(types, {}));
    Block *body = func.addEntryBlock();
    builder.setInsertionPointToEnd(body);
    return body->getArguments();
  }

  RankedTensorType f32(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, builder.getF32Type());
  }
  RankedTensorType i64(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, builder.getI64Type());
  }

  /// Verifies `op` and returns the first error message ("" if it verifies).
  std::string verifyMessage(Operation *op) {
    std::string message;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      if (message.empty()) {
        message = diag.str();
      }
      return success();
    });
    (void)mlir::verify(op);
    return message;
  }

  MLIRContext context;
  OpBuilder builder;
  OwningOpRef<ModuleOp> module;
};
} // namespace

TEST_F(OpBuildersTest, LinearInfersOutputWidthWithDynamicBatch) {
  auto args = arguments({f32({kDyn, kDyn, 128}), f32({384, 128}), f32({384})});
  auto op = LinearOp::create(builder, builder.getUnknownLoc(), args[0], args[1],
                             args[2]);
  EXPECT_EQ(op.getType(), f32({kDyn, kDyn, 384}));
  EXPECT_EQ(verifyMessage(op), "");
}

TEST_F(OpBuildersTest, LinearReportsWidthMismatch) {
  auto args = arguments({f32({kDyn, 100}), f32({384, 128})});
  auto op = LinearOp::create(builder, builder.getUnknownLoc(), args[0], args[1],
                             Value());
  EXPECT_EQ(verifyMessage(op),
            "'kiln.linear' op expects 'weight' to be [out_features, "
            "in_features] = [384, 100], got [384, 128]");
}

TEST_F(OpBuildersTest, EmbeddingAppendsTableWidth) {
  auto args = arguments({i64({kDyn, kDyn}), f32({65, 33})});
  auto op = EmbeddingOp::create(builder, builder.getUnknownLoc(), args[0],
                                args[1], builder.getI64IntegerAttr(0));
  EXPECT_EQ(op.getType(), f32({kDyn, kDyn, 33}));
  EXPECT_EQ(verifyMessage(op), "");
}

TEST_F(OpBuildersTest, AttentionHeadsMustDivideWidth) {
  auto x = f32({kDyn, kDyn, 128});
  auto w = f32({128, 128});
  auto args = arguments({x, w});
  auto op = MultiHeadAttentionOp::create(
      builder, builder.getUnknownLoc(), args[0], args[0], args[1], args[1],
      args[1], args[1], Value(), Value(), Value(), Value(), Value(), Value(),
      /*num_heads=*/6, /*causal=*/true, /*dropout=*/llvm::APFloat(0.0));
  EXPECT_EQ(op.getType(), x);
  EXPECT_EQ(verifyMessage(op), "'kiln.mha' op expects 'num_heads' (6) to "
                               "divide the model dimension (128)");
}

TEST_F(OpBuildersTest, ReshapeAndTransposeSplitHeads) {
  auto args = arguments({f32({kDyn, kDyn, 512})});
  auto split = ReshapeOp::create(builder, builder.getUnknownLoc(), args[0],
                                 ArrayRef<int64_t>{0, 0, 8, 64});
  EXPECT_EQ(split.getType(), f32({kDyn, kDyn, 8, 64}));
  auto heads = TransposeOp::create(builder, builder.getUnknownLoc(), split,
                                   ArrayRef<int64_t>{0, 2, 1, 3});
  EXPECT_EQ(heads.getType(), f32({kDyn, 8, kDyn, 64}));
  EXPECT_EQ(verifyMessage(heads), "");
}

TEST_F(OpBuildersTest, LossReductionDecidesResultRank) {
  auto args = arguments({f32({kDyn, kDyn, 65}), i64({kDyn, kDyn})});
  auto mean = CrossEntropyOp::create(builder, builder.getUnknownLoc(), args[0],
                                     args[1], IntegerAttr(), llvm::APFloat(0.0),
                                     LossReduction::mean);
  EXPECT_EQ(mean.getType(), f32({}));
  auto none =
      NLLLossOp::create(builder, builder.getUnknownLoc(), args[0], args[1],
                        IntegerAttr(), llvm::APFloat(0.1), LossReduction::none);
  EXPECT_EQ(none.getType(), f32({kDyn, kDyn}));
  EXPECT_EQ(verifyMessage(none), "");
}

TEST_F(OpBuildersTest, BroadcastClashIsAVerifierError) {
  auto args = arguments({f32({2, 3}), f32({4})});
  auto op = AddOp::create(builder, builder.getUnknownLoc(), args[0], args[1]);
  EXPECT_EQ(op.getType(), f32({2, kDyn}));
  EXPECT_EQ(verifyMessage(op),
            "'kiln.add' op expects broadcast-compatible operands: shapes "
            "[2, 3] and [4] do not broadcast: size 3 vs 4 at dimension 1 of "
            "the result");
}
