// Blocked Householder tridiagonalisation of a symmetric matrix (LAPACK's sytrd / latrd scheme,
// lower form), the steps the host sequences (core/src/blocked_eigh.cpp). For each panel of
// jb <= nb columns starting at j0, and each column i = j0 + c of it, two launches over many
// groups (groups over row blocks or columns x matrices):
//   trd_update  rows i .. n - 1, a block of rows per group:
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
//               one simdgroup per output, each the dot product of one column with v_i read
//               along the column by consecutive lanes (coalesced: A22 is symmetric, so its
//               column s is its row s), and the partial sum of y^T v_i over its outputs.
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
ML_HOST_FN ml_i64 ml_trd_vec_floats(int n) { return 7 * (ml_i64)n + 256; }

// Shared floats of trd_update with panel width nb: row i of V and W, reduction buffers.
ML_HOST_FN int ml_trd_update_shared_floats(int nb) { return 2 * nb + 2 * ML_RED_FLOATS; }
// Shared floats of trd_symv: reduction buffers, and v_i of r entries when staged.
ML_HOST_FN int ml_trd_symv_shared_floats(int r, int staged) {
  return ML_RED_FLOATS + (staged ? r : 0);
}

// trd_update: groups batch x ceil((n - rs) / group size), rs = j0 for c = jb, else i; lane l
// of group g takes row rs + g * (group size) + l. i[3]: the partial sums trd_symv left for
// column c - 1 (its group count).
ML_FN void ml_step_trd_update(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE float *ws,
                              ML_DEVICE const float *a, ML_DEVICE float *o0,
                              ML_DEVICE float *o1, ML_DEVICE float *o2, ML_DEVICE int *info) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int n = p.n, j0 = p.i[0], c = p.i[1], jb = p.i[2], nps = p.i[3];
  const int lane = ctx.lane, gs = ctx.group_size;
  const int i = j0 + c, rs = c == jb ? j0 : i;
  const ml_i64 gpm = (n - rs + gs - 1) / gs;
  const ml_i64 b = ctx.group_id / gpm;
  const int g = (int)(ctx.group_id - b * gpm);
  const int r = rs + g * gs + lane;  // this lane's row (past the matrix: idle)
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
  ML_SHARED float *red = wi + jb;  // 2 x ML_RED_FLOATS

  // Column c - 1 of W, when reflector i - 1 exists (trd_symv ran for it).
  const int q0 = c - 1;
  const bool fin = c > 0 && i - 1 < n - 1;
  float wr = 0.0f;  // W[r, q0]
  if (fin) {
    ML_DEVICE const float *PS = vec + ML_TRD_PS(n);
    float s = 0.0f;
    for (int k = lane; k < nps; k += gs) s += PS[k];
    const float yv = ml_group_sum(ctx, s, red);
    float tt = 0.0f;
    for (int q = 0; q < q0; ++q) tt += TV[q] * TV[jb + q];
    const float tau = TAU[i - 1];
    const float alpha = -0.5f * tau * (tau * (yv - 2.0f * tt));
    // w at row x (>= i) of the column.
    if (r < n && r >= i) {
      float x = Y[r];
      for (int q = 0; q < q0; ++q)
        x -= V[(ml_i64)q * ldp + r] * TV[jb + q] + W[(ml_i64)q * ldp + r] * TV[q];
      wr = tau * x + alpha * V[(ml_i64)q0 * ldp + r];
      W[(ml_i64)q0 * ldp + r] = wr;
    }
    if (c < jb && lane == 0) {
      // Row i of the new column, for every group (group g's own rows may not include it).
      float x = Y[i];
      for (int q = 0; q < q0; ++q)
        x -= V[(ml_i64)q * ldp + i] * TV[jb + q] + W[(ml_i64)q * ldp + i] * TV[q];
      wi[q0] = tau * x + alpha * V[(ml_i64)q0 * ldp + i];
    }
  }

  if (c == jb) {
    // The panel's reflectors into A, rows j0 .. n - 1 (V's rows above i + 1 were never written).
    if (r < n)
      for (int q = 0; q < jb; ++q) {
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
  float x = 0.0f;
  if (r < n) {
    x = col[r];
    for (int q = 0; q < q0; ++q)
      x -= V[(ml_i64)q * ldp + r] * wi[q] + W[(ml_i64)q * ldp + r] * vi[q];
    if (c > 0) x -= V[(ml_i64)q0 * ldp + r] * wi[q0] + wr * vi[q0];
    col[r] = x;
    if (r == i) {
      vec[ML_TRD_D(n) + i] = x;
      if (i == n - 1) TAU[i] = 0.0f;
    }
  }
  // Partial sums of squares of A[i+2:n, i] (and of its entries times 2^60, for the rescaled
  // reflector of a tiny column), per group.
  const bool tail = r < n && r >= i + 2;
  const float x2 = tail ? x * x : 0.0f, xu = tail ? x * ML_HOUSE_UP : 0.0f;
  const float s = ml_group_sum(ctx, x2, red + ML_RED_FLOATS);
  const float su = ml_group_sum(ctx, xu * xu, red + ML_RED_FLOATS + 32);
  if (lane == 0) {
    ML_DEVICE float *PU = vec + ML_TRD_PU(n);
    PU[2 * g] = s;
    PU[2 * g + 1] = su;
  }
}

// trd_symv: groups batch x ceil((r + 2c) / i[3]), r = n - 1 - i rows below column i = j0 + c;
// each group takes i[3] consecutive outputs: output t < r is y[i+1+t] = A[i+1:n, i+1+t]^T v,
// output r + q is V_q^T v (t[q]), output r + c + q is W_q^T v (t[jb + q]), q < c; its partial
// sum of y^T v goes to the ML_TRD_PS slot of its index. p.m: the groups of the trd_update
// before (its partial sums). flags 1: v staged in shared memory.
ML_FN void ml_step_trd_symv(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE float *ws,
                            ML_DEVICE const float *a, ML_DEVICE float *o0, ML_DEVICE float *o1,
                            ML_DEVICE float *o2, ML_DEVICE int *info) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int n = p.n, j0 = p.i[0], c = p.i[1], jb = p.i[2], per = p.i[3];
  const int i = j0 + c, r = n - 1 - i, r0 = i + 1, outs = r + 2 * c;
  const ml_i64 gpm = (outs + per - 1) / per;
  const ml_i64 b = ctx.group_id / gpm;
  const int g = (int)(ctx.group_id - b * gpm);
  const int ld = p.ld[0], ldp = p.ld[1], lane = ctx.lane, gs = ctx.group_size;
  ML_DEVICE const float *A = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE float *V = ws + p.off[1] + b * p.stride[1];
  ML_DEVICE float *W = V + (ml_i64)jb * ldp;
  ML_DEVICE float *V2 = W + (ml_i64)jb * ldp;
  ML_DEVICE float *vec = ws + p.off[2] + b * p.stride[2];
  ML_SHARED float *red = ctx.scratch;
  ML_SHARED float *vs = red + ML_RED_FLOATS;

  // The reflector, identically in every group.
  ML_DEVICE const float *PU = vec + ML_TRD_PU(n);
  float sigma = 0.0f, sigma_up = 0.0f;
  for (int k = 0; k < p.m; ++k) {
    sigma += PU[2 * k];
    sigma_up += PU[2 * k + 1];
  }
  ML_DEVICE const float *x = A + (ml_i64)i * ld + r0;  // x[0] = alpha, x[1..] the tail
  ml_house_t h;
  if (sigma < ML_HOUSE_TINY) ml_house_finish(x[0], sigma_up, ML_HOUSE_UP, &h);
  else ml_house_finish(x[0], sigma, 1.0f, &h);
  const float hs = h.scale;
  const bool staged = (p.flags & 1) != 0;
  if (staged) {
    for (int t = lane; t < r; t += gs) vs[t] = t == 0 ? 1.0f : x[t] * hs;
    ml_barrier(ctx);
  }
  if (g == 0) {
    ML_DEVICE float *vc = V + (ml_i64)c * ldp + r0;
    ML_DEVICE float *vc2 = V2 + (ml_i64)c * ldp + r0;
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
  const int sl = ml_simd_lane(ctx), nsg = ml_simd_count(ctx);
  const int t1 = g * per + per < outs ? g * per + per : outs;
  float yv = 0.0f;  // lane 0 of a simdgroup: its outputs' y_t v_t
  for (int t = g * per + ml_simd_id(ctx); t < t1; t += nsg) {
    ML_DEVICE const float *col;
    if (t < r) col = A + (ml_i64)(r0 + t) * ld + r0;
    else if (t < r + c) col = V + (ml_i64)(t - r) * ldp + r0;
    else col = W + (ml_i64)(t - r - c) * ldp + r0;
    // Four loads in flight per lane (the product is bound by the memory latency).
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    int k = sl;
    if (staged) {
      for (; k + 96 < r; k += 128) {
        s0 = ml_fma(col[k], vs[k], s0);
        s1 = ml_fma(col[k + 32], vs[k + 32], s1);
        s2 = ml_fma(col[k + 64], vs[k + 64], s2);
        s3 = ml_fma(col[k + 96], vs[k + 96], s3);
      }
      for (; k < r; k += 32) s0 = ml_fma(col[k], vs[k], s0);
    } else {
      for (; k < r; k += 32) s0 = ml_fma(col[k], k == 0 ? 1.0f : x[k] * hs, s0);
    }
    const float s = ml_simd_sum(ctx, (s0 + s2) + (s1 + s3));
    if (sl == 0) {
      ML_DEVICE float *out;
      if (t < r) {
        out = vec + ML_TRD_Y(n) + r0 + t;
        yv += s * (t == 0 ? 1.0f : x[t] * hs);
      } else if (t < r + c) {
        out = vec + ML_TRD_T(n) + (t - r);
      } else {
        out = vec + ML_TRD_T(n) + jb + (t - r - c);
      }
      *out = s;
    }
  }
  yv = ml_group_sum(ctx, yv, red);
  if (lane == 0) vec[ML_TRD_PS(n) + g] = yv;
}

#endif  // ML_KERNELS_SYTRD_BLOCKED_H
