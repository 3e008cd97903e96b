// Cholesky factorization of one n x n matrix per group, the matrix in shared memory.
// ML_K_LS_UPPER clear: A = L L^T from A's lower triangle, the output L (upper part 0);
// set: A = U^T U from the upper triangle, the output U (lower part 0). The upper case loads
// A's upper triangle transposed, so both factor the lower triangle S and U = S^T is stored.
// Right-looking, one barrier per column: step k reads the pivot d = S[k][k] (already updated
// by the earlier steps), updates the trailing lower triangle with the unscaled column,
// S[i][j] -= (S[i][k] / d) S[j][k], and scales column k - 1 by 1 / sqrt(d_{k-1}) (deferred a
// step, since the lanes of step k - 1 read that column unscaled). The trailing triangle's
// entries are spread over the lanes two rows at a time (rows r and T - 1 - r together hold
// T + 1 entries), so every lane has about the same work.
// info: LAPACK's (spotrf): k for the first leading minor of order k that is not positive
// definite (a pivot <= 0 or NaN), or ML_INFO_LS_NONFINITE when the triangle read has a NaN or
// Inf; the output of such a matrix is all NaN.
#ifndef ML_KERNELS_LINSYS_CHOLESKY_H
#define ML_KERNELS_LINSYS_CHOLESKY_H

#include "linsys_common.h"

// Scratch: the matrix (odd stride), the pivots' square roots, reductions.
ML_HOST_FN int ml_cholesky_group_scratch_floats_flags(int m, int n, int flags) {
  (void)m;
  (void)flags;
  return n * ml_shared_ld(n) + n + ML_LS_RED_FLOATS;
}
ML_HOST_FN int ml_cholesky_group_fits_flags(int m, int n, int flags, int scratch_floats) {
  return m == n && n >= 1 && n <= 4096 && (flags & ~ML_K_LS_UPPER) == 0 &&
         ml_cholesky_group_scratch_floats_flags(m, n, flags) <= scratch_floats;
}

// Factors the lower triangle of the n x n matrix in S (stride ld) in place, right-looking,
// one barrier per column: on return the entries below the diagonal hold L's, sq[k] holds
// L[k][k] = sqrt of pivot k (the diagonal of S keeps the pivots). Returns the first k + 1
// whose pivot is not positive (or NaN), the factorization stopped there, or 0; the same on
// every lane. Reads S without a barrier of its own (the caller's last one must cover it);
// ends with one when it returns 0.
ML_FN int ml_ls_potf2(ML_CTX ctx, ML_SHARED float *S, int ld, int n, ML_SHARED float *sq) {
  const int lane = ctx.lane, gs = ctx.group_size;
  for (int k = 0; k < n; ++k) {
    const float d = S[k * ld + k];
    if (!(d > 0.0f)) return k + 1;  // the same value on every lane: a uniform exit
    const float r = 1.0f / d;
    if (lane == 0) sq[k] = ml_sqrt(d);
    if (k > 0) {
      const float rs = 1.0f / sq[k - 1];
      for (int i = k + lane; i < n; i += gs) S[i * ld + k - 1] *= rs;
    }
    const int T = n - k - 1;  // trailing order
    const int P = (T + 1) / 2, W = T + 1;
    for (int e = lane; e < P * W; e += gs) {
      const int pr = e / W, q = e - pr * W;
      int ii, jj;
      if (q <= pr) {
        ii = pr;
        jj = q;
      } else {
        ii = T - 1 - pr;
        jj = q - pr - 1;
        if (ii == pr) continue;  // the middle row of an odd order: done by the first half
      }
      const int i = k + 1 + ii, j = k + 1 + jj;
      S[i * ld + j] -= (S[i * ld + k] * r) * S[j * ld + k];
    }
    ml_barrier(ctx);
  }
  return 0;
}

ML_FN void ml_cholesky_group(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                          ML_DEVICE float *l, ML_DEVICE int *info) {
  if (ctx.group_id >= p.batch) return;
  const int n = p.n, lane = ctx.lane, gs = ctx.group_size, ld = ml_shared_ld(n);
  const int upper = (p.flags & ML_K_LS_UPPER) != 0;
  ML_SHARED float *S = ctx.scratch;  // lower triangle: S[i * ld + j], j <= i
  ML_SHARED float *sq = S + n * ld;  // sqrt of each pivot
  ML_SHARED float *red = sq + n + 64;
  const ml_i64 g = ctx.group_id;
  ML_DEVICE const float *am = a + g * (ml_i64)n * n;
  ML_DEVICE float *lm = l + g * (ml_i64)n * n;

  float bad = 0.0f;
  for (int t = lane; t < n * n; t += gs) {
    const int i = t / n, j = t - i * n;
    if (upper ? j >= i : j <= i) {
      const float x = am[t];
      if (!ml_isfinite(x)) bad = 1.0f;
      if (upper)
        S[j * ld + i] = x;
      else
        S[i * ld + j] = x;
    }
  }
  bad = ml_group_max(ctx, bad, red);  // its barrier also publishes S

  int status = bad != 0.0f ? ML_INFO_LS_NONFINITE : 0;
  if (status == 0) status = ml_ls_potf2(ctx, S, ld, n, sq);
  if (status != 0) {
    const float qnan = ml_nan();
    for (int t = lane; t < n * n; t += gs) lm[t] = qnan;
  } else {
    for (int t = lane; t < n * n; t += gs) {
      const int i = t / n, j = t - i * n;
      float v;
      if (upper)
        v = j > i ? S[j * ld + i] : (j == i ? sq[i] : 0.0f);
      else
        v = j < i ? S[i * ld + j] : (j == i ? sq[i] : 0.0f);
      lm[t] = v;
    }
  }
  if (info && lane == 0) info[g] = status;
}

#endif  // ML_KERNELS_LINSYS_CHOLESKY_H
