// kiln-precision-check refuses, with the reason and exit status 2, what it
// cannot check: a CPU without AVX512-BF16, a budget that is no relative
// error, an unknown model or option.
// RUN: not kiln-precision-check --cpu x86-64-v3 --layers 1 --batch 1 --seq 4 2>&1 | FileCheck %s --check-prefix=V3
// RUN: not kiln-precision-check --budget 2 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: not kiln-precision-check --floor x 2>&1 | FileCheck %s --check-prefix=FLOOR
// RUN: not kiln-precision-check --model gpt-huge 2>&1 | FileCheck %s --check-prefix=MODEL
// RUN: not kiln-precision-check --seq 0 2>&1 | FileCheck %s --check-prefix=SEQ
// RUN: not kiln-precision-check --frobnicate 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: kiln-precision-check --help | FileCheck %s --check-prefix=HELP

// V3: kiln-precision-check: kiln: precision bf16 needs a CPU with AVX512-BF16 {{.*}}'x86-64-v3'
// BUDGET: kiln-precision-check: kiln: checkPrecision: the budget 2 is not in (0, 1]
// FLOOR: kiln-precision-check: --floor: 'x' is not a number
// MODEL: kiln-precision-check: --model: 'gpt-huge' is not gpt-tiny or gpt-small
// SEQ: kiln-precision-check: --seq: '0' is not a count from 1 to 65536
// OPTION: kiln-precision-check: unknown option '--frobnicate'
// HELP: usage: kiln-precision-check [options]
