// Back-transformation of the bulge chase (sb2st.h): Z := Q2 Z with Q2 = H_1 .. H_N the chase's
// reflectors in the order it applied them, read from its reflector store (operand 3 of
// sb_sweeps / sb_chase: v and tau of task t of sweep s at ml_sb_v2_slot(n, bw, s, t); v[0] = 1,
// m = min(bw, n - r0) entries on rows r0 = s + 1 + t bw ..).
// Blocks: sweeps are grouped by k (group g: sweeps g k .. g k + k - 1), and block (g, t) holds
// task t of each sweep of group g: k reflectors on a staircase of R = bw + k - 1 rows from
// rb = g k + 1 + t bw (the reflector of sweep g k + j at row j of the block). Reflectors (s, t)
// and (s', t') with s < s' share rows only when t' = t or t' = t - 1, and those of one sweep
// never do, so
//   Q2 = prod_g (B(g, T0 - 1) .. B(g, 1) B(g, 0)),  B(g, t) = H(g k, t) .. H(g k + k - 1, t)
// (groups in order; within a group the block of task t before that of t - 1): Q2 Z applies
// the groups from the last, each group's blocks from t = 0 up, and B(g, t) = I - V T V^T in
// compact WY form (T upper triangular, LAPACK's forward larft). Block (g, t) shares rows with
// blocks (g + 1, t') only for t' <= t, and with (g, t - 1): applied at wavefront
// w = t + (G - 1 - g) (G groups), the blocks of one wavefront touch disjoint rows of Z and
// every block runs after all the blocks it depends on (the wavefronts before).
//   sb_back_t  T of every block (one group each), into a T store (k x k per block);
//   sb_back    one wavefront: every block of it on a slice of Z's columns per group:
//              Z_R -= V (T (V^T Z_R)) from shared memory.
// About 2 n^3 flops in all (4 m flops per reflector and column).
#ifndef ML_KERNELS_SB2ST_BACK_H
#define ML_KERNELS_SB2ST_BACK_H

#include "blocked_common.h"
#include "larft.h"
#include "sb2st.h"

// Sweep groups of k sweeps of an n x n band (sweeps 0 .. n - 3).
ML_HOST_FN int ml_sbb_groups(int n, int k) { return n < 3 ? 0 : (n - 2 + k - 1) / k; }

// Floats of the T store: k x k for each of G x T0 blocks (T0 = tasks of sweep 0).
ML_HOST_FN ml_i64 ml_sbb_t_floats(int n, int bw, int k) {
  return n < 3 ? 0 : (ml_i64)ml_sbb_groups(n, k) * ((n - 2 + bw - 1) / bw) * k * k;
}

// Offset of block (g, t)'s T in the T store.
ML_FN ml_i64 ml_sbb_t_slot(int n, int bw, int k, int g, int t) {
  return ((ml_i64)g * ((n - 2 + bw - 1) / bw) + t) * k * k;
}

// Shared floats of sb_back_t (block staircase R x k, G and T k x k, tau) and of sb_back with
// nc columns per group (staircase, T, the Z rows R x nc, two k x nc products).
ML_HOST_FN int ml_sbb_t_shared_floats(int bw, int k) {
  return (bw + k - 1) * k + 2 * k * k + k;
}
ML_HOST_FN int ml_sbb_shared_floats(int bw, int k, int nc) {
  return (bw + k - 1) * k + k * k + (bw + k - 1) * nc + 2 * k * nc;
}

// Column j of block (g, t) into Vs (R rows, ld R = bw + k - 1, zero where the reflector is not)
// and its tau into *tau (0 for a task its sweep does not have). Lanes split the rows.
ML_FN void ml_sbb_load_v(ML_CTX ctx, ML_DEVICE const float *V2, int n, int bw, int k, int g,
                         int t, ML_SHARED float *Vs, ML_SHARED float *tau) {
  const int R = bw + k - 1;
  for (int e = ctx.lane; e < R * k; e += ctx.group_size) {
    const int j = e / R, i = e - j * R;
    const int s = g * k + j;
    const bool has = s <= n - 3 && t < ml_sb_tasks(n, bw, s);
    const int r0 = s + 1 + t * bw;
    const int m = has ? ml_imin(bw, n - r0) : 0;
    const int q = i - j;  // the reflector's entry on block row i
    Vs[e] = q >= 0 && q < m ? V2[ml_sb_v2_slot(n, bw, s, t) + q] : 0.0f;
    if (i == 0) tau[j] = has ? V2[ml_sb_v2_slot(n, bw, s, t) + bw] : 0.0f;
  }
}

// sb_back_t: groups batch x G x T0, block (g, t) each (t fastest). p.n = n, i[1] = bw,
// i[2] = k. Operands: 0 the reflector store (as sb2st.h's operand 3), 1 the T store
// (ml_sbb_t_floats; block (g, t) at ml_sbb_t_slot, column-major k x k, zero below the
// diagonal and in the columns of absent reflectors). Shared: ml_sbb_t_shared_floats(bw, k).
ML_FN void ml_step_sb_back_t(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE float *ws,
                             ML_DEVICE const float *a, ML_DEVICE float *o0, ML_DEVICE float *o1,
                             ML_DEVICE float *o2, ML_DEVICE int *info) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int n = p.n, bw = p.i[1], k = p.i[2], R = bw + k - 1;
  const int T0 = ml_sb_tasks(n, bw, 0), G = ml_sbb_groups(n, k);
  const ml_i64 per = (ml_i64)G * T0;
  const ml_i64 b = ctx.group_id / per;
  const int blk = (int)(ctx.group_id - b * per);
  const int g = blk / T0, t = blk - g * T0;
  ML_DEVICE const float *V2 = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE float *T = ws + p.off[1] + b * p.stride[1] + ml_sbb_t_slot(n, bw, k, g, t);
  ML_SHARED float *Vs = ctx.scratch;
  ML_SHARED float *Gm = Vs + R * k;
  ML_SHARED float *Ts = Gm + k * k;
  ML_SHARED float *tau = Ts + k * k;
  ml_sbb_load_v(ctx, V2, n, bw, k, g, t, Vs, tau);
  ml_barrier(ctx);
  // G[q, c] = V[:, q]^T V[:, c] for q < c: column c is nonzero on rows c .. c + bw - 1.
  for (int e = ctx.lane; e < k * k; e += ctx.group_size) {
    const int c = e / k, q = e - c * k;
    if (q >= c) continue;
    float s = 0.0f;
    for (int i = c; i < ml_imin(q + bw, R); ++i) s += Vs[q * R + i] * Vs[c * R + i];
    Gm[q * k + c] = s;
  }
  ml_barrier(ctx);
  ml_larft_from_gram(ctx, Gm, tau, k, k, Ts, T);
}

// sb_back: one wavefront w = i[0] of the blocks, groups batch x p.m x ceil(ncols / nc): block
// (g, t), g = i[3] + (its index in p.m), t = w - (G - 1 - g), on columns [c nc, c nc + nc) of
// Z (slices fastest, then blocks). p.n = n, i[1] = bw, i[2] = k, p.k = nc, p.flags = ncols.
// Operands: 0 the reflector store, 1 the T store (sb_back_t), 2 Z (n x ncols, ld[2]).
// Shared: ml_sbb_shared_floats(bw, k, nc).
ML_FN void ml_step_sb_back(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE float *ws,
                           ML_DEVICE const float *a, ML_DEVICE float *o0, ML_DEVICE float *o1,
                           ML_DEVICE float *o2, ML_DEVICE int *info) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int n = p.n, bw = p.i[1], k = p.i[2], nc = p.k, ncols = p.flags, ldz = p.ld[2];
  const int R = bw + k - 1, G = ml_sbb_groups(n, k);
  const int slices = (ncols + nc - 1) / nc;
  const ml_i64 per = (ml_i64)p.m * slices;
  const ml_i64 b = ctx.group_id / per;
  const int rest = (int)(ctx.group_id - b * per);
  const int gi = rest / slices, cs = rest - gi * slices;
  const int g = p.i[3] + gi, t = p.i[0] - (G - 1 - g);
  const int rb = g * k + 1 + t * bw;       // the block's first row
  const int rows = ml_imin(R, n - rb);     // its rows inside the matrix
  const int kk = ml_imin(k, n - 2 - g * k);  // its sweeps
  const int c0 = cs * nc, cols = ml_imin(nc, ncols - c0);
  const int lane = ctx.lane, gs = ctx.group_size;
  ML_DEVICE const float *V2 = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE const float *T = ws + p.off[1] + b * p.stride[1] + ml_sbb_t_slot(n, bw, k, g, t);
  ML_DEVICE float *Z = ws + p.off[2] + b * p.stride[2] + (ml_i64)c0 * ldz + rb;
  ML_SHARED float *Vs = ctx.scratch;  // R x k, ld R
  ML_SHARED float *Ts = Vs + R * k;   // k x k, ld k
  ML_SHARED float *Zs = Ts + k * k;   // R x nc, ld R
  ML_SHARED float *Ws = Zs + R * nc;  // k x nc, ld k: V^T Z_R
  ML_SHARED float *Xs = Ws + k * nc;  // k x nc, ld k: T V^T Z_R
  ml_sbb_load_v(ctx, V2, n, bw, k, g, t, Vs, Xs);  // the taus are not needed: Xs as a sink
  for (int e = lane; e < k * k; e += gs) Ts[e] = T[e];
  for (int e = lane; e < R * cols; e += gs) {
    const int c = e / R, i = e - c * R;
    Zs[e] = i < rows ? Z[(ml_i64)c * ldz + i] : 0.0f;
  }
  ml_barrier(ctx);
  // W = V^T Z_R: column j of V on rows j .. j + bw - 1.
  for (int e = lane; e < kk * cols; e += gs) {
    const int c = e / kk, j = e - c * kk;
    ML_SHARED const float *v = Vs + j * R, *z = Zs + c * R;
    float s = 0.0f;
    for (int i = j; i < ml_imin(j + bw, rows); ++i) s += v[i] * z[i];
    Ws[c * k + j] = s;
  }
  ml_barrier(ctx);
  // X = T W (T upper triangular).
  for (int e = lane; e < kk * cols; e += gs) {
    const int c = e / kk, j = e - c * kk;
    ML_SHARED const float *w = Ws + c * k;
    float s = 0.0f;
    for (int l = j; l < kk; ++l) s += Ts[l * k + j] * w[l];
    Xs[c * k + j] = s;
  }
  ml_barrier(ctx);
  // Z_R -= V X: row i has the columns j of V with j <= i < j + bw.
  for (int e = lane; e < rows * cols; e += gs) {
    const int c = e / rows, i = e - c * rows;
    ML_SHARED const float *x = Xs + c * k;
    float s = 0.0f;
    for (int j = ml_imax(0, i - bw + 1); j <= ml_imin(kk - 1, i); ++j) s += Vs[j * R + i] * x[j];
    Z[(ml_i64)c * ldz + i] = Zs[c * R + i] - s;
  }
}

#endif  // ML_KERNELS_SB2ST_BACK_H
