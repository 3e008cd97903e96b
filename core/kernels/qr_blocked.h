// Blocked Householder QR (compact WY), the steps the host sequences (core/src/blocked_qr.cpp):
// for each panel of jb <= nb columns starting at j:
//   qr_panel   factor W[j:m, j:j+jb] in place (one group per matrix, device memory), write
//              its reflectors explicitly into V (unit diagonal, zeros above) and the upper
//              triangular T of H_j ... H_{j+jb-1} = I - V T V^T;
//   gemm x 3   the trailing columns: W2 -= V (T^T (V^T W2))  (core/kernels/gemm.h);
// then Q by the same products applied backwards to the identity. The panel and the products
// read the workspace only: the shared memory holds the panel's reduction partials.
#ifndef ML_KERNELS_QR_BLOCKED_H
#define ML_KERNELS_QR_BLOCKED_H

#include "blocked_common.h"
#include "householder.h"
#include "larft.h"

// Shared floats of a panel group of gs lanes with panel width at most nb: a partial sum per
// warp and column, two reduction buffers.
ML_HOST_FN int ml_qr_panel_shared_floats(int nb, int gs) { return ml_larft_shared_floats(nb, gs); }

// qr_panel: one group per matrix. m rows; i[0] = j (first row and column of the panel),
// i[1] = jb (its width), i[2] = nb (T's leading dimension). Operands: 0 W (m x n, ld[0]),
// 1 V (m x k, ld[1]: column j + c of V is reflector c of this panel), 2 T of this panel
// (nb x nb, column-major, ld nb; zeros below the diagonal), 3 stat (rank deficiency: an
// exactly zero diagonal entry of R sets ML_INFO_RANK_DEFICIENT).
ML_FN void ml_step_qr_panel(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE float *ws,
                            ML_DEVICE const float *a, ML_DEVICE float *o0, ML_DEVICE float *o1,
                            ML_DEVICE float *o2, ML_DEVICE int *info) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 b = ctx.group_id;
  const int j = p.i[0], jb = p.i[1], nb = p.i[2];
  const int r = p.m - j;  // rows of the panel
  const int lane = ctx.lane, gs = ctx.group_size, nw = ml_simd_count(ctx);
  const int ld = p.ld[0], ldv = p.ld[1];
  ML_DEVICE float *P = ws + p.off[0] + b * p.stride[0] + (ml_i64)j * ld + j;
  ML_DEVICE float *V = ws + p.off[1] + b * p.stride[1] + (ml_i64)j * ldv + j;
  ML_DEVICE float *T = ws + p.off[2] + b * p.stride[2];
  ML_DEVICE float *st = ws + p.off[3] + b * p.stride[3];
  ML_SHARED float *part = ctx.scratch;  // part[c * nw + warp]
  ML_SHARED float *red = part + nb * nw;
  bool zero_diag = false;

  for (int c = 0; c < jb; ++c) {
    ML_DEVICE float *col = P + (ml_i64)c * ld;
    const float alpha = col[c];
    float s = 0.0f;
    for (int i = c + 1 + lane; i < r; i += gs) s += col[i] * col[i];
    float sigma = ml_group_sum(ctx, s, red);
    float up = 1.0f;
    if (sigma < ML_HOUSE_TINY) {
      s = 0.0f;
      for (int i = c + 1 + lane; i < r; i += gs) {
        const float x = col[i] * ML_HOUSE_UP;
        s += x * x;
      }
      sigma = ml_group_sum(ctx, s, red + 32);
      up = ML_HOUSE_UP;
    }
    ml_house_t h;
    ml_house_finish(alpha, sigma, up, &h);
    for (int i = c + 1 + lane; i < r; i += gs) col[i] *= h.scale;
    if (lane == 0) {
      col[c] = h.beta;
      T[(ml_i64)c * nb + c] = h.tau;
    }
    zero_diag = zero_diag || h.beta == 0.0f;
    ml_barrier_device(ctx);
    if (h.tau == 0.0f) continue;
    // w_cc = tau (v^T W[:, cc]) for the panel's later columns: per-warp partials, then each
    // lane adds them up for the columns it updates.
    for (int cc = c + 1; cc < jb; ++cc) {
      ML_DEVICE const float *x = P + (ml_i64)cc * ld;
      float d = lane == 0 ? x[c] : 0.0f;
      for (int i = c + 1 + lane; i < r; i += gs) d += col[i] * x[i];
      d = ml_simd_sum(ctx, d);
      if (ml_simd_lane(ctx) == 0) part[cc * nw + ml_simd_id(ctx)] = d;
    }
    ml_barrier(ctx);
    for (int cc = c + 1; cc < jb; ++cc) {
      float w = 0.0f;
      for (int q = 0; q < nw; ++q) w += part[cc * nw + q];
      w *= h.tau;
      ML_DEVICE float *x = P + (ml_i64)cc * ld;
      if (lane == 0) x[c] -= w;
      for (int i = c + 1 + lane; i < r; i += gs) x[i] -= col[i] * w;
    }
    ml_barrier_device(ctx);
  }
  if (lane == 0 && zero_diag) st[2] = (float)((int)st[2] | ML_INFO_RANK_DEFICIENT);

  // V explicitly, then T (larft.h).
  for (int c = 0; c < jb; ++c) {
    ML_DEVICE const float *col = P + (ml_i64)c * ld;
    ML_DEVICE float *vc = V + (ml_i64)c * ldv;
    for (int i = lane; i < r; i += gs) vc[i] = i < c ? 0.0f : (i == c ? 1.0f : col[i]);
  }
  ml_barrier_device(ctx);
  ml_larft_group(ctx, V, ldv, r, jb, T, nb, part, red);
}

#endif  // ML_KERNELS_QR_BLOCKED_H
