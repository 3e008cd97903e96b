// A QR panel spread over many groups (tall-skinny QR with Householder reconstruction, after
// Ballard et al.), the steps core/src/blocked_qr.cpp sequences for a panel of jb columns and
// r rows starting at (j, j) of W when one group per matrix would leave the GPU idle:
//   tsqr_leaf     the panel's nl row blocks, a group each: block l = Q_l R_l in shared memory;
//                 R_l into the stack RS (nl jb x jb), Q_l explicitly into V's rows of block l;
//   tsqr_tree     a group per matrix: the stack = Q_s R; Q_s into RS; the panel's Q has
//                 rows Q_l Q_s[l] (top block Q1 = Q_0[0:jb] Q_s[0]); LU of Q1 - S (S = diag of
//                 -sign of each pivot, so |U_cc| >= 1); T = -U S L1^-T; R := S R into W;
//   tsqr_rebuild  the row blocks again: V = (Q - [S; 0]) U^-1 (unit lower trapezoidal).
// Then I - V T V^T is a compact-WY product of jb reflectors whose first jb columns are Q S,
// so the trailing update and the formation of Q run unchanged. Every row of the panel is
// touched by one group of each step; the per-column loops run over a block's rows only.
#ifndef ML_KERNELS_QR_TSQR_H
#define ML_KERNELS_QR_TSQR_H

#include "qr_blocked.h"

// Floats of a TSQR region before the stack RS: LU of Q1 - S (jb x jb, column-major, ld jb)
// and the signs S (jb), for jb <= nb.
ML_HOST_FN int ml_tsqr_lu_floats(int nb) { return (nb * nb + nb + 31) / 32 * 32; }
// Shared floats of tsqr_leaf and tsqr_rebuild (blocks of <= hb rows) and of tsqr_tree (nl
// blocks), panels of <= nb columns.
ML_HOST_FN int ml_tsqr_leaf_shared_floats(int hb, int nb) {
  return 2 * nb * (hb | 1) + 2 * nb * nb + 64 + ML_RED_FLOATS;
}
ML_HOST_FN int ml_tsqr_tree_shared_floats(int nl, int nb) {
  return 2 * nb * ((nl * nb) | 1) + 2 * nb * nb + 64 + ML_RED_FLOATS;
}

// X (r x jb, column c at X + c * lds, shared) = H_0 H_1 ... H_{jb-1} E, E the first jb columns
// of I, from the reflectors ml_qr_factor_shared left in S. Backwards, as LAPACK's org2r: H_c
// touches rows c.. and, there, only columns c.. of X differ from E. Enter after a barrier.
ML_FN void ml_qr_form_q_shared(ML_CTX ctx, ML_SHARED const float *S, int lds, int r, int jb,
                               ML_SHARED const float *tau, ML_SHARED float *X) {
  const int lane = ctx.lane, gs = ctx.group_size, nw = ml_simd_count(ctx);
  const int warp = ml_simd_id(ctx), sl = ml_simd_lane(ctx);
  for (int c = 0; c < jb; ++c)
    for (int i = lane; i < r; i += gs) X[c * lds + i] = i == c ? 1.0f : 0.0f;
  ml_barrier(ctx);
  for (int c = jb - 1; c >= 0; --c) {
    const float t = tau[c];
    if (t == 0.0f) continue;  // group-uniform (shared)
    ML_SHARED const float *v = S + c * lds;
    for (int cc = c + warp; cc < jb; cc += nw) {  // a warp per column (warp-uniform loop)
      ML_SHARED float *x = X + cc * lds;
      float d = 0.0f;
      for (int i = c + 1 + sl; i < r; i += 32) d += v[i] * x[i];
      const float w = (x[c] + ml_simd_sum(ctx, d)) * t;
      for (int i = c + 1 + sl; i < r; i += 32) x[i] -= v[i] * w;
      if (sl == 0) x[c] -= w;
    }
    ml_barrier(ctx);
  }
}

// Row block l of a panel split into nl blocks of hb rows (the last one shorter): first row.
ML_FN int ml_tsqr_block_rows(int r, int nl, int hb, int l, ML_THREAD int *r0) {
  *r0 = l * hb;
  return l == nl - 1 ? r - *r0 : hb;
}

// The steps of groups batch x nl: the group's matrix *b, its row block *l and that block's
// first row *r0; returns its rows (ml_tsqr_block_rows).
ML_FN int ml_tsqr_group_block(ML_CTX ctx, int r, int nl, int hb, ML_THREAD ml_i64 *b,
                              ML_THREAD int *l, ML_THREAD int *r0) {
  *b = ctx.group_id / nl;
  *l = (int)(ctx.group_id - *b * nl);
  return ml_tsqr_block_rows(r, nl, hb, *l, r0);
}

// tsqr_leaf: groups = batch x nl. p.m rows of W; i[0] = j, i[1] = jb, i[2] = nl, i[3] = hb
// (rows per block, >= jb; the last block r - (nl - 1) hb >= jb). Operands: 0 W (ld[0]), 1 V
// (ld[1]), 2 the TSQR region (the stack RS at + p.k, ld[2] = nl jb). Shared:
// ml_tsqr_leaf_shared_floats(hb, nb).
ML_FN void ml_step_tsqr_leaf(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int j = p.i[0], jb = p.i[1], nl = p.i[2], hb = p.i[3];
  ml_i64 b = 0;
  int l = 0, r0 = 0;
  const int rows = ml_tsqr_group_block(ctx, p.m - j, nl, hb, &b, &l, &r0);
  const int lane = ctx.lane, gs = ctx.group_size, ld = p.ld[0], ldv = p.ld[1], ldr = p.ld[2];
  const int lds = hb | 1;
  ML_DEVICE const float *P = ws + p.off[0] + b * p.stride[0] + (ml_i64)j * ld + j + r0;
  ML_DEVICE float *Vb = ws + p.off[1] + b * p.stride[1] + (ml_i64)j * ldv + j + r0;
  ML_DEVICE float *RS = ws + p.off[2] + b * p.stride[2] + p.k + l * jb;
  ML_SHARED float *S = ctx.scratch;
  ML_SHARED float *X = S + jb * lds;
  ML_SHARED float *tau = X + jb * lds;
  ML_SHARED float *red = tau + 64;
  for (int c = 0; c < jb; ++c)
    for (int i = lane; i < rows; i += gs) S[c * lds + i] = P[(ml_i64)c * ld + i];
  ml_barrier(ctx);
  (void)ml_qr_factor_shared(ctx, S, lds, rows, jb, tau, red,
                            (p.flags & ML_QR_SPLIT_ROWS) != 0);
  for (int e = lane; e < jb * jb; e += gs) {
    const int c = e / jb, q = e - c * jb;
    RS[(ml_i64)c * ldr + q] = q <= c ? S[c * lds + q] : 0.0f;
  }
  ml_qr_form_q_shared(ctx, S, lds, rows, jb, tau, X);
  for (int c = 0; c < jb; ++c)
    for (int i = lane; i < rows; i += gs) Vb[(ml_i64)c * ldv + i] = X[c * lds + i];
}

// tsqr_tree: a group per matrix. i[0] = j, i[1] = jb, i[2] = nl, i[3] = workspace offset of
// this panel's T (nb x nb, ld p.n = nb; same matrix stride as operand 3). Operands: 0 W, 1 V
// (tsqr_leaf's Q blocks), 2 the TSQR region (LU and signs at 0, RS at + p.k), 3 stat (an
// exactly zero diagonal entry of R sets ML_INFO_RANK_DEFICIENT). Shared:
// ml_tsqr_tree_shared_floats(nl, nb).
ML_FN void ml_step_tsqr_tree(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 b = ctx.group_id;
  const int j = p.i[0], jb = p.i[1], nl = p.i[2], nb = p.n;
  const int rows = nl * jb, lds = rows | 1;
  const int lane = ctx.lane, gs = ctx.group_size, ld = p.ld[0], ldv = p.ld[1], ldr = p.ld[2];
  ML_DEVICE float *LU = ws + p.off[2] + b * p.stride[2];
  ML_DEVICE float *RS = LU + p.k;
  ML_DEVICE const float *V0 = ws + p.off[1] + b * p.stride[1] + (ml_i64)j * ldv + j;
  ML_DEVICE float *Wp = ws + p.off[0] + b * p.stride[0] + (ml_i64)j * ld + j;
  ML_DEVICE float *st = ws + p.off[3] + b * p.stride[3];
  ML_DEVICE float *T = ws + p.i[3] + b * p.stride[3];
  ML_SHARED float *S = ctx.scratch;
  ML_SHARED float *X = S + jb * lds;
  ML_SHARED float *M = X + jb * lds;  // Q1, then its LU (column-major, ld jb)
  ML_SHARED float *Ts = M + jb * jb;
  ML_SHARED float *sg = Ts + jb * jb;
  ML_SHARED float *red = sg + 64;
  for (int c = 0; c < jb; ++c)
    for (int i = lane; i < rows; i += gs) S[c * lds + i] = RS[(ml_i64)c * ldr + i];
  ml_barrier(ctx);
  const bool zero_diag =
      ml_qr_factor_shared(ctx, S, lds, rows, jb, sg, red, (p.flags & ML_QR_SPLIT_ROWS) != 0);
  if (lane == 0 && zero_diag) st[2] = (float)((int)st[2] | ML_INFO_RANK_DEFICIENT);
  ml_qr_form_q_shared(ctx, S, lds, rows, jb, sg, X);
  for (int c = 0; c < jb; ++c)
    for (int i = lane; i < rows; i += gs) RS[(ml_i64)c * ldr + i] = X[c * lds + i];
  // Q1 = Q_0[0:jb, :] Q_s[0:jb, :].
  for (int e = lane; e < jb * jb; e += gs) {
    const int c = e / jb, i = e - c * jb;
    float s = 0.0f;
    for (int q = 0; q < jb; ++q) s += V0[(ml_i64)q * ldv + i] * X[c * lds + q];
    M[e] = s;
  }
  ml_barrier(ctx);
  // LU of Q1 - S without pivoting, S_cc = -sign(pivot) (pivot + sign: magnitude >= 1).
  for (int c = 0; c < jb; ++c) {
    const float d = M[c * jb + c];
    const float s = d >= 0.0f ? -1.0f : 1.0f;
    const float piv = d - s;
    for (int i = c + 1 + lane; i < jb; i += gs) M[c * jb + i] /= piv;
    ml_barrier(ctx);
    const int w = jb - 1 - c;
    for (int e = lane; e < w * w; e += gs) {
      const int q = c + 1 + e / w, i = c + 1 + e % w;
      M[q * jb + i] -= M[c * jb + i] * M[q * jb + c];
    }
    if (lane == 0) {
      M[c * jb + c] = piv;
      sg[c] = s;
    }
    ml_barrier(ctx);
  }
  // T = -U S L1^-T, row q by lane q: T[q, c] = -U[q, c] s_c - sum_{q <= l < c} T[q, l] L1[c, l].
  for (int q = lane; q < jb; q += gs)
    for (int c = 0; c < jb; ++c) {
      float t = 0.0f;
      if (c >= q) {
        t = -M[c * jb + q] * sg[c];
        for (int l = q; l < c; ++l) t -= Ts[l * jb + q] * M[l * jb + c];
      }
      Ts[c * jb + q] = t;
    }
  ml_barrier(ctx);
  for (int e = lane; e < nb * nb; e += gs) {
    const int c = e / nb, q = e - c * nb;
    T[e] = c < jb && q < jb ? Ts[c * jb + q] : 0.0f;
  }
  for (int e = lane; e < jb * jb; e += gs) LU[e] = M[e];
  for (int c = lane; c < jb; c += gs) LU[jb * jb + c] = sg[c];
  // R := S R (the rows of R the reflectors' Q S pairs with).
  for (int e = lane; e < jb * jb; e += gs) {
    const int c = e / jb, q = e - c * jb;
    if (q <= c) Wp[(ml_i64)c * ld + q] = sg[q] * S[c * lds + q];
  }
}

// tsqr_rebuild: groups = batch x nl; parameters and operands 0..2 as tsqr_leaf (RS now holds
// Q_s, the region's start the LU and signs). V's rows of block l := (Q_l Q_s[l] - [S; 0])
// U^-1, a lane per row; the top jb rows of block 0 are L1 itself.
ML_FN void ml_step_tsqr_rebuild(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int j = p.i[0], jb = p.i[1], nl = p.i[2], hb = p.i[3];
  ml_i64 b = 0;
  int l = 0, r0 = 0;
  const int rows = ml_tsqr_group_block(ctx, p.m - j, nl, hb, &b, &l, &r0);
  const int lane = ctx.lane, gs = ctx.group_size, ldv = p.ld[1], ldr = p.ld[2];
  const int lds = hb | 1;
  ML_DEVICE float *Vb = ws + p.off[1] + b * p.stride[1] + (ml_i64)j * ldv + j + r0;
  ML_DEVICE const float *LUg = ws + p.off[2] + b * p.stride[2];
  ML_DEVICE const float *Qs = LUg + p.k + l * jb;
  ML_SHARED float *Y = ctx.scratch;
  ML_SHARED float *Z = Y + jb * lds;
  ML_SHARED float *Qb = Z + jb * lds;  // Q_s[l] (jb x jb, ld jb)
  ML_SHARED float *LU = Qb + jb * jb;
  for (int c = 0; c < jb; ++c)
    for (int i = lane; i < rows; i += gs) Y[c * lds + i] = Vb[(ml_i64)c * ldv + i];
  for (int e = lane; e < jb * jb; e += gs) {
    const int c = e / jb, q = e - c * jb;
    Qb[e] = Qs[(ml_i64)c * ldr + q];
    LU[e] = LUg[e];
  }
  ml_barrier(ctx);
  const int top = l == 0 ? jb : 0;
  for (int i = lane; i < rows; i += gs) {
    if (i < top) {  // L1: unit lower triangular
      for (int c = 0; c < jb; ++c) Z[c * lds + i] = c < i ? LU[c * jb + i] : (c == i ? 1.0f : 0.0f);
      continue;
    }
    for (int c = 0; c < jb; ++c) {
      float z = 0.0f;
      for (int q = 0; q < jb; ++q) z += Y[q * lds + i] * Qb[c * jb + q];
      for (int q = 0; q < c; ++q) z -= Z[q * lds + i] * LU[c * jb + q];
      Z[c * lds + i] = z / LU[c * jb + c];
    }
  }
  ml_barrier(ctx);
  for (int c = 0; c < jb; ++c)
    for (int i = lane; i < rows; i += gs) Vb[(ml_i64)c * ldv + i] = Z[c * lds + i];
}

#endif  // ML_KERNELS_QR_TSQR_H
