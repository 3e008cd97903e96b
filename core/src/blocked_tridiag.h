// The symmetric tridiagonal eigensolver of the blocked algorithms (core/kernels/tridiag_steps.h):
// bisection for the eigenvalues, inverse iteration with per-cluster reorthogonalisation for the
// eigenvectors, or divide and conquer for them from order tridiag_dc_min_n() on, every matrix of a
// chunk in device memory. Used by the blocked eigh / eigvalsh
// (on the tridiagonal of the dense matrix) and svd / svdvals (on the Golub-Kahan tridiagonal of
// the bidiagonal).
#pragma once
#include "blocked_impl.h"

namespace ml::blocked {

// Workspace floats per matrix the solver needs as scratch for order n and `count` wanted values
// (vectors: with eigenvectors).
int64_t tridiag_scratch_floats(int64_t n, int64_t count, bool vectors);

// For every matrix of the chunk: eigenvalues il .. il+count-1 (0-based, ascending order) of the
// symmetric tridiagonal with diagonal d[0..n) (workspace offset d) and off-diagonal e[0..n-1)
// (offset e; e[i] couples i and i+1), into w[0..count) ascending; when z >= 0 also the
// orthonormal eigenvectors, column j of Z (n x count, column-major, leading dimension ldz) for
// w[j]. scratch: offset of tridiag_scratch_floats(...) floats. stat: the stat slot
// (blocked_common.h): ML_INFO_NOT_CONVERGED in stat[2] when a bisection hits its step cap
// (ML_BISECT_DEFAULT_CAP, not reached by finite input; the value is then meaningless). d and e
// are only read. Absolute accuracy: values within a few eps ||T|| (off-diagonals below 8 eps g
// count as 0, g >= ||T||_2 Gershgorin's bound), vectors with residuals of a few eps ||T|| and
// orthogonal to a few n eps. Launches: 2 for values only, 6 with vectors, whatever n (see
// core/kernels/tridiag_steps.h for the work per lane). ML_INVALID_ARGUMENT when il, count or
// ldz do not fit n.
// With vectors from order tridiag_dc_min_n() on, the divide-and-conquer solver below.
ml_status tridiag_eig(const Chunk &ch, const Options &o, int n, int il, int count, int64_t d,
                      int64_t e, int64_t w, int64_t z, int ldz, int64_t scratch, int64_t stat);

// What both solvers start with: the step parameters of order n with operands 0 scratch, 1 d,
// 2 e, 3 stat (the other fields as step_params()), and the tridiag_prep step for them (the
// scaled copies of d and e with negligible couplings zeroed, the scale in the scratch header).
ml_step_params tridiag_params(int n, int64_t scratch, int64_t d, int64_t e, int64_t stat);
ml_status tridiag_prep(const Chunk &ch, const Options &o, const ml_step_params &p);

// Order from which tridiag_eig computes eigenvectors by divide and conquer: kTridiagDcMinN,
// or the environment variable METAL_LINALG_TRIDIAG_DC_MIN_N when set (0: never; read once),
// see docs/routing.md.
int tridiag_dc_min_n();

// Divide and conquer (core/kernels/tridiag_dc.h, blocked_tridiag_dc.cpp): the whole spectrum
// and eigenvectors of every matrix of the chunk, then values il .. il+count-1 and their
// vectors selected into w and Z; arguments as tridiag_eig (z >= 0; w < 0: no values written),
// scratch of tridiag_dc_scratch_floats(n) floats. tridiag_eig takes the values from bisection
// instead (the same values as without vectors, bit for bit; with Options::dc_values from here
// too) and the vectors from here. Orthogonal to a few n eps whatever the clustering;
// ML_INFO_NOT_CONVERGED in stat[2] when a leaf's QL hits its cap. Launches: 3 plus, per
// level (ceil(log2(n / 32)) of them), 4 steps and 2 products per merge (one for all full
// merges of a single matrix).
int64_t tridiag_dc_scratch_floats(int64_t n);
ml_status tridiag_eig_dc(const Chunk &ch, const Options &o, int n, int il, int count, int64_t d,
                         int64_t e, int64_t w, int64_t z, int ldz, int64_t scratch,
                         int64_t stat);

}  // namespace ml::blocked
