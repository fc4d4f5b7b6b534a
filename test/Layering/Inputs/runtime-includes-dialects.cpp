// A runtime source that includes a dialect: refused (test/Layering).
#include "dialects/Kiln/IR/KilnDialect.h"
