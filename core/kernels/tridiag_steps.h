// Symmetric tridiagonal eigensolver of the blocked algorithms (core/src/blocked_tridiag.cpp):
// eigenvalues il .. il + count - 1 (ascending) of T = (d, e) by bisection with Sturm counts
// (bisect.h), a lane per eigenvalue over many groups, and optionally their eigenvectors by
// inverse iteration, everything in device memory. Steps, in launch order:
//   tridiag_prep     a group per matrix: copies d, e into the scratch with negligible e zeroed
//                    (|e_i| <= 8 eps g: T splits into independent blocks), Gershgorin's interval,
//                    g = max |x| over it (>= ||T||_2), the pivot floor, the cluster tolerance;
//   tridiag_bisect   a lane per wanted eigenvalue (or up to 32 lanes doing multisection when
//                    the batch is small): bisection by index (the values come out in
//                    ascending order exactly, see ml_bisect_interval), then, with vectors, the
//                    block the value belongs to and its rank there (from the per-block Sturm
//                    counts at the ends of its final interval);
// with vectors also
//   tridiag_link     a lane per value: linked to the block's previous wanted value when closer
//                    than the cluster tolerance (clusters = maximal linked runs, as LAPACK's
//                    sstein: vectors of one cluster are orthogonalised against each other);
//   tridiag_zero     Z = 0 (a group per column);
//   tridiag_invit    a lane per value alone in its cluster: inverse iteration on its block
//                    (LU with partial pivoting of T - x I, ML_TRIDIAG_INVIT_ITERS solves from
//                    a hashed start vector);
//   tridiag_cluster  a group per cluster of two or more values (groups of other values
//                    return): rounds of a solve per member (a lane each) and a Gram-Schmidt
//                    of the members in order (twice) spread over the group.
// Scratch per matrix (floats, offsets below): header | ds n | es n | pos n | link n | bs c |
// be c | ps c | shift c | lu c * n (vectors only; row i of the value j at i * c + j).
// Work per lane (order n, c values): bisection about 26 Sturm counts of n steps (about 6 with
// 32-lane multisection), 3 more with vectors for the block; inverse iteration O(block size).
// A cluster of k values in a block of m rows: ML_TRIDIAG_CLUSTER_ITERS rounds of k solves
// (a lane each) and a Gram-Schmidt of about 2 k^2 m / group size per lane and 4 k barriers.
#ifndef ML_KERNELS_TRIDIAG_STEPS_H
#define ML_KERNELS_TRIDIAG_STEPS_H

#include "bisect.h"
#include "blocked_common.h"

// Header: lo, hi, g, pivmin, atol, ortol (of the copies scaled by 2^-ex), ex, unused.
#define ML_TRIDIAG_HDR 8
#define ML_TRIDIAG_INVIT_ITERS 3
// Rounds of a cluster (a solve per member at once, then a Gram-Schmidt of all in order): more
// than the solves of a value alone, because a member's first rounds run against earlier
// members that have not converged yet (6: glued Wilkinson matrices of order 1491 come out
// orthogonal to 0.4 n eps, 3 left 60 n eps).
#define ML_TRIDIAG_CLUSTER_ITERS 6
// Off-diagonals at most ML_TRIDIAG_SPLIT eps g count as 0 (T splits there): a perturbation of
// at most that much in norm (the entries are apart), below the other errors.
#define ML_TRIDIAG_SPLIT 8.0f

ML_HOST_FN ml_i64 ml_tridiag_off_ds(int n, int c) {
  (void)n, (void)c;
  return ML_TRIDIAG_HDR;
}
ML_HOST_FN ml_i64 ml_tridiag_off_es(int n, int c) { return ml_tridiag_off_ds(n, c) + n; }
ML_HOST_FN ml_i64 ml_tridiag_off_pos(int n, int c) { return ml_tridiag_off_es(n, c) + n; }
ML_HOST_FN ml_i64 ml_tridiag_off_link(int n, int c) { return ml_tridiag_off_pos(n, c) + n; }
ML_HOST_FN ml_i64 ml_tridiag_off_bs(int n, int c) { return ml_tridiag_off_link(n, c) + n; }
ML_HOST_FN ml_i64 ml_tridiag_off_be(int n, int c) { return ml_tridiag_off_bs(n, c) + c; }
ML_HOST_FN ml_i64 ml_tridiag_off_ps(int n, int c) { return ml_tridiag_off_be(n, c) + c; }
ML_HOST_FN ml_i64 ml_tridiag_off_shift(int n, int c) { return ml_tridiag_off_ps(n, c) + c; }
ML_HOST_FN ml_i64 ml_tridiag_off_lu(int n, int c) { return ml_tridiag_off_shift(n, c) + c; }
ML_HOST_FN ml_i64 ml_tridiag_scratch(int n, int c, int vectors) {
  return ml_tridiag_off_lu(n, c) + (vectors ? (ml_i64)c * n : 0);
}

// Cluster tolerance over g: LAPACK's 1e-3 (at least 0.1 / n) up to n = 256, 0.256 / n above,
// so that a random spectrum of order 8192 does not chain into one cluster. Vectors of values
// further apart than ortol are not orthogonalised; their products are about eps g / gap,
// at most about 2 n eps.
ML_HOST_FN float ml_tridiag_ortol(int n) {
  const float f = (float)n * 1e-3f;
  return (f < 0.1f ? 0.1f : f > 0.256f ? 0.256f : f) / (float)n;
}

// Marks the matrix's stat slot as not converged.
ML_FN void ml_tridiag_not_converged(ML_DEVICE float *st) {
  st[2] = (float)((int)st[2] | ML_INFO_NOT_CONVERGED);
}

// tridiag_prep: a group per matrix. n; operands 0 scratch, 1 d, 2 e (n - 1 entries).
ML_FN void ml_step_tridiag_prep(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 b = ctx.group_id;
  const int n = p.n, c = p.i[1], lane = ctx.lane, gs = ctx.group_size;
  ML_DEVICE float *sc = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE const float *d = ws + p.off[1] + b * p.stride[1];
  ML_DEVICE const float *e = ws + p.off[2] + b * p.stride[2];
  ML_DEVICE float *ds = sc + ml_tridiag_off_ds(n, c);
  ML_DEVICE float *es = sc + ml_tridiag_off_es(n, c);
  ML_DEVICE float *pos = sc + ml_tridiag_off_pos(n, c);
  ML_DEVICE float *link = sc + ml_tridiag_off_link(n, c);
  ML_SHARED float *red = ctx.scratch;
  float lo = ML_FLT_MAX, hi = -ML_FLT_MAX, emax = 0.0f;
  for (int i = lane; i < n; i += gs) {
    const float el = i > 0 ? ml_fabs(e[i - 1]) : 0.0f, er = i + 1 < n ? ml_fabs(e[i]) : 0.0f;
    lo = ml_fmin(lo, d[i] - (el + er));
    hi = ml_fmax(hi, d[i] + (el + er));
    emax = ml_fmax(emax, er);
    pos[i] = -1.0f;
    link[i] = 0.0f;
  }
  lo = -ml_group_max(ctx, -lo, red);
  hi = ml_group_max(ctx, hi, red + 32);
  ml_barrier(ctx);
  emax = ml_group_max(ctx, emax, red);
  // The copies are scaled by 2^-ex, g into [1, 2) (e_i^2 neither overflows nor underflows
  // harmfully in the Sturm counts); the values are scaled back.
  const float g0 = ml_fmax(ml_fabs(lo), ml_fabs(hi));
  const int ex = g0 > 0.0f ? ml_ilogb(g0) : 0;
  lo = ml_ldexp(lo, -ex);
  hi = ml_ldexp(hi, -ex);
  emax = ml_ldexp(emax, -ex);
  const float g = ml_ldexp(g0, -ex);
  const float tol = ML_TRIDIAG_SPLIT * ML_FLT_EPS * g;
  for (int i = lane; i < n; i += gs) {
    ds[i] = ml_ldexp(d[i], -ex);
    const float ei = i + 1 < n ? ml_ldexp(e[i], -ex) : 0.0f;
    es[i] = ml_fabs(ei) > tol ? ei : 0.0f;
  }
  if (lane == 0) {
    const float pivmin = ML_FLT_MIN * ml_fmax(1.0f, emax * emax);
    const float margin = 2.1f * (float)n * ML_FLT_ULP * g + 4.2f * pivmin;
    sc[0] = lo - margin;
    sc[1] = hi + margin;
    sc[2] = g;
    sc[3] = pivmin;
    sc[4] = ML_FLT_ULP * g;
    sc[5] = ml_tridiag_ortol(n) * g;
    sc[6] = (float)ex;
    sc[7] = 0.0f;
  }
}

// Finds the block of (ds, es) (blocks: split where es is 0) and the rank in it of the eigenvalue
// j of the interval (a, c] that bisection left (count(a) <= j < count(c)): the eigenvalues in
// (a, c] are ordered block by block, j - count(a) picks one. Lanes whose values share the
// interval get distinct (block, rank); intervals of different values are disjoint. *bs, *be:
// the block's first and last rows; returns the rank's row bs + rank, or -1 when the counts
// disagree (then the whole matrix is the block).
ML_FN int ml_tridiag_block_of(ML_DEVICE const float *ds, ML_DEVICE const float *es, int n, int j,
                              float a, float c, float pivmin, ML_THREAD int *bs,
                              ML_THREAD int *be) {
  const int t = j - ml_sturm_count(ds, es, n, a, pivmin);
  float qa = 1.0f, qc = 1.0f;
  int ca = 0, cc = 0, acc = 0, start = 0;
  for (int i = 0; i < n; ++i) {
    const float bi = i > 0 ? es[i - 1] : 0.0f;
    const float b2 = bi * bi;
    qa = (ds[i] - a) - b2 / qa;
    if (ml_fabs(qa) < pivmin) qa = -pivmin;
    ca += qa <= 0.0f ? 1 : 0;
    qc = (ds[i] - c) - b2 / qc;
    if (ml_fabs(qc) < pivmin) qc = -pivmin;
    cc += qc <= 0.0f ? 1 : 0;
    if (i + 1 == n || es[i] == 0.0f) {  // block start..i ends here
      const int diff = cc - ca;
      if (t >= acc && t < acc + diff) {
        *bs = start;
        *be = i;
        return start + ca + (t - acc);
      }
      acc += diff;
      ca = 0;
      cc = 0;
      start = i + 1;
    }
  }
  *bs = 0;
  *be = n - 1;
  return -1;
}

// Multisection by `sec` lanes (a power of two, <= 32, aligned within a simdgroup; sub: the
// lane's place among them) of [*lo, *hi] around eigenvalue j of (d, b), as ml_bisect_interval
// (same invariant, tolerance and cap, counted in steps) but each step evaluating sec points
// p_1 < ... < p_sec that split the interval into sec + 1 parts, one count per lane: the new
// interval is [p_(f-1), p_f] for the first point f with count > j (p_0 = lo, p_(sec+1) = hi),
// the same on the sec lanes. Values j < j' from the same interval share their steps until a
// point separates them, so their midpoints stay in index order. Simdgroup-uniform: every lane
// of the simdgroup calls (active = 0 for lanes without a value) and the loop runs until all its
// values are done.
ML_FN void ml_tridiag_multisect(ML_CTX ctx, ML_DEVICE const float *d, ML_DEVICE const float *b,
                                int n, int j, int active, int sec, int sub, ML_THREAD float *lo,
                                ML_THREAD float *hi, float atol, float pivmin, int cap,
                                ML_THREAD int *steps) {
  float a = *lo, c = *hi;
  int it = 0;
  bool done = active == 0;
  const float parts = (float)(sec + 1);
  for (;;) {
    if (!done) {
      const float mid = 0.5f * (a + c);
      const float width = ML_FLT_ULP * ml_fmax(ml_fabs(a), ml_fabs(c)) + atol;
      if (c - a <= width || mid <= a || mid >= c) {
        done = true;
      } else if (it >= cap) {
        done = true;
        it = -1;
      }
    }
    if (ml_simd_max(ctx, done ? 0.0f : 1.0f) == 0.0f) break;
    const float span = c - a;
    float first = (float)sec;
    if (!done) {
      const float pt = ml_fmin(c, a + span * ((float)(sub + 1) / parts));
      if (ml_sturm_count(d, b, n, pt, pivmin) > j) first = (float)sub;
    }
    for (int m = 1; m < sec; m <<= 1) first = ml_fmin(first, ml_simd_shuffle_xor(ctx, first, m));
    if (!done) {
      const int f = (int)first;
      const float na = f > 0 ? ml_fmin(c, a + span * ((float)f / parts)) : a;
      const float nc = f < sec ? ml_fmin(c, a + span * ((float)(f + 1) / parts)) : c;
      a = na;
      c = nc;
      ++it;
    }
  }
  *lo = a;
  *hi = c;
  *steps = it;
}

// tridiag_bisect: groups batch x ceil(count * i[2] / group size), i[2] lanes per value (1:
// bisection, ml_bisect_interval; 2..32, a power of two dividing the group size: multisection,
// ml_tridiag_multisect, for batches too small to fill the device a lane per value). n; i[0]
// il, i[1] count, i[3] vectors (block assignment too); operands 0 scratch, 1 w, 3 stat; p.k:
// the step cap (0: ML_BISECT_DEFAULT_CAP).
ML_FN void ml_step_tridiag_bisect(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int n = p.n, il = p.i[0], c = p.i[1], sec = p.i[2] > 1 ? p.i[2] : 1;
  const int vpg = ctx.group_size / sec;  // values per group
  const ml_i64 per = (c + vpg - 1) / vpg;
  const ml_i64 b = ctx.group_id / per;
  const int j = (int)(ctx.group_id - b * per) * vpg + ctx.lane / sec, sub = ctx.lane % sec;
  if (sec == 1 && j >= c) return;  // multisection: every lane of a simdgroup takes part
  ML_DEVICE float *sc = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE float *w = ws + p.off[1] + b * p.stride[1];
  ML_DEVICE float *st = ws + p.off[3] + b * p.stride[3];
  ML_DEVICE const float *ds = sc + ml_tridiag_off_ds(n, c);
  ML_DEVICE const float *es = sc + ml_tridiag_off_es(n, c);
  const float g = sc[2], pivmin = sc[3], atol = sc[4];
  const int jg = il + j;
  float lo = sc[0], hi = sc[1];
  int bs = jg, be = jg, ps = jg;
  if (g == 0.0f) {  // T = 0: every eigenvalue 0, every row a block
    if (j >= c || sub != 0) return;
    w[j] = 0.0f;
  } else {
    int steps = 0;
    const int cap = p.k > 0 ? p.k : ML_BISECT_DEFAULT_CAP;
    if (sec == 1) {
      ml_bisect_interval(ds, es, n, 0, jg, &lo, &hi, atol, pivmin, cap, &steps);
    } else {
      ml_tridiag_multisect(ctx, ds, es, n, jg, j < c ? 1 : 0, sec, sub, &lo, &hi, atol, pivmin,
                           cap, &steps);
    }
    if (j >= c || sub != 0) return;
    w[j] = ml_ldexp(0.5f * (lo + hi), (int)sc[6]);
    if (steps < 0) ml_tridiag_not_converged(st);
    if (p.i[3]) ps = ml_tridiag_block_of(ds, es, n, jg, lo, hi, pivmin, &bs, &be);
  }
  if (!p.i[3]) return;
  sc[ml_tridiag_off_bs(n, c) + j] = (float)bs;
  sc[ml_tridiag_off_be(n, c) + j] = (float)be;
  sc[ml_tridiag_off_ps(n, c) + j] = (float)ps;
  if (ps >= 0) sc[ml_tridiag_off_pos(n, c) + ps] = (float)j;
}

// The steps with a lane per value (groups batch x ceil(c / group size)): the lane's value j
// (returned; >= c: none) of matrix *b.
ML_FN int ml_tridiag_value_lane(ML_CTX ctx, int c, ML_THREAD ml_i64 *b) {
  const ml_i64 per = (c + ctx.group_size - 1) / ctx.group_size;
  *b = ctx.group_id / per;
  return (int)(ctx.group_id - *b * per) * ctx.group_size + ctx.lane;
}

// tridiag_link: groups as tridiag_bisect, a lane per value. n; i[1] count; operands 0 scratch,
// 1 w.
ML_FN void ml_step_tridiag_link(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int n = p.n, c = p.i[1];
  ml_i64 b = 0;
  const int j = ml_tridiag_value_lane(ctx, c, &b);
  if (j >= c) return;
  ML_DEVICE float *sc = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE const float *w = ws + p.off[1] + b * p.stride[1];
  const int bs = (int)sc[ml_tridiag_off_bs(n, c) + j];
  const int ps = (int)sc[ml_tridiag_off_ps(n, c) + j];
  if (ps <= bs) return;  // first of its block, or unassigned (-1)
  const int q = (int)sc[ml_tridiag_off_pos(n, c) + ps - 1];
  if (q >= 0 && ml_ldexp(w[j] - w[q], -(int)sc[6]) <= sc[5])
    sc[ml_tridiag_off_link(n, c) + ps] = 1.0f;
}

// tridiag_zero: groups batch x count, column j of Z (operand 2, n rows, ld[2]) set to 0.
ML_FN void ml_step_tridiag_zero(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 b = ctx.group_id / p.i[1];
  const int j = (int)(ctx.group_id - b * p.i[1]);
  ML_DEVICE float *z = ws + p.off[2] + b * p.stride[2] + (ml_i64)j * p.ld[2];
  for (int i = ctx.lane; i < p.n; i += ctx.group_size) z[i] = 0.0f;
}

// LU factorisation with partial pivoting of the block bs..be of T - x I (as LAPACK's slagtf),
// stored in one float per row: fa[(i - bs) * cs] = the diagonal entry of row i when step i
// reaches it. Everything else follows from it and (ds, es, x): step i swaps rows i and i + 1
// when |fa_i| < |e_i|; U's row i is then (e_i, d_i+1 - x, e_i+1), else (fa_i, b_i, 0) with b_i
// = e_i, or -(fa_i-1 / e_i-1) e_i after a swap at i - 1. Off-diagonals inside a block are
// nonzero (T splits at the zero ones), so no step divides by 0.
ML_FN void ml_tridiag_lu(ML_DEVICE const float *ds, ML_DEVICE const float *es, int bs, int be,
                         float x, ML_DEVICE float *fa, ml_i64 cs) {
  float ai = ds[bs] - x, bi = bs < be ? es[bs] : 0.0f;
  for (int i = bs; i < be; ++i) {
    fa[(i - bs) * cs] = ai;
    const float ci = es[i], an = ds[i + 1] - x, bn = i + 1 < be ? es[i + 1] : 0.0f;
    if (ml_fabs(ai) >= ml_fabs(ci)) {
      ai = an - (ci / ai) * bi;
      bi = bn;
    } else {
      const float l = ai / ci;
      ai = bi - l * an;
      bi = -l * bn;
    }
  }
  fa[(be - bs) * cs] = ai;
}

// z (rows bs..be) = (T - x I)^-1 z with the factors of ml_tridiag_lu (pivots of U below pfloor
// in magnitude replaced by +-pfloor); returns max |z|.
ML_FN float ml_tridiag_solve(ML_DEVICE const float *ds, ML_DEVICE const float *es, int bs,
                             int be, float x, float pfloor, ML_DEVICE const float *fa, ml_i64 cs,
                             ML_DEVICE float *z) {
  float zi = z[bs];  // z[i] as the elimination left it
  for (int i = bs; i < be; ++i) {
    const float ai = fa[(i - bs) * cs], ci = es[i], zn = z[i + 1];
    if (ml_fabs(ai) >= ml_fabs(ci)) {
      z[i] = zi;
      zi = zn - (ci / ai) * zi;
    } else {
      z[i] = zn;
      zi = zi - (ai / ci) * zn;
    }
  }
  z[be] = zi;
  float x1 = 0.0f, x2 = 0.0f, amax = 0.0f;  // x_i+1, x_i+2
  for (int i = be; i >= bs; --i) {
    const float ai = fa[(i - bs) * cs];
    float u0, u1 = 0.0f, u2 = 0.0f;
    if (i < be && ml_fabs(ai) < ml_fabs(es[i])) {
      u0 = es[i];
      u1 = ds[i + 1] - x;
      u2 = i + 1 < be ? es[i + 1] : 0.0f;
    } else {
      u0 = ai;
      if (i < be) {
        u1 = es[i];
        if (i > bs) {
          const float ap = fa[(i - 1 - bs) * cs];
          if (ml_fabs(ap) < ml_fabs(es[i - 1])) u1 = -(ap / es[i - 1]) * es[i];
        }
      }
    }
    if (ml_fabs(u0) < pfloor) u0 = u0 < 0.0f ? -pfloor : pfloor;
    const float xi = (z[i] - u1 * x1 - u2 * x2) / u0;
    z[i] = xi;
    amax = ml_fmax(amax, ml_fabs(xi));
    x2 = x1;
    x1 = xi;
  }
  return amax;
}

// tridiag_invit: groups as tridiag_bisect, a lane per value alone in its cluster: inverse
// iteration (ML_TRIDIAG_INVIT_ITERS solves from a hashed start) on its block, into column j
// of Z (rows of the block; Z was zeroed). n; i[1] count; operands 0 scratch, 1 w, 2 Z (ld[2]).
ML_FN void ml_step_tridiag_invit(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int n = p.n, c = p.i[1];
  ml_i64 b = 0;
  const int j = ml_tridiag_value_lane(ctx, c, &b);
  if (j >= c) return;
  ML_DEVICE float *sc = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE const float *w = ws + p.off[1] + b * p.stride[1];
  ML_DEVICE float *z = ws + p.off[2] + b * p.stride[2] + (ml_i64)j * p.ld[2];
  ML_DEVICE const float *link = sc + ml_tridiag_off_link(n, c);
  const int bs = (int)sc[ml_tridiag_off_bs(n, c) + j];
  const int be = (int)sc[ml_tridiag_off_be(n, c) + j];
  const int ps = (int)sc[ml_tridiag_off_ps(n, c) + j];
  if (ps >= 0 && (link[ps] != 0.0f || (ps + 1 < n && link[ps + 1] != 0.0f))) return;
  if (bs == be) {
    z[bs] = 1.0f;
    return;
  }
  ML_DEVICE const float *ds = sc + ml_tridiag_off_ds(n, c);
  ML_DEVICE const float *es = sc + ml_tridiag_off_es(n, c);
  ML_DEVICE float *fa = sc + ml_tridiag_off_lu(n, c) + j;
  const float pfloor = ml_fmax(ML_FLT_EPS * sc[2], ML_FLT_MIN);
  const float x = ml_ldexp(w[j], -(int)sc[6]);
  ml_tridiag_lu(ds, es, bs, be, x, fa, c);
  for (int i = bs; i <= be; ++i) z[i] = ml_invit_start(j, i);
  for (int it = 0; it < ML_TRIDIAG_INVIT_ITERS; ++it) {
    const float amax = ml_tridiag_solve(ds, es, bs, be, x, pfloor, fa, c, z);
    const bool ok = amax > 0.0f && ml_isfinite(amax);  // the pivot floor keeps it so
    const float s = ok ? 1.0f / amax : 0.0f;
    const int unit = ps >= 0 ? ps : bs;  // fallback, not reached with the pivot floor
    for (int i = bs; i <= be; ++i) z[i] = ok ? z[i] * s : (i == unit ? 1.0f : 0.0f);
  }
  float nrm = 0.0f;
  for (int i = bs; i <= be; ++i) nrm += z[i] * z[i];
  const float s = 1.0f / ml_sqrt(nrm);
  for (int i = bs; i <= be; ++i) z[i] *= s;
}

// Shared floats of tridiag_cluster with a coefficient buffer of ch floats.
ML_HOST_FN int ml_tridiag_cluster_shared_floats(int ch) { return ML_RED_FLOATS + ch; }

// z (rows bs..be) -= sum of (z . Z_q) Z_q over the cluster's members q = 0..r-1 (columns
// pos[h + q] of Z), ch members at a time (coefficients by the simdgroups, the update by rows).
ML_FN void ml_tridiag_project(ML_CTX ctx, ML_DEVICE float *Z, int ldz,
                              ML_DEVICE const float *pos, int h, int r, int bs, int be,
                              ML_DEVICE float *z, ML_SHARED float *coef, int ch) {
  const int sl = ml_simd_lane(ctx), sw = ml_simd_width(ctx);
  const int sid = ml_simd_id(ctx), ns = ml_simd_count(ctx);
  for (int q0 = 0; q0 < r; q0 += ch) {
    const int q1 = ml_imin(r, q0 + ch);
    for (int q = q0 + sid; q < q1; q += ns) {
      ML_DEVICE const float *zq = Z + (ml_i64)pos[h + q] * ldz;
      float s = 0.0f;
      for (int i = bs + sl; i <= be; i += sw) s += z[i] * zq[i];
      s = ml_simd_sum(ctx, s);
      if (sl == 0) coef[q - q0] = s;
    }
    ml_barrier(ctx);
    for (int i = bs + ctx.lane; i <= be; i += ctx.group_size) {
      float v = z[i];
      for (int q = q0; q < q1; ++q) v -= coef[q - q0] * Z[(ml_i64)pos[h + q] * ldz + i];
      z[i] = v;
    }
    ml_barrier_device(ctx);
  }
}

// Member r of the cluster (column pos[h + r] of Z): projected off the members before it twice,
// then normalised (red: 32 floats for the norm's reduction). Ends with a device barrier.
ML_FN void ml_tridiag_orthonormalise(ML_CTX ctx, ML_DEVICE float *Z, int ldz,
                                     ML_DEVICE const float *pos, int h, int r, int bs, int be,
                                     ML_SHARED float *coef, int ch, ML_SHARED float *red) {
  ML_DEVICE float *z = Z + (ml_i64)pos[h + r] * ldz;
  ml_tridiag_project(ctx, Z, ldz, pos, h, r, bs, be, z, coef, ch);
  ml_tridiag_project(ctx, Z, ldz, pos, h, r, bs, be, z, coef, ch);
  float ss = 0.0f;
  for (int i = bs + ctx.lane; i <= be; i += ctx.group_size) ss += z[i] * z[i];
  const float nrm = ml_group_sum(ctx, ss, red);
  const float inv = nrm > 0.0f ? 1.0f / ml_sqrt(nrm) : 0.0f;
  for (int i = bs + ctx.lane; i <= be; i += ctx.group_size) z[i] *= inv;
  ml_barrier_device(ctx);
}

// One cluster of tridiag_cluster: value j0 at row h heads it.
ML_FN void ml_tridiag_cluster_one(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE float *sc,
                                  ML_DEVICE const float *w, ML_DEVICE float *Z, int ldz,
                                  ML_DEVICE const float *pos, ML_DEVICE const float *link,
                                  int j0, int h) {
  const int n = p.n, c = p.i[1], lane = ctx.lane, gs = ctx.group_size;
  const int bs = (int)sc[ml_tridiag_off_bs(n, c) + j0];
  const int be = (int)sc[ml_tridiag_off_be(n, c) + j0];
  int k = 2;
  while (h + k < n && link[h + k] != 0.0f) ++k;
  ML_DEVICE const float *ds = sc + ml_tridiag_off_ds(n, c);
  ML_DEVICE const float *es = sc + ml_tridiag_off_es(n, c);
  ML_DEVICE float *shift = sc + ml_tridiag_off_shift(n, c);
  const float pfloor = ml_fmax(ML_FLT_EPS * sc[2], ML_FLT_MIN);
  const int ex = (int)sc[6];
  ML_SHARED float *red = ctx.scratch;
  ML_SHARED float *coef = red + ML_RED_FLOATS;
  if (lane == 0) {
    float xprev = 0.0f;
    for (int r = 0; r < k; ++r) {
      const int j = (int)pos[h + r];
      float x = ml_ldexp(w[j], -ex);
      const float pert = 10.0f * ML_FLT_EPS * ml_fabs(x);
      if (r > 0 && x - xprev < pert) x = xprev + pert;
      shift[j] = x;
      xprev = x;
    }
  }
  ml_barrier_device(ctx);
  for (int it = 0; it < ML_TRIDIAG_CLUSTER_ITERS; ++it) {
    for (int r = lane; r < k; r += gs) {
      const int j = (int)pos[h + r];
      ML_DEVICE float *z = Z + (ml_i64)j * ldz;
      ML_DEVICE float *fa = sc + ml_tridiag_off_lu(n, c) + j;
      const float x = shift[j];
      if (it == 0) {
        ml_tridiag_lu(ds, es, bs, be, x, fa, c);
        for (int i = bs; i <= be; ++i) z[i] = ml_invit_start(j, i);
      }
      const float amax = ml_tridiag_solve(ds, es, bs, be, x, pfloor, fa, c, z);
      const bool ok = amax > 0.0f && ml_isfinite(amax);  // the pivot floor keeps it so
      const float s = ok ? 1.0f / amax : 0.0f;
      for (int i = bs; i <= be; ++i) z[i] = ok ? z[i] * s : ml_invit_start(j + c * (it + 1), i);
    }
    ml_barrier_device(ctx);
    for (int r = 0; r < k; ++r)
      ml_tridiag_orthonormalise(ctx, Z, ldz, pos, h, r, bs, be, coef, p.k, red + 32 * (r & 1));
  }
}

// tridiag_cluster: groups batch x ceil(count / i[2]); group g looks at values g i[2] ..
// g i[2] + i[2] - 1 and works on each that heads a cluster of two or more, one after another.
// Inverse iteration on all members at once: shifts kept at least 10 eps |x| apart (lane 0, as
// sstein), then ML_TRIDIAG_CLUSTER_ITERS rounds of one solve per member (a lane per member,
// from hashed starts) followed by a Gram-Schmidt of the members in ascending order, each
// against the earlier ones twice, spread over the group. n; i[1] count; p.k: the coefficient
// buffer (floats of shared memory past the 64 reduction floats); operands as tridiag_invit.
ML_FN void ml_step_tridiag_cluster(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int n = p.n, c = p.i[1], ldz = p.ld[2];
  const int vpg = p.i[2] > 0 ? p.i[2] : 1;
  const ml_i64 per = (c + vpg - 1) / vpg;
  const ml_i64 b = ctx.group_id / per;
  const int jb = (int)(ctx.group_id - b * per) * vpg;
  ML_DEVICE float *sc = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE const float *w = ws + p.off[1] + b * p.stride[1];
  ML_DEVICE float *Z = ws + p.off[2] + b * p.stride[2];
  ML_DEVICE const float *link = sc + ml_tridiag_off_link(n, c);
  ML_DEVICE const float *pos = sc + ml_tridiag_off_pos(n, c);
  for (int j0 = jb; j0 < jb + vpg && j0 < c; ++j0) {
    const int h = (int)sc[ml_tridiag_off_ps(n, c) + j0];
    if (h < 0 || link[h] != 0.0f || h + 1 >= n || link[h + 1] == 0.0f) continue;
    ml_tridiag_cluster_one(ctx, p, sc, w, Z, ldz, pos, link, j0, h);
  }
}

#endif  // ML_KERNELS_TRIDIAG_STEPS_H
