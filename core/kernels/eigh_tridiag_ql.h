// Symmetric eigendecomposition of one n x n matrix per group, in shared memory:
// Householder tridiagonalisation, explicit Q, then implicit QL with Wilkinson shifts (the
// tql2 scheme) with the rotations applied by all lanes. Eigenvalues ascending, eigenvectors
// as columns. ml_eigvalsh_tridiag_ql skips every vector step. ml_eigvalsh_tridiag_bisect:
// the same tridiagonalisation, then every eigenvalue by bisection in its own lane (bisect.h)
// instead of the serial QL chase.
// Only the triangle named by p.flags (ML_K_LOWER / ML_K_UPPER) is read. The matrix is scaled
// by a power of two (max |a| in [1, 2)) first and the eigenvalues scaled back.
// Layout: reflector k is stored in row k (upper part) and Q is built transposed (row c of
// the buffer = column c of Q), so every inner loop walks a contiguous row: conflict-free
// across lanes on GPUs (odd row stride) and vectorisable at group size 1.
#ifndef ML_KERNELS_EIGH_TRIDIAG_QL_H
#define ML_KERNELS_EIGH_TRIDIAG_QL_H

#include "bisect.h"
#include "householder.h"

// Scratch layout (floats): A n*ld | d n | e n | tau n | v n | w n | red 64 | rot 2 x (2n + 2)
ML_HOST_FN int ml_eigh_tridiag_ql_scratch_floats(int /*m*/, int n) {
  return n * ml_shared_ld(n) + 5 * n + ML_RED_FLOATS + 2 * (2 * n + 2);
}
ML_HOST_FN int ml_eigvalsh_tridiag_ql_scratch_floats(int /*m*/, int n) {
  return n * ml_shared_ld(n) + 5 * n + ML_RED_FLOATS;
}
ML_HOST_FN int ml_eigh_tridiag_ql_fits(int m, int n, int scratch_floats) {
  return m == n && n >= 1 && n <= 4096 && ml_eigh_tridiag_ql_scratch_floats(m, n) <= scratch_floats;
}
ML_HOST_FN int ml_eigvalsh_tridiag_ql_fits(int m, int n, int scratch_floats) {
  return m == n && n >= 1 && n <= 4096 &&
         ml_eigvalsh_tridiag_ql_scratch_floats(m, n) <= scratch_floats;
}
// Largest n that fits a scratch budget (85 / 87 for Metal's 32 KB, 235 / 237 for sm_90).
ML_HOST_FN int ml_eigh_tridiag_ql_max_n(int scratch_floats) {
  int n = 0;
  while (ml_eigh_tridiag_ql_fits(n + 1, n + 1, scratch_floats)) ++n;
  return n;
}
ML_HOST_FN int ml_eigvalsh_tridiag_ql_max_n(int scratch_floats) {
  int n = 0;
  while (ml_eigvalsh_tridiag_ql_fits(n + 1, n + 1, scratch_floats)) ++n;
  return n;
}
// The kernel-table forms (kernel_table.h): uplo does not change the scratch.
ML_HOST_FN int ml_eigh_tridiag_ql_scratch_floats_flags(int m, int n, int /*flags*/) {
  return ml_eigh_tridiag_ql_scratch_floats(m, n);
}
ML_HOST_FN int ml_eigh_tridiag_ql_fits_flags(int m, int n, int /*flags*/, int scratch_floats) {
  return ml_eigh_tridiag_ql_fits(m, n, scratch_floats);
}
ML_HOST_FN int ml_eigvalsh_tridiag_ql_scratch_floats_flags(int m, int n, int /*flags*/) {
  return ml_eigvalsh_tridiag_ql_scratch_floats(m, n);
}
ML_HOST_FN int ml_eigvalsh_tridiag_ql_fits_flags(int m, int n, int /*flags*/, int scratch_floats) {
  return ml_eigvalsh_tridiag_ql_fits(m, n, scratch_floats);
}
// ml_eigvalsh_tridiag_bisect: the scratch of ml_eigvalsh_tridiag_ql.
ML_HOST_FN int ml_eigvalsh_tridiag_bisect_scratch_floats(int m, int n) {
  return ml_eigvalsh_tridiag_ql_scratch_floats(m, n);
}
ML_HOST_FN int ml_eigvalsh_tridiag_bisect_fits(int m, int n, int scratch_floats) {
  return ml_eigvalsh_tridiag_ql_fits(m, n, scratch_floats);
}
// ml_eigh_tridiag_bisect: eigvalsh_tridiag_ql's scratch, then Z and W (n x ld each) and three
// n-float arrays.
ML_HOST_FN int ml_eigh_tridiag_bisect_scratch_floats(int m, int n) {
  return ml_eigvalsh_tridiag_ql_scratch_floats(m, n) + 2 * n * ml_shared_ld(n) + 3 * n;
}
ML_HOST_FN int ml_eigh_tridiag_bisect_fits(int m, int n, int scratch_floats) {
  return m == n && n >= 1 && n <= 4096 &&
         ml_eigh_tridiag_bisect_scratch_floats(m, n) <= scratch_floats;
}
// Largest n in a budget (50 for Metal's 32 KB, 137 for sm_90).
ML_HOST_FN int ml_eigh_tridiag_bisect_max_n(int scratch_floats) {
  int n = 0;
  while (ml_eigh_tridiag_bisect_fits(n + 1, n + 1, scratch_floats)) ++n;
  return n;
}
ML_HOST_FN int ml_eigh_tridiag_bisect_scratch_floats_flags(int m, int n, int /*flags*/) {
  return ml_eigh_tridiag_bisect_scratch_floats(m, n);
}
ML_HOST_FN int ml_eigh_tridiag_bisect_fits_flags(int m, int n, int /*flags*/, int scratch_floats) {
  return ml_eigh_tridiag_bisect_fits(m, n, scratch_floats);
}
ML_HOST_FN int ml_eigvalsh_tridiag_bisect_max_n(int scratch_floats) {
  return ml_eigvalsh_tridiag_ql_max_n(scratch_floats);
}
ML_HOST_FN int ml_eigvalsh_tridiag_bisect_scratch_floats_flags(int m, int n, int /*flags*/) {
  return ml_eigvalsh_tridiag_bisect_scratch_floats(m, n);
}
ML_HOST_FN int ml_eigvalsh_tridiag_bisect_fits_flags(int m, int n, int /*flags*/,
                                                     int scratch_floats) {
  return ml_eigvalsh_tridiag_bisect_fits(m, n, scratch_floats);
}

// First j >= l with a negligible e[j] (n - 1 if none), searched by all lanes of the calling
// simdgroup (simdgroup-uniform call; the same result on each). LAPACK's ssteqr test:
// |e|^2 <= eps^2 |d_j d_j+1| + safmin (relative, so graded matrices keep small eigenvalues).
ML_FN int ml_tql_split(ML_CTX ctx, ML_SHARED const float *d, ML_SHARED const float *e, int n,
                       int l) {
  const float eps2 = ML_FLT_EPS * ML_FLT_EPS;
  const int sl = ml_simd_lane(ctx), w = ml_simd_width(ctx);
  for (int j0 = l; j0 < n - 1; j0 += w) {
    const int j = j0 + sl;
    float cand = (float)(n - 1);
    if (j < n - 1) {
      const float t = ml_fabs(e[j]);
      if (t * t <= (eps2 * ml_fabs(d[j])) * ml_fabs(d[j + 1]) + ML_FLT_MIN) cand = (float)j;
    }
    const float first = ml_simd_min(ctx, cand);
    if (first < (float)(n - 1)) return (int)first;
  }
  return n - 1;
}

// One implicit QL sweep with a Wilkinson-type shift on the unreduced block l..m (m > l) of
// (d, e), e[i] coupling d[i] and d[i + 1]; one lane. Records the rotations in rot as (c, s)
// pairs for columns (m - 1 - r, m - r), r = 0, 1, ... (rot may be null); returns their count.
ML_FN int ml_tql_chase(ML_SHARED float *d, ML_SHARED float *e, int l, int m,
                       ML_SHARED float *rot) {
  float g = (d[l + 1] - d[l]) / (2.0f * e[l]);
  float r = ml_hypot(g, 1.0f);
  g = d[m] - d[l] + e[l] / (g + ml_copysign(r, g));
  float s = 1.0f, c = 1.0f, p = 0.0f;
  int cnt = 0;
  bool deflated = false;
  // This loop is the serial critical path of the kernel on GPUs. Every d[i], e[i] it reads
  // still holds its value from before the sweep, so they are carried in registers and the
  // next ones loaded ahead of this iteration's stores (the compiler cannot reorder loads
  // and stores to shared memory it cannot prove distinct).
  float dn = d[m];  // d[i + 1]
  float ei = e[m - 1], di = d[m - 1];
  for (int i = m - 1; i >= l; --i) {
    const float ei_next = i > l ? e[i - 1] : 0.0f;
    const float di_next = i > l ? d[i - 1] : 0.0f;
    const float f = s * ei, b = c * ei;
    // Rotation zeroing f against g. The matrix is scaled to max |a| ~ 1, so f^2 + g^2 is
    // normally in range: one reciprocal square root; hypot and a division otherwise.
    const float t2 = f * f + g * g;
    float inv;
    if (t2 >= ML_HOUSE_TINY && t2 <= ML_HOUSE_UP) {
      inv = ml_rsqrt(t2);
      r = t2 * inv;
    } else {
      r = ml_hypot(f, g);
      inv = r == 0.0f ? 0.0f : 1.0f / r;
    }
    e[i + 1] = r;
    if (r == 0.0f) {  // exact split: restart on the smaller block
      d[i + 1] = dn - p;
      e[m] = 0.0f;
      deflated = true;
      break;
    }
    s = f * inv;
    c = g * inv;
    g = dn - p;
    r = (di - g) * s + 2.0f * c * b;
    p = s * r;
    d[i + 1] = g + p;
    g = c * r - b;
    if (rot) {
      rot[2 * cnt] = c;
      rot[2 * cnt + 1] = s;
    }
    ++cnt;
    dn = di;
    ei = ei_next;
    di = di_next;
  }
  if (!deflated) {
    d[l] -= p;
    e[l] = g;
    e[m] = 0.0f;
  }
  return cnt;
}

// One QL iteration, run by every lane of simdgroup 0 (the split search is parallel, the
// chase serial on lane 0). Advances *lp past converged eigenvalues, then chases the first
// unreduced block; *top = its m - 1. Returns the rotation count (on lane 0; 0 on the
// others), -1 when all have converged, -2 at the iteration cap (same on every lane).
// Lane 0's writes to d and e must reach the other lanes (a barrier) before the next call.
ML_FN int ml_tql_step(ML_CTX ctx, ML_SHARED float *d, ML_SHARED float *e, int n,
                      ML_THREAD int *lp, ML_THREAD int *iters, int cap, ML_SHARED float *rot,
                      ML_THREAD int *top) {
  int l = *lp;
  while (l < n) {
    const int m = ml_tql_split(ctx, d, e, n, l);
    if (m == l) {
      ++l;
      continue;
    }
    *lp = l;
    if (*iters >= cap) return -2;
    *iters += 1;
    *top = m - 1;
    return ctx.lane == 0 ? ml_tql_chase(d, e, l, m, rot) : 0;
  }
  *lp = l;
  return -1;
}

// Loads the named triangle into both halves of A (scaled so max |a| is in [1, 2)) and
// reduces it to tridiagonal form (d, e): reflector k in row k (entries k+2..n-1, the leading
// 1 implicit), its factor in tau[k]. Returns the scaling exponent, or 1000 when non-finite.
ML_FN int ml_eigh_tridiagonalise(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *am,
                                 ML_SHARED float *A, int ld, ML_SHARED float *d,
                                 ML_SHARED float *e, ML_SHARED float *tau, ML_SHARED float *v,
                                 ML_SHARED float *w, ML_SHARED float *red) {
  const int n = p.n, lane = ctx.lane, gs = ctx.group_size;
  const bool lower = p.flags != ML_K_UPPER;
  // Coalesced load of the whole matrix; only the named triangle counts (the other one may
  // hold anything, NaN included) and is then mirrored over it.
  float amax = 0.0f;
  for (int t = lane; t < n * n; t += gs) {
    const int i = t / n, j = t - i * n;
    const float x = am[t];
    if (lower ? i >= j : i <= j) amax = ml_isfinite(x) ? ml_fmax(amax, ml_fabs(x)) : ml_inf();
    A[i * ld + j] = x;
  }
  amax = ml_group_max(ctx, amax, red);
  if (!ml_isfinite(amax)) return 1000;
  const int ex = amax > 0.0f ? ml_ilogb(amax) : 0;
  for (int t = lane; t < n * n; t += gs) {  // writes the unread triangle only
    const int i = t / n, j = t - i * n;
    if (lower ? i < j : i > j) A[i * ld + j] = ml_ldexp(A[j * ld + i], -ex);
  }
  ml_barrier(ctx);
  if (ex != 0) {
    for (int t = lane; t < n * n; t += gs) {  // then the read triangle, in place
      const int i = t / n, j = t - i * n;
      if (lower ? i >= j : i <= j) A[i * ld + j] = ml_ldexp(A[i * ld + j], -ex);
    }
    ml_barrier(ctx);
  }

  // Two barriers per column (ml_house, v, p.v, w and the update took one each before).
  // The sum of squares for the next reflector (row k + 1, which lane 0 updates itself) is
  // summed by lane 0 right after that update and published by the barrier that ends the
  // column; the product p = tau B v reads reflector k unscaled from row k (the scaling folded
  // into the dot product) while each lane stores its entries of the scaled v, so no barrier
  // separates the reflector from the product; the reduction of p.v publishes p and v; the
  // update uses B - v p^T - (p - tau (p.v) v) v^T, the same as B - v w^T - w v^T. Row k is
  // scaled in place during the update, when nothing reads it any more. sg[k & 1] holds the
  // sum for column k (red[40..41]: only ml_house's rare second sum reaches there, and a
  // barrier follows it). Every reduction into red is separated from the previous one's read
  // by a barrier (the end of the column at least), so one buffer suffices.
  ML_SHARED float *sg = red + 40;
  if (n >= 3) {
    float part = 0.0f;
    for (int i = 2 + lane; i < n; i += gs) part += A[i] * A[i];
    const float s0 = ml_group_sum(ctx, part, red);
    if (lane == 0) sg[0] = s0;
    ml_barrier(ctx);
  }
  for (int k = 0; k + 2 < n; ++k) {
    // Reflector from row k (= column k): alpha = A[k][k+1], x = A[k][k+2..].
    const int k1 = k + 1, cnt = n - k - 2;
    ML_SHARED float *rk = A + k * ld;
    const float sigma = sg[k & 1];
    ml_house_t h;
    float xs;  // v[i] = rk[i] * xs for i > k1
    if (sigma >= ML_HOUSE_TINY) {  // as ml_house without its reduction
      const float alpha = rk[k1];
      const float bs = -ml_copysign(ml_hypot(alpha, ml_sqrt(sigma)), alpha);
      h.tau = (bs - alpha) / bs;
      h.scale = 1.0f / (alpha - bs);
      h.beta = bs;
      xs = h.scale;
    } else {  // tiny or zero x (group-uniform): the rescaling path, v scaled in place
      ml_barrier(ctx);  // every lane has read sg and red before ml_house reuses red
      ml_house(ctx, rk[k1], rk + k + 2, 1, cnt, red, &h);
      if (h.tau != 0.0f)
        for (int i = k + 2 + lane; i < n; i += gs) rk[i] *= h.scale;
      ml_barrier(ctx);  // also: every lane has read red before lane 0 writes sg
      xs = 1.0f;
    }
    if (lane == 0) {
      d[k] = rk[k];
      e[k] = h.beta;
      tau[k] = h.tau;
    }
    if (h.tau == 0.0f) {  // H = I: row k1 is unchanged, lane 0 sums it for the next column
      if (lane == 0) sg[k1 & 1] = ml_dot(rk + ld + k1 + 2, rk + ld + k1 + 2, n - k1 - 2);
      ml_barrier(ctx);
      continue;
    }
    // B := H B H for the trailing block B (rows/cols k1..n-1), as B - v w^T - w v^T with
    // p = tau B v and w = p - (tau/2)(p.v) v.
    float part = 0.0f;
    for (int i = k1 + lane; i < n; i += gs) {
      ML_SHARED const float *ri = A + i * ld;
      const float pi = (ri[k1] + ml_dot(ri + k + 2, rk + k + 2, cnt) * xs) * h.tau;
      const float vi = i == k1 ? 1.0f : rk[i] * xs;
      w[i] = pi;
      v[i] = vi;
      part += pi * vi;
    }
    const float kk2 = h.tau * ml_group_sum(ctx, part, red);  // B2
    for (int i = k + 2 + lane; i < n; i += gs) rk[i] = v[i];
    for (int i = k1 + lane; i < n; i += gs) {
      ML_SHARED float *ri = A + i * ld;
      const float vi = v[i], wi = w[i] - kk2 * vi;
      for (int j = k1; j < n; ++j) ri[j] -= vi * w[j] + wi * v[j];
      if (i == k1) sg[k1 & 1] = ml_dot(ri + k1 + 2, ri + k1 + 2, n - k1 - 2);
    }
    ml_barrier(ctx);
  }
  if (lane == 0) {
    if (n >= 2) {
      d[n - 2] = A[(n - 2) * ld + n - 2];
      e[n - 2] = A[(n - 2) * ld + n - 1];
      tau[n - 2] = 0.0f;
    }
    d[n - 1] = A[(n - 1) * ld + n - 1];
    e[n - 1] = 0.0f;
  }
  ml_barrier(ctx);
  return ex;
}

// Writes NaN into every output of the matrix (vm may be null) and info_bits into info (may be
// null): for a non-finite matrix and for one that hit the iteration cap.
ML_FN void ml_eigh_nan_outputs(ML_CTX ctx, int n, ML_DEVICE float *wm, ML_DEVICE float *vm,
                               ML_DEVICE int *info, int info_bits) {
  const float qnan = ml_nan();
  for (int t = ctx.lane; t < n; t += ctx.group_size) wm[t] = qnan;
  if (vm)
    for (int t = ctx.lane; t < n * n; t += ctx.group_size) vm[t] = qnan;
  if (info && ctx.lane == 0) info[ctx.group_id] = info_bits;
}

// Ascending order: lane j finds the rank of d[j] (ties by index), so perm[rank] = j. NaN ranks
// last, so perm is a permutation whatever d holds (never an out-of-range index).
ML_FN void ml_eigh_rank(ML_CTX ctx, int n, ML_SHARED const float *d, ML_SHARED float *perm) {
  for (int j = ctx.lane; j < n; j += ctx.group_size) {
    const float x = ml_isnan(d[j]) ? ml_inf() : d[j];
    int rank = 0;
    for (int i = 0; i < n; ++i) {
      const float y = ml_isnan(d[i]) ? ml_inf() : d[i];
      rank += (y < x || (y == x && i < j)) ? 1 : 0;
    }
    perm[rank] = (float)j;
  }
}

ML_FN int ml_eigh_info(int iters, int status) {
  int it = iters < 0x7fff ? iters : 0x7fff;
  return (it << ML_INFO_SWEEPS_SHIFT) | (status == -2 ? ML_INFO_NOT_CONVERGED : 0);
}

// The shared layout every kernel of this file starts with (from ctx.scratch): A (n rows of
// stride ml_shared_ld(n)), d, e, tau, hv, hw (n floats each), red (ML_RED_FLOATS); a kernel's
// own buffers follow red.
struct ml_tql_shared {
  ML_SHARED float *A, *d, *e, *tau, *hv, *hw, *red;
};

// Lays out *sh and reduces matrix ctx.group_id of a to the tridiagonal (d, e)
// (ml_eigh_tridiagonalise). Returns its exponent ex; 1000 for a non-finite matrix, whose
// outputs wm and vm (0: none) are NaN then, with ML_INFO_NONFINITE.
ML_FN int ml_tql_start(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a, ML_DEVICE float *wm,
                       ML_DEVICE float *vm, ML_DEVICE int *info, ML_THREAD ml_tql_shared *sh) {
  const int n = p.n, ld = ml_shared_ld(n);
  sh->A = ctx.scratch;
  sh->d = sh->A + n * ld;
  sh->e = sh->d + n;
  sh->tau = sh->e + n;
  sh->hv = sh->tau + n;
  sh->hw = sh->hv + n;
  sh->red = sh->hw + n;
  const int ex = ml_eigh_tridiagonalise(ctx, p, a + ctx.group_id * (ml_i64)n * n, sh->A, ld,
                                        sh->d, sh->e, sh->tau, sh->hv, sh->hw, sh->red);
  if (ex == 1000) ml_eigh_nan_outputs(ctx, n, wm, vm, info, ML_INFO_NONFINITE);
  return ex;
}

// w: n eigenvalues ascending; v: n x n, eigenvector j in column j.
ML_FN void ml_eigh_tridiag_ql(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                              ML_DEVICE float *w, ML_DEVICE float *v, ML_DEVICE int *info) {
  if (ctx.group_id >= p.batch) return;
  const int n = p.n, lane = ctx.lane, gs = ctx.group_size, ld = ml_shared_ld(n);
  const ml_i64 g = ctx.group_id;
  ML_DEVICE float *wm = w + g * (ml_i64)n;
  ML_DEVICE float *vm = v + g * (ml_i64)n * n;
  ml_tql_shared sh;
  const int ex = ml_tql_start(ctx, p, a, wm, vm, info, &sh);
  if (ex == 1000) return;
  ML_SHARED float *A = sh.A, *d = sh.d, *e = sh.e, *tau = sh.tau, *hv = sh.hv;
  ML_SHARED float *red = sh.red;
  ML_SHARED float *rot0 = red + ML_RED_FLOATS;
  ML_SHARED float *rot1 = rot0 + 2 * n + 2;

  // Q = H_0 ... H_{n-3}, built transposed in place (Zt row c = Q column c), backwards. H_k
  // acts on indices k+1..; v_k sits in row k. Step k sets Zt row k+1 and the entry k+1 of
  // rows > k+1; an induction over the steps shows every entry read is already Q's, and v_k is
  // only overwritten at step k-1, after the barrier that ends step k.
  for (int k = n - 2; k >= 0; --k) {
    const int k1 = k + 1;
    const float tk = tau[k];
    ML_SHARED const float *vk = A + k * ld;
    for (int c = k1 + 1 + lane; c < n; c += gs) {
      ML_SHARED float *zc = A + c * ld;
      const float s = ml_dot(vk + k1 + 1, zc + k1 + 1, n - k1 - 1) * tk;  // Q[k1][c] is 0 here
      zc[k1] = -s;
      for (int i = k1 + 1; i < n; ++i) zc[i] -= vk[i] * s;
    }
    ML_SHARED float *z1 = A + k1 * ld;  // nobody else touches row k1 in this step
    for (int i = k1 + lane; i < n; i += gs) z1[i] = i == k1 ? 1.0f - tk : -tk * vk[i];
    ml_barrier(ctx);
  }
  for (int i = lane; i < n; i += gs) {  // Q's row and column 0 are e_0
    A[i * ld] = i == 0 ? 1.0f : 0.0f;
    A[i] = i == 0 ? 1.0f : 0.0f;
  }
  ml_barrier(ctx);

  // QL: simdgroup 0 drives the iterations (lane 0 chases, recording each sweep's rotations);
  // after a barrier the workers apply them to their entries of Q's columns while the driver
  // computes the next sweep into the other buffer (a buffer is rewritten only after the next
  // barrier). Workers are the simdgroups after the first when there are several (so the
  // serial chase does not share its simdgroup's issue slots with rotation work), else
  // lanes 1.., else lane 0.
  const int cap = p.max_iter > 0 ? p.max_iter : 30 * n;
  const int wfirst = gs >= 64 ? 32 : (gs > 1 ? 1 : 0);
  const int worker = lane - wfirst, workers = gs - wfirst;
  const bool driver = ml_simd_id(ctx) == 0;
  int l = 0, iters = 0, status = 0, top = 0, outcome = 0;
  for (int t = 0;; ++t) {
    ML_SHARED float *rot = (t & 1) ? rot1 : rot0;
    if (driver) {
      status = ml_tql_step(ctx, d, e, n, &l, &iters, cap, rot + 2, &top);
      if (lane == 0) {
        rot[0] = (float)status;
        rot[1] = (float)top;
      }
    }
    ml_barrier(ctx);
    const int cnt = (int)rot[0];
    if (cnt < 0) {
      outcome = cnt;  // every lane: -1 converged, -2 iteration cap reached
      break;
    }
    if (worker < 0) continue;
    const int tp = (int)rot[1];
    for (int r = 0; r < cnt; ++r) {
      ML_SHARED float *z0 = A + (tp - r) * ld;
      ML_SHARED float *z1 = z0 + ld;
      const float c = rot[2 + 2 * r], s = rot[3 + 2 * r];
      for (int i = worker; i < n; i += workers) {
        const float f = z1[i];
        z1[i] = s * z0[i] + c * f;
        z0[i] = c * z0[i] - s * f;
      }
    }
  }

  if (outcome == -2) {  // not converged: NaN outputs, as for non-finite input
    ml_eigh_nan_outputs(ctx, n, wm, vm, info, ml_eigh_info(iters, status));
    return;
  }
  ML_SHARED float *perm = hv;
  ml_eigh_rank(ctx, n, d, perm);
  ml_barrier(ctx);
  for (int j = lane; j < n; j += gs) wm[j] = ml_ldexp(d[(int)perm[j]], ex);
  for (int t = lane; t < n * n; t += gs) {
    const int i = t / n, j = t - i * n;
    vm[t] = A[(int)perm[j] * ld + i];
  }
  if (info && lane == 0) info[g] = ml_eigh_info(iters, status);
}

// w: n eigenvalues ascending. Same as ml_eigh_tridiag_ql without any vector work.
ML_FN void ml_eigvalsh_tridiag_ql(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                  ML_DEVICE float *w, ML_DEVICE int *info) {
  if (ctx.group_id >= p.batch) return;
  const int n = p.n, lane = ctx.lane, gs = ctx.group_size;
  const ml_i64 g = ctx.group_id;
  ML_DEVICE float *wm = w + g * (ml_i64)n;
  ml_tql_shared sh;
  const int ex = ml_tql_start(ctx, p, a, wm, 0, info, &sh);
  if (ex == 1000) return;
  ML_SHARED float *d = sh.d, *e = sh.e, *hv = sh.hv;
  ML_SHARED float *red = sh.red;
  // QL without vectors, driven by simdgroup 0 as in eigh; the barrier per iteration makes
  // lane 0's updates of (d, e) visible to the split search, the status word goes through
  // alternating slots of red.
  const int cap = p.max_iter > 0 ? p.max_iter : 30 * n;
  const bool driver = ml_simd_id(ctx) == 0;
  int l = 0, iters = 0, status = 0, top = 0;
  float outcome = 0.0f;
  for (int t = 0;; ++t) {
    if (driver) {
      status = ml_tql_step(ctx, d, e, n, &l, &iters, cap, 0, &top);
      if (lane == 0) red[t & 1] = (float)status;
    }
    ml_barrier(ctx);
    outcome = red[t & 1];  // every lane: -1 converged, -2 iteration cap reached
    if (outcome < 0.0f) break;
  }
  if (outcome == -2.0f) {  // not converged: NaN outputs, as for non-finite input
    ml_eigh_nan_outputs(ctx, n, wm, 0, info, ml_eigh_info(iters, status));
    return;
  }
  ML_SHARED float *perm = hv;
  ml_eigh_rank(ctx, n, d, perm);
  ml_barrier(ctx);
  for (int j = lane; j < n; j += gs) wm[j] = ml_ldexp(d[(int)perm[j]], ex);
  if (info && lane == 0) info[g] = ml_eigh_info(iters, status);
}

// Every eigenvalue of the tridiagonal (d, e) of ml_eigh_tridiagonalise by bisection, lane j
// computing eigenvalues j, j + gs, ... into vals[j] (index order: ascending up to the overlap
// of close values' intervals). Gershgorin's interval, the pivot floor and whether T is diagonal
// are found by every lane on its own (n broadcast reads; the reduction's last barrier
// published d and e). *gnorm: g of bisect.h; *diagonal: every e is 0 (vals = d, exactly);
// *iters: the most halvings; returns 1 (on every lane) when some value hit the cap, p.max_iter
// halvings (default ML_BISECT_DEFAULT_CAP). One barrier, which also publishes vals.
ML_FN int ml_eigh_bisect_values(ML_CTX ctx, ML_PARAMS p, ML_SHARED const float *d,
                                ML_SHARED const float *e, int n, ML_SHARED float *vals,
                                ML_SHARED float *red, ML_THREAD int *iters,
                                ML_THREAD float *gnorm, ML_THREAD int *diagonal) {
  float lo = 0.0f, hi = 0.0f, emax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float el = i > 0 ? ml_fabs(e[i - 1]) : 0.0f, er = i + 1 < n ? ml_fabs(e[i]) : 0.0f;
    const float r = el + er;
    lo = i == 0 ? d[i] - r : ml_fmin(lo, d[i] - r);
    hi = i == 0 ? d[i] + r : ml_fmax(hi, d[i] + r);
    emax = ml_fmax(emax, er);
  }
  const int diag = emax == 0.0f ? 1 : 0;
  const float gn = ml_fmax(ml_fabs(lo), ml_fabs(hi));
  const float pivmin = ML_FLT_MIN * ml_fmax(1.0f, emax * emax);
  const float margin = 2.1f * (float)n * ML_FLT_ULP * gn + 4.2f * pivmin;
  lo -= margin;
  hi += margin;
  const float atol = ML_FLT_ULP * gn;
  const int cap = p.max_iter > 0 ? p.max_iter : ML_BISECT_DEFAULT_CAP;
  int most = 0, capped = 0;
  for (int j = ctx.lane; j < n; j += ctx.group_size) {
    int steps = 0;
    const float x = diag ? d[j] : ml_bisect_one(d, e, n, 0, j, lo, hi, atol, pivmin, cap, &steps);
    if (steps < 0) {
      capped = 1;
      steps = cap;
    }
    most = ml_imax(most, steps);
    vals[j] = x;
  }
  *gnorm = gn;
  *diagonal = diag;
  return ml_bisect_outcome(ctx, most, capped, red, iters);
}

// w: n eigenvalues ascending, by bisection (bisect.h) on the tridiagonal of
// ml_eigh_tridiagonalise: lane j computes eigenvalues j, j + gs, ... on its own, so the only
// barriers after the reduction are one reduction (the halving count and the cap) and the
// final sort. Bits 16+ of info: the most halvings any eigenvalue took (0 for a diagonal
// tridiagonal, whose eigenvalues are its diagonal, exactly; at most 25 otherwise). Cap:
// p.max_iter halvings per eigenvalue (default ML_BISECT_DEFAULT_CAP, not reached by finite
// input); an eigenvalue that needs more makes every output NaN with ML_INFO_NOT_CONVERGED.
// The values are not bitwise those of ml_eigh_tridiag_ql (the same accuracy: a few eps ||A||
// absolute; the tests measure both against a double reference).
ML_FN void ml_eigvalsh_tridiag_bisect(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                      ML_DEVICE float *w, ML_DEVICE int *info) {
  if (ctx.group_id >= p.batch) return;
  const int n = p.n, lane = ctx.lane, gs = ctx.group_size;
  const ml_i64 g = ctx.group_id;
  ML_DEVICE float *wm = w + g * (ml_i64)n;
  ml_tql_shared sh;
  const int ex = ml_tql_start(ctx, p, a, wm, 0, info, &sh);
  if (ex == 1000) return;
  ML_SHARED float *d = sh.d, *e = sh.e, *hv = sh.hv, *hw = sh.hw;
  ML_SHARED float *red = sh.red;
  ML_SHARED float *wv = hv;  // unsorted eigenvalues
  ML_SHARED float *perm = hw;
  int iters = 0, diagonal = 0;
  float gnorm = 0.0f;
  if (ml_eigh_bisect_values(ctx, p, d, e, n, wv, red, &iters, &gnorm, &diagonal)) {
    ml_eigh_nan_outputs(ctx, n, wm, 0, info, ml_eigh_info(iters, -2));  // not converged
    return;
  }
  // Ascending order (the intervals of equal or close eigenvalues overlap, so the midpoints
  // need not come out in index order).
  ml_eigh_rank(ctx, n, wv, perm);
  ml_barrier(ctx);
  for (int j = lane; j < n; j += gs) wm[j] = ml_ldexp(wv[(int)perm[j]], ex);
  if (info && lane == 0) info[g] = ml_eigh_info(iters, 0);
}

// Inverse-iteration solves per eigenvector (after one LDL^T factorisation per eigenvalue):
// values alone in their cluster, members of a cluster of two or more.
#define ML_EIGH_INVIT_ITERS 3
#define ML_EIGH_INVIT_CLUSTER_ITERS 4

// z / ||z||_2 (a zero z stays zero).
ML_FN void ml_invit_normalise(ML_SHARED float *z, int n) {
  const float nrm = ml_sqrt(ml_dot(z, z, n));
  const float sc = nrm > 0.0f ? 1.0f / nrm : 0.0f;
  for (int i = 0; i < n; ++i) z[i] *= sc;
}

// w: n eigenvalues ascending; v: n x n, eigenvector j in column j. Eigenvalues as
// ml_eigvalsh_tridiag_bisect (bitwise the same at the same group size); eigenvectors of the
// tridiagonal T by inverse iteration, lane j for eigenvalue j, then back-transformed by the
// Householder reflectors, each lane its own vectors: no serial chase and no per-rotation or
// per-reflector barriers. Inverse iteration as LAPACK's sstein: eigenvalues closer than
// max(1e-3, 0.1 / n) g (g as in bisect.h) form a cluster; within one, a value closer than
// 10 eps |x| to the previous one is moved to that distance, and after every solve the
// vectors of a cluster are orthonormalised in order (each projected off the earlier members,
// modified Gram-Schmidt; twice in the last iteration and once more after it), all vectors iterating
// at once (a barrier per member of the longest cluster and iteration; the A^T A of a random
// square A has clusters of tens of members at the small end of its spectrum). Each vector:
// one LDL^T factorisation of T - x I without pivoting (pivots kept at least eps g from zero;
// the factorisation is the tridiagonal Sturm recurrence, stable in the same sense), a hashed
// start vector, ML_EIGH_INVIT_ITERS solves (ML_EIGH_INVIT_CLUSTER_ITERS in clusters of two
// or more). Diagonal T: unit vectors.
// Scratch: ml_eigh_tridiag_bisect_scratch_floats (n <= 137 on sm_90, 50 on Metal). Info and
// cap as ml_eigvalsh_tridiag_bisect (v NaN too at the cap).
ML_FN void ml_eigh_tridiag_bisect(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                  ML_DEVICE float *w, ML_DEVICE float *v, ML_DEVICE int *info) {
  if (ctx.group_id >= p.batch) return;
  const int n = p.n, lane = ctx.lane, gs = ctx.group_size, ld = ml_shared_ld(n);
  const ml_i64 g = ctx.group_id;
  ML_DEVICE float *wm = w + g * (ml_i64)n;
  ML_DEVICE float *vm = v + g * (ml_i64)n * n;
  ml_tql_shared sh;
  const int ex = ml_tql_start(ctx, p, a, wm, vm, info, &sh);
  if (ex == 1000) return;
  ML_SHARED float *A = sh.A, *d = sh.d, *e = sh.e, *tau = sh.tau, *hv = sh.hv;
  ML_SHARED float *red = sh.red;
  ML_SHARED float *Z = red + ML_RED_FLOATS;  // row j: eigenvector j (of T, then of A)
  ML_SHARED float *W = Z + n * ld;           // row j: 1 / pivots of T - x_j I
  ML_SHARED float *ws = W + n * ld;          // sorted (and separated) shifts
  ML_SHARED float *cl = ws + n;              // first index of j's cluster
  ML_SHARED float *perm = cl + n;
  int iters = 0, diagonal = 0;
  float gnorm = 0.0f;
  if (ml_eigh_bisect_values(ctx, p, d, e, n, hv, red, &iters, &gnorm, &diagonal)) {
    ml_eigh_nan_outputs(ctx, n, wm, vm, info, ml_eigh_info(iters, -2));  // not converged
    return;
  }
  ml_eigh_rank(ctx, n, hv, perm);
  ml_barrier(ctx);

  // Clusters and shifts (lane 0, O(n)); the round count goes through red[32] (red[0..31] was
  // last read before the barrier above).
  // Vectors of eigenvalues further apart than ortol are not orthogonalised against each other:
  // their products are about eps g / gap, which |I - V^T V| / (n ulp) divides by n.
  const float ortol = ml_fmax(1e-3f, 0.1f / (float)n) * gnorm;
  if (lane == 0) {
    int start = 0, longest = 0;
    for (int j = 0; j < n; ++j) {
      float x = hv[(int)perm[j]];
      if (j > 0) {
        const float xm = ws[j - 1];
        if (x - xm > ortol) {
          start = j;
        } else {
          const float pert = 10.0f * ML_FLT_EPS * ml_fabs(x);
          if (x - xm < pert) x = xm + pert;
        }
      }
      ws[j] = x;
      cl[j] = (float)start;
      longest = ml_imax(longest, j - start);
    }
    red[32] = (float)(longest + 1);
  }
  ml_barrier(ctx);
  const int rounds = (int)red[32];

  // Vectors of T, all at once (a lane each): every iteration solves every vector, then
  // orthonormalises each cluster's members in order (member r projected off members 0..r-1,
  // then normalised), step s handling member s + 1 of every cluster, one barrier per step:
  // rounds - 1 steps of O(n / simdgroup width) per member instead of a serial chain of whole
  // inverse iterations per member. A member's solves then start from vectors projected off
  // earlier members that have not converged yet, so clusters take
  // ML_EIGH_INVIT_CLUSTER_ITERS iterations (values alone in their cluster
  // ML_EIGH_INVIT_ITERS); the projections are single in the first ones, twice in the last.
  const float pfloor = ml_fmax(ML_FLT_EPS * gnorm, ML_FLT_MIN);
  if (diagonal) {
    for (int j = lane; j < n; j += gs) {
      ML_SHARED float *z = Z + j * ld;
      const int src = (int)perm[j];
      for (int i = 0; i < n; ++i) z[i] = i == src ? 1.0f : 0.0f;
    }
  } else {
    for (int j = lane; j < n; j += gs) {
      ML_SHARED float *z = Z + j * ld;
      ML_SHARED float *dinv = W + j * ld;
      const float x = ws[j];
      float rinv = 0.0f;  // 1 / previous pivot
      for (int i = 0; i < n; ++i) {
        float piv = d[i] - x;
        if (i > 0) piv -= e[i - 1] * (e[i - 1] * rinv);
        if (ml_fabs(piv) < pfloor) piv = piv < 0.0f ? -pfloor : pfloor;
        rinv = 1.0f / piv;
        dinv[i] = rinv;
      }
      for (int i = 0; i < n; ++i) z[i] = ml_invit_start(j, i);
    }
    const int its = rounds > 1 ? ML_EIGH_INVIT_CLUSTER_ITERS : ML_EIGH_INVIT_ITERS;
    // One more orthonormalisation without a solve after the last iteration: Gram-Schmidt
    // applied twice over the whole cluster (a member's later projections and its
    // normalisation can bring back components along earlier members when much of it
    // cancels).
    for (int it = 0; it <= its; ++it) {
      if (it == its && rounds <= 1) break;
      for (int j = lane; j < n && it < its; j += gs) {
        const int c0 = (int)cl[j];
        const int alone = c0 == j && (j + 1 == n || (int)cl[j + 1] == j + 1);
        if (alone && it >= ML_EIGH_INVIT_ITERS) continue;
        ML_SHARED float *z = Z + j * ld;
        ML_SHARED const float *dinv = W + j * ld;
        // (L D L^T) z_new = z: forward with L, then D^-1, then back with L^T.
        float y = z[0];
        for (int i = 1; i < n; ++i) {
          y = z[i] - e[i - 1] * dinv[i - 1] * y;
          z[i] = y;
        }
        float xv = z[n - 1] * dinv[n - 1];
        z[n - 1] = xv;
        for (int i = n - 2; i >= 0; --i) {
          xv = (z[i] - e[i] * xv) * dinv[i];
          z[i] = xv;
        }
        float amax = 0.0f;
        for (int i = 0; i < n; ++i) amax = ml_fmax(amax, ml_fabs(z[i]));
        if (!(amax > 0.0f) || !ml_isfinite(amax)) {  // cannot happen with the pivot floor
          for (int i = 0; i < n; ++i) z[i] = i == j ? 1.0f : 0.0f;
        } else {
          const float sc = 1.0f / amax;
          for (int i = 0; i < n; ++i) z[i] *= sc;
        }
        if (j == c0) ml_invit_normalise(z, n);  // member 0: nothing to project off
      }
      if (rounds > 1) {
        // Each simdgroup takes members j = its id, + simdgroups, ... (a cluster's consecutive
        // members go to different simdgroups), its lanes splitting the entries of a product.
        ml_barrier(ctx);
        const int sl = ml_simd_lane(ctx), sw = ml_simd_width(ctx);
        const int sid = ml_simd_id(ctx), nsg = ml_simd_count(ctx);
        for (int s = 0; s + 1 < rounds; ++s) {
          for (int j = sid; j < n; j += nsg) {
            const int c0 = (int)cl[j], r = j - c0;
            if (r <= s) continue;
            ML_SHARED float *z = Z + j * ld;
            ML_SHARED const float *zq = Z + (c0 + s) * ld;
            for (int pass = it + 1 < its ? 1 : 0; pass < 2; ++pass) {
              float part = 0.0f;
              for (int i = sl; i < n; i += sw) part += z[i] * zq[i];
              const float dq = ml_simd_sum(ctx, part);
              for (int i = sl; i < n; i += sw) z[i] -= dq * zq[i];
            }
            if (r == s + 1) {
              float part = 0.0f;
              for (int i = sl; i < n; i += sw) part += z[i] * z[i];
              const float nrm = ml_sqrt(ml_simd_sum(ctx, part));
              const float sc = nrm > 0.0f ? 1.0f / nrm : 0.0f;
              for (int i = sl; i < n; i += sw) z[i] *= sc;
            }
          }
          ml_barrier(ctx);
        }
      }
    }
  }

  // Back-transformation v_j = H_0 (H_1 (... (H_{n-3} z_j))), each lane its own rows; the
  // reflector rows are read by every lane at once (broadcasts).
  for (int j = lane; j < n; j += gs) {
    ML_SHARED float *z = Z + j * ld;
    for (int k = n - 3; k >= 0; --k) {
      const float tk = tau[k];
      if (tk == 0.0f) continue;
      ML_SHARED const float *rk = A + k * ld;
      const float s = (z[k + 1] + ml_dot(rk + k + 2, z + k + 2, n - k - 2)) * tk;
      z[k + 1] -= s;
      for (int i = k + 2; i < n; ++i) z[i] -= s * rk[i];
    }
  }
  ml_barrier(ctx);
  for (int j = lane; j < n; j += gs) wm[j] = ml_ldexp(hv[(int)perm[j]], ex);
  for (int t = lane; t < n * n; t += gs) {
    const int i = t / n, j = t - i * n;
    vm[t] = Z[j * ld + i];
  }
  if (info && lane == 0) info[g] = ml_eigh_info(iters, 0);
}

#endif  // ML_KERNELS_EIGH_TRIDIAG_QL_H
