// Eigenvalues of a symmetric tridiagonal matrix by bisection with Sturm counts, one
// eigenvalue per lane and no communication between lanes (no serial chase, no barriers):
// the values-only phase of ml_eigvalsh_tridiag_bisect (eigh_tridiag_ql.h) and, on the
// Golub-Kahan form of a bidiagonal, of ml_svdvals_bidiag_bisect (svd_bidiag_qr.h).
// Accuracy: the computed count is the exact count of a tridiagonal whose entries differ from
// (d, e) by a few ulps each (Kahan's analysis of the LDL^T recurrence), and each interval is
// halved until it is narrower than ulp * max(|a|, |b|) + ulp * g, g = max |x| over Gershgorin's
// interval (>= ||T||_2), so every eigenvalue has the absolute error of the QL/QR kernels (a few
// eps ||T||), whatever the eigenvalue distribution (clusters cost nothing extra). At most 25
// halvings per eigenvalue (the interval starts at most 2.003 g wide), each a chain of n
// dependent subtract/divide steps whose loads do not depend on the chain.
#ifndef ML_KERNELS_BISECT_H
#define ML_KERNELS_BISECT_H

#include "group.h"

// Halvings allowed per eigenvalue when p.max_iter is 0. The tolerance above ends every
// bisection after at most 25 halvings (n <= 4096), so this cap is a safety net that finite
// input does not reach.
#define ML_BISECT_DEFAULT_CAP 64

// Number of eigenvalues <= x of the symmetric tridiagonal with diagonal d[0..n) and
// off-diagonal b[i] coupling i and i + 1 (n >= 1): the non-positive pivots of
// the LDL^T factorisation of T - x I. A pivot of magnitude below pivmin is replaced by
// -pivmin, as LAPACK's slaebz does, so no division overflows (pivmin >= FLT_MIN max b[i]^2).
// The loads do not depend on the pivots (only the subtract-divide
// chain is serial); every lane of a group reads the same address (a broadcast).
// P: the pointer type (shared memory for the group kernels, device memory for the steps of
// core/kernels/tridiag_steps.h); the same for the functions below.
template <typename P>
ML_FN int ml_sturm_count(P d, P b, int n, float x, float pivmin) {
  float q = d[0] - x;
  if (ml_fabs(q) < pivmin) q = -pivmin;
  int cnt = q <= 0.0f ? 1 : 0;
  for (int i = 1; i < n; ++i) {
    const float bi = b[i - 1];
    q = (d[i] - x) - (bi * bi) / q;
    if (ml_fabs(q) < pivmin) q = -pivmin;
    cnt += q <= 0.0f ? 1 : 0;
  }
  return cnt;
}

// Number of eigenvalues <= x of the Golub-Kahan tridiagonal of the upper bidiagonal B =
// (dd[0..k), ee[0..k-1)): zero diagonal, off-diagonal dd[0], ee[0], dd[1], ..., dd[k-1]
// (order 2k; its eigenvalues are +-sigma_i). For x > 0 the count minus k is the number of
// singular values <= x. Same pivot rule as ml_sturm_count.
template <typename P>
ML_FN int ml_sturm_count_gk(P dd, P ee, int k, float x, float pivmin) {
  float q = -x;
  if (ml_fabs(q) < pivmin) q = -pivmin;
  int cnt = q <= 0.0f ? 1 : 0;
  for (int i = 0; i < k; ++i) {
    const float di = dd[i];
    q = -x - (di * di) / q;
    if (ml_fabs(q) < pivmin) q = -pivmin;
    cnt += q <= 0.0f ? 1 : 0;
    if (i + 1 < k) {
      const float ei = ee[i];
      q = -x - (ei * ei) / q;
      if (ml_fabs(q) < pivmin) q = -pivmin;
      cnt += q <= 0.0f ? 1 : 0;
    }
  }
  return cnt;
}

// Narrows [*lo, *hi] around the j-th smallest (0-based) eigenvalue of (d, b) (gk = 0; order n)
// or the j-th smallest singular value of the bidiagonal (d, b) (gk = 1; k = n singular values),
// by bisection; on entry count(*lo) <= j < count(*hi) (counts of values <= x), which every
// halving keeps. Stops when the interval is narrower than ML_FLT_ULP * max(|a|, |b|) + atol or
// cannot be halved in float. *steps: the halvings done, or -1 when cap of them did not suffice.
// Two values j < j' bisected from the same interval follow the same halvings until a count
// separates them, after which j's interval lies left of j''s: their midpoints are in index order.
template <typename P>
ML_FN void ml_bisect_interval(P d, P b, int n, int gk, int j, ML_THREAD float *lo,
                              ML_THREAD float *hi, float atol, float pivmin, int cap,
                              ML_THREAD int *steps) {
  float a = *lo, c = *hi;
  int it = 0;
  for (;;) {
    const float mid = 0.5f * (a + c);
    const float width = ML_FLT_ULP * ml_fmax(ml_fabs(a), ml_fabs(c)) + atol;
    if (c - a <= width || mid <= a || mid >= c) break;
    if (it >= cap) {
      it = -1;
      break;
    }
    ++it;
    const int cnt = gk ? ml_sturm_count_gk(d, b, n, mid, pivmin) - n
                       : ml_sturm_count(d, b, n, mid, pivmin);
    if (cnt > j) {
      c = mid;
    } else {
      a = mid;
    }
  }
  *lo = a;
  *hi = c;
  *steps = it;
}

// The midpoint of ml_bisect_interval's final interval started from [lo, hi] (meaningless when
// *steps is -1).
template <typename P>
ML_FN float ml_bisect_one(P d, P b, int n, int gk, int j, float lo, float hi, float atol,
                          float pivmin, int cap, ML_THREAD int *steps) {
  float a = lo, c = hi;
  ml_bisect_interval(d, b, n, gk, j, &a, &c, atol, pivmin, cap, steps);
  return 0.5f * (a + c);
}

// Start vector entry i of eigenvector j for inverse iteration after bisection
// (eigh_tridiag_ql.h, tridiag_steps.h): a hash of (j, i), uniform in
// [-1, 1) (deterministic; distinct vectors give the members of a cluster distinct directions).
ML_FN float ml_invit_start(int j, int i) {
  ml_u32 h = (ml_u32)(i + 1) * 0x9E3779B1u ^ (ml_u32)(j + 1) * 0x85EBCA77u;
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  h ^= h >> 12;
  h *= 0x297A2D39u;
  h ^= h >> 15;
  return (float)(h >> 8) * 1.1920929e-07f - 1.0f;
}

// The group's outcome of its lanes' bisections (most: a lane's most halvings, capped: whether
// one of its values hit the cap): the group's most halvings in *iters, and 1 when any value hit
// the cap, the same on every lane. One ml_group_max (one barrier); red: 32 floats.
ML_FN int ml_bisect_outcome(ML_CTX ctx, int most, int capped, ML_SHARED float *red,
                            ML_THREAD int *iters) {
  // The most halvings, plus 2^20 when a value hit the cap (exact in float).
  const float code = ml_group_max(ctx, (float)most + (capped ? 1048576.0f : 0.0f), red);
  const int hit = code >= 1048576.0f ? 1 : 0;
  *iters = (int)(hit ? code - 1048576.0f : code);
  return hit;
}

#endif  // ML_KERNELS_BISECT_H
