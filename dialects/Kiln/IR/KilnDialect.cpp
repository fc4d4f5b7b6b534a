//===- KilnDialect.cpp - The kiln dialect ---------------------------------===//
//
// Registers the kiln operations and attributes.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kiln/IR/KilnDialect.h"
#include "dialects/Kiln/IR/KilnOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::kiln;

#include "dialects/Kiln/IR/KilnInterfaces.cpp.inc"
#include "dialects/Kiln/IR/KilnOpsDialect.cpp.inc"
#include "dialects/Kiln/IR/KilnOpsEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Kiln/IR/KilnOpsAttributes.cpp.inc"

void KilnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Kiln/IR/KilnOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/Kiln/IR/KilnOpsAttributes.cpp.inc"
      >();
}

Operation *KilnDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type) {
    return nullptr;
  }
  return ConstantOp::create(builder, loc, elements);
}
