// Argument validation shared by every entry point: the backends only ever see
// calls that passed these checks.
#pragma once
#include "backend.h"

namespace ml {

// Checks exec (memory kind, reserved fields), sizes, flags and, when
// c.batch > 0, the pointers. Sets the last error and returns its status on failure.
ml_status check_exec(const char *where, const ml_exec &exec);
ml_status check_call(const char *where, const Call &c);
// The flag argument of op for m x n (its kind's values; a square-only value).
ml_status check_flags(const char *where, int32_t op, int64_t m, int64_t n, int32_t flags);
// Sizes alone (used by queries that take no buffers); flags as for the call
// (the default, 0, is qr's reduced mode, the smallest); nrhs: the right-hand side's
// columns of the ops with two inputs (queries without one: 1).
ml_status check_shape(const char *where, int32_t op, int64_t batch, int64_t m, int64_t n,
                      int32_t flags = 0, int64_t nrhs = 1);

// What the CPU backend hands 32-bit LAPACK for one matrix of op: the largest array
// (elements) and the documented minimum workspace (floats), in 64-bit.
struct LapackSizes {
  int64_t array;
  const char *array_what;
  int64_t min_lwork;
};
LapackSizes lapack_sizes(int32_t op, int32_t flags, int64_t m, int64_t n, int64_t nrhs = 1);
// Rejects sizes whose arrays or workspace 32-bit LAPACK cannot address.
ml_status check_lapack_sizes(const char *where, int32_t op, int32_t flags, int64_t m, int64_t n,
                             int64_t nrhs = 1);

}  // namespace ml
