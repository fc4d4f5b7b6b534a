// A runtime source that includes MLIR: refused (test/Layering).
#include "mlir/IR/MLIRContext.h"
