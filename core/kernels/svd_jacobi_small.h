// Thin SVD and singular values of one m x n matrix per THREAD (1 <= m, n <= 8), everything in
// registers ("register kernel": no shared memory, no barriers, no simd): one-sided (Hestenes)
// Jacobi on the working matrix W = A (tall) or A^T (wide), M x N with M >= N, cyclic by rows,
// rotating a pair of columns when |w_p . w_q| > M eps ||w_p|| ||w_q|| (a relative test, so small
// singular values keep their relative accuracy), V accumulated from the same rotations. Then
// s_j = ||w_j||, U = W S^-1, outputs written in descending order of s (each column stored at its
// rank, so no register array is indexed at run time). Columns of negligible norm (||w_j||^2 <
// 2^-100 at the scaled frame, i.e. < 1e-15 s_max) take part in no rotation, and their U column
// is completed to an orthonormal set (Gram-Schmidt twice from the best unit vector).
// Same contract as svd_bidiag_qr.h: u m x k, s k descending >= 0, vt k x n (k = min(m, n));
// p.flags ignored (full_matrices is only routed here for square matrices, where it is thin);
// non-finite input: every output NaN, ML_INFO_NONFINITE; info bits 16+: Jacobi sweeps (the last
// one, which rotates nothing, included); ML_INFO_NOT_CONVERGED and every output NaN when the cap
// (p.max_iter, default 30 sweeps) stops it; ML_INFO_RANK_DEFICIENT when s_min <= max(m, n) ulp s_max.
// svdvals runs the same rotations without V and U, so its s and info are bitwise the svd's.
// Context: lane-per-matrix (ctx.group_size == 1, ctx.group_id = the matrix); ctx.scratch unused.
#ifndef ML_KERNELS_SVD_JACOBI_SMALL_H
#define ML_KERNELS_SVD_JACOBI_SMALL_H

#define ML_SVD_SMALL_MAX_N 8
#define ML_SVDJ_TINY 7.8886091e-31f  // 2^-100: a column norm^2 below this counts as zero
#define ML_SVDJ_UP 1.1529215e+18f    // 2^60
#define ML_SVDJ_DOWN 8.6736174e-19f  // 2^-60
#define ML_SVDJ_SWEEPS 30            // default sweep cap (LAPACK sgesvj's NSWEEP)

ML_HOST_FN int ml_svd_jacobi_small_fits(int m, int n) {
  return m >= 1 && n >= 1 && m <= ML_SVD_SMALL_MAX_N && n <= ML_SVD_SMALL_MAX_N;
}
// The kernel-table forms (kernel_table.h), for svd and svdvals: registers only, no scratch.
// (Thin only: square full_matrices is the thin problem; the core never routes the other.)
ML_HOST_FN int ml_svd_jacobi_small_scratch_floats_flags(int /*m*/, int /*n*/, int /*flags*/) {
  return 0;
}
ML_HOST_FN int ml_svd_jacobi_small_fits_flags(int m, int n, int /*flags*/, int /*scratch_floats*/) {
  return ml_svd_jacobi_small_fits(m, n);
}

// 2^e as two normal factors (e in -252..254): x * lo * hi, at most one rounding.
ML_FN float ml_svdj_pow2_lo(int e) { return ml_exp2i(e / 2); }
ML_FN float ml_svdj_pow2_hi(int e) { return ml_exp2i(e - e / 2); }

// Loads W (w[i][j]: column j of W) from A; *amax: max |a|. Returns whether A has a non-finite
// entry.
template <int M, int N>
ML_FN bool ml_svdj_load(int tall, ML_DEVICE const float *am, ML_THREAD float (*w)[N],
                        ML_THREAD float *amax) {
  bool bad = false;
  ML_UNROLL for (int i = 0; i < M; ++i) {
    ML_UNROLL for (int j = 0; j < N; ++j) {
      const float x = tall ? am[i * N + j] : am[j * M + i];
      w[i][j] = x;
      bad = bad | !ml_isfinite(x);
      *amax = ml_fmax(*amax, ml_fabs(x));
    }
  }
  return bad;
}

// Every output of the matrix NaN (non-finite input, sweep cap reached); info_bits into info.
template <int M, int N, int VEC>
ML_FN void ml_svdj_nan_outputs(int tall, ML_DEVICE float *um, ML_DEVICE float *sm,
                               ML_DEVICE float *vtm, ML_DEVICE int *info, ml_i64 g,
                               int info_bits) {
  const float qnan = ml_nan();
  ML_UNROLL for (int j = 0; j < N; ++j) sm[j] = qnan;
  if (VEC) {
    ML_UNROLL for (int t = 0; t < M * N; ++t) (tall ? um : vtm)[t] = qnan;
    ML_UNROLL for (int t = 0; t < N * N; ++t) (tall ? vtm : um)[t] = qnan;
  }
  if (info) info[g] = info_bits;
}

// One cyclic sweep over the pairs (p, q), p < q, rotating W's columns (and V's, VEC) when
// |w_p . w_q| > tol ||w_p|| ||w_q||. Returns whether it rotated.
template <int M, int N, int VEC>
ML_FN bool ml_svdj_sweep(float tol, ML_THREAD float (*w)[N],
                         ML_THREAD float (*v)[VEC ? N : 1]) {
  bool rotated = false;
  ML_UNROLL for (int p = 0; p < N - 1; ++p) {
    ML_UNROLL for (int q = p + 1; q < N; ++q) {
      float al = 0.0f, be = 0.0f, ga = 0.0f;
      ML_UNROLL for (int i = 0; i < M; ++i) {
        al += w[i][p] * w[i][p];
        be += w[i][q] * w[i][q];
        ga += w[i][p] * w[i][q];
      }
      float c = 1.0f, s = 0.0f;
      if (al >= ML_SVDJ_TINY && be >= ML_SVDJ_TINY &&
          ml_fabs(ga) > tol * (ml_sqrt(al) * ml_sqrt(be))) {
        // t: the smaller root of t^2 + 2 zeta t - 1 = 0 (zeroes the new w_p . w_q).
        const float zeta = (be - al) / (2.0f * ga);
        const float az = ml_fabs(zeta);
        float t = 1.0f / (az + (az < 1.0e18f ? ml_sqrt(1.0f + az * az) : az));
        t = zeta < 0.0f ? -t : t;
        c = 1.0f / ml_sqrt(1.0f + t * t);
        s = c * t;
        rotated = true;
      }
      ML_UNROLL for (int i = 0; i < M; ++i) {
        const float xp = w[i][p], xq = w[i][q];
        w[i][p] = c * xp - s * xq;
        w[i][q] = s * xp + c * xq;
      }
      if (VEC) {
        ML_UNROLL for (int i = 0; i < (VEC ? N : 1); ++i) {
          const int pp = VEC ? p : 0, qq = VEC ? q : 0;
          const float xp = v[i][pp], xq = v[i][qq];
          v[i][pp] = c * xp - s * xq;
          v[i][qq] = s * xp + c * xq;
        }
      }
    }
  }
  return rotated;
}

// Singular values: the column norms (rescaled when their squares underflow); tiny[j]: column j
// is negligible.
template <int M, int N>
ML_FN void ml_svdj_values(ML_THREAD float (*w)[N], ML_THREAD float *sv, ML_THREAD bool *tiny) {
  ML_UNROLL for (int j = 0; j < N; ++j) {
    float n2 = 0.0f;
    ML_UNROLL for (int i = 0; i < M; ++i) n2 += w[i][j] * w[i][j];
    tiny[j] = n2 < ML_SVDJ_TINY;
    if (tiny[j]) {
      n2 = 0.0f;
      ML_UNROLL for (int i = 0; i < M; ++i) {
        const float x = w[i][j] * ML_SVDJ_UP;
        n2 += x * x;
      }
      sv[j] = ml_sqrt(n2) * ML_SVDJ_DOWN;
    } else {
      sv[j] = ml_sqrt(n2);
    }
  }
}

// U = W S^-1; negligible columns completed (Gram-Schmidt twice against the others).
template <int M, int N>
ML_FN void ml_svdj_form_u(ML_THREAD float (*w)[N], ML_THREAD const float *sv,
                          ML_THREAD const bool *tiny) {
  ML_UNROLL for (int j = 0; j < N; ++j) {
    if (!tiny[j]) {
      const float inv = 1.0f / sv[j];
      ML_UNROLL for (int i = 0; i < M; ++i) w[i][j] *= inv;
    }
  }
  ML_UNROLL for (int j = 0; j < N; ++j) {
    if (tiny[j]) {
      bool used[N];
      ML_UNROLL for (int l = 0; l < N; ++l) used[l] = l != j && (!tiny[l] || l < j);
      // Start from the unit vector e_i farthest from the span of the used columns.
      float best = -1.0f;
      int is = 0;
      ML_UNROLL for (int i = 0; i < M; ++i) {
        float rn = 0.0f;
        ML_UNROLL for (int l = 0; l < N; ++l) rn += used[l] ? w[i][l] * w[i][l] : 0.0f;
        const float res = 1.0f - rn;
        if (res > best) {
          best = res;
          is = i;
        }
      }
      float x[M];
      ML_UNROLL for (int i = 0; i < M; ++i) x[i] = i == is ? 1.0f : 0.0f;
      ML_UNROLL for (int pass = 0; pass < 2; ++pass) {
        ML_UNROLL for (int l = 0; l < N; ++l) {
          float d = 0.0f;
          ML_UNROLL for (int i = 0; i < M; ++i) d += x[i] * w[i][l];
          d = used[l] ? d : 0.0f;
          ML_UNROLL for (int i = 0; i < M; ++i) x[i] -= d * w[i][l];
        }
      }
      float n2 = 0.0f;
      ML_UNROLL for (int i = 0; i < M; ++i) n2 += x[i] * x[i];
      const float inv = 1.0f / ml_sqrt(n2);
      ML_UNROLL for (int i = 0; i < M; ++i) w[i][j] = x[i] * inv;
    }
  }
}

// The vectors, column j at output position rk[j]. Tall: u (M x N) = U, vt (N x N) = V^T.
// Wide: u (N x N) = V, vt (N x M) = U^T.
template <int M, int N, int VEC>
ML_FN void ml_svdj_store(int tall, ML_THREAD float (*w)[N], ML_THREAD float (*v)[VEC ? N : 1],
                         ML_THREAD const int *rk, ML_DEVICE float *um, ML_DEVICE float *vtm) {
  ML_UNROLL for (int j = 0; j < N; ++j) {
    const int r = rk[j];
    if (tall) {
      ML_UNROLL for (int i = 0; i < M; ++i) um[i * N + r] = w[i][j];
      ML_UNROLL for (int i = 0; i < (VEC ? N : 1); ++i) vtm[r * N + i] = v[i][VEC ? j : 0];
    } else {
      ML_UNROLL for (int i = 0; i < (VEC ? N : 1); ++i) um[i * N + r] = v[i][VEC ? j : 0];
      ML_UNROLL for (int i = 0; i < M; ++i) vtm[r * M + i] = w[i][j];
    }
  }
}

// One matrix, working shape M x N (M >= N). tall: A is M x N (W = A), else A is N x M (W = A^T).
// VEC = 0: s and info only (u, vt unused).
template <int M, int N, int VEC>
ML_FN void ml_svdj_impl(int tall, int max_sweeps, ML_DEVICE const float *am, ML_DEVICE float *um,
                        ML_DEVICE float *sm, ML_DEVICE float *vtm, ML_DEVICE int *info,
                        ml_i64 g) {
  float w[M][N];  // w[i][j]: column j of W
  float amax = 0.0f;
  if (ml_svdj_load<M, N>(tall, am, w, &amax)) {
    ml_svdj_nan_outputs<M, N, VEC>(tall, um, sm, vtm, info, g, ML_INFO_NONFINITE);
    return;
  }
  // Scale by a power of two: max |a| in [1, 2).
  const int ex = amax > 0.0f ? ml_ilogb(amax) : 0;
  if (ex != 0) {
    const float f1 = ml_svdj_pow2_lo(-ex), f2 = ml_svdj_pow2_hi(-ex);
    ML_UNROLL for (int i = 0; i < M; ++i) {
      ML_UNROLL for (int j = 0; j < N; ++j) w[i][j] = w[i][j] * f1 * f2;
    }
  }
  float v[VEC ? N : 1][VEC ? N : 1];
  if (VEC) {
    ML_UNROLL for (int i = 0; i < (VEC ? N : 1); ++i) {
      ML_UNROLL for (int j = 0; j < (VEC ? N : 1); ++j) v[i][j] = i == j ? 1.0f : 0.0f;
    }
  }

  // Cyclic sweeps until one rotates nothing (or the cap).
  const float tol = (float)M * ML_FLT_EPS;
  int sweeps = 0, converged = N < 2 ? 1 : 0;
  while (!converged && sweeps < max_sweeps) {
    const bool rotated = ml_svdj_sweep<M, N, VEC>(tol, w, v);
    ++sweeps;
    converged = rotated ? 0 : 1;
  }
  if (!converged) {  // sweep cap reached: NaN outputs, as for non-finite input
    ml_svdj_nan_outputs<M, N, VEC>(
        tall, um, sm, vtm, info, g,
        ML_INFO_NOT_CONVERGED | (ml_imin(sweeps, 0xffff) << ML_INFO_SWEEPS_SHIFT));
    return;
  }
  float sv[N];
  bool tiny[N];
  ml_svdj_values<M, N>(w, sv, tiny);
  // Rank of each column in descending order (ties by index): its output position.
  int rk[N];
  float smax = 0.0f, smin = sv[0];
  ML_UNROLL for (int j = 0; j < N; ++j) {
    int r = 0;
    ML_UNROLL for (int t = 0; t < N; ++t) {
      if (t != j) r += (sv[t] > sv[j] || (sv[t] == sv[j] && t < j)) ? 1 : 0;
    }
    rk[j] = r;
    smax = ml_fmax(smax, sv[j]);
    smin = ml_fmin(smin, sv[j]);
  }
  {
    const float g1 = ml_svdj_pow2_lo(ex), g2 = ml_svdj_pow2_hi(ex);
    ML_UNROLL for (int j = 0; j < N; ++j) sm[rk[j]] = sv[j] * g1 * g2;
  }
  if (info) {
    int bits = 0;
    if (smin <= (float)M * ML_FLT_ULP * smax) bits |= ML_INFO_RANK_DEFICIENT;
    info[g] = bits | (ml_imin(sweeps, 0xffff) << ML_INFO_SWEEPS_SHIFT);
  }
  if (VEC) {  // svdvals stops here
    ml_svdj_form_u<M, N>(w, sv, tiny);
    ml_svdj_store<M, N, VEC>(tall, w, v, rk, um, vtm);
  }
}

#define ML_SVDJ_CASE(M, N, VEC)                                                                \
  case (M - 1) * ML_SVD_SMALL_MAX_N + (N - 1):                                                 \
    ml_svdj_impl<M, N, VEC>(tall, max_sweeps, am, um, sm, vtm, info, g);                       \
    break;
#define ML_SVDJ_SWITCH(VEC)                                                                    \
  switch ((M - 1) * ML_SVD_SMALL_MAX_N + (N - 1)) {                                            \
    ML_SVDJ_CASE(1, 1, VEC)                                                                    \
    ML_SVDJ_CASE(2, 1, VEC) ML_SVDJ_CASE(2, 2, VEC)                                            \
    ML_SVDJ_CASE(3, 1, VEC) ML_SVDJ_CASE(3, 2, VEC) ML_SVDJ_CASE(3, 3, VEC)                    \
    ML_SVDJ_CASE(4, 1, VEC) ML_SVDJ_CASE(4, 2, VEC) ML_SVDJ_CASE(4, 3, VEC)                    \
    ML_SVDJ_CASE(4, 4, VEC)                                                                    \
    ML_SVDJ_CASE(5, 1, VEC) ML_SVDJ_CASE(5, 2, VEC) ML_SVDJ_CASE(5, 3, VEC)                    \
    ML_SVDJ_CASE(5, 4, VEC) ML_SVDJ_CASE(5, 5, VEC)                                            \
    ML_SVDJ_CASE(6, 1, VEC) ML_SVDJ_CASE(6, 2, VEC) ML_SVDJ_CASE(6, 3, VEC)                    \
    ML_SVDJ_CASE(6, 4, VEC) ML_SVDJ_CASE(6, 5, VEC) ML_SVDJ_CASE(6, 6, VEC)                    \
    ML_SVDJ_CASE(7, 1, VEC) ML_SVDJ_CASE(7, 2, VEC) ML_SVDJ_CASE(7, 3, VEC)                    \
    ML_SVDJ_CASE(7, 4, VEC) ML_SVDJ_CASE(7, 5, VEC) ML_SVDJ_CASE(7, 6, VEC)                    \
    ML_SVDJ_CASE(7, 7, VEC)                                                                    \
    ML_SVDJ_CASE(8, 1, VEC) ML_SVDJ_CASE(8, 2, VEC) ML_SVDJ_CASE(8, 3, VEC)                    \
    ML_SVDJ_CASE(8, 4, VEC) ML_SVDJ_CASE(8, 5, VEC) ML_SVDJ_CASE(8, 6, VEC)                    \
    ML_SVDJ_CASE(8, 7, VEC) ML_SVDJ_CASE(8, 8, VEC)                                            \
    default:                                                                                   \
      break;                                                                                   \
  }

// Entry: u (m x k), s (k, descending, >= 0), vt (k x n), k = min(m, n); p.flags ignored.
// Shapes outside 1..8 x 1..8 (not routed here: ml_svd_jacobi_small_fits) are left untouched.
ML_FN void ml_svd_jacobi_small(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                               ML_DEVICE float *u, ML_DEVICE float *s, ML_DEVICE float *vt,
                               ML_DEVICE int *info) {
  if (ctx.group_id >= p.batch) return;
  const int m = p.m, n = p.n;
  if (!ml_svd_jacobi_small_fits(m, n)) return;
  const int tall = m >= n, M = tall ? m : n, N = tall ? n : m;
  const int max_sweeps = p.max_iter > 0 ? p.max_iter : ML_SVDJ_SWEEPS;
  const ml_i64 g = ctx.group_id;
  ML_DEVICE const float *am = a + g * (ml_i64)m * n;
  ML_DEVICE float *um = u + g * (ml_i64)m * N;
  ML_DEVICE float *sm = s + g * (ml_i64)N;
  ML_DEVICE float *vtm = vt + g * (ml_i64)N * n;
  ML_SVDJ_SWITCH(1)
}

// Entry: singular values only (no vectors formed or rotated; p.flags ignored); s and info
// bitwise those of ml_svd_jacobi_small.
ML_FN void ml_svdvals_jacobi_small(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                   ML_DEVICE float *s, ML_DEVICE int *info) {
  if (ctx.group_id >= p.batch) return;
  const int m = p.m, n = p.n;
  if (!ml_svd_jacobi_small_fits(m, n)) return;
  const int tall = m >= n, M = tall ? m : n, N = tall ? n : m;
  const int max_sweeps = p.max_iter > 0 ? p.max_iter : ML_SVDJ_SWEEPS;
  const ml_i64 g = ctx.group_id;
  ML_DEVICE const float *am = a + g * (ml_i64)m * n;
  ML_DEVICE float *sm = s + g * (ml_i64)N;
  ML_DEVICE float *um = sm;  // unused
  ML_DEVICE float *vtm = sm;
  ML_SVDJ_SWITCH(0)
}

#undef ML_SVDJ_SWITCH
#undef ML_SVDJ_CASE

#endif  // ML_KERNELS_SVD_JACOBI_SMALL_H
