/* A plain C (and C++) program calling a model compiled by kiln-compile
 * through its generated header only. */
#include "relu2.h"

#include <stdio.h>
#include <string.h>

int main(void) {
  float x[6] = {-1.0f, 0.0f, 1.5f, 2.0f, -3.0f, 4.0f};
  kiln_tensor args[RELU2_DOUBLE_RELU_NUM_ARGS];
  kiln_tensor results[RELU2_DOUBLE_RELU_NUM_RESULTS];
  memset(args, 0, sizeof args);
  memset(results, 0, sizeof results);
  args[0].data = x;
  args[0].dtype = KILN_F32;
  args[0].rank = 2;
  args[0].shape[0] = 2;
  args[0].shape[1] = 3;
  if (relu2_double_relu(args, 1, results, 1) != 0) {
    printf("error: %s\n", kiln_last_error());
    return 1;
  }
  const float *y = (const float *)results[0].data;
  printf("shape %d [%lld, %lld]:", (int)results[0].rank,
         (long long)results[0].shape[0], (long long)results[0].shape[1]);
  for (int i = 0; i < 6; ++i) {
    printf(" %g", y[i]);
  }
  printf("\n");
  kiln_tensor_release(&results[0]);

  /* A wrong static size is refused with a message, not run. */
  args[0].shape[0] = 3;
  args[0].shape[1] = 2;
  if (relu2_double_relu(args, 1, results, 1) == 0) {
    printf("a wrong shape was accepted\n");
    return 1;
  }
  printf("refused: %s\n", kiln_last_error());
  return 0;
}
