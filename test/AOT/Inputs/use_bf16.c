/* A C program passing bf16 tensors (KILN_BF16: the upper 16 bits of an
 * f32) to a model compiled by kiln-compile, and reading a bf16 result. */
#include "twice.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  /* 1, -2.5, 0.5, 3, 0, -1 */
  uint16_t x[6] = {0x3F80, 0xC020, 0x3F00, 0x4040, 0x0000, 0xBF80};
  kiln_tensor args[TWICE_TWICE_NUM_ARGS];
  kiln_tensor results[TWICE_TWICE_NUM_RESULTS];
  memset(args, 0, sizeof args);
  memset(results, 0, sizeof results);
  args[0].data = x;
  args[0].dtype = KILN_BF16;
  args[0].rank = 2;
  args[0].shape[0] = 2;
  args[0].shape[1] = 3;
  if (twice_twice(args, 1, results, 1) != 0) {
    printf("error: %s\n", kiln_last_error());
    return 1;
  }
  const uint16_t *y = (const uint16_t *)results[0].data;
  printf("dtype %s:", results[0].dtype == KILN_BF16 ? "bf16" : "other");
  for (int i = 0; i < 6; ++i) {
    printf(" %04x", y[i]);
  }
  printf("\n");
  kiln_tensor_release(&results[0]);

  /* f32 elements where bf16 ones belong are refused, not read. */
  args[0].dtype = KILN_F32;
  if (twice_twice(args, 1, results, 1) == 0) {
    printf("an f32 tensor was accepted\n");
    return 1;
  }
  printf("refused: %s\n", kiln_last_error());
  return 0;
}
