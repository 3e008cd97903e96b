// Householder QR of one m x n matrix per THREAD (1 <= m, n <= 8), the whole matrix, the
// reflectors and Q in registers ("register kernel": no shared memory, no barriers, no simd).
// Same contract as qr_householder.h (outputs, modes, info bits, NaN handling, reflector and sign
// convention of LAPACK's sgeqrf + sorgqr): the group kernel's algorithm, step for step, with
// compile-time indices only. template <M, N, QC> (QC = Q's columns = R's rows: k = min(m, n), or
// m for complete tall), picked by a runtime switch over the 64 (m, n) pairs (+ 28 complete tall).
// Context: lane-per-matrix (ctx.group_size == 1, ctx.group_id = the matrix); ctx.scratch unused.
#ifndef ML_KERNELS_QR_HOUSEHOLDER_SMALL_H
#define ML_KERNELS_QR_HOUSEHOLDER_SMALL_H

#include "householder.h"  // ML_HOUSE_TINY / UP / DOWN: the same reflector rule

#define ML_QR_SMALL_MAX_N 8

// Shapes and modes the register kernel covers (every mode for 1 <= m, n <= 8).
ML_HOST_FN int ml_qr_householder_small_fits(int m, int n, int flags) {
  return m >= 1 && n >= 1 && m <= ML_QR_SMALL_MAX_N && n <= ML_QR_SMALL_MAX_N &&
         (flags == ML_K_QR_REDUCED || flags == ML_K_QR_R || flags == ML_K_QR_COMPLETE);
}
// The kernel-table forms (kernel_table.h): registers only, no scratch.
ML_HOST_FN int ml_qr_householder_small_scratch_floats_flags(int /*m*/, int /*n*/, int /*flags*/) {
  return 0;
}
ML_HOST_FN int ml_qr_householder_small_fits_flags(int m, int n, int flags, int /*scratch_floats*/) {
  return ml_qr_householder_small_fits(m, n, flags);
}

// 2^e as two factors (each a normal float for -252 <= e <= 254): x * f1 * f2 scales by 2^e
// with one rounding at most (none unless the result is subnormal).
ML_FN float ml_qrs_pow2_lo(int e) { return ml_exp2i(e / 2); }
ML_FN float ml_qrs_pow2_hi(int e) { return ml_exp2i(e - e / 2); }

// One matrix: am (M x N), qm (M x QC, unused in R mode), rm (QC x N); QC = min(M, N), or M for
// complete mode of a tall matrix (then R's extra rows are zero and Q's extra columns complete it).
template <int M, int N, int QC>
ML_FN void ml_qrs_impl(int mode, ML_DEVICE const float *am, ML_DEVICE float *qm,
                       ML_DEVICE float *rm, ML_DEVICE int *info, ml_i64 g) {
  const int K = M < N ? M : N;
  float a[M][N];
  float amax = 0.0f;
  bool bad = false;
  ML_UNROLL for (int i = 0; i < M; ++i) {
    ML_UNROLL for (int c = 0; c < N; ++c) {
      const float x = am[i * N + c];
      a[i][c] = x;
      bad = bad | !ml_isfinite(x);
      amax = ml_fmax(amax, ml_fabs(x));
    }
  }
  if (bad) {
    const float qnan = ml_nan();
    ML_UNROLL for (int t = 0; t < QC * N; ++t) rm[t] = qnan;
    if (mode != ML_K_QR_R) {
      ML_UNROLL for (int t = 0; t < M * QC; ++t) qm[t] = qnan;
    }
    if (info) info[g] = ML_INFO_NONFINITE;
    return;
  }
  // Scale by a power of two: max |a| in [1, 2).
  const int ex = amax > 0.0f ? ml_ilogb(amax) : 0;
  if (ex != 0) {
    const float f1 = ml_qrs_pow2_lo(-ex), f2 = ml_qrs_pow2_hi(-ex);
    ML_UNROLL for (int i = 0; i < M; ++i) {
      ML_UNROLL for (int c = 0; c < N; ++c) a[i][c] = a[i][c] * f1 * f2;
    }
  }

  // Factor: reflector j (as ml_house / slarfg) into a[j+1..][j], beta on the diagonal.
  float tau[K];
  ML_UNROLL for (int j = 0; j < K; ++j) {
    float sigma = 0.0f;
    ML_UNROLL for (int i = j + 1; i < M; ++i) sigma += a[i][j] * a[i][j];
    float up = 1.0f;
    if (sigma < ML_HOUSE_TINY) {  // squares underflowed (or the column is 0): scaled frame
      sigma = 0.0f;
      ML_UNROLL for (int i = j + 1; i < M; ++i) {
        const float x = a[i][j] * ML_HOUSE_UP;
        sigma += x * x;
      }
      up = ML_HOUSE_UP;
    }
    float t = 0.0f, sc = 1.0f, beta = a[j][j];
    if (sigma >= ML_HOUSE_TINY) {
      const float as = a[j][j] * up;
      const float bs = -ml_copysign(ml_hypot(as, ml_sqrt(sigma)), as);
      t = (bs - as) / bs;
      sc = up / (as - bs);
      beta = up == 1.0f ? bs : bs * ML_HOUSE_DOWN;
    }
    ML_UNROLL for (int i = j + 1; i < M; ++i) a[i][j] *= sc;
    a[j][j] = beta;
    tau[j] = t;
    ML_UNROLL for (int c = j + 1; c < N; ++c) {
      float w = a[j][c];
      ML_UNROLL for (int i = j + 1; i < M; ++i) w += a[i][j] * a[i][c];
      w *= t;
      a[j][c] -= w;
      ML_UNROLL for (int i = j + 1; i < M; ++i) a[i][c] -= a[i][j] * w;
    }
  }

  // R (QC x N), scaled back; rows >= K (complete tall) are zero.
  {
    const float g1 = ml_qrs_pow2_lo(ex), g2 = ml_qrs_pow2_hi(ex);
    ML_UNROLL for (int i = 0; i < QC; ++i) {
      ML_UNROLL for (int c = 0; c < N; ++c)
        rm[i * N + c] = (i < K && c >= i) ? a[i][c] * g1 * g2 : 0.0f;
    }
  }
  if (info) {
    int bits = 0;  // as the CPU backend: an exactly zero diagonal entry of R
    ML_UNROLL for (int i = 0; i < K; ++i) if (a[i][i] == 0.0f) bits = ML_INFO_RANK_DEFICIENT;
    info[g] = bits;
  }
  if (mode == ML_K_QR_R) return;

  // Q = H_0 ... H_{K-1} applied to the first QC columns of I, backwards. Before H_j is applied
  // rows and columns <= j are still those of I, so H_j touches rows > j of columns > j, and
  // column j becomes e_j - tau_j v_j.
  float q[M][QC];
  ML_UNROLL for (int i = 0; i < M; ++i) {
    ML_UNROLL for (int c = 0; c < QC; ++c) q[i][c] = i == c ? 1.0f : 0.0f;
  }
  ML_UNROLL for (int jj = 0; jj < K; ++jj) {
    const int j = K - 1 - jj;
    const float t = tau[j];
    ML_UNROLL for (int c = j + 1; c < QC; ++c) {
      float w = 0.0f;
      ML_UNROLL for (int i = j + 1; i < M; ++i) w += a[i][j] * q[i][c];
      w *= t;
      q[j][c] = -w;
      ML_UNROLL for (int i = j + 1; i < M; ++i) q[i][c] -= a[i][j] * w;
    }
    q[j][j] = 1.0f - t;
    ML_UNROLL for (int i = j + 1; i < M; ++i) q[i][j] = -t * a[i][j];
  }
  ML_UNROLL for (int i = 0; i < M; ++i) {
    ML_UNROLL for (int c = 0; c < QC; ++c) qm[i * QC + c] = q[i][c];
  }
}

// (M, N): complete mode of a tall matrix needs the m-column Q; every other case k columns.
#define ML_QRS_CASE(M, N)                                                                      \
  case (M - 1) * ML_QR_SMALL_MAX_N + (N - 1):                                                  \
    if (M > N && mode == ML_K_QR_COMPLETE)                                                     \
      ml_qrs_impl<M, N, M>(mode, am, qm, rm, info, g);                                         \
    else                                                                                       \
      ml_qrs_impl<M, N, (M < N ? M : N)>(mode, am, qm, rm, info, g);                           \
    break;
#define ML_QRS_ROW(M)                                                                          \
  ML_QRS_CASE(M, 1) ML_QRS_CASE(M, 2) ML_QRS_CASE(M, 3) ML_QRS_CASE(M, 4) ML_QRS_CASE(M, 5)   \
  ML_QRS_CASE(M, 6) ML_QRS_CASE(M, 7) ML_QRS_CASE(M, 8)

// q: m x k (reduced) or m x m (complete), unused (may be null) in R mode; r: k x n (m x n
// complete). Shapes outside 1..8 x 1..8 (not routed here: ml_qr_householder_small_fits) are
// left untouched.
ML_FN void ml_qr_householder_small(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                   ML_DEVICE float *q, ML_DEVICE float *r, ML_DEVICE int *info) {
  if (ctx.group_id >= p.batch) return;
  const int m = p.m, n = p.n, mode = p.flags;
  if (m < 1 || n < 1 || m > ML_QR_SMALL_MAX_N || n > ML_QR_SMALL_MAX_N) return;
  const int k = m < n ? m : n;
  const int qc = mode == ML_K_QR_COMPLETE ? m : k;  // Q's columns = R's rows
  const ml_i64 g = ctx.group_id;
  ML_DEVICE const float *am = a + g * (ml_i64)m * n;
  ML_DEVICE float *rm = r + g * (ml_i64)qc * n;
  ML_DEVICE float *qm = mode == ML_K_QR_R ? q : q + g * (ml_i64)m * qc;
  switch ((m - 1) * ML_QR_SMALL_MAX_N + (n - 1)) {
    ML_QRS_ROW(1)
    ML_QRS_ROW(2)
    ML_QRS_ROW(3)
    ML_QRS_ROW(4)
    ML_QRS_ROW(5)
    ML_QRS_ROW(6)
    ML_QRS_ROW(7)
    ML_QRS_ROW(8)
    default:
      break;
  }
}

#undef ML_QRS_ROW
#undef ML_QRS_CASE

#endif  // ML_KERNELS_QR_HOUSEHOLDER_SMALL_H
