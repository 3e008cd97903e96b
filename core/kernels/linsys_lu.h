// LU factorization with partial pivoting of one matrix per group in shared memory, and the
// three ops built on it, each one launch:
//   ml_lu_factor_group  lu_factor: m x n A = P L U, lu (m x n: L below the diagonal, U on and
//                   above it) and pivots (int32, LAPACK's 1-based row interchanges);
//   ml_solve_group   solve: A X = B (B, X n x nrhs), or X A = B under ML_K_LS_RIGHT
//                   (B, X nrhs x n), A n x n; B through the O0B convention (linsys_common.h);
//   ml_inv_group  inv: X = A^-1, as solve with B = I.
// The factorization (ml_ls_getrf) is right-looking, two barriers per column: the pivot
// search (each lane's candidate of column k + 1 is taken while it updates that column, then
// two simd reductions and one barrier), the row interchange (a barrier), and the rank-1
// update of the trailing matrix; column k's scaling by 1 / U[k][k] is deferred to step k + 1
// (the lanes of step k read it unscaled). Pivot rows are chosen as LAPACK's isamax (the first
// row of largest magnitude); a zero pivot is recorded (info) and its column left unscaled and
// its update skipped, as sgetf2 does, so a singular matrix keeps a factorization.
// The solves apply the row interchanges as a permutation of B's rows (or of X's entries for
// X A = B: A^T = U^T L^T P^T) and run the two triangular solves of linsys_common.h on chunks
// of right-hand sides in shared memory.
// info: k for the first zero on U's diagonal (solve, inv: that matrix's output all NaN;
// lu_factor keeps the factorization), ML_INFO_LS_NONFINITE for NaN/Inf in A (or in B for
// solve): NaN outputs (lu_factor: pivots 1..k).
#ifndef ML_KERNELS_LINSYS_LU_H
#define ML_KERNELS_LINSYS_LU_H

#include "linsys_common.h"

// ---- sizes ----
// lu_factor: the matrix (odd stride), the pivots, reductions.
ML_HOST_FN int ml_lu_factor_group_scratch_floats_flags(int m, int n, int flags) {
  (void)flags;
  const int k = m < n ? m : n;
  return m * ml_shared_ld(n) + k + ML_LS_RED_FLOATS;
}
ML_HOST_FN int ml_lu_factor_group_fits_flags(int m, int n, int flags, int scratch_floats) {
  return m >= 1 && n >= 1 && m <= 4096 && n <= 4096 && flags == 0 &&
         ml_lu_factor_group_scratch_floats_flags(m, n, flags) <= scratch_floats;
}
// solve / inv: A (odd stride), pivots, permutation, reductions, a chunk of right-hand sides.
ML_HOST_FN int ml_ls_lu_base_floats(int n) { return n * ml_shared_ld(n) + 2 * n + ML_LS_RED_FLOATS; }
// m: nrhs (solve) or n (inv).
ML_HOST_FN int ml_solve_group_scratch_floats_flags(int m, int n, int flags) {
  (void)m;
  return ml_ls_chunked_floats(ml_ls_lu_base_floats(n), n, flags);
}
ML_HOST_FN int ml_solve_group_choose_flags(int m, int n, int flags, int scratch_floats) {
  return ml_ls_choose_chunk(m, n, flags, ml_ls_lu_base_floats(n), scratch_floats);
}
ML_HOST_FN int ml_solve_group_fits_flags(int m, int n, int flags, int scratch_floats) {
  return m >= 0 && n >= 1 && n <= 4096 && (flags & ~ML_K_LS_RIGHT) == 0 &&
         ml_ls_chunk_fits(ml_ls_lu_base_floats(n), n, scratch_floats);
}
ML_HOST_FN int ml_inv_group_choose_flags(int m, int n, int flags, int scratch_floats) {
  (void)m;
  return ml_ls_choose_chunk(n, n, flags, ml_ls_lu_base_floats(n), scratch_floats);
}
ML_HOST_FN int ml_inv_group_fits_flags(int m, int n, int flags, int scratch_floats) {
  return m == n && n >= 1 && n <= 4096 && (flags & ML_K_LS_BITS) == 0 &&
         ml_ls_chunk_fits(ml_ls_lu_base_floats(n), n, scratch_floats);
}

// Loads m x n row-major am into S (stride ld); returns 1 on every lane when an entry is not
// finite. The lanes' candidates for column 0's pivot are published to red (see
// ml_ls_pivot_publish); the barrier of the reduction into red2 makes both visible.
ML_FN int ml_ls_load_lu(ML_CTX ctx, ML_DEVICE const float *am, int m, int n,
                        ML_SHARED float *S, int ld, ML_SHARED float *red,
                        ML_SHARED float *red2) {
  float bad = 0.0f, best = -1.0f;
  int row = 0;
  for (int t = ctx.lane; t < m * n; t += ctx.group_size) {
    const int i = t / n, j = t - i * n;
    const float x = am[t];
    if (!ml_isfinite(x)) bad = 1.0f;
    if (j == 0 && ml_fabs(x) > best) {
      best = ml_fabs(x);
      row = i;
    }
    S[i * ld + j] = x;
  }
  ml_ls_pivot_publish(ctx, best, row, red);
  return ml_group_max(ctx, bad, red2) != 0.0f;
}

// Factors the m x n matrix in S (stride ld) in place: on return S holds L (unit, below the
// diagonal) and U, ipiv[k] the 0-based pivot row of step k (as a float), after a barrier.
// red must hold column 0's candidates (ml_ls_load_lu). Returns the first zero pivot (k + 1)
// or 0, the same on every lane.
ML_FN int ml_ls_getrf(ML_CTX ctx, ML_SHARED float *S, int ld, int m, int n,
                      ML_SHARED float *ipiv, ML_SHARED float *red) {
  const int lane = ctx.lane, gs = ctx.group_size, K = m < n ? m : n;
  int status = 0;
  for (int k = 0; k < K; ++k) {
    const int piv = ml_ls_pivot_take(ctx, red, k);
    if (lane == 0) ipiv[k] = (float)piv;
    if (piv != k) {
      for (int j = lane; j < n; j += gs) {
        const float t = S[k * ld + j];
        S[k * ld + j] = S[piv * ld + j];
        S[piv * ld + j] = t;
      }
    }
    ml_barrier(ctx);
    const float d = S[k * ld + k];
    if (d == 0.0f && status == 0) status = k + 1;
    // Column k - 1's deferred scaling (rows below k - 1; its pivot is U[k-1][k-1]).
    if (k > 0) {
      const float dp = S[(k - 1) * ld + k - 1];
      if (dp != 0.0f) {
        const int recip = ml_fabs(dp) >= ML_FLT_MIN;
        const float rdp = 1.0f / dp;
        for (int i = k + lane; i < m; i += gs) {
          const float v = S[i * ld + k - 1];
          S[i * ld + k - 1] = recip ? v * rdp : v / dp;
        }
      }
    }
    // The trailing update, taking column k + 1's pivot candidates on the way.
    const int rows = m - k - 1, cols = n - k - 1;
    float best = -1.0f;
    int brow = 0;
    if (d != 0.0f && rows > 0 && cols > 0) {
      const int recip = ml_fabs(d) >= ML_FLT_MIN;
      const float rd = 1.0f / d;
      for (int e = lane; e < rows * cols; e += gs) {
        const int r = e / cols, c = e - r * cols;
        const int i = k + 1 + r, j = k + 1 + c;
        const float li = recip ? S[i * ld + k] * rd : S[i * ld + k] / d;
        const float v = S[i * ld + j] - li * S[k * ld + j];
        S[i * ld + j] = v;
        if (c == 0 && ml_fabs(v) > best) {
          best = ml_fabs(v);
          brow = i;
        }
      }
    } else if (rows > 0 && cols > 0) {  // zero pivot: no update, candidates as they are
      for (int i = k + 1 + lane; i < m; i += gs) {
        const float v = S[i * ld + k + 1];
        if (ml_fabs(v) > best) {
          best = ml_fabs(v);
          brow = i;
        }
      }
    }
    ml_ls_pivot_publish(ctx, best, brow, red);
    ml_barrier(ctx);
  }
  // The last column's deferred scaling (tall matrices: rows below K - 1).
  if (K > 0 && m > K) {
    const float dp = S[(K - 1) * ld + K - 1];
    if (dp != 0.0f) {
      const int recip = ml_fabs(dp) >= ML_FLT_MIN;
      const float rdp = 1.0f / dp;
      for (int i = K + lane; i < m; i += gs) {
        const float v = S[i * ld + K - 1];
        S[i * ld + K - 1] = recip ? v * rdp : v / dp;
      }
    }
    ml_barrier(ctx);
  }
  return status;
}

ML_FN void ml_lu_factor_group(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                          ML_DEVICE float *lu, ML_DEVICE float *pivots, ML_DEVICE int *info) {
  if (ctx.group_id >= p.batch) return;
  const int m = p.m, n = p.n, lane = ctx.lane, gs = ctx.group_size, ld = ml_shared_ld(n);
  const int K = m < n ? m : n;
  ML_SHARED float *S = ctx.scratch;
  ML_SHARED float *ipiv = S + m * ld;
  ML_SHARED float *red = ipiv + K;
  ML_SHARED float *red2 = red + 64;
  const ml_i64 g = ctx.group_id;
  ML_DEVICE float *lum = lu + g * (ml_i64)m * n;
  ML_DEVICE ml_i32 *pm = (ML_DEVICE ml_i32 *)pivots + g * (ml_i64)K;
  int status;
  if (ml_ls_load_lu(ctx, a + g * (ml_i64)m * n, m, n, S, ld, red, red2)) {
    const float qnan = ml_nan();
    for (int t = lane; t < m * n; t += gs) lum[t] = qnan;
    for (int k = lane; k < K; k += gs) pm[k] = k + 1;
    status = ML_INFO_LS_NONFINITE;
  } else {
    status = ml_ls_getrf(ctx, S, ld, m, n, ipiv, red);
    for (int t = lane; t < m * n; t += gs) lum[t] = S[(t / n) * ld + t % n];
    for (int k = lane; k < K; k += gs) pm[k] = (int)ipiv[k] + 1;
  }
  if (info && lane == 0) info[g] = status;
}

// perm[i] (as floats) = the row of A that the interchanges ipiv[0..n) bring to row i. One
// lane; a barrier follows.
ML_FN void ml_ls_perm(ML_CTX ctx, ML_SHARED const float *ipiv, int n, ML_SHARED float *perm) {
  if (ctx.lane == 0) {
    for (int i = 0; i < n; ++i) perm[i] = (float)i;
    for (int k = 0; k < n; ++k) {
      const int q = (int)ipiv[k];
      const float t = perm[k];
      perm[k] = perm[q];
      perm[q] = t;
    }
  }
  ml_barrier(ctx);
}

// The solves after the factorization (S = LU, perm): B's chunks through shared memory into X.
// which: 0 solve A X = B, 1 solve X A = B, 2 inv (B = I). Returns whether B had a NaN/Inf
// entry (the same on every lane; always 0 for inv).
ML_FN int ml_ls_lu_solve(ML_CTX ctx, ML_SHARED const float *S, int ld, int n,
                         ML_SHARED const float *perm, ML_SHARED float *X, int W,
                         ML_DEVICE const float *bm, ML_DEVICE float *xm, int nrhs, int which,
                         ML_SHARED float *red2) {
  const int lane = ctx.lane, gs = ctx.group_size, ldx = ml_ls_chunk_ld(W);
  float bad = 0.0f;
  for (int c0 = 0; c0 < nrhs; c0 += W) {
    const int w = nrhs - c0 < W ? nrhs - c0 : W;
    if (which == 1) {  // B's rows c0.. are X^T's columns: lanes along a row of B
      for (int t = lane; t < w * n; t += gs) {
        const int c = t / n, i = t - c * n;
        const float x = bm[(ml_i64)(c0 + c) * n + i];
        if (!ml_isfinite(x)) bad = 1.0f;
        X[i * ldx + c] = x;
      }
    } else {
      for (int t = lane; t < n * w; t += gs) {
        const int i = t / w, c = t - i * w;
        const int src = (int)perm[i];
        float x;
        if (which == 2) {
          x = src == c0 + c ? 1.0f : 0.0f;
        } else {
          x = bm[(ml_i64)src * nrhs + c0 + c];
          if (!ml_isfinite(x)) bad = 1.0f;
        }
        X[i * ldx + c] = x;
      }
    }
    ml_barrier(ctx);
    if (which == 1) {  // A^T = U^T L^T P^T: U^T (lower), then L^T (unit upper)
      ml_ls_trsm_chunk(ctx, S, ld, n, 1, 1, 0, X, ldx, w);  // U^T: lower triangle of S^T
      ml_ls_trsm_chunk(ctx, S, ld, n, 1, 0, 1, X, ldx, w);  // L^T: unit upper of S^T
      for (int t = lane; t < w * n; t += gs) {
        const int c = t / n, i = t - c * n;
        xm[(ml_i64)(c0 + c) * n + (int)perm[i]] = X[i * ldx + c];
      }
    } else {
      ml_ls_trsm_chunk(ctx, S, ld, n, 0, 1, 1, X, ldx, w);  // L (unit lower)
      ml_ls_trsm_chunk(ctx, S, ld, n, 0, 0, 0, X, ldx, w);  // U
      for (int t = lane; t < n * w; t += gs) {
        const int i = t / w, c = t - i * w;
        xm[(ml_i64)i * nrhs + c0 + c] = X[i * ldx + c];
      }
    }
    ml_barrier(ctx);  // X is reused by the next chunk
  }
  return ml_group_max(ctx, bad, red2) != 0.0f;
}

// solve (which 0 / 1) and inv (which 2): the factorization, then the solves.
ML_FN void ml_ls_lu_op(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                       ML_DEVICE const float *b, ML_DEVICE float *x, ML_DEVICE int *info,
                       int which) {
  if (ctx.group_id >= p.batch) return;
  const int n = p.n, lane = ctx.lane, gs = ctx.group_size, ld = ml_shared_ld(n);
  const int nrhs = which == 2 ? n : p.m, W = ml_ls_chunk(p.flags);
  ML_SHARED float *S = ctx.scratch;
  ML_SHARED float *ipiv = S + n * ld;
  ML_SHARED float *perm = ipiv + n;
  ML_SHARED float *red = perm + n;
  ML_SHARED float *red2 = red + 64;
  ML_SHARED float *X = red + ML_LS_RED_FLOATS;
  const ml_i64 g = ctx.group_id, xcount = (ml_i64)n * nrhs;
  ML_DEVICE const float *bm = which == 2 ? a : b + g * xcount;
  ML_DEVICE float *xm = x + g * xcount;
  int status;
  if (ml_ls_load_lu(ctx, a + g * (ml_i64)n * n, n, n, S, ld, red, red2)) {
    status = ML_INFO_LS_NONFINITE;
  } else {
    status = ml_ls_getrf(ctx, S, ld, n, n, ipiv, red);
    if (status != 0) {
      if (which != 2 && ml_ls_nonfinite(ctx, bm, xcount, red2)) status = ML_INFO_LS_NONFINITE;
    } else {
      ml_ls_perm(ctx, ipiv, n, perm);
      if (ml_ls_lu_solve(ctx, S, ld, n, perm, X, W, bm, xm, nrhs, which, red2)) {
        status = ML_INFO_LS_NONFINITE;
        ml_barrier_device(ctx);  // the NaN below replaces what the lanes stored
      }
    }
  }
  if (status != 0) {
    const float qnan = ml_nan();
    for (ml_i64 t = lane; t < xcount; t += gs) xm[t] = qnan;
  }
  if (info && lane == 0) info[g] = status;
}

ML_FN void ml_solve_group(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a, ML_DEVICE float *x,
                         ML_DEVICE const float *b, ML_DEVICE int *info) {
  ml_ls_lu_op(ctx, p, a, b, x, info, (p.flags & ML_K_LS_RIGHT) ? 1 : 0);
}

ML_FN void ml_inv_group(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a, ML_DEVICE float *x,
                          ML_DEVICE int *info) {
  ml_ls_lu_op(ctx, p, a, a, x, info, 2);
}

#endif  // ML_KERNELS_LINSYS_LU_H
