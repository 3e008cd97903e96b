// Cholesky factorization of one n x n matrix (n <= 128) per group with the matrix in the lanes'
// registers: lane j holds column j of the lower triangle S (A's lower triangle, or its upper
// triangle transposed under ML_K_LS_UPPER) in a register array of R = 32, 64, 96 or 128 floats
// (every loop over it unrolled: no dynamic register index). Two table lines, so that an entry's
// register count is its own sizes' (nvcc 13, sm_90, no spills: 101 registers for R <= 64, 168
// for R <= 128; one entry for all four took 172): cholesky_cols (n <= 64) and cholesky_cols128
// (33..128, taken from 65 on: cholesky_cols comes first in the table).
// Right-looking with the pivots' scaling deferred: step k reads column k from shared memory
// (written there by lane k after its last update, the pivot d = S[k][k] with it), and every
// lane j > k updates its column, S[i][j] -= (S[j][k] / d) S[i][k], one broadcast read (four
// floats at a time) and one FMA per entry; lane k + 1 writes its updated column into the other
// of two buffers, so one barrier per step. At the end L[i][j] = S[i][j] / sqrt(d_j), applied to
// whole columns. Entries above a lane's diagonal take garbage, never used. A block of 32 rows is
// skipped where no lane of a simdgroup needs it (rows above the simdgroup's first column or
// above the pivot row).
// Loads and stores: lane j reads column j of A's lower triangle (consecutive lanes on
// consecutive addresses) and writes column j of L; under ML_K_LS_UPPER, where lane j's column is
// a row of A and of U, A and U pass through the scratch in whole rows (n x (n | 1) floats, read
// and written there at the odd stride).
// info and NaN as ml_cholesky_group (LAPACK's). Group size: a lane per column (at least n
// lanes); smaller groups (the lane-per-matrix and global launches) run ml_cholesky_group's
// algorithm in the same scratch, which is at least ml_cholesky_group's.
#ifndef ML_KERNELS_LINSYS_CHOLESKY_COLS_H
#define ML_KERNELS_LINSYS_CHOLESKY_COLS_H

#include "gemm.h"
#include "linsys_cholesky.h"

// Copies the n x n matrix src (row-major) to S (stride ld) by the gs lanes of a group, or S
// back to dst: element t = lane + gs s of the matrix, its row and column kept incrementally
// (no division per element), so consecutive lanes touch consecutive device addresses.
ML_FN void ml_chc_stage_in(int lane, int GS, int n, int ld, ML_DEVICE const float *src,
                           ML_SHARED float *S) {
  int r = 0, c = lane;
  while (c >= n) c -= n, ++r;
  for (int t = lane; t < n * n; t += GS) {
    S[r * ld + c] = src[t];
    c += GS;
    while (c >= n) c -= n, ++r;
  }
}
ML_FN void ml_chc_stage_out(int lane, int GS, int n, int ld, ML_SHARED const float *S,
                            ML_DEVICE float *dst) {
  int r = 0, c = lane;
  while (c >= n) c -= n, ++r;
  for (int t = lane; t < n * n; t += GS) {
    dst[t] = S[r * ld + c];
    c += GS;
    while (c >= n) c -= n, ++r;
  }
}

#define ML_CHC_MAX_N 128

// Scratch: the staged matrix (n x (n | 1), rounded up to 4 floats: the buffers are read 16
// bytes at a time), two column buffers (2 x 128 floats) and a reduction, or
// ml_cholesky_group's (the fallback) where that is larger.
ML_HOST_FN int ml_chc_buf_offset(int n) { return (n * ml_shared_ld(n) + 3) & ~3; }
ML_HOST_FN int ml_cholesky_cols_scratch_floats_flags(int m, int n, int flags) {
  const int g = ml_cholesky_group_scratch_floats_flags(m, n, flags);
  const int own = ml_chc_buf_offset(n) + 2 * ML_CHC_MAX_N + ML_RED_FLOATS;
  return g > own ? g : own;
}
// Windows: n <= 64 (cholesky_cols), 33..128 (cholesky_cols128).
ML_HOST_FN int ml_chc_fits(int m, int n, int flags, int scratch_floats, int lo, int hi) {
  return m == n && n >= lo && n <= hi && (flags & ~ML_K_LS_UPPER) == 0 &&
         ml_cholesky_cols_scratch_floats_flags(m, n, flags) <= scratch_floats;
}
ML_HOST_FN int ml_cholesky_cols_fits_flags(int m, int n, int flags, int scratch_floats) {
  return ml_chc_fits(m, n, flags, scratch_floats, 1, 64);
}
ML_HOST_FN int ml_cholesky_cols128_fits_flags(int m, int n, int flags, int scratch_floats) {
  return ml_chc_fits(m, n, flags, scratch_floats, 33, ML_CHC_MAX_N);
}

template <int R>
ML_FN void ml_chc_impl(ML_CTX ctx, int n, int upper, ML_DEVICE const float *am,
                       ML_DEVICE float *lm, ML_DEVICE int *info, ml_i64 g) {
  const int j = ctx.lane;               // this lane's column (lanes >= n follow along)
  const int base = j & ~31;             // the first column of this lane's simdgroup
  const int ld = ml_shared_ld(n);
  ML_SHARED float *S = ctx.scratch;     // the staged matrix (upper)
  ML_SHARED float *buf = S + ml_chc_buf_offset(n);  // two column buffers of R floats
  ML_SHARED float *red = buf + 2 * ML_CHC_MAX_N;
  if (upper) {
    ml_chc_stage_in(j, ctx.group_size, n, ld, am, S);
    ml_barrier(ctx);
  }
  float col[R];
  float bad = 0.0f;
  ML_UNROLL
  for (int i = 0; i < R; ++i) {
    float x = 0.0f;
    if (i < n && j < n && i >= j) {
      x = upper ? S[j * ld + i] : am[(ml_i64)i * n + j];
      if (!ml_isfinite(x)) bad = 1.0f;
    }
    col[i] = x;
  }
  int status = ml_group_max(ctx, bad, red) != 0.0f ? ML_INFO_LS_NONFINITE : 0;
  float sq = 1.0f;  // sqrt(d_j)
  if (status == 0) {
    if (j == 0) {
      ML_UNROLL
      for (int q = 0; q < R / 4; ++q) ml_gemm_sstore4(buf + 4 * q, col + 4 * q);
    }
    ml_barrier(ctx);
    for (int k = 0; k < n; ++k) {
      ML_SHARED const float *c = buf + (k & 1) * R;
      const float d = c[k];
      if (!(d > 0.0f)) {  // the same value on every lane: a uniform exit
        status = k + 1;
        break;
      }
      if (j == k) sq = ml_sqrt(d);
      if (j > k && j < n) {
        const float f = c[j] * (1.0f / d);
        ML_UNROLL
        for (int b = 0; b < R / 32; ++b) {
          if (32 * b + 31 >= base && 32 * b + 31 > k) {  // uniform over the simdgroup
            ML_UNROLL
            for (int q = 0; q < 8; ++q) {
              float v[4];
              ml_gemm_sload4(c + 32 * b + 4 * q, v);
              ML_UNROLL
              for (int e = 0; e < 4; ++e) col[32 * b + 4 * q + e] -= f * v[e];
            }
          }
        }
      }
      if (j == k + 1 && j < n) {  // rows from j's group of four on (the rest never read)
        ML_SHARED float *nb = buf + ((k + 1) & 1) * R;
        ML_UNROLL
        for (int q = 0; q < R / 4; ++q)
          if (4 * q + 3 >= j) ml_gemm_sstore4(nb + 4 * q, col + 4 * q);
      }
      ml_barrier(ctx);
    }
  }
  if (j < n) {
    const float qnan = ml_nan(), r = 1.0f / sq;
    ML_UNROLL
    for (int i = 0; i < R; ++i) {
      if (i < n) {
        const float v = status != 0 ? qnan : (i > j ? col[i] * r : (i == j ? sq : 0.0f));
        if (upper)
          S[j * ld + i] = v;  // U = L^T: row j of U (every lane read S before the last barrier)
        else
          lm[(ml_i64)i * n + j] = v;
      }
    }
  }
  if (upper) {
    ml_barrier(ctx);
    ml_chc_stage_out(j, ctx.group_size, n, ld, S, lm);
  }
  if (info && j == 0) info[g] = status;
}

// The register widths R1 (n <= R1) and R2 (n <= R2, the caller's window) of one line.
// Returns 0 where the group is smaller than n (the caller then runs ml_cholesky_group).
template <int R1, int R2>
ML_FN int ml_chc_run(ML_CTX ctx, int n, int flags, ML_DEVICE const float *a, ML_DEVICE float *l,
                     ML_DEVICE int *info) {
  if (ctx.group_size < n) return 0;
  const int upper = (flags & ML_K_LS_UPPER) != 0;
  const ml_i64 g = ctx.group_id;
  ML_DEVICE const float *am = a + g * (ml_i64)n * n;
  ML_DEVICE float *lm = l + g * (ml_i64)n * n;
  if (n <= R1)
    ml_chc_impl<R1>(ctx, n, upper, am, lm, info, g);
  else
    ml_chc_impl<R2>(ctx, n, upper, am, lm, info, g);
  return 1;
}

// l: n x n as ml_cholesky_group's; n <= 64 (cholesky_cols) or n <= 128 (cholesky_cols128).
// Shapes beyond the line's window are left untouched; fewer lanes than columns run the
// shared-memory algorithm.
ML_FN void ml_cholesky_cols(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                            ML_DEVICE float *l, ML_DEVICE int *info) {
  if (ctx.group_id >= p.batch || p.n < 1 || p.n > 64 || p.m != p.n) return;
  if (!ml_chc_run<32, 64>(ctx, p.n, p.flags, a, l, info)) ml_cholesky_group(ctx, p, a, l, info);
}
ML_FN void ml_cholesky_cols128(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                               ML_DEVICE float *l, ML_DEVICE int *info) {
  if (ctx.group_id >= p.batch || p.n < 1 || p.n > ML_CHC_MAX_N || p.m != p.n) return;
  if (!ml_chc_run<96, 128>(ctx, p.n, p.flags, a, l, info)) ml_cholesky_group(ctx, p, a, l, info);
}

#endif  // ML_KERNELS_LINSYS_CHOLESKY_COLS_H
