//===- TrainingStep.cpp - One compiled training step ----------------------===//
//
// Implements kiln-training-step.
//
//===----------------------------------------------------------------------===//

#include "base/BoundaryNames.h"
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
/// The optimizer half of a step, built into a function's body before its
/// return: the new parameters and state, their names and the arguments they
/// replace (kiln.updates).
struct Updates {
  SmallVector<Value> values;
  SmallVector<std::string> names;
  SmallVector<unsigned> replaces;
};

struct KilnTrainingStepPass
    : mlir::kiln::impl::KilnTrainingStepPassBase<KilnTrainingStepPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(function);
    if (!forward || forward.isExternal()) {
      module.emitError("kiln-training-step: no function '") << function << "'";
      return signalPassFailure();
    }
    if (!adam() && optimizer != "sgd") {
      module.emitError("kiln-training-step: unknown optimizer '")
          << optimizer << "' (expected adamw, adam or sgd)";
      return signalPassFailure();
    }
    for (StringRef name :
         split ? SmallVector<StringRef>{::kiln::steps::kGrad, ::kiln::steps::kUpdate}
               : SmallVector<StringRef>{::kiln::steps::kTrain}) {
      if (module.lookupSymbol(name)) {
        module.emitError("kiln-training-step: '") << name << "' already exists";
        return signalPassFailure();
      }
    }
    SmallVector<unsigned> params = trainableArguments(forward);
    if (params.empty()) {
      // Nothing to update (arguments marked, none of them "param"): a step
      // would clip and update nothing (kiln-fuzz-ir found the invalid IR).
      bool marked =
          llvm::any_of(llvm::seq(forward.getNumArguments()), [&](unsigned i) {
            return bool(forward.getArgAttr(i, kKindAttr));
          });
      forward.emitOpError("has no trainable arguments for kiln-training-step ")
          << (marked ? "(none marked kiln.kind = \"param\")"
                     : "(no f32 tensor argument)");
      return signalPassFailure();
    }
    if (failed(split ? buildSplit(forward, params)
                     : buildFused(forward, params))) {
      return signalPassFailure();
    }
  }

private:
  bool adam() const { return optimizer == "adam" || optimizer == "adamw"; }

  std::string nameOf(func::FuncOp forward, unsigned i) const {
    auto name = forward.getArgAttrOfType<StringAttr>(i, kNameAttr);
    return name ? name.str() : "arg" + std::to_string(i);
  }

  /// Appends an argument of `kind` named `name` to `func`.
  static Value addArgument(func::FuncOp func, Type type, ArgKind kind,
                           StringRef name) {
    Builder b(func.getContext());
    unsigned index = func.getNumArguments();
    (void)func.insertArgument(index, type, {}, func.getLoc());
    func.setArgAttr(index, kKindAttr, b.getStringAttr(stringifyArgKind(kind)));
    func.setArgAttr(index, kNameAttr, b.getStringAttr(name));
    return func.getArgument(index);
  }

  /// Appends the optimizer state of every parameter, then `lr` and `step`.
  /// Returns the state per parameter; `lr` and `step` through the last two.
  SmallVector<SmallVector<Value>>
  addOptimizerArguments(func::FuncOp func, func::FuncOp forward,
                        ArrayRef<unsigned> params, Value &lr,
                        Value &stepNumber) const {
    SmallVector<SmallVector<Value>> states;
    for (unsigned i : params) {
      Type type = forward.getArgumentTypes()[i];
      SmallVector<Value> state;
      std::string name = nameOf(forward, i);
      if (adam()) {
        state.push_back(addArgument(func, type, ArgKind::state, name + ".m"));
        state.push_back(addArgument(func, type, ArgKind::state, name + ".v"));
      } else {
        state.push_back(addArgument(func, type, ArgKind::state, name + ".momentum"));
      }
      states.push_back(state);
    }
    Builder b(func.getContext());
    auto scalar = RankedTensorType::get({}, b.getF32Type());
    lr = addArgument(func, scalar, ArgKind::lr, "lr");
    stepNumber = addArgument(func, b.getI64Type(), ArgKind::step, "step");
    // A NaN, infinite or negative rate, or a step below 1 (Adam's bias
    // correction divides by 1 - beta^step), would make every parameter NaN:
    // the runtime refuses them before the call.
    func.setArgAttr(cast<BlockArgument>(lr).getArgNumber(), kRequireAttr,
                    b.getStringAttr(kRequireFiniteNonnegative));
    func.setArgAttr(cast<BlockArgument>(stepNumber).getArgNumber(),
                    kRequireAttr, b.getStringAttr(kRequirePositive));
    return states;
  }

  /// Clips `grads` (when asked) and updates every parameter, before
  /// `builder`'s insertion point. The updates are guarded by `loss`.
  Updates emitUpdates(OpBuilder &builder, Location loc, func::FuncOp forward,
                      ArrayRef<unsigned> params, ArrayRef<Value> paramValues,
                      SmallVector<Value> grads,
                      ArrayRef<SmallVector<Value>> states, Value lr,
                      Value stepNumber, Value loss) const {
    if (clipNorm > 0.0) {
      Value factor = GlobalNormScaleOp::create(
          builder, loc, grads, builder.getF64FloatAttr(clipNorm));
      for (Value &g : grads) {
        g = MulOp::create(builder, loc, g, factor);
      }
    }
    Updates updates;
    SmallVector<Value> newStates;
    SmallVector<std::string> stateNames;
    SmallVector<unsigned> stateArgs;
    auto argNumber = [](Value v) {
      return cast<BlockArgument>(v).getArgNumber();
    };
    for (auto [k, i] : llvm::enumerate(params)) {
      Value param = paramValues[k];
      std::string name = nameOf(forward, i);
      if (adam()) {
        auto update = AdamUpdateOp::create(
            builder, loc, param, grads[k], states[k][0], states[k][1], lr,
            stepNumber, loss, builder.getF64FloatAttr(beta1),
            builder.getF64FloatAttr(beta2), builder.getF64FloatAttr(eps),
            builder.getF64FloatAttr(weightDecay),
            optimizer == "adamw" ? builder.getUnitAttr() : UnitAttr());
        updates.values.push_back(update.getNewParam());
        newStates.append({update.getNewM(), update.getNewV()});
        stateNames.append({"state." + name + ".m", "state." + name + ".v"});
        stateArgs.append({argNumber(states[k][0]), argNumber(states[k][1])});
      } else {
        auto update =
            SgdUpdateOp::create(builder, loc, param, grads[k], states[k][0], lr,
                                loss, builder.getF64FloatAttr(momentum),
                                builder.getF64FloatAttr(weightDecay));
        updates.values.push_back(update.getNewParam());
        newStates.push_back(update.getNewBuf());
        stateNames.push_back("state." + name + ".momentum");
        stateArgs.push_back(argNumber(states[k][0]));
      }
      updates.names.push_back("param." + name);
      updates.replaces.push_back(argNumber(param));
    }
    updates.values.append(newStates);
    updates.names.append(stateNames);
    updates.replaces.append(stateArgs);
    return updates;
  }

  /// Makes `func` return `leading` then `updates`, each update marked with
  /// its name and the argument it replaces (kiln.updates): CPU code writes it
  /// there in place (kiln-mark-in-place-arguments, kiln-drop-in-place-results),
  /// so a step needs no second copy of the parameters and the optimizer state.
  static void setResults(func::FuncOp func, func::ReturnOp ret,
                         ArrayRef<Value> leading, const Updates &updates) {
    OpBuilder builder(ret);
    SmallVector<Value> results(leading);
    results.append(updates.values);
    func::ReturnOp::create(builder, ret.getLoc(), results);
    ret.erase();
    func.removeResAttrsAttr(); // the gradient function's result names
    func.setFunctionType(builder.getFunctionType(
        func.getArgumentTypes(), ValueRange(results).getTypes()));
    for (auto [k, name] : llvm::enumerate(updates.names)) {
      unsigned r = leading.size() + k;
      func.setResultAttr(r, kNameAttr, builder.getStringAttr(name));
      func.setResultAttr(r, kUpdatesAttr,
                         builder.getI64IntegerAttr(updates.replaces[k]));
    }
  }

  /// train_step: the loss, its gradients and the update in one function.
  LogicalResult buildFused(func::FuncOp forward, ArrayRef<unsigned> params) {
    FailureOr<func::FuncOp> built = differentiate(forward, ::kiln::steps::kTrain);
    if (failed(built)) {
      return failure();
    }
    func::FuncOp step = *built;
    Value lr, stepNumber;
    SmallVector<SmallVector<Value>> states =
        addOptimizerArguments(step, forward, params, lr, stepNumber);
    Block &body = step.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    OpBuilder builder(ret);
    SmallVector<Value> paramValues;
    for (unsigned i : params) {
      paramValues.push_back(body.getArgument(i));
    }
    Value loss = ret.getOperand(0);
    Updates updates =
        emitUpdates(builder, ret.getLoc(), forward, params, paramValues,
                    SmallVector<Value>(ret.getOperands().drop_front()), states,
                    lr, stepNumber, loss);
    setResults(step, ret, {loss}, updates);
    return success();
  }

  /// grad_step (the loss and its gradients, with the loss's token count
  /// recorded) and update_step (clipping and the optimizer on gradients
  /// given as arguments).
  LogicalResult buildSplit(func::FuncOp forward, ArrayRef<unsigned> params) {
    FailureOr<func::FuncOp> grad = differentiate(forward, ::kiln::steps::kGrad);
    if (failed(grad)) {
      return failure();
    }
    recordLossTokens(forward, *grad);

    OpBuilder builder(forward.getContext());
    builder.setInsertionPointAfter(*grad);
    Location loc = forward.getLoc();
    auto update = func::FuncOp::create(builder, loc, ::kiln::steps::kUpdate,
                                       builder.getFunctionType({}, {}));
    Block *body = update.addEntryBlock();
    builder.setInsertionPointToEnd(body);
    auto ret = func::ReturnOp::create(builder, loc);
    SmallVector<Value> paramValues, grads;
    for (unsigned i : params) {
      Type type = forward.getArgumentTypes()[i];
      Value param = addArgument(update, type, ArgKind::param, nameOf(forward, i));
      paramValues.push_back(param);
    }
    for (auto [k, i] : llvm::enumerate(params)) {
      grads.push_back(addArgument(update, forward.getArgumentTypes()[i],
                                  ArgKind::input, "grad." + nameOf(forward, i)));
    }
    Value lr, stepNumber;
    SmallVector<SmallVector<Value>> states =
        addOptimizerArguments(update, forward, params, lr, stepNumber);
    Value loss =
        addArgument(update, RankedTensorType::get({}, builder.getF32Type()),
                    ArgKind::input, "loss");
    builder.setInsertionPoint(ret);
    Updates updates = emitUpdates(builder, loc, forward, params, paramValues,
                                  grads, states, lr, stepNumber, loss);
    setResults(update, ret, {}, updates);
    return success();
  }

  /// When the loss `forward` returns is a cross-entropy or NLL loss (mean
  /// or sum) over targets that are an argument, marks `grad` with that
  /// argument, the ignored id and the reduction: processes training on
  /// shards of a batch then weigh a mean's losses and gradients by their
  /// counts of kept tokens, and add up a sum's.
  static void recordLossTokens(func::FuncOp forward, func::FuncOp grad) {
    Value loss = forward.getBody().front().getTerminator()->getOperand(0);
    Operation *def = loss.getDefiningOp();
    auto record = [&](auto op) {
      auto targets = dyn_cast<BlockArgument>(op.getTargets());
      if (op.getReduction() == LossReduction::none || !targets) {
        return;
      }
      Builder b(grad.getContext());
      SmallVector<NamedAttribute> fields = {
          b.getNamedAttr("arg", b.getI64IntegerAttr(targets.getArgNumber()))};
      if (std::optional<int64_t> ignored = op.getIgnoreIndex()) {
        fields.push_back(
            b.getNamedAttr("ignore_index", b.getI64IntegerAttr(*ignored)));
      }
      if (op.getReduction() == LossReduction::sum) {
        fields.push_back(b.getNamedAttr("reduction", b.getStringAttr("sum")));
      }
      grad->setAttr(kLossTokensAttr, b.getDictionaryAttr(fields));
    };
    if (auto op = dyn_cast_or_null<CrossEntropyOp>(def)) {
      record(op);
    } else if (auto op = dyn_cast_or_null<NLLLossOp>(def)) {
      record(op);
    }
  }
};
} // namespace
