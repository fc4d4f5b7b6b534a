// What a dialect source may include: base/ and dialects/ (test/Layering).
#include "base/DType.h"
#include "dialects/Kiln/IR/ShapeUtils.h"

static_assert(kiln::sizeOf(kiln::DType::i64) == 8);
static_assert(mlir::kiln::shape::kDynamic < 0);
