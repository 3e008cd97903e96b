// Blocked Householder tridiagonalisation of a symmetric matrix (LAPACK's sytrd / latrd scheme,
// lower form), the steps the host sequences (core/src/blocked_eigh.cpp). For each panel of
// jb <= nb columns starting at j0, and each column i = j0 + c of it:
//   trd_col    (one group per matrix) finishes column c - 1 of the panel's W (below), then
//              brings column i up to date with the panel's earlier reflectors,
//                A[i:n, i] -= V[i:n, 0:c] W[i, 0:c]^T + W[i:n, 0:c] V[i, 0:c]^T,
//              and reflects A[i+1:n, i] onto e_1: d_i = A[i, i], e_i = beta, tau_i, and
//              v_i (v_i[i+1] = 1) written explicitly into column c of V and into A's
//              column i (zeros above row i + 1: A then holds the unit lower reflectors);
//   trd_symv   (groups over columns x matrices) y = A22 v_i, A22 = A[i+1:n, i+1:n] as it
//              was at the start of the panel, and the dot products V^T v_i, W^T v_i with the
//              panel's earlier columns: one simdgroup per output, each the dot product of one
//              column with v_i (A22 is symmetric: its column s is its row s), read along the
//              column by consecutive lanes (coalesced, column-major);
//   trd_col    at c + 1 forms w_i = tau (y - V (W^T v) - W (V^T v)) - (tau^2 / 2)(w^T v) v,
//              column c of W (for the panel's last column a trd_col with c = jb does only this);
// then the trailing matrix A[j0+jb:n, j0+jb:n] -= V W^T + W V^T as one product of k = 2 jb
// (core/kernels/gemm.h): the panel buffer P holds [V | W | V] (n x 3 jb, column-major), so
// [V W] and [W V] are two windows of it.
// Operands of both steps: 0 A (n x n, column-major, ld[0]), 1 P (ld[1]), 2 the vectors
// d (n), e (n - 1, at n), tau (n, at 2 n) and the dot products t (2 jb, at 3 n: t[q] = V_q^T v,
// t[jb + q] = W_q^T v). p.n = n; i[0] = j0, i[1] = c, i[2] = jb.
// Everything lives in the workspace: a column the steps read is always one an earlier launch
// (or the same group, after a device barrier) wrote.
#ifndef ML_KERNELS_SYTRD_BLOCKED_H
#define ML_KERNELS_SYTRD_BLOCKED_H

#include "blocked_common.h"
#include "householder.h"

// Shared floats of trd_col with panel width nb: row i of V and W, and reduction buffers.
ML_HOST_FN int ml_trd_col_shared_floats(int nb) { return 2 * nb + ML_RED_FLOATS; }
// Shared floats of trd_symv staging v_i of r entries (0: v read from device memory).
ML_HOST_FN int ml_trd_symv_shared_floats(int r) { return r; }

ML_FN void ml_step_trd_col(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE float *ws,
                           ML_DEVICE const float *a, ML_DEVICE float *o0, ML_DEVICE float *o1,
                           ML_DEVICE float *o2, ML_DEVICE int *info) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 b = ctx.group_id;
  const int n = p.n, j0 = p.i[0], c = p.i[1], jb = p.i[2];
  const int lane = ctx.lane, gs = ctx.group_size;
  const int ld = p.ld[0], ldp = p.ld[1];
  ML_DEVICE float *A = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE float *V = ws + p.off[1] + b * p.stride[1];
  ML_DEVICE float *W = V + (ml_i64)jb * ldp;
  ML_DEVICE float *V2 = W + (ml_i64)jb * ldp;
  ML_DEVICE float *D = ws + p.off[2] + b * p.stride[2];
  ML_DEVICE float *E = D + n;
  ML_DEVICE float *TAU = D + 2 * n;
  ML_DEVICE const float *TV = D + 3 * n;
  ML_SHARED float *vi = ctx.scratch;  // V[i, 0:c], W[i, 0:c]
  ML_SHARED float *wi = vi + jb;
  ML_SHARED float *red = wi + jb;

  if (c > 0) {
    // Column c - 1 of W: y (left there by trd_symv) corrected with the panel's earlier columns.
    const int q0 = c - 1, r0 = j0 + c;  // reflector j0 + q0 has v[r0] = 1
    const float tau = TAU[j0 + q0];
    ML_DEVICE const float *v = V + (ml_i64)q0 * ldp;
    ML_DEVICE float *w = W + (ml_i64)q0 * ldp;
    float s = 0.0f;
    for (int r = r0 + lane; r < n; r += gs) {
      float x = w[r];
      for (int q = 0; q < q0; ++q)
        x -= V[(ml_i64)q * ldp + r] * TV[jb + q] + W[(ml_i64)q * ldp + r] * TV[q];
      x *= tau;
      w[r] = x;
      s += x * v[r];
    }
    const float alpha = -0.5f * tau * ml_group_sum(ctx, s, red);
    for (int r = r0 + lane; r < n; r += gs) w[r] += alpha * v[r];
    ml_barrier_device(ctx);
  }
  if (c >= jb) return;

  const int i = j0 + c;
  for (int q = lane; q < c; q += gs) {
    vi[q] = V[(ml_i64)q * ldp + i];
    wi[q] = W[(ml_i64)q * ldp + i];
  }
  ml_barrier(ctx);
  ML_DEVICE float *col = A + (ml_i64)i * ld;
  for (int r = i + lane; r < n; r += gs) {
    float x = col[r];
    for (int q = 0; q < c; ++q)
      x -= V[(ml_i64)q * ldp + r] * wi[q] + W[(ml_i64)q * ldp + r] * vi[q];
    col[r] = x;
  }
  ml_barrier_device(ctx);
  const float diag = col[i];
  if (i == n - 1) {
    // No reflector for the last column: tau 0, a zero column of V.
    if (lane == 0) {
      D[i] = diag;
      TAU[i] = 0.0f;
    }
    ml_barrier(ctx);
    for (int r = lane; r < n; r += gs) col[r] = 0.0f;
    return;
  }
  const float alpha = col[i + 1];
  float s = 0.0f;
  for (int r = i + 2 + lane; r < n; r += gs) s += col[r] * col[r];
  float sigma = ml_group_sum(ctx, s, red);
  float up = 1.0f;
  if (sigma < ML_HOUSE_TINY) {
    s = 0.0f;
    for (int r = i + 2 + lane; r < n; r += gs) {
      const float x = col[r] * ML_HOUSE_UP;
      s += x * x;
    }
    sigma = ml_group_sum(ctx, s, red + 32);
    up = ML_HOUSE_UP;
  }
  ml_house_t h;
  ml_house_finish(alpha, sigma, up, &h);
  // Every lane has read col[i] and col[i + 1] before the barrier of the sums.
  ML_DEVICE float *vc = V + (ml_i64)c * ldp;
  ML_DEVICE float *vc2 = V2 + (ml_i64)c * ldp;
  for (int r = lane; r < n; r += gs) {
    float x = 0.0f;
    if (r == i + 1) x = 1.0f;
    else if (r > i + 1) x = col[r] * h.scale;
    col[r] = x;
    if (r > i) {
      vc[r] = x;
      vc2[r] = x;
    }
  }
  if (lane == 0) {
    D[i] = diag;
    E[i] = h.beta;
    TAU[i] = h.tau;
  }
}

// trd_symv: groups batch x ceil((r + 2c) / i[3]), r = n - 1 - i rows below column i = j0 + c;
// each group takes i[3] consecutive outputs: output t < r is y[i+1+t] = A[i+1:n, i+1+t]^T v
// (into W's column c), output r + q is V_q^T v (t[q]), output r + c + q is W_q^T v (t[jb + q]),
// q < c. flags 1: v staged in shared memory (ml_trd_symv_shared_floats(r) floats).
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
  const int ld = p.ld[0], ldp = p.ld[1];
  ML_DEVICE const float *A = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE float *V = ws + p.off[1] + b * p.stride[1];
  ML_DEVICE float *W = V + (ml_i64)jb * ldp;
  ML_DEVICE float *TV = ws + p.off[2] + b * p.stride[2] + 3 * n;
  ML_DEVICE const float *vd = V + (ml_i64)c * ldp + r0;
  const bool staged = (p.flags & 1) != 0;
  ML_SHARED float *vs = ctx.scratch;
  if (staged) {
    for (int t = ctx.lane; t < r; t += ctx.group_size) vs[t] = vd[t];
    ml_barrier(ctx);
  }
  const int sl = ml_simd_lane(ctx), nsg = ml_simd_count(ctx);
  const int t1 = g * per + per < outs ? g * per + per : outs;
  for (int t = g * per + ml_simd_id(ctx); t < t1; t += nsg) {
    ML_DEVICE const float *x;
    if (t < r) x = A + (ml_i64)(r0 + t) * ld + r0;
    else if (t < r + c) x = V + (ml_i64)(t - r) * ldp + r0;
    else x = W + (ml_i64)(t - r - c) * ldp + r0;
    float s0 = 0.0f, s1 = 0.0f;
    int k = sl;
    if (staged) {
      for (; k + 32 < r; k += 64) {
        s0 = ml_fma(x[k], vs[k], s0);
        s1 = ml_fma(x[k + 32], vs[k + 32], s1);
      }
      if (k < r) s0 = ml_fma(x[k], vs[k], s0);
    } else {
      for (; k + 32 < r; k += 64) {
        s0 = ml_fma(x[k], vd[k], s0);
        s1 = ml_fma(x[k + 32], vd[k + 32], s1);
      }
      if (k < r) s0 = ml_fma(x[k], vd[k], s0);
    }
    const float s = ml_simd_sum(ctx, s0 + s1);
    if (sl == 0) {
      if (t < r) W[(ml_i64)c * ldp + r0 + t] = s;
      else if (t < r + c) TV[t - r] = s;
      else TV[jb + (t - r - c)] = s;
    }
  }
}

#endif  // ML_KERNELS_SYTRD_BLOCKED_H
