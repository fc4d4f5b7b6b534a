//===- Autodiff.cpp - Reverse-mode differentiation of kiln functions ------===//
//
// Implements kiln-autodiff.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kiln/IR/KilnOps.h"
#include "dialects/Kiln/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNAUTODIFFPASS
#include "dialects/Kiln/Transforms/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// Sums gradient contributions per value.
class GradientMap {
public:
  explicit GradientMap(OpBuilder &builder) : builder(builder) {}

  void accumulate(Location loc, Value value, Value gradient) {
    Value &slot = gradients[value];
    slot = slot ? AddOp::create(builder, loc, slot, gradient).getResult()
                : gradient;
  }
  Value lookup(Value value) const { return gradients.lookup(value); }

private:
  OpBuilder &builder;
  DenseMap<Value, Value> gradients;
};

} // namespace

SmallVector<unsigned> mlir::kiln::trainableArguments(func::FuncOp function) {
  SmallVector<unsigned> wrt;
  bool marked = false;
  for (unsigned i = 0; i < function.getNumArguments(); ++i) {
    marked |= bool(function.getArgAttr(i, kKindAttr));
  }
  for (unsigned i = 0; i < function.getNumArguments(); ++i) {
    auto kind = function.getArgAttrOfType<StringAttr>(i, kKindAttr);
    auto type = dyn_cast<RankedTensorType>(function.getArgumentTypes()[i]);
    bool trainable = marked ? kind && symbolizeArgKind(kind.getValue()) ==
                                              ArgKind::param
                            : type && type.getElementType().isF32();
    if (trainable) {
      wrt.push_back(i);
    }
  }
  return wrt;
}

FailureOr<func::FuncOp> mlir::kiln::differentiate(func::FuncOp forward,
                                                  StringRef gradName) {
  auto module = forward->getParentOfType<ModuleOp>();
  auto lossType = forward.getNumResults() >= 1
                      ? dyn_cast<RankedTensorType>(forward.getResultTypes()[0])
                      : RankedTensorType();
  if (!lossType || lossType.getRank() != 0) {
    forward.emitOpError("must return a scalar loss (tensor<f32>) as its "
                        "first result to be differentiated");
    return failure();
  }
  if (module.lookupSymbol(gradName)) {
    forward.emitOpError("cannot be differentiated: '")
        << gradName << "' already exists";
    return failure();
  }

  SmallVector<unsigned> wrt = trainableArguments(forward);
  OpBuilder builder(module.getContext());
  builder.setInsertionPointAfter(forward);
  auto grad = cast<func::FuncOp>(builder.clone(*forward));
  grad.setName(gradName);
  Block &body = grad.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Value loss = ret.getOperand(0);

  builder.setInsertionPoint(ret);
  GradientMap gradients(builder);
  Location loc = ret.getLoc();
  auto one = DenseElementsAttr::get(lossType, builder.getF32FloatAttr(1.0f));
  gradients.accumulate(loc, loss, ConstantOp::create(builder, loc, one));

  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator()) {
    ops.push_back(&op);
  }
  for (Operation *op : llvm::reverse(ops)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value result : op->getResults()) {
      resultGrads.push_back(gradients.lookup(result));
      any |= bool(resultGrads.back());
    }
    if (!any) {
      continue;
    }
    auto differentiable = dyn_cast<GradientOpInterface>(op);
    if (!differentiable) {
      op->emitOpError("cannot be differentiated yet: it has no gradient");
      grad.erase();
      return failure();
    }
    SmallVector<Value> operandGrads;
    if (failed(differentiable.buildGradients(builder, resultGrads,
                                             operandGrads))) {
      grad.erase();
      return failure();
    }
    for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads)) {
      if (g) {
        gradients.accumulate(op->getLoc(), operand, g);
      }
    }
  }

  // Return the loss and the gradient of every trainable argument (zeros
  // for arguments the loss does not depend on).
  SmallVector<Value> results = {loss};
  SmallVector<Type> resultTypes = {lossType};
  for (unsigned i : wrt) {
    BlockArgument arg = body.getArgument(i);
    auto type = cast<RankedTensorType>(arg.getType());
    Value g = gradients.lookup(arg);
    if (!g) {
      if (!type.hasStaticShape()) {
        grad.emitOpError("cannot return a zero gradient of the dynamic "
                         "argument #")
            << i;
        grad.erase();
        return failure();
      }
      auto zero = DenseElementsAttr::get(
          type, builder.getZeroAttr(type.getElementType()));
      g = ConstantOp::create(builder, loc, zero);
    }
    results.push_back(g);
    resultTypes.push_back(g.getType());
  }
  func::ReturnOp::create(builder, loc, results);
  ret.erase();
  grad.setFunctionType(
      builder.getFunctionType(grad.getArgumentTypes(), resultTypes));
  for (auto [k, i] : llvm::enumerate(wrt)) {
    auto name = forward.getArgAttrOfType<StringAttr>(i, kNameAttr);
    std::string label =
        "grad." + (name ? name.str() : "arg" + std::to_string(i));
    grad.setResultAttr(k + 1, kNameAttr, builder.getStringAttr(label));
  }
  return grad;
}

namespace {
struct KilnAutodiffPass : mlir::kiln::impl::KilnAutodiffPassBase<KilnAutodiffPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(function);
    if (!forward || forward.isExternal()) {
      module.emitError("kiln-autodiff: no function '") << function << "'";
      return signalPassFailure();
    }
    if (failed(differentiate(forward, function + "_grad"))) {
      signalPassFailure();
    }
  }
};

} // namespace
