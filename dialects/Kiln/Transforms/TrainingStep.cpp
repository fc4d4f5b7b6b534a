//===- TrainingStep.cpp - One compiled training step ----------------------===//
//
// Implements kiln-training-step.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kiln/IR/KilnOps.h"
#include "dialects/Kiln/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNTRAININGSTEPPASS
#include "dialects/Kiln/Transforms/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {
struct KilnTrainingStepPass
    : kiln::impl::KilnTrainingStepPassBase<KilnTrainingStepPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(function);
    if (!forward || forward.isExternal()) {
      module.emitError("kiln-training-step: no function '") << function << "'";
      return signalPassFailure();
    }
    bool adam = optimizer == "adam" || optimizer == "adamw";
    if (!adam && optimizer != "sgd") {
      module.emitError("kiln-training-step: unknown optimizer '")
          << optimizer << "' (expected adamw, adam or sgd)";
      return signalPassFailure();
    }
    if (module.lookupSymbol("train_step")) {
      module.emitError("kiln-training-step: 'train_step' already exists");
      return signalPassFailure();
    }
    SmallVector<unsigned> params = trainableArguments(forward);
    if (params.empty()) {
      // Nothing to update (arguments marked, none of them "param"): a step
      // would clip and update nothing (kiln-fuzz-ir found the invalid IR).
      bool marked =
          llvm::any_of(llvm::seq(forward.getNumArguments()), [&](unsigned i) {
            return bool(forward.getArgAttr(i, "kiln.kind"));
          });
      forward.emitOpError("has no trainable arguments for kiln-training-step ")
          << (marked ? "(none marked kiln.kind = \"param\")"
                     : "(no f32 tensor argument)");
      return signalPassFailure();
    }
    FailureOr<func::FuncOp> built = differentiate(forward, "train_step");
    if (failed(built)) {
      return signalPassFailure();
    }
    func::FuncOp step = *built;
    MLIRContext *context = &getContext();
    OpBuilder builder(context);
    Block &body = step.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Location loc = ret.getLoc();

    // New arguments: the state of each parameter, then lr and step.
    auto nameOf = [&](unsigned i) {
      auto name = forward.getArgAttrOfType<StringAttr>(i, "kiln.name");
      return name ? name.str() : "arg" + std::to_string(i);
    };
    auto addArgument = [&](Type type, StringRef kind, const std::string &name) {
      unsigned index = step.getNumArguments();
      (void)step.insertArgument(index, type, {}, loc);
      step.setArgAttr(index, "kiln.kind", builder.getStringAttr(kind));
      step.setArgAttr(index, "kiln.name", builder.getStringAttr(name));
      return step.getArgument(index);
    };
    SmallVector<SmallVector<Value>> states;
    for (unsigned i : params) {
      Type type = forward.getArgumentTypes()[i];
      SmallVector<Value> state;
      if (adam) {
        state.push_back(addArgument(type, "state", nameOf(i) + ".m"));
        state.push_back(addArgument(type, "state", nameOf(i) + ".v"));
      } else {
        state.push_back(addArgument(type, "state", nameOf(i) + ".momentum"));
      }
      states.push_back(state);
    }
    auto scalar = RankedTensorType::get({}, builder.getF32Type());
    Value lr = addArgument(scalar, "input", "lr");
    Value stepNumber = addArgument(builder.getI64Type(), "input", "step");
    // A NaN, infinite or negative rate, or a step below 1 (Adam's bias
    // correction divides by 1 - beta^step), would make every parameter NaN:
    // the runtime refuses them before the call.
    step.setArgAttr(cast<BlockArgument>(lr).getArgNumber(), "kiln.require",
                    builder.getStringAttr("finite-nonnegative"));
    step.setArgAttr(cast<BlockArgument>(stepNumber).getArgNumber(),
                    "kiln.require", builder.getStringAttr("positive"));

    // Clip, then update every parameter.
    builder.setInsertionPoint(ret);
    Value loss = ret.getOperand(0);
    SmallVector<Value> grads(ret.getOperands().drop_front());
    if (clipNorm > 0.0) {
      Value factor = GlobalNormScaleOp::create(
          builder, loc, grads, builder.getF64FloatAttr(clipNorm));
      for (Value &g : grads) {
        g = MulOp::create(builder, loc, g, factor);
      }
    }
    SmallVector<Value> newParams, newStates;
    SmallVector<std::string> stateNames;
    // The argument each new state replaces (kiln.updates); a new parameter
    // replaces its own argument.
    SmallVector<unsigned> stateArgs;
    for (auto [k, i] : llvm::enumerate(params)) {
      Value param = body.getArgument(i);
      if (adam) {
        auto update = AdamUpdateOp::create(
            builder, loc, param, grads[k], states[k][0], states[k][1], lr,
            stepNumber, loss, builder.getF64FloatAttr(beta1),
            builder.getF64FloatAttr(beta2), builder.getF64FloatAttr(eps),
            builder.getF64FloatAttr(weightDecay),
            optimizer == "adamw" ? builder.getUnitAttr() : UnitAttr());
        newParams.push_back(update.getNewParam());
        newStates.append({update.getNewM(), update.getNewV()});
        stateNames.append({nameOf(i) + ".m", nameOf(i) + ".v"});
        stateArgs.append({cast<BlockArgument>(states[k][0]).getArgNumber(),
                          cast<BlockArgument>(states[k][1]).getArgNumber()});
      } else {
        auto update =
            SgdUpdateOp::create(builder, loc, param, grads[k], states[k][0], lr,
                                loss, builder.getF64FloatAttr(momentum),
                                builder.getF64FloatAttr(weightDecay));
        newParams.push_back(update.getNewParam());
        newStates.push_back(update.getNewBuf());
        stateNames.push_back(nameOf(i) + ".momentum");
        stateArgs.push_back(cast<BlockArgument>(states[k][0]).getArgNumber());
      }
    }
    SmallVector<Value> results = {loss};
    results.append(newParams);
    results.append(newStates);
    func::ReturnOp::create(builder, loc, results);
    ret.erase();
    SmallVector<Type> resultTypes;
    for (Value v : results) {
      resultTypes.push_back(v.getType());
    }
    step.removeResAttrsAttr(); // the gradient function's result names
    step.setFunctionType(
        builder.getFunctionType(step.getArgumentTypes(), resultTypes));
    // Each new parameter and state names the argument it replaces
    // (kiln.updates): CPU code writes it there in place
    // (kiln-mark-in-place-arguments, kiln-drop-in-place-results), so a step
    // needs no second copy of the parameters and the optimizer state.
    auto updates = [&](unsigned result, unsigned argument) {
      step.setResultAttr(result, "kiln.updates",
                         builder.getI64IntegerAttr(argument));
    };
    for (auto [k, i] : llvm::enumerate(params)) {
      step.setResultAttr(k + 1, "kiln.name",
                         builder.getStringAttr("param." + nameOf(i)));
      updates(k + 1, i);
    }
    for (auto [k, name] : llvm::enumerate(stateNames)) {
      step.setResultAttr(1 + params.size() + k, "kiln.name",
                         builder.getStringAttr("state." + name));
      updates(1 + params.size() + k, stateArgs[k]);
    }
  }
};
} // namespace
