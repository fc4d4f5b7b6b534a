/* A C program calling a linear layer compiled with the bf16 precision
 * (x [2, 37, 64] times a weight [96, 64] transposed, plus a bias [96]):
 * 74 rows, two blocks of 32 and an edge of 10, against sums in double
 * within the bf16 products' bound (docs/precision.md#numerics). */
#include "lin.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { B = 2, T = 37, K = 64, N = 96, ROWS = B * T };

static uint32_t state = 12345;
static float uniform(void) { /* in [-1, 1) */
  state = state * 1664525u + 1013904223u;
  return (float)((double)(state >> 8) / (double)(1u << 23) - 1.0);
}

int main(void) {
  static float x[ROWS * K], w[N * K], bias[N];
  for (int i = 0; i < ROWS * K; ++i) {
    x[i] = uniform();
  }
  for (int i = 0; i < N * K; ++i) {
    w[i] = uniform();
  }
  for (int i = 0; i < N; ++i) {
    bias[i] = uniform();
  }
  kiln_tensor args[LIN_LINEAR_NUM_ARGS];
  kiln_tensor results[LIN_LINEAR_NUM_RESULTS];
  memset(args, 0, sizeof args);
  memset(results, 0, sizeof results);
  float *data[3] = {x, w, bias};
  int64_t shapes[3][3] = {{B, T, K}, {N, K, 0}, {N, 0, 0}};
  int ranks[3] = {3, 2, 1};
  for (int a = 0; a < 3; ++a) {
    args[a].data = data[a];
    args[a].dtype = KILN_F32;
    args[a].rank = ranks[a];
    for (int d = 0; d < ranks[a]; ++d) {
      args[a].shape[d] = shapes[a][d];
    }
  }
  if (lin_linear(args, 3, results, 1) != 0) {
    printf("error: %s\n", kiln_last_error());
    return 1;
  }
  const float *y = (const float *)results[0].data;
  /* Each operand rounded to bf16 (2^-8 relative), f32 sums. */
  const double bound = ldexp(1.0, -7) + ldexp(1.0, -16) + (K + 2) * ldexp(1.0, -23);
  int wrong = 0, rounded = 0;
  for (int r = 0; r < ROWS; ++r) {
    for (int n = 0; n < N; ++n) {
      double sum = bias[n], magnitude = fabs(bias[n]) * ldexp(1.0, -23);
      for (int k = 0; k < K; ++k) {
        sum += (double)x[r * K + k] * w[n * K + k];
        magnitude += fabs((double)x[r * K + k] * w[n * K + k]);
      }
      double error = fabs((double)y[r * N + n] - sum);
      wrong += !(error <= bound * magnitude);
      rounded += error > ldexp(1.0, -17) * magnitude;
    }
  }
  printf("%d x %d: %d outside the bf16 bound, %s\n", ROWS, N, wrong,
         rounded > 0 ? "rounded to bf16" : "not rounded");
  kiln_tensor_release(&results[0]);
  return wrong != 0;
}
