/*===- AotAbi.h - The C interface of ahead-of-time compiled models -------===*
 *
 * Every header that kiln-compile generates starts with this block; the Kiln
 * runtime implements the functions. Plain C, so that C and C++ programs can
 * call compiled models.
 *
 *===----------------------------------------------------------------------===*/

#ifndef KILN_AOT_ABI_H
#define KILN_AOT_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types of kiln_tensor.dtype. */
enum { KILN_F32 = 0, KILN_I32 = 1, KILN_I64 = 2, KILN_BOOL = 3, KILN_BF16 = 4 };

#define KILN_MAX_RANK 8

/* A dense, row-major tensor. An i64 scalar argument (a seed, a position) is
 * a rank-0 KILN_I64 tensor. Results are allocated by the compiled code: hand
 * each to kiln_tensor_release() when done (it frees `data`). A result that
 * the header says is written into an argument in place (a training step's
 * parameters and optimizer state) points at that argument's memory, which
 * the call has updated; releasing it frees nothing of the caller's. Such
 * an argument must not share memory with any other. */
typedef struct kiln_tensor {
  void *data;
  int32_t dtype;
  int32_t rank;
  int64_t shape[KILN_MAX_RANK];
  void *owner; /* set on results; NULL on the caller's tensors */
} kiln_tensor;

/* One compiled function: its name, its signature and input contract (text),
 * and its packed entry point. */
typedef struct kiln_function {
  const char *name;
  const char *spec;
  void (*packed)(void **);
} kiln_function;

/* The layout of kiln_model and kiln_function and of their spec text; a
 * runtime refuses a model made for another. */
#define KILN_ABI_VERSION 8

/* A compiled model: its functions and its parameters (text: name, shape and
 * initializer of each), for kiln::AotModule (runtime/Aot.h). */
typedef struct kiln_model {
  int64_t abi_version;
  const char *name;
  const char *params;
  size_t num_functions;
  const kiln_function *functions;
} kiln_model;

/* Checks the arguments against the function's signature and contract and
 * calls it. Returns 0 on success; otherwise nonzero, with `results`
 * untouched and the reason in kiln_last_error(). */
int kiln_call(const kiln_function *function, const kiln_tensor *args,
              size_t num_args, kiln_tensor *results, size_t num_results);

/* The message of the last failed kiln_call on this thread. */
const char *kiln_last_error(void);

/* Frees a result and clears it. Does nothing to the caller's own tensors. */
void kiln_tensor_release(kiln_tensor *tensor);

#ifdef __cplusplus
}
#endif

#endif /* KILN_AOT_ABI_H */
