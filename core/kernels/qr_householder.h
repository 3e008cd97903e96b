// Householder QR of one m x n matrix per group, the whole matrix in shared memory.
// Modes: reduced (Q m x k, R k x n), R only, complete (Q m x m, R m x n); k = min(m, n).
// The matrix is scaled by a power of two (max |a| in [1, 2)) first, so 1e-30..1e37 inputs
// keep full accuracy; R is scaled back, Q needs nothing.
// Layout: column-major in shared memory (At[c][i] = A[i][c], odd row stride), so a column is
// contiguous: a lane owning column c streams it (conflict-free across lanes on GPUs, and
// vectorisable at group size 1). Reflector norms are group reductions; the trailing update
// and the formation of Q give each lane whole columns, one or two barriers per column.
#ifndef ML_KERNELS_QR_HOUSEHOLDER_H
#define ML_KERNELS_QR_HOUSEHOLDER_H

#include "householder.h"

// Columns held in shared memory: complete Q of a tall matrix needs m columns.
ML_HOST_FN int ml_qr_householder_cols(int m, int n, int flags) {
  return (flags == ML_K_QR_COMPLETE && m > n) ? m : n;
}

// Scratch floats: the matrix (column-major, odd stride), tau, reduction slots.
ML_HOST_FN int ml_qr_householder_scratch_floats_mode(int m, int n, int flags) {
  int c = ml_qr_householder_cols(m, n, flags);
  int k = m < c ? m : c;
  return c * ml_shared_ld(m) + k + ML_RED_FLOATS;
}
// Flags-independent upper bound (the complete layout).
ML_HOST_FN int ml_qr_householder_scratch_floats(int m, int n) {
  return ml_qr_householder_scratch_floats_mode(m, n, ML_K_QR_COMPLETE);
}
ML_HOST_FN int ml_qr_householder_fits(int m, int n, int scratch_floats) {
  return m >= 1 && n >= 1 && m <= 4096 && n <= 4096 &&
         ml_qr_householder_scratch_floats(m, n) <= scratch_floats;
}
// Largest square n that fits a scratch budget in every mode (89 for Metal, 239 for sm_90).
ML_HOST_FN int ml_qr_householder_max_n(int scratch_floats) {
  int n = 0;
  while (ml_qr_householder_fits(n + 1, n + 1, scratch_floats)) ++n;
  return n;
}
// Whether a launch of this mode fits a scratch budget (fits() above budgets for complete mode;
// reduced and R-only need less).
ML_HOST_FN int ml_qr_householder_fits_mode(int m, int n, int flags, int scratch_floats) {
  return ml_qr_householder_fits(m, n, 1 << 30) &&
         ml_qr_householder_scratch_floats_mode(m, n, flags) <= scratch_floats;
}

// q: m x k (reduced) or m x m (complete), unused in R mode; r: k x n (m x n complete).
ML_FN void ml_qr_householder(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                             ML_DEVICE float *q, ML_DEVICE float *r, ML_DEVICE int *info) {
  if (ctx.group_id >= p.batch) return;
  const int m = p.m, n = p.n, lane = ctx.lane, gs = ctx.group_size;
  const int mode = p.flags;
  const int nc = ml_qr_householder_cols(m, n, mode);  // columns held
  const int k = m < nc ? m : nc;                       // reflectors
  const int kr = m < n ? m : n;                        // min(m, n)
  const int rrows = mode == ML_K_QR_COMPLETE ? m : kr;
  const int qcols = mode == ML_K_QR_COMPLETE ? m : kr;
  const int ld = ml_shared_ld(m);
  ML_SHARED float *At = ctx.scratch;  // At[c * ld + i] = A[i][c]
  ML_SHARED float *tau = At + nc * ld;
  ML_SHARED float *red = tau + k;
  const ml_i64 g = ctx.group_id;
  ML_DEVICE const float *am = a + g * (ml_i64)m * n;
  ML_DEVICE float *rm = r + g * (ml_i64)rrows * n;

  // Load (zero columns pad a complete tall matrix), scan for non-finite values and the max.
  float amax = 0.0f;
  for (int t = lane; t < m * nc; t += gs) {
    const int i = t / nc, c = t - i * nc;
    const float x = c < n ? am[(ml_i64)i * n + c] : 0.0f;
    amax = ml_isfinite(x) ? ml_fmax(amax, ml_fabs(x)) : ml_inf();
    At[c * ld + i] = x;
  }
  amax = ml_group_max(ctx, amax, red);
  if (!ml_isfinite(amax)) {
    const float qnan = ml_nan();
    for (int t = lane; t < rrows * n; t += gs) rm[t] = qnan;
    if (mode != ML_K_QR_R) {
      ML_DEVICE float *qm = q + g * (ml_i64)m * qcols;
      for (int t = lane; t < m * qcols; t += gs) qm[t] = qnan;
    }
    if (info && lane == 0) info[g] = ML_INFO_NONFINITE;
    return;
  }
  const int ex = amax > 0.0f ? ml_ilogb(amax) : 0;
  if (ex != 0) {
    for (int t = lane; t < m * nc; t += gs) {
      const int c = t / m, i = t - c * m;
      At[c * ld + i] = ml_ldexp(At[c * ld + i], -ex);
    }
  }
  ml_barrier(ctx);

  // Factor: column j's reflector, then the trailing columns, each owned by one lane.
  for (int j = 0; j < k; ++j) {
    ML_SHARED float *vj = At + j * ld;  // v_j = [1, vj[j+1..m-1]]
    ml_house_t h;
    ml_house(ctx, vj[j], vj + j + 1, 1, m - j - 1, red, &h);
    for (int i = j + 1 + lane; i < m; i += gs) vj[i] *= h.scale;
    if (lane == 0) {
      vj[j] = h.beta;
      tau[j] = h.tau;
    }
    ml_barrier(ctx);
    if (h.tau != 0.0f) {
      for (int c = j + 1 + lane; c < nc; c += gs) {
        ML_SHARED float *col = At + c * ld;
        float w = (col[j] + ml_dot(vj + j + 1, col + j + 1, m - j - 1)) * h.tau;
        col[j] -= w;
        for (int i = j + 1; i < m; ++i) col[i] -= vj[i] * w;
      }
    }
    ml_barrier(ctx);
  }

  // R, scaled back.
  for (int t = lane; t < rrows * n; t += gs) {
    const int i = t / n, c = t - i * n;
    rm[t] = c >= i ? ml_ldexp(At[c * ld + i], ex) : 0.0f;
  }
  if (info && lane == 0) {
    int bits = 0;  // as the CPU backend: an exactly zero diagonal entry of R
    for (int i = 0; i < kr; ++i)
      if (At[i * ld + i] == 0.0f) bits = ML_INFO_RANK_DEFICIENT;
    info[g] = bits;
  }
  if (mode == ML_K_QR_R) return;
  ml_barrier(ctx);

  // Q = H_0 ... H_{k-1} applied to the first qcols columns of I, backwards and in place
  // (H_j only touches rows >= j). Column c > j is owned by lane c mod gs throughout; column j
  // (which holds v_j) is rewritten by its owner after the barrier, once nobody reads v_j.
  for (int j = qcols - 1; j >= 0; --j) {
    const float tj = j < k ? tau[j] : 0.0f;
    ML_SHARED float *vj = At + j * ld;
    const int c0 = j + 1 + ((lane - j - 1) % gs + gs) % gs;
    for (int c = c0; c < qcols; c += gs) {
      ML_SHARED float *col = At + c * ld;
      const float w = ml_dot(vj + j + 1, col + j + 1, m - j - 1) * tj;  // Q[j][c] is 0 here
      col[j] = -w;
      for (int i = j + 1; i < m; ++i) col[i] -= vj[i] * w;
    }
    ml_barrier(ctx);
    if (lane == j % gs) {
      for (int i = 0; i < j; ++i) vj[i] = 0.0f;
      vj[j] = 1.0f - tj;
      for (int i = j + 1; i < m; ++i) vj[i] *= -tj;
    }
  }
  ml_barrier(ctx);
  ML_DEVICE float *qm = q + g * (ml_i64)m * qcols;
  for (int t = lane; t < m * qcols; t += gs) {
    const int i = t / qcols, c = t - i * qcols;
    qm[t] = At[c * ld + i];
  }
}

#endif  // ML_KERNELS_QR_HOUSEHOLDER_H
