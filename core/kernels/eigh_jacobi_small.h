// Symmetric eigendecomposition of tiny matrices (n <= 8), ONE THREAD PER MATRIX, everything in
// registers: cyclic two-sided Jacobi. A register kernel (group size 1, no scratch, no barriers):
// template <int N> code with compile-time loop bounds, fully unrolled, so every private array
// is indexed by constants (no local memory); a runtime switch on p.n picks the instantiation.
//
// Conventions as ml_eigh_tridiag_ql (the same C API routes to either): w n eigenvalues
// ascending; v n x n row-major, eigenvector j in column j (no sign normalisation); only the
// triangle named by p.flags (ML_K_LOWER / ML_K_UPPER) is read; a non-finite entry there gives
// NaN outputs for that matrix and ML_INFO_NONFINITE; info bits 16+ = sweeps that rotated,
// ML_INFO_NOT_CONVERGED and NaN outputs when p.max_iter (default ML_EJS_MAX_SWEEPS) sweeps still
// rotated.
// ml_eigvalsh_jacobi_small does the same without any vector work; its eigenvalues are
// bitwise those of ml_eigh_jacobi_small (the A updates do not depend on V).
//
// Algorithm. The matrix is scaled by an exact power of two (max |a| in [1, 2)), the upper
// triangle kept in registers. Sweeps in round-robin (tournament) order: N - 1 rounds (N even;
// N odd plays a dummy index) of N / 2 disjoint pairs. Each round computes the rotations of its
// disjoint pairs from their 2 x 2 blocks (independent chains: instruction-level parallelism),
// then applies them one after the other (disjoint rotations commute). A pair is skipped (the
// identity rotation, branch-free) when |a_pq| <= eps sqrt(|a_pp a_qq|) (relative, so graded
// matrices keep their small eigenvalues) or below a floor at ML_FLT_MIN scale; a sweep
// without any rotation ends the iteration. Rotation (Rutishauser's choice, |phi| <= pi/4,
// diagonal updated as a_pp - t a_pq, a_qq + t a_pq, a_pq := 0), overflow-free and division-free:
//   h = a_qq - a_pp, r = sqrt(h^2 + 4 a_pq^2), u = r + |h|, k = 1 / sqrt(2 r u),
//   c = u k, s = sign(h) 2 a_pq k, t = s / c = s (2 r k),
// i.e. two ml_rsqrt per rotation; h and a_pq are scaled by 2^80 first when both are below
// 2^-40, so every square stays a normal float. Ascending order: each eigenvalue's rank
// (compile-time comparisons) is its output column; the vectors are stored there directly.
#ifndef ML_KERNELS_EIGH_JACOBI_SMALL_H
#define ML_KERNELS_EIGH_JACOBI_SMALL_H

#define ML_EJS_MAX_N 8
#define ML_EJS_MAX_SWEEPS 20

ML_HOST_FN int ml_eigh_jacobi_small_scratch_floats(int /*m*/, int /*n*/) {
  return 0;
}
ML_HOST_FN int ml_eigh_jacobi_small_fits(int m, int n, int /*scratch_floats*/) {
  return m == n && n >= 1 && n <= ML_EJS_MAX_N;
}
// The kernel-table forms (kernel_table.h).
ML_HOST_FN int ml_eigh_jacobi_small_scratch_floats_flags(int m, int n, int /*flags*/) {
  return ml_eigh_jacobi_small_scratch_floats(m, n);
}
ML_HOST_FN int ml_eigh_jacobi_small_fits_flags(int m, int n, int /*flags*/, int scratch_floats) {
  return ml_eigh_jacobi_small_fits(m, n, scratch_floats);
}
ML_HOST_FN int ml_eigh_jacobi_small_max_n(int /*scratch_floats*/) {
  return ML_EJS_MAX_N;
}
// eigvalsh: the same limits.
ML_HOST_FN int ml_eigvalsh_jacobi_small_scratch_floats(int m, int n) {
  return ml_eigh_jacobi_small_scratch_floats(m, n);
}
ML_HOST_FN int ml_eigvalsh_jacobi_small_fits(int m, int n, int scratch_floats) {
  return ml_eigh_jacobi_small_fits(m, n, scratch_floats);
}
ML_HOST_FN int ml_eigvalsh_jacobi_small_scratch_floats_flags(int m, int n, int flags) {
  return ml_eigh_jacobi_small_scratch_floats_flags(m, n, flags);
}
ML_HOST_FN int ml_eigvalsh_jacobi_small_fits_flags(int m, int n, int flags, int scratch_floats) {
  return ml_eigh_jacobi_small_fits_flags(m, n, flags, scratch_floats);
}
ML_HOST_FN int ml_eigvalsh_jacobi_small_max_n(int scratch_floats) {
  return ml_eigh_jacobi_small_max_n(scratch_floats);
}

// Pair k of round r of the round-robin schedule on M (even) players: (r, M - 1) for k = 0,
// else ((r + k) mod (M - 1), (r - k) mod (M - 1)). Constants once the loops are unrolled.
ML_FN int ml_ejs_pair_a(int M, int r, int k) { return k == 0 ? r : (r + k) % (M - 1); }
ML_FN int ml_ejs_pair_b(int M, int r, int k) { return k == 0 ? M - 1 : (r + M - 1 - k) % (M - 1); }

// Matrix g of order N: am its input, wm / vm its outputs (vm unused unless VEC).
// Every output of the matrix NaN (non-finite input, sweep cap reached); info_bits into info.
template <int N, bool VEC>
ML_FN void ml_ejs_nan_outputs(ML_DEVICE float *wm, ML_DEVICE float *vm, ML_DEVICE int *info,
                              ml_i64 g, int info_bits) {
  const float qnan = ml_nan();
  ML_UNROLL
  for (int j = 0; j < N; ++j) wm[j] = qnan;
  if (VEC) {
    ML_UNROLL
    for (int t = 0; t < N * N; ++t) vm[t] = qnan;
  }
  if (info) info[g] = info_bits;
}

// Loads the named triangle as the upper one: a[i][j], i <= j (the rest of a is never used).
// Returns false (a non-finite entry), or true with a scaled exactly by 2^-*ex to max |a| in
// [1, 2) (two exact factors, -ex in [-127, 149]).
template <int N>
ML_FN bool ml_ejs_load(bool lower, ML_DEVICE const float *am, ML_THREAD float (*a)[N],
                       ML_THREAD int *ex) {
  float amax = 0.0f;
  bool finite = true;
  ML_UNROLL
  for (int i = 0; i < N; ++i) {
    ML_UNROLL
    for (int j = i; j < N; ++j) {
      const float x = am[lower ? j * N + i : i * N + j];
      a[i][j] = x;
      finite = finite && ml_isfinite(x);
      amax = ml_fmax(amax, ml_fabs(x));
    }
  }
  if (!finite) return false;
  *ex = amax > 0.0f ? ml_ilogb(amax) : 0;
  const int e1 = (-*ex) / 2;
  const float f1 = ml_exp2i(e1), f2 = ml_exp2i(-*ex - e1);
  ML_UNROLL
  for (int i = 0; i < N; ++i) {
    ML_UNROLL
    for (int j = i; j < N; ++j) a[i][j] = (a[i][j] * f1) * f2;
  }
  return true;
}

// Round r: the rotations of its disjoint pairs (M players), each from its own 2 x 2 block,
// applied to the blocks; (cr[k], sr[k]) pair k's (1, 0 when not rotated). Returns whether any
// pair rotated.
template <int N, int M>
ML_FN bool ml_ejs_round_angles(int r, ML_THREAD float (*a)[N], ML_THREAD float *cr,
                               ML_THREAD float *sr) {
  // Constants (exact powers of two). Negligibility in scaled squares: with
  // x = min(|a_pq|, 2^-20) 2^64 (|a_pq| >= 2^-20 is never negligible: |a_pp|, |a_qq| <= 32),
  // negligible <=> x^2 <= (2^40 |a_pp|) (2^40 |a_qq|) + 2^-124, i.e. |a_pq|^2 <= eps^2 |a_pp a_qq|
  // + ML_FLT_MIN^2 (eps = 2^-24), every term a normal float or an exact 0.
  const float kClamp = 1.0f / 1048576.0f;             // 2^-20
  const float kS = 18446744073709551616.0f;           // 2^64
  const float kEpsS = 1099511627776.0f;               // 2^-24 * 2^64 = 2^40
  const float kFloor = ML_FLT_MIN * 4.0f;             // (2^-126 * 2^64)^2 = 2^-124
  const float kSmall = 1.0f / 1099511627776.0f;       // 2^-40
  const float kUp = 1208925819614629174706176.0f;     // 2^80
  bool round_any = false;
  ML_UNROLL
  for (int k = 0; k < M / 2; ++k) {
    const int i0 = ml_ejs_pair_a(M, r, k), i1 = ml_ejs_pair_b(M, r, k);
    const int pp = i0 < i1 ? i0 : i1, qq = i0 < i1 ? i1 : i0;
    cr[k] = 1.0f;
    sr[k] = 0.0f;
    if (qq >= N) continue;  // the dummy player (odd N)
    const float app = a[pp][pp], aqq = a[qq][qq], apq = a[pp][qq];
    const float x = ml_fmin(ml_fabs(apq), kClamp) * kS;
    const bool rot = x * x > (kEpsS * ml_fabs(app)) * (kEpsS * ml_fabs(aqq)) + kFloor;
    const float h = aqq - app, a2 = apq + apq;
    const float big = ml_fmax(ml_fabs(h), ml_fabs(a2));
    const float f = big < kSmall ? kUp : 1.0f;
    const float hs = h * f, as = a2 * f;
    // + ML_FLT_MIN: never 0 (a skipped pair may have h = a_pq = 0), negligible otherwise
    // (hs^2 + as^2 >= 2^-80 for a rotated pair).
    const float r2 = hs * hs + as * as + ML_FLT_MIN;
    const float rr = r2 * ml_rsqrt(r2);
    const float u = rr + ml_fabs(hs);
    const float kk = ml_rsqrt(2.0f * rr * u);
    const float c = u * kk;
    const float s = (h < 0.0f ? -as : as) * kk;
    const float t = s * (2.0f * rr * kk);
    const float tapq = rot ? t * apq : 0.0f;
    cr[k] = rot ? c : 1.0f;
    sr[k] = rot ? s : 0.0f;
    a[pp][pp] = app - tapq;
    a[qq][qq] = aqq + tapq;
    a[pp][qq] = rot ? 0.0f : apq;
    round_any = round_any || rot;
  }
  return round_any;
}

// Round r's rotations (cr, sr) on the off-block entries: A := J^T A J (upper storage),
// V := V J (VEC); pair by pair.
template <int N, int M, bool VEC>
ML_FN void ml_ejs_round_apply(int r, ML_THREAD float (*a)[N], ML_THREAD float (*v)[VEC ? N : 1],
                              ML_THREAD const float *cr, ML_THREAD const float *sr) {
  ML_UNROLL
  for (int k = 0; k < M / 2; ++k) {
    const int i0 = ml_ejs_pair_a(M, r, k), i1 = ml_ejs_pair_b(M, r, k);
    const int pp = i0 < i1 ? i0 : i1, qq = i0 < i1 ? i1 : i0;
    if (qq >= N) continue;
    const float c = cr[k], s = sr[k];
    ML_UNROLL
    for (int l = 0; l < N; ++l) {
      if (l == pp || l == qq) continue;
      const int lp0 = l < pp ? l : pp, lp1 = l < pp ? pp : l;
      const int lq0 = l < qq ? l : qq, lq1 = l < qq ? qq : l;
      const float y = a[lp0][lp1], z = a[lq0][lq1];
      a[lp0][lp1] = c * y - s * z;
      a[lq0][lq1] = s * y + c * z;
    }
    if (VEC) {
      ML_UNROLL
      for (int l = 0; l < N; ++l) {
        const float y = v[l][pp], z = v[l][qq];
        v[l][pp] = c * y - s * z;
        v[l][qq] = s * y + c * z;
      }
    }
  }
}

// Ascending: rank of each eigenvalue (ties by index; NaN last, so the ranks are always a
// permutation), written to its column; eigenvalues scaled back by 2^ex (two exact factors).
template <int N, bool VEC>
ML_FN void ml_ejs_store(int ex, ML_THREAD float (*a)[N], ML_THREAD float (*v)[VEC ? N : 1],
                        ML_DEVICE float *wm, ML_DEVICE float *vm) {
  float key[N];
  ML_UNROLL
  for (int j = 0; j < N; ++j) key[j] = ml_isnan(a[j][j]) ? ml_inf() : a[j][j];
  const int e1 = ex / 2;
  const float g1 = ml_exp2i(e1), g2 = ml_exp2i(ex - e1);
  ML_UNROLL
  for (int j = 0; j < N; ++j) {
    int rank = 0;
    ML_UNROLL
    for (int i = 0; i < N; ++i)
      if (i != j) rank += (i < j ? key[i] <= key[j] : key[i] < key[j]) ? 1 : 0;
    wm[rank] = (a[j][j] * g1) * g2;
    if (VEC) {
      ML_UNROLL
      for (int i = 0; i < N; ++i) vm[i * N + rank] = v[i][VEC ? j : 0];
    }
  }
}

template <int N, bool VEC>
ML_FN void ml_ejs_solve(ML_PARAMS p, ML_DEVICE const float *am, ML_DEVICE float *wm,
                        ML_DEVICE float *vm, ML_DEVICE int *info, ml_i64 g) {
  const int M = N + (N & 1);  // players of the schedule (a dummy one for odd N)
  const bool lower = p.flags != ML_K_UPPER;
  float a[N][N];
  int ex = 0;
  if (!ml_ejs_load<N>(lower, am, a, &ex)) {
    ml_ejs_nan_outputs<N, VEC>(wm, vm, info, g, ML_INFO_NONFINITE);
    return;
  }
  float v[VEC ? N : 1][VEC ? N : 1];
  if (VEC) {
    ML_UNROLL
    for (int i = 0; i < N; ++i) {
      ML_UNROLL
      for (int j = 0; j < N; ++j) v[i][j] = i == j ? 1.0f : 0.0f;
    }
  }

  const int cap = p.max_iter > 0 ? p.max_iter : ML_EJS_MAX_SWEEPS;
  int sweeps = 0;
  bool converged = false;
  for (int sw = 0; sw < cap; ++sw) {
    bool any = false;
    ML_UNROLL
    for (int r = 0; r < M - 1; ++r) {
      float cr[M / 2], sr[M / 2];
      if (!ml_ejs_round_angles<N, M>(r, a, cr, sr)) continue;
      any = true;
      ml_ejs_round_apply<N, M, VEC>(r, a, v, cr, sr);
    }
    if (!any) {
      converged = true;
      break;
    }
    ++sweeps;
  }

  const int it = sweeps < 0x7fff ? sweeps : 0x7fff;
  if (!converged) {  // sweep cap reached: NaN outputs, as for non-finite input
    ml_ejs_nan_outputs<N, VEC>(wm, vm, info, g,
                               (it << ML_INFO_SWEEPS_SHIFT) | ML_INFO_NOT_CONVERGED);
    return;
  }
  ml_ejs_store<N, VEC>(ex, a, v, wm, vm);
  if (info) info[g] = it << ML_INFO_SWEEPS_SHIFT;
}

template <bool VEC>
ML_FN void ml_ejs_dispatch(ML_PARAMS p, ML_DEVICE const float *a, ML_DEVICE float *w,
                           ML_DEVICE float *v, ML_DEVICE int *info, ml_i64 g) {
  const int n = p.n;
  const ml_i64 nn = (ml_i64)n * n;
  ML_DEVICE const float *am = a + g * nn;
  ML_DEVICE float *wm = w + g * (ml_i64)n;
  ML_DEVICE float *vm = VEC ? v + g * nn : v;
  switch (n) {
    case 1: ml_ejs_solve<1, VEC>(p, am, wm, vm, info, g); break;
    case 2: ml_ejs_solve<2, VEC>(p, am, wm, vm, info, g); break;
    case 3: ml_ejs_solve<3, VEC>(p, am, wm, vm, info, g); break;
    case 4: ml_ejs_solve<4, VEC>(p, am, wm, vm, info, g); break;
    case 5: ml_ejs_solve<5, VEC>(p, am, wm, vm, info, g); break;
    case 6: ml_ejs_solve<6, VEC>(p, am, wm, vm, info, g); break;
    case 7: ml_ejs_solve<7, VEC>(p, am, wm, vm, info, g); break;
    case 8: ml_ejs_solve<8, VEC>(p, am, wm, vm, info, g); break;
    default: break;  // not routed here (ml_eigh_jacobi_small_fits)
  }
}

// w: n eigenvalues ascending; v: n x n, eigenvector j in column j. One thread per matrix.
ML_FN void ml_eigh_jacobi_small(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                ML_DEVICE float *w, ML_DEVICE float *v, ML_DEVICE int *info) {
  if (ctx.group_id >= p.batch) return;
  ml_ejs_dispatch<true>(p, a, w, v, info, ctx.group_id);
}

// w: n eigenvalues ascending (bitwise those of ml_eigh_jacobi_small); no vector work.
ML_FN void ml_eigvalsh_jacobi_small(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                    ML_DEVICE float *w, ML_DEVICE int *info) {
  if (ctx.group_id >= p.batch) return;
  ml_ejs_dispatch<false>(p, a, w, (ML_DEVICE float *)0, info, ctx.group_id);
}

#endif  // ML_KERNELS_EIGH_JACOBI_SMALL_H
