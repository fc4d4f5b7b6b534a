// kiln-opt registers the kiln dialect beside the dialects it lowers to, and
// every kiln pass.
// RUN: kiln-opt --show-dialects | FileCheck %s --check-prefix=DIALECTS
// RUN: kiln-opt --help | FileCheck %s --check-prefix=PASSES

// DIALECTS: Available Dialects:
// DIALECTS-SAME: arith
// DIALECTS-SAME: func
// DIALECTS-SAME: kiln
// DIALECTS-SAME: linalg
// DIALECTS-SAME: math
// DIALECTS-SAME: tensor

// PASSES: --kiln-strip-dropout
