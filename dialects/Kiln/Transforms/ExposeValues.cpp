//===- ExposeValues.cpp - Return every value a function computes ----------===//
//
// Implements kiln-expose-values.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kiln/IR/KilnDialect.h"
#include "dialects/Kiln/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/Support/Debug.h"
#include "llvm/Support/raw_ostream.h"

#define DEBUG_TYPE "kiln-expose-values"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNEXPOSEVALUESPASS
#include "dialects/Kiln/Transforms/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;

namespace {

/// "file:line:column" of a location (its first file location), or "?".
std::string describe(Location loc) {
  std::string text = "?";
  loc->walk([&](Location inner) {
    if (auto file = dyn_cast<FileLineColLoc>(inner)) {
      text = (file.getFilename().getValue() + ":" + Twine(file.getLine()) +
              ":" + Twine(file.getColumn()))
                 .str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return text;
}

struct KilnExposeValuesPass
    : mlir::kiln::impl::KilnExposeValuesPassBase<KilnExposeValuesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>(function);
    if (!func || func.isExternal()) {
      module.emitError(DEBUG_TYPE ": no function '") << function << "'";
      return signalPassFailure();
    }
    auto *kiln = getContext().getLoadedDialect<mlir::kiln::KilnDialect>();
    SmallVector<std::pair<Value, std::string>> exposed;
    func.walk([&](Operation *op) {
      if (op->getDialect() != kiln) {
        return;
      }
      for (OpResult result : op->getResults()) {
        auto type = dyn_cast<RankedTensorType>(result.getType());
        if (!type || !type.getElementType().isF32()) {
          continue;
        }
        std::string name = "#" + std::to_string(exposed.size()) + ":" +
                           op->getName().getStringRef().str();
        if (op->getNumResults() > 1) {
          name += "." + std::to_string(result.getResultNumber());
        }
        name += "@" + describe(op->getLoc());
        // kiln.name is printable ASCII without spaces.
        for (char &c : name) {
          if (c <= ' ' || c > '~') {
            c = '_';
          }
        }
        exposed.emplace_back(result, std::move(name));
      }
    });
    if (exposed.empty()) {
      return;
    }
    // Values inside regions (none in kiln functions today) cannot be
    // returned from the entry block.
    for (auto &[value, name] : exposed) {
      if (value.getParentRegion() != &func.getBody()) {
        func.emitError(DEBUG_TYPE ": value ")
            << name << " is inside a region; only values of the function's "
            << "body can be returned";
        return signalPassFailure();
      }
    }
    Builder b(&getContext());
    unsigned firstNew = func.getNumResults();
    SmallVector<Type> results(func.getResultTypes());
    for (auto &entry : exposed) {
      results.push_back(entry.first.getType());
    }
    for (Block &block : func.getBody()) {
      auto ret = dyn_cast<func::ReturnOp>(block.getTerminator());
      if (!ret) {
        continue;
      }
      SmallVector<Value> operands(ret.getOperands());
      for (auto &entry : exposed) {
        operands.push_back(entry.first);
      }
      ret->setOperands(operands);
    }
    // The old results keep their attributes; the new ones are named.
    SmallVector<DictionaryAttr> attributes;
    func.getAllResultAttrs(attributes);
    attributes.resize(firstNew);
    for (DictionaryAttr &attribute : attributes) {
      if (!attribute) {
        attribute = b.getDictionaryAttr({});
      }
    }
    for (auto &entry : exposed) {
      attributes.push_back(b.getDictionaryAttr(b.getNamedAttr(
          mlir::kiln::kNameAttr, b.getStringAttr(entry.second))));
    }
    func.setFunctionType(b.getFunctionType(func.getArgumentTypes(), results));
    func.setAllResultAttrs(attributes);
    LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": " << exposed.size()
                            << " values of @" << function << "\n");
  }
};

} // namespace
