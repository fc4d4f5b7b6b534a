// kiln-precision-check: a GPT's loss and gradients in bf16 against fp32,
// every value within the default budget (exit 0); a budget no bf16 product
// meets names the first value over it (exit 1).
// REQUIRES: avx512bf16
// RUN: kiln-precision-check --layers 1 --batch 2 --seq 16 --gradients | FileCheck %s
// RUN: not kiln-precision-check --layers 1 --batch 2 --seq 16 --budget 1e-6 --floor 0 | FileCheck %s --check-prefix=TIGHT

// CHECK: gpt-tiny (1 layers), batch 2 x 16, bf16, loss and gradients
// CHECK: bf16 against fp32, budget 0.0156
// CHECK: #0:kiln.embedding@
// CHECK: kiln.mha@
// CHECK: kiln.attention_grad
// CHECK: output result0
// CHECK: output grad.wte.weight
// CHECK: every value within 0.0156 of fp32

// The embedding, positions, slices and first layer norm are exact; the
// attention's products are the first rounded.
// TIGHT: 0.000e+00 {{.*}} #0:kiln.embedding@
// TIGHT: kiln.mha@{{.*}}<- first over budget
// TIGHT: first over budget: #{{[0-9]+}}:kiln.mha@
