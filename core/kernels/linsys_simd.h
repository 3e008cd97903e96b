// The linear systems of order n <= 64 with one simdgroup per matrix and the matrix in the
// lanes' registers (no shared memory, no barriers): SIMD lines of the kernel table.
//   ml_lu_factor_simd         lu_factor, m, n <= 64 (any shape);
//   ml_solve_simd             solve, A X = B or X A = B (ML_K_LS_RIGHT), any nrhs;
//   ml_inv_simd               inv, as solve with B = I;
//   ml_solve_triangular_simd  solve_triangular, every flag combination, any nrhs.
// Results, info and NaN as the group kernels (linsys_lu.h, linsys_triangular.h): LAPACK's
// pivots (isamax's first row of largest magnitude), info k for the first zero pivot / diagonal
// entry, ML_INFO_LS_NONFINITE for NaN/Inf in what the op reads (solves: every X entry of that
// matrix NaN; lu_factor: NaN factors, pivots 1..k; a singular matrix keeps its factorization).
//
// LU: lane i holds row i of A (and row i + 32 for orders 33..64: RW = 2 rows per lane), the
// columns in register arrays, every loop over them unrolled. Rows are never moved: each row
// keeps `pos`, its position in LAPACK's row order, which the interchange of step k changes for
// two rows only (the pivot row takes position k, the row at position k takes the pivot's).
// Step k: the candidates' |a_ik| over the rows not yet chosen (a simd max, then a simd min of
// pos * 64 + row over the rows at that maximum: the first position among ties, and the pivot
// row), the pivot fetched by one shuffle, then each row not yet chosen forms l_ik = a_ik /
// u_kk (the reciprocal unless |u_kk| < FLT_MIN) and is updated with the pivot row, u_kj fetched
// from the pivot lane by one shuffle per column. A zero pivot is recorded and its update
// skipped (sgetf2). About n^2 / 2 shuffles and RW n^2 / 2 FMAs per lane plus two reductions
// per step, against the group kernel's two barriers per column and a shared-memory pass over
// the trailing matrix per step.
// The solves then run on chunks of up to ML_LSS_W / RW right-hand sides held in registers, a
// row holding B's row i (which P moves to row pos_i): forward substitution with L (rows below
// position k take y_k from the pivot row of step k by a shuffle), then back substitution with
// U; X A = B solves A^T = U^T L^T P in dot-product form (a simd sum per entry, since a lane
// holds U's rows, not its columns), row i ending with x_i. inv is the solve with B = I.
// Triangular solves: lanes hold the rows of op(A) (A's rows, or A's columns under
// ML_K_LS_RIGHT: op(A) = A^T), the right-hand sides as above; step k divides row k by its
// diagonal entry and broadcasts it, the rows below (above) subtract.
//
// Group sizes: 32, or 16 for an order <= 16 (CUDA's sub-warp groups, two matrices a warp).
// Every shuffle and reduction is the constant-mask segmented form, and control flow depends
// only on the launch's shape (n, nrhs): a 16-lane group past the batch keeps taking part in
// its warp's shuffles and stores nothing; a failing matrix runs the same steps on harmless
// values (a non-finite A is replaced by the identity) and stores NaN.
#ifndef ML_KERNELS_LINSYS_SIMD_H
#define ML_KERNELS_LINSYS_SIMD_H

#include "linsys_common.h"

#define ML_LSS_MAX_N 64  // largest order (one or two rows per lane)
#define ML_LSS_W 16      // right-hand sides per chunk at a row per lane (registers)
// The loops over a lane's registers: unrolled on the GPUs (static register indices); the CPU
// runner indexes its arrays as memory, and unrolling the n^2 steps there only costs compile time.
#if defined(ML_TARGET_CPU)
#define ML_LSS_UNROLL
#else
#define ML_LSS_UNROLL ML_UNROLL
#endif

// ---- host side: no scratch; the chunk width in the flags as the group kernels carry it ----
ML_HOST_FN int ml_linsys_simd_scratch_floats_flags(int m, int n, int flags) {
  (void)m;
  (void)n;
  (void)flags;
  return 0;
}
// m: the right-hand sides' count (solve, solve_triangular) or n (inv).
ML_HOST_FN int ml_linsys_simd_choose_flags(int m, int n, int flags, int scratch_floats) {
  (void)scratch_floats;
  const int cap = n > 32 ? ML_LSS_W / 2 : ML_LSS_W;  // two rows per lane: half the chunk
  int w = m < cap ? m : cap;
  if (w < 1) w = 1;
  return (flags & ML_K_LS_BITS) | (w << ML_K_LS_CHUNK_SHIFT);
}
ML_HOST_FN int ml_lu_factor_simd_fits_flags(int m, int n, int flags, int scratch_floats) {
  (void)scratch_floats;
  return m >= 1 && n >= 1 && m <= ML_LSS_MAX_N && n <= ML_LSS_MAX_N && flags == 0;
}
ML_HOST_FN int ml_solve_simd_fits_flags(int m, int n, int flags, int scratch_floats) {
  (void)scratch_floats;
  return m >= 0 && n >= 1 && n <= ML_LSS_MAX_N && (flags & ~ML_K_LS_RIGHT) == 0;
}
ML_HOST_FN int ml_inv_simd_fits_flags(int m, int n, int flags, int scratch_floats) {
  (void)scratch_floats;
  return m == n && n >= 1 && n <= ML_LSS_MAX_N && (flags & ML_K_LS_BITS) == 0;
}
ML_HOST_FN int ml_solve_triangular_simd_fits_flags(int m, int n, int flags, int scratch_floats) {
  (void)scratch_floats;
  return m >= 0 && n >= 1 && n <= ML_LSS_MAX_N && (flags & ~ML_K_LS_BITS) == 0;
}

// ---- simdgroup pieces (GS lanes, every lane of the simdgroup calling) ----
template <int GS>
ML_FN float ml_lss_shfl(ML_CTX ctx, float x, int src) {
  return ml_simd_shuffle_seg<GS>(ctx, x, src);
}
// Butterflies: every lane ends with bitwise the same value.
template <int GS>
ML_FN float ml_lss_max(ML_CTX ctx, float x) {
  ML_LSS_UNROLL
  for (int o = GS / 2; o > 0; o >>= 1) x = ml_fmax(x, ml_lss_shfl<GS>(ctx, x, ctx.lane ^ o));
  return x;
}
template <int GS>
ML_FN float ml_lss_min(ML_CTX ctx, float x) {
  ML_LSS_UNROLL
  for (int o = GS / 2; o > 0; o >>= 1) x = ml_fmin(x, ml_lss_shfl<GS>(ctx, x, ctx.lane ^ o));
  return x;
}
template <int GS>
ML_FN float ml_lss_sum(ML_CTX ctx, float x) {
  ML_LSS_UNROLL
  for (int o = GS / 2; o > 0; o >>= 1) x += ml_lss_shfl<GS>(ctx, x, ctx.lane ^ o);
  return x;
}

// The value of slot sr of a lane's RW values (sr the same on every lane: a select, no
// dynamic register index).
template <int RW>
ML_FN float ml_lss_pick(ML_THREAD const float *v, int sr) {
  float x = v[0];
  ML_LSS_UNROLL
  for (int r = 1; r < RW; ++r)
    if (sr == r) x = v[r];
  return x;
}

// OP: 0 solve A X = B, 1 solve X A = B, 2 inv, 3 lu_factor. m x n A (m = n but for lu_factor),
// m, n <= GS * RW, lane i holding rows i + r GS (r < RW); nrhs right-hand sides in chunks of
// W <= ML_LSS_W / RW; live: the group holds a matrix of the batch. pm: lu_factor's pivots.
template <int GS, int RW, int OP>
ML_FN void ml_lss_lu_impl(ML_CTX ctx, int m, int n, int nrhs, int W, bool live,
                          ML_DEVICE const float *am, ML_DEVICE const float *bm,
                          ML_DEVICE float *xm, ML_DEVICE ml_i32 *pm, ML_DEVICE int *info,
                          ml_i64 g) {
  constexpr int NC = GS * RW;           // columns (and rows) held
  constexpr int CW = ML_LSS_W / RW;     // right-hand sides per chunk
  const int i = ctx.lane;
  float row[RW][NC];
  bool mine[RW];    // slot r holds row i + r GS of A
  int pos[RW];      // that row's position in LAPACK's row order
  bool chosen[RW];  // it is a pivot row (of an earlier step)
  float bad = 0.0f;
  ML_LSS_UNROLL
  for (int r = 0; r < RW; ++r) {
    const int gi = i + r * GS;
    mine[r] = live && gi < m;
    pos[r] = gi;
    chosen[r] = false;
    ML_LSS_UNROLL
    for (int j = 0; j < NC; ++j) {
      float x = 0.0f;
      if (mine[r] && j < n) {
        x = am[(ml_i64)gi * n + j];
        if (!ml_isfinite(x)) bad = 1.0f;
      }
      row[r][j] = x;
    }
  }
  int status = ml_lss_max<GS>(ctx, bad) != 0.0f ? ML_INFO_LS_NONFINITE : 0;
  if (status != 0) {  // factor the identity instead (the outputs are NaN)
    ML_LSS_UNROLL
    for (int r = 0; r < RW; ++r) {
      ML_LSS_UNROLL
      for (int j = 0; j < NC; ++j) row[r][j] = mine[r] && j == i + r * GS ? 1.0f : 0.0f;
    }
  }

  // ---- the factorization ----
  const int K = m < n ? m : n;
  int myp[RW], ipk[RW];  // slot k / GS of lane k % GS: step k's pivot row (lane + slot GS)
                         // and its position (LAPACK's ipiv)
  ML_LSS_UNROLL
  for (int r = 0; r < RW; ++r) myp[r] = ipk[r] = 0;
  ML_LSS_UNROLL
  for (int k = 0; k < NC; ++k) {
    if (k < K) {  // uniform: the launch's shape
      float ak[RW], cand[RW];
      bool act[RW];
      float best = -1.0f;
      ML_LSS_UNROLL
      for (int r = 0; r < RW; ++r) {
        ak[r] = row[r][k];
        act[r] = mine[r] && !chosen[r];
        const float mag = ml_fabs(ak[r]);
        cand[r] = act[r] && mag >= 0.0f ? mag : -1.0f;  // NaN: no candidate
        best = ml_fmax(best, cand[r]);
      }
      const float mx = ml_lss_max<GS>(ctx, best);
      // The first position at the maximum (or, with no candidate, position k itself).
      float kl = 1.0e9f;
      ML_LSS_UNROLL
      for (int r = 0; r < RW; ++r) {
        const bool pick = mx >= 0.0f ? cand[r] == mx : (mine[r] && pos[r] == k);
        if (pick) kl = ml_fmin(kl, (float)(pos[r] * NC + i + r * GS));
      }
      const float key = ml_lss_min<GS>(ctx, kl);
      const int kk = key < 1.0e9f ? (int)key : k * NC;
      const int selpos = kk / NC, id = kk - selpos * NC;
      const int src = id % GS, sr = id / GS;
      if (i == k % GS) {
        myp[k / GS] = id;
        ipk[k / GS] = selpos;
      }
      const float d = ml_lss_shfl<GS>(ctx, ml_lss_pick<RW>(ak, sr), src);
      if (d == 0.0f && status == 0) status = k + 1;
      const int recip = ml_fabs(d) >= ML_FLT_MIN;
      const float rd = 1.0f / d;
      bool upd[RW];
      float l[RW];
      ML_LSS_UNROLL
      for (int r = 0; r < RW; ++r) {
        const bool piv = i + r * GS == id;
        if (pos[r] == k) pos[r] = selpos;  // the row at position k takes the pivot's place
        if (piv) pos[r] = k;
        upd[r] = act[r] && !piv && d != 0.0f;
        l[r] = upd[r] ? (recip ? ak[r] * rd : ak[r] / d) : ak[r];
        row[r][k] = l[r];
        if (piv) chosen[r] = true;
      }
      ML_LSS_UNROLL
      for (int j = k + 1; j < NC; ++j) {
        if (j < n) {
          float v[RW];
          ML_LSS_UNROLL
          for (int r = 0; r < RW; ++r) v[r] = row[r][j];
          const float u = ml_lss_shfl<GS>(ctx, ml_lss_pick<RW>(v, sr), src);
          ML_LSS_UNROLL
          for (int r = 0; r < RW; ++r)
            if (upd[r]) row[r][j] -= l[r] * u;
        }
      }
    }
  }
  const float qnan = ml_nan();
  if (OP == 3) {
    const bool nf = status == ML_INFO_LS_NONFINITE;
    ML_LSS_UNROLL
    for (int r = 0; r < RW; ++r) {
      const int gi = i + r * GS;
      if (mine[r]) {
        ML_LSS_UNROLL
        for (int j = 0; j < NC; ++j)
          if (j < n) xm[(ml_i64)pos[r] * n + j] = nf ? qnan : row[r][j];
      }
      if (live && gi < K) pm[gi] = nf ? gi + 1 : ipk[r] + 1;
    }
    if (info && live && i == 0) info[g] = status;
    return;
  }

  // ---- the solves ----
  if (OP != 2 && status != ML_INFO_LS_NONFINITE) {  // NaN/Inf in B: every X entry NaN
    float badb = 0.0f;
    const ml_i64 cnt = (ml_i64)n * nrhs;
    if (live)
      for (ml_i64 t = i; t < cnt; t += GS)
        if (!ml_isfinite(bm[t])) badb = 1.0f;
    if (ml_lss_max<GS>(ctx, badb) != 0.0f) status = ML_INFO_LS_NONFINITE;
  }
  if (W > CW) W = CW;
  for (int c0 = 0; c0 < nrhs; c0 += W) {
    const int w = nrhs - c0 < W ? nrhs - c0 : W;
    float bv[RW][CW];
    ML_LSS_UNROLL
    for (int r = 0; r < RW; ++r) {
      const int gi = i + r * GS;
      ML_LSS_UNROLL
      for (int c = 0; c < CW; ++c) {
        float x = 0.0f;
        if (mine[r] && c < w) {
          if (OP == 2)
            x = gi == c0 + c ? 1.0f : 0.0f;
          else if (OP == 0)
            x = bm[(ml_i64)gi * nrhs + c0 + c];
          else
            x = bm[(ml_i64)(c0 + c) * n + pos[r]];
        }
        bv[r][c] = x;
      }
    }
    if (OP != 1) {
      // L y = P b: position k's value is final on the pivot row of step k.
      ML_LSS_UNROLL
      for (int k = 0; k < NC; ++k) {
        if (k < n) {
          const int id = (int)ml_lss_shfl<GS>(ctx, (float)myp[k / GS], k % GS);
          const int src = id % GS, sr = id / GS;
          ML_LSS_UNROLL
          for (int c = 0; c < CW; ++c) {
            if (c < w) {
              float v[RW];
              ML_LSS_UNROLL
              for (int r = 0; r < RW; ++r) v[r] = bv[r][c];
              const float y = ml_lss_shfl<GS>(ctx, ml_lss_pick<RW>(v, sr), src);
              ML_LSS_UNROLL
              for (int r = 0; r < RW; ++r)
                if (pos[r] > k) bv[r][c] -= row[r][k] * y;
            }
          }
        }
      }
      // U x = y, from the last position up.
      ML_LSS_UNROLL
      for (int kk = 0; kk < NC; ++kk) {
        const int k = NC - 1 - kk;
        if (k < n) {
          const int id = (int)ml_lss_shfl<GS>(ctx, (float)myp[k / GS], k % GS);
          const int src = id % GS, sr = id / GS;
          ML_LSS_UNROLL
          for (int c = 0; c < CW; ++c) {
            if (c < w) {
              float v[RW];
              ML_LSS_UNROLL
              for (int r = 0; r < RW; ++r) {
                if (pos[r] == k) bv[r][c] = bv[r][c] / row[r][k];
                v[r] = bv[r][c];
              }
              const float x = ml_lss_shfl<GS>(ctx, ml_lss_pick<RW>(v, sr), src);
              ML_LSS_UNROLL
              for (int r = 0; r < RW; ++r)
                if (pos[r] < k) bv[r][c] -= row[r][k] * x;
            }
          }
        }
      }
      ML_LSS_UNROLL
      for (int r = 0; r < RW; ++r) {
        if (mine[r]) {
          ML_LSS_UNROLL
          for (int c = 0; c < CW; ++c)
            if (c < w) xm[(ml_i64)pos[r] * nrhs + c0 + c] = status != 0 ? qnan : bv[r][c];
        }
      }
    } else {
      // A^T = U^T L^T P: U^T z = b (forward), L^T v = z (backward), x_i = v on row i.
      ML_LSS_UNROLL
      for (int k = 0; k < NC; ++k) {
        if (k < n) {
          ML_LSS_UNROLL
          for (int c = 0; c < CW; ++c) {
            if (c < w) {
              float part = 0.0f;
              ML_LSS_UNROLL
              for (int r = 0; r < RW; ++r)
                if (mine[r] && pos[r] < k) part += row[r][k] * bv[r][c];
              const float s = ml_lss_sum<GS>(ctx, part);
              ML_LSS_UNROLL
              for (int r = 0; r < RW; ++r)
                if (pos[r] == k) bv[r][c] = (bv[r][c] - s) / row[r][k];
            }
          }
        }
      }
      ML_LSS_UNROLL
      for (int kk = 0; kk < NC; ++kk) {
        const int k = NC - 1 - kk;
        if (k < n) {
          ML_LSS_UNROLL
          for (int c = 0; c < CW; ++c) {
            if (c < w) {
              float part = 0.0f;
              ML_LSS_UNROLL
              for (int r = 0; r < RW; ++r)
                if (mine[r] && pos[r] > k) part += row[r][k] * bv[r][c];
              const float s = ml_lss_sum<GS>(ctx, part);
              ML_LSS_UNROLL
              for (int r = 0; r < RW; ++r)
                if (pos[r] == k) bv[r][c] -= s;
            }
          }
        }
      }
      ML_LSS_UNROLL
      for (int r = 0; r < RW; ++r) {
        if (mine[r]) {
          ML_LSS_UNROLL
          for (int c = 0; c < CW; ++c)
            if (c < w) xm[(ml_i64)(c0 + c) * n + i + r * GS] = status != 0 ? qnan : bv[r][c];
        }
      }
    }
  }
  if (info && live && i == 0) info[g] = status;
}

// solve_triangular: lane i holds rows i + r GS (r < RW) of op(A); chunks of W <= ML_LSS_W / RW.
template <int GS, int RW>
ML_FN void ml_lss_trsm_impl(ML_CTX ctx, int n, int nrhs, int W, int flags, bool live,
                            ML_DEVICE const float *am, ML_DEVICE const float *bm,
                            ML_DEVICE float *xm, ML_DEVICE int *info, ml_i64 g) {
  constexpr int NC = GS * RW;
  constexpr int CW = ML_LSS_W / RW;
  const int i = ctx.lane;
  const bool upper = (flags & ML_K_LS_UPPER) != 0, right = (flags & ML_K_LS_RIGHT) != 0;
  const bool unit = (flags & ML_K_LS_UNIT) != 0;
  const bool lower = right ? upper : !upper;  // op(A) = A, or A^T under ML_K_LS_RIGHT
  float row[RW][NC];  // rows of op(A), its triangle only
  float dg[RW];
  bool mine[RW];
  float bad = 0.0f, zero = 1.0e9f;
  ML_LSS_UNROLL
  for (int r = 0; r < RW; ++r) {
    const int gi = i + r * GS;
    mine[r] = live && gi < n;
    dg[r] = 1.0f;
    ML_LSS_UNROLL
    for (int j = 0; j < NC; ++j) {
      float x = 0.0f;
      if (mine[r] && j < n && (lower ? j <= gi : j >= gi) && !(unit && j == gi)) {
        x = right ? am[(ml_i64)j * n + gi] : am[(ml_i64)gi * n + j];
        if (!ml_isfinite(x)) bad = 1.0f;
        if (j == gi) dg[r] = x;
      }
      row[r][j] = x;
    }
    if (mine[r] && !unit && dg[r] == 0.0f) zero = ml_fmin(zero, (float)gi);
  }
  int status = ml_lss_max<GS>(ctx, bad) != 0.0f ? ML_INFO_LS_NONFINITE : 0;
  if (status == 0) {
    const float z = ml_lss_min<GS>(ctx, zero);
    if (z < 1.0e9f) status = (int)z + 1;
    float badb = 0.0f;
    const ml_i64 cnt = (ml_i64)n * nrhs;
    if (live)
      for (ml_i64 t = i; t < cnt; t += GS)
        if (!ml_isfinite(bm[t])) badb = 1.0f;
    if (ml_lss_max<GS>(ctx, badb) != 0.0f) status = ML_INFO_LS_NONFINITE;
  }
  const float qnan = ml_nan();
  if (W > CW) W = CW;
  for (int c0 = 0; c0 < nrhs; c0 += W) {
    const int w = nrhs - c0 < W ? nrhs - c0 : W;
    float bv[RW][CW];
    ML_LSS_UNROLL
    for (int r = 0; r < RW; ++r) {
      const int gi = i + r * GS;
      ML_LSS_UNROLL
      for (int c = 0; c < CW; ++c) {
        float x = 0.0f;
        if (mine[r] && c < w)
          x = right ? bm[(ml_i64)(c0 + c) * n + gi] : bm[(ml_i64)gi * nrhs + c0 + c];
        bv[r][c] = x;
      }
    }
    ML_LSS_UNROLL
    for (int s = 0; s < NC; ++s) {
      const int k = lower ? s : NC - 1 - s;  // row k is final on slot k / GS of lane k % GS
      if (k < n) {
        ML_LSS_UNROLL
        for (int c = 0; c < CW; ++c) {
          if (c < w) {
            if (i == k % GS && !unit) bv[k / GS][c] = bv[k / GS][c] / dg[k / GS];
            const float x = ml_lss_shfl<GS>(ctx, bv[k / GS][c], k % GS);
            ML_LSS_UNROLL
            for (int r = 0; r < RW; ++r) {
              const int gi = i + r * GS;
              if (lower ? gi > k : gi < k) bv[r][c] -= row[r][k] * x;
            }
          }
        }
      }
    }
    ML_LSS_UNROLL
    for (int r = 0; r < RW; ++r) {
      const int gi = i + r * GS;
      if (mine[r]) {
        ML_LSS_UNROLL
        for (int c = 0; c < CW; ++c) {
          if (c < w) {
            const float v = status != 0 ? qnan : bv[r][c];
            if (right)
              xm[(ml_i64)(c0 + c) * n + gi] = v;
            else
              xm[(ml_i64)gi * nrhs + c0 + c] = v;
          }
        }
      }
    }
  }
  if (info && live && i == 0) info[g] = status;
}

// ---- entries (kernel_table.h); ctx.group_size 16 (max(m, n) <= 16) or 32 ----
// A group past the batch stays while the first group of its simdgroup holds a matrix (it
// shares that group's shuffles); every condition here is uniform over the simdgroup. Orders
// up to the group size: a row per lane; up to 64 (32-lane groups): two.
#define ML_LSS_PROLOGUE(M, N)                                                                   \
  if (ctx.group_id - ml_simd_seg_index(ctx) >= p.batch || ctx.lane >= ML_SIMD_WIDTH) return; \
  if ((N) < 1 || (M) < 1) return;                                                             \
  const int big_ = (M) > (N) ? (M) : (N);                                                     \
  if (big_ > ML_LSS_MAX_N || (big_ > ctx.group_size && ctx.group_size < 32)) return;          \
  const bool two = big_ > ctx.group_size;                                                     \
  const bool live = ctx.group_id < p.batch;                                                   \
  const ml_i64 g = live ? ctx.group_id : 0;                                                   \
  const int W = ml_ls_chunk(p.flags);

#define ML_LSS_DISPATCH(CALL)     \
  if (two)                        \
    CALL(32, 2);                  \
  else if (ctx.group_size >= 32)  \
    CALL(32, 1);                  \
  else                            \
    CALL(16, 1);

ML_FN void ml_lu_factor_simd(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                             ML_DEVICE float *lu, ML_DEVICE float *pivots, ML_DEVICE int *info) {
  const int m = p.m, n = p.n;
  ML_LSS_PROLOGUE(m, n)
  (void)W;
  const int K = m < n ? m : n;
  ML_DEVICE const float *am = a + g * (ml_i64)m * n;
  ML_DEVICE float *lum = lu + g * (ml_i64)m * n;
  ML_DEVICE ml_i32 *pm = (ML_DEVICE ml_i32 *)pivots + g * (ml_i64)K;
#define ML_LSS_CALL(GS, RW) \
  ml_lss_lu_impl<GS, RW, 3>(ctx, m, n, 0, 1, live, am, am, lum, pm, info, g)
  ML_LSS_DISPATCH(ML_LSS_CALL)
#undef ML_LSS_CALL
}

ML_FN void ml_solve_simd(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a, ML_DEVICE float *x,
                         ML_DEVICE const float *b, ML_DEVICE int *info) {
  const int n = p.n, nrhs = p.m;
  ML_LSS_PROLOGUE(n, n)
  if (nrhs < 0) return;
  const ml_i64 xcount = (ml_i64)n * nrhs;
  ML_DEVICE const float *am = a + g * (ml_i64)n * n;
  ML_DEVICE const float *bm = b + g * xcount;
  ML_DEVICE float *xm = x + g * xcount;
  ML_DEVICE ml_i32 *none = (ML_DEVICE ml_i32 *)info;
  if ((p.flags & ML_K_LS_RIGHT) != 0) {
#define ML_LSS_CALL(GS, RW) \
  ml_lss_lu_impl<GS, RW, 1>(ctx, n, n, nrhs, W, live, am, bm, xm, none, info, g)
    ML_LSS_DISPATCH(ML_LSS_CALL)
#undef ML_LSS_CALL
  } else {
#define ML_LSS_CALL(GS, RW) \
  ml_lss_lu_impl<GS, RW, 0>(ctx, n, n, nrhs, W, live, am, bm, xm, none, info, g)
    ML_LSS_DISPATCH(ML_LSS_CALL)
#undef ML_LSS_CALL
  }
}

ML_FN void ml_inv_simd(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a, ML_DEVICE float *x,
                       ML_DEVICE int *info) {
  const int n = p.n;
  ML_LSS_PROLOGUE(n, n)
  ML_DEVICE const float *am = a + g * (ml_i64)n * n;
  ML_DEVICE float *xm = x + g * (ml_i64)n * n;
  ML_DEVICE ml_i32 *none = (ML_DEVICE ml_i32 *)info;
#define ML_LSS_CALL(GS, RW) \
  ml_lss_lu_impl<GS, RW, 2>(ctx, n, n, n, W, live, am, am, xm, none, info, g)
  ML_LSS_DISPATCH(ML_LSS_CALL)
#undef ML_LSS_CALL
}

ML_FN void ml_solve_triangular_simd(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                    ML_DEVICE float *x, ML_DEVICE const float *b,
                                    ML_DEVICE int *info) {
  const int n = p.n, nrhs = p.m;
  ML_LSS_PROLOGUE(n, n)
  if (nrhs < 0) return;
  const ml_i64 xcount = (ml_i64)n * nrhs;
  ML_DEVICE const float *am = a + g * (ml_i64)n * n;
  ML_DEVICE const float *bm = b + g * xcount;
  ML_DEVICE float *xm = x + g * xcount;
#define ML_LSS_CALL(GS, RW) \
  ml_lss_trsm_impl<GS, RW>(ctx, n, nrhs, W, p.flags, live, am, bm, xm, info, g)
  ML_LSS_DISPATCH(ML_LSS_CALL)
#undef ML_LSS_CALL
}

#undef ML_LSS_DISPATCH
#undef ML_LSS_PROLOGUE
#undef ML_LSS_UNROLL

#endif  // ML_KERNELS_LINSYS_SIMD_H
