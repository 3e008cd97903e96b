// Divide and conquer for the symmetric tridiagonal eigenproblem with eigenvectors (Cuppen's
// method with Gu and Eisenstat's eigenvectors; core/src/blocked_tridiag_dc.cpp sequences it),
// on the scaled copies tridiag_prep leaves (tridiag_steps.h, count 0). T is torn at every
// multiple of ML_DC_LEAF: T = blockdiag(T1, T2) + |b| v v^T with v = (e_last; sign(b) e_first)
// and |b| taken off the two diagonal entries next to the tear. Steps, in launch order:
//   dc_leaf     a group per leaf (<= ML_DC_LEAF rows): implicit QL with its eigenvectors into
//               the leaf's diagonal block of Q, every lane the recurrence and a column,
//               values sorted ascending with their columns;
// then per level (blocks of ML_DC_LEAF 2^l rows merged in pairs, the whole level per launch;
// a block without a partner merges with an empty one and comes out unchanged):
//   dc_deflate  a group per merge: z = (last row of Q1; sign(b) first row of Q2) / sqrt 2,
//               rho = 2 |b|, the two halves' values merged by rank, then (lane 0, in value
//               order, as LAPACK's slaed2) deflation of tiny rho |z_i| and of close pairs by
//               Givens rotations, which are recorded (applied to U by dc_vec);
//   dc_secular  a lane per secular root: each root kept as (nearest pole, offset) so that its
//               distances to the poles are accurate, found by Li's middle-way rational
//               iteration safeguarded by bisection;
//   dc_zhat     a lane per pole: z recomputed from the roots by Loewner's formula (Gu and
//               Eisenstat: the computed vectors are then numerically orthogonal), and the
//               merged order of roots and deflated values;
//   dc_vec      a group per column of the level: column of U (rows of its merge) = the
//               normalised (zhat_j / (d_j - lambda)) of its root or the unit vector of its
//               deflated value, the recorded rotations applied in reverse order;
//   gemm        Q' = blockdiag(Q1, Q2) U as two products per merge (the host, gemm());
// and at last
//   dc_out      a group per wanted value: its column of Q into Z and its value scaled back.
// Work per merge of s rows with K undeflated poles: O(s) serial deflation, O(K) per root and
// iteration, O(K) per pole, O(K + rotations) per column, 2 (s/2)^2 s flops of products.
#ifndef ML_KERNELS_TRIDIAG_DC_H
#define ML_KERNELS_TRIDIAG_DC_H

#include "blocked_common.h"
#include "eigh_jacobi_simd.h"
#include "tridiag_steps.h"

// Rows of a leaf (merges are blocks of ML_DC_LEAF 2^l rows).
#define ML_DC_LEAF 32
// QL sweeps per leaf value before the leaf is marked not converged.
#define ML_DC_QL_ITERS 30
// Iterations of a secular root (bisection steps included); the rational steps converge in a few.
#define ML_DC_SECULAR_ITERS 80

// Scratch per matrix (floats): tridiag_prep's and tridiag_bisect's region for count n, values
// only (the routed solver takes the values from bisection there) | arrays of n: D (values of
// the blocks), dk, zk, src (undeflated poles of a merge in value order: pole, z, local column),
// dv, dsrc (deflated values and local columns, ascending), org, tau, lam (roots), zh, col
// (output column's root or -1 - deflated column), zw, perm, and per merge (at its first row)
// K, rotation count, rho; rotations (4 arrays: first, second, c, s) | Q | Q' | U (n x n each,
// ld n, 32-float aligned).
#define ML_DC_ARRAYS 20
ML_HOST_FN ml_i64 ml_dc_arr(int n, int k) {
  const ml_i64 base = (ml_tridiag_scratch(n, n, 0) + 31) / 32 * 32;
  return base + (ml_i64)k * (((ml_i64)n + 31) / 32 * 32);
}
ML_HOST_FN ml_i64 ml_dc_off_q(int n, int which) {
  const ml_i64 nn = ((ml_i64)n * n + 31) / 32 * 32;
  return ml_dc_arr(n, ML_DC_ARRAYS) + which * nn;
}
ML_HOST_FN ml_i64 ml_dc_scratch(int n) { return ml_dc_off_q(n, 3); }
#define ML_DC_D 0
#define ML_DC_DK 1
#define ML_DC_ZK 2
#define ML_DC_SRC 3
#define ML_DC_DV 4
#define ML_DC_DSRC 5
#define ML_DC_ORG 6
#define ML_DC_TAU 7
#define ML_DC_LAM 8
#define ML_DC_ZH 9
#define ML_DC_COL 10
#define ML_DC_ZW 11
#define ML_DC_PERM 12
#define ML_DC_K 13
#define ML_DC_NROT 14
#define ML_DC_RHO 15
#define ML_DC_R0 16
#define ML_DC_R1 17
#define ML_DC_RC 18
#define ML_DC_RS 19

// Rows lo, mid, hi of merge `mg` of a level with blocks of s rows (mid == hi: no partner).
ML_FN void ml_dc_merge_rows(int n, int s, ml_i64 mg, ML_THREAD int *lo, ML_THREAD int *mid,
                            ML_THREAD int *hi) {
  *lo = (int)(mg * s);
  *hi = ml_imin(n, *lo + s);
  *mid = ml_imin(*hi, *lo + s / 2);
}

// The leaf rows lo .. lo + m - 1 (m <= 32) by one-sided Jacobi (eigh_jacobi_simd.h) in a
// group that is one simdgroup of 32 lanes: lane j holds column j of the leaf's torn tridiagonal
// (the tears' |b| off its first and last diagonal entries, as below), scaled by a power of two
// and shifted by 2 ||T||_1; the sweeps run on all lanes at once (about 6 of 31 rounds at m = 32,
// each a shuffle per row) instead of every lane repeating the QL recurrence with its arrays in
// private memory. Values ascending into D, vectors into the leaf's block of Q. Returns false,
// writing nothing, for a non-finite leaf or one not converged in ML_EJSIMD_MAX_SWEEPS sweeps
// (the QL below then runs as before).
ML_FN bool ml_dc_leaf_jacobi(ML_CTX ctx, int n, int lo, int m, ML_DEVICE const float *ds,
                             ML_DEVICE const float *es, ML_DEVICE float *D, ML_DEVICE float *Q) {
  const int lane = ctx.lane;
  const bool mine = lane < m;
  float dl = 0.0f, eu = 0.0f, ed = 0.0f;  // rows lane, lane - 1, lane + 1 of column lane
  if (mine) {
    dl = ds[lo + lane];
    if (lane == 0 && lo > 0) dl -= ml_fabs(es[lo - 1]);
    if (lane == m - 1 && lo + m < n) dl -= ml_fabs(es[lo + m - 1]);
    if (lane > 0) eu = es[lo + lane - 1];
    if (lane + 1 < m) ed = es[lo + lane];
  }
  const bool finite = ml_isfinite(dl) && ml_isfinite(eu) && ml_isfinite(ed);
  if (ml_simd_max(ctx, finite ? 0.0f : 1.0f) > 0.0f) return false;
  const float amax = ml_simd_max(ctx, ml_fmax(ml_fabs(dl), ml_fmax(ml_fabs(eu), ml_fabs(ed))));
  const bool diagonal = ml_simd_max(ctx, eu != 0.0f || ed != 0.0f ? 1.0f : 0.0f) == 0.0f;
  float x[32];
  float lam = dl;
  if (diagonal) {
    ML_UNROLL
    for (int i = 0; i < 32; ++i) x[i] = i == lane ? 1.0f : 0.0f;
  } else {
    // max |t| into [1, 2) by two exact factors; shift 2 ||T||_1 onto the diagonal.
    const int ex = amax > 0.0f ? ml_ilogb(amax) : 0;
    const int e1 = (-ex) / 2;
    const float f1 = ml_exp2i(e1), f2 = ml_exp2i(-ex - e1);
    const float sd = (dl * f1) * f2, su = (eu * f1) * f2, sdn = (ed * f1) * f2;
    const float shift = 2.0f * ml_simd_max(ctx, ml_fabs(sd) + ml_fabs(su) + ml_fabs(sdn));
    ML_UNROLL
    for (int i = 0; i < 32; ++i)
      x[i] = i == lane ? (mine ? sd + shift : 0.0f) : i + 1 == lane ? su : i == lane + 1 ? sdn
                                                                                         : 0.0f;
    float d = 1.0f;
    int sweeps = 0;
    if (!ml_ejsimd_iterate<32>(ctx, ML_EJSIMD_MAX_SWEEPS, lane, m, x, &d, &sweeps)) return false;
    lam = ml_ejsimd_eigen<32, true>(mine, d, shift, ex, x);
  }
  // Ascending: the lane's rank among the m values (ties by lane) is its column.
  int rank = 0;
  for (int k = 0; k < m; ++k) {
    const float o = ml_simd_broadcast(ctx, lam, k);
    rank += (k < lane ? o <= lam : o < lam) ? 1 : 0;
  }
  if (mine) {
    D[lo + rank] = lam;
    ML_UNROLL
    for (int i = 0; i < 32; ++i)
      if (i < m) Q[(ml_i64)(lo + rank) * n + lo + i] = x[i];  // column-major, as below
  }
  return true;
}

// dc_leaf: groups batch x leaves, a group (one simdgroup, <= 32 lanes) per leaf. With p.flags
// & 1 and a group of one simdgroup of 32 lanes, by Jacobi (above) where it converges. Every lane
// runs the leaf's scalar QL recurrence on its own copies of d and e (the same operations on the
// same values, so the copies agree bitwise and control flow stays uniform, with no shuffles or
// barriers) and applies each rotation to its own column of the leaf's eigenvectors, kept in
// private memory and written to Q once. A group of fewer lanes than columns repeats the
// recurrence per batch of columns. n; operands 0 scratch, 3 stat.
ML_FN void ml_step_dc_leaf(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int n = p.n;
  const int leaves = (n + ML_DC_LEAF - 1) / ML_DC_LEAF;
  const ml_i64 b = ctx.group_id / leaves;
  const int leaf = (int)(ctx.group_id - b * leaves);
  ML_DEVICE float *sc = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE float *st = ws + p.off[3] + b * p.stride[3];
  ML_DEVICE const float *ds = sc + ml_tridiag_off_ds(n, 0);
  ML_DEVICE const float *es = sc + ml_tridiag_off_es(n, 0);
  ML_DEVICE float *D = sc + ml_dc_arr(n, ML_DC_D);
  ML_DEVICE float *Q = sc + ml_dc_off_q(n, 0);
  const int lo = leaf * ML_DC_LEAF, m = ml_imin(ML_DC_LEAF, n - lo);
  if ((p.flags & 1) != 0 && ctx.group_size == 32 && ml_simd_width(ctx) == 32 &&
      ml_dc_leaf_jacobi(ctx, n, lo, m, ds, es, D, Q))
    return;
  float d[ML_DC_LEAF], e[ML_DC_LEAF], z[ML_DC_LEAF];
  for (int c0 = 0; c0 < m; c0 += ctx.group_size) {
    const int k = c0 + ctx.lane;  // this lane's column (none when k >= m)
    for (int i = 0; i < m; ++i) {
      float di = ds[lo + i];
      if (i == 0 && lo > 0) di -= ml_fabs(es[lo - 1]);              // tear above the leaf
      if (i == m - 1 && lo + m < n) di -= ml_fabs(es[lo + m - 1]);  // tear below
      d[i] = di;
      e[i] = i + 1 < m ? es[lo + i] : 0.0f;
      z[i] = k == i ? 1.0f : 0.0f;
    }
    bool stuck = false;
    for (int l = 0; l < m; ++l) {
      for (int iter = 0;; ++iter) {
        int mm = l;
        while (mm + 1 < m) {
          const float dd = ml_fabs(d[mm]) + ml_fabs(d[mm + 1]);
          if (ml_fabs(e[mm]) <= ML_FLT_EPS * dd || ml_fabs(e[mm]) < ML_FLT_MIN) break;
          ++mm;
        }
        if (mm == l) break;
        if (iter >= ML_DC_QL_ITERS) {
          stuck = true;
          break;
        }
        // Wilkinson-type shift from the leading 2 x 2, then the QL chase from mm up to l.
        float g = (d[l + 1] - d[l]) / (2.0f * e[l]);
        float r = ml_hypot(g, 1.0f);
        g = d[mm] - d[l] + e[l] / (g + ml_copysign(r, g));
        float s = 1.0f, c = 1.0f, pp = 0.0f;
        int i = mm - 1;
        for (; i >= l; --i) {
          const float f = s * e[i], bb = c * e[i];
          r = ml_hypot(f, g);
          e[i + 1] = r;
          if (r == 0.0f) {  // underflow: the chase splits here
            d[i + 1] -= pp;
            e[mm] = 0.0f;
            break;
          }
          s = f / r;
          c = g / r;
          g = d[i + 1] - pp;
          r = (d[i] - g) * s + 2.0f * c * bb;
          pp = s * r;
          d[i + 1] = g + pp;
          g = c * r - bb;
          const float t = z[i + 1];
          z[i + 1] = s * z[i] + c * t;
          z[i] = c * z[i] - s * t;
        }
        if (r == 0.0f && i >= l) continue;
        d[l] -= pp;
        e[l] = g;
        e[mm] = 0.0f;
      }
    }
    for (int i = 0; i + 1 < m; ++i) {  // ascending, columns along
      int best = i;
      for (int j = i + 1; j < m; ++j)
        if (d[j] < d[best]) best = j;
      if (best == i) continue;
      const float t = d[i], u = z[i];
      d[i] = d[best];
      d[best] = t;
      z[i] = z[best];
      z[best] = u;
    }
    if (k < m)
      for (int i = 0; i < m; ++i) Q[(ml_i64)(lo + i) * n + lo + k] = z[i];
    if (c0 > 0) continue;
    if (stuck && ctx.lane == 0) ml_tridiag_not_converged(st);
    for (int i = ctx.lane; i < m; i += ctx.group_size) D[lo + i] = d[i];
  }
}

// Number of x[0..len) (ascending) below v (strict) or at most v (!strict).
ML_FN int ml_dc_rank(ML_DEVICE const float *x, int len, float v, bool strict) {
  int a = 0, c = len;
  while (a < c) {
    const int h = (a + c) >> 1;
    if (strict ? x[h] < v : x[h] <= v) {
      a = h + 1;
    } else {
      c = h;
    }
  }
  return a;
}

// dc_deflate: groups batch x merges. n; i[0] the level's block size s; operands 0 scratch
// (Q: Q of the level).
ML_FN void ml_step_dc_deflate(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int n = p.n, s = p.i[0];
  const ml_i64 merges = (n + s - 1) / s;
  const ml_i64 b = ctx.group_id / merges;
  int lo, mid, hi;
  ml_dc_merge_rows(n, s, ctx.group_id - b * merges, &lo, &mid, &hi);
  ML_DEVICE float *sc = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE const float *es = sc + ml_tridiag_off_es(n, 0);
  ML_DEVICE const float *Q = sc + ml_dc_off_q(n, p.i[1]);
  ML_DEVICE const float *D = sc + ml_dc_arr(n, ML_DC_D) + lo;
  ML_DEVICE float *zw = sc + ml_dc_arr(n, ML_DC_ZW) + lo;
  ML_DEVICE float *perm = sc + ml_dc_arr(n, ML_DC_PERM) + lo;
  const int h = mid - lo, len = hi - lo;
  const float beta = mid < hi ? es[mid - 1] : 0.0f;
  const float sg = beta < 0.0f ? -0.70710678f : 0.70710678f;
  // Every slot of perm and col holds a row of the merge first: with NaN values the ranks below
  // (and dc_zhat's places) may collide, and no index may then point outside the merge.
  ML_DEVICE float *colw = sc + ml_dc_arr(n, ML_DC_COL) + lo;
  for (int t = ctx.lane; t < len; t += ctx.group_size) {
    perm[t] = (float)t;
    colw[t] = -1.0f - (float)t;
  }
  ml_barrier_device(ctx);
  for (int t = ctx.lane; t < len; t += ctx.group_size) {
    const int col = lo + t;
    zw[t] = t < h ? 0.70710678f * Q[(ml_i64)col * n + mid - 1] : sg * Q[(ml_i64)col * n + mid];
    const int r = t < h ? t + ml_dc_rank(D + h, len - h, D[t], true)
                        : (t - h) + ml_dc_rank(D, h, D[t], false);
    perm[r] = (float)t;
  }
  ml_barrier_device(ctx);
  const float rho = 2.0f * ml_fabs(beta);
  ML_DEVICE float *dk = sc + ml_dc_arr(n, ML_DC_DK) + lo;
  ML_DEVICE float *zk = sc + ml_dc_arr(n, ML_DC_ZK) + lo;
  ML_DEVICE float *src = sc + ml_dc_arr(n, ML_DC_SRC) + lo;
  ML_DEVICE float *dv = sc + ml_dc_arr(n, ML_DC_DV) + lo;
  ML_DEVICE float *dsrc = sc + ml_dc_arr(n, ML_DC_DSRC) + lo;
  ML_DEVICE float *r0 = sc + ml_dc_arr(n, ML_DC_R0) + lo;
  ML_DEVICE float *r1 = sc + ml_dc_arr(n, ML_DC_R1) + lo;
  ML_DEVICE float *rc = sc + ml_dc_arr(n, ML_DC_RC) + lo;
  ML_DEVICE float *rs = sc + ml_dc_arr(n, ML_DC_RS) + lo;
  // Lane 0's scan in value order (LAPACK's slaed2): a value with a tiny rho |z| is deflated;
  // a pair whose rotation zeroing the earlier one's z moves the matrix by at most tol is
  // rotated and the earlier one deflated; the rest are the poles dk, zk (normalised after),
  // their rows src. The deflated values come in value order except for the rotated ones (moved
  // by ~tol): an insertion sort does little work. PERM, DD, Z: the order and the merged values
  // and z; V, VS: the deflated values and their rows.
#define ML_DC_DEFLATE_SCAN(PERM, DD, Z, V, VS)                 \
  for (int k = 0; k < len; ++k) {                               \
    const int t = (int)PERM[k];                                 \
    float dt = DD[t], zt = Z[t];                                \
    if (rho * ml_fabs(zt) <= tol) {                             \
      V[nd] = dt;                                               \
      VS[nd++] = (float)t;                                      \
      continue;                                                 \
    }                                                           \
    if (pj >= 0) {                                              \
      const float tau = ml_hypot(zt, zp);                       \
      const float c = zt / tau, sn = -zp / tau;                 \
      if (ml_fabs((dt - dp) * c * sn) <= tol) {                 \
        const float tp = dp * c * c + dt * sn * sn;             \
        dt = dp * sn * sn + dt * c * c;                         \
        zt = tau;                                               \
        V[nd] = tp;                                             \
        VS[nd++] = (float)pj;                                   \
        r0[nrot] = (float)pj;                                   \
        r1[nrot] = (float)t;                                    \
        rc[nrot] = c;                                           \
        rs[nrot++] = sn;                                        \
      } else {                                                  \
        dk[K] = dp;                                             \
        zk[K] = zp;                                             \
        zz += zp * zp;                                          \
        src[K++] = (float)pj;                                   \
      }                                                         \
    }                                                           \
    pj = t;                                                     \
    dp = dt;                                                    \
    zp = zt;                                                    \
  }                                                             \
  if (pj >= 0) {                                                \
    dk[K] = dp;                                                 \
    zk[K] = zp;                                                 \
    zz += zp * zp;                                              \
    src[K++] = (float)pj;                                       \
  }                                                             \
  for (int q = 1; q < nd; ++q) {                                \
    const float v = V[q], sv = VS[q];                           \
    int u = q;                                                  \
    while (u > 0 && V[u - 1] > v) {                             \
      V[u] = V[u - 1];                                          \
      VS[u] = VS[u - 1];                                        \
      --u;                                                      \
    }                                                           \
    V[u] = v;                                                   \
    VS[u] = sv;                                                 \
  }
  int K = 0, nd = 0, nrot = 0, pj = -1;
  float dp = 0.0f, zp = 0.0f;  // the pending candidate pj's value and z
  float zz = 0.0f;             // the squared norm of the poles' z
  if (p.i[2] != 0) {
    // Staged (the host gave 5 len + 2 ML_RED_FLOATS + 4 shared floats): the merge's values, z
    // and order in shared memory, so that the scan's dependent reads are shared ones, the
    // maxima over all lanes, the deflated values sorted in shared memory and copied out by all.
    ML_SHARED float *sD = ctx.scratch, *sZ = sD + len, *sP = sZ + len, *sV = sP + len;
    ML_SHARED float *sS = sV + len, *red = sS + len, *cnt = red + 2 * ML_RED_FLOATS;
    float dm = 0.0f, zm = 0.0f;
    for (int t = ctx.lane; t < len; t += ctx.group_size) {
      const float d = D[t], z = zw[t];
      sD[t] = d;
      sZ[t] = z;
      sP[t] = perm[t];
      dm = ml_fmax(dm, ml_fabs(d));
      zm = ml_fmax(zm, ml_fabs(z));
    }
    dm = ml_group_max(ctx, dm, red);
    zm = ml_group_max(ctx, zm, red + ML_RED_FLOATS);
    const float tol = 8.0f * ML_FLT_EPS * ml_fmax(dm, zm);
    if (ctx.lane == 0) {
      ML_DC_DEFLATE_SCAN(sP, sD, sZ, sV, sS)
      cnt[0] = (float)K;
      cnt[1] = (float)nd;
      cnt[2] = (float)nrot;
      cnt[3] = zz;
    }
    ml_barrier_device(ctx);
    K = (int)cnt[0];
    nd = (int)cnt[1];
    nrot = (int)cnt[2];
    zz = cnt[3];
    for (int q = ctx.lane; q < nd; q += ctx.group_size) {
      dv[q] = sV[q];
      dsrc[q] = sS[q];
    }
  } else {
    if (ctx.lane != 0) return;
    float dmax = 0.0f, zmax = 0.0f;
    for (int t = 0; t < len; ++t) {
      dmax = ml_fmax(dmax, ml_fabs(D[t]));
      zmax = ml_fmax(zmax, ml_fabs(zw[t]));
    }
    const float tol = 8.0f * ML_FLT_EPS * ml_fmax(dmax, zmax);
    ML_DC_DEFLATE_SCAN(perm, D, zw, dv, dsrc)
  }
#undef ML_DC_DEFLATE_SCAN
  // z of the undeflated poles normalised (rho takes the norm): the secular bound is rho.
  // (Staged: all lanes, after the device barrier above; else lane 0 alone.)
  const float zn = zz > 0.0f ? ml_sqrt(zz) : 1.0f;
  const int q0 = p.i[2] != 0 ? ctx.lane : 0, qs = p.i[2] != 0 ? ctx.group_size : 1;
  for (int q = q0; q < K; q += qs) zk[q] /= zn;
  if (ctx.lane == 0) {
    sc[ml_dc_arr(n, ML_DC_K) + lo] = (float)K;
    sc[ml_dc_arr(n, ML_DC_NROT) + lo] = (float)nrot;
    sc[ml_dc_arr(n, ML_DC_RHO) + lo] = rho * zz;
  }
}

// The merge and lane index of a lane-per-entry step (groups batch x merges x ceil(s / gs)).
ML_FN ml_i64 ml_dc_lane_merge(ML_CTX ctx, ML_STEP_PARAMS p, ML_THREAD int *t,
                              ML_THREAD ml_i64 *mg) {
  const int n = p.n, s = p.i[0];
  const ml_i64 merges = (n + s - 1) / s, per = (s + ctx.group_size - 1) / ctx.group_size;
  const ml_i64 g = ctx.group_id / per;
  *t = (int)(ctx.group_id - g * per) * ctx.group_size + ctx.lane;
  const ml_i64 b = g / merges;
  *mg = g - b * merges;
  return b;
}

// Sum of x over the lanes of a root's simdgroup (flags 1 of dc_secular), else x itself.
ML_FN float ml_dc_root_sum(ML_CTX ctx, bool simd, float x) {
  return simd ? ml_simd_sum(ctx, x) : x;
}

// dc_secular: groups batch x merges x ceil(s / group size), a lane per root; flags 1: a
// simdgroup per root (groups batch x merges x ceil(s / simdgroups per group)), each sum over
// the poles split over its lanes (strided) and added by ml_simd_sum, so every lane holds the same
// bits and runs the same iteration; lane 0 stores. n; i[0] s; operands 0 scratch.
ML_FN void ml_step_dc_secular(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  int r, lo, mid, hi;
  ml_i64 mg;
  const bool simd = (p.flags & 1) != 0;
  const int sl = simd ? ml_simd_lane(ctx) : 0, sw = simd ? 32 : 1;
  ml_i64 b;
  if (simd) {  // ml_dc_lane_merge with the simdgroups as the units
    const int units = ml_simd_count(ctx), s = p.i[0];
    const ml_i64 merges = (p.n + s - 1) / s, per = (s + units - 1) / units;
    const ml_i64 gq = ctx.group_id / per;
    r = (int)(ctx.group_id - gq * per) * units + ml_simd_id(ctx);
    b = gq / merges;
    mg = gq - b * merges;
  } else {
    b = ml_dc_lane_merge(ctx, p, &r, &mg);
  }
  const int n = p.n;
  ml_dc_merge_rows(n, p.i[0], mg, &lo, &mid, &hi);
  ML_DEVICE float *sc = ws + p.off[0] + b * p.stride[0];
  const int K = (int)sc[ml_dc_arr(n, ML_DC_K) + lo];
  if (r >= K) return;
  ML_DEVICE const float *dk = sc + ml_dc_arr(n, ML_DC_DK) + lo;
  ML_DEVICE const float *zk = sc + ml_dc_arr(n, ML_DC_ZK) + lo;
  const float rho = sc[ml_dc_arr(n, ML_DC_RHO) + lo], rinv = 1.0f / rho;
  int org = r, ip = r, iq = r + 1;
  // The last root lies in (d_K, d_K + rho] (rho takes ||z||^2): the bound a hair above.
  float tlo = 0.0f, thi = rho * (1.0f + 16.0f * ML_FLT_ULP);
  if (r + 1 < K) {
    const float hgap = 0.5f * (dk[r + 1] - dk[r]);
    float w = 0.0f;
    for (int j = sl; j < K; j += sw) w += zk[j] * zk[j] / ((dk[j] - dk[r]) - hgap);
    w = rinv + ml_dc_root_sum(ctx, simd, w);
    if (w > 0.0f) {  // the root is below the midpoint: measured from the pole below
      thi = hgap;
    } else {
      org = r + 1;
      tlo = -hgap;
      thi = 0.0f;
    }
  } else {
    iq = -1;
  }
  const float dorg = dk[org];
  float tau = 0.5f * (tlo + thi);
  for (int it = 0; it < ML_DC_SECULAR_ITERS; ++it) {
    float psi = 0.0f, phi = 0.0f, dpsi = 0.0f, dphi = 0.0f, err = 0.0f;
    for (int j = sl; j < K; j += sw) {
      const float del = (dk[j] - dorg) - tau;
      const float q = zk[j] / del, term = zk[j] * q;
      err += ml_fabs(term);
      if (j <= ip) {
        psi += term;
        dpsi += q * q;
      } else {
        phi += term;
        dphi += q * q;
      }
    }
    psi = ml_dc_root_sum(ctx, simd, psi);
    phi = ml_dc_root_sum(ctx, simd, phi);
    dpsi = ml_dc_root_sum(ctx, simd, dpsi);
    dphi = ml_dc_root_sum(ctx, simd, dphi);
    err = ml_dc_root_sum(ctx, simd, err);
    const float w = rinv + psi + phi, dw = dpsi + dphi;
    if (ml_fabs(w) <= ML_FLT_EPS * (8.0f * (err + rinv) + ml_fabs(tau) * dw)) break;
    if (w > 0.0f) {
      thi = tau;
    } else {
      tlo = tau;
    }
    const float dl = (dk[ip] - dorg) - tau;
    float eta;
    if (iq >= 0) {
      // Two poles' terms kept with their exact derivatives, the rest a constant: a quadratic.
      const float du = (dk[iq] - dorg) - tau;
      const float c = w - dl * dpsi - du * dphi;
      const float qa = (dl + du) * w - dl * du * dw, qb = dl * du * w;
      if (c == 0.0f) {
        eta = qa != 0.0f ? qb / qa : -w / dw;
      } else {
        const float disc = ml_sqrt(ml_fabs(qa * qa - 4.0f * qb * c));
        eta = qa <= 0.0f ? (qa - disc) / (2.0f * c) : 2.0f * qb / (qa + disc);
      }
    } else {
      const float c = w - dl * dpsi;
      eta = c > 0.0f ? dl + dl * dl * dpsi / c : -w / dw;
    }
    if (w * eta >= 0.0f) eta = -w / dw;
    float nt = tau + eta;
    if (!(nt > tlo && nt < thi)) nt = 0.5f * (tlo + thi);
    if (nt == tau || !(thi > tlo)) break;
    tau = nt;
  }
  if (sl == 0) {
    sc[ml_dc_arr(n, ML_DC_ORG) + lo + r] = (float)org;
    sc[ml_dc_arr(n, ML_DC_TAU) + lo + r] = tau;
    sc[ml_dc_arr(n, ML_DC_LAM) + lo + r] = dorg + tau;
  }
}

// dc_zhat: groups as dc_secular, lane t: zhat of pole t and the place of root t and of
// deflated value t in the merged order (D and col of the merge). n; i[0] s; operands 0 scratch.
ML_FN void ml_step_dc_zhat(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  int t, lo, mid, hi;
  ml_i64 mg;
  const ml_i64 b = ml_dc_lane_merge(ctx, p, &t, &mg);
  const int n = p.n;
  ml_dc_merge_rows(n, p.i[0], mg, &lo, &mid, &hi);
  ML_DEVICE float *sc = ws + p.off[0] + b * p.stride[0];
  const int K = (int)sc[ml_dc_arr(n, ML_DC_K) + lo], nd = hi - lo - K;
  ML_DEVICE const float *dk = sc + ml_dc_arr(n, ML_DC_DK) + lo;
  ML_DEVICE const float *lam = sc + ml_dc_arr(n, ML_DC_LAM) + lo;
  ML_DEVICE const float *dv = sc + ml_dc_arr(n, ML_DC_DV) + lo;
  ML_DEVICE float *D = sc + ml_dc_arr(n, ML_DC_D) + lo;
  ML_DEVICE float *col = sc + ml_dc_arr(n, ML_DC_COL) + lo;
  if (t < K) {
    ML_DEVICE const float *org = sc + ml_dc_arr(n, ML_DC_ORG) + lo;
    ML_DEVICE const float *tau = sc + ml_dc_arr(n, ML_DC_TAU) + lo;
    const float di = dk[t];
    // zhat_t^2 = -(d_t - lam_t) / rho prod_(r != t) (d_t - lam_r) / (d_t - d_r), every
    // difference to a root taken from the root's own pole.
    float pr = ((di - dk[(int)org[t]]) - tau[t]) / sc[ml_dc_arr(n, ML_DC_RHO) + lo];
    for (int r = 0; r < K; ++r)
      if (r != t) pr *= ((di - dk[(int)org[r]]) - tau[r]) / (di - dk[r]);
    const float zt = sc[ml_dc_arr(n, ML_DC_ZK) + lo + t];
    sc[ml_dc_arr(n, ML_DC_ZH) + lo + t] = ml_copysign(ml_sqrt(ml_fmax(-pr, 0.0f)), zt);
    const int at = t + ml_dc_rank(dv, nd, lam[t], true);
    D[at] = lam[t];
    col[at] = (float)t;
  }
  if (t < nd) {
    const int at = t + ml_dc_rank(lam, K, dv[t], false);
    D[at] = dv[t];
    col[at] = -1.0f - sc[ml_dc_arr(n, ML_DC_DSRC) + lo + t];
  }
}

// dc_vec: groups batch x n, a group per column c of the level's U (operand 1: U, n x n, ld
// n; rows of c's merge). n; i[0] s; operands 0 scratch, 1 U.
ML_FN void ml_step_dc_vec(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int n = p.n, s = p.i[0];
  const ml_i64 b = ctx.group_id / n;
  const int c = (int)(ctx.group_id - b * n);
  int lo, mid, hi;
  ml_dc_merge_rows(n, s, c / s, &lo, &mid, &hi);
  ML_DEVICE float *sc = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE float *u = ws + p.off[1] + b * p.stride[1] + (ml_i64)c * n + lo;
  const int len = hi - lo, K = (int)sc[ml_dc_arr(n, ML_DC_K) + lo];
  const int code = (int)sc[ml_dc_arr(n, ML_DC_COL) + c];
  for (int t = ctx.lane; t < len; t += ctx.group_size) u[t] = code == -1 - t ? 1.0f : 0.0f;
  ml_barrier_device(ctx);
  if (code >= 0) {
    ML_DEVICE const float *dk = sc + ml_dc_arr(n, ML_DC_DK) + lo;
    ML_DEVICE const float *zh = sc + ml_dc_arr(n, ML_DC_ZH) + lo;
    ML_DEVICE const float *src = sc + ml_dc_arr(n, ML_DC_SRC) + lo;
    const float dorg = dk[(int)sc[ml_dc_arr(n, ML_DC_ORG) + lo + code]];
    const float tau = sc[ml_dc_arr(n, ML_DC_TAU) + lo + code];
    float ss = 0.0f;
    for (int j = ctx.lane; j < K; j += ctx.group_size) {
      const float v = zh[j] / ((dk[j] - dorg) - tau);
      ss += v * v;
    }
    const float nrm = ml_group_sum(ctx, ss, ctx.scratch);
    const float inv = nrm > 0.0f ? 1.0f / ml_sqrt(nrm) : 0.0f;
    for (int j = ctx.lane; j < K; j += ctx.group_size)
      u[(int)src[j]] = inv * (zh[j] / ((dk[j] - dorg) - tau));
    ml_barrier_device(ctx);
  }
  if (ctx.lane != 0) return;
  // U = G_1 ... G_m U~ for Q G_1 ... G_m, the deflation's rotations of Q's columns.
  ML_DEVICE const float *r0 = sc + ml_dc_arr(n, ML_DC_R0) + lo;
  ML_DEVICE const float *r1 = sc + ml_dc_arr(n, ML_DC_R1) + lo;
  ML_DEVICE const float *rc = sc + ml_dc_arr(n, ML_DC_RC) + lo;
  ML_DEVICE const float *rs = sc + ml_dc_arr(n, ML_DC_RS) + lo;
  for (int q = (int)sc[ml_dc_arr(n, ML_DC_NROT) + lo] - 1; q >= 0; --q) {
    const int i = (int)r0[q], j = (int)r1[q];
    const float x = u[i], y = u[j];
    u[i] = rc[q] * x - rs[q] * y;
    u[j] = rs[q] * x + rc[q] * y;
  }
}

// dc_out: groups batch x count: column il + j of Q (operand 1, n x n, ld n) into column j of
// Z (operand 2, ld[2]) and its value, scaled back, into w[j] (operand 3; none when its offset
// is negative). n; i[0] il; operands 0 scratch.
ML_FN void ml_step_dc_out(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int n = p.n, count = p.i[1];
  const ml_i64 b = ctx.group_id / count;
  const int j = (int)(ctx.group_id - b * count), c = p.i[0] + j;
  ML_DEVICE const float *sc = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE const float *q = ws + p.off[1] + b * p.stride[1] + (ml_i64)c * n;
  ML_DEVICE float *z = ws + p.off[2] + b * p.stride[2] + (ml_i64)j * p.ld[2];
  for (int i = ctx.lane; i < n; i += ctx.group_size) z[i] = q[i];
  if (ctx.lane == 0 && p.off[3] >= 0)
    ws[p.off[3] + b * p.stride[3] + j] = ml_ldexp(sc[ml_dc_arr(n, ML_DC_D) + c], (int)sc[6]);
}

#endif  // ML_KERNELS_TRIDIAG_DC_H
