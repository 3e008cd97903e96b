/* The C tests' check: a condition that does not hold counts in g_failures and prints where,
 * the message (printf arguments) and the condition; g_checks counts every check. */
#ifndef ML_TESTS_C_CHECK_H
#define ML_TESTS_C_CHECK_H

#include <stdio.h>

#include "metal_linalg/metal_linalg.h"

static int g_failures = 0;
static int g_checks = 0;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    ++g_checks;                                            \
    if (!(cond)) {                                         \
      ++g_failures;                                        \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, "  [%s]\n", #cond);                  \
    }                                                      \
  } while (0)

/* Whether every one of count floats is NaN. */
static inline int all_nan(const float *p, long long count) {
  long long i;
  for (i = 0; i < count; ++i)
    if (!(p[i] != p[i])) return 0;
  return 1;
}

/* The fake-LAPACK tests' setup: count floats of a fixed pattern in [-1, 1] into a, and every op
 * on LAPACK at every size (no CPU kernel). */
static inline void fake_lapack_setup(float *a, int count) {
  int i, op;
  for (i = 0; i < count; ++i) a[i] = (float)((i * 7919) % 101) / 50.0f - 1.0f;
  for (op = 0; op < ML_OP_COUNT; ++op)
    CHECK(ml_policy_set(op, "cpu_kernel_max_n", 0) == ML_OK, "policy: %s\n", ml_last_error());
}

#endif
