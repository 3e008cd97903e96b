// Argument validation shared by every entry point: the backends only ever see
// calls that passed these checks.
#pragma once
#include "backend.h"

namespace ml {

// Checks exec (memory kind, reserved fields), sizes, flags and, when
// c.batch > 0, the pointers. Sets the last error and returns its status on failure.
ml_status check_exec(const char *where, const ml_exec &exec);
ml_status check_call(const char *where, const Call &c);
// Sizes alone (used by queries that take no buffers).
ml_status check_shape(const char *where, int32_t op, int64_t batch, int64_t m, int64_t n);

}  // namespace ml
