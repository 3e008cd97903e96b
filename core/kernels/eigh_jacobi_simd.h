// Symmetric eigendecomposition of small matrices (n <= 32), ONE SIMDGROUP PER MATRIX, the matrix
// in registers, a lane per column: one-sided (Hestenes) Jacobi on the shifted matrix
// G = A + sigma I, rotations exchanged through simd shuffles, no barriers, no scratch.
// A SIMD kernel (kernel_table.h): the group is one simdgroup of 16 (n <= 16) or 32 lanes
// (ctx.group_size == ml_simd_width(ctx)).
//
// Conventions as ml_eigh_tridiag_ql (the same C API routes to either): w n eigenvalues
// ascending; v n x n row-major, eigenvector j in column j (no sign normalisation); only the
// triangle named by p.flags (ML_K_LOWER / ML_K_UPPER) is read; a non-finite entry there gives
// NaN outputs for that matrix and ML_INFO_NONFINITE; info bits 16+ = sweeps that rotated,
// ML_INFO_NOT_CONVERGED and NaN outputs when the last of p.max_iter (default
// ML_EJSIMD_MAX_SWEEPS) sweeps still made a large rotation (below).
// ml_eigvalsh_jacobi_simd runs the same iteration (its columns are the eigenvectors, so there
// is nothing to leave out but the normalisation and the stores); its eigenvalues and info are
// bitwise those of ml_eigh_jacobi_simd.
//
// Algorithm. A is scaled by an exact power of two (max |a| in [1, 2)); R = ||A||_1 (the
// Gershgorin bound, >= ||A||_2) and G = A + 2R I, symmetric positive definite with eigenvalues
// in [R, 3R] (condition number <= 3). Lane j holds column j of W (W = G at the start; rows and
// lanes >= n are zero). One-sided Jacobi orthogonalises W's columns, W := W J, in round-robin
// (tournament) order: per sweep M - 1 rounds (M = n rounded up to even; odd n plays a dummy
// index, an all-zero lane that never rotates) in which all M / 2 disjoint column pairs rotate
// at once, each lane computing its pair's rotation from its own column and its partner's
// (one shuffle per row). The two lanes of a pair compute bitwise the same rotation (the dot
// product's terms and their order are the same on both). Pair (p, q), p < q, rotates when
// |w_p . w_q| > sqrt(n) eps ||w_p|| ||w_q|| (LAPACK sgesvj's threshold, relative); a sweep
// without any rotation (ml_simd_max over the lanes) ends the iteration, and so does a sweep
// whose rotations were all small (every cosine within 10x the threshold): convergence being
// quadratic, the checking sweep after it would find only rounding-level cosines (in a float
// model of this kernel on random, clustered, graded and Wilkinson matrices of order 24 and
// 32 leaving it out changed no LAPACK ratio by more than 0.6 and saved 0.2 to 1 sweep of 6 to
// 9). At convergence
// W = U S with orthonormal U; since G is positive definite with a well-conditioned S, its polar
// factor U V^T is I to working accuracy, so U holds G's (and A's) eigenvectors and
// lambda_j = ||w_j|| - 2R (absolute accuracy ~ eps ||A||_1, the normwise accuracy LAPACK's
// ratios ask for; small eigenvalues of graded matrices are NOT found to high relative
// accuracy, as a two-sided Jacobi would).
// Each rotation is applied in scaled (fast Givens) form: column j is stored as d_j w~_j, the
// rotation costs one FMA per row, w~_p += (-t d_q / d_p) w~_q, w~_q += (t d_p / d_q) w~_p,
// d_p, d_q *= c (|t| <= 1, c >= 1/sqrt 2), and 1 / d by its own product (1 / c = 2 r k in
// the rotation below: no division, no square root) corrected by a Newton step on d every
// round (two FMAs: without it d x (1 / d) drifts from 1 within a sweep, and the rotations
// with it); the scales are folded back into the columns at the start of every sweep, where
// the squared norms (kept up to date by ||w_p||^2 -= t w_p.w_q, ||w_q||^2 += t w_p.w_q) are
// recomputed.
// Per round and lane: n_pad + 2 shuffles (partner column, its norm and scale), 2 n_pad FMAs
// (dot product, update), two ml_rsqrt and the rotation's scalar work; n_pad = n rounded up
// to 8 (the register array's compile-time size). For n = 32 the round is 179 SASS
// instructions on sm_90 (nvcc 13): 34 SHFL, 71 FFMA, 27 FMUL, 2 MUFU.RSQ, 45 others (the
// rotation's selects and compares, the partner index, the shuffle mask's convergence check),
// against the 98 of the shuffles and FMAs alone. The dispatch tells the compiler that the
// group is a simdgroup of 16 or 32 lanes: without it, every shuffle keeps the group-of-one
// fallback (a register copy per shuffled value, 32 more per round).
// Why one-sided: a two-sided Jacobi with a lane per column needs per round, besides the
// partner's column (n shuffles), every pair's (c, s) on every lane (n more) and either
// register indexing by the lane's own row (local memory) or a row/column permutation per
// round (n more); the one-sided form needs only the partner's column, and W's columns end up
// as the eigenvectors themselves (no V to accumulate). A matrix that is already diagonal takes no
// sweep and returns its diagonal exactly (vectors: the identity). Ascending order: each
// eigenvalue's rank (its lane compares with every other through broadcasts) is its output
// column.
#ifndef ML_KERNELS_EIGH_JACOBI_SIMD_H
#define ML_KERNELS_EIGH_JACOBI_SIMD_H

#define ML_EJSIMD_MAX_N 32
#define ML_EJSIMD_MAX_SWEEPS 20
// A sweep whose rotations all had (w_p . w_q)^2 <= this x the threshold's square times
// ||w_p||^2 ||w_q||^2 (every cosine within 10x the threshold) is the last one: no checking
// sweep after it.
#define ML_EJSIMD_FINAL_RATIO 100.0f

ML_HOST_FN int ml_eigh_jacobi_simd_scratch_floats(int /*m*/, int /*n*/) {
  return 0;
}
ML_HOST_FN int ml_eigh_jacobi_simd_fits(int m, int n, int /*scratch_floats*/) {
  return m == n && n >= 1 && n <= ML_EJSIMD_MAX_N;
}
// The kernel-table forms (kernel_table.h).
ML_HOST_FN int ml_eigh_jacobi_simd_scratch_floats_flags(int m, int n, int /*flags*/) {
  return ml_eigh_jacobi_simd_scratch_floats(m, n);
}
ML_HOST_FN int ml_eigh_jacobi_simd_fits_flags(int m, int n, int /*flags*/, int scratch_floats) {
  return ml_eigh_jacobi_simd_fits(m, n, scratch_floats);
}
ML_HOST_FN int ml_eigh_jacobi_simd_max_n(int /*scratch_floats*/) {
  return ML_EJSIMD_MAX_N;
}
// Lanes a group needs for order n: 16 up to n = 16, else 32.
ML_HOST_FN int ml_eigh_jacobi_simd_min_group_size(int n) { return n <= 16 ? 16 : 32; }
// eigvalsh: the same limits.
ML_HOST_FN int ml_eigvalsh_jacobi_simd_scratch_floats(int m, int n) {
  return ml_eigh_jacobi_simd_scratch_floats(m, n);
}
ML_HOST_FN int ml_eigvalsh_jacobi_simd_fits(int m, int n, int scratch_floats) {
  return ml_eigh_jacobi_simd_fits(m, n, scratch_floats);
}
ML_HOST_FN int ml_eigvalsh_jacobi_simd_scratch_floats_flags(int m, int n, int flags) {
  return ml_eigh_jacobi_simd_scratch_floats_flags(m, n, flags);
}
ML_HOST_FN int ml_eigvalsh_jacobi_simd_fits_flags(int m, int n, int flags, int scratch_floats) {
  return ml_eigh_jacobi_simd_fits_flags(m, n, flags, scratch_floats);
}
ML_HOST_FN int ml_eigvalsh_jacobi_simd_max_n(int scratch_floats) {
  return ml_eigh_jacobi_simd_max_n(scratch_floats);
}

// Every output of the matrix NaN (lane j < n writes w_j and column j of v); lane 0 writes
// info_bits.
template <int NP, bool VEC>
ML_FN void ml_ejsimd_nan_outputs(int lane, int n, ML_DEVICE float *wm, ML_DEVICE float *vm,
                                 ML_DEVICE int *info, ml_i64 g, int info_bits) {
  const float qnan = ml_nan();
  if (lane < n) {
    wm[lane] = qnan;
    if (VEC) {
      ML_UNROLL
      for (int i = 0; i < NP; ++i)
        if (i < n) vm[i * n + lane] = qnan;
    }
  }
  if (info && lane == 0) info[g] = info_bits;
}

// Column `lane` of A from the named triangle (coalesced for the entries stored in column
// `lane`) into x; zero rows >= n and lanes >= n. The diagonal entry kept aside (*diag,
// unscaled), *amax the column's largest |entry|, *offdiag: a nonzero off the diagonal.
// Returns whether the column is finite.
template <int NP>
ML_FN bool ml_ejsimd_load(int lane, int n, bool lower, ML_DEVICE const float *am,
                          ML_THREAD float *x, ML_THREAD float *amax, ML_THREAD float *diag,
                          ML_THREAD bool *offdiag) {
  const bool mine = lane < n;
  bool finite = true;
  ML_UNROLL
  for (int i = 0; i < NP; ++i) {
    float e = 0.0f;
    if (mine && i < n) {
      const bool stored_here = lower ? i >= lane : i <= lane;
      e = am[stored_here ? i * n + lane : lane * n + i];
    }
    x[i] = e;
    finite = finite && ml_isfinite(e);
    *amax = ml_fmax(*amax, ml_fabs(e));
    *diag = i == lane ? e : *diag;
    *offdiag = *offdiag || (i != lane && e != 0.0f);
  }
  return finite;
}

// One round: the column d * x of this lane against the partner's (its squared norm *alpha,
// 1 / d in *dinv), rotated when their cosine exceeds the threshold (tol2: its square).
// *rotated, *large: a rotation, one beyond ML_EJSIMD_FINAL_RATIO times the threshold.
template <int NP>
ML_FN void ml_ejsimd_round(ML_CTX ctx, int lane, int partner, float tol2, ML_THREAD float *x,
                           ML_THREAD float *alpha, ML_THREAD float *d, ML_THREAD float *dinv,
                           ML_THREAD bool *rotated, ML_THREAD bool *large) {
  float y[NP];
  ML_UNROLL
  for (int i = 0; i < NP; ++i) y[i] = ml_simd_shuffle(ctx, x[i], partner);
  const float beta = ml_simd_shuffle(ctx, *alpha, partner);
  const float dq = ml_simd_shuffle(ctx, *d, partner);
  // Dot product of the two stored columns: four partial sums, the same terms in the
  // same order on both lanes of the pair.
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  ML_UNROLL
  for (int i = 0; i < NP; i += 4) {
    s0 = ml_fma(x[i], y[i], s0);
    s1 = ml_fma(x[i + 1], y[i + 1], s1);
    s2 = ml_fma(x[i + 2], y[i + 2], s2);
    s3 = ml_fma(x[i + 3], y[i + 3], s3);
  }
  const float gam = ((s0 + s1) + (s2 + s3)) * (*d * dq);
  const bool lo = lane < partner;
  const float a_lo = lo ? *alpha : beta, a_hi = lo ? beta : *alpha;
  // Zero columns (padding, the dummy player, lanes >= M) have gam = 0: never rotated.
  // Real columns have squared norms >= R^2 >= 1, so no square below is subnormal.
  const float thr = tol2 * (a_lo * a_hi);
  const bool rot = gam * gam > thr;
  // The angle zeroing the Gram matrix's off-diagonal, |theta| <= pi/4, division-free:
  // h = a_hi - a_lo, r = sqrt(h^2 + 4 gam^2), u = r + |h|, k = 1 / sqrt(2 r u),
  // c = u k, t = tan(theta) = sign(h) 2 gam k (2 r k). Unused (any value) when !rot.
  const float h = a_hi - a_lo, g2 = gam + gam;
  const float r2 = h * h + g2 * g2;
  const float rr = r2 * ml_rsqrt(r2);
  const float u = rr + ml_fabs(h);
  const float k = ml_rsqrt(2.0f * rr * u);
  const float rk2 = 2.0f * rr * k;  // 1 / c
  const float c = rot ? u * k : 1.0f;
  const float t = rot ? (h < 0.0f ? -g2 : g2) * k * rk2 : 0.0f;
  const float st = lo ? -t : t;
  // d_partner / d (d > 0; both normal floats within a sweep).
  const float coef = st * (dq * *dinv);
  ML_UNROLL
  for (int i = 0; i < NP; ++i) x[i] = ml_fma(coef, y[i], x[i]);
  *d *= c;
  *dinv *= rot ? rk2 : 1.0f;
  *dinv = ml_fma(*dinv, ml_fma(-*d, *dinv, 1.0f), *dinv);  // one Newton step: no drift
  *alpha = ml_fma(st, gam, *alpha);
  *rotated = *rotated || rot;
  *large = *large || gam * gam > ML_EJSIMD_FINAL_RATIO * thr;
}

// The sweeps on the shifted, scaled columns x, up to cap sweeps; the column is *d * x at the
// end. *sweeps: the sweeps that rotated. Returns whether they converged.
template <int NP>
ML_FN bool ml_ejsimd_iterate(ML_CTX ctx, int cap, int lane, int n, ML_THREAD float *x,
                             ML_THREAD float *dout, ML_THREAD int *sweeps) {
  const int M = n + (n & 1);  // players of the schedule (a dummy one for odd n)
  const int rounds = M - 1;
  // (sqrt(n) eps)^2: the square of LAPACK sgesvj's threshold.
  const float tol2 = (float)n * ML_FLT_EPS * ML_FLT_EPS;
  float d = 1.0f;     // column scale: the column is d * x
  float dinv = 1.0f;  // 1 / d, kept by its own product (1 / c = 2 r k below)
  bool converged = false;
  for (int sw = 0; sw < cap; ++sw) {
    // Fold the scale back in; exact squared norm.
    float alpha = 0.0f;
    ML_UNROLL
    for (int i = 0; i < NP; ++i) {
      x[i] *= d;
      alpha = ml_fma(x[i], x[i], alpha);
    }
    d = 1.0f;
    dinv = 1.0f;
    bool rotated = false, large = false;
    // (2r - lane) mod (M - 1), stepped by 2 per round (meaningless for lanes >= M - 1).
    int cyc = lane == 0 || lane >= rounds ? 0 : rounds - lane;
    for (int r = 0; r < rounds; ++r) {
      // Round-robin pairing: player M - 1 meets r; the others meet (2r - j) mod (M - 1).
      // Lanes >= M (zero columns) pair with themselves.
      int partner = cyc;
      cyc += 2;
      cyc = cyc >= rounds ? cyc - rounds : cyc;
      partner = lane == r ? M - 1 : partner;
      partner = lane == M - 1 ? r : partner;
      partner = lane >= M ? lane : partner;
      ml_ejsimd_round<NP>(ctx, lane, partner, tol2, x, &alpha, &d, &dinv, &rotated, &large);
    }
    // 0: no rotation; 1: rotations, all of them small; 2: at least one large rotation.
    const float state = ml_simd_max(ctx, large ? 2.0f : (rotated ? 1.0f : 0.0f));
    if (state == 0.0f) {
      converged = true;
      break;
    }
    ++*sweeps;
    if (state == 1.0f) {
      // No pair was further from orthogonal than sqrt(ML_EJSIMD_FINAL_RATIO) times the
      // threshold: the convergence being quadratic, the next sweep would find nothing but
      // rounding-level cosines; it is left out.
      converged = true;
      break;
    }
  }
  *dout = d;
  return converged;
}

// Converged column d * x of the matrix shifted by `shift` and scaled by 2^-ex: returns
// lambda = sigma - shift scaled back (sigma = ||d x||); with VEC, x becomes u = d x / sigma
// (zero on lanes that hold no column).
template <int NP, bool VEC>
ML_FN float ml_ejsimd_eigen(bool mine, float d, float shift, int ex, ML_THREAD float *x) {
  float ss = 0.0f;
  ML_UNROLL
  for (int i = 0; i < NP; ++i) {
    x[i] *= d;
    ss = ml_fma(x[i], x[i], ss);
  }
  const float sigma = ml_sqrt(ss);
  float lam = sigma - shift;
  const int e1 = ex / 2;
  lam = (lam * ml_exp2i(e1)) * ml_exp2i(ex - e1);
  if (VEC) {
    const float inv = mine ? 1.0f / sigma : 0.0f;
    ML_UNROLL
    for (int i = 0; i < NP; ++i) x[i] *= inv;
  }
  return lam;
}

// NP: rows held per lane (n <= NP, a multiple of 8); the caller's simdgroup has >= NP lanes.
template <int NP, bool VEC>
ML_FN void ml_ejsimd_solve(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *am,
                           ML_DEVICE float *wm, ML_DEVICE float *vm, ML_DEVICE int *info,
                           ml_i64 g) {
  const int n = p.n;
  const int lane = ml_simd_lane(ctx);
  const bool mine = lane < n;
  const bool lower = p.flags != ML_K_UPPER;

  float x[NP];
  float amax = 0.0f, diag = 0.0f;
  bool offdiag = false;
  const bool finite = ml_ejsimd_load<NP>(lane, n, lower, am, x, &amax, &diag, &offdiag);
  if (ml_simd_max(ctx, finite ? 0.0f : 1.0f) > 0.0f) {
    ml_ejsimd_nan_outputs<NP, VEC>(lane, n, wm, vm, info, g, ML_INFO_NONFINITE);
    return;
  }
  amax = ml_simd_max(ctx, amax);
  const bool diagonal = ml_simd_max(ctx, offdiag ? 1.0f : 0.0f) == 0.0f;

  // max |a| into [1, 2): x 2^-ex as two exact factors (-ex in [-127, 149]).
  const int ex = amax > 0.0f ? ml_ilogb(amax) : 0;
  float lam = diag;  // the eigenvalue of this lane's column (a diagonal matrix: exact)
  int sweeps = 0;
  bool converged = true;
  if (!diagonal) {
    {
      const int e1 = (-ex) / 2;
      const float f1 = ml_exp2i(e1), f2 = ml_exp2i(-ex - e1);
      ML_UNROLL
      for (int i = 0; i < NP; ++i) x[i] = (x[i] * f1) * f2;
    }
    // R = ||A||_1 (the largest column sum; every lane the same bits), shift 2R onto the
    // diagonal of the n real columns.
    float colsum = 0.0f;
    ML_UNROLL
    for (int i = 0; i < NP; ++i) colsum += ml_fabs(x[i]);
    const float shift = 2.0f * ml_simd_max(ctx, colsum);
    ML_UNROLL
    for (int i = 0; i < NP; ++i) x[i] += (i == lane && mine) ? shift : 0.0f;
    float d = 1.0f;
    converged = ml_ejsimd_iterate<NP>(ctx, p.max_iter > 0 ? p.max_iter : ML_EJSIMD_MAX_SWEEPS,
                                      lane, n, x, &d, &sweeps);
    // sigma_j = ||w_j||, lambda_j = sigma_j - 2R; u_j = w_j / sigma_j.
    if (converged) lam = ml_ejsimd_eigen<NP, VEC>(mine, d, shift, ex, x);
  } else if (VEC) {
    ML_UNROLL
    for (int i = 0; i < NP; ++i) x[i] = i == lane ? 1.0f : 0.0f;
  }

  const int it = sweeps < 0x7fff ? sweeps : 0x7fff;
  if (!converged) {  // sweep cap reached: NaN outputs, as for non-finite input
    ml_ejsimd_nan_outputs<NP, VEC>(lane, n, wm, vm, info, g,
                                   (it << ML_INFO_SWEEPS_SHIFT) | ML_INFO_NOT_CONVERGED);
    return;
  }
  // Ascending: this lane's rank among the n eigenvalues (ties by lane) is its output column.
  int rank = 0;
  for (int k = 0; k < n; ++k) {
    const float o = ml_simd_broadcast(ctx, lam, k);
    rank += (k < lane ? o <= lam : o < lam) ? 1 : 0;
  }
  if (mine) {
    wm[rank] = lam;
    if (VEC) {
      ML_UNROLL
      for (int i = 0; i < NP; ++i)
        if (i < n) vm[i * n + rank] = x[i];
    }
  }
  if (info && lane == 0) info[g] = it << ML_INFO_SWEEPS_SHIFT;
}

template <bool VEC>
ML_FN void ml_ejsimd_dispatch(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                              ML_DEVICE float *w, ML_DEVICE float *v, ML_DEVICE int *info,
                              ml_i64 g) {
  // The group is one simdgroup of 16 or 32 lanes (a SIMD kernel: the launch guarantees it).
  // Saying so here lets the compiler drop the group-of-one fallback of every simd call (on
  // CUDA a register copy per shuffled value, 32 per round for n > 24) and the lane's warp
  // offset.
  if ((ctx.group_size != 16 && ctx.group_size != 32) || ctx.lane >= ctx.group_size) return;

  const int n = p.n;
  const ml_i64 nn = (ml_i64)n * n;
  ML_DEVICE const float *am = a + g * nn;
  ML_DEVICE float *wm = w + g * (ml_i64)n;
  ML_DEVICE float *vm = VEC ? v + g * nn : v;
  if (n <= 8)
    ml_ejsimd_solve<8, VEC>(ctx, p, am, wm, vm, info, g);
  else if (n <= 16)
    ml_ejsimd_solve<16, VEC>(ctx, p, am, wm, vm, info, g);
  else if (ctx.group_size != 32)  // n > 16 needs the whole simdgroup
    return;
  else if (n <= 24)
    ml_ejsimd_solve<24, VEC>(ctx, p, am, wm, vm, info, g);
  else if (n <= ML_EJSIMD_MAX_N)
    ml_ejsimd_solve<32, VEC>(ctx, p, am, wm, vm, info, g);
}

// w: n eigenvalues ascending; v: n x n, eigenvector j in column j. One simdgroup per matrix.
ML_FN void ml_eigh_jacobi_simd(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                               ML_DEVICE float *w, ML_DEVICE float *v, ML_DEVICE int *info) {
  if (ctx.group_id >= p.batch) return;
  ml_ejsimd_dispatch<true>(ctx, p, a, w, v, info, ctx.group_id);
}

// w: n eigenvalues ascending (bitwise those of ml_eigh_jacobi_simd); no vector output.
ML_FN void ml_eigvalsh_jacobi_simd(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                   ML_DEVICE float *w, ML_DEVICE int *info) {
  if (ctx.group_id >= p.batch) return;
  ml_ejsimd_dispatch<false>(ctx, p, a, w, (ML_DEVICE float *)0, info, ctx.group_id);
}

#endif  // ML_KERNELS_EIGH_JACOBI_SIMD_H
