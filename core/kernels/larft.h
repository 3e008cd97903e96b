// The triangular factor T of a block of Householder reflectors in compact WY form
// (LAPACK's larft, forward, columnwise): H_0 H_1 ... H_{jb-1} = I - V T V^T, V explicit
// (unit lower trapezoidal: V[i, c] = 0 for i < c, 1 at i = c), T upper triangular.
// The group function serves the panel steps that produce V (qr_blocked.h); ml_step_larft
// builds T for reflectors another step left in the workspace.
#ifndef ML_KERNELS_LARFT_H
#define ML_KERNELS_LARFT_H

#include "group.h"

// Shared floats the group function needs for jb <= nb columns and gs lanes: per-warp partial
// sums of each column, and two reduction buffers (which hold the dot products, nb <= 64).
ML_HOST_FN int ml_larft_shared_floats(int nb, int gs) {
  return nb * ((gs + 31) / 32) + ML_RED_FLOATS;
}

// T[0:jb, 0:jb] (column-major, ld nb) from V (r x jb, column-major, ld ldv) with tau_c already
// on T's diagonal; then zeros everywhere else of the nb x nb block (the products read T as a
// full block). T[0:c, c] = -tau_c T[0:c, 0:c] (V[:, 0:c]^T v_c), column by column. part:
// nb x (warps) floats, red: ML_RED_FLOATS. Ends with a device barrier.
ML_FN void ml_larft_group(ML_CTX ctx, ML_DEVICE const float *V, int ldv, int r, int jb,
                          ML_DEVICE float *T, int nb, ML_SHARED float *part,
                          ML_SHARED float *red) {
  const int lane = ctx.lane, gs = ctx.group_size, nw = ml_simd_count(ctx);
  for (int c = 1; c < jb; ++c) {
    ML_DEVICE const float *vc = V + (ml_i64)c * ldv;
    for (int q = 0; q < c; ++q) {
      ML_DEVICE const float *vq = V + (ml_i64)q * ldv;
      float d = 0.0f;
      for (int i = c + lane; i < r; i += gs) d += vq[i] * vc[i];
      d = ml_simd_sum(ctx, d);
      if (ml_simd_lane(ctx) == 0) part[q * nw + ml_simd_id(ctx)] = d;
    }
    ml_barrier(ctx);
    // z_q = V[:, q]^T v_c from the partials (red holds z), then row q of T's column c.
    for (int q = lane; q < c; q += gs) {
      float z = 0.0f;
      for (int w = 0; w < nw; ++w) z += part[q * nw + w];
      red[q] = z;
    }
    ml_barrier(ctx);
    const float tc = T[(ml_i64)c * nb + c];
    for (int q = lane; q < c; q += gs) {
      float t = 0.0f;
      for (int l = q; l < c; ++l) t += T[(ml_i64)l * nb + q] * red[l];
      T[(ml_i64)c * nb + q] = -tc * t;
    }
    ml_barrier_device(ctx);
  }
  for (int e = lane; e < nb * nb; e += gs) {
    const int c = e / nb, q = e - c * nb;
    if (q > c || c >= jb) T[e] = 0.0f;
  }
  ml_barrier_device(ctx);
}

// larft: one group per matrix. p.m = r (rows of V), i[1] = jb, i[2] = nb (<= 64). Operands:
// 0 V (column-major, ld[0]; explicit, unit lower trapezoidal), 1 tau (jb floats), 2 T (nb x
// nb, column-major, ld nb). Shared: ml_larft_shared_floats(nb, group size).
ML_FN void ml_step_larft(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE float *ws,
                         ML_DEVICE const float *a, ML_DEVICE float *o0, ML_DEVICE float *o1,
                         ML_DEVICE float *o2, ML_DEVICE int *info) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 b = ctx.group_id;
  const int jb = p.i[1], nb = p.i[2];
  ML_DEVICE const float *V = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE const float *tau = ws + p.off[1] + b * p.stride[1];
  ML_DEVICE float *T = ws + p.off[2] + b * p.stride[2];
  for (int c = ctx.lane; c < jb; c += ctx.group_size) T[(ml_i64)c * nb + c] = tau[c];
  ml_barrier_device(ctx);
  ML_SHARED float *part = ctx.scratch;
  ml_larft_group(ctx, V, p.ld[0], p.m, jb, T, nb, part, part + nb * ml_simd_count(ctx));
}

#endif  // ML_KERNELS_LARFT_H
