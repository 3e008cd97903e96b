// Blocked Householder bidiagonalisation (LAPACK's gebrd / labrd scheme) and the pieces of the
// SVD around it, the steps the host sequences (core/src/blocked_svd.cpp). The M x N problem
// (M >= N: the input, or its transpose for a wide input) becomes Q B P^T, B upper bidiagonal
// (d, e), Q = H_0 ... H_{N-1}, P = G_0 ... G_{N-3}. For each panel of jb columns starting at
// j, column c = j + i (i = 0 .. jb-1) takes three launches, each spread over blocks of rows or
// columns of every matrix:
//   brd_col   column c of the panel brought up to date (W(c:M, c) -= V Y(c, :)^T + X U(c, :)^T),
//             per group the partial sums the column reflector needs (|col|^2, V^T col, X^T col);
//   brd_row   every group forms the column reflector from the partials (the same arithmetic in
//             each group: bitwise the same result), writes its share of V(:, c), and for its
//             block of trailing columns q: Y(q, i) = tauq (A(c:M, q)^T v - ...), the updated
//             row c (A(c, q) - ...) and the partial sums of the row reflector;
//   brd_x     every group forms the row reflector, writes its share of U(:, c), and for its
//             block of 32 rows: X(r, i) = taup (A(r, c+1:N) u - V tmp3 - X tmp4);
// then the trailing matrix A22 -= V Y^T + X U^T with the GEMM step. The trailing matrix is read
// twice per column (brd_row along columns, brd_x along rows), coalesced in both.
// Reflectors are kept explicitly (for the products and the back-transformations, larft.h):
// V (M x N, column c: 0 above c, 1 at c, the reflector below), U (N x N, column c: 0 down to
// row c, 1 at c + 1, the reflector below).
//
// Workspace of matrix b: ws + b * stride[0] + offset; offsets: off[0] W (M x N, ld M), off[1] V,
// off[2] U (ld N), off[3] X (M x nb, ld M), ld[0] Y (N x nb, ld N), ld[1] the vector block
// (ML_BRD_* below, the stat slot first), ld[2] P1 and ld[3] P3 (partial sums, ML_BRD_PW(nb)
// floats per group). i[0] = c, i[1] = j, i[2] = nb, i[3] columns per group (brd_row);
// m = M, n = N; k = groups per matrix of the launch that wrote the partials being read.
#ifndef ML_KERNELS_GEBRD_BLOCKED_H
#define ML_KERNELS_GEBRD_BLOCKED_H

#include "blocked_common.h"
#include "householder.h"

// Floats per group of the partial sums: nb for V^T x / Y^T x, nb for X^T x / U^T x, |x|^2 and
// |x 2^60|^2 (the rescaled sum when the plain one underflows, ml_house_finish).
#define ML_BRD_PW(nb) (2 * (nb) + 2)
// The vector block: the stat slot (ML_STAT_FLOATS, padded to 32), then N floats each of
// tauq, taup, d, e, the updated row of the current column and the singular values.
#define ML_BRD_TAUQ 0
#define ML_BRD_TAUP 1
#define ML_BRD_D 2
#define ML_BRD_E 3
#define ML_BRD_ROW 4
#define ML_BRD_S 5
#define ML_BRD_VECS 6
ML_HOST_FN ml_i64 ml_brd_vec(int n, int which) { return 32 + (ml_i64)which * n; }

// Groups per matrix: brd_col (gs-row blocks of rows c..M-1), brd_row (cb-column blocks of
// columns c+1..N-1, at least 1), brd_x (32-row blocks of rows c+1..M-1, at least 1).
ML_HOST_FN int ml_brd_col_groups(int m, int c, int gs) { return (m - c + gs - 1) / gs; }
ML_HOST_FN int ml_brd_row_groups(int n, int c, int cb) {
  const int g = (n - c - 1 + cb - 1) / cb;
  return g > 1 ? g : 1;
}
ML_HOST_FN int ml_brd_x_groups(int m, int c) {
  const int g = (m - c - 1 + 31) / 32;
  return g > 1 ? g : 1;
}
// Shared floats of the three steps (gs lanes, panel width nb, cb columns per brd_row group);
// ml_brd_team_floats: the partial sums' teams (ml_brd_sum_partials).
ML_HOST_FN int ml_brd_team_floats(int nb, int gs) {
  return gs > ML_BRD_PW(nb) ? gs : ML_BRD_PW(nb);
}
ML_HOST_FN int ml_brd_col_shared(int nb, int gs) { return 2 * nb + gs; }
ML_HOST_FN int ml_brd_row_shared(int nb, int gs, int cb) {
  return ML_BRD_PW(nb) + 4 * nb + 1 + 2 * cb + ML_BRD_PW(nb) * ((gs + 31) / 32) +
         ml_brd_team_floats(nb, gs);
}
ML_HOST_FN int ml_brd_x_shared(int nb, int gs) {
  return ML_BRD_PW(nb) + 2 * nb + 1 + 32 * ((gs + 31) / 32) + ml_brd_team_floats(nb, gs);
}

// S[t] = sum over the k groups' partials P[g * pw + t], t < pw: the lanes split into
// gs / pw teams, team h summing groups h, h + teams, ... of every slot, then one lane per slot
// adds the teams' sums in order (every group of a launch gets bitwise the same sums). tmp:
// ml_brd_team_floats(nb, gs) floats of shared. Ends with a barrier.
ML_FN void ml_brd_sum_partials(ML_CTX ctx, ML_DEVICE const float *P, int k, int pw,
                               ML_SHARED float *S, ML_SHARED float *tmp) {
  const int gs = ctx.group_size, teams = gs / pw > 1 ? gs / pw : 1;
  for (int l = ctx.lane; l < teams * pw; l += gs) {
    const int h = l / pw, t = l - h * pw;
    float s = 0.0f;
    for (int g = h; g < k; g += teams) s += P[(ml_i64)g * pw + t];
    tmp[l] = s;
  }
  ml_barrier(ctx);
  for (int t = ctx.lane; t < pw; t += gs) {
    float s = 0.0f;
    for (int h = 0; h < teams; ++h) s += tmp[h * pw + t];
    S[t] = s;
  }
  ml_barrier(ctx);
}

// The reflector of [alpha; x] from the summed partials (S[2 nb] = |x|^2, S[2 nb + 1] =
// |x 2^60|^2).
ML_FN void ml_brd_house(float alpha, ML_SHARED const float *S, int nb, ML_THREAD ml_house_t *h) {
  float sigma = S[2 * nb], up = 1.0f;
  if (sigma < ML_HOUSE_TINY) {
    sigma = S[2 * nb + 1];
    up = ML_HOUSE_UP;
  }
  ml_house_finish(alpha, sigma, up, h);
}

// brd_col: groups batch x ml_brd_col_groups(M, c, gs), a row of c..M-1 per lane.
// W(r, c) -= sum_p V(r, j+p) Y(c, p) + X(r, p) U(c, j+p) (p < i), then the group's partial
// sums over its rows r > c into P1: V(r, j+p) x_r, X(r, p) x_r, x_r^2, (x_r 2^60)^2.
ML_FN void ml_step_brd_col(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int M = p.m, N = p.n, c = p.i[0], j = p.i[1], nb = p.i[2], ip = c - j;
  const int gs = ctx.group_size, lane = ctx.lane;
  const int G = ml_brd_col_groups(M, c, gs), pw = ML_BRD_PW(nb);
  const ml_i64 b = ctx.group_id / G;
  const int g = (int)(ctx.group_id - b * G);
  ML_DEVICE float *base = ws + b * p.stride[0];
  ML_DEVICE float *W = base + p.off[0];
  ML_DEVICE const float *V = base + p.off[1];
  ML_DEVICE const float *U = base + p.off[2];
  ML_DEVICE const float *X = base + p.off[3];
  ML_DEVICE const float *Y = base + p.ld[0];
  ML_DEVICE float *P1 = base + p.ld[2];
  ML_SHARED float *yc = ctx.scratch;    // Y(c, 0:i)
  ML_SHARED float *uc = yc + nb;        // U(c, j:j+i)
  ML_SHARED float *xs = uc + nb;        // the group's rows of the column (0 for r <= c)
  for (int t = lane; t < ip; t += gs) {
    yc[t] = Y[(ml_i64)t * N + c];
    uc[t] = U[(ml_i64)(j + t) * N + c];
  }
  ml_barrier(ctx);
  const int r = c + g * gs + lane;
  const bool in = r < M;
  float x = 0.0f;
  if (in) {
    x = W[(ml_i64)c * M + r];
    for (int t = 0; t < ip; ++t)
      x -= V[(ml_i64)(j + t) * M + r] * yc[t] + X[(ml_i64)t * M + r] * uc[t];
    W[(ml_i64)c * M + r] = x;
  }
  xs[lane] = in && r > c ? x : 0.0f;
  ml_barrier(ctx);
  // Slot t of the partials by lane t: a dot over the group's rows (row-major across lanes).
  const int r0 = c + g * gs, rows = M - r0 < gs ? M - r0 : gs;
  ML_DEVICE float *out = P1 + (ml_i64)g * pw;
  for (int t = lane; t < pw; t += gs) {
    float sum = 0.0f;
    if (t < ip || (t >= nb && t < nb + ip)) {
      ML_DEVICE const float *src = t < ip ? V + (ml_i64)(j + t) * M + r0
                                          : X + (ml_i64)(t - nb) * M + r0;
      for (int l = 0; l < rows; ++l) sum += src[l] * xs[l];
    } else if (t == 2 * nb) {
      for (int l = 0; l < rows; ++l) sum += xs[l] * xs[l];
    } else if (t == 2 * nb + 1) {
      for (int l = 0; l < rows; ++l) {
        const float xu = xs[l] * ML_HOUSE_UP;
        sum += xu * xu;
      }
    }
    out[t] = sum;
  }
}

// brd_row: groups batch x ml_brd_row_groups(N, c, i[3]), i[3] trailing columns per group (a
// column per warp at a time). Every group: the column reflector (alpha = W(c, c), P1 of k
// groups), its share of V(j:M, c) (group 0: d[c], tauq[c]); then per column q of its block
// Y(q, i) = tauq (W(c:M, q)^T v - Y(q, 0:i) tmp1 - U(q, j:j+i) tmp2), tmp1 = V(c:M, j:c)^T v,
// tmp2 = X(c:M, 0:i)^T v; row[q] = W(c, q) - Y(q, 0:i+1) V(c, j:c+1)^T - U(q, j:c) X(c, 0:i)^T;
// and the partials over q > c + 1 into P3: Y(q, p) row_q (p <= i), U(q, j+p) row_q (p < i),
// row_q^2, (row_q 2^60)^2.
ML_FN void ml_step_brd_row(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int M = p.m, N = p.n, c = p.i[0], j = p.i[1], nb = p.i[2], cb = p.i[3], ip = c - j;
  const int gs = ctx.group_size, lane = ctx.lane, nw = ml_simd_count(ctx);
  const int G = ml_brd_row_groups(N, c, cb), pw = ML_BRD_PW(nb);
  const ml_i64 b = ctx.group_id / G;
  const int g = (int)(ctx.group_id - b * G);
  ML_DEVICE float *base = ws + b * p.stride[0];
  ML_DEVICE const float *W = base + p.off[0];
  ML_DEVICE float *V = base + p.off[1];
  ML_DEVICE const float *U = base + p.off[2];
  ML_DEVICE const float *X = base + p.off[3];
  ML_DEVICE float *Y = base + p.ld[0];
  ML_DEVICE float *vec = base + p.ld[1];
  ML_DEVICE const float *P1 = base + p.ld[2];
  ML_DEVICE float *P3 = base + p.ld[3];
  ML_DEVICE float *row = vec + ml_brd_vec(N, ML_BRD_ROW);
  ML_SHARED float *S = ctx.scratch;
  ML_SHARED float *tmp1 = S + pw;
  ML_SHARED float *tmp2 = tmp1 + nb;
  ML_SHARED float *xc = tmp2 + nb;
  ML_SHARED float *vc = xc + nb;        // nb + 1
  ML_SHARED float *cr = vc + nb + 1;    // 2 cb
  ML_SHARED float *acc = cr + 2 * cb;  // acc[warp * pw + t]
  ml_brd_sum_partials(ctx, P1, p.k, pw, S, acc + nw * pw);
  ML_DEVICE const float *col = W + (ml_i64)c * M;
  ml_house_t h;
  ml_brd_house(col[c], S, nb, &h);
  for (int t = lane; t < ip; t += gs) {
    const float v = V[(ml_i64)(j + t) * M + c], x = X[(ml_i64)t * M + c];
    tmp1[t] = v + h.scale * S[t];
    tmp2[t] = x + h.scale * S[nb + t];
    vc[t] = v;
    xc[t] = x;
  }
  if (lane == 0) vc[ip] = 1.0f;
  for (int t = lane; t < nw * pw; t += gs) acc[t] = 0.0f;
  if (g == 0 && lane == 0) {
    vec[ml_brd_vec(N, ML_BRD_D) + c] = h.beta;
    vec[ml_brd_vec(N, ML_BRD_TAUQ) + c] = h.tau;
  }
  {  // this group's share of V(j:M, c)
    const int len = M - j, share = (len + G - 1) / G;
    const int r0 = j + g * share, r1 = r0 + share < M ? r0 + share : M;
    ML_DEVICE float *vcol = V + (ml_i64)c * M;
    for (int r = r0 + lane; r < r1; r += gs)
      vcol[r] = r < c ? 0.0f : r == c ? 1.0f : (h.tau == 0.0f ? 0.0f : col[r] * h.scale);
  }
  ml_barrier(ctx);
  // The panel's corrections of the block's columns q = q0 + l, a column per lane (coalesced):
  // cr[l] = Y(q, 0:i) tmp1 + U(q, j:c) tmp2, cr[cb + l] = Y(q, 0:i) vc + U(q, j:c) xc.
  const int q0 = c + 1 + g * cb, q1 = q0 + cb < N ? q0 + cb : N;
  for (int l = lane; l < q1 - q0; l += gs) {
    const int q = q0 + l;
    float corr = 0.0f, rc = 0.0f;
    for (int t = 0; t < ip; ++t) {
      const float yq = Y[(ml_i64)t * N + q], uq = U[(ml_i64)(j + t) * N + q];
      corr += yq * tmp1[t] + uq * tmp2[t];
      rc += yq * vc[t] + uq * xc[t];
    }
    cr[l] = corr;
    cr[cb + l] = rc;
  }
  ml_barrier(ctx);
  const int w = ml_simd_id(ctx), sl = ml_simd_lane(ctx);
  ML_SHARED float *aw = acc + w * pw;
  for (int q = q0 + w; q < q1; q += nw) {
    ML_DEVICE const float *wq = W + (ml_i64)q * M;
    float s = 0.0f;
    for (int r = c + 1 + sl; r < M; r += 32) s += wq[r] * col[r];
    s = ml_simd_sum(ctx, s);
    const float corr = cr[q - q0], rc = cr[cb + q - q0];
    const float y = h.tau * ((wq[c] + h.scale * s) - corr);
    const float rq = wq[c] - rc - y;
    if (sl == 0) {
      Y[(ml_i64)ip * N + q] = y;
      row[q] = rq;
    }
    if (q > c + 1) {
      for (int t = sl; t <= ip; t += 32) aw[t] += (t < ip ? Y[(ml_i64)t * N + q] : y) * rq;
      for (int t = sl; t < ip; t += 32) aw[nb + t] += U[(ml_i64)(j + t) * N + q] * rq;
      if (sl == 0) {
        const float ru = rq * ML_HOUSE_UP;
        aw[2 * nb] += rq * rq;
        aw[2 * nb + 1] += ru * ru;
      }
    }
  }
  ml_barrier(ctx);
  ML_DEVICE float *out = P3 + (ml_i64)g * pw;
  for (int t = lane; t < pw; t += gs) {
    float s = 0.0f;
    for (int q = 0; q < nw; ++q) s += acc[q * pw + t];
    out[t] = s;
  }
}

// brd_x: groups batch x ml_brd_x_groups(M, c), 32 rows of c+1..M-1 per group, the warps
// splitting the columns. Every group: the row reflector (alpha = row[c+1], P3 of k groups),
// its share of U(j+1:N, c) (group 0: e[c], taup[c]); then for its rows r
// X(r, i) = taup (W(r, c+1:N) u - V(r, j:c+1) tmp3 - X(r, 0:i) tmp4),
// tmp3 = Y(c+1:N, 0:i+1)^T u, tmp4 = U(c+1:N, j:c)^T u.
ML_FN void ml_step_brd_x(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int M = p.m, N = p.n, c = p.i[0], j = p.i[1], nb = p.i[2], ip = c - j;
  const int gs = ctx.group_size, lane = ctx.lane, nw = ml_simd_count(ctx);
  const int G = ml_brd_x_groups(M, c), pw = ML_BRD_PW(nb);
  const ml_i64 b = ctx.group_id / G;
  const int g = (int)(ctx.group_id - b * G);
  ML_DEVICE float *base = ws + b * p.stride[0];
  ML_DEVICE const float *W = base + p.off[0];
  ML_DEVICE const float *V = base + p.off[1];
  ML_DEVICE float *U = base + p.off[2];
  ML_DEVICE float *X = base + p.off[3];
  ML_DEVICE const float *Y = base + p.ld[0];
  ML_DEVICE float *vec = base + p.ld[1];
  ML_DEVICE const float *P3 = base + p.ld[3];
  ML_DEVICE const float *row = vec + ml_brd_vec(N, ML_BRD_ROW);
  ML_SHARED float *S = ctx.scratch;
  ML_SHARED float *tmp3 = S + pw;       // nb + 1
  ML_SHARED float *tmp4 = tmp3 + nb + 1;
  ML_SHARED float *part = tmp4 + nb;    // part[warp * 32 + lane]
  ml_brd_sum_partials(ctx, P3, p.k, pw, S, part + 32 * nw);
  ml_house_t h;
  ml_brd_house(row[c + 1], S, nb, &h);
  for (int t = lane; t <= ip; t += gs) tmp3[t] = Y[(ml_i64)t * N + c + 1] + h.scale * S[t];
  for (int t = lane; t < ip; t += gs)
    tmp4[t] = U[(ml_i64)(j + t) * N + c + 1] + h.scale * S[nb + t];
  if (g == 0 && lane == 0) {
    vec[ml_brd_vec(N, ML_BRD_E) + c] = h.beta;
    vec[ml_brd_vec(N, ML_BRD_TAUP) + c] = h.tau;
  }
  {  // this group's share of U(j+1:N, c)
    const int len = N - j - 1, share = (len + G - 1) / G;
    const int r0 = j + 1 + g * share, r1 = r0 + share < N ? r0 + share : N;
    ML_DEVICE float *ucol = U + (ml_i64)c * N;
    for (int r = r0 + lane; r < r1; r += gs)
      ucol[r] = r <= c ? 0.0f : r == c + 1 ? 1.0f : (h.tau == 0.0f ? 0.0f : row[r] * h.scale);
  }
  const int w = ml_simd_id(ctx), sl = ml_simd_lane(ctx);
  const int r = c + 1 + g * 32 + sl;
  float s = 0.0f;
  if (r < M)
    for (int q = c + 2 + w; q < N; q += nw) s += W[(ml_i64)q * M + r] * row[q];
  part[w * 32 + sl] = s;
  ml_barrier(ctx);
  if (lane < 32 && r < M) {
    float t = 0.0f;
    for (int q = 0; q < nw; ++q) t += part[q * 32 + lane];
    float x = W[(ml_i64)(c + 1) * M + r] + h.scale * t;
    for (int q = 0; q <= ip; ++q) x -= V[(ml_i64)(j + q) * M + r] * tmp3[q];
    for (int q = 0; q < ip; ++q) x -= X[(ml_i64)q * M + r] * tmp4[q];
    X[(ml_i64)ip * M + r] = h.tau * x;
  }
}

// brd_transpose: operand 1 (n x m, ld n) = operand 0^T (m x n, ld m), the wide input loaded
// (load_input) as it is, then transposed into the M x N problem. Groups: batch x ceil(m / 32) x
// ceil(n / 32), 32 x 32 tiles through shared memory (32 x 33 floats), read and written along
// columns.
ML_FN void ml_step_brd_transpose(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int m = p.m, n = p.n;
  int i0 = 0, c0 = 0;
  const ml_i64 b = ml_step_tile_of(ctx, m, n, &i0, &c0);
  ML_DEVICE const float *A = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE float *T = ws + p.off[1] + b * p.stride[1];
  ML_SHARED float *tile = ctx.scratch;  // tile[c * 33 + r] = A(i0 + r, c0 + c)
  for (int e = ctx.lane; e < 32 * 32; e += ctx.group_size) {
    const int c = e / 32, r = e % 32;
    const int i = i0 + r, cc = c0 + c;
    tile[c * 33 + r] = i < m && cc < n ? A[(ml_i64)cc * m + i] : 0.0f;
  }
  ml_barrier(ctx);
  for (int e = ctx.lane; e < 32 * 32; e += ctx.group_size) {
    const int r = e / 32, c = e % 32;  // T(c0 + c, i0 + r)
    const int i = i0 + r, cc = c0 + c;
    if (i < m && cc < n) T[(ml_i64)i * n + cc] = tile[c * 33 + r];
  }
}

// brd_tgk: the Golub-Kahan tridiagonal of B (order 2N): diagonal zeros into operand 1, the
// off-diagonal d0, e0, d1, e1, ..., d_{N-1} into operand 2; operand 0 the vector block.
// Groups: batch, a group each.
ML_FN void ml_step_brd_tgk(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 b = ctx.group_id;
  const int N = p.n;
  ML_DEVICE const float *vec = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE float *td = ws + p.off[1] + b * p.stride[1];
  ML_DEVICE float *te = ws + p.off[2] + b * p.stride[2];
  ML_DEVICE const float *d = vec + ml_brd_vec(N, ML_BRD_D);
  ML_DEVICE const float *e = vec + ml_brd_vec(N, ML_BRD_E);
  for (int t = ctx.lane; t < 2 * N; t += ctx.group_size) {
    td[t] = 0.0f;
    if (t < 2 * N - 1) te[t] = (t & 1) ? e[t >> 1] : d[t >> 1];
  }
}

// brd_tgk_out: from the N largest eigenvalues of the Golub-Kahan tridiagonal (operand 1,
// ascending) and, when flags & 1, their eigenvectors Z (operand 2, 2N x N, ld 2N): the singular
// values s_i = max(w_{N-1-i}, 0) descending into the vector block (operand 0) and
// ML_INFO_RANK_DEFICIENT when s_min <= m ulp s_max (m = max(m, n) of the call: p.m); the
// singular vectors u_i = Z(2t+1, N-1-i), v_i = Z(2t, N-1-i) (t < N), each normalised, into
// operand 3 (the M x N matrix U_B, rows N.. zero, ld[0] = M) and the N x N matrix V_B at ld[1]
// (offset, same slice). Groups: batch x N, column i each.
ML_FN void ml_step_brd_tgk_out(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int N = p.n, M = p.ld[0];
  const ml_i64 b = ctx.group_id / N;
  const int i = (int)(ctx.group_id - b * N), zc = N - 1 - i;
  ML_DEVICE float *base = ws + b * p.stride[0];
  ML_DEVICE float *vec = base + p.off[0];
  ML_DEVICE const float *w = base + p.off[1];
  ML_DEVICE float *s = vec + ml_brd_vec(N, ML_BRD_S);
  if (ctx.lane == 0) s[i] = ml_fmax(w[zc], 0.0f);
  if (ctx.lane == 0 && i == N - 1) {
    const float smax = ml_fmax(w[N - 1], 0.0f), smin = ml_fmax(w[0], 0.0f);
    if (smin <= (float)p.m * ML_FLT_ULP * smax)
      vec[2] = (float)((int)vec[2] | ML_INFO_RANK_DEFICIENT);
  }
  if (!(p.flags & 1)) return;
  ML_DEVICE const float *z = base + p.off[2] + (ml_i64)zc * 2 * N;
  ML_DEVICE float *ub = base + p.off[3] + (ml_i64)i * M;
  ML_DEVICE float *vb = base + p.ld[1] + (ml_i64)i * N;
  ML_SHARED float *red = ctx.scratch;
  float su = 0.0f, sv = 0.0f;
  for (int t = ctx.lane; t < N; t += ctx.group_size) {
    const float zv = z[2 * t], zu = z[2 * t + 1];
    su += zu * zu;
    sv += zv * zv;
  }
  su = ml_group_sum(ctx, su, red);
  sv = ml_group_sum(ctx, sv, red + 32);
  const float fu = su > 0.0f ? 1.0f / ml_sqrt(su) : 0.0f;
  const float fv = sv > 0.0f ? 1.0f / ml_sqrt(sv) : 0.0f;
  for (int t = ctx.lane; t < M; t += ctx.group_size) ub[t] = t < N ? z[2 * t + 1] * fu : 0.0f;
  for (int t = ctx.lane; t < N; t += ctx.group_size) vb[t] = z[2 * t] * fv;
}

// Shared floats of brd_tgk_fix for N: the column being fixed.
ML_HOST_FN int ml_brd_fix_shared(int n) { return n + ML_RED_FLOATS; }

// x (shared, len floats) -= C C^T x over the columns 0..cnt-1 of C (ld ldc), twice (classical
// Gram-Schmidt with reorthogonalisation); returns |x| afterwards. coef: cnt floats of the
// workspace. warps: the coefficients a warp per column (the lanes read consecutive rows; a lane
// per column reads one row of each of 32 columns at a time), for groups of whole warps.
ML_FN float ml_brd_project_out(ML_CTX ctx, ML_DEVICE const float *C, int ldc, int cnt, int len,
                               ML_SHARED float *x, ML_DEVICE float *coef, ML_SHARED float *red,
                               bool warps) {
  const int nw = ml_simd_count(ctx), warp = ml_simd_id(ctx), sl = ml_simd_lane(ctx);
  for (int pass = 0; pass < 2; ++pass) {
    if (warps) {
      for (int t = warp; t < cnt; t += nw) {  // warp-uniform
        ML_DEVICE const float *ct = C + (ml_i64)t * ldc;
        float d = 0.0f;
        for (int r = sl; r < len; r += 32) d += ct[r] * x[r];
        d = ml_simd_sum(ctx, d);
        if (sl == 0) coef[t] = d;
      }
    } else {
      for (int t = ctx.lane; t < cnt; t += ctx.group_size) {
        ML_DEVICE const float *ct = C + (ml_i64)t * ldc;
        float d = 0.0f;
        for (int r = 0; r < len; ++r) d += ct[r] * x[r];
        coef[t] = d;
      }
    }
    ml_barrier_device(ctx);
    for (int r = ctx.lane; r < len; r += ctx.group_size) {
      float y = x[r];
      for (int t = 0; t < cnt; ++t) y -= coef[t] * C[(ml_i64)t * ldc + r];
      x[r] = y;
    }
    ml_barrier_device(ctx);  // also orders the next pass's coef writes after these reads
  }
  float s = 0.0f;
  for (int r = ctx.lane; r < len; r += ctx.group_size) s += x[r] * x[r];
  return ml_sqrt(ml_group_sum(ctx, s, red));
}

// brd_tgk_fix: the singular vectors of B for small singular values (s_i <= max(m ulp, 1 / N) s_0,
// m = p.m). Their Golub-Kahan eigenvectors mix with those of -s_k for other small s_k (exactly
// degenerate for zero values), so their u and v parts need not be orthogonal to each other's,
// nor nonzero (each part still satisfies B v = s u to the solver's residual). Each such column of
// U_B and of V_B, in order, is orthogonalised against all columns before it; one that (nearly)
// vanishes there is replaced by the unit vector farthest from their span, so treated; B = 0
// gives U_B = V_B = I. One group per matrix, sequential over those columns: O(z N^2) for z such
// values (a few for random matrices; slow for graded spectra and very low rank). Operands as
// brd_tgk_out: 0 the vector block (its row slot holds the projection coefficients), 3 U_B
// (ld[0]), V_B at offset ld[1]; n = N; i[0] = 1: the projections' coefficients a warp per
// column (ml_brd_project_out). Shared: ml_brd_fix_shared(N).
ML_FN void ml_step_brd_tgk_fix(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 b = ctx.group_id;
  const int N = p.n, M = p.ld[0];
  ML_DEVICE float *base = ws + b * p.stride[0];
  ML_DEVICE const float *s = base + p.off[0] + ml_brd_vec(N, ML_BRD_S);
  ML_DEVICE float *coef = base + p.off[0] + ml_brd_vec(N, ML_BRD_ROW);  // free by now
  ML_SHARED float *x = ctx.scratch;
  ML_SHARED float *red = x + N;
  if (s[0] == 0.0f) {  // B = 0: U_B = V_B = I
    for (int part = 0; part < 2; ++part) {
      ML_DEVICE float *C = part == 0 ? base + p.off[3] : base + p.ld[1];
      const int ldc = part == 0 ? M : N;
      for (ml_i64 e = ctx.lane; e < (ml_i64)N * N; e += ctx.group_size) {
        const int i = (int)(e / N), r = (int)(e - (ml_i64)i * N);
        C[(ml_i64)i * ldc + r] = r == i ? 1.0f : 0.0f;
      }
    }
    return;
  }
  // Below s_0 / N the Golub-Kahan pairs +-s_i of different small values lie within the
  // solver's accuracy of each other (|s_i + s_k| small), and their vectors mix: the parts of
  // such columns are orthogonalised here.
  const float rel = (float)p.m * ML_FLT_ULP > 1.0f / N ? (float)p.m * ML_FLT_ULP : 1.0f / N;
  const float tol = rel * s[0];
  int i0 = 0;
  while (i0 < N && s[i0] > tol) ++i0;
  const bool warps = p.i[0] == 1 && ctx.group_size % 32 == 0;
  for (int part = 0; part < 2; ++part) {
    ML_DEVICE float *C = part == 0 ? base + p.off[3] : base + p.ld[1];
    const int ldc = part == 0 ? M : N;
    for (int i = i0; i < N; ++i) {
      ML_DEVICE float *ci = C + (ml_i64)i * ldc;
      for (int r = ctx.lane; r < N; r += ctx.group_size) x[r] = ci[r];
      ml_barrier(ctx);
      float nrm = ml_brd_project_out(ctx, C, ldc, i, N, x, coef, red, warps);
      if (!(nrm > 0.5f)) {
        // The unit vector e_t farthest from the span of columns 0..i-1: the row t of those
        // columns with the least norm (1 - |row t|^2 >= (N - i) / N > 0), the first such t.
        float best = -1.0f;
        int bt = N;
        for (int r = ctx.lane; r < N; r += ctx.group_size) {
          float q = 1.0f;
          for (int k = 0; k < i; ++k) q -= C[(ml_i64)k * ldc + r] * C[(ml_i64)k * ldc + r];
          if (q > best) {
            best = q;
            bt = r;
          }
        }
        const float qmax = ml_group_max(ctx, best, red + 32);
        const int t = (int)-ml_group_max(ctx, best == qmax ? -(float)bt : -(float)N, red);
        for (int r = ctx.lane; r < N; r += ctx.group_size) x[r] = r == t ? 1.0f : 0.0f;
        ml_barrier(ctx);
        nrm = ml_brd_project_out(ctx, C, ldc, i, N, x, coef, red + 32, warps);
      }
      const float f = nrm > 0.0f ? 1.0f / nrm : 0.0f;
      for (int r = ctx.lane; r < N; r += ctx.group_size) ci[r] = x[r] * f;
      ml_barrier_device(ctx);
    }
  }
}

#endif  // ML_KERNELS_GEBRD_BLOCKED_H
