// A dialect source that includes the compiler: refused (test/Layering).
#include "compiler/DSL/DSL.h"
