// The CPU backend: LAPACK per matrix (or the portable kernels for small
// matrices), the batch spread over the thread pool, non-finite matrices
// isolated and every matrix scaled by a power of two around the solver.
#pragma once
#include "backend.h"
#include "policy.h"

namespace ml::cpu {

// "cpu:lapack" or "cpu:kernel:<kernel header>", as the policy routes the call.
const char *backend_name(int32_t op, int64_t m, int64_t n, int64_t batch,
                         const policy::Resolved &pol);
// Host buffers, validated arguments, batch > 0.
ml_status run(const Call &c, const policy::Resolved &pol, const char *where);

}  // namespace ml::cpu
