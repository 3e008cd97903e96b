// LU factorization with partial pivoting of one matrix per SIMDGROUP, the matrix in the lanes'
// registers, and the two ops built on it (same contract as linsys_lu.h's group kernels):
//   lu_factor  m x n A = P L U (m, n <= 64): lu and pivots (int32, LAPACK's 1-based ipiv);
//   solve      A X = B, A n x n, B n x nrhs; X A = B (ML_K_LS_RIGHT, B nrhs x n) on lines of its
//              own (solve_right_simd*: its passes need more registers than A X = B's);
//   inv        X = A^-1 (B = I generated in the kernel).
// Three table lines per op, one per register size (registers are allocated per entry, so the
// small shapes keep their occupancy): *_simd16 max(m, n) <= 16, *_simd32 17..32, *_simd64
// 33..64. Group sizes: CUDA 8 lanes for max(m, n) <= 8 (not X A = B), 16 for <= 16 (sub-warp
// groups sharing a warp), else 32; Metal 32.
// Layout: lane l holds rows l and l + GS (R = 1 or 2 rows per lane) as register arrays of C
// floats (C = 8, 16, 32 or 64 columns), indexed by compile-time constants only. Rows never
// move: the interchanges are kept as each row's current position (pos: LAPACK's row index
// after the interchanges so far), so a step costs no data movement for the swap.
// Step k (right-looking): each lane's candidate |a(r, k)| over its rows still active (position
// >= k), two simd reductions (largest value, then the smallest position among the rows that
// have it: isamax's choice), the pivot's position and owner packed in one float; the pivot
// d comes by one shuffle; the row at position k takes the pivot's old position; each active
// row scales its column-k entry (by 1 / d, or divides when |d| < FLT_MIN, as sgetf2) and
// updates its entries right of column k with the pivot row, one shuffle per column (the other
// rows take the multiplier 0: their update adds 0 times the pivot row). A zero
// pivot is recorded (info, first k + 1) and its column left unscaled and its update skipped,
// so a singular matrix keeps its factorization.
// Dynamic column index without local memory: the columns are processed in blocks of 8; a
// block's 8 steps are unrolled at constant indices 0..7, the blocks right of it (uniform
// branches skip those past n), then each row array is rotated left by 8 (C moves), so the
// next block sits at 0..7; after C / 8 blocks the rows are back in order. Only blocks of 8
// steps are unrolled (short compile, small code).
// solve / inv: the right-hand sides in registers, W columns per chunk (row r of B with row r
// of A: that is P B at r's position); the first chunk is eliminated along with the
// factorization (forward substitution for free); later chunks by a forward pass over the
// blocks; then the back substitution, blocks from the last, the x entry of position k formed
// by every lane from the shuffled z_k and U_kk (z_k * (1 / U_kk), a division when |U_kk| <
// FLT_MIN), kept by the row at position k. Each lane records which lane and slot holds
// position k (own[]), fetched by one shuffle per step of the passes. X A = B
// (ml_lus_right_chunk): each lane keeps B's entries at its rows' positions; z U = b and
// y L = z go column by column, each entry one simd sum over the rows of the other triangle
// (U's or L's column j sits at the same register index in every lane), x at the rows' own
// indices (coalesced loads and stores).
// Sub-warp groups share their warp's shuffles (constant full mask, ml_simd_shuffle_seg), so
// every group of a warp runs the same control flow: nothing branches on one matrix's data
// around a shuffle (a non-finite A is replaced by I and run; a group past the batch reads
// matrix 0 and stores nothing).
// info and NaN as the group kernels: ML_INFO_LS_NONFINITE for NaN/Inf in A (or B for solve),
// output all NaN (lu_factor: pivots 1..k); else the first zero pivot k + 1 (solve, inv: output
// NaN; lu_factor keeps the factorization).
#ifndef ML_KERNELS_LINSYS_LU_SIMD_H
#define ML_KERNELS_LINSYS_LU_SIMD_H

#include "linsys_common.h"

// ---- windows: line 0 max(m, n) <= 16, line 1 17..32, line 2 33..64 ----
ML_HOST_FN int ml_lus_window(int big, int line) {
  const int lo = line == 0 ? 1 : (line == 1 ? 17 : 33), hi = line == 0 ? 16 : (line == 1 ? 32 : 64);
  return big >= lo && big <= hi;
}
ML_HOST_FN int ml_lu_simd_scratch_floats_flags(int m, int n, int flags) {
  (void)m;
  (void)n;
  (void)flags;
  return 0;
}
ML_HOST_FN int ml_lu_factor_simd_fits(int m, int n, int flags, int line) {
  return m >= 1 && n >= 1 && flags == 0 && ml_lus_window(m > n ? m : n, line);
}
// solve: m = nrhs.
ML_HOST_FN int ml_solve_simd_fits(int m, int n, int flags, int line) {
  return m >= 0 && (flags & ML_K_LS_BITS) == 0 && ml_lus_window(n, line);
}
// X A = B: its own lines (their register use stays out of the A X = B lines').
ML_HOST_FN int ml_solve_right_simd_fits(int m, int n, int flags, int line) {
  return m >= 0 && (flags & ML_K_LS_BITS) == ML_K_LS_RIGHT && ml_lus_window(n, line);
}
ML_HOST_FN int ml_inv_simd_fits(int m, int n, int flags, int line) {
  return m == n && (flags & ML_K_LS_BITS) == 0 && ml_lus_window(n, line);
}
#define ML_LUS_FITS(op, line)                                                                 \
  ML_HOST_FN int ml_##op##_simd##line##_fits_flags(int m, int n, int flags, int scratch) {    \
    (void)scratch;                                                                            \
    return ml_##op##_simd_fits(m, n, flags, line == 16 ? 0 : (line == 32 ? 1 : 2));           \
  }
ML_LUS_FITS(lu_factor, 16)
ML_LUS_FITS(lu_factor, 32)
ML_LUS_FITS(lu_factor, 64)
ML_LUS_FITS(solve, 16)
ML_LUS_FITS(solve, 32)
ML_LUS_FITS(solve, 64)
ML_LUS_FITS(solve_right, 16)
ML_LUS_FITS(solve_right, 32)
ML_LUS_FITS(solve_right, 64)
ML_LUS_FITS(inv, 16)
ML_LUS_FITS(inv, 32)
ML_LUS_FITS(inv, 64)
#undef ML_LUS_FITS

// ---- simd helpers (every lane of the warp calls: see the header) ----
template <int GS>
ML_FN float ml_lus_shfl(ML_CTX ctx, float x, int src) {
  return ml_simd_shuffle_seg<GS>(ctx, x, src);
}
template <int GS>
ML_FN float ml_lus_max(ML_CTX ctx, float x) {
  ML_UNROLL
  for (int o = GS / 2; o > 0; o >>= 1) x = ml_fmax(x, ml_lus_shfl<GS>(ctx, x, ctx.lane ^ o));
  return x;
}
template <int GS>
ML_FN float ml_lus_min(ML_CTX ctx, float x) {
  ML_UNROLL
  for (int o = GS / 2; o > 0; o >>= 1) x = ml_fmin(x, ml_lus_shfl<GS>(ctx, x, ctx.lane ^ o));
  return x;
}
// Entry j of the row in slot s (s uniform over the group).
template <int R, int C>
ML_FN float ml_lus_pick(ML_THREAD const float *a, int s, int j) {
  return (R == 1 || s == 0) ? a[j] : a[C + j];
}
// Rotates each of the R rows of C floats left (toward index 0) or right by 8.
template <int R, int C>
ML_FN void ml_lus_rotl(ML_THREAD float *a) {
  ML_UNROLL
  for (int r = 0; r < R; ++r) {
    float t[8];
    ML_UNROLL
    for (int j = 0; j < 8; ++j) t[j] = a[r * C + j];
    ML_UNROLL
    for (int j = 0; j + 8 < C; ++j) a[r * C + j] = a[r * C + j + 8];
    ML_UNROLL
    for (int j = 0; j < 8; ++j) a[r * C + C - 8 + j] = t[j];
  }
}
template <int R, int C>
ML_FN void ml_lus_rotr(ML_THREAD float *a) {
  ML_UNROLL
  for (int r = 0; r < R; ++r) {
    float t[8];
    ML_UNROLL
    for (int j = 0; j < 8; ++j) t[j] = a[r * C + C - 8 + j];
    ML_UNROLL
    for (int j = C - 1; j >= 8; --j) a[r * C + j] = a[r * C + j - 8];
    ML_UNROLL
    for (int j = 0; j < 8; ++j) a[r * C + j] = t[j];
  }
}

// Loads chunk c0 (wc columns) of the right-hand sides into y: row r of B, or of I for inv
// (OP 2). Returns 1 when an entry read is not finite (this lane).
template <int R, int W, int GS, int OP>
ML_FN int ml_lus_load_rhs(int lane, int n, int nrhs, int c0, int wc, ML_DEVICE const float *bm,
                          ML_THREAD float *y) {
  int bad = 0;
  ML_UNROLL
  for (int r = 0; r < R; ++r) {
    const int row = lane + r * GS;
    ML_UNROLL
    for (int w = 0; w < W; ++w) {
      float x = 0.0f;
      if (row < n && w < wc) {
        if (OP == 2) {
          x = row == c0 + w ? 1.0f : 0.0f;
        } else {
          x = bm[(ml_i64)row * nrhs + c0 + w];
          if (!ml_isfinite(x)) bad = 1;
        }
      }
      y[r * W + w] = x;
    }
  }
  return bad;
}

// Lane and slot of the row at position k: own[] of lane k % GS (slot k / GS) holds
// lane * R + slot.
template <int R, int GS>
ML_FN int ml_lus_owner(ML_CTX ctx, ML_THREAD const int *own, int k) {
  const int o = (R == 1 || k < GS) ? own[0] : own[R - 1];
  return (int)ml_lus_shfl<GS>(ctx, (float)o, k & (GS - 1));
}

// Sum over the GS lanes (xor butterfly: every lane ends with the same bits).
template <int GS>
ML_FN float ml_lus_sum(ML_CTX ctx, float x) {
  ML_UNROLL
  for (int o = GS / 2; o > 0; o >>= 1) x += ml_lus_shfl<GS>(ctx, x, ctx.lane ^ o);
  return x;
}

// X A = B for right-hand-side rows c0 .. c0 + wc - 1 (B nrhs x n at bm) after the
// factorization P A = L U in a (rows in their registers, at positions pos): x P^T L U = b
// for each row b. y[r * W + w] follows row r's position p = pos[r]: first b(p), then z(p) of
// z U = b (columns ascending: z_j = (b_j - sum_{i<j} z_i U_ij) / U_jj, the sum over the rows
// above j one simd sum, U's column j at the same register index in every lane), then y(p) of
// y L = z (descending: y_i = z_i - sum_{j>i} y_j L_ji); then x = y P is y at the rows' own
// indices (x_r = y(pos[r])). On return a is back in order.
template <int C, int R, int W, int GS>
ML_FN void ml_lus_right_chunk(ML_CTX ctx, int n, int c0, int wc, ML_THREAD float *a,
                              ML_THREAD const int *pos, ML_DEVICE const float *bm,
                              ML_THREAD float *y) {
  constexpr int NB = C / 8;
  const int nbn = (n + 7) / 8;
  ML_UNROLL
  for (int r = 0; r < R; ++r) {
    const int row = ctx.lane + r * GS;
    ML_UNROLL
    for (int w = 0; w < W; ++w)
      y[r * W + w] = (row < n && w < wc) ? bm[(ml_i64)(c0 + w) * n + pos[r]] : 0.0f;
  }
  for (int kb = 0; kb < NB; ++kb) {
    ML_UNROLL
    for (int kk = 0; kk < 8; ++kk) {
      const int j = kb * 8 + kk;
      if (j < n) {
        ML_UNROLL
        for (int w = 0; w < W; ++w) {
          if (w < wc) {
            float c = 0.0f;
            ML_UNROLL
            for (int r = 0; r < R; ++r)
              if (pos[r] < j) c = ml_fma(y[r * W + w], a[r * C + kk], c);
            const float sum = ml_lus_sum<GS>(ctx, c);
            ML_UNROLL
            for (int r = 0; r < R; ++r) {
              if (pos[r] == j) {
                const float d = a[r * C + kk], v = y[r * W + w] - sum;
                if (ml_fabs(d) >= ML_FLT_MIN)
                  y[r * W + w] = v * (1.0f / d);
                else
                  y[r * W + w] = v / d;
              }
            }
          }
        }
      }
    }
    if (NB > 1) ml_lus_rotl<R, C>(a);
  }
  for (int t = 0; t + 1 < nbn; ++t) ml_lus_rotl<R, C>(a);
  for (int kb = nbn - 1; kb >= 0; --kb) {
    ML_UNROLL
    for (int kk = 7; kk >= 0; --kk) {
      const int i = kb * 8 + kk;
      if (i < n) {
        ML_UNROLL
        for (int w = 0; w < W; ++w) {
          if (w < wc) {
            float c = 0.0f;
            ML_UNROLL
            for (int r = 0; r < R; ++r)
              if (pos[r] > i) c = ml_fma(y[r * W + w], a[r * C + kk], c);
            const float sum = ml_lus_sum<GS>(ctx, c);
            ML_UNROLL
            for (int r = 0; r < R; ++r)
              if (pos[r] == i) y[r * W + w] -= sum;
          }
        }
      }
    }
    if (kb > 0) ml_lus_rotr<R, C>(a);
  }
}
// OP: 0 lu_factor (o0 lu, o1 pivots), 1 solve (o0 x, b), 2 inv (o0 x). C columns per row, R
// rows per lane, GS lanes.
template <int C, int R, int GS, int OP>
ML_FN void ml_lus_impl(ML_CTX ctx, ML_PARAMS p, ML_DEVICE int *info, ML_DEVICE const float *a_in,
                       ML_DEVICE float *o0, ML_DEVICE float *o1, ML_DEVICE const float *b) {
  constexpr int NB = C / 8;               // column blocks
  constexpr int W = C >= 64 ? 8 : (C >= 16 ? 16 : 8);  // right-hand sides per chunk
  const int lane = ctx.lane;
  const bool live = ctx.group_id < p.batch;
  const ml_i64 g = live ? ctx.group_id : 0;
  const int n = p.n, m = OP == 0 ? p.m : n, K = m < n ? m : n;
  constexpr bool SOLVE = OP == 1 || OP == 3, RIGHT = OP == 3;
  const int nrhs = SOLVE ? p.m : (OP == 2 ? n : 0);
  const int nbn = (n + 7) / 8;            // blocks holding columns
  ML_DEVICE const float *am = a_in + g * (ml_i64)m * n;
  ML_DEVICE const float *bm = SOLVE ? b + g * (ml_i64)n * nrhs : a_in;

  float a[R * C];
  int pos[R];
  int bad = 0;
  ML_UNROLL
  for (int r = 0; r < R; ++r) {
    const int row = lane + r * GS;
    pos[r] = row < m ? row : -1;  // -1: no row (never active)
    ML_UNROLL
    for (int j = 0; j < C; ++j) {
      float x = 0.0f;
      if (row < m && j < n) {
        x = am[(ml_i64)row * n + j];
        if (!ml_isfinite(x)) bad = 1;
      }
      a[r * C + j] = x;
    }
  }
  const bool abad = (ml_simd_vote_seg<GS>(ctx, bad != 0) & 1) != 0;
  if (abad) {  // factor I instead (identity pivots, no NaN arithmetic); the output is NaN
    ML_UNROLL
    for (int r = 0; r < R; ++r)
      ML_UNROLL
    for (int j = 0; j < C; ++j) a[r * C + j] = (lane + r * GS == j && j < K) ? 1.0f : 0.0f;
  }

  float y[OP == 0 ? 1 : R * W];
  int own[R];
  int wc = 0, bbad = 0;
  if (RIGHT) {  // B nrhs x n, all checked now; no chunk goes with the factorization
    for (ml_i64 t = lane; t < (ml_i64)nrhs * n; t += GS)
      if (!ml_isfinite(bm[t])) bbad = 1;
  } else if (OP != 0) {
    wc = nrhs < W ? nrhs : W;
    bbad = ml_lus_load_rhs<R, W, GS, OP>(lane, n, nrhs, 0, wc, bm, y);
    if (SOLVE) {  // the later chunks' entries: checked now, so no output is written twice
      ML_UNROLL
      for (int r = 0; r < R; ++r) {
        const int row = lane + r * GS;
        if (row < n)
          for (int c = W; c < nrhs; ++c)
            if (!ml_isfinite(bm[(ml_i64)row * nrhs + c])) bbad = 1;
      }
    }
  }
  ML_UNROLL
  for (int r = 0; r < R; ++r) own[r] = 0;
  const bool bnf = SOLVE && (ml_simd_vote_seg<GS>(ctx, bbad != 0) & 1) != 0;

  // ---- the factorization (and the first chunk's forward substitution) ----
  ML_DEVICE ml_i32 *pm = (ML_DEVICE ml_i32 *)o1 + g * (ml_i64)K;
  int sing = 0;
  for (int kb = 0; kb < NB; ++kb) {
    ML_UNROLL
    for (int kk = 0; kk < 8; ++kk) {
      const int k = kb * 8 + kk;
      if (k < K) {  // uniform
        // This lane's candidate: largest |a(r, k)| over its active rows, ties to the lower
        // position; key = position * 128 + lane * R + slot.
        float cv = -1.0f, ck = 1.0e9f;
        ML_UNROLL
        for (int r = 0; r < R; ++r) {
          if (pos[r] >= k) {
            const float v = ml_fmax(ml_fabs(a[r * C + kk]), 0.0f);  // (a NaN counts as 0)
            const float key = (float)(pos[r] * 128 + lane * R + r);
            if (v > cv || (v == cv && key < ck)) {
              cv = v;
              ck = key;
            }
          }
        }
        const float mx = ml_lus_max<GS>(ctx, cv);
        const int key = (int)ml_lus_min<GS>(ctx, cv == mx ? ck : 1.0e9f);
        const int ppos = key >> 7, oid = key & 127, ol = oid / R, os = oid - ol * R;
        const float d = ml_lus_shfl<GS>(ctx, ml_lus_pick<R, C>(a, os, kk), ol);
        if (d == 0.0f && sing == 0) sing = k + 1;
        if (OP == 0 && live && lane == 0) pm[k] = ppos + 1;
        ML_UNROLL
        for (int r = 0; r < R; ++r) {
          if (OP != 0 && !RIGHT && lane + r * GS == k) own[r] = oid;
          if (pos[r] == k) pos[r] = ppos;  // the row at position k takes the pivot's place
          if (lane == ol && r == os) pos[r] = k;
        }
        // Multipliers of the rows below (0 for the others and for a zero pivot).
        float l[R];
        const bool recip = ml_fabs(d) >= ML_FLT_MIN;
        const float rd = 1.0f / d;
        ML_UNROLL
        for (int r = 0; r < R; ++r) {
          float li = 0.0f;
          if (pos[r] > k && d != 0.0f) {
            const float v = a[r * C + kk];
            if (recip)
              li = v * rd;
            else
              li = v / d;
            a[r * C + kk] = li;
          }
          l[r] = li;
        }
        // The rest of this block, then the blocks right of it that hold columns.
        ML_UNROLL
        for (int j = 0; j < 8; ++j) {
          if (j > kk) {
            const float u = ml_lus_shfl<GS>(ctx, ml_lus_pick<R, C>(a, os, j), ol);
            ML_UNROLL
            for (int r = 0; r < R; ++r) a[r * C + j] = ml_fma(-l[r], u, a[r * C + j]);
          }
        }
        ML_UNROLL
        for (int jb = 1; jb < NB; ++jb) {
          if (jb < nbn - kb) {  // uniform
            ML_UNROLL
            for (int jj = 0; jj < 8; ++jj) {
              const int j = jb * 8 + jj;
              const float u = ml_lus_shfl<GS>(ctx, ml_lus_pick<R, C>(a, os, j), ol);
              ML_UNROLL
              for (int r = 0; r < R; ++r) a[r * C + j] = ml_fma(-l[r], u, a[r * C + j]);
            }
          }
        }
        if (OP != 0 && !RIGHT) {
          ML_UNROLL
          for (int w = 0; w < W; ++w) {
            if (w < wc) {
              const float u = ml_lus_shfl<GS>(ctx, ml_lus_pick<R, W>(y, os, w), ol);
              ML_UNROLL
              for (int r = 0; r < R; ++r) y[r * W + w] = ml_fma(-l[r], u, y[r * W + w]);
            }
          }
        }
      }
    }
    if (NB > 1) ml_lus_rotl<R, C>(a);
  }

  const float qnan = ml_nan();
  if (OP == 0) {
    if (live) {
      ML_DEVICE float *lum = o0 + g * (ml_i64)m * n;
      ML_UNROLL
      for (int r = 0; r < R; ++r) {
        if (lane + r * GS < m) {
          ML_DEVICE float *dst = lum + (ml_i64)pos[r] * n;
          ML_UNROLL
          for (int j = 0; j < C; ++j)
            if (j < n) dst[j] = abad ? qnan : a[r * C + j];
        }
      }
      if (info && lane == 0) info[g] = abad ? ML_INFO_LS_NONFINITE : sing;
    }
    return;
  }

  // ---- the substitutions, chunk by chunk ----
  const int status = (abad || bnf) ? ML_INFO_LS_NONFINITE : sing;
  ML_DEVICE float *xm = o0 + g * (ml_i64)n * nrhs;
  for (int c0 = 0; c0 < nrhs; c0 += W) {
    wc = nrhs - c0 < W ? nrhs - c0 : W;
    if (RIGHT) {
      ml_lus_right_chunk<C, R, W, GS>(ctx, n, c0, wc, a, pos, bm, y);
      if (live) {
        ML_UNROLL
        for (int r = 0; r < R; ++r) {
          const int row = lane + r * GS;
          if (row < n) {
            ML_UNROLL
            for (int w = 0; w < W; ++w)
              if (w < wc) xm[(ml_i64)(c0 + w) * n + row] = status != 0 ? qnan : y[r * W + w];
          }
        }
      }
      continue;
    }
    if (c0 > 0) {  // load and eliminate: L z = P b
      (void)ml_lus_load_rhs<R, W, GS, OP>(lane, n, nrhs, c0, wc, bm, y);
      for (int kb = 0; kb < NB; ++kb) {
        ML_UNROLL
        for (int kk = 0; kk < 8; ++kk) {
          const int k = kb * 8 + kk;
          if (k < n) {
            const int oid = ml_lus_owner<R, GS>(ctx, own, k);
            const int ol = oid / R, os = oid - ol * R;
            float lf[R];
            ML_UNROLL
            for (int r = 0; r < R; ++r) lf[r] = pos[r] > k ? a[r * C + kk] : 0.0f;
            ML_UNROLL
            for (int w = 0; w < W; ++w) {
              if (w < wc) {
                const float u = ml_lus_shfl<GS>(ctx, ml_lus_pick<R, W>(y, os, w), ol);
                ML_UNROLL
                for (int r = 0; r < R; ++r) y[r * W + w] = ml_fma(-lf[r], u, y[r * W + w]);
              }
            }
          }
        }
        if (NB > 1) ml_lus_rotl<R, C>(a);
      }
    }
    // U x = z, from the last position: block nbn - 1 first (rotated to 0..7), then right.
    for (int t = 0; t + 1 < nbn; ++t) ml_lus_rotl<R, C>(a);
    for (int kb = nbn - 1; kb >= 0; --kb) {
      ML_UNROLL
      for (int kk = 7; kk >= 0; --kk) {
        const int k = kb * 8 + kk;
        if (k < n) {
          const int oid = ml_lus_owner<R, GS>(ctx, own, k);
          const int ol = oid / R, os = oid - ol * R;
          const float dk = ml_lus_shfl<GS>(ctx, ml_lus_pick<R, C>(a, os, kk), ol);
          const bool recip = ml_fabs(dk) >= ML_FLT_MIN;
          const float rd = 1.0f / dk;
          float lf[R];
          ML_UNROLL
          for (int r = 0; r < R; ++r) lf[r] = pos[r] < k ? a[r * C + kk] : 0.0f;
          ML_UNROLL
          for (int w = 0; w < W; ++w) {
            if (w < wc) {
              const float t = ml_lus_shfl<GS>(ctx, ml_lus_pick<R, W>(y, os, w), ol);
              float xk;
              if (recip)
                xk = t * rd;
              else
                xk = t / dk;
              ML_UNROLL
              for (int r = 0; r < R; ++r) {
                const float v = ml_fma(-lf[r], xk, y[r * W + w]);
                y[r * W + w] = pos[r] == k ? xk : (pos[r] < k ? v : y[r * W + w]);
              }
            }
          }
        }
      }
      if (kb > 0) ml_lus_rotr<R, C>(a);
    }
    if (live) {
      ML_UNROLL
      for (int r = 0; r < R; ++r) {
        if (lane + r * GS < n) {
          ML_DEVICE float *dst = xm + (ml_i64)pos[r] * nrhs + c0;
          ML_UNROLL
          for (int w = 0; w < W; ++w)
            if (w < wc) dst[w] = status != 0 ? qnan : y[r * W + w];
        }
      }
    }
  }
  if (live && info && lane == 0) info[g] = status;
}

// The entries: line 0 (max(m, n) <= 16), 1 (17..32), 2 (33..64). ctx.group_size: 8 (line 0,
// max(m, n) <= 8, not X A = B), 16 (line 0) or 32 (every line; a larger group runs its first
// simdgroup); other shapes and group sizes are left untouched.
// (info first: not itself a table kernel.)
template <int LINE, int OP>
ML_FN void ml_lus_entry(ML_CTX ctx, ML_PARAMS p, ML_DEVICE int *info, ML_DEVICE const float *a,
                        ML_DEVICE float *o0, ML_DEVICE float *o1, ML_DEVICE const float *b) {
  // A group past the batch stays while the first group of its warp holds a matrix.
  if (ctx.group_id - ml_simd_seg_index(ctx) >= p.batch || ctx.lane >= ML_SIMD_WIDTH) return;
  const int m = OP == 0 ? p.m : p.n, n = p.n, big = m > n ? m : n;
  if (!ml_lus_window(big, LINE) || (OP == 2 && p.m != n) || m < 1) return;
  const int gs = ctx.group_size;
  if (LINE == 0) {
    if (gs == 8) {  // (X A = B: 16 lanes, see cuda/launch_config.h)
      if (big <= 8 && OP != 3) ml_lus_impl<8, 1, 8, OP>(ctx, p, info, a, o0, o1, b);
    } else if (gs == 16) {
      ml_lus_impl<16, 1, 16, OP>(ctx, p, info, a, o0, o1, b);
    } else if (gs >= 32) {
      ml_lus_impl<16, 1, 32, OP>(ctx, p, info, a, o0, o1, b);
    }
  } else if (gs >= 32) {
    if (LINE == 1)
      ml_lus_impl<32, 1, 32, OP>(ctx, p, info, a, o0, o1, b);
    else
      ml_lus_impl<64, 2, 32, OP>(ctx, p, info, a, o0, o1, b);
  }
}

ML_FN void ml_lu_factor_simd16(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                 ML_DEVICE float *lu, ML_DEVICE float *pivots,
                                 ML_DEVICE int *info) {
  ml_lus_entry<0, 0>(ctx, p, info, a, lu, pivots, a);
}
ML_FN void ml_solve_simd16(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a, ML_DEVICE float *x,
                             ML_DEVICE const float *b, ML_DEVICE int *info) {
  ml_lus_entry<0, 1>(ctx, p, info, a, x, x, b);
}
ML_FN void ml_solve_right_simd16(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                   ML_DEVICE float *x, ML_DEVICE const float *b,
                                   ML_DEVICE int *info) {
  ml_lus_entry<0, 3>(ctx, p, info, a, x, x, b);
}
ML_FN void ml_inv_simd16(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a, ML_DEVICE float *x,
                           ML_DEVICE int *info) {
  ml_lus_entry<0, 2>(ctx, p, info, a, x, x, a);
}
ML_FN void ml_lu_factor_simd32(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                 ML_DEVICE float *lu, ML_DEVICE float *pivots,
                                 ML_DEVICE int *info) {
  ml_lus_entry<1, 0>(ctx, p, info, a, lu, pivots, a);
}
ML_FN void ml_solve_simd32(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a, ML_DEVICE float *x,
                             ML_DEVICE const float *b, ML_DEVICE int *info) {
  ml_lus_entry<1, 1>(ctx, p, info, a, x, x, b);
}
ML_FN void ml_solve_right_simd32(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                   ML_DEVICE float *x, ML_DEVICE const float *b,
                                   ML_DEVICE int *info) {
  ml_lus_entry<1, 3>(ctx, p, info, a, x, x, b);
}
ML_FN void ml_inv_simd32(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a, ML_DEVICE float *x,
                           ML_DEVICE int *info) {
  ml_lus_entry<1, 2>(ctx, p, info, a, x, x, a);
}
ML_FN void ml_lu_factor_simd64(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                 ML_DEVICE float *lu, ML_DEVICE float *pivots,
                                 ML_DEVICE int *info) {
  ml_lus_entry<2, 0>(ctx, p, info, a, lu, pivots, a);
}
ML_FN void ml_solve_simd64(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a, ML_DEVICE float *x,
                             ML_DEVICE const float *b, ML_DEVICE int *info) {
  ml_lus_entry<2, 1>(ctx, p, info, a, x, x, b);
}
ML_FN void ml_solve_right_simd64(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                   ML_DEVICE float *x, ML_DEVICE const float *b,
                                   ML_DEVICE int *info) {
  ml_lus_entry<2, 3>(ctx, p, info, a, x, x, b);
}
ML_FN void ml_inv_simd64(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a, ML_DEVICE float *x,
                           ML_DEVICE int *info) {
  ml_lus_entry<2, 2>(ctx, p, info, a, x, x, a);
}

#endif  // ML_KERNELS_LINSYS_LU_SIMD_H
