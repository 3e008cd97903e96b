// Blocked Householder tridiagonalisation of a symmetric matrix (LAPACK's sytrd / latrd scheme,
// lower form), the steps the host sequences (core/src/blocked_eigh.cpp). For each panel of
// jb <= nb columns starting at j0, and each column i = j0 + c of it, two launches over many
// groups (groups over row blocks or columns x matrices):
//   trd_update  rows i .. n - 1, a block of rows per group (each row's sums over the panel's
//               columns split over slices of the group's lanes, so that a column of n rows
//               keeps the whole device busy):
//               column c - 1 of the panel's W (reflector i - 1),
//                 w = tau (y - V (W^T v) - W (V^T v)) - (tau / 2) (w^T v) v,
//               from y = A22 v and the dot products of trd_symv (w^T v from their partial
//               sums: tau (y^T v - 2 (V^T v)^T (W^T v))); then column i brought up to date with
//               the panel's earlier reflectors,
//                 A[i:n, i] -= V[i:n, 0:c] W[i, 0:c]^T + W[i:n, 0:c] V[i, 0:c]^T,
//               d_i = A[i, i], and per group the partial sums of squares of A[i+2:n, i];
//   trd_symv    every group forms the reflector of A[i+1:n, i] from those partial sums (the
//               same bits in every group: e_i = beta, tau_i, v_i with v_i[i+1] = 1; group 0 of
//               a matrix stores them, v_i into column c of V), then a share of
//                 y = A22 v_i  (A22 = A[i+1:n, i+1:n] as it was at the start of the panel),
//                 V^T v_i, W^T v_i  (the panel's earlier columns),
//               each output the dot product of one column with v_i read along the column by
//               consecutive lanes (coalesced: A22 is symmetric, so its column s is its row
//               s), by one simdgroup, or (tiled) by all the group's simdgroups over slices of
//               the rows, a few outputs per group; and the partial sum of y^T v_i over them.
// A last trd_update with c = jb finishes the panel's last column of W and writes the panel's
// reflectors into A's columns j0 .. j0 + jb - 1 explicitly (unit lower: column i zero to row
// i, 1 at row i + 1), as the back-transformation reads them. Then the trailing matrix
// A[j0+jb:n, j0+jb:n] -= V W^T + W V^T is one product of k = 2 jb (core/kernels/gemm.h): the
// panel buffer P holds [V | W | V] (n x 3 jb, column-major), so [V W] and [W V] are two
// windows of it.
// Operands of both steps: 0 A (n x n, column-major, ld[0]), 1 P (ld[1]), 2 the vectors
// (ml_trd_vec_floats(n), offsets ML_TRD_*: d, e, tau, the dot products t[q] = V_q^T v and
// t[jb + q] = W_q^T v, y, the partial sums of trd_update (two per group) and of trd_symv).
// p.n = n; i[0] = j0, i[1] = c, i[2] = jb (<= 64).
#ifndef ML_KERNELS_SYTRD_BLOCKED_H
#define ML_KERNELS_SYTRD_BLOCKED_H

#include "blocked_common.h"
#include "householder.h"

// Offsets in the vectors operand of an n x n problem.
#define ML_TRD_D(n) 0
#define ML_TRD_E(n) (n)
#define ML_TRD_TAU(n) (2 * (n))
#define ML_TRD_T(n) (3 * (n))
#define ML_TRD_Y(n) (3 * (n) + 128)
#define ML_TRD_PU(n) (4 * (n) + 128)
#define ML_TRD_PS(n) (6 * (n) + 128)
#define ML_TRD_Q(n) (7 * (n) + 256)
// Columns of a block of the triangle form of trd_symv (below), and its slots of partial sums:
// rows of n floats, one per column block (the row sums) and one per chunk of rows (the column
// sums), ml_trd_tri_slots(n) of each.
#define ML_TRD_TRI_T 32
#ifndef ML_TRD_TRI_ROWS
#define ML_TRD_TRI_ROWS 2  // rows a lane loads together in the triangle form
#endif
ML_HOST_FN int ml_trd_tri_slots(int n) { return (n + ML_TRD_TRI_T - 1) / ML_TRD_TRI_T; }
// Floats of the vectors operand; tri: with the triangle form's partial sums.
ML_HOST_FN ml_i64 ml_trd_vec_floats(int n, int tri) {
  return 7 * (ml_i64)n + 256 + (tri ? 2 * (ml_i64)ml_trd_tri_slots(n) * n : 0);
}
// Items of the triangle form over r rows in chunks of h rows (a multiple of ML_TRD_TRI_T):
// chunk C holds the column blocks J < min(nbk, (C + 1) h / T) (those with rows in it), so
// sum over C of that; the first a chunks hold fewer than all nbk blocks.
ML_HOST_FN int ml_trd_tri_items(int r, int h) {
  const int nbk = (r + ML_TRD_TRI_T - 1) / ML_TRD_TRI_T, nch = (r + h - 1) / h;
  const int m = h / ML_TRD_TRI_T, a0 = (nbk - 1) / m, a = a0 < nch ? a0 : nch;
  return m * a * (a + 1) / 2 + (nch - a) * nbk;
}

// Shared floats of trd_update with panel width nb and gs lanes in groups of rl rows: row i of
// V and W, W's new column at the group's rows, the slices' partial sums, reduction buffers.
ML_HOST_FN int ml_trd_update_shared_floats(int nb, int gs, int rl) {
  return 2 * nb + rl + gs + 2 * ML_RED_FLOATS;
}
// Shared floats of trd_symv: the slices' partial sums (tiled: per outputs x simdgroups),
// reduction buffers, and v_i of r entries when staged.
ML_HOST_FN int ml_trd_symv_shared_floats(int r, int staged, int tiled_floats) {
  return ML_RED_FLOATS + tiled_floats + (staged ? r : 0);
}

// trd_update: groups batch x ceil((n - rs) / rl), rs = j0 for c = jb, else i, rl = p.m rows
// per group (0: the group size; it divides the group size). Lane l of group g takes row
// rs + g rl + l % rl and the panel columns q = l / rl (mod gs / rl): the columns' sums over
// slices of the panel keep many loads in flight per row. i[3]: the partial sums trd_symv left
// for column c - 1 (its group count).
// Row blocks of trd_update for column c of the panel at j0 of width jb, rl rows per group.
ML_FN int ml_trd_update_groups(int n, int j0, int c, int jb, int rl) {
  return (n - (c == jb ? j0 : j0 + c) + rl - 1) / rl;
}
// Groups of trd_symv for column c (per outputs each).
ML_FN int ml_trd_symv_groups(int n, int j0, int c, int per) {
  return (n - 1 - (j0 + c) + 2 * c + per - 1) / per;
}

// Group g (< ml_trd_update_groups) of matrix b of trd_update for column c; nps: the groups of
// the trd_symv before (its partial sums).
ML_FN void ml_trd_update_at(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE float *ws, ml_i64 b, int g,
                            int c, int nps, int h) {
  const int n = p.n, j0 = p.i[0], jb = p.i[2];
  const int lane = ctx.lane, gs = ctx.group_size;
  const int rl = p.m > 0 && p.m < gs ? p.m : gs, nq = gs / rl;
  const int rlane = lane % rl, qs = lane / rl;  // qs >= nq: idle
  const int i = j0 + c, rs = c == jb ? j0 : i;
  const int r = rs + g * rl + rlane;  // this lane's row (past the matrix: idle)
  const bool live = r < n && qs < nq;
  const int ld = p.ld[0], ldp = p.ld[1];
  ML_DEVICE float *A = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE float *V = ws + p.off[1] + b * p.stride[1];
  ML_DEVICE float *W = V + (ml_i64)jb * ldp;
  ML_DEVICE float *vec = ws + p.off[2] + b * p.stride[2];
  ML_DEVICE float *TAU = vec + ML_TRD_TAU(n);
  ML_DEVICE const float *TV = vec + ML_TRD_T(n);
  ML_DEVICE const float *Y = vec + ML_TRD_Y(n);
  ML_SHARED float *vi = ctx.scratch;  // V[i, 0:c], W[i, 0:c]
  ML_SHARED float *wi = vi + jb;
  ML_SHARED float *wrs = wi + jb;    // W[r, c - 1] of the group's rows
  ML_SHARED float *part = wrs + rl;  // a partial sum per lane
  ML_SHARED float *red = part + gs;  // 2 x ML_RED_FLOATS

  // Column c - 1 of W, when reflector i - 1 exists (trd_symv ran for it).
  const int q0 = c - 1;
  const bool fin = c > 0 && i - 1 < n - 1;
  // The triangle form (h > 0 rows per chunk): y of reflector i - 1 (rows i .. n - 1, relative
  // index row - i) from its slots' partial sums (ml_trd_tri_at).
  const int T = ML_TRD_TRI_T, nch = h > 0 ? (n - i + h - 1) / h : 0;
  ML_DEVICE const float *Q = vec + ML_TRD_Q(n);
  const ml_i64 S = ml_trd_tri_slots(n);
  if (fin) {
    ML_DEVICE const float *PS = vec + ML_TRD_PS(n);
    float s = 0.0f, t1 = 0.0f, t2 = 0.0f, y0 = 0.0f;
    for (int k = lane; k < nps; k += gs) s += PS[k];
    for (int k = lane; k < nch; k += gs) y0 += Q[(S + k) * n];
    // (V^T v)^T (W^T v), and row i of the new column (every group needs it; group g's own
    // rows may not include it), the earlier columns' terms spread over the lanes.
    for (int q = lane; q < q0; q += gs) {
      t1 += TV[q] * TV[jb + q];
      t2 += V[(ml_i64)q * ldp + i] * TV[jb + q] + W[(ml_i64)q * ldp + i] * TV[q];
    }
    const float yv = ml_group_sum(ctx, s, red);
    const float tt = ml_group_sum(ctx, t1, red + 32);
    const float ti = ml_group_sum(ctx, t2, red + ML_RED_FLOATS);
    const float yi = h > 0 ? ml_group_sum(ctx, y0, red + ML_RED_FLOATS + 32) : Y[i];
    const float tau = TAU[i - 1];
    const float alpha = -0.5f * tau * (tau * (yv - 2.0f * tt));
    // w at row r (>= i) of the column: the slices' sums, then one lane per row.
    float xs = 0.0f;
    if (live && r >= i) {
      for (int q = qs; q < q0; q += nq)
        xs += V[(ml_i64)q * ldp + r] * TV[jb + q] + W[(ml_i64)q * ldp + r] * TV[q];
      if (h > 0) {  // minus this slice's share of y_r's slots, two loads in flight
        const int k = r - i, K = k / T, c0 = K * T / h, ns = K + nch - c0;
        ML_DEVICE const float *Qk = Q + k, *Qc = Q + (S + c0 - K) * n + k;
        float y0 = 0.0f, y1 = 0.0f;
        int q = qs;
        for (; q + nq < ns; q += 2 * nq) {
          y0 += (q < K ? Qk : Qc)[(ml_i64)q * n];
          y1 += (q + nq < K ? Qk : Qc)[(ml_i64)(q + nq) * n];
        }
        if (q < ns) y0 += (q < K ? Qk : Qc)[(ml_i64)q * n];
        xs -= y0 + y1;
      }
    }
    part[lane] = xs;
    ml_barrier(ctx);
    if (live && qs == 0 && r >= i) {
      float x = h > 0 ? 0.0f : Y[r];
      for (int k = 0; k < nq; ++k) x -= part[k * rl + rlane];
      const float wr = tau * x + alpha * V[(ml_i64)q0 * ldp + r];
      W[(ml_i64)q0 * ldp + r] = wr;
      wrs[rlane] = wr;
    }
    if (c < jb && lane == 0) wi[q0] = tau * (yi - ti) + alpha * V[(ml_i64)q0 * ldp + i];
  }

  if (c == jb) {
    // The panel's reflectors into A, rows j0 .. n - 1 (V's rows above i + 1 were never written).
    if (live)
      for (int q = qs; q < jb; q += nq) {
        const int iq = j0 + q;
        A[(ml_i64)iq * ld + r] =
            r <= iq ? 0.0f : r == iq + 1 ? 1.0f : V[(ml_i64)q * ldp + r];
      }
    return;
  }

  for (int q = lane; q < c; q += gs) {
    vi[q] = V[(ml_i64)q * ldp + i];
    if (q < q0 || !fin) wi[q] = W[(ml_i64)q * ldp + i];
  }
  ml_barrier(ctx);
  ML_DEVICE float *col = A + (ml_i64)i * ld;
  float xs = 0.0f;
  if (live)
    for (int q = qs; q < c; q += nq) {
      const float wq = q == q0 && fin ? wrs[rlane] : W[(ml_i64)q * ldp + r];
      xs += V[(ml_i64)q * ldp + r] * wi[q] + wq * vi[q];
    }
  part[lane] = xs;
  ml_barrier(ctx);
  float x = 0.0f;
  const bool own = live && qs == 0;  // the lane that finishes row r
  if (own) {
    x = col[r];
    for (int k = 0; k < nq; ++k) x -= part[k * rl + rlane];
    col[r] = x;
    if (r == i) {
      vec[ML_TRD_D(n) + i] = x;
      if (i == n - 1) TAU[i] = 0.0f;
    }
  }
  // Partial sums of squares of A[i+2:n, i] (and of its entries times 2^60, for the rescaled
  // reflector of a tiny column), per group.
  const bool tail = own && r >= i + 2;
  const float x2 = tail ? x * x : 0.0f, xu = tail ? x * ML_HOUSE_UP : 0.0f;
  const float s = ml_group_sum(ctx, x2, red + ML_RED_FLOATS);
  const float su = ml_group_sum(ctx, xu * xu, red + ML_RED_FLOATS + 32);
  if (lane == 0) {
    ML_DEVICE float *PU = vec + ML_TRD_PU(n);
    PU[2 * g] = s;
    PU[2 * g + 1] = su;
  }
}

ML_FN void ml_step_trd_update(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int gs = ctx.group_size, rl = p.m > 0 && p.m < gs ? p.m : gs;
  const ml_i64 gpm = ml_trd_update_groups(p.n, p.i[0], p.i[1], p.i[2], rl);
  const ml_i64 b = ctx.group_id / gpm;
  ml_trd_update_at(ctx, p, ws, b, (int)(ctx.group_id - b * gpm), p.i[1], p.i[3], 0);
}

// Output t of trd_symv for column c (its sum s) into vec: y's entry (t < r; *yv += s v_t,
// v = (1, x[1..] hs)), else the coefficients of V's and W's columns.
ML_FN void ml_trd_symv_put(ML_DEVICE float *vec, int n, int r, int r0, int c, int jb, int t,
                           float s, ML_DEVICE const float *x, float hs, ML_THREAD float *yv) {
  if (t < r) {
    vec[ML_TRD_Y(n) + r0 + t] = s;
    *yv += s * (t == 0 ? 1.0f : x[t] * hs);
  } else if (t < r + c) {
    vec[ML_TRD_T(n) + (t - r)] = s;
  } else {
    vec[ML_TRD_T(n) + jb + (t - r - c)] = s;
  }
}

// The reflector of column i = j0 + c from the partial sums of squares of the trd_update before
// (nu groups), identically in every group (the same sums in the same order), in two parts so
// that loads can be in flight between them (the triangle form; trd_symv has the same inline,
// which keeps trd_panel's kernel under its register cap): this lane's share of the sums (s), then the
// reflector, with which the group with own set stores v_i into column c of V (both copies),
// e_i and tau_i. Returns the scale hs of x = A[i+1:n, i] that gives v (v_0 = 1, v_t = x[t]
// hs). red: 2 x 32 floats.
typedef struct {
  float s, su;  // sums of squares, and of the entries times 2^60
} ml_trd_sq;
ML_FN void ml_trd_reflector_sums(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE const float *ws,
                                 ml_i64 b, int nu, ML_THREAD ml_trd_sq *q) {
  ML_DEVICE const float *PU = ws + p.off[2] + b * p.stride[2] + ML_TRD_PU(p.n);
  q->s = 0.0f;
  q->su = 0.0f;
  for (int k = ctx.lane; k < nu; k += ctx.group_size) {
    q->s += PU[2 * k];
    q->su += PU[2 * k + 1];
  }
}
ML_FN float ml_trd_reflector_finish(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE float *ws, ml_i64 b,
                                    int c, ML_THREAD const ml_trd_sq *q, bool own,
                                    ML_SHARED float *red) {
  const int n = p.n, jb = p.i[2], i = p.i[0] + c, r = n - 1 - i, r0 = i + 1;
  const int ld = p.ld[0], ldp = p.ld[1], lane = ctx.lane, gs = ctx.group_size;
  ML_DEVICE const float *A = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE float *vec = ws + p.off[2] + b * p.stride[2];
  const float sigma = ml_group_sum(ctx, q->s, red);
  const float sigma_up = ml_group_sum(ctx, q->su, red + 32);
  ML_DEVICE const float *x = A + (ml_i64)i * ld + r0;  // x[0] = alpha, x[1..] the tail
  ml_house_t h;
  if (sigma < ML_HOUSE_TINY) ml_house_finish(x[0], sigma_up, ML_HOUSE_UP, &h);
  else ml_house_finish(x[0], sigma, 1.0f, &h);
  if (own) {
    ML_DEVICE float *V = ws + p.off[1] + b * p.stride[1];
    ML_DEVICE float *vc = V + (ml_i64)c * ldp + r0;
    ML_DEVICE float *vc2 = vc + 2 * (ml_i64)jb * ldp;
    for (int t = lane; t < r; t += gs) {
      const float v = t == 0 ? 1.0f : x[t] * h.scale;
      vc[t] = v;
      vc2[t] = v;
    }
    if (lane == 0) {
      vec[ML_TRD_E(n) + i] = h.beta;
      vec[ML_TRD_TAU(n) + i] = h.tau;
    }
  }
  return h.scale;
}

// trd_symv: groups batch x ceil((r + 2c) / i[3]), r = n - 1 - i rows below column i = j0 + c;
// each group takes i[3] consecutive outputs: output t < r is y[i+1+t] = A[i+1:n, i+1+t]^T v,
// output r + q is V_q^T v (t[q]), output r + c + q is W_q^T v (t[jb + q]), q < c; its partial
// sum of y^T v goes to the ML_TRD_PS slot of its index. p.m: the groups of the trd_update
// before (its partial sums). flags 1: v staged in shared memory; flags 2: tiled, each output
// summed by all the group's simdgroups, each over a slice of the r rows (many simdgroups per
// column: the loads in flight that a column's latency needs), else one simdgroup per output.
// Outputs t0 .. t0 + per - 1 of trd_symv for column c of matrix b, its partial sum of y^T v
// into PS slot g (g = 0 stores the reflector); nu: the groups of the trd_update before.
ML_FN void ml_trd_symv_at(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE float *ws, ml_i64 b, int g,
                          int t0, int c, int per, int nu) {
  const int n = p.n, j0 = p.i[0], jb = p.i[2];
  const int i = j0 + c, r = n - 1 - i, r0 = i + 1, outs = r + 2 * c;
  const int ld = p.ld[0], ldp = p.ld[1], lane = ctx.lane, gs = ctx.group_size;
  const bool staged = (p.flags & 1) != 0, tiled = (p.flags & 2) != 0;
  const int sl = ml_simd_lane(ctx), sid = ml_simd_id(ctx), nsg = ml_simd_count(ctx);
  ML_DEVICE const float *A = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE float *V = ws + p.off[1] + b * p.stride[1];
  ML_DEVICE float *W = V + (ml_i64)jb * ldp;
  ML_DEVICE float *vec = ws + p.off[2] + b * p.stride[2];
  ML_SHARED float *red = ctx.scratch;
  ML_SHARED float *tp = red + ML_RED_FLOATS;  // tiled: per x nsg partial sums
  ML_SHARED float *vs = tp + (tiled ? per * nsg : 0);

  // The reflector, identically in every group (the same sums in the same order; as
  // ml_trd_reflector_sums / _finish, written out).
  ML_DEVICE const float *PU = vec + ML_TRD_PU(n);
  float s0 = 0.0f, s1 = 0.0f;
  for (int k = lane; k < nu; k += gs) {
    s0 += PU[2 * k];
    s1 += PU[2 * k + 1];
  }
  const float sigma = ml_group_sum(ctx, s0, red);
  const float sigma_up = ml_group_sum(ctx, s1, red + 32);
  ML_DEVICE const float *x = A + (ml_i64)i * ld + r0;  // x[0] = alpha, x[1..] the tail
  ml_house_t h;
  if (sigma < ML_HOUSE_TINY) ml_house_finish(x[0], sigma_up, ML_HOUSE_UP, &h);
  else ml_house_finish(x[0], sigma, 1.0f, &h);
  const float hs = h.scale;
  if (staged) {
    for (int t = lane; t < r; t += gs) vs[t] = t == 0 ? 1.0f : x[t] * hs;
    ml_barrier(ctx);
  }
  if (g == 0) {
    ML_DEVICE float *vc = V + (ml_i64)c * ldp + r0;
    ML_DEVICE float *vc2 = vc + 2 * (ml_i64)jb * ldp;
    for (int t = lane; t < r; t += gs) {
      const float v = t == 0 ? 1.0f : x[t] * hs;
      vc[t] = v;
      vc2[t] = v;
    }
    if (lane == 0) {
      vec[ML_TRD_E(n) + i] = h.beta;
      vec[ML_TRD_TAU(n) + i] = h.tau;
    }
  }
  const int t1 = t0 + per < outs ? t0 + per : outs;
  // Rows of this simdgroup's share of every output (all rows when not tiled).
  const int seg = tiled ? ((r + nsg - 1) / nsg + 31) / 32 * 32 : r;
  const int k0 = tiled ? sid * seg : 0, k1 = k0 + seg < r ? k0 + seg : r;
  float yv = 0.0f;  // y_t v_t of the outputs this lane finishes
  for (int t = tiled ? t0 : t0 + sid; t < t1; t += tiled ? 1 : nsg) {
    ML_DEVICE const float *col;
    if (t < r) col = A + (ml_i64)(r0 + t) * ld + r0;
    else if (t < r + c) col = V + (ml_i64)(t - r) * ldp + r0;
    else col = W + (ml_i64)(t - r - c) * ldp + r0;
    // Four loads in flight per lane (the product is bound by the memory latency).
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    int k = k0 + sl;
    if (staged) {
      for (; k + 96 < k1; k += 128) {
        a0 = ml_fma(col[k], vs[k], a0);
        a1 = ml_fma(col[k + 32], vs[k + 32], a1);
        a2 = ml_fma(col[k + 64], vs[k + 64], a2);
        a3 = ml_fma(col[k + 96], vs[k + 96], a3);
      }
      for (; k < k1; k += 32) a0 = ml_fma(col[k], vs[k], a0);
    } else {
      for (; k < k1; k += 32) a0 = ml_fma(col[k], k == 0 ? 1.0f : x[k] * hs, a0);
    }
    const float s = ml_simd_sum(ctx, (a0 + a2) + (a1 + a3));
    if (tiled) {
      if (sl == 0) tp[(t - t0) * nsg + sid] = s;
    } else if (sl == 0) {
      ml_trd_symv_put(vec, n, r, r0, c, jb, t, s, x, hs, &yv);
    }
  }
  if (tiled) {
    ml_barrier(ctx);
    for (int t = t0 + lane; t < t1; t += gs) {
      float s = 0.0f;
      for (int w = 0; w < nsg; ++w) s += tp[(t - t0) * nsg + w];
      ml_trd_symv_put(vec, n, r, r0, c, jb, t, s, x, hs, &yv);
    }
  }
  yv = ml_group_sum(ctx, yv, red);
  if (lane == 0) vec[ML_TRD_PS(n) + g] = yv;
}

ML_FN void ml_step_trd_symv(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 gpm = ml_trd_symv_groups(p.n, p.i[0], p.i[1], p.i[3]);
  const ml_i64 b = ctx.group_id / gpm;
  const int g = (int)(ctx.group_id - b * gpm);
  ml_trd_symv_at(ctx, p, ws, b, g, g * p.i[3], p.i[1], p.i[3], p.m);
}

// The triangle form of trd_symv (trd_panel with p.k = h > 0): y = A22 v from A22's lower
// triangle alone (half the reads of the full columns). Relative to r0 = i + 1, the r columns
// fall in blocks J of T = ML_TRD_TRI_T and the rows in chunks C of h (a multiple of T). Item
// (J, C) reads the rows of chunk C from row J T down of block J's columns (the diagonal tile
// whole: both of its triangles are A22's) and leaves, in the vectors operand's slots Q (rows
// of n floats, relative index): the column sums over its rows, Q[S + C][t] for t in block J
// (S = ml_trd_tri_slots(n)), and the row sums over its columns, Q[J][k], for its rows k >= (J +
// 1) T. So y_k, k in block K, is sum over C >= K T / h of Q[S + C][k] plus sum over J < K of
// Q[J][k] (trd_update adds them), and the item's share of y^T v is over what it wrote. Simdgroup
// s takes columns s, s + nsg, ... (four at a time) over all the item's rows, a lane a row:
// one load per entry serves both sums. Items chunk-major (ml_trd_tri_items); g = 0 stores the
// reflector.
ML_FN void ml_trd_tri_at(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE float *ws, ml_i64 b, int g,
                         int c, int nu) {
  const int n = p.n, i = p.i[0] + c, r = n - 1 - i, r0 = i + 1, h = p.k, T = ML_TRD_TRI_T;
  const int ld = p.ld[0], lane = ctx.lane, gs = ctx.group_size;
  const int sl = ml_simd_lane(ctx), sid = ml_simd_id(ctx), nsg = ml_simd_count(ctx);
  ML_DEVICE const float *A = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE float *vec = ws + p.off[2] + b * p.stride[2];
  ML_DEVICE float *Q = vec + ML_TRD_Q(n);
  const ml_i64 S = ml_trd_tri_slots(n);
  ML_SHARED float *red = ctx.scratch;
  ML_SHARED float *rsh = red + ML_RED_FLOATS;  // nsg x h row sums
  ML_SHARED float *dsh = rsh + nsg * h;         // the block's column sums

  // The reflector's sums in flight while the entries are read; the sums below are of x with
  // x[0] = 0 (v / hs but for v_0 = 1), scaled and given row / column 0's term at the end.
  ml_trd_sq sq;
  ml_trd_reflector_sums(ctx, p, ws, b, nu, &sq);
  ML_DEVICE const float *x = A + (ml_i64)i * ld + r0;
  const int nbk = (r + T - 1) / T, m = h / T;
  int C = 0, J = g;
  for (;;) {
    const int cnt = nbk < (C + 1) * m ? nbk : (C + 1) * m;
    if (J < cnt) break;
    J -= cnt;
    ++C;
  }
  const int ca = J * T, cb = ca + T < r ? ca + T : r;
  const int ra = C * h > ca ? C * h : ca, rb = C * h + h < r ? C * h + h : r;
  ML_SHARED float *rs = rsh + sid * h;  // this simdgroup's row sums, rows from ra
  for (int tb = ca + sid; tb < ca + T; tb += 4 * nsg) {
    // Columns tb + j nsg, j < 4 (u: inside the block), x at them (w), their entries a few rows
    // at a time.
    float w[4], d[4];
    bool u[4];
    for (int j = 0; j < 4; ++j) {
      const int t = tb + j * nsg;
      u[j] = t < cb;
      w[j] = u[j] && t > 0 ? x[t] : 0.0f;
      d[j] = 0.0f;
    }
    ML_DEVICE const float *col = A + (ml_i64)(r0 + tb) * ld + r0;
    const int cs = nsg * ld;  // from one of the simdgroup's columns to the next
    const bool first = tb < ca + 4 * nsg;
    int k = ra + sl;
    for (; k + 32 * (ML_TRD_TRI_ROWS - 1) < rb; k += 32 * ML_TRD_TRI_ROWS) {
      float vk[ML_TRD_TRI_ROWS], q[ML_TRD_TRI_ROWS];
      for (int e = 0; e < ML_TRD_TRI_ROWS; ++e) {
        const int kk = k + 32 * e;
        vk[e] = kk == 0 ? 0.0f : x[kk];
        q[e] = 0.0f;
      }
      for (int j = 0; j < 4; ++j) {
        ML_DEVICE const float *cj = col + j * cs + k;
        for (int e = 0; e < ML_TRD_TRI_ROWS; ++e) {
          const float a = u[j] ? cj[32 * e] : 0.0f;
          q[e] = ml_fma(a, w[j], q[e]);
          d[j] = ml_fma(a, vk[e], d[j]);
        }
      }
      for (int e = 0; e < ML_TRD_TRI_ROWS; ++e) {
        const int kk = k + 32 * e;
        rs[kk - ra] = first ? q[e] : rs[kk - ra] + q[e];
      }
    }
    for (; k < rb; k += 32) {
      const float vk = k == 0 ? 0.0f : x[k];
      float q = 0.0f;
      for (int j = 0; j < 4; ++j) {
        const float a = u[j] ? col[j * cs + k] : 0.0f;
        q = ml_fma(a, w[j], q);
        d[j] = ml_fma(a, vk, d[j]);
      }
      rs[k - ra] = first ? q : rs[k - ra] + q;
    }
    for (int j = 0; j < 4; ++j) {
      d[j] = ml_simd_sum(ctx, d[j]);
      if (sl == 0 && u[j]) dsh[tb + j * nsg - ca] = d[j];
    }
  }
  const float hs = ml_trd_reflector_finish(ctx, p, ws, b, c, &sq, g == 0, red);  // barriers
  // Column sums: scaled, plus row 0's term where the item has row 0 (J = C = 0).
  float yv = 0.0f;
  for (int t = ca + lane; t < cb; t += gs) {
    const float d = dsh[t - ca] * hs + (ra == 0 ? A[(ml_i64)(r0 + t) * ld + r0] : 0.0f);
    Q[(S + C) * n + t] = d;
    yv += d * (t == 0 ? 1.0f : x[t] * hs);
  }
  // Row sums below the diagonal tile: scaled, plus column 0's term in block 0.
  const int rw = ca + T;
  ML_DEVICE const float *c0 = A + (ml_i64)r0 * ld + r0;
  for (int k = (ra > rw ? ra : rw) + lane; k < rb; k += gs) {
    float t = 0.0f;
    for (int g2 = 0; g2 < nsg; ++g2) t += rsh[g2 * h + k - ra];
    t = t * hs + (J == 0 ? c0[k] : 0.0f);
    Q[(ml_i64)J * n + k] = t;
    yv += t * x[k] * hs;
  }
  yv = ml_group_sum(ctx, yv, red);
  if (lane == 0) vec[ML_TRD_PS(n) + g] = yv;
}

// Symv items of trd_panel for column c (per outputs per item of the panel's dot products):
// the triangle form's and ceil(2c / per) of V^T v, W^T v (h > 0), else trd_symv's groups.
ML_FN int ml_trd_panel_symv_items(int n, int j0, int c, int per, int h) {
  if (h <= 0) return ml_trd_symv_groups(n, j0, c, per);
  return ml_trd_tri_items(n - 1 - (j0 + c), h) + (2 * c + per - 1) / per;
}

// trd_panel: a whole panel in one launch, its trd_update (c = 0 .. jb) and trd_symv (c < jb,
// where column c has a reflector) groups run as items by persistent groups, in the order the
// separate launches would run them. Per column c: batch x nu update items, then batch x ns
// symv items (nu, ns: the counts of the column that needs most; items past a column's own
// count do nothing). A group takes items by tickets from the word at off[3] and, before an
// item, waits until the word after it (the items done) counts every item of the phases before
// (all tickets below the phase's first), so each phase sees everything the ones before wrote,
// as across launches. Tickets are taken in order and no group waits on an item taken after its
// own: correct on any schedule of the groups, also one after another. p.n = n; i[0] = j0,
// i[2] = jb; p.m: rows per update item (as trd_update); i[3]: outputs per symv item (tiled, as
// trd_symv with flags 2); flags 1: v staged (trd_symv); trd_panel_tri: y by the triangle form
// (ml_trd_tri_at, chunks of p.k rows) and items of per of the panel's dot products after it;
// i[1]: the scratch float past the steps' shared floats that holds the group's ticket.
// flags 4: only zero the two words (one group), before the panel's launch.
// tri: the triangle form (trd_panel_tri, p.k > 0) or not (trd_panel: its own kernel, so that
// the triangle form's registers do not weigh on it).
ML_FN void ml_trd_panel_run(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE float *ws, bool tri) {
  if (ctx.group_id >= p.groups) return;
  ML_DEVICE float *sync = ws + p.off[3];
  if ((p.flags & 4) != 0) {
    if (ctx.group_id == 0 && ctx.lane < 2) sync[ctx.lane] = 0.0f;
    return;
  }
  const int n = p.n, j0 = p.i[0], jb = p.i[2], per = p.i[3], lane = ctx.lane;
  const int gs = ctx.group_size, rl = p.m > 0 && p.m < gs ? p.m : gs;
  const ml_u32 nug = (ml_u32)ml_trd_update_groups(n, j0, 0, jb, rl);
  const int h = tri ? p.k : 0;  // > 0: the triangle form
  const ml_u32 nsg =
      h > 0 ? (ml_u32)(ml_trd_tri_items(n - 1 - j0, h) + (2 * (jb - 1) + per - 1) / per)
            : (ml_u32)ml_trd_symv_groups(n, j0, jb - 1, per);
  const ml_u32 batch = (ml_u32)p.batch, nu = batch * nug, col = nu + batch * nsg;
  const ml_u32 total = (ml_u32)jb * col + nu;
  ML_SHARED float *tick = ctx.scratch + p.i[1];
  for (;;) {
    if (lane == 0) tick[0] = ml_uint_as_float(ml_atomic_add_u32(sync, 1u));
    ml_barrier(ctx);
    const ml_u32 tk = ml_float_as_uint(tick[0]);
    ml_barrier(ctx);  // tick is rewritten only after every lane read it
    if (tk >= total) return;
    const int c = (int)(tk / col);
    ml_u32 rem = tk - (ml_u32)c * col;
    const bool symv = rem >= nu;
    if (lane == 0) {
      const ml_u32 start = (ml_u32)c * col + (symv ? nu : 0u);
      ml_u32 seen = 0;
      while (seen < start) seen = ml_load_acquire_u32(sync + 1);
    }
    ml_barrier_device(ctx);
    if (!symv) {
      const int g = (int)(rem % nug);
      if (g < ml_trd_update_groups(n, j0, c, jb, rl))
        ml_trd_update_at(ctx, p, ws, (ml_i64)(rem / nug), g, c,
                         c > 0 ? ml_trd_panel_symv_items(n, j0, c - 1, per, h) : 0, h);
    } else if (!tri) {  // written apart: the form below spills the full columns' kernel
      rem -= nu;
      const int g = (int)(rem % nsg);
      if (n - 1 - (j0 + c) > 0 && g < ml_trd_symv_groups(n, j0, c, per))
        ml_trd_symv_at(ctx, p, ws, (ml_i64)(rem / nsg), g, g * per, c, per,
                       ml_trd_update_groups(n, j0, c, jb, rl));
    } else {
      rem -= nu;
      const int g = (int)(rem % nsg), r = n - 1 - (j0 + c);
      const ml_i64 b = (ml_i64)(rem / nsg);
      const int nup = ml_trd_update_groups(n, j0, c, jb, rl);
      const int nt = h > 0 && r > 0 ? ml_trd_tri_items(r, h) : 0;
      if (r <= 0 || g >= ml_trd_panel_symv_items(n, j0, c, per, h)) {
      } else if (g < nt) {
        ml_trd_tri_at(ctx, p, ws, b, g, c, nup);
      } else {  // V^T v, W^T v (h > 0: outputs from r on), else y's and those
        ml_trd_symv_at(ctx, p, ws, b, g, (h > 0 ? r : 0) + (g - nt) * per, c, per, nup);
      }
    }
    ml_barrier_device(ctx);
    if (lane == 0) ml_atomic_add_release_u32(sync + 1, 1u);
  }
}

ML_FN void ml_step_trd_panel(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  ml_trd_panel_run(ctx, p, ws, false);
}

ML_FN void ml_step_trd_panel_tri(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  ml_trd_panel_run(ctx, p, ws, true);
}

#endif  // ML_KERNELS_SYTRD_BLOCKED_H
