/* Calls the mean cross-entropy gradient of Inputs/loss-grad.mlir on zero
 * logits (softmax 1/5 everywhere), targets 0 and an upstream gradient of 1:
 * d/dx = (1/5 - onehot) / 16, so -0.05 at each target and 0.0125 elsewhere.
 * Counts the elements within 1e-6 of each. */
#include "lossgrad.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  float x[80], g = 1.0f;
  long long t[16];
  memset(x, 0, sizeof x);
  memset(t, 0, sizeof t);
  kiln_tensor args[3];
  kiln_tensor results[1];
  memset(args, 0, sizeof args);
  memset(results, 0, sizeof results);
  args[0].data = x;
  args[0].dtype = KILN_F32;
  args[0].rank = 3;
  args[0].shape[0] = 1;
  args[0].shape[1] = 16;
  args[0].shape[2] = 5;
  args[1].data = t;
  args[1].dtype = KILN_I64;
  args[1].rank = 2;
  args[1].shape[0] = 1;
  args[1].shape[1] = 16;
  args[2].data = &g;
  args[2].dtype = KILN_F32;
  args[2].rank = 0;
  if (lossgrad_grad(args, 3, results, 1) != 0) {
    printf("error: %s\n", kiln_last_error());
    return 1;
  }
  const float *d = (const float *)results[0].data;
  int targets = 0, others = 0, wrong = 0;
  for (int i = 0; i < 80; ++i) {
    if (i % 5 == 0 && fabsf(d[i] + 0.05f) <= 1e-6f) {
      ++targets;
    } else if (i % 5 != 0 && fabsf(d[i] - 0.0125f) <= 1e-6f) {
      ++others;
    } else {
      if (++wrong <= 3) {
        printf("element %d: %g\n", i, d[i]);
      }
    }
  }
  printf("targets -0.05: %d, others 0.0125: %d, wrong: %d\n", targets, others,
         wrong);
  kiln_tensor_release(&results[0]);
  return wrong != 0;
}
