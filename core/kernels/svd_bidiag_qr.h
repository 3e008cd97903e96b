// Thin SVD and singular values of one row-major m x n float32 matrix per group:
// Householder bidiagonalisation, then implicit-shift QR on the bidiagonal (Golub-Kahan
// step; Demmel-Kahan zero-shift sweep when the shift is negligible, which keeps small
// singular values accurate). Wide matrices are handled as their transpose.
// QR phase: lane 0 (the driver) runs the O(n) scalar steps and records each step's rotations
// as two chains (U, V) in one of two buffers; after one barrier the workers (lanes 32.. for
// group sizes >= 64, else lanes 1.., else lane 0) apply step t from one buffer while the driver
// computes step t+1 into the other. Each worker owns fixed elements of every vector, so the
// rotations need no barrier; within a chain the shared vector is carried in a register.
// Where V (N x N) lives:
//  - flag ML_K_SVD_V_SHARED: in shared scratch (odd stride, lane-owned rows), copied to the
//    output once at the end (needs ml_svd_bidiag_qr_scratch_floats_flags);
//  - otherwise in the output buffer that ends up holding it (vt tall / u wide), each worker
//    owning fixed rows for the whole kernel, so no device-memory barrier is needed. This is
//    the fallback for shapes whose shared V does not fit (slow: global read-modify-writes).
#ifndef ML_KERNELS_SVD_BIDIAG_QR_H
#define ML_KERNELS_SVD_BIDIAG_QR_H

#include "bisect.h"
#include "householder.h"

// Working problem: M x N with M = max(m, n) >= N = min(m, n), column-major, odd stride.
// Scratch of the device-V mode (and of svdvals).
ML_HOST_FN int ml_svd_bidiag_qr_scratch_floats(int m, int n) {
  int big = m > n ? m : n, k = m < n ? m : n;
  // matrix + dot buffer (big) + d, e, tauq, taup (4k) + rotation buffers (8k) + red + control
  return ml_shared_ld(big) * k + big + 12 * k + ML_RED_FLOATS + 4;
}
// Scratch for p.flags = flags (ML_K_SVD_V_SHARED adds V, k x odd stride, at the end).
ML_HOST_FN int ml_svd_bidiag_qr_scratch_floats_flags(int m, int n, int flags) {
  int k = m < n ? m : n;
  int v = (flags & ML_K_SVD_V_SHARED) ? ml_shared_ld(k) * k : 0;
  return ml_svd_bidiag_qr_scratch_floats(m, n) + v;
}
ML_HOST_FN int ml_svd_bidiag_qr_fits(int m, int n, int scratch_floats) {
  return m >= 1 && n >= 1 && ml_svd_bidiag_qr_scratch_floats(m, n) <= scratch_floats;
}
ML_HOST_FN int ml_svd_bidiag_qr_fits_flags(int m, int n, int flags, int scratch_floats) {
  return m >= 1 && n >= 1 && ml_svd_bidiag_qr_scratch_floats_flags(m, n, flags) <= scratch_floats;
}
// flags | ML_K_SVD_V_SHARED when that mode fits budget_floats, else flags without it.
ML_HOST_FN int ml_svd_bidiag_qr_choose_flags(int m, int n, int flags, int budget_floats) {
  int f = flags & ~ML_K_SVD_V_SHARED;
  return ml_svd_bidiag_qr_fits_flags(m, n, f | ML_K_SVD_V_SHARED, budget_floats)
             ? (f | ML_K_SVD_V_SHARED)
             : f;
}
// Lanes mostly walk the long dimension (rows of the working matrix and of U); beyond 24
// one extra simdgroup whose lane 0 only drives the QR steps (the workers start at lane 32).
ML_HOST_FN int ml_svdvals_bidiag_qr_scratch_floats(int m, int n) {
  return ml_svd_bidiag_qr_scratch_floats(m, n);
}
ML_HOST_FN int ml_svdvals_bidiag_qr_scratch_floats_flags(int m, int n, int flags) {
  (void)flags;  // no vectors: the same for every flag
  return ml_svd_bidiag_qr_scratch_floats(m, n);
}
ML_HOST_FN int ml_svdvals_bidiag_qr_fits(int m, int n, int scratch_floats) {
  return ml_svd_bidiag_qr_fits(m, n, scratch_floats);
}
ML_HOST_FN int ml_svdvals_bidiag_qr_fits_flags(int m, int n, int /*flags*/, int scratch_floats) {
  return ml_svd_bidiag_qr_fits(m, n, scratch_floats);
}
ML_HOST_FN int ml_svdvals_bidiag_qr_choose_flags(int m, int n, int flags, int budget_floats) {
  (void)m;  // nothing to choose: no vectors
  (void)n;
  (void)budget_floats;
  return flags;
}
// ml_svdvals_bidiag_bisect: the scratch and shapes of ml_svdvals_bidiag_qr.
ML_HOST_FN int ml_svdvals_bidiag_bisect_scratch_floats_flags(int m, int n, int flags) {
  return ml_svdvals_bidiag_qr_scratch_floats_flags(m, n, flags);
}
ML_HOST_FN int ml_svdvals_bidiag_bisect_fits_flags(int m, int n, int flags, int scratch_floats) {
  return ml_svdvals_bidiag_qr_fits_flags(m, n, flags, scratch_floats);
}

// Givens rotation: c*f + s*g = r and -s*f + c*g = 0.
ML_FN void ml_svd_rot(float f, float g, ML_THREAD float *c, ML_THREAD float *s,
                      ML_THREAD float *r) {
  if (g == 0.0f) {
    *c = 1.0f;
    *s = 0.0f;
    *r = f;
  } else if (f == 0.0f) {
    *c = 0.0f;
    *s = 1.0f;
    *r = g;
  } else {
    // Direct sqrt while the squares are safely representable (the common case), else hypot.
    // (Tried: ml_rsqrt instead of sqrt + division, as the eigh chase does: 15% faster on the
    // H200 at n = 32..128, but the max residual grew ~7x at n = 128; kept the exact form.)
    const float t = f * f + g * g;
    const float rr = (t >= 1e-30f && t <= 1e30f) ? ml_sqrt(t) : ml_hypot(f, g);
    const float inv = 1.0f / rr;
    *c = f * inv;
    *s = g * inv;
    *r = rr;
  }
}

// Smaller singular value of the upper triangular [[f, g], [0, h]], overflow-free.
ML_FN float ml_svd_smin2(float f, float g, float h) {
  float fa = ml_fabs(f), ga = ml_fabs(g), ha = ml_fabs(h);
  float mn = ml_fmin(fa, ha), mx = ml_fmax(fa, ha);
  if (mn == 0.0f) return 0.0f;
  float big = ml_fmax(mx, ga);
  float p = (fa + ha) / big, q = (mx - mn) / big, gg = ga / big;
  float smax = 0.5f * big * (ml_sqrt(p * p + gg * gg) + ml_sqrt(q * q + gg * gg));
  return (mn / smax) * mx;  // smin * smax = |f h|
}

// A step's rotations form two chains (U, V). Header h (5 floats): count, kind, a0, da, b.
// Rotation r of the chain acts on vectors (a, b): vector a becomes c*a + s*b and vector b
// becomes c*b - s*a, with (c, s) = list[2r], list[2r + 1] and
//   kind 0 (sweep): a = a0 + r, b = a0 + r + 1 (b of rotation r is a of rotation r + 1);
//   kind 1 (chase): a = a0 + r*da, b fixed (b is rotated by every rotation).
ML_FN void ml_svd_chain_hdr(ML_SHARED float *h, int count, int kind, int a0, int da, int b) {
  h[0] = (float)count;
  h[1] = (float)kind;
  h[2] = (float)a0;
  h[3] = (float)da;
  h[4] = (float)b;
}

ML_FN void ml_svd_push(ML_SHARED float *list, int t, float c, float s) {
  list[2 * t] = c;
  list[2 * t + 1] = s;
}

// e[i] is negligible (deflation test).
ML_FN int ml_svd_negligible(ML_SHARED const float *d, ML_SHARED const float *e, int i,
                            float thresh) {
  const float ae = ml_fabs(e[i]);
  return ae <= thresh || ae <= ML_FLT_ULP * (ml_fabs(d[i]) + ml_fabs(d[i + 1]));
}

// One step of the bidiagonal iteration on d[0..k), e[0..k-1) (one lane only): deflate
// negligible e, then chase out a negligible diagonal entry of the bottom unreduced block,
// or run one QR sweep on it. Rotations: U chain header hu, list lu; V chain hv, lv (see
// ml_svd_chain_hdr). Returns 0 when B is diagonal, 1 after a sweep, 2 after a chase.
// *top: bottom of the unconverged part (k - 1 before the first step; below it every e is 0).
// The deflation test runs only from *top down to the first negligible e (as LAPACK's
// sbdsqr): a step changes only its block, so an e above it is tested later on the same values.
ML_FN int ml_svd_bd_step(ML_SHARED float *d, ML_SHARED float *e, int k, float thresh,
                         ML_THREAD int *top, ML_SHARED float *hu, ML_SHARED float *lu,
                         ML_SHARED float *hv, ML_SHARED float *lv) {
  ml_svd_chain_hdr(hu, 0, 0, 0, 0, 0);
  ml_svd_chain_hdr(hv, 0, 0, 0, 0, 0);
  int hi = *top < k - 1 ? *top : k - 1;
  while (hi > 0 && ml_svd_negligible(d, e, hi - 1, thresh)) {
    e[hi - 1] = 0.0f;
    --hi;
  }
  *top = hi;
  if (hi == 0) return 0;
  int lo = hi - 1;
  while (lo > 0) {
    if (ml_svd_negligible(d, e, lo - 1, thresh)) {
      e[lo - 1] = 0.0f;
      break;
    }
    --lo;
  }
  float c, s, r;
  for (int i = lo; i <= hi; ++i) {
    if (ml_fabs(d[i]) > thresh) continue;
    d[i] = 0.0f;
    if (i < hi) {
      // Row i is zero but for e[i]: rotate it into the rows below (acts on U).
      float f = e[i];
      e[i] = 0.0f;
      for (int j = i + 1; j <= hi; ++j) {
        ml_svd_rot(d[j], f, &c, &s, &r);
        d[j] = r;
        ml_svd_push(lu, j - i - 1, c, s);
        if (j < hi) {
          f = -s * e[j];
          e[j] = c * e[j];
        }
      }
      ml_svd_chain_hdr(hu, hi - i, 1, i + 1, 1, i);
    } else {
      // Column hi is zero but for e[hi-1]: rotate it into the columns left (acts on V).
      float f = e[hi - 1];
      e[hi - 1] = 0.0f;
      for (int j = hi - 1; j >= lo; --j) {
        ml_svd_rot(d[j], f, &c, &s, &r);
        d[j] = r;
        ml_svd_push(lv, hi - 1 - j, c, s);
        if (j > lo) {
          f = -s * e[j - 1];
          e[j - 1] = c * e[j - 1];
        }
      }
      ml_svd_chain_hdr(hv, hi - lo, 1, hi - 1, -1, hi);
    }
    return 2;
  }
  // Shift: the smaller singular value of the trailing 2x2 (converges to the bottom).
  float shift = ml_svd_smin2(d[hi - 1], e[hi - 1], d[hi]);
  float ratio = shift / d[lo];
  if (ratio * ratio < ML_FLT_EPS) shift = 0.0f;
  if (shift == 0.0f) {
    float cs = 1.0f, sn = 0.0f, oldcs = 1.0f, oldsn = 0.0f;
    for (int i = lo; i < hi; ++i) {
      ml_svd_rot(d[i] * cs, e[i], &cs, &sn, &r);
      if (i > lo) e[i - 1] = oldsn * r;
      float dn;
      ml_svd_rot(oldcs * r, d[i + 1] * sn, &oldcs, &oldsn, &dn);
      d[i] = dn;
      ml_svd_push(lv, i - lo, cs, sn);
      ml_svd_push(lu, i - lo, oldcs, oldsn);
    }
    float h = d[hi] * cs;
    d[hi] = h * oldcs;
    e[hi - 1] = h * oldsn;
  } else {
    // d[i], e[i] are carried in registers (no shared store-to-load chain); same arithmetic
    // as storing them (the intermediate e[i] is always overwritten, so it is not stored).
    float di = d[lo], ei = e[lo];
    float f = (ml_fabs(di) - shift) * (ml_copysign(1.0f, di) + shift / di);
    float g = ei;
    float cl, sl;
    for (int i = lo; i < hi; ++i) {
      const float di1 = d[i + 1];
      const float ei1 = i + 1 < hi ? e[i + 1] : 0.0f;
      ml_svd_rot(f, g, &c, &s, &r);
      if (i > lo) e[i - 1] = r;
      f = c * di + s * ei;
      const float et = c * ei - s * di;
      g = s * di1;
      float dt = c * di1;
      ml_svd_push(lv, i - lo, c, s);
      ml_svd_rot(f, g, &cl, &sl, &r);
      d[i] = r;
      f = cl * et + sl * dt;
      dt = cl * dt - sl * et;
      if (i + 1 < hi) {
        g = sl * ei1;
        ei = cl * ei1;
      }
      di = dt;
      ml_svd_push(lu, i - lo, cl, sl);
    }
    d[hi] = di;
    e[hi - 1] = f;
  }
  ml_svd_chain_hdr(hu, hi - lo, 0, lo, 1, lo + 1);
  ml_svd_chain_hdr(hv, hi - lo, 0, lo, 1, lo + 1);
  return 1;
}

// Runs ml_svd_bd_step once (lane 0) into buffer header h (h[0] = command, h + 1 the U chain,
// h + 6 the V chain), counting sweeps; -1 once the cap is reached.
ML_FN int ml_svd_bd_next(ML_SHARED float *d, ML_SHARED float *e, int k, float thresh,
                         ML_THREAD int *top, ML_SHARED float *h, ML_SHARED float *lu,
                         ML_SHARED float *lv, ML_THREAD int *sweeps, int max_sweeps) {
  int cmd = -1;
  if (*sweeps >= max_sweeps) {
    ml_svd_chain_hdr(h + 1, 0, 0, 0, 0, 0);
    ml_svd_chain_hdr(h + 6, 0, 0, 0, 0, 0);
  } else {
    cmd = ml_svd_bd_step(d, e, k, thresh, top, h + 1, lu, h + 6, lv);
    if (cmd == 1) *sweeps += 1;
  }
  h[0] = (float)cmd;
  return cmd;
}

// blk[c*ld + i] -= cv[c*cs] * rv[i] for c < cols, i < rows (shared memory). Lanes walk
// columns when there are enough rows, else the flattened block (stepping without divisions).
ML_FN void ml_svd_rank1(ML_CTX ctx, ML_SHARED float *blk, int ld, int rows, int cols,
                        ML_SHARED const float *cv, int cs, ML_SHARED const float *rv) {
  const int lane = ctx.lane, gs = ctx.group_size;
  if (gs <= rows) {
    for (int c = 0; c < cols; ++c) {
      const float k = cv[c * cs];
      ML_SHARED float *col = blk + c * ld;
      for (int i = lane; i < rows; i += gs) col[i] -= k * rv[i];
    }
    return;
  }
  const int dc = gs / rows, di = gs - dc * rows;
  for (int c = lane / rows, i = lane % rows; c < cols;) {
    blk[c * ld + i] -= cv[c * cs] * rv[i];
    i += di;
    c += dc;
    if (i >= rows) {
      i -= rows;
      ++c;
    }
  }
}

// blk <- (I - tau v v^T) blk for the rows x cols block (columns at blk + c*ld), v contiguous
// in shared memory. dots: cols floats. Ends without a barrier.
ML_FN void ml_svd_reflect_left(ML_CTX ctx, ML_SHARED const float *v, ML_SHARED float *blk,
                               int ld, int rows, int cols, float tau, ML_SHARED float *dots) {
  for (int c = ctx.lane; c < cols; c += ctx.group_size) {
    ML_SHARED const float *col = blk + c * ld;
    float acc = 0.0f;
    for (int i = 0; i < rows; ++i) acc += v[i] * col[i];
    dots[c] = tau * acc;
  }
  ml_barrier(ctx);
  ml_svd_rank1(ctx, blk, ld, rows, cols, dots, 1, v);
}

// blk <- blk (I - tau v v^T) with v[c*ld] (a row of W). dots: rows floats. Each lane
// accumulates the products of the rows it owns (lanes read contiguously). No end barrier.
ML_FN void ml_svd_reflect_right(ML_CTX ctx, ML_SHARED const float *v, ML_SHARED float *blk,
                                int ld, int rows, int cols, float tau, ML_SHARED float *dots) {
  for (int r = ctx.lane; r < rows; r += ctx.group_size) {
    float acc = 0.0f;  // in a register: no shared read-modify-write chain
    for (int c = 0; c < cols; ++c) acc += v[c * ld] * blk[c * ld + r];
    dots[r] = acc * tau;
  }
  ml_barrier(ctx);
  ml_svd_rank1(ctx, blk, ld, rows, cols, v, ld, dots);
}

// Applies one chain (header h, list l) to elements first, first + step, ... < len of the
// vectors, element i of vector j at base[i*rs + j*cs]; P is the pointer type (shared U and V:
// rs 1, cs the stride; V in device memory: the output's strides). The carried vector stays in a
// register and the next fresh element is loaded one rotation ahead, so only the FMAs are serial.
template <typename P>
ML_FN void ml_svd_chain(ML_SHARED const float *h, ML_SHARED const float *l, P base, int len,
                        int rs, int cs, int first, int step) {
  const int cnt = (int)h[0];
  if (cnt <= 0) return;
  const int kind = (int)h[1], a0 = (int)h[2], da = (int)h[3], b = (int)h[4];
  if (kind == 0) {
    for (int i = first; i < len; i += step) {
      P pa = base + i * rs + a0 * cs;
      float x = pa[0], y = pa[cs];
      for (int r = 0; r < cnt; ++r) {
        const float ynext = pa[(r + 2 <= cnt ? r + 2 : cnt) * cs];
        const float c = l[2 * r], s = l[2 * r + 1];
        pa[r * cs] = c * x + s * y;
        x = c * y - s * x;
        y = ynext;
      }
      pa[cnt * cs] = x;
    }
  } else {
    const int sa = da * cs;
    for (int i = first; i < len; i += step) {
      P pa = base + i * rs + a0 * cs;
      P pb = base + i * rs + b * cs;
      float y = pb[0], x = pa[0];
      for (int r = 0; r < cnt; ++r) {
        const float xnext = pa[(r + 1 < cnt ? r + 1 : r) * sa];
        const float c = l[2 * r], s = l[2 * r + 1];
        pa[r * sa] = c * x + s * y;
        y = c * y - s * x;
        x = xnext;
      }
      pb[0] = y;
    }
  }
}

// V = G_0 G_1 ... G_{N-3} (right reflectors, v_j in row j of w from column j+2 on), formed
// row by row: rows first, first + step, ... (element (i, c) at base[i*rs + c*cs]); P is the
// pointer type (V in shared or in device memory).
template <typename P>
ML_FN void ml_svd_form_v(P base, int rs, int cs, int N, ML_SHARED const float *w, int ld,
                         ML_SHARED const float *taup, int first, int step) {
  for (int i = first; i < N; i += step) {
    P row = base + i * rs;
    for (int c = 0; c < N; ++c) row[c * cs] = i == c ? 1.0f : 0.0f;
    for (int j = 0; j + 2 < N; ++j) {
      float tj = taup[j];
      if (tj == 0.0f) continue;
      float acc = row[(j + 1) * cs];
      for (int c = j + 2; c < N; ++c) acc += row[c * cs] * w[c * ld + j];
      acc *= tj;
      row[(j + 1) * cs] -= acc;
      for (int c = j + 2; c < N; ++c) row[c * cs] -= acc * w[c * ld + j];
    }
  }
}

// The singular values of the upper bidiagonal (d[0..N), e[0..N-1)) by bisection on its
// Golub-Kahan tridiagonal (bisect.h), singular value t (ascending) in lane t mod gs: no serial
// phase. Absolute accuracy: a few eps ||B||, as the QR sweeps (not their relative accuracy for
// tiny singular values of graded matrices). Writes s (descending, scaled back by 2^ex) and
// info: bits 16+ the most halvings any value took (0 when B is diagonal: s = |d| exactly),
// ML_INFO_RANK_DEFICIENT as the QR path decides it; at the cap (p.max_iter halvings, default
// ML_BISECT_DEFAULT_CAP, not reached by finite input) every s NaN and ML_INFO_NOT_CONVERGED.
// sv, perm: N shared floats each; red: ML_RED_FLOATS. Every lane must have d and e (after a
// barrier). (info before s: not the signature of a table kernel.)
ML_FN void ml_svd_bidiag_bisect_values(ML_CTX ctx, ML_PARAMS p, ML_SHARED const float *d,
                                       ML_SHARED const float *e, int N, int M, int ex,
                                       ML_SHARED float *sv, ML_SHARED float *perm,
                                       ML_SHARED float *red, ML_DEVICE int *info,
                                       ML_DEVICE float *s) {
  const int lane = ctx.lane, gs = ctx.group_size;
  // Gershgorin's bound for the Golub-Kahan matrix (off-diagonal d0, e0, d1, ..., d_{N-1}):
  // every row has two consecutive entries of that sequence.
  float hi = 0.0f, bmax = 0.0f, emax = 0.0f;
  for (int i = 0; i < N; ++i) {
    const float di = ml_fabs(d[i]);
    const float el = i > 0 ? ml_fabs(e[i - 1]) : 0.0f, er = i + 1 < N ? ml_fabs(e[i]) : 0.0f;
    hi = ml_fmax(hi, di + ml_fmax(el, er));
    bmax = ml_fmax(bmax, ml_fmax(di, er));
    emax = ml_fmax(emax, er);
  }
  const bool diagonal = emax == 0.0f;
  const float pivmin = ML_FLT_MIN * ml_fmax(1.0f, bmax * bmax);
  hi += 2.1f * (float)(2 * N) * ML_FLT_ULP * hi + 4.2f * pivmin;
  const float atol = ML_FLT_ULP * hi;
  const int cap = p.max_iter > 0 ? p.max_iter : ML_BISECT_DEFAULT_CAP;
  int most = 0, capped = 0;
  for (int t = lane; t < N; t += gs) {
    int steps = 0;
    const float x = diagonal ? ml_fabs(d[t])
                             : ml_bisect_one(d, e, N, 1, t, 0.0f, hi, atol, pivmin, cap, &steps);
    if (steps < 0) {
      capped = 1;
      steps = cap;
    }
    most = ml_imax(most, steps);
    sv[t] = x;
  }
  int iters = 0;
  const int hit = ml_bisect_outcome(ctx, most, capped, red, &iters);
  const int count = ml_imin(iters, 0xffff) << ML_INFO_SWEEPS_SHIFT;
  if (hit) {  // not converged: NaN outputs, as for non-finite input
    const float nan = ml_nan();
    for (int j = lane; j < N; j += gs) s[j] = nan;
    if (lane == 0 && info) info[ctx.group_id] = ML_INFO_NOT_CONVERGED | count;
    return;
  }
  // Descending order: lane j finds the rank of sv[j] (ties by index; the values are finite).
  for (int j = lane; j < N; j += gs) {
    const float x = sv[j];
    int rank = 0;
    for (int i = 0; i < N; ++i) rank += (sv[i] > x || (sv[i] == x && i < j)) ? 1 : 0;
    perm[rank] = (float)j;
  }
  ml_barrier(ctx);
  for (int j = lane; j < N; j += gs) s[j] = ml_ldexp(sv[(int)perm[j]], ex);
  if (lane == 0 && info) {
    const float smax = sv[(int)perm[0]], smin = sv[(int)perm[N - 1]];
    info[ctx.group_id] = (smin <= (float)M * ML_FLT_ULP * smax ? ML_INFO_RANK_DEFICIENT : 0) | count;
  }
}

// What ml_svd_bidiag_qr_run computes.
#define ML_SVDQR_VALUES 0     // s only, by the QR sweeps (u, vt unused)
#define ML_SVDQR_VECTORS 1    // u, s and vt
#define ML_SVDQR_BISECTION 2  // s only, by bisection on the bidiagonal (u, vt unused)

// Loads the working matrix, A (tall) or A^T (wide), column-major at w (column stride ld).
// Returns 1 (on every lane) when A has a non-finite entry; otherwise scales W exactly by
// 2^-*ex to max |a| in [1, 2) (no overflow, no harmful underflow) and ends with a barrier.
ML_FN int ml_svdqr_load(ML_CTX ctx, ML_DEVICE const float *a, int m, int n, ML_SHARED float *w,
                        int ld, ML_SHARED float *red, ML_THREAD int *ex) {
  const int lane = ctx.lane, gs = ctx.group_size, tall = m >= n;
  const int M = tall ? m : n, N = tall ? n : m;
  float amax = 0.0f, bad = 0.0f;
  const int di = gs / n, dj = gs - di * n;  // walk a's rows (i, j) without divisions
  for (int i = lane / n, j = lane % n; i < m;) {
    const float v = a[i * n + j];
    w[tall ? j * ld + i : i * ld + j] = v;
    if (ml_isfinite(v)) {
      amax = ml_fmax(amax, ml_fabs(v));
    } else {
      bad = 1.0f;
    }
    j += dj;
    i += di;
    if (j >= n) {
      j -= n;
      ++i;
    }
  }
  amax = ml_group_max(ctx, amax, red);
  bad = ml_group_max(ctx, bad, red + 32);
  if (bad != 0.0f) return 1;
  *ex = amax > 0.0f ? ml_ilogb(amax) : 0;
  if (*ex != 0) {
    for (int j = 0; j < N; ++j)
      for (int i = lane; i < M; i += gs) w[j * ld + i] = ml_ldexp(w[j * ld + i], -*ex);
  }
  ml_barrier(ctx);
  return 0;
}

// Householder bidiagonalisation W = Q B P^T of the M x N working matrix: B's diagonal in d,
// its superdiagonal in e, the reflectors' taus in tauq (left) and taup (right). The reflector
// vectors stay in W with their unit first entry stored explicitly. Ends with a barrier.
ML_FN void ml_svdqr_bidiagonalise(ML_CTX ctx, ML_SHARED float *w, int ld, int M, int N,
                                  ML_SHARED float *dots, ML_SHARED float *d, ML_SHARED float *e,
                                  ML_SHARED float *tauq, ML_SHARED float *taup,
                                  ML_SHARED float *red) {
  const int lane = ctx.lane, gs = ctx.group_size;
  for (int j = 0; j < N; ++j) {
    ML_SHARED float *x = w + j * ld;
    ml_house_t h;
    ml_house(ctx, x[j], x + j + 1, 1, M - j - 1, red, &h);
    if (h.tau != 0.0f) {
      for (int i = j + 1 + lane; i < M; i += gs) x[i] *= h.scale;
      if (lane == 0) x[j] = 1.0f;
      ml_barrier(ctx);
      ml_svd_reflect_left(ctx, x + j, w + (j + 1) * ld + j, ld, M - j, N - j - 1, h.tau, dots);
    }
    if (lane == 0) {
      d[j] = h.beta;
      tauq[j] = h.tau;
    }
    ml_barrier(ctx);
    if (j + 1 >= N) break;
    // Right reflector on row j, columns j+1.. (elements w[c*ld + j]).
    ML_SHARED float *y = w + (j + 1) * ld + j;  // y[c*ld], c < N-j-1
    float taur = 0.0f, betar = y[0];
    if (j + 2 < N) {
      ml_house_t hr;
      ml_house(ctx, betar, y + ld, ld, N - j - 2, red, &hr);
      taur = hr.tau;
      betar = hr.beta;
      if (taur != 0.0f) {
        for (int c = 1 + lane; c < N - j - 1; c += gs) y[c * ld] *= hr.scale;
        if (lane == 0) y[0] = 1.0f;
        ml_barrier(ctx);
        ml_svd_reflect_right(ctx, y, w + (j + 1) * ld + j + 1, ld, M - j - 1, N - j - 1, taur,
                             dots);
      }
    }
    if (lane == 0) {
      e[j] = betar;
      taup[j] = taur;
    }
    ml_barrier(ctx);
  }
}

// Forms V from the right reflectors (in shared vs, stride ldv, when vshared, else at
// vbase[i*vrs + j*vcs] by the workers, each owning fixed rows) and U (M x N) in place of W.
// Ends with a barrier.
ML_FN void ml_svdqr_form_vectors(ML_CTX ctx, ML_SHARED float *w, int ld, int M, int N,
                                 ML_SHARED const float *tauq, ML_SHARED const float *taup,
                                 ML_SHARED float *dots, int vshared, ML_SHARED float *vs, int ldv,
                                 ML_DEVICE float *vbase, int vrs, int vcs, int worker,
                                 int workers) {
  const int lane = ctx.lane, gs = ctx.group_size;
  if (vshared) {
    ml_svd_form_v(vs, 1, ldv, N, w, ld, taup, lane, gs);
  } else if (worker >= 0) {
    ml_svd_form_v(vbase, vrs, vcs, N, w, ld, taup, worker, workers);
  }
  ml_barrier(ctx);
  // U (M x N) in place of W: H_0 ... H_{N-1} applied to I, backwards.
  for (int j = N - 1; j >= 0; --j) {
    ML_SHARED float *x = w + j * ld;
    const float tj = tauq[j];
    if (j + 1 < N && tj != 0.0f) {
      ml_svd_reflect_left(ctx, x + j, w + (j + 1) * ld + j, ld, M - j, N - j - 1, tj, dots);
      ml_barrier(ctx);
    }
    for (int i = lane; i < M; i += gs) x[i] = i < j ? 0.0f : (i == j ? 1.0f - tj : -tj * x[i]);
    ml_barrier(ctx);
  }
}

// Implicit QR on B (d, e) until it is diagonal or the sweep cap is reached; with vectors, the
// workers apply every step's rotations to U (W) and V (vs or vbase) while lane 0 computes the
// next step. bufs: the rotation buffers' lists (8N floats, from tauq on: tauq and taup are dead
// by then); their headers at red and red + 32. Returns the last step's command on lane 0 (< 0:
// the cap was reached), 0 on the other lanes; *sweeps: the sweeps lane 0 ran.
ML_FN int ml_svdqr_iterate(ML_CTX ctx, ML_PARAMS p, ML_SHARED float *w, int ld, int M, int N,
                           ML_SHARED float *d, ML_SHARED float *e, ML_SHARED float *bufs,
                           ML_SHARED float *red, int want_vectors, int vshared,
                           ML_SHARED float *vs, int ldv, ML_DEVICE float *vbase, int vrs, int vcs,
                           int worker, int workers, ML_THREAD int *sweeps) {
  const int lane = ctx.lane;
  // Deflation thresholds relative to max |B| (backward stable). Only lane 0 reads d and e
  // here: it starts changing them at once (other lanes reading them was a race).
  float bnorm = 0.0f;
  if (lane == 0) {
    for (int i = 0; i < N; ++i) {
      bnorm = ml_fmax(bnorm, ml_fabs(d[i]));
      if (i + 1 < N) bnorm = ml_fmax(bnorm, ml_fabs(e[i]));
    }
  }
  const float thresh = ML_FLT_ULP * bnorm;
  const int max_sweeps = p.max_iter > 0 ? p.max_iter : 30 * N + 30;
  int cmd = 0, top = N - 1;
  if (want_vectors) {
    // Step t goes to buffer t & 1; a buffer is rewritten (step t + 2) only after the barrier
    // of step t + 1, which every worker reaches after applying step t.
    for (int t = 0;; ++t) {
      ML_SHARED float *h = red + 32 * (t & 1);
      ML_SHARED float *lu = bufs + 4 * N * (t & 1);
      ML_SHARED float *lv = lu + 2 * N;
      if (lane == 0) cmd = ml_svd_bd_next(d, e, N, thresh, &top, h, lu, lv, sweeps, max_sweeps);
      ml_barrier(ctx);
      if (h[0] <= 0.0f) break;
      if (worker < 0) continue;
      ml_svd_chain(h + 1, lu, w, M, 1, ld, worker, workers);
      if (vshared) {
        ml_svd_chain(h + 6, lv, vs, N, 1, ldv, worker, workers);
      } else {
        ml_svd_chain(h + 6, lv, vbase, N, vrs, vcs, worker, workers);
      }
    }
  } else if (lane == 0) {
    do {
      cmd = ml_svd_bd_next(d, e, N, thresh, &top, red, bufs, bufs + 2 * N, sweeps, max_sweeps);
    } while (cmd > 0);
  }
  return cmd;
}

// Lane 0: signs (sg[j] = 1 when V's working column j changes sign; d becomes |d|), then
// descending order, as swaps sw[j] <-> j (selection sort) and as the permutation perm (output
// column j = working column perm[j]).
ML_FN void ml_svdqr_order(ML_SHARED float *d, int N, ML_SHARED float *perm, ML_SHARED float *sg,
                          ML_SHARED float *sw) {
  for (int j = 0; j < N; ++j) {
    sg[j] = d[j] < 0.0f ? 1.0f : 0.0f;
    d[j] = ml_fabs(d[j]);
    perm[j] = (float)j;
  }
  for (int j = 0; j + 1 < N; ++j) {
    int q = j;
    for (int t = j + 1; t < N; ++t)
      if (d[t] > d[q]) q = t;
    sw[j] = (float)q;
    if (q != j) {
      float tmp = d[j];
      d[j] = d[q];
      d[q] = tmp;
      tmp = perm[j];
      perm[j] = perm[q];
      perm[q] = tmp;
    }
  }
}

// Not converged: every output NaN, as for non-finite input. V in device memory keeps its row
// owners (no device-memory barrier since the workers last rotated it).
ML_FN void ml_svdqr_nan_capped(ML_CTX ctx, int tall, int M, int N, int want_vectors, int vshared,
                               ML_DEVICE float *u, ML_DEVICE float *s, ML_DEVICE float *vt,
                               ML_DEVICE float *vbase, int vrs, int vcs, int worker,
                               int workers) {
  const int lane = ctx.lane, gs = ctx.group_size;
  const float nan = ml_nan();
  for (int i = lane; i < N; i += gs) s[i] = nan;
  if (want_vectors) {
    ML_DEVICE float *other = tall ? u : vt;  // M x N elements either way
    for (int i = lane; i < M * N; i += gs) other[i] = nan;
    if (vshared) {
      for (int i = lane; i < N * N; i += gs) vbase[i] = nan;
    } else if (worker >= 0) {
      for (int i = worker; i < N; i += workers)
        for (int j = 0; j < N; ++j) vbase[i * vrs + j * vcs] = nan;
    }
  }
}

// The vectors to the output, signed (sg) and ordered (perm, sw as ml_svdqr_order left them):
// V from vs (vshared) or in place at vbase (each worker its rows), then the left vectors from W:
// u (m x N) for tall matrices, vt = U'^T (N x n) for wide ones.
ML_FN void ml_svdqr_store_vectors(ML_CTX ctx, int tall, ML_SHARED const float *w, int ld, int M,
                                  int N, ML_SHARED const float *perm, ML_SHARED const float *sg,
                                  ML_SHARED const float *sw, int vshared,
                                  ML_SHARED const float *vs, int ldv, ML_DEVICE float *u,
                                  ML_DEVICE float *vt, ML_DEVICE float *vbase, int vrs, int vcs,
                                  int worker, int workers) {
  const int lane = ctx.lane, gs = ctx.group_size;
  if (vshared) {
    // V to the output: vt (tall, row j = V column perm[j]) or u (wide, u = V permuted).
    const int di = gs / N, dj = gs - di * N;
    for (int i = lane / N, j = lane % N; i < N;) {
      // tall: vt[i*N + j] = V(j, perm[i]); wide: u[i*N + j] = V(i, perm[j])
      const int r = tall ? j : i, c = (int)perm[tall ? i : j];
      const float v = vs[c * ldv + r];
      vbase[i * N + j] = sg[c] != 0.0f ? -v : v;
      j += dj;
      i += di;
      if (j >= N) {
        j -= N;
        ++i;
      }
    }
  } else if (worker >= 0) {
    for (int i = worker; i < N; i += workers) {
      ML_DEVICE float *row = vbase + i * vrs;
      for (int j = 0; j < N; ++j)
        if (sg[j] != 0.0f) row[j * vcs] = -row[j * vcs];
      for (int j = 0; j + 1 < N; ++j) {
        const int q = (int)sw[j];
        if (q == j) continue;
        float tmp = row[j * vcs];
        row[j * vcs] = row[q * vcs];
        row[q * vcs] = tmp;
      }
    }
  }
  if (tall) {
    const int di = gs / N, dj = gs - di * N;
    for (int i = lane / N, j = lane % N; i < M;) {
      u[i * N + j] = w[(int)perm[j] * ld + i];
      j += dj;
      i += di;
      if (j >= N) {
        j -= N;
        ++i;
      }
    }
  } else {
    for (int j = 0; j < N; ++j) {
      ML_SHARED const float *col = w + (int)perm[j] * ld;
      for (int i = lane; i < M; i += gs) vt[j * M + i] = col[i];
    }
  }
}

// The decomposition of matrix ctx.group_id; mode: ML_SVDQR_VALUES, ML_SVDQR_VECTORS or
// ML_SVDQR_BISECTION (s only, by ml_svd_bidiag_bisect_values instead of the QR sweeps).
ML_FN void ml_svd_bidiag_qr_run(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a_all,
                                ML_DEVICE float *u_all, ML_DEVICE float *s_all,
                                ML_DEVICE float *vt_all, ML_DEVICE int *info, int mode) {
  if (ctx.group_id >= p.batch) return;
  const int want_vectors = mode == ML_SVDQR_VECTORS;
  const int m = p.m, n = p.n, lane = ctx.lane, gs = ctx.group_size;
  if (m < 1 || n < 1) {
    if (lane == 0 && info) info[ctx.group_id] = 0;
    return;
  }
  const int tall = m >= n;
  const int M = tall ? m : n, N = tall ? n : m, ld = ml_shared_ld(M);
  const ml_i64 g = ctx.group_id;
  ML_DEVICE const float *a = a_all + g * (ml_i64)m * n;
  ML_DEVICE float *s = s_all + g * (ml_i64)N;
  ML_DEVICE float *u = u_all;
  ML_DEVICE float *vt = vt_all;
  if (want_vectors) {
    u = u_all + g * (ml_i64)m * N;
    vt = vt_all + g * (ml_i64)N * n;
  }
  ML_SHARED float *w = ctx.scratch;  // column j of the working matrix at w + j*ld
  ML_SHARED float *dots = w + ld * N;
  ML_SHARED float *d = dots + M;
  ML_SHARED float *e = d + N;
  ML_SHARED float *tauq = e + N;
  ML_SHARED float *taup = tauq + N;
  // taup + N: 8N floats, then red (64), then 4 spare floats. QR phase: the two rotation
  // buffers' lists (4N each: U then V) from tauq on (tauq, taup are dead by then), their
  // headers at red and red + 32; afterwards the permutation at dots, signs and swaps at
  // tauq + 8N, the QR phase's outcome in the first spare float. Shared V (flag) after all of
  // that.
  ML_SHARED float *red = taup + 9 * N;
  ML_SHARED float *vs = red + ML_RED_FLOATS + 4;  // V(i, j) at vs[j*ldv + i] (shared-V mode)
  const int ldv = ml_shared_ld(N);
  const int vshared = want_vectors && (p.flags & ML_K_SVD_V_SHARED) != 0;

  int ex = 0;
  if (ml_svdqr_load(ctx, a, m, n, w, ld, red, &ex)) {
    float nan = ml_nan();
    for (int i = lane; i < N; i += gs) s[i] = nan;
    if (want_vectors) {
      for (int i = lane; i < m * N; i += gs) u[i] = nan;
      for (int i = lane; i < N * n; i += gs) vt[i] = nan;
    }
    if (lane == 0 && info) info[g] = ML_INFO_NONFINITE;
    return;
  }
  ml_svdqr_bidiagonalise(ctx, w, ld, M, N, dots, d, e, tauq, taup, red);
  if (mode == ML_SVDQR_BISECTION) {
    // tauq, taup and dots are dead without vectors: the values and the order go there.
    ml_svd_bidiag_bisect_values(ctx, p, d, e, N, M, ex, tauq, dots, red, info, s);
    return;
  }

  // QR-phase roles: lane 0 drives; the workers apply the rotations (and, for V in device
  // memory, own the same rows of V from its formation to the end).
  const int wfirst = gs >= 64 ? 32 : (gs > 1 ? 1 : 0);
  const int worker = lane - wfirst, workers = gs - wfirst;
  // V (N x N) in device mode: element (i, j) at vbase[i*vrs + j*vcs], in the output that ends
  // up holding it: vt = V^T for tall matrices, u = V for wide ones.
  ML_DEVICE float *vbase = tall ? vt : u;
  const int vrs = tall ? 1 : N, vcs = tall ? N : 1;
  if (want_vectors)
    ml_svdqr_form_vectors(ctx, w, ld, M, N, tauq, taup, dots, vshared, vs, ldv, vbase, vrs, vcs,
                          worker, workers);
  int sweeps = 0;
  const int cmd = ml_svdqr_iterate(ctx, p, w, ld, M, N, d, e, tauq, red, want_vectors, vshared,
                                   vs, ldv, vbase, vrs, vcs, worker, workers, &sweeps);

  // Signs and order (lane 0). The lists and headers of the last step are not touched (workers
  // may still be reading the last header).
  ML_SHARED float *perm = dots;
  ML_SHARED float *sg = tauq + 8 * N;  // 1: V's working column j changes sign
  ML_SHARED float *sw = sg + N;
  ML_SHARED float *capped = red + ML_RED_FLOATS;  // 1: the sweep cap was reached
  if (lane == 0) {
    capped[0] = cmd < 0 ? 1.0f : 0.0f;
    ml_svdqr_order(d, N, perm, sg, sw);
  }
  ml_barrier(ctx);
  if (capped[0] != 0.0f) {
    ml_svdqr_nan_capped(ctx, tall, M, N, want_vectors, vshared, u, s, vt, vbase, vrs, vcs, worker,
                        workers);
    if (lane == 0 && info)
      info[g] = ML_INFO_NOT_CONVERGED | (ml_imin(sweeps, 0xffff) << ML_INFO_SWEEPS_SHIFT);
    return;
  }
  if (want_vectors)
    ml_svdqr_store_vectors(ctx, tall, w, ld, M, N, perm, sg, sw, vshared, vs, ldv, u, vt, vbase,
                           vrs, vcs, worker, workers);
  for (int j = lane; j < N; j += gs) s[j] = ml_ldexp(d[j], ex);
  if (lane == 0 && info) {
    int flags = 0;  // converged (a capped matrix returned above)
    if (d[N - 1] <= (float)M * ML_FLT_ULP * d[0]) flags |= ML_INFO_RANK_DEFICIENT;
    info[g] = flags | (ml_imin(sweeps, 0xffff) << ML_INFO_SWEEPS_SHIFT);
  }
}

// Entry: u (m x k), s (k, descending, >= 0), vt (k x n), k = min(m, n). p.flags: only
// ML_K_SVD_V_SHARED is read (scratch: ml_svd_bidiag_qr_scratch_floats_flags); the other bits
// are ignored (full_matrices is only routed here for square matrices, where it is the same).
ML_FN void ml_svd_bidiag_qr(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                            ML_DEVICE float *u, ML_DEVICE float *s, ML_DEVICE float *vt,
                            ML_DEVICE int *info) {
  ml_svd_bidiag_qr_run(ctx, p, a, u, s, vt, info, ML_SVDQR_VECTORS);
}

// Entry: singular values only (no vectors are formed or rotated; p.flags ignored).
ML_FN void ml_svdvals_bidiag_qr(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                ML_DEVICE float *s, ML_DEVICE int *info) {
  ml_svd_bidiag_qr_run(ctx, p, a, s, s, s, info, ML_SVDQR_VALUES);
}

// Entry: singular values only, by bisection on the bidiagonal's Golub-Kahan form (every value
// in its own lane; no serial QR sweeps). p.flags ignored; scratch as ml_svdvals_bidiag_qr.
ML_FN void ml_svdvals_bidiag_bisect(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                    ML_DEVICE float *s, ML_DEVICE int *info) {
  ml_svd_bidiag_qr_run(ctx, p, a, s, s, s, info, ML_SVDQR_BISECTION);
}

#endif  // ML_KERNELS_SVD_BIDIAG_QR_H
