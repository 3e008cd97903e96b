// Cholesky factorization of one n x n matrix (n <= 32) per simdgroup, the matrix in the lanes'
// registers: lane i holds row i of the lower triangle (A's, or A's upper triangle transposed
// under ML_K_LS_UPPER) in a register array of R = 16 or 32 floats, every loop over it unrolled
// (no dynamic indexing, no barriers). Right-looking: step k takes the pivot
// d = A[k][k] from lane k (one shuffle), each lane i > k scales its entry l_ik = a_ik / sqrt(d)
// and updates its row with column k, a_ij -= l_ik l_jk for k < j, l_jk fetched from lane j by
// one shuffle (the lanes' entries right of the diagonal take garbage, never read). About
// n^2 / 2 shuffles and FMAs per lane in all. info and NaN as ml_cholesky_group (LAPACK's).
// A and the result move through the group's scratch (n x (n | 1) floats): the lanes copy the
// matrix in whole rows (consecutive lanes on consecutive addresses), then lane i reads its row
// (or column, upper) there, conflict-free at the odd stride; the result goes back the same way.
// (A lane reading its own row from device memory puts the 32 lanes of a load on 32 rows 4 n
// bytes apart: 32 sectors per load, and 32 partial-sector writes per store.)
// Group sizes: 32, or 16 (R = 16) for n <= 16 as CUDA's sub-warp groups; a SIMD table line.
#ifndef ML_KERNELS_LINSYS_CHOLESKY_SIMD_H
#define ML_KERNELS_LINSYS_CHOLESKY_SIMD_H

#include "linsys_common.h"

// Scratch: the staged matrix, n x (n | 1) floats.
ML_HOST_FN int ml_cholesky_simd_scratch_floats_flags(int m, int n, int flags) {
  (void)m;
  (void)flags;
  return n * ml_shared_ld(n);
}
ML_HOST_FN int ml_cholesky_simd_fits_flags(int m, int n, int flags, int scratch_floats) {
  return m == n && n >= 1 && n <= 32 && (flags & ~ML_K_LS_UPPER) == 0 &&
         ml_cholesky_simd_scratch_floats_flags(m, n, flags) <= scratch_floats;
}

// Copies the n x n matrix src (row-major) to S (stride ld) by the gs lanes of a group, or S
// back to dst: element t = lane + gs s of the matrix, its row and column kept incrementally
// (no division per element), so consecutive lanes touch consecutive device addresses.
ML_FN void ml_chs_stage_in(int lane, int GS, int n, int ld, ML_DEVICE const float *src,
                           ML_SHARED float *S) {
  int r = 0, c = lane;
  while (c >= n) c -= n, ++r;
  for (int t = lane; t < n * n; t += GS) {
    S[r * ld + c] = src[t];
    c += GS;
    while (c >= n) c -= n, ++r;
  }
}
ML_FN void ml_chs_stage_out(int lane, int GS, int n, int ld, ML_SHARED const float *S,
                            ML_DEVICE float *dst) {
  int r = 0, c = lane;
  while (c >= n) c -= n, ++r;
  for (int t = lane; t < n * n; t += GS) {
    dst[t] = S[r * ld + c];
    c += GS;
    while (c >= n) c -= n, ++r;
  }
}

// A shuffle within the group of GS lanes (at 32 the constant-mask form: every lane of the
// simdgroup calls, all branches around the calls being group-uniform).
template <int GS>
ML_FN float ml_chs_shfl(ML_CTX ctx, float x, int src) {
  return GS == 32 ? ml_simd_shuffle_full(ctx, x, src) : ml_simd_shuffle(ctx, x, src);
}

template <int R, int GS>
ML_FN void ml_chs_impl(ML_CTX ctx, int n, int upper, ML_DEVICE const float *am,
                       ML_DEVICE float *lm, ML_DEVICE int *info, ml_i64 g) {
  const int i = ctx.lane;  // this lane's row (lanes >= n hold zeros and follow along)
  const int ld = ml_shared_ld(n);
  ML_SHARED float *S = ctx.scratch;
  ml_chs_stage_in(i, GS, n, ld, am, S);
  ml_simd_barrier(ctx);
  float row[R];
  float bad = 0.0f;
  ML_UNROLL
  for (int j = 0; j < R; ++j) {
    float x = 0.0f;
    if (i < n && j <= i) {
      x = upper ? S[j * ld + i] : S[i * ld + j];
      if (!ml_isfinite(x)) bad = 1.0f;
    }
    row[j] = x;
  }
  int status = ml_simd_max(ctx, bad) != 0.0f ? ML_INFO_LS_NONFINITE : 0;
  float diag = 0.0f;  // L[i][i]
  ML_UNROLL
  for (int k = 0; k < R; ++k) {
    if (k < n && status == 0) {  // uniform: n and status are the group's
      const float d = ml_chs_shfl<GS>(ctx, row[k], k);
      if (!(d > 0.0f)) {
        status = k + 1;
      } else {
        const float s = ml_sqrt(d), r = 1.0f / s;
        if (i == k) diag = s;
        const float l = i > k ? row[k] * r : 0.0f;
        row[k] = l;
        ML_UNROLL
        for (int j = k + 1; j < R; ++j) {
          if (j < n) {
            const float lj = ml_chs_shfl<GS>(ctx, l, j);
            row[j] -= l * lj;
          }
        }
      }
    }
  }
  const float qnan = ml_nan();
  ml_simd_barrier(ctx);  // every lane has read its row of S
  ML_UNROLL
  for (int j = 0; j < R; ++j) {
    if (i < n && j < n) {
      const float v = status != 0 ? qnan : (j < i ? row[j] : (j == i ? diag : 0.0f));
      if (upper)
        S[j * ld + i] = v;  // U = L^T
      else
        S[i * ld + j] = v;
    }
  }
  ml_simd_barrier(ctx);
  ml_chs_stage_out(i, GS, n, ld, S, lm);
  if (info && i == 0) info[g] = status;
}

// l: n x n as ml_cholesky_group's. ctx.group_size must be 16 (n <= 16) or 32 and equal to
// ml_simd_width(ctx) (a SIMD line's launch), with the scratch of scratch_floats_flags;
// shapes outside fits() are left untouched.
ML_FN void ml_cholesky_simd(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                            ML_DEVICE float *l, ML_DEVICE int *info) {
  if (ctx.group_id >= p.batch) return;
  const int n = p.n;
  if (n < 1 || n > ctx.group_size || p.m != n) return;
  const int upper = (p.flags & ML_K_LS_UPPER) != 0;
  const ml_i64 g = ctx.group_id;
  ML_DEVICE const float *am = a + g * (ml_i64)n * n;
  ML_DEVICE float *lm = l + g * (ml_i64)n * n;
  if (ctx.group_size == 32)
    ml_chs_impl<32, 32>(ctx, n, upper, am, lm, info, g);
  else
    ml_chs_impl<16, 16>(ctx, n, upper, am, lm, info, g);
}

#endif  // ML_KERNELS_LINSYS_CHOLESKY_SIMD_H
