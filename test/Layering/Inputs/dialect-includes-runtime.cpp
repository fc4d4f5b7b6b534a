// A dialect source that includes the runtime: refused (test/Layering).
#include "runtime/Tensor.h"
