// What a runtime source may include: base/ and runtime/, and what a program
// linking only the runtime includes (test/Layering).
#include "base/DType.h"
#include "runtime/Tensor.h"
#include <kiln/runtime.h>

static_assert(kiln::dtypeOf<float>() == kiln::DType::f32);
