// Thin SVD and singular values of one m x n matrix per GROUP: one-sided (Hestenes) Jacobi on the
// working matrix W = A (tall, m >= n) or A^T (wide), M x N with M = max(m, n), N = min(m, n),
// held in shared memory, its column pairs spread over the group's simdgroups. The simdgroup
// kernel (svd_jacobi_simd.h) keeps a column per lane and stops at 32; here a matrix of any size
// that fits the scratch runs on a whole group, so one or a few matrices of n = 33..~128 use
// many warps instead of one serial bidiagonal QR chase (svd_bidiag_qr.h).
// Order: the same parallel round-robin (circle method) over NP = N rounded up to even: NP - 1
// rounds a sweep, each pairing every position once. In round r pair 0 is (r, NP - 1), pair k > 0
// ((r + k) mod (NP - 1), (r - k) mod (NP - 1)); a pair holding the padding position NP - 1 of
// an odd N is skipped. Positions are the columns sorted by descending norm at each sweep's
// start (de Rijk's ordering, as LAPACK's sgesvj: graded spectra, 128 x 128 geometric 1 .. ulp,
// took 21 sweeps instead of 26 in the CPU runner; Gaussian matrices 9-12 either way).
// Simdgroup s takes the pairs 2s and 2s + 1, then 2s + 2S, 2s + 2S + 1, ... (S simdgroups), the
// two together with the pair's rows in registers (ml_svdg_two; row loops where a simdgroup is
// partial or a lane would hold more than 2 rows: ml_svdg_one, a pair at a time). One group barrier
// ends each round (the round's pairs are disjoint, so nothing else orders them).
// One pair (p < q), all in one simdgroup: its lanes walk the M rows, alpha = |w_p|^2, beta =
// |w_q|^2 and gamma = w_p . w_q by simdgroup sums (every lane gets bitwise the same sums, so
// every lane takes the same decision and the same angle); rotate when |gamma| > sqrt(M) eps
// sqrt(alpha beta) (LAPACK's sgesvj tolerance; M eps, the simdgroup kernel's, left U's columns
// orthogonal only to about N M eps: ratio 45 at 241 x 257; relative: graded matrices keep their
// small singular values to high relative accuracy), and alpha, beta >= 2^-100, by the angle of
// ml_svdg_angle (t, c = 1 / sqrt(1 + t^2), s = c t): w_p' = c w_p - s w_q, w_q' = s w_p + c w_q,
// and V's columns p, q the same (svd). The norms are summed again every round (no running update
// to drift).
// A sweep in which no simdgroup rotated ends the iteration (one flag a simdgroup, read by all
// after a barrier). Then s_j = ||w_j|| (rescaled when the square underflows), ranks in
// descending order (ties by index), U = W S^-1; columns of negligible norm (s_j < 2^-50 in the
// scaled frame) are completed to an orthonormal U (Gram-Schmidt twice against the columns set
// so far, from the unit vector farthest from their span), as the simdgroup kernel does.
// The matrix is scaled by a power of two first (max |a| in [1, 2)); s is scaled back.
// Contract as svd_jacobi_simd.h: u m x k, s k descending >= 0, vt k x n (k = min(m, n)),
// row-major; p.flags ignored. Non-finite input: every output of the matrix NaN,
// ML_INFO_NONFINITE. Info bits 16+: sweeps (the last one, which rotates nothing, included); cap
// p.max_iter (default 60): ML_INFO_NOT_CONVERGED and every output NaN; ML_INFO_RANK_DEFICIENT
// when s_min <= M ulp s_max. svdvals runs the same rotations without V, so its s and info are
// bitwise the svd's.
// Any group size (1: the lane-per-matrix launch, where the one lane is its own simdgroup).
#ifndef ML_KERNELS_SVD_JACOBI_GROUP_H
#define ML_KERNELS_SVD_JACOBI_GROUP_H

#include "group.h"
#include "svd_jacobi_simd.h"

#define ML_SVDG_SWEEPS 60  // default sweep cap (graded spectra took up to 30 at n = 241)
#define ML_SVDG_LONE 8.8817842e-16f  // 2^-50: a singular value below this (scaled) is completed

// Scratch: W (M x N, column-major, stride M), V (N x N, svd), s, the sweeps' column order, the
// output order (N each), two row vectors for the completion (M each), the simdgroups' flags (64).
ML_HOST_FN int ml_svd_jacobi_group_scratch(int m, int n, int vec) {
  const int M = m > n ? m : n, N = m < n ? m : n;
  return M * N + (vec ? N * N : 0) + 3 * N + 2 * M + ML_RED_FLOATS;
}
ML_HOST_FN int ml_svd_jacobi_group_scratch_floats_flags(int m, int n, int /*flags*/) {
  return ml_svd_jacobi_group_scratch(m, n, 1);
}
ML_HOST_FN int ml_svdvals_jacobi_group_scratch_floats_flags(int m, int n, int /*flags*/) {
  return ml_svd_jacobi_group_scratch(m, n, 0);
}
ML_HOST_FN int ml_svd_jacobi_group_fits_flags(int m, int n, int flags, int scratch_floats) {
  return m >= 1 && n >= 1 &&
         ml_svd_jacobi_group_scratch_floats_flags(m, n, flags) <= scratch_floats;
}
ML_HOST_FN int ml_svdvals_jacobi_group_fits_flags(int m, int n, int flags, int scratch_floats) {
  return m >= 1 && n >= 1 &&
         ml_svdvals_jacobi_group_scratch_floats_flags(m, n, flags) <= scratch_floats;
}

// The rotation of the pair with squared norms al (column p), be (column q) and gamma ga: t, c
// (s = c t), with correctly rounded square roots and divisions (svd_jacobi_simd.h's
// ml_svds_angle assumes |beta - alpha| < 2^7, which columns of more than 32 rows can exceed).
// t is the smaller root of t^2 + 2 zeta t - 1 = 0, zeta = (beta - alpha) / (2 gamma); |zeta|
// stays below 2^76 (gamma passed the relative test), its square is not formed beyond 2^60.
ML_FN void ml_svdg_angle(float ga, float al, float be, ML_THREAD float *c, ML_THREAD float *t) {
  const float zeta = (be - al) / (2.0f * ga);
  const float az = ml_fabs(zeta);
  float r = az < 1.0e18f ? 1.0f / (az + ml_sqrt(ml_fma(az, az, 1.0f))) : 0.5f / az;
  *t = zeta < 0.0f ? -r : r;
  *c = 1.0f / ml_sqrt(ml_fma(r, r, 1.0f));
}

// Round r's pair k (0 <= k < NP / 2) as the columns (p, q) it rotates; false for the pair of
// the padding position of an odd N.
ML_FN bool ml_svdg_pair(int r, int k, int K, int N, ML_SHARED const float *cmap,
                        ML_THREAD int *p, ML_THREAD int *q) {
  int a = r + k, b = r - k;
  if (a >= K) a -= K;
  if (b < 0) b += K;
  if (k == 0) b = K;
  if (a > b) {
    const int t = a;
    a = b;
    b = t;
  }
  if (b >= N) return false;
  *p = (int)cmap[a];
  *q = (int)cmap[b];
  return true;
}

// Whether the pair with squared norms al, be and product ga rotates (relative test).
ML_FN bool ml_svdg_rotates(float al, float be, float ga, float tol) {
  return al >= ML_SVDS_TINY && be >= ML_SVDS_TINY &&
         ml_fabs(ga) * (ml_rsqrt(al) * ml_rsqrt(be)) > tol;
}

// Two pairs of one round (k and k + 1) by one simdgroup of width sw, its lanes holding RPL rows
// each of both pairs' columns in registers (RPL sw >= M): one load and one store a row, the six
// simdgroup sums of the two pairs independent of each other (the round's latency is their
// shuffle chains). Returns whether either pair rotated.
template <int VEC, int RPL>
ML_FN bool ml_svdg_two(ML_CTX ctx, int M, int N, int K, int hnp, int r, int k,
                       ML_SHARED float *w, ML_SHARED float *v, ML_SHARED const float *cmap,
                       float tol) {
  const int sl = ml_simd_lane(ctx), sw = ml_simd_width(ctx);
  int pa = 0, qa = 0, pb = 0, qb = 0;
  const bool oka = k < hnp && ml_svdg_pair(r, k, K, N, cmap, &pa, &qa);
  const bool okb = k + 1 < hnp && ml_svdg_pair(r, k + 1, K, N, cmap, &pb, &qb);
  float xa[RPL], ya[RPL], xb[RPL], yb[RPL];
  float ala = 0.0f, bea = 0.0f, gaa = 0.0f, alb = 0.0f, beb = 0.0f, gab = 0.0f;
  ML_UNROLL for (int t = 0; t < RPL; ++t) {
    const int i = sl + t * sw;
    const bool in = i < M;
    xa[t] = oka && in ? w[pa * M + i] : 0.0f;
    ya[t] = oka && in ? w[qa * M + i] : 0.0f;
    xb[t] = okb && in ? w[pb * M + i] : 0.0f;
    yb[t] = okb && in ? w[qb * M + i] : 0.0f;
    ala = ml_fma(xa[t], xa[t], ala);
    bea = ml_fma(ya[t], ya[t], bea);
    gaa = ml_fma(xa[t], ya[t], gaa);
    alb = ml_fma(xb[t], xb[t], alb);
    beb = ml_fma(yb[t], yb[t], beb);
    gab = ml_fma(xb[t], yb[t], gab);
  }
  ala = ml_simd_sum(ctx, ala);
  alb = ml_simd_sum(ctx, alb);
  bea = ml_simd_sum(ctx, bea);
  beb = ml_simd_sum(ctx, beb);
  gaa = ml_simd_sum(ctx, gaa);
  gab = ml_simd_sum(ctx, gab);
  const bool ra = oka && ml_svdg_rotates(ala, bea, gaa, tol);
  const bool rb = okb && ml_svdg_rotates(alb, beb, gab, tol);
  float ca = 1.0f, ta = 0.0f, cb = 1.0f, tb = 0.0f;
  if (ra) ml_svdg_angle(gaa, ala, bea, &ca, &ta);
  if (rb) ml_svdg_angle(gab, alb, beb, &cb, &tb);
  const float sa = ca * ta, sb = cb * tb;
  ML_UNROLL for (int t = 0; t < RPL; ++t) {
    const int i = sl + t * sw;
    if (i < M) {
      if (ra) {
        w[pa * M + i] = ml_fma(ca, xa[t], -(sa * ya[t]));
        w[qa * M + i] = ml_fma(sa, xa[t], ca * ya[t]);
      }
      if (rb) {
        w[pb * M + i] = ml_fma(cb, xb[t], -(sb * yb[t]));
        w[qb * M + i] = ml_fma(sb, xb[t], cb * yb[t]);
      }
    }
  }
  if (VEC) {
    ML_UNROLL for (int t = 0; t < RPL; ++t) {
      const int i = sl + t * sw;
      if (i < N) {
        if (ra) {
          const float x = v[pa * N + i], y = v[qa * N + i];
          v[pa * N + i] = ml_fma(ca, x, -(sa * y));
          v[qa * N + i] = ml_fma(sa, x, ca * y);
        }
        if (rb) {
          const float x = v[pb * N + i], y = v[qb * N + i];
          v[pb * N + i] = ml_fma(cb, x, -(sb * y));
          v[qb * N + i] = ml_fma(sb, x, cb * y);
        }
      }
    }
  }
  return ra || rb;
}

// One pair of one round by one simdgroup, its lanes walking the rows (any width, any M).
template <int VEC>
ML_FN bool ml_svdg_one(ML_CTX ctx, int M, int N, int K, int r, int k, ML_SHARED float *w,
                       ML_SHARED float *v, ML_SHARED const float *cmap, float tol) {
  const int sl = ml_simd_lane(ctx), sw = ml_simd_width(ctx);
  int p = 0, q = 0;
  if (!ml_svdg_pair(r, k, K, N, cmap, &p, &q)) return false;  // uniform over the simdgroup
  ML_SHARED float *wp = w + p * M;
  ML_SHARED float *wq = w + q * M;
  float al = 0.0f, be = 0.0f, ga = 0.0f;
  for (int i = sl; i < M; i += sw) {
    const float x = wp[i], y = wq[i];
    al = ml_fma(x, x, al);
    be = ml_fma(y, y, be);
    ga = ml_fma(x, y, ga);
  }
  al = ml_simd_sum(ctx, al);
  be = ml_simd_sum(ctx, be);
  ga = ml_simd_sum(ctx, ga);
  if (!ml_svdg_rotates(al, be, ga, tol)) return false;
  float c = 1.0f, t = 0.0f;
  ml_svdg_angle(ga, al, be, &c, &t);
  const float s = c * t;
  for (int i = sl; i < M; i += sw) {
    const float x = wp[i], y = wq[i];
    wp[i] = ml_fma(c, x, -(s * y));
    wq[i] = ml_fma(s, x, c * y);
  }
  if (VEC) {
    ML_SHARED float *vp = v + p * N;
    ML_SHARED float *vq = v + q * N;
    for (int i = sl; i < N; i += sw) {
      const float x = vp[i], y = vq[i];
      vp[i] = ml_fma(c, x, -(s * y));
      vq[i] = ml_fma(s, x, c * y);
    }
  }
  return true;
}

// The sweeps on W (and V) until a sweep rotates nothing or max_sweeps; returns the sweeps run,
// *conv whether the last one rotated nothing. RPL > 0: ml_svdg_two (every simdgroup of width
// sw with RPL sw >= M); 0: ml_svdg_one.
template <int VEC, int RPL>
ML_FN int ml_svdg_sweeps(ML_CTX ctx, int M, int N, int max_sweeps, ML_SHARED float *w,
                         ML_SHARED float *v, ML_SHARED float *flags, ML_SHARED float *nrm,
                         ML_SHARED float *cmap, ML_THREAD bool *conv) {
  const int sid = ml_simd_id(ctx), ns = ml_simd_count(ctx);
  const int sl = ml_simd_lane(ctx);
  const int NP = N + (N & 1), K = NP - 1, hnp = NP / 2;
  const float tol = ml_sqrt((float)M) * ML_FLT_EPS;
  int sweeps = 0;
  bool done = N < 2;
  while (!done && sweeps < max_sweeps) {
    bool rotated = false;
    // The columns in descending order of their norms for this sweep (cmap: position -> column).
    for (int j = ctx.lane; j < N; j += ctx.group_size) {
      float a0 = 0.0f;
      for (int i = 0; i < M; ++i) a0 = ml_fma(w[j * M + i], w[j * M + i], a0);
      nrm[j] = a0;
    }
    ml_barrier(ctx);
    for (int j = ctx.lane; j < N; j += ctx.group_size) {
      const float sj = nrm[j];
      int rr = 0;
      for (int t = 0; t < N; ++t)
        rr += (t != j && (nrm[t] > sj || (nrm[t] == sj && t < j))) ? 1 : 0;
      cmap[rr] = (float)j;
    }
    ml_barrier(ctx);
    for (int r = 0; r < K; ++r) {
      if (RPL > 0) {
        for (int k = 2 * sid; k < hnp; k += 2 * ns)
          rotated = ml_svdg_two<VEC, (RPL > 0 ? RPL : 1)>(ctx, M, N, K, hnp, r, k, w, v, cmap,
                                                          tol) ||
                    rotated;
      } else {
        for (int k = sid; k < hnp; k += ns)
          rotated = ml_svdg_one<VEC>(ctx, M, N, K, r, k, w, v, cmap, tol) || rotated;
      }
      ml_barrier(ctx);
    }
    ++sweeps;
    // Every lane of a simdgroup took the same decisions: its first lane speaks for it. The
    // flags are written again only after the next sweep's round barriers (K >= 1).
    if (sl == 0) flags[sid] = rotated ? 1.0f : 0.0f;
    ml_barrier(ctx);
    float any = 0.0f;
    for (int i = 0; i < ns; ++i) any += flags[i];
    done = any == 0.0f;
  }
  *conv = done;
  return sweeps;
}

// The sweeps by the register form where every simdgroup is whole (or the group one lane) and
// holds the columns in at most 2 rows a lane, else by the row loops. (Forms of 4 and 8 rows a
// lane raised the CUDA block entry to 152 registers, so at most 384 lanes a group; with the two
// forms it needs fewer.)
template <int VEC>
ML_FN int ml_svdg_sweeps_any(ML_CTX ctx, int M, int N, int max_sweeps, ML_SHARED float *w,
                             ML_SHARED float *v, ML_SHARED float *flags, ML_SHARED float *nrm,
                             ML_SHARED float *cmap, ML_THREAD bool *conv) {
  const int gs = ctx.group_size;
  const int width = gs == 1 ? 1 : (gs % ML_SIMD_WIDTH == 0 ? ML_SIMD_WIDTH : 0);
  if (width > 0 && M <= width)
    return ml_svdg_sweeps<VEC, 1>(ctx, M, N, max_sweeps, w, v, flags, nrm, cmap, conv);
  if (width > 0 && M <= 2 * width)
    return ml_svdg_sweeps<VEC, 2>(ctx, M, N, max_sweeps, w, v, flags, nrm, cmap, conv);
  return ml_svdg_sweeps<VEC, 0>(ctx, M, N, max_sweeps, w, v, flags, nrm, cmap, conv);
}

// Completes U's negligible columns (s_j < ML_SVDG_LONE) to an orthonormal U, each in turn:
// start from the unit vector e_is farthest from the span of the columns already set, then
// Gram-Schmidt twice against them. Columns 'used': set (not negligible, or completed before).
ML_FN void ml_svdg_complete(ML_CTX ctx, int M, int N, ML_SHARED float *w,
                            ML_SHARED const float *sv, ML_SHARED float *tmp,
                            ML_SHARED float *x) {
  const int lane = ctx.lane, gs = ctx.group_size;
  for (int jt = 0; jt < N; ++jt) {
    if (sv[jt] >= ML_SVDG_LONE) continue;
    // residual of each unit vector: 1 - sum over used columns of w_ij^2
    for (int i = lane; i < M; i += gs) {
      float r = 1.0f;
      for (int j = 0; j < N; ++j)
        if (j != jt && (sv[j] >= ML_SVDG_LONE || j < jt)) r -= w[j * M + i] * w[j * M + i];
      tmp[i] = r;
    }
    ml_barrier(ctx);
    int is = 0;
    float best = tmp[0];
    for (int i = 1; i < M; ++i)
      if (tmp[i] > best) {
        best = tmp[i];
        is = i;
      }
    for (int i = lane; i < M; i += gs) x[i] = i == is ? 1.0f : 0.0f;
    ml_barrier(ctx);  // every lane has read tmp and x is set
    for (int pass = 0; pass < 2; ++pass) {
      for (int j = lane; j < N; j += gs) {
        float d = 0.0f;
        if (j != jt && (sv[j] >= ML_SVDG_LONE || j < jt))
          for (int i = 0; i < M; ++i) d = ml_fma(x[i], w[j * M + i], d);
        tmp[j] = d;
      }
      ml_barrier(ctx);
      for (int i = lane; i < M; i += gs) {
        float xi = x[i];
        for (int j = 0; j < N; ++j) xi = ml_fma(-tmp[j], w[j * M + i], xi);
        x[i] = xi;
      }
      ml_barrier(ctx);
    }
    float nn = 0.0f;
    for (int i = 0; i < M; ++i) nn = ml_fma(x[i], x[i], nn);
    const float inv = 1.0f / ml_sqrt(nn);
    for (int i = lane; i < M; i += gs) w[jt * M + i] = x[i] * inv;
    ml_barrier(ctx);
  }
}

// Every output of the matrix NaN (u m x N, s N, vt N x n; svdvals: s only).
template <int VEC>
ML_FN void ml_svdg_nan_fill(ML_CTX ctx, int m, int n, int N, ML_DEVICE float *um,
                            ML_DEVICE float *sm, ML_DEVICE float *vtm) {
  const int lane = ctx.lane, gs = ctx.group_size;
  for (int i = lane; i < N; i += gs) sm[i] = ml_nan();
  if (!VEC) return;
  for (int i = lane; i < m * N; i += gs) um[i] = ml_nan();
  for (int i = lane; i < N * n; i += gs) vtm[i] = ml_nan();
}

// out (row-major) := the columns perm[0..nc) of src (column j at src + j len, len rows): element
// (i, c) at out[i nc + c], or at out[c len + i] when transposed; consecutive lanes write
// consecutive floats.
ML_FN void ml_svdg_store(ML_CTX ctx, ML_DEVICE float *out, ML_SHARED const float *src, int len,
                         int nc, ML_SHARED const float *perm, bool transposed) {
  for (int e = ctx.lane; e < len * nc; e += ctx.group_size) {
    const int a = transposed ? e / len : e / nc;
    const int b = e - a * (transposed ? len : nc);
    const int i = transposed ? b : a, c = transposed ? a : b;
    out[e] = src[(int)perm[c] * len + i];
  }
}

template <int VEC>
ML_FN void ml_svdg_entry(ML_CTX ctx, ML_PARAMS p, ML_DEVICE int *info, ML_DEVICE const float *a,
                         ML_DEVICE float *u, ML_DEVICE float *s, ML_DEVICE float *vt) {
  if (ctx.group_id >= p.batch) return;
  const int m = p.m, n = p.n, lane = ctx.lane, gs = ctx.group_size;
  const ml_i64 g = ctx.group_id;
  if (m < 1 || n < 1) {
    if (lane == 0 && info) info[g] = 0;
    return;
  }
  const int tall = m >= n, M = tall ? m : n, N = tall ? n : m;
  const int max_sweeps = p.max_iter > 0 ? p.max_iter : ML_SVDG_SWEEPS;
  ML_DEVICE const float *am = a + g * (ml_i64)m * n;
  ML_DEVICE float *sm = s + g * (ml_i64)N;
  ML_DEVICE float *um = VEC ? u + g * (ml_i64)m * N : sm;
  ML_DEVICE float *vtm = VEC ? vt + g * (ml_i64)N * n : sm;
  ML_SHARED float *w = ctx.scratch;  // column j at w + j M
  ML_SHARED float *v = w + M * N;    // column j at v + j N (svd)
  ML_SHARED float *sv = v + (VEC ? N * N : 0);
  ML_SHARED float *cmap = sv + N;  // the sweeps' order of the columns
  ML_SHARED float *perm = cmap + N;
  ML_SHARED float *tmp = perm + N;
  ML_SHARED float *x = tmp + M;
  ML_SHARED float *red = x + M;  // 64: the simdgroups' flags, then the reductions' buffers

  // Load W (tall: W(i, j) = a[i N + j]; wide: W(i, j) = A(j, i) = a[j M + i]) and its max.
  float amax = 0.0f;
  for (int e = lane; e < M * N; e += gs) {
    const int j = e / M, i = e - j * M;
    const float y = tall ? am[i * N + j] : am[e];
    w[e] = y;
    amax = ml_isfinite(y) ? ml_fmax(amax, ml_fabs(y)) : ml_inf();
  }
  amax = ml_group_max(ctx, amax, red + 32);
  if (!ml_isfinite(amax)) {
    ml_svdg_nan_fill<VEC>(ctx, m, n, N, um, sm, vtm);
    if (lane == 0 && info) info[g] = ML_INFO_NONFINITE;
    return;
  }
  const int ex = amax > 0.0f ? ml_ilogb(amax) : 0;
  const float f1 = ml_svds_pow2_lo(-ex), f2 = ml_svds_pow2_hi(-ex);
  for (int e = lane; e < M * N; e += gs) w[e] = w[e] * f1 * f2;
  if (VEC)
    for (int e = lane; e < N * N; e += gs) v[e] = (e / N == e % N) ? 1.0f : 0.0f;
  ml_barrier(ctx);

  bool conv = false;
  const int sweeps = ml_svdg_sweeps_any<VEC>(ctx, M, N, max_sweeps, w, v, red, sv, cmap, &conv);
  if (!conv) {
    ml_svdg_nan_fill<VEC>(ctx, m, n, N, um, sm, vtm);
    if (lane == 0 && info)
      info[g] = ML_INFO_NOT_CONVERGED | (ml_imin(sweeps, 0xffff) << ML_INFO_SWEEPS_SHIFT);
    return;
  }

  // Singular values: the column norms (rescaled when their squares underflow).
  for (int j = lane; j < N; j += gs) {
    ML_SHARED const float *wj = w + j * M;
    float s0 = 0.0f, s1 = 0.0f;
    int i = 0;
    for (; i + 2 <= M; i += 2) {
      s0 = ml_fma(wj[i], wj[i], s0);
      s1 = ml_fma(wj[i + 1], wj[i + 1], s1);
    }
    if (i < M) s0 = ml_fma(wj[i], wj[i], s0);
    float n2 = s0 + s1;
    if (n2 < ML_SVDS_TINY) {
      s0 = 0.0f;
      for (i = 0; i < M; ++i) {
        const float y = wj[i] * ML_SVDS_UP;
        s0 = ml_fma(y, y, s0);
      }
      sv[j] = ml_sqrt(s0) * ML_SVDS_DOWN;
    } else {
      sv[j] = ml_sqrt(n2);
    }
  }
  ml_barrier(ctx);
  // Rank of each column in descending order (ties by index): perm[rank] = column.
  for (int j = lane; j < N; j += gs) {
    const float sj = sv[j];
    int r = 0;
    for (int t = 0; t < N; ++t) r += (t != j && (sv[t] > sj || (sv[t] == sj && t < j))) ? 1 : 0;
    perm[r] = (float)j;
    sm[r] = sj * ml_svds_pow2_lo(ex) * ml_svds_pow2_hi(ex);
  }
  ml_barrier(ctx);
  if (lane == 0 && info) {
    const float smax = sv[(int)perm[0]], smin = sv[(int)perm[N - 1]];
    int bits = 0;
    if (smin <= (float)M * ML_FLT_ULP * smax) bits |= ML_INFO_RANK_DEFICIENT;
    info[g] = bits | (ml_imin(sweeps, 0xffff) << ML_INFO_SWEEPS_SHIFT);
  }
  if (!VEC) return;  // svdvals stops here

  // U = W S^-1, then the negligible columns completed.
  bool lone = false;
  for (int e = lane; e < M * N; e += gs) {
    const float sj = sv[e / M];
    if (sj >= ML_SVDG_LONE) w[e] = w[e] / sj;
  }
  for (int j = 0; j < N; ++j) lone = lone || sv[j] < ML_SVDG_LONE;
  ml_barrier(ctx);
  if (lone) ml_svdg_complete(ctx, M, N, w, sv, tmp, x);

  // Outputs in rank order. Tall: u (M x N) = U, vt (N x N) = V^T. Wide: u (N x N) = V,
  // vt (N x M) = U^T.
  ml_svdg_store(ctx, tall ? um : vtm, w, M, N, perm, !tall);
  ml_svdg_store(ctx, tall ? vtm : um, v, N, N, perm, tall);
}

// Entry: u (m x k), s (k, descending, >= 0), vt (k x n), k = min(m, n); p.flags ignored.
ML_FN void ml_svd_jacobi_group(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                               ML_DEVICE float *u, ML_DEVICE float *s, ML_DEVICE float *vt,
                               ML_DEVICE int *info) {
  ml_svdg_entry<1>(ctx, p, info, a, u, s, vt);
}
// Entry: singular values only (no V); s and info bitwise those of ml_svd_jacobi_group.
ML_FN void ml_svdvals_jacobi_group(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                   ML_DEVICE float *s, ML_DEVICE int *info) {
  ml_svdg_entry<0>(ctx, p, info, a, s, s, s);
}

#endif  // ML_KERNELS_SVD_JACOBI_GROUP_H
