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

// The diagonal block's lower triangle (D: W's columns from (k0, k0), ldw) into shared S (ld)
// and factored there by ml_ls_potf2 (sq: its diagonal); a failing minor goes to stat[2]
// (k0 + its order). Whether the factorisation completed (the same on every lane).
ML_FN bool ml_lsb_potf2_block(ML_CTX ctx, ML_DEVICE float *st, ML_DEVICE const float *D, int ldw,
                              int jb, int k0, ML_SHARED float *S, int ld, ML_SHARED float *sq) {
  for (int e = ctx.lane; e < jb * jb; e += ctx.group_size) {
    const int j = e / jb, i = e - j * jb;  // down W's columns
    if (i >= j) S[i * ld + j] = D[(ml_i64)j * ldw + i];
  }
  ml_barrier(ctx);
  const int status = ml_ls_potf2(ctx, S, ld, jb, sq);
  if (status != 0 && ctx.lane == 0) st[2] = (float)(k0 + status);
  return status == 0;
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
  if (!ml_lsb_potf2_block(ctx, st, D, ldw, jb, k0, S, ld, sq)) return;
  for (int e = ctx.lane; e < jb * jb; e += ctx.group_size) {
    const int j = e / jb, i = e - j * jb;
    if (i > j) D[(ml_i64)j * ldw + i] = S[i * ld + j];
    if (i == j) D[(ml_i64)j * ldw + i] = sq[i];
  }
}

// ---- the GEMM-rich forms (Options::ls_gemm_form): inverted diagonal blocks ----

// X = T^-1 for the n x n lower triangular T in S (S[i * ld + j], j <= i; its diagonal in
// diag[i], or ones when unit: S's own diagonal is not read), by forward substitution on the
// columns of the identity, right-looking, all columns at once (a barrier per row): step k
// subtracts T(i, k) X(k, c) from the rows i > k of every column c <= k, and row k + 1 is then
// divided by its diagonal; each column's operations are those of its own substitution. X's
// strictly lower part goes to S's upper triangle (X(i, c) at S[c * ld + i]), its diagonal to
// xd[c]. Needs a barrier of the caller's before (S, diag published); ends with one.
ML_FN void ml_lsb_trinv(ML_CTX ctx, ML_SHARED float *S, int ld, int n, int unit,
                        ML_SHARED const float *diag, ML_SHARED float *xd) {
  const int lane = ctx.lane, gs = ctx.group_size;
  for (int e = lane; e < n * n; e += gs) {
    const int c = e / n, i = e - c * n;
    if (i > c) S[c * ld + i] = 0.0f;
    if (i == c) xd[c] = unit ? 1.0f : 1.0f / diag[c];
  }
  ml_barrier(ctx);
  for (int k = 0; k + 1 < n; ++k) {
    const int rows = n - 1 - k, cols = k + 1;
    const float dn = unit ? 1.0f : diag[k + 1];
    for (int e = lane; e < rows * cols; e += gs) {
      const int r = e / cols, c = e - r * cols, i = k + 1 + r;
      const float xk = c == k ? xd[k] : S[c * ld + k];
      float v = S[c * ld + i] - S[i * ld + k] * xk;
      if (i == k + 1 && !unit) v /= dn;
      S[c * ld + i] = v;
    }
    ml_barrier(ctx);
  }
}

// ls_potrf_inv: ls_potrf's contract for the diagonal block at k0 = p.i[0] of jb = p.n columns
// (any jb whose shared memory fits), and the upper triangle of the block := L11^T (the factor's
// transpose: the GEMM-rich Cholesky keeps L^T in W's upper triangle), and operand 2 (ld[2])
// := L11^-1 (jb x jb, zeros above the diagonal), by ml_lsb_trinv on the factor in shared
// memory. Failing and skipped matrices as ls_potrf (nothing written). Groups: batch. Shared:
// ml_lsb_potrf_inv_shared_floats(jb).
ML_HOST_FN int ml_lsb_potrf_inv_shared_floats(int jb) {
  return jb * ml_shared_ld(jb) + 2 * jb + 32;
}
ML_FN void ml_step_ls_potrf_inv(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 b = ctx.group_id;
  ML_DEVICE float *st = ws + p.off[0] + b * p.stride[0];
  if (st[1] != 0.0f || st[2] != 0.0f) return;  // the same on every lane
  const int jb = p.n, k0 = p.i[0], ld = ml_shared_ld(jb), ldw = p.ld[1], ldy = p.ld[2];
  ML_DEVICE float *D = ws + p.off[1] + b * p.stride[1] + (ml_i64)k0 * ldw + k0;
  ML_DEVICE float *Y = ws + p.off[2] + b * p.stride[2];
  ML_SHARED float *S = ctx.scratch;
  ML_SHARED float *sq = S + jb * ld;
  ML_SHARED float *xd = sq + jb;
  if (!ml_lsb_potf2_block(ctx, st, D, ldw, jb, k0, S, ld, sq)) return;
  for (int e = ctx.lane; e < jb * jb; e += ctx.group_size) {
    const int j = e / jb, i = e - j * jb;
    const float v = i > j ? S[i * ld + j] : i == j ? sq[i] : S[j * ld + i];
    D[(ml_i64)j * ldw + i] = v;  // L11 below the diagonal, L11^T above it
  }
  ml_barrier(ctx);  // S's upper triangle read above before ml_lsb_trinv overwrites it
  ml_lsb_trinv(ctx, S, ld, jb, 0, sq, xd);
  for (int e = ctx.lane; e < jb * jb; e += ctx.group_size) {
    const int j = e / jb, i = e - j * jb;
    Y[(ml_i64)j * ldy + i] = i > j ? S[j * ld + i] : i == j ? xd[i] : 0.0f;
  }
}

// ---- ls_potrf_reg: ls_potrf_inv's contract without a barrier per column ----
//
// The diagonal block of jb columns in shared memory as ls_potrf_inv's, factored and inverted
// by sub-blocks of 32 columns: each sub-block's own 32 x 32 Cholesky factor and its inverse by
// the group's first simdgroup in registers (lane i holding row i, every l_jk and every entry
// of the inverse's finished row fetched by a shuffle: no barrier inside), then the rows below
// it L21 = A21 L11^-T and the lower triangle of the rest A22 -= L21 L21^T by the whole group
// (two barriers); then the inverse's blocks below the diagonal, a block row at a time:
// X_ic = -X_ii sum_{c <= j < i0} L(i0.., j) X(j, c) (two barriers). About five barriers per 32
// columns against ls_potrf_inv's three per column. With ML_LSB_POTRF_SHARED in p.flags the
// sub-blocks stay in shared memory instead (ml_lsb_potrf_sub_sh: the first simdgroup alone, two
// simdgroup barriers a column, short loops rather than the unrolled register code). Same
// contract, info and skips as
// ls_potrf_inv; the group must have at least 32 lanes and whole simdgroups of 32 (the host
// runs it only so; smaller groups return at once). Shared: ml_lsb_potrf_reg_shared_floats(jb).
#define ML_LSB_REG_SUB 32
#define ML_LSB_POTRF_SHARED 1  // p.flags: the sub-blocks by ml_lsb_potrf_sub_sh
ML_HOST_FN int ml_lsb_potrf_reg_shared_floats(int jb) {
  return jb * ml_shared_ld(jb) + 2 * jb + 32 * (jb + 1) + 4;
}

// The sub-block of tb <= 32 columns at t0 of S (A's updated lower triangle, its diagonal on
// S's diagonal) := its factor L (strictly lower part in place, diagonal to sq[t0..]) and
// L^-1 (strictly lower part transposed into the sub-block's upper triangle, X(i, c) at
// S[c * ld + i]; diagonal to xd[t0..]), by the first simdgroup (every lane of it calls).
// Returns the order k + 1 of the first pivot that is not positive (or NaN) within the
// sub-block, 0 when none (the same on every lane; nothing written then).
ML_FN int ml_lsb_potrf_sub(ML_CTX ctx, ML_SHARED float *S, int ld, int t0, int tb,
                           ML_SHARED float *sq, ML_SHARED float *xd) {
  // Lanes i >= tb hold the identity's row (a full 32 x 32 block: no bounds in the unrolled
  // loops); a pivot that is not positive is recorded and replaced by 1 (no branch: the rest runs
  // on, its results unused).
  const int i = ctx.lane;
  ML_SHARED float *Si = S + (t0 + i) * ld + t0;
  float row[ML_LSB_REG_SUB];
  ML_UNROLL
  for (int j = 0; j < ML_LSB_REG_SUB; ++j)
    row[j] = i < tb ? (j <= i ? Si[j] : 0.0f) : (j == i ? 1.0f : 0.0f);
  int status = 0;
  float diag = 1.0f;
  ML_UNROLL
  for (int k = 0; k < ML_LSB_REG_SUB; ++k) {
    const float d = ml_simd_shuffle_full(ctx, row[k], k);
    const bool ok = d > 0.0f;
    status = status == 0 && !ok ? k + 1 : status;
    const float s = ml_sqrt(ok ? d : 1.0f), r = 1.0f / s;
    diag = i == k ? s : diag;
    const float l = i > k ? row[k] * r : 0.0f;
    row[k] = l;
    ML_UNROLL
    for (int j = k + 1; j < ML_LSB_REG_SUB; ++j) row[j] -= l * ml_simd_shuffle_full(ctx, l, j);
  }
  if (status != 0) return status;  // the same on every lane (every lane saw every pivot)
  // row[j] = L(i, j) for j < i, zero from i on. X = L^-1 by rows: row k of X is final once
  // scaled by 1 / L(k, k); every later row subtracts L(i, k) times it.
  const float rd = 1.0f / diag;
  float x[ML_LSB_REG_SUB];
  ML_UNROLL
  for (int c = 0; c < ML_LSB_REG_SUB; ++c) x[c] = c == i ? 1.0f : 0.0f;
  ML_UNROLL
  for (int k = 0; k < ML_LSB_REG_SUB; ++k) {
    ML_UNROLL
    for (int c = 0; c <= k; ++c) {
      x[c] = i == k ? x[c] * rd : x[c];
      x[c] -= row[k] * ml_simd_shuffle_full(ctx, x[c], k);
    }
  }
  if (i < tb) {
    ML_UNROLL
    for (int j = 0; j < ML_LSB_REG_SUB; ++j) {
      if (j < i) {
        Si[j] = row[j];
        S[(t0 + j) * ld + t0 + i] = x[j];
      }
    }
    sq[t0 + i] = diag;
    xd[t0 + i] = rd;
  }
  return 0;
}

// ml_lsb_potrf_sub's contract in shared memory (ls_potrf_reg with ML_LSB_POTRF_SHARED): the
// first simdgroup factors the sub-block right-looking in place, lane i owning row i (two
// simdgroup barriers a column, no group barrier), then inverts it a column a lane (lane c
// substitutes down column c of X alone: no barrier). Short loops instead of unrolled code.
ML_FN int ml_lsb_potrf_sub_sh(ML_CTX ctx, ML_SHARED float *S, int ld, int t0, int tb,
                              ML_SHARED float *sq, ML_SHARED float *xd) {
  const int i = ctx.lane;
  ML_SHARED float *B = S + t0 * ld + t0;  // B[r * ld + c]: the sub-block
  const bool mine = i < tb;
  for (int k = 0; k < tb; ++k) {
    const float d = B[k * ld + k];
    if (!(d > 0.0f)) return k + 1;  // the same on every lane
    const float s = ml_sqrt(d), r = 1.0f / s;
    float l = 0.0f;
    if (mine && i > k) {
      l = B[i * ld + k] * r;
      B[i * ld + k] = l;
    }
    if (i == k) sq[t0 + k] = s;
    ml_simd_barrier(ctx);
    if (mine && i > k)
      for (int j = k + 1; j <= i; ++j) B[i * ld + j] -= l * B[j * ld + k];
    ml_simd_barrier(ctx);
  }
  // Column c of X = L^-1 by lane c: X(c, c) = 1 / L(c, c), X(q, c) = -(sum_{c <= j < q}
  // L(q, j) X(j, c)) / L(q, q), X(q, c) at B[c * ld + q].
  if (mine) xd[t0 + i] = 1.0f / sq[t0 + i];
  ml_simd_barrier(ctx);
  if (mine) {
    const int c = i;
    for (int q = c + 1; q < tb; ++q) {
      ML_SHARED const float *Lq = B + q * ld;
      float v = Lq[c] * xd[t0 + c];
      for (int j = c + 1; j < q; ++j) v += Lq[j] * B[c * ld + j];
      B[c * ld + q] = -v * xd[t0 + q];
    }
  }
  return 0;
}

ML_FN void ml_step_ls_potrf_reg(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups || ctx.group_size < ML_LSB_REG_SUB) return;
  const ml_i64 b = ctx.group_id;
  ML_DEVICE float *st = ws + p.off[0] + b * p.stride[0];
  if (st[1] != 0.0f || st[2] != 0.0f) return;  // the same on every lane
  const int jb = p.n, k0 = p.i[0], ld = ml_shared_ld(jb), ldw = p.ld[1], ldy = p.ld[2];
  const int lane = ctx.lane, gs = ctx.group_size;
  ML_DEVICE float *D = ws + p.off[1] + b * p.stride[1] + (ml_i64)k0 * ldw + k0;
  ML_DEVICE float *Y = ws + p.off[2] + b * p.stride[2];
  ML_SHARED float *S = ctx.scratch;
  ML_SHARED float *sq = S + jb * ld;
  ML_SHARED float *xd = sq + jb;
  ML_SHARED float *T = xd + jb;  // 32 x (jb + 1): L21 of a sub-block, a product of the inverse
  ML_SHARED float *flag = T + ML_LSB_REG_SUB * (jb + 1);
  for (int e = lane; e < jb * jb; e += gs) {
    const int j = e / jb, i = e - j * jb;  // down W's columns
    if (i >= j) S[i * ld + j] = D[(ml_i64)j * ldw + i];
  }
  ml_barrier(ctx);
  for (int t0 = 0; t0 < jb; t0 += ML_LSB_REG_SUB) {
    const int tb = ml_imin(ML_LSB_REG_SUB, jb - t0), r0 = t0 + tb, nr = jb - r0;
    if (lane < ML_LSB_REG_SUB) {
      const int status = (p.flags & ML_LSB_POTRF_SHARED)
                             ? ml_lsb_potrf_sub_sh(ctx, S, ld, t0, tb, sq, xd)
                             : ml_lsb_potrf_sub(ctx, S, ld, t0, tb, sq, xd);
      if (lane == 0) flag[0] = (float)status;
    }
    ml_barrier(ctx);
    const int status = (int)flag[0];
    if (status != 0) {  // the same on every lane
      if (lane == 0) st[2] = (float)(k0 + t0 + status);
      return;
    }
    if (nr == 0) break;
    // L21(r, c) = sum_{t0 <= j <= c} A21(r, j) X(c, j), into T (nr x 33).
    for (int e = lane; e < nr * tb; e += gs) {
      const int rr = e / tb, c = e - rr * tb;
      ML_SHARED const float *Ar = S + (r0 + rr) * ld + t0;
      float v = Ar[c] * xd[t0 + c];
      for (int j = 0; j < c; ++j) v += Ar[j] * S[(t0 + j) * ld + t0 + c];
      T[rr * (ML_LSB_REG_SUB + 1) + c] = v;
    }
    ml_barrier(ctx);
    // L21 into S, and A22 -= L21 L21^T on A22's lower triangle (distinct entries of S).
    for (int e = lane; e < nr * tb; e += gs) {
      const int rr = e / tb, c = e - rr * tb;
      S[(r0 + rr) * ld + t0 + c] = T[rr * (ML_LSB_REG_SUB + 1) + c];
    }
    for (int e = lane; e < nr * nr; e += gs) {
      const int ii = e / nr, jj = e - ii * nr;
      if (jj > ii) continue;
      ML_SHARED const float *Ti = T + ii * (ML_LSB_REG_SUB + 1);
      ML_SHARED const float *Tj = T + jj * (ML_LSB_REG_SUB + 1);
      float v = 0.0f;
      for (int c = 0; c < tb; ++c) v += Ti[c] * Tj[c];
      S[(r0 + ii) * ld + r0 + jj] -= v;
    }
    ml_barrier(ctx);
  }
  // The inverse's blocks below its diagonal, by block rows i0: P(r, c) = sum_{c <= j < i0}
  // L(r, j) X(j, c) for c < i0 into T (ld i0 + 1), then X(r, c) = -sum_{i0 <= j <= r} X(r, j)
  // P(j, c) (X(r, c) at S[c * ld + r], X(j, j) at xd[j]).
  for (int i0 = ML_LSB_REG_SUB; i0 < jb; i0 += ML_LSB_REG_SUB) {
    const int ib = ml_imin(ML_LSB_REG_SUB, jb - i0), ldp = i0 + 1;
    for (int e = lane; e < ib * i0; e += gs) {
      const int rr = e / i0, c = e - rr * i0;
      ML_SHARED const float *Lr = S + (i0 + rr) * ld;
      float v = Lr[c] * xd[c];
      for (int j = c + 1; j < i0; ++j) v += Lr[j] * S[c * ld + j];
      T[rr * ldp + c] = v;
    }
    ml_barrier(ctx);
    for (int e = lane; e < ib * i0; e += gs) {
      const int rr = e / i0, c = e - rr * i0, r = i0 + rr;
      float v = xd[r] * T[rr * ldp + c];
      for (int j = i0; j < r; ++j) v += S[j * ld + r] * T[(j - i0) * ldp + c];
      S[c * ld + r] = -v;
    }
    ml_barrier(ctx);
  }
  for (int e = lane; e < jb * jb; e += gs) {
    const int j = e / jb, i = e - j * jb;
    // L11 below the diagonal, L11^T above it (S's upper triangle holds the inverse now).
    D[(ml_i64)j * ldw + i] = i > j ? S[i * ld + j] : i == j ? sq[i] : S[j * ld + i];
    Y[(ml_i64)j * ldy + i] = i > j ? S[j * ld + i] : i == j ? xd[i] : 0.0f;
  }
}

// ls_trtri: the inverses of op(T)'s diagonal blocks, all at once: T (operand 1, p.n x p.n,
// ld[1]) with ls_trsm's flags (ML_LSB_T_LOWER / _UNIT / _TRANS: of op(T); only that triangle
// read), blocks of nb = p.k rows from row 0 (the last one jb = p.n - q nb); block q's inverse
// Y_q = op(T)(kb.., kb..)^-1 (jb x jb, zeros outside its triangle) at operand 2 + q nb^2 (ld nb).
// An upper op(T) is inverted as the lower J op(T) J (J the reversal: backward substitution).
// Groups: batch x ceil(p.n / nb), a block each. Shared: ml_lsb_potrf_inv_shared_floats(nb).
ML_FN void ml_step_ls_trtri(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int n = p.n, nb = p.k, f = p.flags;
  const ml_i64 per = (n + nb - 1) / nb;
  const ml_i64 b = ctx.group_id / per;
  const int q = (int)(ctx.group_id - b * per), kb = q * nb, jb = ml_imin(nb, n - kb);
  const int lower = (f & ML_LSB_T_LOWER) != 0, unit = (f & ML_LSB_T_UNIT) != 0;
  const int trans = (f & ML_LSB_T_TRANS) != 0, ld = ml_shared_ld(jb), ldt = p.ld[1];
  ML_DEVICE const float *T = ws + p.off[1] + b * p.stride[1] + (ml_i64)kb * ldt + kb;
  ML_DEVICE float *Y = ws + p.off[2] + b * p.stride[2] + (ml_i64)q * nb * nb;
  ML_SHARED float *S = ctx.scratch;  // S[i * ld + j] = op(T)(map i, map j), j <= i
  ML_SHARED float *dg = S + jb * ld;
  ML_SHARED float *xd = dg + jb;
  for (int e = ctx.lane; e < jb * jb; e += ctx.group_size) {
    const int c = e / jb, r = e - c * jb;  // T(r, c), down T's columns
    const int oi = trans ? c : r, oj = trans ? r : c;  // op(T)(oi, oj)
    const int i = lower ? oi : jb - 1 - oi, j = lower ? oj : jb - 1 - oj;
    if (i > j) S[i * ld + j] = T[(ml_i64)c * ldt + r];
    if (i == j && !unit) dg[i] = T[(ml_i64)c * ldt + r];
  }
  ml_barrier(ctx);
  ml_lsb_trinv(ctx, S, ld, jb, unit, dg, xd);
  for (int e = ctx.lane; e < jb * jb; e += ctx.group_size) {
    const int c = e / jb, r = e - c * jb;  // Y(r, c)
    const int i = lower ? r : jb - 1 - r, j = lower ? c : jb - 1 - c;
    Y[(ml_i64)c * nb + r] = i > j ? S[j * ld + i] : i == j ? xd[i] : 0.0f;
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

// ls_trsm_lane: ls_trsm's contract (operands, flags, shared T) with a right-hand side vector a
// lane and no barrier inside the substitution: each lane walks its own vector's column-oriented
// substitution (row k final, divided by the diagonal unless unit, then subtracted from the
// rows after it), every entry's operations in ml_ls_trsm_chunk's order. T in shared memory as
// ls_trsm's, the group's vectors in shared memory one a column (X[e * (gs + 1) + v]). Groups:
// batch x ceil(p.n / group size). Shared: ml_lsb_trsm_lane_shared_floats(jb, group size).
ML_HOST_FN int ml_lsb_trsm_lane_shared_floats(int jb, int gs) {
  return jb * ml_shared_ld(jb) + jb * (gs + 1);
}
ML_FN void ml_step_ls_trsm_lane(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int jb = p.k, nv = p.n, f = p.flags, gs = ctx.group_size, lane = ctx.lane;
  const ml_i64 per = (nv + gs - 1) / gs;
  const ml_i64 b = ctx.group_id / per;
  const int v0 = (int)(ctx.group_id - b * per) * gs;
  const int w = ml_imin(gs, nv - v0);
  const int ld = ml_shared_ld(jb), ldx = gs + 1;
  const int rows = (f & ML_LSB_T_ROWS) != 0, trans = (f & ML_LSB_T_TRANS) != 0;
  const int lower = (f & ML_LSB_T_LOWER) != 0, unit = (f & ML_LSB_T_UNIT) != 0;
  ML_DEVICE const float *T = ws + p.off[1] + b * p.stride[1];
  ML_DEVICE float *R = ws + p.off[2] + b * p.stride[2];
  ML_SHARED float *S = ctx.scratch;  // S[i * ld + j] = T(i, j)
  ML_SHARED float *X = S + jb * ld;  // X[e * ldx + v] = entry e of vector v0 + v
  for (int e = lane; e < jb * jb; e += gs) {
    const int j = e / jb, i = e - j * jb;
    S[i * ld + j] = T[(ml_i64)j * p.ld[1] + i];
  }
  for (int t = lane; t < jb * w; t += gs) {
    const int q = rows ? t % w : t / jb, r = rows ? t / w : t % jb;  // vector, entry
    X[r * ldx + q] = rows ? R[(ml_i64)r * p.ld[2] + v0 + q] : R[(ml_i64)(v0 + q) * p.ld[2] + r];
  }
  ml_barrier(ctx);
  if (lane < w) {
    ML_SHARED float *x = X + lane;  // this lane's vector: x[e * ldx]
    for (int s = 0; s < jb; ++s) {
      const int k = lower ? s : jb - 1 - s;  // the row now final
      float xk = x[k * ldx];
      if (!unit) {
        xk /= ml_ls_op(S, ld, trans, k, k);
        x[k * ldx] = xk;
      }
      const int i0 = lower ? k + 1 : 0, i1 = lower ? jb : k;  // the rows after it
      for (int i = i0; i < i1; ++i) x[i * ldx] = x[i * ldx] - ml_ls_op(S, ld, trans, i, k) * xk;
    }
  }
  ml_barrier(ctx);
  for (int t = lane; t < jb * w; t += gs) {
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

// ---- LU panels in registers (ls_getf2_r8 / _r16 / _r32) ----
// Floats of the panel a lane may hold and the most lanes of the step's groups (more registers a
// lane spill: the QR register panels measured 128 floats at 256 lanes slower).
#define ML_LSB_REG_FLOATS 64
#define ML_LSB_REG_LANES 512

// The register plan of an LU panel of r rows and at most ib columns under groups of at most
// max_group lanes: the panel's width (<= ib; 0: none fits), its register class (8, 16 or 32
// columns: the steps ls_getf2_r8 / _r16 / _r32, ML_LSB_REG_FLOATS / class rows a lane; one
// variant a step: the three in one function spilled under nvcc) and its lanes (whole
// simdgroups, as few as hold the rows). The narrowest class that holds ib columns, else a
// narrower one whose rows fit.
ML_HOST_FN int ml_lsb_reg_plan(int r, int ib, int max_group, ML_THREAD int *cls,
                               ML_THREAD int *lanes) {
  const int most = (max_group < ML_LSB_REG_LANES ? max_group : ML_LSB_REG_LANES) / 32 * 32;
  if (most < 32 || r < 1 || ib < 1) return 0;
  for (int c = 32; c >= 8; c /= 2) {
    if (c > 8 && c / 2 >= ib) continue;  // the narrowest class that holds ib columns first
    const int rpl = ML_LSB_REG_FLOATS / c;
    const int need = ((r + rpl - 1) / rpl + 31) / 32 * 32;
    if (need > most) continue;
    *cls = c;
    *lanes = need;
    return ib < c ? ib : c;
  }
  return 0;
}

// Shared floats of ls_getf2_r* for register class cls: per column parity (the buffers alternate,
// so a column's writes never meet the previous column's late reads) each simdgroup's best
// |value| and its position (64 floats) and its candidate row's cls entries (16 simdgroups at
// most: ML_LSB_REG_LANES lanes).
#define ML_LSB_REG_SIMDS (ML_LSB_REG_LANES / 32)
ML_HOST_FN int ml_lsb_getf2_reg_shared_floats(int cls) {
  return 2 * (64 + ML_LSB_REG_SIMDS * cls);
}

// The factorisation of ml_lsb_getf2_reg on the panel x in registers (lane l holds the rows
// l + t gs of the panel's r = m - j0, jw <= NB columns): pivots to piv, a zero pivot's info to
// st[2]. Rows never move between lanes: pos[t] is the current position of the lane's row t
// (sgetf2's row after the interchanges so far; the rows past r keep positions >= r), and the
// store puts each row at its position. Per column (a compile-time index: every entry a
// register) one barrier: each simdgroup publishes its best candidate (the first position of
// largest |value|, as isamax) with that row's entries; after the barrier every lane takes the
// group's choice and the pivot row from shared memory, exchanges positions (the pivot row to
// c, the row at c to the pivot's place) and scales and updates its rows below c. The
// arithmetic is sgetf2's, as ls_getf2's.
template <int RPL, int NB>
ML_FN void ml_lsb_getf2_reg_cols(ML_CTX ctx, ML_THREAD float (*x)[NB], ML_THREAD int *pos,
                                 ML_DEVICE float *piv, ML_DEVICE float *st, int r, int j0, int jw,
                                 ML_SHARED float *sh) {
  const int lane = ctx.lane, gs = ctx.group_size, sid = ml_simd_id(ctx), ns = ml_simd_count(ctx);
  ML_UNROLL
  for (int t = 0; t < RPL; ++t) pos[t] = lane + t * gs;
  ML_UNROLL
  for (int c = 0; c < NB; ++c) {
    if (c < jw) {  // the same on every lane
      ML_SHARED float *red = sh + (c & 1) * (64 + ML_LSB_REG_SIMDS * NB);
      ML_SHARED float *rows = red + 64;  // rows[s * NB + l]: simdgroup s's candidate row
      float best = -1.0f;
      int brow = 0;
      ML_UNROLL
      for (int t = 0; t < RPL; ++t) {
        const float v = ml_fabs(x[t][c]);  // a NaN is never a candidate
        if (pos[t] >= c && pos[t] < r && (v > best || (v == best && pos[t] < brow))) {
          best = v;
          brow = pos[t];
        }
      }
      const float mx = ml_simd_max(ctx, best);
      const float mi = ml_simd_min(ctx, (best >= 0.0f && best == mx) ? (float)brow : 1.0e9f);
      if (ml_simd_lane(ctx) == 0) {
        red[sid] = mx;
        red[32 + sid] = mi;
      }
      ML_UNROLL
      for (int t = 0; t < RPL; ++t)
        if (mx >= 0.0f && (float)pos[t] == mi) {
          ML_UNROLL
          for (int l = c; l < NB; ++l) rows[sid * NB + l] = x[t][l];
        }
      ml_barrier(ctx);
      float b = -1.0f, bi = 1.0e9f;
      int bs = 0;
      for (int s = 0; s < ns; ++s) {
        const float v = red[s], i = red[32 + s];
        if (v > b || (v == b && i < bi)) {
          b = v;
          bi = i;
          bs = s;
        }
      }
      const int found = b >= 0.0f && bi < 1.0e9f;
      const int pr = found ? (int)bi : c;  // none: a column of NaN, no interchange
      if (lane == 0) piv[j0 + c] = (float)(j0 + pr);
      ML_SHARED const float *prow = rows + bs * NB;  // the pivot row (found only)
      ML_UNROLL
      for (int t = 0; t < RPL; ++t) pos[t] = pos[t] == pr ? c : pos[t] == c ? pr : pos[t];
      // found: the pivot's value; none: NaN, as the NaN diagonal that stays in place
      const float d = found ? prow[c] : ml_nan();
      if (d == 0.0f) {  // the same on every lane: column c left unscaled, no update
        if (lane == 0 && st[2] == 0.0f) st[2] = (float)(j0 + c + 1);
        continue;
      }
      const int recip = ml_fabs(d) >= ML_FLT_MIN;
      const float rd = 1.0f / d;
      ML_UNROLL
      for (int t = 0; t < RPL; ++t)
        if (pos[t] > c && pos[t] < r) x[t][c] = recip ? x[t][c] * rd : x[t][c] / d;
      ML_UNROLL
      for (int l = c + 1; l < NB; ++l) {
        const float u = found ? prow[l] : 0.0f;  // none: the rows below are NaN either way
        ML_UNROLL
        for (int t = 0; t < RPL; ++t)
          if (pos[t] > c && pos[t] < r) x[t][l] = x[t][l] - x[t][c] * u;
      }
    }
  }
}

// The panel of rows j0.. (r = m - j0 of them) and jw columns at (j0, j0) of W into x (zeros
// outside; the lane's row t is the panel's row lane + t gs), or x back into it, each row t at
// its position pos[t] (the rows at positions >= r not stored).
template <int RPL, int NB>
ML_FN void ml_lsb_reg_load(ML_CTX ctx, ML_DEVICE const float *W, int ldw, int m, int j0, int jw,
                           ML_THREAD float (*x)[NB]) {
  const int lane = ctx.lane, gs = ctx.group_size, r = m - j0;
  ML_DEVICE const float *P = W + (ml_i64)j0 * ldw + j0;  // P(i, l) = P[l * ldw + i]
  ML_UNROLL
  for (int t = 0; t < RPL; ++t) {
    const int i = lane + t * gs;
    ML_UNROLL
    for (int l = 0; l < NB; ++l) x[t][l] = i < r && l < jw ? P[(ml_i64)l * ldw + i] : 0.0f;
  }
}
template <int RPL, int NB>
ML_FN void ml_lsb_reg_store(ML_DEVICE float *W, int ldw, int m, int j0, int jw,
                            ML_THREAD float (*x)[NB], ML_THREAD const int *pos) {
  const int r = m - j0;
  ML_DEVICE float *P = W + (ml_i64)j0 * ldw + j0;
  ML_UNROLL
  for (int t = 0; t < RPL; ++t) {
    const int i = pos[t];
    if (i < r) {
      ML_UNROLL
      for (int l = 0; l < NB; ++l)
        if (l < jw) P[(ml_i64)l * ldw + i] = x[t][l];
    }
  }
}

// ls_getf2's factorisation with the panel in registers: lane l holds the panel rows l, l + gs,
// ... (RPL of them, relative to the panel's first row), NB columns each, factored by
// ml_lsb_getf2_reg_cols (a barrier a column). The workspace is read and written once.
template <int RPL, int NB>
ML_FN void ml_lsb_getf2_reg(ML_CTX ctx, ML_DEVICE float *W, int ldw, ML_DEVICE float *piv,
                            ML_DEVICE float *st, int m, int j0, int jw, ML_SHARED float *sh) {
  float x[RPL][NB];
  int pos[RPL];
  ml_lsb_reg_load<RPL, NB>(ctx, W, ldw, m, j0, jw, x);
  ml_lsb_getf2_reg_cols<RPL, NB>(ctx, x, pos, piv, st, m - j0, j0, jw, sh);
  ml_lsb_reg_store<RPL, NB>(W, ldw, m, j0, jw, x, pos);
}

// ls_getf2_r8 / _r16 / _r32: ls_getf2's contract (the panel of columns [k0, k0 + p.n) over
// rows k0..p.m of W, operand 1; pivots to operand 2; info and skips as ls_getf2) with the panel
// in registers: p.n <= 8, 16, 32 columns, 8, 4, 2 rows a lane (the rows m - k0 at most that
// many times the group size; ml_lsb_reg_plan). Identical arithmetic to ls_getf2. Groups: batch.
// Shared: ml_lsb_getf2_reg_shared_floats(class).
template <int RPL, int NB>
ML_FN void ml_lsb_getf2_reg_step(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 b = ctx.group_id;
  ML_DEVICE float *st = ws + p.off[0] + b * p.stride[0];
  if (st[1] != 0.0f) return;
  ML_DEVICE float *W = ws + p.off[1] + b * p.stride[1];
  ML_DEVICE float *piv = ws + p.off[2] + b * p.stride[2];
  ml_lsb_getf2_reg<RPL, NB>(ctx, W, p.ld[1], piv, st, p.m, p.i[0], p.n, ctx.scratch);
}
ML_FN void ml_step_ls_getf2_r8(ML_STEP_ARGS) {
  ml_lsb_getf2_reg_step<ML_LSB_REG_FLOATS / 8, 8>(ctx, p, ws, a, o0, o1, o2, info);
}
ML_FN void ml_step_ls_getf2_r16(ML_STEP_ARGS) {
  ml_lsb_getf2_reg_step<ML_LSB_REG_FLOATS / 16, 16>(ctx, p, ws, a, o0, o1, o2, info);
}
ML_FN void ml_step_ls_getf2_r32(ML_STEP_ARGS) {
  ml_lsb_getf2_reg_step<ML_LSB_REG_FLOATS / 32, 32>(ctx, p, ws, a, o0, o1, o2, info);
}

// ---- row interchanges by blocks (ls_laswp_blk) ----
// The most interchanges of one launch, and the columns of one group.
#define ML_LSB_SWAPS 64
#define ML_LSB_SWAP_COLS 32

// Shared floats of ml_lsb_swap_compose: the composite's rows (destination, source: 2 x 2
// SWAPS), the pivots, each interchange's first interchange of the same row, the rows at the
// block's rows and at the outside rows (4 x SWAPS), a count.
ML_HOST_FN int ml_lsb_compose_floats() { return 8 * ML_LSB_SWAPS + 32; }

// The composite of the interchanges pv[k0 + s] <-> k0 + s for s in [0, cnt) (cnt <=
// ML_LSB_SWAPS; the 0-based pivot rows as floats, in device memory), in that order or (rev) the
// reverse one, as moves: row dst[e] of the result is row src[e] of the matrix before, for e <
// the count returned (the same on every lane); dst and src at sh and sh + 2 ML_LSB_SWAPS (rows
// as floats), no row in dst twice. The lanes find, for each interchange, the first one of the
// same row (in parallel); one lane then follows the interchanges over the touched rows only
// (at most 2 cnt) in shared memory. Every lane calls; ends with a barrier. Shared:
// ml_lsb_compose_floats() at sh.
ML_FN int ml_lsb_swap_compose(ML_CTX ctx, ML_DEVICE const float *pv, int k0, int cnt, int rev,
                              ML_SHARED float *sh) {
  const int lane = ctx.lane, gs = ctx.group_size;
  ML_SHARED float *dst = sh;                      // 2 SWAPS: composite destination rows
  ML_SHARED float *src = dst + 2 * ML_LSB_SWAPS;  // 2 SWAPS: their source rows
  ML_SHARED float *prs = src + 2 * ML_LSB_SWAPS;  // SWAPS: the pivot rows
  ML_SHARED float *fst = prs + ML_LSB_SWAPS;      // SWAPS: first interchange of the same row
  ML_SHARED float *cur = fst + ML_LSB_SWAPS;      // SWAPS: the row now at k0 + q
  ML_SHARED float *ext = cur + ML_LSB_SWAPS;      // SWAPS: the row now at the outside row of s
  ML_SHARED float *num = ext + ML_LSB_SWAPS;
  for (int s = lane; s < cnt; s += gs) {
    prs[s] = pv[k0 + s];
    cur[s] = (float)(k0 + s);
  }
  ml_barrier(ctx);
  for (int s = lane; s < cnt; s += gs) {
    const float r = prs[s];
    int f = s;
    for (int q = 0; q < s; ++q)
      if (prs[q] == r) {
        f = q;
        break;
      }
    fst[s] = (float)f;
    ext[s] = r;
  }
  ml_barrier(ctx);
  if (lane == 0) {
    for (int t = 0; t < cnt; ++t) {
      const int s = rev ? cnt - 1 - t : t;
      const int r = (int)prs[s];
      if (r == k0 + s) continue;
      if (r >= k0 && r < k0 + cnt) {
        const float x = cur[s];
        cur[s] = cur[r - k0];
        cur[r - k0] = x;
      } else {
        const int f = (int)fst[s];
        const float x = cur[s];
        cur[s] = ext[f];
        ext[f] = x;
      }
    }
    int e = 0;
    for (int q = 0; q < cnt; ++q)
      if ((int)cur[q] != k0 + q) {
        dst[e] = (float)(k0 + q);
        src[e] = cur[q];
        ++e;
      }
    for (int s = 0; s < cnt; ++s) {
      const int r = (int)prs[s];
      if ((int)fst[s] == s && (r < k0 || r >= k0 + cnt) && (int)ext[s] != r) {
        dst[e] = (float)r;
        src[e] = ext[s];
        ++e;
      }
    }
    num[0] = (float)e;
  }
  ml_barrier(ctx);
  return (int)num[0];
}

// Shared floats of ls_laswp_blk: the composite (ml_lsb_compose_floats), the rows' contents (2
// SWAPS x 33).
ML_HOST_FN int ml_lsb_laswp_blk_shared_floats() {
  return ml_lsb_compose_floats() + 2 * ML_LSB_SWAPS * (ML_LSB_SWAP_COLS + 1);
}

// ls_laswp_blk: ls_laswp's contract (interchanges piv[k] <-> k for k in [i[1], i[2]),
// i[2] - i[1] <= ML_LSB_SWAPS, in order or ML_LSB_REVERSE, on columns [i[0], i[0] + p.n) of W,
// operand 1, ld[1]; pivots at operand 2; matrices with stat[1] set skipped), but the columns
// [i[0] + i[3], i[0] + i[3] + p.k) left out, and the interchanges composed first
// (ml_lsb_swap_compose), then the group moves every touched row of its columns at once (all
// reads, a barrier, all writes) instead of a lane per column doing the interchanges one after
// another. Groups: batch x ceil(p.n / ML_LSB_SWAP_COLS). Shared:
// ml_lsb_laswp_blk_shared_floats().
ML_FN void ml_step_ls_laswp_blk(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 per = (p.n + ML_LSB_SWAP_COLS - 1) / ML_LSB_SWAP_COLS;
  const ml_i64 b = ctx.group_id / per;
  const int cb = (int)(ctx.group_id - b * per) * ML_LSB_SWAP_COLS;
  if (ml_lsb_bad(p, ws, b)) return;  // ls_getf2 skipped it: no pivots (the same for the group)
  const int k0 = p.i[1], cnt = p.i[2] - p.i[1], rev = (p.flags & ML_LSB_REVERSE) != 0;
  const int lane = ctx.lane, gs = ctx.group_size;
  ML_DEVICE float *W = ws + p.off[1] + b * p.stride[1];
  ML_DEVICE const float *pv = ws + p.off[2] + b * p.stride[2];
  ML_SHARED float *dst = ctx.scratch;
  ML_SHARED float *src = dst + 2 * ML_LSB_SWAPS;
  ML_SHARED float *vals = ctx.scratch + ml_lsb_compose_floats();  // 2 SWAPS x 33
  const int ne = ml_lsb_swap_compose(ctx, pv, k0, cnt, rev, ctx.scratch);
  const int c0 = p.i[0], s0 = p.i[3], s1 = p.i[3] + p.k;
  for (int t = lane; t < ne * ML_LSB_SWAP_COLS; t += gs) {
    const int e = t / ML_LSB_SWAP_COLS, c = cb + t % ML_LSB_SWAP_COLS;
    if (c < p.n && (c < s0 || c >= s1))
      vals[e * (ML_LSB_SWAP_COLS + 1) + c - cb] = W[(ml_i64)(c0 + c) * p.ld[1] + (int)src[e]];
  }
  ml_barrier_device(ctx);  // every read of W before any write (Metal: mem_device)
  for (int t = lane; t < ne * ML_LSB_SWAP_COLS; t += gs) {
    const int e = t / ML_LSB_SWAP_COLS, c = cb + t % ML_LSB_SWAP_COLS;
    if (c < p.n && (c < s0 || c >= s1))
      W[(ml_i64)(c0 + c) * p.ld[1] + (int)dst[e]] = vals[e * (ML_LSB_SWAP_COLS + 1) + c - cb];
  }
}

// ---- LU leaves in one launch (ls_lu_leaf_r8 / _r16 / _r32) ----
//
// A leaf of nl columns (one LU panel, up to ML_LSB_LEAF_MAX) factored by one group in one
// launch: sub-panels of sw columns (the register class's width or less) one after another, each
// factored in registers (ml_lsb_getf2_reg), then, by the same group, its interchanges on the
// leaf's other columns (composed: ml_lsb_swap_compose), its block row of U right of it in the
// leaf (L11^-1 A12, L11 and A12 in shared memory, a column a lane), and the leaf's columns right
// of it below (A22 -= L21 U12, a row a lane, U12 from shared memory): the sequence the narrow
// register panels launch as four steps, with device barriers instead of launches. The leaf lives
// in device memory between the sub-panels (read and written by the one group: it stays in cache).
#define ML_LSB_LEAF_MAX 128

// Shared floats of ls_lu_leaf for a leaf of nl columns and register class cls: the register
// panel's (ml_lsb_getf2_reg_shared_floats), the composite (ml_lsb_compose_floats), then either
// the moved rows' entries (2 cls rows x nl) or L11 (cls x (cls + 1)) with U12 (cls x nl).
ML_HOST_FN int ml_lsb_lu_leaf_shared_floats(int nl, int cls) {
  const int moved = 2 * cls * nl, tri = cls * (cls + 1) + cls * nl;
  return ml_lsb_getf2_reg_shared_floats(cls) + ml_lsb_compose_floats() +
         (moved > tri ? moved : tri);
}

// Columns of A22 a lane updates at once in ml_lsb_lu_leaf (their loads in flight together).
#define ML_LSB_LEAF_CU(RPL) ((RPL) >= 8 ? 2 : 16 / (RPL))

// The sub-panel of w <= NB columns at leaf column s0 of the leaf [k0, k0 + nl) over rows j = k0 +
// s0 .. m of W (ldw; RPL rows a lane, RPL x gs >= m - j): its factorisation in registers
// (pivots to piv, the info to st[2]), its interchanges on the leaf's other columns, its block row
// of U right of it in the leaf (U12 = L11^-1 A12), and with UPDATE the leaf's columns right of it
// below (A22 -= L21 U12, L21 still in the lanes' registers: read once). Ends with a device
// barrier.
template <int RPL, int NB, bool UPDATE>
ML_FN void ml_lsb_lu_sub(ML_CTX ctx, ML_DEVICE float *W, int ldw, ML_DEVICE float *piv,
                         ML_DEVICE float *st, int m, int k0, int nl, int s0, int w,
                         ML_SHARED float *sh) {
  const int lane = ctx.lane, gs = ctx.group_size;
  ML_SHARED float *cmp = sh + ml_lsb_getf2_reg_shared_floats(NB);
  ML_SHARED float *dst = cmp;
  ML_SHARED float *src = cmp + 2 * ML_LSB_SWAPS;
  ML_SHARED float *big = cmp + ml_lsb_compose_floats();
  {
    const int j = k0 + s0, c1 = s0 + w, rin = nl - c1, r = m - j;
    float x[RPL][NB];
    int pos[RPL];
    ml_lsb_reg_load<RPL, NB>(ctx, W, ldw, m, j, w, x);
    ml_lsb_getf2_reg_cols<RPL, NB>(ctx, x, pos, piv, st, r, j, w, sh);
    ml_lsb_reg_store<RPL, NB>(W, ldw, m, j, w, x, pos);
    ml_barrier_device(ctx);  // the sub-panel and its pivots in device memory
    // Its interchanges on the leaf's other columns (leaf column q < s0 as it is, else q + w).
    const int oc = nl - w;
    if (oc > 0) {
      const int ne = ml_lsb_swap_compose(ctx, piv, j, w, 0, cmp);
      for (int t = lane; t < ne * oc; t += gs) {
        const int e = t / oc, q = t - e * oc, c = q < s0 ? q : q + w;
        big[t] = W[(ml_i64)(k0 + c) * ldw + (int)src[e]];
      }
      ml_barrier_device(ctx);  // every read before any write
      for (int t = lane; t < ne * oc; t += gs) {
        const int e = t / oc, q = t - e * oc, c = q < s0 ? q : q + w;
        W[(ml_i64)(k0 + c) * ldw + (int)dst[e]] = big[t];
      }
      ml_barrier_device(ctx);
    }
    if (rin == 0) return;  // the same on every lane
    // U12 = L11^-1 A12: L11 the sub-panel's unit lower w x w block at (j, j), A12 its rows of
    // the leaf's columns c1.. (U[q * rin + c]; rows past w zero for the update below).
    ML_SHARED float *Ls = big;  // Ls[q * (NB + 1) + l] = L11(q, l)
    ML_SHARED float *U = big + NB * (NB + 1);
    for (int e = lane; e < w * w; e += gs) {
      const int l = e / w, q = e - l * w;
      Ls[q * (NB + 1) + l] = W[(ml_i64)(j + l) * ldw + j + q];
    }
    for (int e = lane; e < NB * rin; e += gs) {
      const int c = e / NB, q = e - c * NB;
      U[q * rin + c] = q < w ? W[(ml_i64)(k0 + c1 + c) * ldw + j + q] : 0.0f;
    }
    ml_barrier(ctx);
    for (int c = lane; c < rin; c += gs)
      for (int q = 1; q < w; ++q) {
        float v = U[q * rin + c];
        for (int l = 0; l < q; ++l) v -= Ls[q * (NB + 1) + l] * U[l * rin + c];
        U[q * rin + c] = v;
      }
    ml_barrier(ctx);
    for (int e = lane; e < w * rin; e += gs) {
      const int c = e / w, q = e - c * w;
      W[(ml_i64)(k0 + c1 + c) * ldw + j + q] = U[q * rin + c];
    }
    if (!UPDATE) {
      ml_barrier_device(ctx);
      return;
    }
    // A22 -= L21 U12 on the leaf's columns c1.., the lane's rows at positions w.. of the
    // sub-panel (L21 in x, row t at pos[t]), CU columns at a time.
    const int CU = ML_LSB_LEAF_CU(RPL);
    for (int c0 = 0; c0 < rin; c0 += CU) {
      float v[ML_LSB_LEAF_CU(RPL)][RPL];
      ML_UNROLL
      for (int cc = 0; cc < CU; ++cc) {
        ML_DEVICE const float *col = W + (ml_i64)(k0 + c1 + c0 + cc) * ldw + j;
        ML_UNROLL
        for (int t = 0; t < RPL; ++t) {
          const int i = pos[t];
          v[cc][t] = c0 + cc < rin && i >= w && i < r ? col[i] : 0.0f;
        }
      }
      ML_UNROLL
      for (int cc = 0; cc < CU; ++cc) {
        const int c = c0 + cc < rin ? c0 + cc : rin - 1;
        ML_UNROLL
        for (int q = 0; q < NB; ++q) {
          const float u = U[q * rin + c];
          ML_UNROLL
          for (int t = 0; t < RPL; ++t) v[cc][t] -= x[t][q] * u;
        }
      }
      ML_UNROLL
      for (int cc = 0; cc < CU; ++cc) {
        ML_DEVICE float *col = W + (ml_i64)(k0 + c1 + c0 + cc) * ldw + j;
        ML_UNROLL
        for (int t = 0; t < RPL; ++t) {
          const int i = pos[t];
          if (c0 + cc < rin && i >= w && i < r) col[i] = v[cc][t];
        }
      }
    }
    ml_barrier_device(ctx);  // the next sub-panel reads what this one wrote
  }
}

// The leaf of columns [k0, k0 + nl) over rows k0..m of W (ldw) in sub-panels of sw <= NB columns
// (RPL rows a lane, RPL x gs >= m - k0); pivots to piv, the info to st[2].
template <int RPL, int NB>
ML_FN void ml_lsb_lu_leaf(ML_CTX ctx, ML_DEVICE float *W, int ldw, ML_DEVICE float *piv,
                          ML_DEVICE float *st, int m, int k0, int nl, int sw, ML_SHARED float *sh) {
  for (int s0 = 0; s0 < nl; s0 += sw)
    ml_lsb_lu_sub<RPL, NB, true>(ctx, W, ldw, piv, st, m, k0, nl, s0, ml_imin(sw, nl - s0), sh);
}

// ls_lu_leaf_r8 / _r16 / _r32 (LEAF): ls_getf2's contract for the panel of columns [k0, k0 +
// p.n) (k0 = p.i[0], p.n <= ML_LSB_LEAF_MAX) over rows k0..p.m of W (operand 1, ld[1]), pivots
// to operand 2, info and skips as ls_getf2, by ml_lsb_lu_leaf in sub-panels of p.k columns (at
// most the class's 8, 16, 32; 8, 4, 2 rows a lane: ml_lsb_reg_plan for the rows m - k0).
// ls_getf2_fused_r8 / _r16 / _r32 (!LEAF): one narrow panel of the ls_lu_ib path in one launch:
// the columns [k0 + s0, k0 + s0 + p.k) (s0 = p.i[1]) of the panel [k0, k0 + p.n) over rows k0 +
// s0 .. p.m factored in registers as ls_getf2_r*, then, by the same group, their interchanges
// on the panel's other columns and their block row of U right of them in the panel
// (ml_lsb_lu_sub without the update: the product that follows is the host's); the rows m - k0
// - s0 fit the class. Groups: batch. Shared: ml_lsb_lu_leaf_shared_floats(p.n, class).
template <int RPL, int NB, bool LEAF>
ML_FN void ml_lsb_lu_reg_step(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 b = ctx.group_id;
  ML_DEVICE float *st = ws + p.off[0] + b * p.stride[0];
  if (st[1] != 0.0f) return;
  ML_DEVICE float *W = ws + p.off[1] + b * p.stride[1];
  ML_DEVICE float *piv = ws + p.off[2] + b * p.stride[2];
  const int w = p.k < 1 ? 1 : p.k > NB ? NB : p.k;
  if (LEAF)
    ml_lsb_lu_leaf<RPL, NB>(ctx, W, p.ld[1], piv, st, p.m, p.i[0], p.n, w, ctx.scratch);
  else
    ml_lsb_lu_sub<RPL, NB, false>(ctx, W, p.ld[1], piv, st, p.m, p.i[0], p.n, p.i[1], w,
                                  ctx.scratch);
}
ML_FN void ml_step_ls_lu_leaf_r8(ML_STEP_ARGS) {
  ml_lsb_lu_reg_step<ML_LSB_REG_FLOATS / 8, 8, true>(ctx, p, ws, a, o0, o1, o2, info);
}
ML_FN void ml_step_ls_lu_leaf_r16(ML_STEP_ARGS) {
  ml_lsb_lu_reg_step<ML_LSB_REG_FLOATS / 16, 16, true>(ctx, p, ws, a, o0, o1, o2, info);
}
ML_FN void ml_step_ls_lu_leaf_r32(ML_STEP_ARGS) {
  ml_lsb_lu_reg_step<ML_LSB_REG_FLOATS / 32, 32, true>(ctx, p, ws, a, o0, o1, o2, info);
}
ML_FN void ml_step_ls_getf2_fused_r8(ML_STEP_ARGS) {
  ml_lsb_lu_reg_step<ML_LSB_REG_FLOATS / 8, 8, false>(ctx, p, ws, a, o0, o1, o2, info);
}
ML_FN void ml_step_ls_getf2_fused_r16(ML_STEP_ARGS) {
  ml_lsb_lu_reg_step<ML_LSB_REG_FLOATS / 16, 16, false>(ctx, p, ws, a, o0, o1, o2, info);
}
ML_FN void ml_step_ls_getf2_fused_r32(ML_STEP_ARGS) {
  ml_lsb_lu_reg_step<ML_LSB_REG_FLOATS / 32, 32, false>(ctx, p, ws, a, o0, o1, o2, info);
}

#endif  // ML_KERNELS_LINSYS_BLOCKED_H
