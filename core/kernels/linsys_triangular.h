// Triangular solve of one n x n A per group, A's triangle in shared memory (strsm):
// A X = B (B, X n x nrhs), or X A = B under ML_K_LS_RIGHT (B, X nrhs x n, solved as
// A^T X^T = B^T); ML_K_LS_UPPER: A upper triangular, else lower; ML_K_LS_UNIT: ones on the
// diagonal (not read). The other triangle is never read. B comes through the O0B convention
// and nrhs as p.m (linsys_common.h); the right-hand sides go through shared memory in chunks
// of W columns (the flags' chunk width), each solved by ml_ls_trsm_chunk.
// info: ML_INFO_LS_NONFINITE for NaN/Inf in the triangle read or in B, else k for the first
// exact zero on A's diagonal (not unit); either gives an all-NaN X for that matrix.
#ifndef ML_KERNELS_LINSYS_TRIANGULAR_H
#define ML_KERNELS_LINSYS_TRIANGULAR_H

#include "linsys_common.h"

ML_HOST_FN int ml_ls_trsm_base_floats(int n) { return n * ml_shared_ld(n) + ML_LS_RED_FLOATS; }
// m: nrhs.
ML_HOST_FN int ml_solve_triangular_group_scratch_floats_flags(int m, int n, int flags) {
  (void)m;
  return ml_ls_chunked_floats(ml_ls_trsm_base_floats(n), n, flags);
}
ML_HOST_FN int ml_solve_triangular_group_choose_flags(int m, int n, int flags, int scratch_floats) {
  return ml_ls_choose_chunk(m, n, flags, ml_ls_trsm_base_floats(n), scratch_floats);
}
ML_HOST_FN int ml_solve_triangular_group_fits_flags(int m, int n, int flags, int scratch_floats) {
  return m >= 0 && n >= 1 && n <= 4096 && (flags & ~ML_K_LS_BITS) == 0 &&
         ml_ls_chunk_fits(ml_ls_trsm_base_floats(n), n, scratch_floats);
}

ML_FN void ml_solve_triangular_group(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a, ML_DEVICE float *x,
                         ML_DEVICE const float *b, ML_DEVICE int *info) {
  if (ctx.group_id >= p.batch) return;
  const int n = p.n, nrhs = p.m, lane = ctx.lane, gs = ctx.group_size, ld = ml_shared_ld(n);
  const int upper = (p.flags & ML_K_LS_UPPER) != 0, right = (p.flags & ML_K_LS_RIGHT) != 0;
  const int unit = (p.flags & ML_K_LS_UNIT) != 0;
  const int W = ml_ls_chunk(p.flags), ldx = ml_ls_chunk_ld(W);
  ML_SHARED float *S = ctx.scratch;
  ML_SHARED float *red2 = S + n * ld + 64;
  ML_SHARED float *X = S + n * ld + ML_LS_RED_FLOATS;
  const ml_i64 g = ctx.group_id, xcount = (ml_i64)n * nrhs;
  ML_DEVICE const float *am = a + g * (ml_i64)n * n;
  ML_DEVICE const float *bm = b + g * xcount;
  ML_DEVICE float *xm = x + g * xcount;

  float bad = 0.0f;
  for (int t = lane; t < n * n; t += gs) {
    const int i = t / n, j = t - i * n;
    if (upper ? j >= i : j <= i) {
      const float v = am[t];
      if (!ml_isfinite(v) && !(unit && i == j)) bad = 1.0f;
      S[i * ld + j] = v;
    }
  }
  int status = ml_group_max(ctx, bad, red2) != 0.0f ? ML_INFO_LS_NONFINITE : 0;
  if (status == 0 && !unit) {
    for (int k = 0; k < n; ++k)
      if (S[k * ld + k] == 0.0f) {
        status = k + 1;
        break;
      }
    if (status != 0 && ml_ls_nonfinite(ctx, bm, xcount, red2 + 32)) status = ML_INFO_LS_NONFINITE;
  }
  if (status == 0) {
    // Left: op(S) = S, its triangle the stored one; right: op(S) = S^T, lower iff A is upper.
    const int trans = right, lower = right ? upper : !upper;
    float badb = 0.0f;
    for (int c0 = 0; c0 < nrhs; c0 += W) {
      const int w = nrhs - c0 < W ? nrhs - c0 : W;
      if (right) {
        for (int t = lane; t < w * n; t += gs) {
          const int c = t / n, i = t - c * n;
          const float v = bm[(ml_i64)(c0 + c) * n + i];
          if (!ml_isfinite(v)) badb = 1.0f;
          X[i * ldx + c] = v;
        }
      } else {
        for (int t = lane; t < n * w; t += gs) {
          const int i = t / w, c = t - i * w;
          const float v = bm[(ml_i64)i * nrhs + c0 + c];
          if (!ml_isfinite(v)) badb = 1.0f;
          X[i * ldx + c] = v;
        }
      }
      ml_barrier(ctx);
      ml_ls_trsm_chunk(ctx, S, ld, n, trans, lower, unit, X, ldx, w);
      if (right) {
        for (int t = lane; t < w * n; t += gs) {
          const int c = t / n, i = t - c * n;
          xm[(ml_i64)(c0 + c) * n + i] = X[i * ldx + c];
        }
      } else {
        for (int t = lane; t < n * w; t += gs) {
          const int i = t / w, c = t - i * w;
          xm[(ml_i64)i * nrhs + c0 + c] = X[i * ldx + c];
        }
      }
      ml_barrier(ctx);
    }
    if (ml_group_max(ctx, badb, red2 + 32) != 0.0f) {
      status = ML_INFO_LS_NONFINITE;
      ml_barrier_device(ctx);  // the NaN below replaces what the lanes stored
    }
  }
  if (status != 0) {
    const float qnan = ml_nan();
    for (ml_i64 t = lane; t < xcount; t += gs) xm[t] = qnan;
  }
  if (info && lane == 0) info[g] = status;
}

#endif  // ML_KERNELS_LINSYS_TRIANGULAR_H
