//===- DTypes.cpp - Kiln's tensor element types in MLIR -------------------===//

#include "dialects/Kiln/IR/DTypes.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

Type mlir::kiln::elementTypeOf(MLIRContext *context, ::kiln::DType dtype) {
  switch (dtype) {
  case ::kiln::DType::f32:
    return Float32Type::get(context);
  case ::kiln::DType::i32:
    return IntegerType::get(context, 32);
  case ::kiln::DType::i64:
    return IntegerType::get(context, 64);
  case ::kiln::DType::i1:
    return IntegerType::get(context, 1);
  case ::kiln::DType::bf16:
    return BFloat16Type::get(context);
  }
  llvm_unreachable("unknown kiln::DType");
}

std::optional<::kiln::DType> mlir::kiln::dtypeOf(Type type) {
  if (auto tensor = dyn_cast<RankedTensorType>(type)) {
    type = tensor.getElementType();
  }
  if (type.isF32()) {
    return ::kiln::DType::f32;
  }
  if (type.isBF16()) {
    return ::kiln::DType::bf16;
  }
  if (type.isInteger(1)) {
    return ::kiln::DType::i1;
  }
  if (type.isInteger(32)) {
    return ::kiln::DType::i32;
  }
  if (type.isInteger(64)) {
    return ::kiln::DType::i64;
  }
  return std::nullopt;
}
