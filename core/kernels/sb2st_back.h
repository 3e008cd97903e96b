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
//              Z_R -= V (T (V^T Z_R)), the block's V, T and Z rows in shared memory, the three
//              products in 4 x 4 register tiles.
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

// sb_back's register tiles: each lane computes 4 x 4 outputs of a product at a time; the
// staircase padded to Rp = R rounded up to 4 rows and kp = k rounded up to 4 columns (zeros),
// nc a multiple of 4.
#define ML_SBB_TILE 4
ML_HOST_FN int ml_sbb_pad(int x) { return (x + ML_SBB_TILE - 1) / ML_SBB_TILE * ML_SBB_TILE; }

// Shared floats of sb_back_t (block staircase R x k, G and T k x k, tau) and of sb_back with
// nc columns per group (the padded staircase and T, the Z rows Rp x nc, two kp x nc products;
// odd leading dimensions).
ML_HOST_FN int ml_sbb_t_shared_floats(int bw, int k) {
  return (bw + k - 1) * k + 2 * k * k + k;
}
ML_HOST_FN int ml_sbb_shared_floats(int bw, int k, int nc) {
  const int rp = ml_sbb_pad(bw + k - 1), kp = ml_sbb_pad(k);
  return kp * (rp + 1) + kp * kp + nc * (rp + 1) + 2 * nc * (kp + 1);
}

// Column j < k of block (g, t) into Vs (rows < rows_pad, column j at Vs + j * ldv; zero where
// the reflector is not) and its tau into tau[j] (0 for a task its sweep does not have); columns
// k .. cols_pad - 1 zero. Lanes split the entries.
ML_FN void ml_sbb_load_v(ML_CTX ctx, ML_DEVICE const float *V2, int n, int bw, int k, int g,
                         int t, int rows_pad, int cols_pad, int ldv, ML_SHARED float *Vs,
                         ML_SHARED float *tau) {
  for (int e = ctx.lane; e < rows_pad * cols_pad; e += ctx.group_size) {
    const int j = e / rows_pad, i = e - j * rows_pad;
    const int s = g * k + j;
    const bool has = j < k && s <= n - 3 && t < ml_sb_tasks(n, bw, s);
    const int r0 = s + 1 + t * bw;
    const int m = has ? ml_imin(bw, n - r0) : 0;
    const int q = i - j;  // the reflector's entry on block row i
    Vs[j * ldv + i] = q >= 0 && q < m ? V2[ml_sb_v2_slot(n, bw, s, t) + q] : 0.0f;
    if (i == 0 && j < k) tau[j] = has ? V2[ml_sb_v2_slot(n, bw, s, t) + bw] : 0.0f;
  }
}

// sb_back_t: groups batch x G x T0, block (g, t) each (t fastest). p.n = n, i[1] = bw,
// i[2] = k. Operands: 0 the reflector store (as sb2st.h's operand 3), 1 the T store
// (ml_sbb_t_floats; block (g, t) at ml_sbb_t_slot, column-major k x k, zero below the
// diagonal and in the columns of absent reflectors). Shared: ml_sbb_t_shared_floats(bw, k).
ML_FN void ml_step_sb_back_t(ML_STEP_ARGS) {
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
  ml_sbb_load_v(ctx, V2, n, bw, k, g, t, R, k, R, Vs, tau);
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
// Z (slices fastest, then blocks). p.n = n, i[1] = bw, i[2] = k, p.k = nc (a multiple of 4),
// p.flags = ncols. Operands: 0 the reflector store, 1 the T store (sb_back_t), 2 Z (n x ncols,
// ld[2]). Shared: ml_sbb_shared_floats(bw, k, nc). The three products W = V^T Z_R, X = T W,
// Z_R -= V X in 4 x 4 register tiles, a lane's tile on columns ct, ct + nc / 4, .. (adjacent
// lanes on adjacent columns) and 4 adjacent rows, each over the staircase's nonzero range only.
ML_FN void ml_step_sb_back(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int n = p.n, bw = p.i[1], k = p.i[2], nc = p.k, ncols = p.flags, ldz = p.ld[2];
  const int G = ml_sbb_groups(n, k);
  const int rp = ml_sbb_pad(bw + k - 1), kp = ml_sbb_pad(k);
  const int ldv = rp + 1, lds = rp + 1, ldx = kp + 1;
  const int slices = (ncols + nc - 1) / nc;
  const ml_i64 per = (ml_i64)p.m * slices;
  const ml_i64 b = ctx.group_id / per;
  const int rest = (int)(ctx.group_id - b * per);
  const int gi = rest / slices, cs = rest - gi * slices;
  const int g = p.i[3] + gi, t = p.i[0] - (G - 1 - g);
  const int rb = g * k + 1 + t * bw;       // the block's first row
  const int rows = ml_imin(bw + k - 1, n - rb);  // its rows inside the matrix
  const int c0 = cs * nc, cols = ml_imin(nc, ncols - c0);
  const int lane = ctx.lane, gs = ctx.group_size;
  const int nt = nc / ML_SBB_TILE;  // column tiles (strided: columns ct + q nt)
  ML_DEVICE const float *V2 = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE const float *T = ws + p.off[1] + b * p.stride[1] + ml_sbb_t_slot(n, bw, k, g, t);
  ML_DEVICE float *Z = ws + p.off[2] + b * p.stride[2] + (ml_i64)c0 * ldz + rb;
  ML_SHARED float *Vs = ctx.scratch;  // kp columns, ld ldv: V[i, j] at Vs[j * ldv + i]
  ML_SHARED float *Ts = Vs + kp * ldv;  // kp x kp, ld kp
  ML_SHARED float *Zs = Ts + kp * kp;   // nc columns, ld lds
  ML_SHARED float *Ws = Zs + nc * lds;  // nc columns, ld ldx: V^T Z_R
  ML_SHARED float *Xs = Ws + nc * ldx;  // nc columns, ld ldx: T V^T Z_R
  ml_sbb_load_v(ctx, V2, n, bw, k, g, t, rp, kp, ldv, Vs, Xs);  // taus unused: Xs a sink
  for (int e = lane; e < kp * kp; e += gs) {
    const int l = e / kp, j = e - l * kp;
    Ts[e] = j < k && l < k ? T[l * k + j] : 0.0f;
  }
  for (int e = lane; e < rp * nc; e += gs) {
    const int c = e / rp, i = e - c * rp;
    Zs[c * lds + i] = i < rows && c < cols ? Z[(ml_i64)c * ldz + i] : 0.0f;
  }
  ml_barrier(ctx);
  float acc[ML_SBB_TILE][ML_SBB_TILE];
  // W = V^T Z_R: rows j0 .. j0 + 3 of W need the rows j0 .. j0 + 3 + bw - 1 of Z_R.
  for (int e = lane; e < (kp / ML_SBB_TILE) * nt; e += gs) {
    const int jt = e / nt, ct = e - jt * nt, j0 = jt * ML_SBB_TILE;
    for (int r = 0; r < ML_SBB_TILE; ++r)
      for (int q = 0; q < ML_SBB_TILE; ++q) acc[r][q] = 0.0f;
    const int i1 = ml_imin(j0 + ML_SBB_TILE - 1 + bw, rp);
    for (int i = j0; i < i1; ++i) {
      float va[ML_SBB_TILE], zb[ML_SBB_TILE];
      for (int r = 0; r < ML_SBB_TILE; ++r) va[r] = Vs[(j0 + r) * ldv + i];
      for (int q = 0; q < ML_SBB_TILE; ++q) zb[q] = Zs[(ct + q * nt) * lds + i];
      for (int r = 0; r < ML_SBB_TILE; ++r)
        for (int q = 0; q < ML_SBB_TILE; ++q) acc[r][q] += va[r] * zb[q];
    }
    for (int r = 0; r < ML_SBB_TILE; ++r)
      for (int q = 0; q < ML_SBB_TILE; ++q) Ws[(ct + q * nt) * ldx + j0 + r] = acc[r][q];
  }
  ml_barrier(ctx);
  // X = T W, T upper triangular: rows j0 .. of X need W's rows from j0.
  for (int e = lane; e < (kp / ML_SBB_TILE) * nt; e += gs) {
    const int jt = e / nt, ct = e - jt * nt, j0 = jt * ML_SBB_TILE;
    for (int r = 0; r < ML_SBB_TILE; ++r)
      for (int q = 0; q < ML_SBB_TILE; ++q) acc[r][q] = 0.0f;
    for (int l = j0; l < kp; ++l) {
      float ta[ML_SBB_TILE], wb[ML_SBB_TILE];
      for (int r = 0; r < ML_SBB_TILE; ++r) ta[r] = Ts[l * kp + j0 + r];
      for (int q = 0; q < ML_SBB_TILE; ++q) wb[q] = Ws[(ct + q * nt) * ldx + l];
      for (int r = 0; r < ML_SBB_TILE; ++r)
        for (int q = 0; q < ML_SBB_TILE; ++q) acc[r][q] += ta[r] * wb[q];
    }
    for (int r = 0; r < ML_SBB_TILE; ++r)
      for (int q = 0; q < ML_SBB_TILE; ++q) Xs[(ct + q * nt) * ldx + j0 + r] = acc[r][q];
  }
  ml_barrier(ctx);
  // Z_R -= V X: rows i0 .. i0 + 3 have the columns j of V with j <= i < j + bw.
  for (int e = lane; e < (rp / ML_SBB_TILE) * nt; e += gs) {
    const int it = e / nt, ct = e - it * nt, i0 = it * ML_SBB_TILE;
    for (int r = 0; r < ML_SBB_TILE; ++r)
      for (int q = 0; q < ML_SBB_TILE; ++q) acc[r][q] = 0.0f;
    const int l0 = ml_imax(0, i0 - bw + 1), l1 = ml_imin(kp, i0 + ML_SBB_TILE);
    for (int l = l0; l < l1; ++l) {
      float va[ML_SBB_TILE], xb[ML_SBB_TILE];
      for (int r = 0; r < ML_SBB_TILE; ++r) va[r] = Vs[l * ldv + i0 + r];
      for (int q = 0; q < ML_SBB_TILE; ++q) xb[q] = Xs[(ct + q * nt) * ldx + l];
      for (int r = 0; r < ML_SBB_TILE; ++r)
        for (int q = 0; q < ML_SBB_TILE; ++q) acc[r][q] += va[r] * xb[q];
    }
    for (int q = 0; q < ML_SBB_TILE; ++q) {
      const int c = ct + q * nt;
      if (c >= cols) continue;
      for (int r = 0; r < ML_SBB_TILE; ++r) {
        const int i = i0 + r;
        if (i < rows) Z[(ml_i64)c * ldz + i] = Zs[c * lds + i] - acc[r][q];
      }
    }
  }
}

#endif  // ML_KERNELS_SB2ST_BACK_H
