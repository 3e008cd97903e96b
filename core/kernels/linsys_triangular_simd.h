// Triangular solve of one n x n A (n <= 128) per simdgroup, the right-hand sides in the lanes'
// registers (strsm; the flags and conventions of ml_solve_triangular_group: A X = B, or X A = B
// under ML_K_LS_RIGHT as A^T X^T = B^T; upper / lower, unit diagonal; nrhs as p.m, B through
// O0B). Every case is solved as a lower-triangular T y = x: T[i][k] = op(A)[o(i)][o(k)] with
// op(A) = A (left) or A^T (right) and o(i) = i, or n - 1 - i where op(A) is upper (the order of
// the rows reversed). T goes to the group's scratch (n x (n | 1) floats, copied from A's
// triangle with consecutive lanes on consecutive addresses); lane l holds rows l, l + GS, ...
// (NQ = ceil(n / GS) of them) of a chunk of C right-hand-side columns in registers. Step k:
// the lane holding row k broadcasts its C values by shuffles, and every lane updates its rows
// below k, one shared read of T[i][k] (its own row: conflict-free at the odd stride) for C FMAs.
// The diagonal is divided out up front: row i of the right-hand sides and of T are multiplied
// by 1 / T[i][i] (y_i = x_i / t_ii - sum_k (t_ik / t_ii) y_k; unit: no scaling).
// info and NaN as ml_solve_triangular_group: ML_INFO_LS_NONFINITE for NaN/Inf in the triangle
// read or in B, else k for the first exact zero on A's diagonal (not unit); either gives an
// all-NaN X for that matrix. Group size: 32 lanes, or 16 (n <= 16) as CUDA's sub-warp groups.
// Two SIMD table lines, so that an entry's register count is its own sizes' (nvcc 13, sm_90, no
// spills: 117 registers for NQ <= 2, 158 for NQ = 4; one entry for both took 201):
// solve_triangular_simd (n <= 64) and solve_triangular_simd128 (33..128, taken from 65 on: the
// other comes first).
#ifndef ML_KERNELS_LINSYS_TRIANGULAR_SIMD_H
#define ML_KERNELS_LINSYS_TRIANGULAR_SIMD_H

#include "linsys_common.h"

#define ML_TRS_MAX_N 128

// m: nrhs. Scratch: T, n x (n | 1) floats.
ML_HOST_FN int ml_solve_triangular_simd_scratch_floats_flags(int m, int n, int flags) {
  (void)m;
  (void)flags;
  return n * ml_shared_ld(n);
}
// Windows: n <= 64 (solve_triangular_simd), 33..128 (solve_triangular_simd128).
ML_HOST_FN int ml_trs_fits(int m, int n, int flags, int scratch_floats, int lo, int hi) {
  return m >= 0 && n >= lo && n <= hi && (flags & ~ML_K_LS_BITS) == 0 &&
         ml_solve_triangular_simd_scratch_floats_flags(m, n, flags) <= scratch_floats;
}
ML_HOST_FN int ml_solve_triangular_simd_fits_flags(int m, int n, int flags, int scratch_floats) {
  return ml_trs_fits(m, n, flags, scratch_floats, 1, 64);
}
ML_HOST_FN int ml_solve_triangular_simd128_fits_flags(int m, int n, int flags,
                                                      int scratch_floats) {
  return ml_trs_fits(m, n, flags, scratch_floats, 33, ML_TRS_MAX_N);
}

// A shuffle within the group of GS lanes (as ml_chs_shfl: at 32 the constant-mask form).
template <int GS>
ML_FN float ml_trs_shfl(ML_CTX ctx, float x, int src) {
  return GS == 32 ? ml_simd_shuffle_full(ctx, x, src) : ml_simd_shuffle(ctx, x, src);
}

template <int NQ, int GS, int C>
ML_FN void ml_trs_impl(ML_CTX ctx, int n, int nrhs, int flags, ML_DEVICE const float *am,
                       ML_DEVICE float *xm, ML_DEVICE const float *bm, ML_DEVICE int *info,
                       ml_i64 g) {
  const int lane = ctx.lane, ld = ml_shared_ld(n);
  const int upper = (flags & ML_K_LS_UPPER) != 0, right = (flags & ML_K_LS_RIGHT) != 0;
  const int unit = (flags & ML_K_LS_UNIT) != 0;
  const int rev = right ? !upper : upper;  // op(A) upper: rows in reverse order
  ML_SHARED float *S = ctx.scratch;
  const ml_i64 xcount = (ml_i64)n * nrhs;

  // T from A's triangle (the diagonal too unless unit); NaN/Inf and the first zero pivot.
  float bad = 0.0f, zero = 1.0e9f;
  {
    int r = 0, c = lane;
    while (c >= n) c -= n, ++r;
    for (int t = lane; t < n * n; t += GS) {
      if ((upper ? c >= r : c <= r) && !(unit && r == c)) {
        const float v = am[t];
        if (!ml_isfinite(v)) bad = 1.0f;
        if (r == c && v == 0.0f && (float)(r + 1) < zero) zero = (float)(r + 1);
        const int orow = right ? c : r, ocol = right ? r : c;  // entry of op(A)
        const int i = rev ? n - 1 - orow : orow, k = rev ? n - 1 - ocol : ocol;
        S[i * ld + k] = v;
      }
      c += GS;
      while (c >= n) c -= n, ++r;
    }
  }
  int status = ml_simd_max(ctx, bad) != 0.0f ? ML_INFO_LS_NONFINITE : 0;
  const float z = ml_simd_min(ctx, zero);
  if (status == 0 && z < 1.0e9f) {
    status = (int)z;
    float badb = 0.0f;
    for (ml_i64 t = lane; t < xcount; t += GS)
      if (!ml_isfinite(bm[t])) badb = 1.0f;
    if (ml_simd_max(ctx, badb) != 0.0f) status = ML_INFO_LS_NONFINITE;
  }
  if (status == 0) {
    ml_simd_barrier(ctx);  // T is in the scratch
    float rd[NQ];          // 1 / T[i][i] of this lane's rows (0 past n)
    ML_UNROLL
    for (int q = 0; q < NQ; ++q) {
      const int i = GS * q + lane;
      rd[q] = i < n ? (unit ? 1.0f : 1.0f / S[i * ld + i]) : 0.0f;
    }
    float badb = 0.0f;
    for (int c0 = 0; c0 < nrhs; c0 += C) {
      float x[NQ][C];
      ML_UNROLL
      for (int q = 0; q < NQ; ++q) {
        const int i = GS * q + lane, o = rev ? n - 1 - i : i;
        ML_UNROLL
        for (int cc = 0; cc < C; ++cc) {
          float v = 0.0f;
          if (i < n && c0 + cc < nrhs) {
            v = right ? bm[(ml_i64)(c0 + cc) * n + o] : bm[(ml_i64)o * nrhs + c0 + cc];
            if (!ml_isfinite(v)) badb = 1.0f;
          }
          x[q][cc] = v * rd[q];
        }
      }
      ML_UNROLL
      for (int kq = 0; kq < NQ; ++kq) {
        const int k0 = GS * kq;
        const int kend = n - k0 < GS ? n - k0 : GS;
        for (int kk = 0; kk < kend; ++kk) {
          const int k = k0 + kk;
          float xk[C];
          ML_UNROLL
          for (int cc = 0; cc < C; ++cc) xk[cc] = ml_trs_shfl<GS>(ctx, x[kq][cc], kk);
          ML_UNROLL
          for (int q = kq; q < NQ; ++q) {
            const int i = GS * q + lane;
            if (i < n && (q > kq || lane > kk)) {
              const float t = S[i * ld + k] * rd[q];
              ML_UNROLL
              for (int cc = 0; cc < C; ++cc) x[q][cc] -= t * xk[cc];
            }
          }
        }
      }
      ML_UNROLL
      for (int q = 0; q < NQ; ++q) {
        const int i = GS * q + lane, o = rev ? n - 1 - i : i;
        ML_UNROLL
        for (int cc = 0; cc < C; ++cc) {
          if (i < n && c0 + cc < nrhs) {
            if (right)
              xm[(ml_i64)(c0 + cc) * n + o] = x[q][cc];
            else
              xm[(ml_i64)o * nrhs + c0 + cc] = x[q][cc];
          }
        }
      }
    }
    if (ml_simd_max(ctx, badb) != 0.0f) {
      // NaN over what this lane stored (its own rows: ordered after its own stores).
      status = ML_INFO_LS_NONFINITE;
      const float qnan = ml_nan();
      ML_UNROLL
      for (int q = 0; q < NQ; ++q) {
        const int i = GS * q + lane, o = rev ? n - 1 - i : i;
        if (i < n)
          for (int col = 0; col < nrhs; ++col) {
            if (right)
              xm[(ml_i64)col * n + o] = qnan;
            else
              xm[(ml_i64)o * nrhs + col] = qnan;
          }
      }
    }
  } else {
    const float qnan = ml_nan();
    for (ml_i64 t = lane; t < xcount; t += GS) xm[t] = qnan;
  }
  if (info && lane == 0) info[g] = status;
}

template <int NQ, int GS>
ML_FN void ml_trs_cols(ML_CTX ctx, int n, int nrhs, int flags, ML_DEVICE const float *am,
                       ML_DEVICE float *xm, ML_DEVICE const float *bm, ML_DEVICE int *info,
                       ml_i64 g) {
  if (nrhs <= 4)
    ml_trs_impl<NQ, GS, 4>(ctx, n, nrhs, flags, am, xm, bm, info, g);
  else if (nrhs <= 8)
    ml_trs_impl<NQ, GS, 8>(ctx, n, nrhs, flags, am, xm, bm, info, g);
  else
    ml_trs_impl<NQ, GS, 16>(ctx, n, nrhs, flags, am, xm, bm, info, g);
}

// x, b: n x nrhs (nrhs x n under ML_K_LS_RIGHT) as ml_solve_triangular_group's. ctx.group_size
// must be 16 (n <= 16) or 32 and equal to ml_simd_width(ctx) (a SIMD line's launch), with the
// scratch of scratch_floats_flags; shapes outside the line's window are left untouched.
template <int WIDE>
ML_FN void ml_trs_run(ML_CTX ctx, ml_i64 batch, int n, int nrhs, int pflags,
                      ML_DEVICE const float *a, ML_DEVICE float *x, ML_DEVICE const float *b,
                      ML_DEVICE int *info) {
  if (ctx.group_id >= batch) return;
  const int gs = ctx.group_size;
  const int hi = WIDE ? ML_TRS_MAX_N : (gs == 16 ? 16 : 64);
  if (n < 1 || n > hi || (gs != 16 && gs != 32) || (WIDE && gs != 32) || nrhs < 0) return;
  const ml_i64 g = ctx.group_id, xcount = (ml_i64)n * nrhs;
  ML_DEVICE const float *am = a + g * (ml_i64)n * n;
  ML_DEVICE const float *bm = b + g * xcount;
  ML_DEVICE float *xm = x + g * xcount;
  const int flags = pflags & ML_K_LS_BITS;
  if (WIDE)
    ml_trs_cols<4, 32>(ctx, n, nrhs, flags, am, xm, bm, info, g);
  else if (gs == 16)
    ml_trs_cols<1, 16>(ctx, n, nrhs, flags, am, xm, bm, info, g);
  else if (n <= 32)
    ml_trs_cols<1, 32>(ctx, n, nrhs, flags, am, xm, bm, info, g);
  else
    ml_trs_cols<2, 32>(ctx, n, nrhs, flags, am, xm, bm, info, g);
}
ML_FN void ml_solve_triangular_simd(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                    ML_DEVICE float *x, ML_DEVICE const float *b,
                                    ML_DEVICE int *info) {
  ml_trs_run<0>(ctx, p.batch, p.n, p.m, p.flags, a, x, b, info);
}
ML_FN void ml_solve_triangular_simd128(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                       ML_DEVICE float *x, ML_DEVICE const float *b,
                                       ML_DEVICE int *info) {
  ml_trs_run<1>(ctx, p.batch, p.n, p.m, p.flags, a, x, b, info);
}

#endif  // ML_KERNELS_LINSYS_TRIANGULAR_SIMD_H
