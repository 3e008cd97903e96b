// Thin SVD and singular values of one m x n matrix per SIMDGROUP (a warp on CUDA: 32 lanes, or
// 16 for max(m, n) <= 16; Metal: 32), the matrix in registers, one lane per column: one-sided
// (Hestenes) Jacobi on the working matrix W = A (tall, m >= n) or A^T (wide), M x N with
// M = max(m, n) <= 32 rows and N = min(m, n) columns (N <= the simdgroup width).
//
// Layout: lane j holds column j of W (float w[MR], MR = 16 or 32 rows picked from M at run
// time, zero-padded, every loop unrolled so the array stays in registers), its squared norm,
// and column j of V (float v[MR]; svd only). Lanes N..width-1 are idle (zero
// columns that take part in no rotation).
// Order: parallel round-robin (tournament, circle method) over NP = N rounded up to even
// columns: NP - 1 rounds per sweep, each pairing every column once; column NP - 1 stays fixed,
// column j < NP - 1 meets (r - j) mod (NP - 1) in round r (column NP - 1 when that is j itself).
// Each lane computes its partner from the round, so no data moves except through shuffles.
// One round, per lane (q = partner, p < q the pair):
//   - fetch the partner's column with M shuffles, gamma = w_p . w_q (4 partial sums, same
//     order on both lanes: bitwise the same gamma), the partner's squared norm (1 shuffle);
//   - rotate when |gamma| > M eps ||w_p|| ||w_q|| (a relative test: graded matrices keep their
//     small singular values to high relative accuracy) and both squared norms >= 2^-100:
//     zeta = (beta - alpha) / (2 gamma), t = sign(zeta) / (|zeta| + sqrt(1 + zeta^2)),
//     c = 1 / sqrt(1 + t^2), s = c t, computed identically by both lanes (six ml_rsqrt, no
//     division or correctly rounded sqrt: those are long instruction sequences on GPUs);
//     w_p' = c w_p - s w_q, w_q' = s w_p + c w_q (each lane its own column, from the partner's
//     copy it already holds); alpha' = alpha - t gamma, beta' = beta + t gamma (recomputed from
//     the column when that loses more than 2 bits, and at each sweep's start);
//   - V: the same rotation of the lane's V column with the partner's (N shuffles).
//   A lane that does not rotate applies c = 1, s = 0 (exact), so every shuffle stays in
//   simdgroup-uniform control flow; from the fifth sweep on, a round in which no lane rotates
//   skips the updates and the V shuffles altogether (one vote per round).
//   Per round and lane (M the padded size MR = 16 or 32): 2 M + 1 shuffles, M FMAs for gamma,
//   2 M for the column (a multiply and an FMA per entry), 2 M for V, ~45 scalar operations
//   (6 ml_rsqrt). svdvals: M + 1 shuffles, 3 M FMAs, the same scalar work.
// A sweep in which no lane rotated ends it (one vote per sweep).
// Then s_j = ||w_j|| (rescaled when the square underflows), each column's rank in descending
// order by N shuffles (ties by index): lane j writes its outputs at position rank(j).
// U = W S^-1; columns of negligible norm (||w_j||^2 < 2^-100 at the scaled frame) are completed
// to an orthonormal U (classical Gram-Schmidt twice, through simd sums; only when present).
// Matrix scaled by a power of two first (max |a| in [1, 2)), so squares neither overflow nor
// underflow harmfully; scaled back on s only.
// Contract as svd_bidiag_qr.h: u m x k, s k descending >= 0, vt k x n (k = min(m, n)), row-major;
// p.flags ignored (thin; square full_matrices is the same problem). Non-finite input: every
// output of the matrix NaN, ML_INFO_NONFINITE. Info bits 16+: sweeps (the last one, which
// rotates nothing, included); cap p.max_iter (default 30 sweeps): ML_INFO_NOT_CONVERGED and every
// output NaN; ML_INFO_RANK_DEFICIENT when s_min <= M ulp s_max.
// svdvals runs the same rotations of W without V and U, so its s and info are bitwise the svd's.
// Context: ctx.group_size 16 or 32 (== ml_simd_width); lanes of a larger group beyond the first
// simdgroup return at once. No scratch, no barriers. The group size is a template constant and
// the sweeps' exchanges and votes are ml_simd_shuffle_seg / ml_simd_vote_seg (constant full
// mask: one SHFL or vote, no per-call mask arithmetic). A 16-lane group shares its warp with
// another matrix, so the two run the same control flow up to the output: the sweep loop runs
// while either matrix rotates, a matrix that has converged (or has no data: non-finite, or
// past the batch) keeps taking part in the shuffles and changes nothing, and each keeps its
// own sweep count; its outputs are bitwise those of a matrix alone in its simdgroup.
#ifndef ML_KERNELS_SVD_JACOBI_SIMD_H
#define ML_KERNELS_SVD_JACOBI_SIMD_H

#define ML_SVDS_MAX_N 32             // rows and columns of the working matrix (a lane per column)
#define ML_SVDS_TINY 7.8886091e-31f  // 2^-100: a column norm^2 below this counts as zero
#define ML_SVDS_UP 1.1529215e+18f    // 2^60
#define ML_SVDS_DOWN 8.6736174e-19f  // 2^-60
#define ML_SVDS_SWEEPS 30            // default sweep cap (LAPACK sgesvj's NSWEEP)

// Shapes handled at group size 32 (16-lane groups: max(m, n) <= 16, the launch's rule).
// (A 64-row variant, w[64] per lane, needed 255 registers and spilled on sm_90: not offered.)
ML_HOST_FN int ml_svd_jacobi_simd_fits(int m, int n) {
  return m >= 1 && n >= 1 && m <= ML_SVDS_MAX_N && n <= ML_SVDS_MAX_N;
}
// The kernel-table forms (kernel_table.h), for svd and svdvals: registers only, no scratch.
ML_HOST_FN int ml_svd_jacobi_simd_scratch_floats_flags(int /*m*/, int /*n*/, int /*flags*/) {
  return 0;
}
ML_HOST_FN int ml_svd_jacobi_simd_fits_flags(int m, int n, int /*flags*/, int /*scratch_floats*/) {
  return ml_svd_jacobi_simd_fits(m, n);
}

// 2^e as two normal factors (e in -252..254): x * lo * hi, at most one rounding.
ML_FN float ml_svds_pow2_lo(int e) { return ml_exp2i(e / 2); }
ML_FN float ml_svds_pow2_hi(int e) { return ml_exp2i(e - e / 2); }

// A shuffle within the group of GS lanes, every lane of the simdgroup calling (the sweeps and
// the ranks): the constant-mask form, one SHFL.
template <int GS>
ML_FN float ml_svds_shfl(ML_CTX ctx, float x, int src) {
  return ml_simd_shuffle_seg<GS>(ctx, x, src);
}
// The same inside a branch on this matrix's own data (the completion of U), where the other
// matrix of a shared warp may not call.
template <int GS>
ML_FN float ml_svds_shfl_own(ML_CTX ctx, float x, int src) {
  return GS == 32 ? ml_simd_shuffle_full(ctx, x, src) : ml_simd_shuffle(ctx, x, src);
}

// Squared norm of a register column (4 partial sums).
template <int MR>
ML_FN float ml_svds_norm2(ML_THREAD const float *w) {
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  ML_UNROLL for (int i = 0; i < MR; i += 4) {
    s0 = ml_fma(w[i], w[i], s0);
    if (i + 1 < MR) s1 = ml_fma(w[i + 1], w[i + 1], s1);
    if (i + 2 < MR) s2 = ml_fma(w[i + 2], w[i + 2], s2);
    if (i + 3 < MR) s3 = ml_fma(w[i + 3], w[i + 3], s3);
  }
  return (s0 + s1) + (s2 + s3);
}

// Every output of the matrix NaN (lane j < N writes its column's share).
ML_FN void ml_svds_nan_fill(int tall, int vec, int j, int M, int N, ML_DEVICE float *um,
                            ML_DEVICE float *sm, ML_DEVICE float *vtm) {
  if (j >= N) return;
  const float qnan = ml_nan();
  sm[j] = qnan;
  if (!vec) return;
  if (tall) {  // u M x N, vt N x N
    for (int i = 0; i < M; ++i) um[i * N + j] = qnan;
    for (int i = 0; i < N; ++i) vtm[j * N + i] = qnan;
  } else {  // u N x N, vt N x M
    for (int i = 0; i < N; ++i) um[i * N + j] = qnan;
    for (int i = 0; i < M; ++i) vtm[j * M + i] = qnan;
  }
}

// Loads the lane's column of W (zero-padded to MR rows; zeros past N, when not live and for a
// non-finite matrix, *bad then set on every lane) and scales W by a power of two to max |a| in
// [1, 2). Returns the exponent ex (W = 2^-ex A).
template <int MR, int GS>
ML_FN int ml_svds_load(ML_CTX ctx, int tall, int M, int N, ML_DEVICE const float *am, bool live,
                       ML_THREAD float *w, ML_THREAD bool *bad) {
  const int j = ml_simd_lane(ctx);
  const bool col = j < N;
  float amax = 0.0f;
  bool badl = false;
  ML_UNROLL for (int i = 0; i < MR; ++i) {
    float x = 0.0f;
    if (live && col && i < M) x = tall ? am[i * N + j] : am[j * M + i];
    w[i] = x;
    badl = badl | !ml_isfinite(x);
    amax = ml_fmax(amax, ml_fabs(x));
  }
  // A non-finite matrix sweeps as zeros (no rotation) and is filled with NaN at the end.
  *bad = (ml_simd_vote_seg<GS>(ctx, badl) & 1) != 0;
  if (*bad) {
    amax = 0.0f;
    ML_UNROLL for (int i = 0; i < MR; ++i) w[i] = 0.0f;
  }
  amax = ml_simd_max(ctx, amax);
  const int ex = amax > 0.0f ? ml_ilogb(amax) : 0;
  if (ex != 0) {
    const float f1 = ml_svds_pow2_lo(-ex), f2 = ml_svds_pow2_hi(-ex);
    ML_UNROLL for (int i = 0; i < MR; ++i) w[i] = w[i] * f1 * f2;
  }
  return ex;
}

// The partner q's column into wq (M shuffles) and gamma = w . wq, 4 partial sums in the same
// order on both lanes of the pair: bitwise the same gamma.
template <int MR, int GS>
ML_FN float ml_svds_fetch_dot(ML_CTX ctx, ML_THREAD const float *w, ML_THREAD float *wq, int q) {
  float g0 = 0.0f, g1 = 0.0f, g2 = 0.0f, g3 = 0.0f;
  ML_UNROLL for (int i = 0; i < MR; i += 4) {
    wq[i] = ml_svds_shfl<GS>(ctx, w[i], q);
    g0 = ml_fma(w[i], wq[i], g0);
    if (i + 1 < MR) {
      wq[i + 1] = ml_svds_shfl<GS>(ctx, w[i + 1], q);
      g1 = ml_fma(w[i + 1], wq[i + 1], g1);
    }
    if (i + 2 < MR) {
      wq[i + 2] = ml_svds_shfl<GS>(ctx, w[i + 2], q);
      g2 = ml_fma(w[i + 2], wq[i + 2], g2);
    }
    if (i + 3 < MR) {
      wq[i + 3] = ml_svds_shfl<GS>(ctx, w[i + 3], q);
      g3 = ml_fma(w[i + 3], wq[i + 3], g3);
    }
  }
  return (g0 + g1) + (g2 + g3);
}

// The rotation of the pair with squared norms al (column p), be (column q) and gamma ga: t, c
// (s = c t); both lanes compute it identically.
ML_FN void ml_svds_angle(float ga, float al, float be, ML_THREAD float *c, ML_THREAD float *t) {
  // t: the smaller root of t^2 + 2 zeta t - 1 = 0 (zeroes the new w_p . w_q), zeta =
  // (beta - alpha) / (2 gamma). Reciprocals and roots by ml_rsqrt (~1 ulp; no division:
  // the angle need not be exact, only c and s consistent, c^2 + s^2 = 1 to a few ulp).
  // Ranges: |gamma| > tol 2^-100 and |beta - alpha| < 2^7, so zeta stays finite.
  const float rg = ml_rsqrt(ml_fabs(ga));
  const float az = 0.5f * ml_fabs(be - al) * (rg * rg);
  float d = 2.0f * az;
  if (az < 1.0e18f) {
    const float h = 1.0f + az * az;
    d = az + h * ml_rsqrt(h);
  }
  const float rd = ml_rsqrt(d);
  *t = ((be < al) != (ga < 0.0f)) ? -(rd * rd) : rd * rd;  // sign of zeta
  *c = ml_rsqrt(1.0f + *t * *t);
}

// The sweeps (round-robin pairs, see the top of the file) until no lane of the simdgroup
// rotates or max_sweeps; v: V's column (VEC). *done: this matrix has converged (in: nothing to
// do); *sweeps: this matrix's sweeps.
template <int MR, int VEC, int GS>
ML_FN void ml_svds_sweep(ML_CTX ctx, int M, int N, int max_sweeps, ML_THREAD float *w,
                         ML_THREAD float *v, ML_THREAD bool *done, ML_THREAD int *sweeps) {
  const int NR = MR;  // V rows per lane (N <= M <= MR)
  const int j = ml_simd_lane(ctx);
  // Round-robin pairing over NP columns: K = NP - 1 rounds per sweep.
  const int NP = N + (N & 1), K = NP - 1, hnp = NP / 2;
  const float tol = (float)M * ML_FLT_EPS;
  int it = 0;  // the simdgroup's sweeps (equal to *sweeps while this matrix still rotates)
  bool go = (ml_simd_vote_seg<GS>(ctx, !*done) & 2) != 0;
  while (go && it < max_sweeps) {
    float nrm = ml_svds_norm2<MR>(w);
    int pk = j < K ? (K - j) % K : 0;  // (r - j) mod K at r = 0
    int pf = 0;                        // partner of the fixed column K
    bool rotated = false;
    for (int r = 0; r < K; ++r) {
      const int q = j >= NP ? j : (j == K ? pf : (pk == j ? K : pk));
      const bool lower = j < q;
      float wq[MR];
      const float ga = ml_svds_fetch_dot<MR, GS>(ctx, w, wq, q);
      const float pn = ml_svds_shfl<GS>(ctx, nrm, q);
      const float al = lower ? nrm : pn, be = lower ? pn : nrm;
      float c = 1.0f, t = 0.0f;
      bool rot = false;
      if (!*done && q != j && al >= ML_SVDS_TINY && be >= ML_SVDS_TINY &&
          ml_fabs(ga) * (ml_rsqrt(al) * ml_rsqrt(be)) > tol) {
        ml_svds_angle(ga, al, be, &c, &t);
        rot = true;
      }
      rotated = rotated || rot;
      // From the fifth sweep on, whole rounds without a rotation become common (the last sweep
      // is one): a vote then skips the round's updates, which would be exact identities
      // (c = 1, s = 0) on every lane; the V shuffles are skipped with them. The skip is
      // decided for the whole simdgroup (bit 1), so the shuffles inside stay in uniform control
      // flow; a matrix without a rotation of its own (bit 0) or done leaves its data as it is.
      const int vote = it < 4 ? 3 : ml_simd_vote_seg<GS>(ctx, rot);
      if (vote & 2) {
        const bool apply = !*done && (vote & 1) != 0;
        const float sg = lower ? -(c * t) : c * t;  // this lane's coefficient of the partner
        if (apply) {
          ML_UNROLL for (int i = 0; i < MR; ++i) w[i] = ml_fma(c, w[i], sg * wq[i]);
        }
        if (rot) {  // the norm update; recomputed when it cancels (lost > 2 bits)
          const float nn = nrm + (lower ? -t : t) * ga;
          if (nn >= 0.25f * nrm)
            nrm = nn;
          else
            nrm = ml_svds_norm2<MR>(w);
        }
        if (VEC) {
          ML_UNROLL for (int i = 0; i < (VEC ? NR : 1); ++i) {
            const float vq = ml_svds_shfl<GS>(ctx, v[i], q);
            if (apply) v[i] = ml_fma(c, v[i], sg * vq);
          }
        }
      }
      pk = pk + 1 == K ? 0 : pk + 1;
      pf = pf + hnp >= K ? pf + hnp - K : pf + hnp;
    }
    ++it;
    const int vote = ml_simd_vote_seg<GS>(ctx, rotated);
    if (!*done) {
      ++*sweeps;
      *done = (vote & 1) == 0;
    }
    go = (vote & 2) != 0;
  }
}

// Completes U's negligible columns (lone on their lanes) to an orthonormal U. Each in turn
// (uniform loop): start from the unit vector e_is farthest from the span of the columns already
// set, then Gram-Schmidt twice against them; every lane computes the same x, lane jt keeps it.
template <int MR, int GS>
ML_FN void ml_svds_complete(ML_CTX ctx, int M, int N, bool lone, ML_THREAD float *w) {
  const int j = ml_simd_lane(ctx);
  const bool col = j < N;
  for (int jt = 0; jt < N; ++jt) {
    if (ml_svds_shfl_own<GS>(ctx, lone ? 1.0f : 0.0f, jt) == 0.0f) continue;
    const bool used = col && j != jt && (!lone || j < jt);
    float best = -1.0f;
    int is = 0;
    ML_UNROLL for (int i = 0; i < MR; ++i) {
      const float res = 1.0f - ml_simd_sum(ctx, used ? w[i] * w[i] : 0.0f);
      if (i < M && res > best) {
        best = res;
        is = i;
      }
    }
    float x[MR];
    ML_UNROLL for (int i = 0; i < MR; ++i) x[i] = i == is ? 1.0f : 0.0f;
    ML_UNROLL for (int pass = 0; pass < 2; ++pass) {
      float d = 0.0f;
      ML_UNROLL for (int i = 0; i < MR; ++i) d = ml_fma(x[i], w[i], d);
      d = used ? d : 0.0f;
      ML_UNROLL for (int i = 0; i < MR; ++i) x[i] -= ml_simd_sum(ctx, d * w[i]);
    }
    const float inv = 1.0f / ml_sqrt(ml_svds_norm2<MR>(x));
    if (j == jt) {
      ML_UNROLL for (int i = 0; i < MR; ++i) w[i] = x[i] * inv;
    }
  }
}

// The lane's U column (w) and V column (v) to output position rk. Tall: u (M x N) = U,
// vt (N x N) = V^T. Wide: u (N x N) = V, vt (N x M) = U^T.
template <int MR, int VEC>
ML_FN void ml_svds_store(int tall, int M, int N, int rk, ML_THREAD const float *w,
                         ML_THREAD const float *v, ML_DEVICE float *um, ML_DEVICE float *vtm) {
  if (tall) {
    ML_UNROLL for (int i = 0; i < MR; ++i) {
      if (i < M) um[i * N + rk] = w[i];
    }
    ML_UNROLL for (int i = 0; i < (VEC ? MR : 1); ++i) {
      if (i < N) vtm[rk * N + i] = v[i];
    }
  } else {
    ML_UNROLL for (int i = 0; i < (VEC ? MR : 1); ++i) {
      if (i < N) um[i * N + rk] = v[i];
    }
    ML_UNROLL for (int i = 0; i < MR; ++i) {
      if (i < M) vtm[rk * M + i] = w[i];
    }
  }
}

// One matrix: working shape M x N (N <= M <= MR, N <= simd width). tall: A is M x N (W = A),
// else A is N x M (W = A^T). VEC = 0: s and info only.
// live: the group holds a matrix of the batch (false: it only takes part in a shared warp's
// shuffles).
template <int MR, int VEC, int GS>
ML_FN void ml_svds_impl(ML_CTX ctx, int tall, int M, int N, int max_sweeps,
                        ML_DEVICE const float *am, ML_DEVICE float *um, ML_DEVICE float *sm,
                        ML_DEVICE float *vtm, ML_DEVICE int *info, ml_i64 g, bool live) {
  const int NR = MR;  // V rows per lane (N <= M <= MR)
  const int j = ml_simd_lane(ctx);
  const bool col = j < N;
  float w[MR];
  bool bad = false;
  const int ex = ml_svds_load<MR, GS>(ctx, tall, M, N, am, live, w, &bad);
  float v[VEC ? NR : 1];
  ML_UNROLL for (int i = 0; i < (VEC ? NR : 1); ++i) v[i] = (VEC && i == j) ? 1.0f : 0.0f;
  int sweeps = 0;
  bool done = N < 2 || !live || bad;
  ml_svds_sweep<MR, VEC, GS>(ctx, M, N, max_sweeps, w, v, &done, &sweeps);

  // Singular values: the column norms (rescaled when their squares underflow).
  float n2 = ml_svds_norm2<MR>(w);
  const bool tiny = n2 < ML_SVDS_TINY;
  float sv;
  if (tiny) {
    float x[MR];
    ML_UNROLL for (int i = 0; i < MR; ++i) x[i] = w[i] * ML_SVDS_UP;
    sv = ml_sqrt(ml_svds_norm2<MR>(x)) * ML_SVDS_DOWN;
  } else {
    sv = ml_sqrt(n2);
  }
  // Rank of each column in descending order (ties by index): its output position.
  int rk = 0;
  for (int t = 0; t < N; ++t) {
    const float st = ml_svds_shfl<GS>(ctx, sv, t);
    rk += (t != j && (st > sv || (st == sv && t < j))) ? 1 : 0;
  }
  // From here on each matrix of a shared warp follows its own path.
  if (!live) return;
  if (bad || !done) {  // non-finite input, or the sweep cap reached: NaN outputs
    ml_svds_nan_fill(tall, VEC, j, M, N, um, sm, vtm);
    if (info && j == 0)
      info[g] = bad ? ML_INFO_NONFINITE
                    : ML_INFO_NOT_CONVERGED | (ml_imin(sweeps, 0xffff) << ML_INFO_SWEEPS_SHIFT);
    return;
  }
  const float smax = ml_simd_max(ctx, col ? sv : 0.0f);
  const float smin = ml_simd_min(ctx, col ? sv : ml_inf());
  if (col) sm[rk] = sv * ml_svds_pow2_lo(ex) * ml_svds_pow2_hi(ex);
  if (info && j == 0) {
    int bits = 0;
    if (smin <= (float)M * ML_FLT_ULP * smax) bits |= ML_INFO_RANK_DEFICIENT;
    info[g] = bits | (ml_imin(sweeps, 0xffff) << ML_INFO_SWEEPS_SHIFT);
  }
  if (!VEC) return;  // svdvals stops here

  // U = W S^-1.
  const bool lone = col && tiny;  // a negligible column: completed below
  if (col && !tiny) {
    const float inv = 1.0f / sv;
    ML_UNROLL for (int i = 0; i < MR; ++i) w[i] *= inv;
  }
  if (ml_simd_max(ctx, lone ? 1.0f : 0.0f) > 0.0f) ml_svds_complete<MR, GS>(ctx, M, N, lone, w);
  if (col) ml_svds_store<MR, VEC>(tall, M, N, rk, w, v, um, vtm);
}

// Group size 32 (also the first simdgroup of a larger group) or 16, as a template constant.
#define ML_SVDS_DISPATCH(VEC, GS)                                                              \
  if (M <= 16)                                                                                 \
    ml_svds_impl<16, VEC, GS>(ctx, tall, M, N, max_sweeps, am, um, sm, vtm, info, g, live);    \
  else                                                                                         \
    ml_svds_impl<32, VEC, GS>(ctx, tall, M, N, max_sweeps, am, um, sm, vtm, info, g, live);

// The shared body of the entries (info first: it is not itself a table kernel). VEC = 0:
// svdvals (u and vt unused).
template <int VEC>
ML_FN void ml_svds_entry(ML_CTX ctx, ML_PARAMS p, ML_DEVICE int *info, ML_DEVICE const float *a,
                         ML_DEVICE float *u, ML_DEVICE float *s, ML_DEVICE float *vt) {
  // A group past the batch stays while the first group of its simdgroup holds a matrix (it
  // shares that group's shuffles); every condition here is uniform over the simdgroup.
  if (ctx.group_id - ml_simd_seg_index(ctx) >= p.batch || ctx.lane >= ML_SIMD_WIDTH) return;
  const int m = p.m, n = p.n;
  const int tall = m >= n, M = tall ? m : n, N = tall ? n : m;
  if (!ml_svd_jacobi_simd_fits(m, n) || N > ml_simd_width(ctx)) return;
  const int max_sweeps = p.max_iter > 0 ? p.max_iter : ML_SVDS_SWEEPS;
  const bool live = ctx.group_id < p.batch;
  const ml_i64 g = live ? ctx.group_id : 0;
  ML_DEVICE const float *am = a + g * (ml_i64)m * n;
  ML_DEVICE float *sm = s + g * (ml_i64)N;
  ML_DEVICE float *um = VEC ? u + g * (ml_i64)m * N : sm;
  ML_DEVICE float *vtm = VEC ? vt + g * (ml_i64)N * n : sm;
  if (ctx.group_size >= 32) {
    ML_SVDS_DISPATCH(VEC, 32)
  } else {
    ML_SVDS_DISPATCH(VEC, 16)
  }
}

// Entry: u (m x k), s (k, descending, >= 0), vt (k x n), k = min(m, n); p.flags ignored.
// Shapes the kernel does not handle (ml_svd_jacobi_simd_fits, or more columns than the
// simdgroup has lanes) are left untouched.
ML_FN void ml_svd_jacobi_simd(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                              ML_DEVICE float *u, ML_DEVICE float *s, ML_DEVICE float *vt,
                              ML_DEVICE int *info) {
  ml_svds_entry<1>(ctx, p, info, a, u, s, vt);
}
// Entry: singular values only (no vectors formed or rotated; p.flags ignored); s and info
// bitwise those of ml_svd_jacobi_simd.
ML_FN void ml_svdvals_jacobi_simd(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                  ML_DEVICE float *s, ML_DEVICE int *info) {
  ml_svds_entry<0>(ctx, p, info, a, s, s, s);
}

#undef ML_SVDS_DISPATCH

#endif  // ML_KERNELS_SVD_JACOBI_SIMD_H
