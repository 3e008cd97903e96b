// The step kernels of the blocked linear systems (core/src/blocked_linsys.cpp sequences them;
// docs/design.md section 5.7): cholesky, lu_factor, solve, inv and solve_triangular for
// matrices beyond the one-group kernels' shared-memory window (linsys_*.h).
//
// Working matrices are column-major in the workspace. Per matrix a stat slot (operand 0 of
// every step below, ML_STAT_FLOATS floats): [1] 1 when an entry the op reads is not finite
// (set by any group of ls_load that meets one: every writer stores the same value), [2] the
// info k > 0 as a float (exact: n <= 16384), 0 while none; [0], [3] unused (zero).
// The products between the steps are the shared gemm step (or the backend's own product).
#ifndef ML_KERNELS_LINSYS_BLOCKED_H
#define ML_KERNELS_LINSYS_BLOCKED_H

#include "blocked_common.h"
#include "linsys_cholesky.h"
#include "linsys_common.h"

// ls_load / ls_store flags (p.flags).
#define ML_LSB_STRAIGHT 1   // W(i, c) <-> src[(c0 + c) * sld + i] (else src[i * sld + c0 + c])
#define ML_LSB_LOWER 2      // only W's lower triangle (i >= c) is read / written; zeros elsewhere
#define ML_LSB_UPPER 4      // only W's upper triangle (i <= c)
#define ML_LSB_UNIT 8       // the diagonal is neither read nor checked (ones in W)
#define ML_LSB_SRC_B 16     // load: the source is the right-hand sides (the o2 slot), else a
#define ML_LSB_EYE 32       // load: W(i, c) = (i == c0 + c), no source
#define ML_LSB_CHECK 64     // load: only check the source's entries for NaN / Inf, W untouched
#define ML_LSB_NAN_INFO 128 // store: NaN for a matrix with info k too (else only non-finite)
// ls_load / ls_store integers: the rows of the source / output (row-major: rows x sld floats a
// matrix), its row stride, the column offset c0 (in W's columns).
#define ML_LSB_SROWS(p) ((p).i[0])
#define ML_LSB_SLD(p) ((p).i[1])
#define ML_LSB_C0(p) ((p).i[2])
// ls_trsm flags: op(T) is lower triangular (else upper), unit diagonal, op(T) = T^T, and the
// right-hand side vectors are the rows of their block (else its columns).
#define ML_LSB_T_LOWER 1
#define ML_LSB_T_UNIT 2
#define ML_LSB_T_TRANS 4
#define ML_LSB_T_ROWS 8
// ls_laswp flags: the interchanges in reverse order (P^T, else P).
#define ML_LSB_REVERSE 1

// Widest diagonal block of ls_potrf / ls_trsm and vectors per group of ls_trsm.
#define ML_LSB_MAX_NB 64
#define ML_LSB_TRSM_VECS 32

// Whether matrix b's stat slot says an entry read was not finite.
ML_FN int ml_lsb_bad(ML_STEP_PARAMS p, ML_DEVICE const float *ws, ml_i64 b) {
  return ws[p.off[0] + b * p.stride[0] + 1] != 0.0f;
}

// ls_init: every stat slot zeroed. Groups: ceil(batch / group size), a matrix per lane.
ML_FN void ml_step_ls_init(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 b = ctx.group_id * ctx.group_size + ctx.lane;
  if (b >= p.batch) return;
  ML_DEVICE float *st = ws + p.off[0] + b * p.stride[0];
  for (int q = 0; q < ML_STAT_FLOATS; ++q) st[q] = 0.0f;
}

// Whether W's entry (i, c) is in what the ls_load / ls_store flags select.
ML_FN int ml_lsb_selected(int flags, int i, int c) {
  if ((flags & ML_LSB_LOWER) && c > i) return 0;
  if ((flags & ML_LSB_UPPER) && c < i) return 0;
  return 1;
}

// ls_load: W (operand 1, p.m x p.n, ld[1]) from the call's input a, or from the right-hand
// sides B (ML_LSB_SRC_B: the o2 slot), matrix first + b of ML_LSB_SROWS rows, row-major with
// row stride ML_LSB_SLD: W(i, c) = src[i * sld + c0 + c] (A, or B of A X = B, read along
// rows), or with ML_LSB_STRAIGHT src[(c0 + c) * sld + i] (B of X A = B, whose rows are the
// columns of B^T; A^T). Only the selected triangle is read (zeros elsewhere; ML_LSB_UNIT:
// ones on the diagonal, not read); a NaN / Inf among the entries read sets stat[1].
// ML_LSB_EYE: the columns c0.. of the identity. ML_LSB_CHECK: the check alone. Groups:
// batch x ceil(m / 32) x ceil(n / 32), a 32 x 32 tile each through shared memory (32 x 33).
ML_FN void ml_step_ls_load(ML_STEP_ARGS) {
  (void)o0, (void)o1, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int m = p.m, n = p.n, f = p.flags, sld = ML_LSB_SLD(p), c0 = ML_LSB_C0(p);
  int i0 = 0, j0 = 0;
  const ml_i64 b = ml_step_tile_of(ctx, m, n, &i0, &j0);
  const int straight = (f & ML_LSB_STRAIGHT) != 0, eye = (f & ML_LSB_EYE) != 0;
  ML_DEVICE const float *src = (f & ML_LSB_SRC_B) ? (ML_DEVICE const float *)o2 : a;
  src += (p.first + b) * ((ml_i64)ML_LSB_SROWS(p) * sld);
  ML_SHARED float *tile = ctx.scratch;  // tile[c * 33 + r] = W(i0 + r, j0 + c)
  int bad = 0;
  for (int e = ctx.lane; e < 32 * 32; e += ctx.group_size) {
    // Along the source's rows: W's columns fastest, or W's rows when straight.
    const int hi = e / 32, lo = e % 32;
    const int r = straight ? lo : hi, c = straight ? hi : lo;
    const int i = i0 + r, cc = j0 + c;
    float x = 0.0f;
    if (i < m && cc < n) {
      if (eye) {
        x = i == c0 + cc ? 1.0f : 0.0f;
      } else if ((f & ML_LSB_UNIT) && i == cc) {
        x = 1.0f;
      } else if (ml_lsb_selected(f, i, cc)) {
        x = straight ? src[(ml_i64)(c0 + cc) * sld + i] : src[(ml_i64)i * sld + c0 + cc];
        if (!ml_isfinite(x)) bad = 1;
      }
    }
    tile[c * 33 + r] = x;
  }
  if (bad) ws[p.off[0] + b * p.stride[0] + 1] = 1.0f;
  if (f & ML_LSB_CHECK) return;
  ml_barrier(ctx);
  ML_DEVICE float *W = ws + p.off[1] + b * p.stride[1];
  for (int e = ctx.lane; e < 32 * 32; e += ctx.group_size) {
    const int c = e / 32, r = e % 32;
    const int i = i0 + r, cc = j0 + c;
    if (i < m && cc < n) W[(ml_i64)cc * p.ld[1] + i] = tile[c * 33 + r];
  }
}

// ls_store: the call's output o0 (matrix first + b, ML_LSB_SROWS rows, row-major, row stride
// ML_LSB_SLD) from W (operand 1, p.m x p.n, ld[1]), the inverse of ls_load's mapping; entries
// outside the selected triangle are stored as 0 (ML_LSB_UNIT: ones on the diagonal). NaN
// everywhere for a matrix with stat[1] set, or (ML_LSB_NAN_INFO) with an info k. Groups and
// tiles as ls_load.
ML_FN void ml_step_ls_store(ML_STEP_ARGS) {
  (void)a, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int m = p.m, n = p.n, f = p.flags, sld = ML_LSB_SLD(p), c0 = ML_LSB_C0(p);
  int i0 = 0, j0 = 0;
  const ml_i64 b = ml_step_tile_of(ctx, m, n, &i0, &j0);
  ML_DEVICE const float *st = ws + p.off[0] + b * p.stride[0];
  const int nan = st[1] != 0.0f || ((f & ML_LSB_NAN_INFO) && st[2] != 0.0f);
  const int straight = (f & ML_LSB_STRAIGHT) != 0;
  ML_DEVICE const float *W = ws + p.off[1] + b * p.stride[1];
  ML_DEVICE float *out = o0 + (p.first + b) * ((ml_i64)ML_LSB_SROWS(p) * sld);
  ML_SHARED float *tile = ctx.scratch;  // tile[c * 33 + r] = W(i0 + r, j0 + c)
  for (int e = ctx.lane; e < 32 * 32; e += ctx.group_size) {
    const int c = e / 32, r = e % 32;
    const int i = i0 + r, cc = j0 + c;
    float x = 0.0f;
    if (i < m && cc < n) {
      if ((f & ML_LSB_UNIT) && i == cc)
        x = 1.0f;
      else if (ml_lsb_selected(f, i, cc))
        x = W[(ml_i64)cc * p.ld[1] + i];
    }
    tile[c * 33 + r] = x;
  }
  ml_barrier(ctx);
  const float qnan = ml_nan();
  for (int e = ctx.lane; e < 32 * 32; e += ctx.group_size) {
    const int hi = e / 32, lo = e % 32;
    const int r = straight ? lo : hi, c = straight ? hi : lo;
    const int i = i0 + r, cc = j0 + c;
    if (i >= m || cc >= n) continue;
    const float x = nan ? qnan : tile[c * 33 + r];
    if (straight)
      out[(ml_i64)(c0 + cc) * sld + i] = x;
    else
      out[(ml_i64)i * sld + c0 + cc] = x;
  }
}

// ls_info: info[first + b] = ML_INFO_LS_NONFINITE when stat[1] is set, else the info k (0
// when none). Groups: ceil(batch / group size), a matrix per lane.
ML_FN void ml_step_ls_info(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2;
  if (ctx.group_id >= p.groups || !info) return;
  const ml_i64 b = ctx.group_id * ctx.group_size + ctx.lane;
  if (b >= p.batch) return;
  ML_DEVICE const float *st = ws + p.off[0] + b * p.stride[0];
  info[p.first + b] = st[1] != 0.0f ? ML_INFO_LS_NONFINITE : (int)st[2];
}

// ls_pivots: lu_factor's pivots (int32, 1-based, the o1 slot, p.n = min(m, n) per matrix) from
// the 0-based rows in operand 1; 1..K for a matrix with stat[1] set (as LAPACK's path).
// Groups: batch x ceil(K / group size).
ML_FN void ml_step_ls_pivots(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int K = p.n;
  const ml_i64 per = (K + ctx.group_size - 1) / ctx.group_size;
  const ml_i64 b = ctx.group_id / per;
  const int k = (int)(ctx.group_id - b * per) * ctx.group_size + ctx.lane;
  if (k >= K) return;
  ML_DEVICE const float *piv = ws + p.off[1] + b * p.stride[1];
  ML_DEVICE ml_i32 *out = (ML_DEVICE ml_i32 *)o1 + (p.first + b) * (ml_i64)K;
  out[k] = ml_lsb_bad(p, ws, b) ? k + 1 : (int)piv[k] + 1;
}

// ls_potrf: the diagonal block W[k0 .. k0 + jb) x [k0 .. k0 + jb) (operand 1, ld[1]; k0 =
// p.i[0], jb = p.n <= ML_LSB_MAX_NB) := its Cholesky factor L (lower triangle, the diagonal
// included; the upper part untouched), by linsys_cholesky.h's ml_ls_potf2 in shared memory.
// A pivot that is not positive (or NaN) at column k0 + j sets stat[2] = k0 + j + 1 and leaves
// the block as it is; matrices with stat[1] or stat[2] already set are skipped (so stat[2]
// keeps the first failing minor). Groups: batch. Shared: ml_lsb_potrf_shared_floats(jb).
ML_HOST_FN int ml_lsb_potrf_shared_floats(int jb) { return jb * ml_shared_ld(jb) + jb + 32; }
ML_FN void ml_step_ls_potrf(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 b = ctx.group_id;
  ML_DEVICE float *st = ws + p.off[0] + b * p.stride[0];
  if (st[1] != 0.0f || st[2] != 0.0f) return;  // the same on every lane
  const int jb = p.n, k0 = p.i[0], ld = ml_shared_ld(jb), ldw = p.ld[1];
  ML_DEVICE float *D = ws + p.off[1] + b * p.stride[1] + (ml_i64)k0 * ldw + k0;
  ML_SHARED float *S = ctx.scratch;
  ML_SHARED float *sq = S + jb * ld;
  for (int e = ctx.lane; e < jb * jb; e += ctx.group_size) {
    const int j = e / jb, i = e - j * jb;  // down W's columns
    if (i >= j) S[i * ld + j] = D[(ml_i64)j * ldw + i];
  }
  ml_barrier(ctx);
  const int status = ml_ls_potf2(ctx, S, ld, jb, sq);
  if (status != 0) {
    if (ctx.lane == 0) st[2] = (float)(k0 + status);
    return;
  }
  for (int e = ctx.lane; e < jb * jb; e += ctx.group_size) {
    const int j = e / jb, i = e - j * jb;
    if (i > j) D[(ml_i64)j * ldw + i] = S[i * ld + j];
    if (i == j) D[(ml_i64)j * ldw + i] = sq[i];
  }
}

// ls_getf2: the panel of columns [k0, k0 + jb) of W (operand 1, p.m rows, ld[1]; k0 =
// p.i[0], jb = p.n) over its rows k0.. := its LU factorization with partial pivoting in
// place, in device memory by one group (sgetf2): per column the pivot search over the group
// (the first row of largest |value|, linsys_common.h), the interchange of the two rows
// across the panel's jb columns, then each lane scales its rows of the column by the pivot's
// reciprocal and updates them in the panel's later columns, taking its candidates for the
// next column on the way (the barriers between them order device memory too). The 0-based
// pivot rows go to operand 2 (as floats, entries
// k0 .. k0 + jb). A zero pivot sets stat[2] (if not yet set) and its column is left unscaled
// and the update skipped (sgetf2: the factorization continues). Matrices with stat[1] set
// are skipped. Groups: batch. Shared: ML_LS_RED_FLOATS.
ML_FN void ml_step_ls_getf2(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 b = ctx.group_id;
  ML_DEVICE float *st = ws + p.off[0] + b * p.stride[0];
  if (st[1] != 0.0f) return;
  const int m = p.m, jb = p.n, k0 = p.i[0], ldw = p.ld[1];
  const int lane = ctx.lane, gs = ctx.group_size;
  ML_DEVICE float *W = ws + p.off[1] + b * p.stride[1];
  ML_DEVICE float *piv = ws + p.off[2] + b * p.stride[2];
  ML_SHARED float *red = ctx.scratch;
  float best = -1.0f;
  int brow = 0;
  for (int i = k0 + lane; i < m; i += gs) {
    const float v = ml_fabs(W[(ml_i64)k0 * ldw + i]);
    if (v > best) {
      best = v;
      brow = i;
    }
  }
  ml_ls_pivot_publish(ctx, best, brow, red);
  ml_barrier(ctx);
  for (int j = 0; j < jb; ++j) {
    const int k = k0 + j;
    const int pr = ml_ls_pivot_take(ctx, red, k);
    if (lane == 0) piv[k] = (float)pr;
    if (pr != k) {
      for (int c = lane; c < jb; c += gs) {
        ML_DEVICE float *col = W + (ml_i64)(k0 + c) * ldw;
        const float t = col[k];
        col[k] = col[pr];
        col[pr] = t;
      }
    }
    ml_barrier_device(ctx);  // the panel lives in device memory: Metal needs mem_device
    ML_DEVICE float *colk = W + (ml_i64)k * ldw;
    const float d = colk[k];
    if (d == 0.0f && lane == 0 && st[2] == 0.0f) st[2] = (float)(k + 1);
    best = -1.0f;
    brow = 0;
    const int more = j + 1 < jb;
    if (d != 0.0f) {
      const int recip = ml_fabs(d) >= ML_FLT_MIN;
      const float rd = 1.0f / d;
      for (int i = k + 1 + lane; i < m; i += gs) {
        const float l = recip ? colk[i] * rd : colk[i] / d;
        colk[i] = l;
        for (int c = j + 1; c < jb; ++c) {
          ML_DEVICE float *col = W + (ml_i64)(k0 + c) * ldw;
          const float v = col[i] - l * col[k];
          col[i] = v;
          if (c == j + 1 && ml_fabs(v) > best) {
            best = ml_fabs(v);
            brow = i;
          }
        }
      }
    } else if (more) {  // zero pivot: no update, the next column's candidates as they are
      for (int i = k + 1 + lane; i < m; i += gs) {
        const float v = ml_fabs(W[(ml_i64)(k + 1) * ldw + i]);
        if (v > best) {
          best = v;
          brow = i;
        }
      }
    }
    ml_ls_pivot_publish(ctx, best, brow, red);
    ml_barrier_device(ctx);
  }
}

// ls_laswp: the row interchanges piv[k] <-> k for k in [i[1], i[2]) (operand 2, 0-based rows
// as floats), in that order or (ML_LSB_REVERSE) the reverse one, applied to columns
// [i[0], i[0] + p.n) of W (operand 1, ld[1]); matrices with stat[1] set are skipped. Groups:
// batch x ceil(p.n / group size), a column per lane.
ML_FN void ml_step_ls_laswp(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 per = (p.n + ctx.group_size - 1) / ctx.group_size;
  const ml_i64 b = ctx.group_id / per;
  const int c = (int)(ctx.group_id - b * per) * ctx.group_size + ctx.lane;
  if (c >= p.n || ml_lsb_bad(p, ws, b)) return;  // ls_getf2 skipped it: no pivots
  ML_DEVICE float *col = ws + p.off[1] + b * p.stride[1] + (ml_i64)(p.i[0] + c) * p.ld[1];
  ML_DEVICE const float *piv = ws + p.off[2] + b * p.stride[2];
  const int k0 = p.i[1], k1 = p.i[2], rev = (p.flags & ML_LSB_REVERSE) != 0;
  for (int s = 0; s < k1 - k0; ++s) {
    const int k = rev ? k1 - 1 - s : k0 + s;
    const int r = (int)piv[k];
    if (r != k) {
      const float t = col[k];
      col[k] = col[r];
      col[r] = t;
    }
  }
}

// ls_trsm: op(T) X = R for the vectors of a block R, in place (X over R): T the jb x jb block
// at operand 1 (column-major, ld[1]; jb = p.k <= ML_LSB_MAX_NB), op(T) = T or T^T
// (ML_LSB_T_TRANS), lower or upper (ML_LSB_T_LOWER: of op(T); only that triangle is read, the
// diagonal not with ML_LSB_T_UNIT). R (operand 2, ld[2]) holds p.n vectors of jb entries: its
// columns (entry e of vector v at R[v * ld + e]) or, with ML_LSB_T_ROWS, its rows (at
// R[e * ld + v]: X op(T)^T = R for a block of rows). Each group takes ML_LSB_TRSM_VECS
// vectors into shared memory with T (ml_ls_trsm_chunk: a barrier per row). Groups: batch x
// ceil(p.n / ML_LSB_TRSM_VECS). Shared: ml_lsb_trsm_shared_floats(jb).
ML_HOST_FN int ml_lsb_trsm_shared_floats(int jb) {
  return jb * ml_shared_ld(jb) + jb * ml_ls_chunk_ld(ML_LSB_TRSM_VECS);
}
ML_FN void ml_step_ls_trsm(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int jb = p.k, nv = p.n, f = p.flags;
  const ml_i64 per = (nv + ML_LSB_TRSM_VECS - 1) / ML_LSB_TRSM_VECS;
  const ml_i64 b = ctx.group_id / per;
  const int v0 = (int)(ctx.group_id - b * per) * ML_LSB_TRSM_VECS;
  const int w = ml_imin(ML_LSB_TRSM_VECS, nv - v0);
  const int ld = ml_shared_ld(jb), ldx = ml_ls_chunk_ld(ML_LSB_TRSM_VECS);
  const int rows = (f & ML_LSB_T_ROWS) != 0;
  ML_DEVICE const float *T = ws + p.off[1] + b * p.stride[1];
  ML_DEVICE float *R = ws + p.off[2] + b * p.stride[2];
  ML_SHARED float *S = ctx.scratch;  // S[i * ld + j] = T(i, j)
  ML_SHARED float *X = S + jb * ld;  // X[e * ldx + v] = entry e of vector v0 + v
  for (int e = ctx.lane; e < jb * jb; e += ctx.group_size) {
    const int j = e / jb, i = e - j * jb;
    S[i * ld + j] = T[(ml_i64)j * p.ld[1] + i];
  }
  for (int t = ctx.lane; t < jb * w; t += ctx.group_size) {
    // Consecutive lanes down R's columns: along a vector, or across the vectors (rows).
    const int q = rows ? t % w : t / jb, r = rows ? t / w : t % jb;  // vector, entry
    if (rows)
      X[r * ldx + q] = R[(ml_i64)r * p.ld[2] + v0 + q];
    else
      X[r * ldx + q] = R[(ml_i64)(v0 + q) * p.ld[2] + r];
  }
  ml_barrier(ctx);
  ml_ls_trsm_chunk(ctx, S, ld, jb, (f & ML_LSB_T_TRANS) != 0, (f & ML_LSB_T_LOWER) != 0,
                   (f & ML_LSB_T_UNIT) != 0, X, ldx, w);
  for (int t = ctx.lane; t < jb * w; t += ctx.group_size) {
    const int q = rows ? t % w : t / jb, r = rows ? t / w : t % jb;
    if (rows)
      R[(ml_i64)r * p.ld[2] + v0 + q] = X[r * ldx + q];
    else
      R[(ml_i64)(v0 + q) * p.ld[2] + r] = X[r * ldx + q];
  }
}

// ls_diag: stat[2] = k + 1 for the first exact zero W(k, k) on the diagonal of W (operand 1,
// p.n x p.n, ld[1]), when there is one (strtrs' info). Groups: batch. Shared: ML_RED_FLOATS.
ML_FN void ml_step_ls_diag(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 b = ctx.group_id;
  ML_DEVICE const float *W = ws + p.off[1] + b * p.stride[1];
  float first = -(float)(p.n + 1);  // the max of -(k + 1): the smallest k
  for (int k = ctx.lane; k < p.n; k += ctx.group_size)
    if (W[(ml_i64)k * p.ld[1] + k] == 0.0f) {
      first = ml_fmax(first, -(float)(k + 1));
      break;
    }
  first = ml_group_max(ctx, first, ctx.scratch);
  if (ctx.lane == 0 && first > -(float)(p.n + 1)) ws[p.off[0] + b * p.stride[0] + 2] = -first;
}

#endif  // ML_KERNELS_LINSYS_BLOCKED_H
