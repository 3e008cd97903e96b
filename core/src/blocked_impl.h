// Internals shared by the blocked algorithms' sequencing files (blocked_<op>.cpp): the
// workspace slice builder, the launch helper of a chunk of matrices and the matrix product.
// Compiled with the kernels' host helpers (ML_CPU_SERIAL dialect) in view.
#pragma once
#define ML_CPU_SERIAL 1
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "../kernels/compat_cpu.h"
#include "../kernels/steps.h"
#include "blocked.h"

namespace ml::blocked {

inline int64_t round32(int64_t f) { return (f + 31) / 32 * 32; }

// An integer setting from the environment when set and not empty (the measurement overrides of
// Options fields, e.g. METAL_LINALG_TRD_RES_GROUPS), else v. Read on each call.
inline int env_or(const char *name, int v) {
  const char *s = std::getenv(name);
  return s && *s ? std::atoi(s) : v;
}

// Regions of one matrix's workspace slice, in floats from the slice start, each rounded to
// 32 floats (128 bytes).
struct Slice {
  int64_t floats = 0;
  int64_t add(int64_t f) {
    const int64_t at = floats;
    floats += round32(std::max<int64_t>(f, 1));
    return at;
  }
};

// A chunk of `batch` matrices starting at call matrix `first`, each with a workspace slice of
// `stride` floats. launch() fills what every step of the chunk shares: batch, groups, first,
// and each operand's stride when left 0 (the slice size: operands of one matrix's slice).
struct Chunk {
  Runner &r;
  int64_t first = 0, batch = 0, stride = 0;
  ml_status launch(int32_t step, int64_t groups, int gs, int shared, ml_step_params p) const;
};

// Zeroed step parameters.
inline ml_step_params step_params() {
  ml_step_params p{};
  return p;
}

// 32 x 32 tiles of an m x n matrix (the load and store steps).
inline int64_t tiles32(int64_t m, int64_t n) { return ((m + 31) / 32) * ((n + 31) / 32); }

// Lanes of a group that streams the r rows of a panel (capped by o.max_group).
int panel_lanes(int64_t r, const Options &o);
// Lanes of the element-wise steps (scan, load, store, eye, info).
int plain_lanes(const Options &o);

// C (m x n) = alpha op(A) op(B) + beta C for every matrix of the chunk (core/kernels/gemm.h),
// operands at workspace offsets of the slice with leading dimensions; nothing for an empty C.
// part / part_floats: a scratch region of the slice for split-k partial products (products
// with too few tiles to fill the device and a long k); 0: never split.
ml_status gemm(const Chunk &ch, const Options &o, int flags, int m, int n, int k, float alpha,
               int64_t a, int lda, int64_t b, int ldb, float beta, int64_t c, int ldc,
               int64_t part = 0, int64_t part_floats = 0);
// T (nb x nb, ld nb, at t) of the jb reflectors V (r rows at v, ld ldv, taus at tau; unit
// diagonal, nothing above it read): G by the product over the rows below the top jb x jb
// block, formed in T's slot, then the larft_gram step (core/kernels/larft.h) with `lanes`.
// part / part_floats as for gemm().
ml_status larft(const Chunk &ch, const Options &o, int64_t v, int ldv, int64_t tau, int r, int jb,
                int nb, int64_t t, int lanes, int64_t part = 0, int64_t part_floats = 0);
// larft()'s first half, also before the qr_larft step: G into T's slot (by the product, when
// r > jb) and the larft steps' parameters p for those reflectors.
ml_status larft_gram(const Chunk &ch, const Options &o, int64_t v, int ldv, int64_t tau, int r,
                     int jb, int nb, int64_t t, int64_t part, int64_t part_floats,
                     ml_step_params &p);
// A block reflector H = I - V T V^T of `count` reflectors over `rows` rows (compact WY): V
// (rows x count at v, ld ldv, read in full: its unit diagonal and the zeros above it stored)
// and T (count x count, upper triangular, at t, ld ldt), as larft() leaves it.
struct BlockReflector {
  int64_t v = 0;
  int ldv = 1;
  int64_t t = 0;
  int ldt = 1;
  int rows = 0, count = 0;
};
// Where larfb()'s products pass: two count x ncols buffers of the slice (ld ld), and split-k
// scratch for the first product (k = rows) as for gemm().
struct LarfbWork {
  int64_t x1 = 0, x2 = 0;
  int ld = 1;
  int64_t part = 0, part_floats = 0;
};
// C (h.rows x ncols at c, ld ldc) := H C, or H^T C when transpose (Q^T of a factorisation
// applied from the left), as three products: X1 = V^T C, X2 = op(T) X1, C -= V X2. Nothing for
// ncols <= 0.
ml_status larfb(const Chunk &ch, const Options &o, const BlockReflector &h, bool transpose,
                int64_t c, int ldc, int ncols, const LarfbWork &w);
// Split-k slices worth reserving partial products for, per matrix, for a batch of `batch`
// (1: none).
int split_slices(int64_t batch, const Options &o);

// scan + load of the call's input into W (column-major, ld m) with the stat slot filled
// (core/kernels/blocked_common.h); tri: ML_STEP_TRI_*.
ml_status load_input(const Chunk &ch, const Options &o, int m, int n, int tri, int64_t stat,
                     int64_t w);
// store of workspace matrix W (m x n, column-major, ld) into call output `out` (0..2) with
// ML_STORE_* flags, NaN for non-finite inputs (stat).
ml_status store_output(const Chunk &ch, const Options &o, int out, int m, int n, int flags,
                       int64_t w, int ld, int64_t stat);
// info words from the stat slots (when the call has them).
ml_status store_info(const Chunk &ch, const Options &o, int64_t stat, bool has_info);

// One op's algorithm: floats per matrix of the workspace slice, and the sequence of one chunk.
struct Algo {
  int64_t (*per_matrix)(const Call &c, int32_t kf, const Options &o);
  ml_status (*run_chunk)(const Call &c, int32_t kf, const Options &o, const Chunk &ch);
};
const Algo *qr_algo();    // blocked_qr.cpp
const Algo *eigh_algo();  // blocked_eigh.cpp: eigh and eigvalsh
const Algo *svd_algo();   // blocked_svd.cpp: svd and svdvals
const Algo *linsys_algo();  // blocked_linsys.cpp: cholesky, lu_factor, solve, inv,
                            // solve_triangular

}  // namespace ml::blocked
