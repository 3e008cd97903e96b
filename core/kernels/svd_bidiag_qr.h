// Thin SVD and singular values of one row-major m x n float32 matrix per group:
// Householder bidiagonalisation, then implicit-shift QR on the bidiagonal (Golub-Kahan
// step; Demmel-Kahan zero-shift sweep when the shift is negligible, which keeps small
// singular values accurate). Wide matrices are handled as their transpose.
// Lane 0 runs the O(n) scalar sweep and publishes its rotations; every lane then applies
// them to the elements of the singular vectors it owns, so the rotations cost no barrier.
// The right vectors are accumulated in the output buffer itself (lane-owned rows, so no
// device-memory barrier is needed); shared scratch holds only the working matrix.
#ifndef ML_KERNELS_SVD_BIDIAG_QR_H
#define ML_KERNELS_SVD_BIDIAG_QR_H

#include "householder.h"

// Working problem: M x N with M = max(m, n) >= N = min(m, n), column-major, odd stride.
ML_HOST_FN int ml_svd_bidiag_qr_scratch_floats(int m, int n) {
  int big = m > n ? m : n, k = m < n ? m : n;
  // matrix + dot buffer (big) + d, e, tauq, taup (4k) + rotation lists (8k) + control
  return ml_shared_ld(big) * k + big + 12 * k + ML_RED_FLOATS + 4;
}
ML_HOST_FN int ml_svd_bidiag_qr_fits(int m, int n, int scratch_floats) {
  return m >= 1 && n >= 1 && ml_svd_bidiag_qr_scratch_floats(m, n) <= scratch_floats;
}
// Lanes mostly walk the long dimension (rows of the working matrix and of U).
ML_HOST_FN int ml_svd_bidiag_qr_group_size(int m, int n) {
  int big = m > n ? m : n;
  int g = (big + 31) / 32 * 32;
  return g < 32 ? 32 : (g > 256 ? 256 : g);
}
ML_HOST_FN int ml_svdvals_bidiag_qr_scratch_floats(int m, int n) {
  return ml_svd_bidiag_qr_scratch_floats(m, n);
}
ML_HOST_FN int ml_svdvals_bidiag_qr_fits(int m, int n, int scratch_floats) {
  return ml_svd_bidiag_qr_fits(m, n, scratch_floats);
}
ML_HOST_FN int ml_svdvals_bidiag_qr_group_size(int m, int n) {
  return ml_svd_bidiag_qr_group_size(m, n);
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

ML_FN void ml_svd_push(ML_SHARED float *list, ML_THREAD int *count, int a, int b, float c,
                       float s) {
  int t = *count;
  list[4 * t] = (float)a;
  list[4 * t + 1] = (float)b;
  list[4 * t + 2] = c;
  list[4 * t + 3] = s;
  *count = t + 1;
}

// One step of the bidiagonal iteration on d[0..k), e[0..k-1) (one lane only): deflate
// negligible e, then chase out a negligible diagonal entry of the bottom unreduced block,
// or run one QR sweep on it. Rotations go to rot_u / rot_v as (a, b, c, s): vector a
// becomes c*a + s*b and vector b becomes c*b - s*a. Returns 0 when B is diagonal,
// 1 after a sweep, 2 after a chase.
ML_FN int ml_svd_bd_step(ML_SHARED float *d, ML_SHARED float *e, int k, float thresh,
                         ML_SHARED float *rot_u, ML_SHARED float *rot_v, ML_THREAD int *nu,
                         ML_THREAD int *nv) {
  *nu = 0;
  *nv = 0;
  for (int i = 0; i + 1 < k; ++i) {
    float ae = ml_fabs(e[i]);
    if (ae <= thresh || ae <= ML_FLT_ULP * (ml_fabs(d[i]) + ml_fabs(d[i + 1]))) e[i] = 0.0f;
  }
  int hi = k - 1;
  while (hi > 0 && e[hi - 1] == 0.0f) --hi;
  if (hi == 0) return 0;
  int lo = hi - 1;
  while (lo > 0 && e[lo - 1] != 0.0f) --lo;
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
        ml_svd_push(rot_u, nu, j, i, c, s);
        if (j < hi) {
          f = -s * e[j];
          e[j] = c * e[j];
        }
      }
    } else {
      // Column hi is zero but for e[hi-1]: rotate it into the columns left (acts on V).
      float f = e[hi - 1];
      e[hi - 1] = 0.0f;
      for (int j = hi - 1; j >= lo; --j) {
        ml_svd_rot(d[j], f, &c, &s, &r);
        d[j] = r;
        ml_svd_push(rot_v, nv, j, hi, c, s);
        if (j > lo) {
          f = -s * e[j - 1];
          e[j - 1] = c * e[j - 1];
        }
      }
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
      ml_svd_push(rot_v, nv, i, i + 1, cs, sn);
      ml_svd_push(rot_u, nu, i, i + 1, oldcs, oldsn);
    }
    float h = d[hi] * cs;
    d[hi] = h * oldcs;
    e[hi - 1] = h * oldsn;
  } else {
    float dl = d[lo];
    float f = (ml_fabs(dl) - shift) * (ml_copysign(1.0f, dl) + shift / dl);
    float g = e[lo];
    float cl, sl;
    for (int i = lo; i < hi; ++i) {
      ml_svd_rot(f, g, &c, &s, &r);
      if (i > lo) e[i - 1] = r;
      f = c * d[i] + s * e[i];
      e[i] = c * e[i] - s * d[i];
      g = s * d[i + 1];
      d[i + 1] = c * d[i + 1];
      ml_svd_push(rot_v, nv, i, i + 1, c, s);
      ml_svd_rot(f, g, &cl, &sl, &r);
      d[i] = r;
      f = cl * e[i] + sl * d[i + 1];
      d[i + 1] = cl * d[i + 1] - sl * e[i];
      if (i + 1 < hi) {
        g = sl * e[i + 1];
        e[i + 1] = cl * e[i + 1];
      }
      ml_svd_push(rot_u, nu, i, i + 1, cl, sl);
    }
    e[hi - 1] = f;
  }
  return 1;
}

// Runs ml_svd_bd_step once (lane 0), counting sweeps; -1 once the cap is reached.
ML_FN int ml_svd_bd_next(ML_SHARED float *d, ML_SHARED float *e, int k, float thresh,
                         ML_SHARED float *rot_u, ML_SHARED float *rot_v, ML_THREAD int *nu,
                         ML_THREAD int *nv, ML_THREAD int *sweeps, int max_sweeps) {
  if (*sweeps >= max_sweeps) {
    *nu = 0;
    *nv = 0;
    return -1;
  }
  int cmd = ml_svd_bd_step(d, e, k, thresh, rot_u, rot_v, nu, nv);
  if (cmd == 1) *sweeps += 1;
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
// accumulates the row products it owns column by column (contiguous reads). No end barrier.
ML_FN void ml_svd_reflect_right(ML_CTX ctx, ML_SHARED const float *v, ML_SHARED float *blk,
                                int ld, int rows, int cols, float tau, ML_SHARED float *dots) {
  for (int r = ctx.lane; r < rows; r += ctx.group_size) dots[r] = 0.0f;
  for (int c = 0; c < cols; ++c) {
    const float k = v[c * ld];
    ML_SHARED const float *col = blk + c * ld;
    for (int r = ctx.lane; r < rows; r += ctx.group_size) dots[r] += k * col[r];
  }
  for (int r = ctx.lane; r < rows; r += ctx.group_size) dots[r] *= tau;
  ml_barrier(ctx);
  ml_svd_rank1(ctx, blk, ld, rows, cols, v, ld, dots);
}

// Applies a rotation list to the shared working matrix (vector j at base + j*ld). Each lane
// owns elements lane, lane + group_size, ... of every vector, so the rotations need no barrier.
ML_FN void ml_svd_rotate_shared(ML_CTX ctx, ML_SHARED const float *list, int count,
                                ML_SHARED float *base, int len, int ld) {
  for (int t = 0; t < count; ++t) {
    ML_SHARED float *va = base + (int)list[4 * t] * ld;
    ML_SHARED float *vb = base + (int)list[4 * t + 1] * ld;
    const float c = list[4 * t + 2], s = list[4 * t + 3];
    for (int i = ctx.lane; i < len; i += ctx.group_size) {
      const float x = va[i], y = vb[i];
      va[i] = c * x + s * y;
      vb[i] = c * y - s * x;
    }
  }
}

// Same for V in device memory: element i of vector j at base[i*rs + j*cs]; lane-owned rows.
ML_FN void ml_svd_rotate_device(ML_CTX ctx, ML_SHARED const float *list, int count,
                                ML_DEVICE float *base, int len, int rs, int cs) {
  for (int t = 0; t < count; ++t) {
    ML_DEVICE float *va = base + (int)list[4 * t] * cs;
    ML_DEVICE float *vb = base + (int)list[4 * t + 1] * cs;
    const float c = list[4 * t + 2], s = list[4 * t + 3];
    for (int i = ctx.lane; i < len; i += ctx.group_size) {
      const float x = va[i * rs], y = vb[i * rs];
      va[i * rs] = c * x + s * y;
      vb[i * rs] = c * y - s * x;
    }
  }
}

// The decomposition of matrix ctx.group_id. want_vectors = 0: only s (u, vt unused).
ML_FN void ml_svd_bidiag_qr_run(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a_all,
                                ML_DEVICE float *u_all, ML_DEVICE float *s_all,
                                ML_DEVICE float *vt_all, ML_DEVICE int *info, int want_vectors) {
  if (ctx.group_id >= p.batch) return;
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
  ML_SHARED float *rot_u = taup + N;
  ML_SHARED float *rot_v = rot_u + 4 * N;
  ML_SHARED float *red = rot_v + 4 * N;
  ML_SHARED float *ctrl = red + ML_RED_FLOATS;

  // Load: the working matrix is A (tall) or A^T (wide), column-major.
  float amax = 0.0f, bad = 0.0f;
  {
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
  }
  amax = ml_group_max(ctx, amax, red);
  bad = ml_group_max(ctx, bad, red + 32);
  if (bad != 0.0f) {
    float nan = ml_nan();
    for (int i = lane; i < N; i += gs) s[i] = nan;
    if (want_vectors) {
      for (int i = lane; i < m * N; i += gs) u[i] = nan;
      for (int i = lane; i < N * n; i += gs) vt[i] = nan;
    }
    if (lane == 0 && info) info[g] = ML_INFO_NONFINITE;
    return;
  }
  // Exact power-of-two scaling to max |a| in [1, 2): no overflow, no harmful underflow.
  const int ex = amax > 0.0f ? ml_ilogb(amax) : 0;
  if (ex != 0) {
    for (int j = 0; j < N; ++j)
      for (int i = lane; i < M; i += gs) w[j * ld + i] = ml_ldexp(w[j * ld + i], -ex);
  }
  ml_barrier(ctx);

  // Householder bidiagonalisation W = Q B P^T. The reflector vectors stay in W with their
  // unit first entry stored explicitly (the diagonal values live on in d and e).
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

  // V (N x N), element (i, j) at vbase[i*vrs + j*vcs], built in the output that ends up
  // holding it: vt = V^T for tall matrices, u = V for wide ones.
  ML_DEVICE float *vbase = tall ? vt : u;
  const int vrs = tall ? 1 : N, vcs = tall ? N : 1;
  if (want_vectors) {
    // V = G_0 G_1 ... G_{N-3}, applied to each lane's own rows from the right.
    for (int i = lane; i < N; i += gs) {
      ML_DEVICE float *row = vbase + i * vrs;
      for (int c = 0; c < N; ++c) row[c * vcs] = i == c ? 1.0f : 0.0f;
      for (int j = 0; j + 2 < N; ++j) {
        float tj = taup[j];
        if (tj == 0.0f) continue;
        float acc = row[(j + 1) * vcs];
        for (int c = j + 2; c < N; ++c) acc += row[c * vcs] * w[c * ld + j];
        acc *= tj;
        row[(j + 1) * vcs] -= acc;
        for (int c = j + 2; c < N; ++c) row[c * vcs] -= acc * w[c * ld + j];
      }
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

  // Implicit QR on B: deflation thresholds relative to max |B| (backward stable).
  float bnorm = 0.0f;
  for (int i = 0; i < N; ++i) {
    bnorm = ml_fmax(bnorm, ml_fabs(d[i]));
    if (i + 1 < N) bnorm = ml_fmax(bnorm, ml_fabs(e[i]));
  }
  const float thresh = ML_FLT_ULP * bnorm;
  const int max_sweeps = p.max_iter > 0 ? p.max_iter : 30 * N + 30;
  int sweeps = 0, nu = 0, nv = 0, cmd = 0;
  if (want_vectors) {
    for (;;) {
      if (lane == 0) {
        cmd = ml_svd_bd_next(d, e, N, thresh, rot_u, rot_v, &nu, &nv, &sweeps, max_sweeps);
        ctrl[0] = (float)cmd;
        ctrl[1] = (float)nu;
        ctrl[2] = (float)nv;
      }
      ml_barrier(ctx);
      cmd = (int)ctrl[0];
      if (cmd <= 0) break;
      ml_svd_rotate_shared(ctx, rot_u, (int)ctrl[1], w, M, ld);
      ml_svd_rotate_device(ctx, rot_v, (int)ctrl[2], vbase, N, vrs, vcs);
      ml_barrier(ctx);
    }
  } else if (lane == 0) {
    do {
      cmd = ml_svd_bd_next(d, e, N, thresh, rot_u, rot_v, &nu, &nv, &sweeps, max_sweeps);
    } while (cmd > 0);
  }

  // Signs into V, then descending order as a list of swaps (lane 0 decides).
  if (lane == 0) {
    for (int j = 0; j < N; ++j) {
      rot_u[j] = d[j] < 0.0f ? 1.0f : 0.0f;
      d[j] = ml_fabs(d[j]);
    }
    int nsw = 0;
    for (int j = 0; j + 1 < N; ++j) {
      int q = j;
      for (int t = j + 1; t < N; ++t)
        if (d[t] > d[q]) q = t;
      if (q != j) {
        float tmp = d[j];
        d[j] = d[q];
        d[q] = tmp;
        rot_v[2 * nsw] = (float)j;
        rot_v[2 * nsw + 1] = (float)q;
        ++nsw;
      }
    }
    ctrl[1] = (float)nsw;
    ctrl[3] = (float)cmd;
  }
  ml_barrier(ctx);
  if (want_vectors) {
    const int nsw = (int)ctrl[1];
    for (int i = lane; i < N; i += gs) {
      ML_DEVICE float *row = vbase + i * vrs;
      for (int j = 0; j < N; ++j)
        if (rot_u[j] != 0.0f) row[j * vcs] = -row[j * vcs];
      for (int t = 0; t < nsw; ++t) {
        int j = (int)rot_v[2 * t], q = (int)rot_v[2 * t + 1];
        float tmp = row[j * vcs];
        row[j * vcs] = row[q * vcs];
        row[q * vcs] = tmp;
      }
    }
    for (int i = lane; i < M; i += gs) {
      for (int t = 0; t < nsw; ++t) {
        int j = (int)rot_v[2 * t], q = (int)rot_v[2 * t + 1];
        float tmp = w[j * ld + i];
        w[j * ld + i] = w[q * ld + i];
        w[q * ld + i] = tmp;
      }
    }
    ml_barrier(ctx);
    // The left vectors: u (m x N) for tall matrices, vt = U'^T (N x n) for wide ones.
    if (tall) {
      const int di = gs / N, dj = gs - di * N;
      for (int i = lane / N, j = lane % N; i < M;) {
        u[i * N + j] = w[j * ld + i];
        j += dj;
        i += di;
        if (j >= N) {
          j -= N;
          ++i;
        }
      }
    } else {
      for (int j = 0; j < N; ++j)
        for (int i = lane; i < M; i += gs) vt[j * M + i] = w[j * ld + i];
    }
  }
  for (int j = lane; j < N; j += gs) s[j] = ml_ldexp(d[j], ex);
  if (lane == 0 && info) {
    int flags = (int)ctrl[3] < 0 ? ML_INFO_NOT_CONVERGED : 0;
    if (d[N - 1] <= (float)M * ML_FLT_ULP * d[0]) flags |= ML_INFO_RANK_DEFICIENT;
    info[g] = flags | (ml_imin(sweeps, 0xffff) << ML_INFO_SWEEPS_SHIFT);
  }
}

// Entry: u (m x k), s (k, descending, >= 0), vt (k x n), k = min(m, n); p.flags ignored
// (full_matrices is only routed here for square matrices, where it is the same).
ML_FN void ml_svd_bidiag_qr(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                            ML_DEVICE float *u, ML_DEVICE float *s, ML_DEVICE float *vt,
                            ML_DEVICE int *info) {
  ml_svd_bidiag_qr_run(ctx, p, a, u, s, vt, info, 1);
}

// Entry: singular values only (no vectors are formed or rotated).
ML_FN void ml_svdvals_bidiag_qr(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,
                                ML_DEVICE float *s, ML_DEVICE int *info) {
  ml_svd_bidiag_qr_run(ctx, p, a, s, s, s, info, 0);
}

#endif  // ML_KERNELS_SVD_BIDIAG_QR_H
