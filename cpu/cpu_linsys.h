// The CPU backend's linear systems (cholesky, solve, inv, lu_factor, solve_triangular): LAPACK per
// matrix, or kLanes matrices at a time across SIMD lanes where the policy routes small n to the
// portable path; called from the batch loop of cpu_backend.cpp (thread pool, fork gate, provider).
#pragma once
#include <atomic>
#include <cstdint>

#include "backend.h"
#include "lapack.h"
#include "ops.h"

namespace ml::cpu {

// Whether op is one of the linear systems (its info word is LAPACK's: op_table.h's Info::kLapack).
inline bool is_linsys(int32_t op) {
  return valid_op(op) && op_desc(op).info_kind == Info::kLapack;
}

// The LAPACK / BLAS routine op needs that the provider lacks ("spotrf"), or nullptr.
const char *linsys_missing(const lapack::Provider &lp, int32_t op);

// The workspace (floats) of c's LAPACK calls (inv: sgetri's optimal size, at least n); a
// rejected query's info < 0 in *rejected.
int linsys_lwork(const lapack::Provider &lp, const Call &c, int *rejected);

// Matrix i of c: its output and info word (c.info[i] when c.info is set). A matrix with a
// NaN/Inf entry where the op reads, or with LAPACK's info k > 0, gets NaN in every output
// entry and info ML_INFO_LS_NONFINITE or k. A LAPACK info < 0 (an argument it rejected) goes to
// *rejected. May throw std::bad_alloc (scratch).
void linsys_matrix(const lapack::Provider &lp, const Call &c, int64_t i, int lwork,
                   std::atomic<int> &rejected);

// Matrices of a batch factored together, one per SIMD lane (cpu_linsys_lanes.cpp).
constexpr int kLanes = 8;

// Matrices [first, first + kLanes) of c (those below c.batch) across lanes, without LAPACK:
// the same outputs, info words and pivots as linsys_matrix's, the failing matrix all NaN.
// May throw std::bad_alloc (scratch).
void linsys_lanes(const Call &c, int64_t first);

// Frees a worker's scratch beyond what it keeps between matrices.
void linsys_trim_scratch();

// Whether every entry of p[0:count] is finite (false for NaN too), and every entry of the
// row-major triangle of an n x n matrix an op reads: lower (j <= i) or upper (j >= i), without
// the diagonal when !diag. Shared by the LAPACK path and the lanes.
bool finite_all(const float *p, int64_t count);
bool finite_triangle(const float *a, int64_t n, bool lower, bool diag);

}  // namespace ml::cpu
