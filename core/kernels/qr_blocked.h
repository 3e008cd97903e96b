// Blocked Householder QR (compact WY), the steps the host sequences (core/src/blocked_qr.cpp):
// for each panel of jb <= nb columns starting at j:
//   qr_panel   factor W[j:m, j:j+jb] in place (one group per matrix, device memory), write
//              its reflectors explicitly into V (unit diagonal, zeros above) and the upper
//              triangular T of H_j ... H_{j+jb-1} = I - V T V^T;
//   gemm x 3   the trailing columns: W2 -= V (T^T (V^T W2))  (core/kernels/gemm.h);
// then Q by the same products applied backwards to the identity. The panel and the products
// read the workspace only: the shared memory holds the panel's reduction partials.
#ifndef ML_KERNELS_QR_BLOCKED_H
#define ML_KERNELS_QR_BLOCKED_H

#include "blocked_common.h"
#include "householder.h"
#include "larft.h"

// Shared floats of a panel of r rows and jb <= nb columns with gs lanes: the panel (odd
// leading dimension), tau, G and T of larft.h, two reduction buffers, and the fused
// factorisation's partial sums (a row of nb per simdgroup) and row of the pivot.
ML_HOST_FN int ml_qr_panel_shared_floats(int r, int nb, int gs) {
  return nb * (r | 1) + nb + ml_larft_shared_floats(nb) + ML_RED_FLOATS +
         ((gs + 31) / 32 + 1) * nb;
}

// Widest panel (<= nb_max, >= 1) whose rows r fit a shared budget with gs lanes.
ML_HOST_FN int ml_qr_panel_width(int r, int nb_max, int gs, int budget_floats) {
  int nb = nb_max;
  while (nb > 1 && ml_qr_panel_shared_floats(r, nb, gs) > budget_floats) --nb;
  return nb;
}

// Flag of the panel steps (p.flags of qr_panel, tsqr_leaf, tsqr_tree): while the panel has
// fewer columns left than warps, split each column's rows over several warps.
#define ML_QR_SPLIT_ROWS 1
// Flag of qr_panel: the fused factorisation (ml_qr_factor_fused) where the group is whole
// simdgroups of 32 lanes.
#define ML_QR_FUSED 2

// Householder QR in place of the r x jb block in shared memory (column c at S + c * lds): R on
// and above the diagonal, reflector c below it (unit diagonal implied), tau[c]. red:
// ML_RED_FLOATS shared floats. split: ML_QR_SPLIT_ROWS (a warp per column leaves most warps
// idle on a narrow tall panel, each running r / 32 dependent steps per column). Enter and
// leave after a barrier. Returns whether a diagonal entry of R is exactly zero.
ML_FN bool ml_qr_factor_shared(ML_CTX ctx, ML_SHARED float *S, int lds, int r, int jb,
                               ML_SHARED float *tau, ML_SHARED float *red, bool split) {
  const int lane = ctx.lane, gs = ctx.group_size, nw = ml_simd_count(ctx);
  const int warp = ml_simd_id(ctx), sl = ml_simd_lane(ctx);
  bool zero_diag = false;
  for (int c = 0; c < jb; ++c) {
    ML_SHARED float *col = S + c * lds;
    const float alpha = col[c];
    float s = 0.0f;
    for (int i = c + 1 + lane; i < r; i += gs) s += col[i] * col[i];
    float sigma = ml_group_sum(ctx, s, red);
    float up = 1.0f;
    if (sigma < ML_HOUSE_TINY) {
      s = 0.0f;
      for (int i = c + 1 + lane; i < r; i += gs) {
        const float x = col[i] * ML_HOUSE_UP;
        s += x * x;
      }
      sigma = ml_group_sum(ctx, s, red + 32);
      up = ML_HOUSE_UP;
    }
    ml_house_t h;
    ml_house_finish(alpha, sigma, up, &h);
    for (int i = c + 1 + lane; i < r; i += gs) col[i] *= h.scale;
    if (lane == 0) {
      col[c] = h.beta;
      tau[c] = h.tau;
    }
    zero_diag = zero_diag || h.beta == 0.0f;
    ml_barrier(ctx);
    if (h.tau == 0.0f) continue;
    const int ncol = jb - c - 1;
    const int g = split && ncol > 0 && ncol < nw && gs % 32 == 0 ? nw / ncol : 1;
    if (g > 1) {
      // g warps per column (group-uniform): warp sub of column cc sums rows c + 1 + 32 sub +
      // sl, stride 32 g, into red[warp] (sub 0 adds x[c], v_c = 1); after the barrier each
      // warp of the column sums the g partials and updates its rows. red is free here: the
      // norm's reads of it precede the barrier above.
      const int q = warp / g, sub = warp - q * g, cc = c + 1 + q;
      ML_SHARED float *x = S + cc * lds;
      if (q < ncol) {
        float d = sub == 0 && sl == 0 ? x[c] : 0.0f;
        for (int i = c + 1 + 32 * sub + sl; i < r; i += 32 * g) d += col[i] * x[i];
        d = ml_simd_sum(ctx, d);
        if (sl == 0) red[warp] = d;
      }
      ml_barrier(ctx);
      if (q < ncol) {
        float w = 0.0f;
        for (int e = 0; e < g; ++e) w += red[q * g + e];
        w *= h.tau;
        for (int i = c + 1 + 32 * sub + sl; i < r; i += 32 * g) x[i] -= col[i] * w;
        if (sub == 0 && sl == 0) x[c] -= w;
      }
      ml_barrier(ctx);
      continue;
    }
    // The panel's later columns, a warp each (warp-uniform loop): w = tau (v^T S[:, cc]) by a
    // warp reduction, then S[:, cc] -= v w by the same warp. No cross-warp partials.
    for (int cc = c + 1 + warp; cc < jb; cc += nw) {
      ML_SHARED float *x = S + cc * lds;
      float d = 0.0f;
      for (int i = c + 1 + sl; i < r; i += 32) d += col[i] * x[i];
      const float w = (x[c] + ml_simd_sum(ctx, d)) * h.tau;
      for (int i = c + 1 + sl; i < r; i += 32) x[i] -= col[i] * w;
      if (sl == 0) x[c] -= w;
    }
    ml_barrier(ctx);
  }
  return zero_diag;
}

// Below this sum of squares of a column's tail the fused factorisation takes the reflector's
// scaled column for its products (a second reduction): products of an unscaled tiny column
// with tiny trailing entries could lose digits to underflow. 2^-60.
#define ML_QR_FUSED_MIN 8.6736174e-19f

// Householder QR in place of the r x jb panel in shared memory, as ml_qr_factor_shared leaves
// it (jb <= nb <= 64), and T of its reflectors (Ts: nb x nb, column-major, zeroed by the
// caller), with one reduction per column. Simdgroup w owns the rows i = w (mod nw), its lane
// l the columns l and l + 32. Column c's pass sums, per column l, the products of the
// unscaled tail u = S[c+1:r, c] with column l: l = c gives sigma = u^T u; l > c the trailing
// products, w_l = tau (x_l[c] + s u^T x_l) with s the reflector's scale; l < c the Gram
// entries v_l^T v_c = v_l[c] + s v_l^T u, from which T's column c follows (LAPACK's larft
// recurrence, a simdgroup per row of T). Every simdgroup adds the partial sums in the same
// order, so every lane holds the same totals and the same reflector. Column c is scaled by
// its lanes during the next column's pass (this pass's updates read it unscaled). Two
// barriers per column; a sigma below ML_QR_FUSED_MIN scales the column first and sums again.
// gs a multiple of 32; part: nw x nb, rowc: nb, red: ML_RED_FLOATS shared floats; tau: jb.
// Enter after a barrier (S and Ts complete); leaves after one. Returns whether a diagonal
// entry of R is exactly zero.
ML_FN bool ml_qr_factor_fused(ML_CTX ctx, ML_SHARED float *S, int lds, int r, int jb, int nb,
                              ML_SHARED float *tau, ML_SHARED float *Ts, ML_SHARED float *red,
                              ML_SHARED float *part, ML_SHARED float *rowc) {
  const int lane = ctx.lane, gs = ctx.group_size, nw = ml_simd_count(ctx);
  const int w = ml_simd_id(ctx), sl = ml_simd_lane(ctx);
  const int l0 = sl, l1 = sl + 32;  // this lane's columns
  const bool has0 = l0 < jb, has1 = l1 < jb;
  ML_SHARED float *x0 = S + l0 * lds;
  ML_SHARED float *x1 = S + (has1 ? l1 : l0) * lds;
  bool zero_diag = false;
  float pend = 1.0f;  // the scale column c - 1 still needs
  for (int c = 0; c <= jb; ++c) {
    ML_SHARED float *u = S + c * lds;
    const int i0 = c + 1 + ((w - (c + 1)) % nw + nw) % nw;  // first own row after c
    const bool own_c = c % nw == w;
    // Column c - 1's scale, by its lane, on its rows c.. of this simdgroup.
    if (c > 0 && ((c - 1) & 31) == sl && pend != 1.0f) {
      ML_SHARED float *y = S + (c - 1) * lds;
      if (own_c && c < r) y[c] *= pend;
      for (int i = i0; i < r; i += nw) y[i] *= pend;
    }
    if (c == jb) break;
    float z0 = 0.0f, z1 = 0.0f;
    if (has0) {
      float a0 = 0.0f, a1 = 0.0f;
      int i = i0;
      for (; i + nw < r; i += 2 * nw) {
        a0 += u[i] * x0[i];
        a1 += u[i + nw] * x0[i + nw];
      }
      if (i < r) a0 += u[i] * x0[i];
      z0 = a0 + a1;
    }
    if (has1) {
      float a0 = 0.0f, a1 = 0.0f;
      int i = i0;
      for (; i + nw < r; i += 2 * nw) {
        a0 += u[i] * x1[i];
        a1 += u[i + nw] * x1[i + nw];
      }
      if (i < r) a0 += u[i] * x1[i];
      z1 = a0 + a1;
    }
    if (has0) part[w * nb + l0] = z0;
    if (has1) part[w * nb + l1] = z1;
    if (own_c) {
      if (has0) rowc[l0] = x0[c];
      if (has1) rowc[l1] = x1[c];
    }
    ml_barrier(ctx);
    float t0 = 0.0f, t1 = 0.0f;
    for (int q = 0; q < nw; ++q) {
      if (has0) t0 += part[q * nb + l0];
      if (has1) t1 += part[q * nb + l1];
    }
    const float sigma = ml_simd_shuffle(ctx, c < 32 ? t0 : t1, c & 31);
    const float alpha = rowc[c];
    const float r0 = has0 ? rowc[l0] : 0.0f, r1 = has1 ? rowc[l1] : 0.0f;
    ml_house_t h;
    float vs;  // factor of S[c+1:r, c] in the updates
    if (sigma >= ML_QR_FUSED_MIN) {
      ml_house_finish(alpha, sigma, 1.0f, &h);
      t0 = r0 + h.scale * t0;
      t1 = r1 + h.scale * t1;
      vs = h.scale;
      pend = h.scale;
    } else {  // group-uniform: every lane holds the same sigma
      float sg = sigma, up = 1.0f;
      if (!(sigma >= ML_HOUSE_TINY)) {
        float s = 0.0f;
        for (int i = c + 1 + lane; i < r; i += gs) {
          const float x = u[i] * ML_HOUSE_UP;
          s += x * x;
        }
        sg = ml_group_sum(ctx, s, red);
        up = ML_HOUSE_UP;
      }
      ml_house_finish(alpha, sg, up, &h);
      for (int i = c + 1 + lane; i < r; i += gs) u[i] *= h.scale;
      ml_barrier(ctx);  // the scaled column visible; every lane done with part
      z0 = 0.0f;
      z1 = 0.0f;
      for (int i = i0; i < r; i += nw) {
        if (has0) z0 += u[i] * x0[i];
        if (has1) z1 += u[i] * x1[i];
      }
      if (has0) part[w * nb + l0] = z0;
      if (has1) part[w * nb + l1] = z1;
      ml_barrier(ctx);
      t0 = 0.0f;
      t1 = 0.0f;
      for (int q = 0; q < nw; ++q) {
        if (has0) t0 += part[q * nb + l0];
        if (has1) t1 += part[q * nb + l1];
      }
      t0 += r0;
      t1 += r1;
      vs = 1.0f;
      pend = 1.0f;
    }
    zero_diag = zero_diag || h.beta == 0.0f;
    if (lane == 0) tau[c] = h.tau;
    // T[q, c] = -tau_c sum_{q <= l < c} T[q, l] (v_l^T v_c), a simdgroup per row q: T's rows
    // are read and written by the same simdgroup only.
    for (int q = w; q < c; q += nw) {
      float s = 0.0f;
      if (has0 && l0 >= q && l0 < c) s += Ts[l0 * nb + q] * t0;
      if (has1 && l1 >= q && l1 < c) s += Ts[l1 * nb + q] * t1;
      s = ml_simd_sum(ctx, s);
      if (sl == 0) Ts[c * nb + q] = -h.tau * s;
    }
    if (own_c && sl == 0) Ts[c * nb + c] = h.tau;
    // The trailing columns: x_l -= v_c w_l (v_c = [1; vs u]).
    if (has0 && l0 > c) {
      const float wl = h.tau * t0, f = wl * vs;
      for (int i = i0; i < r; i += nw) x0[i] -= u[i] * f;
      if (own_c) x0[c] -= wl;
    }
    if (has1 && l1 > c) {
      const float wl = h.tau * t1, f = wl * vs;
      for (int i = i0; i < r; i += nw) x1[i] -= u[i] * f;
      if (own_c) x1[c] -= wl;
    }
    if (own_c && (c & 31) == sl) u[c] = h.beta;
    ml_barrier(ctx);
  }
  ml_barrier(ctx);
  return zero_diag;
}

// The qr_panel step's arguments by name (slots of ml_step_params, set by the host, read here):
// the integers, and the operand numbers of off / stride / ld.
#define ML_QRP_COL(p) ((p).i[0])     // j, the panel's first row and column
#define ML_QRP_WIDTH(p) ((p).i[1])   // jb, its columns
#define ML_QRP_LDT(p) ((p).i[2])     // nb, T's leading dimension
#define ML_QRP_TAU_AT(p) ((p).i[3])  // > 0: where the panel's tau also goes (see below)
#define ML_QRP_W 0
#define ML_QRP_V 1
#define ML_QRP_T 2
#define ML_QRP_STAT 3

// qr_panel: one group per matrix. m rows; ML_QRP_COL = j, ML_QRP_WIDTH = jb, ML_QRP_LDT = nb.
// Operands: ML_QRP_W (m x n), ML_QRP_V (m x k: column j + c of V is reflector c of this
// panel), ML_QRP_T, T of this panel (nb x nb, column-major, ld nb; zeros below the diagonal),
// ML_QRP_STAT (rank deficiency: an exactly zero diagonal entry of R sets
// ML_INFO_RANK_DEFICIENT); ML_QRP_TAU_AT > 0: also the panel's tau into the workspace at
// ML_QRP_TAU_AT + j (same matrix stride as ML_QRP_STAT). The panel is factored in
// shared memory (ml_qr_panel_shared_floats(m - j, nb, group size)): every reduction and
// update reads shared memory, the workspace is read and written once.
ML_FN void ml_step_qr_panel(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 b = ctx.group_id;
  const int j = ML_QRP_COL(p), jb = ML_QRP_WIDTH(p), nb = ML_QRP_LDT(p);
  const int r = p.m - j;  // rows of the panel
  const int lane = ctx.lane, gs = ctx.group_size, nw = ml_simd_count(ctx);
  const int ld = p.ld[ML_QRP_W], ldv = p.ld[ML_QRP_V], lds = r | 1;
  ML_DEVICE float *P = ws + p.off[ML_QRP_W] + b * p.stride[ML_QRP_W] + (ml_i64)j * ld + j;
  ML_DEVICE float *V = ws + p.off[ML_QRP_V] + b * p.stride[ML_QRP_V] + (ml_i64)j * ldv + j;
  ML_DEVICE float *st = ws + p.off[ML_QRP_STAT] + b * p.stride[ML_QRP_STAT];
  ML_SHARED float *S = ctx.scratch;  // S[c * lds + i] = panel(i, c)
  ML_SHARED float *tau = S + nb * lds;
  ML_SHARED float *G = tau + nb;
  ML_SHARED float *Ts = G + nb * nb;
  ML_SHARED float *red = Ts + nb * nb;
  const bool fused = (p.flags & ML_QR_FUSED) != 0 && gs % 32 == 0 && nb <= 64;
  for (int c = 0; c < jb; ++c)
    for (int i = lane; i < r; i += gs) S[c * lds + i] = P[(ml_i64)c * ld + i];
  if (fused)
    for (int e = lane; e < nb * nb; e += gs) Ts[e] = 0.0f;
  ml_barrier(ctx);
  const bool zero_diag =
      fused ? ml_qr_factor_fused(ctx, S, lds, r, jb, nb, tau, Ts, red, red + ML_RED_FLOATS,
                                 red + ML_RED_FLOATS + nw * nb)
            : ml_qr_factor_shared(ctx, S, lds, r, jb, tau, red,
                                  (p.flags & ML_QR_SPLIT_ROWS) != 0);
  if (lane == 0 && zero_diag) st[2] = (float)((int)st[2] | ML_INFO_RANK_DEFICIENT);
  if (ML_QRP_TAU_AT(p) > 0)
    for (int c = lane; c < jb; c += gs)
      ws[ML_QRP_TAU_AT(p) + b * p.stride[ML_QRP_STAT] + j + c] = tau[c];

  // Back to the workspace: R's rows and the reflectors in W, V explicitly; then G = V^T V
  // (one dot product per lane and pair, rows c.. of column q) and T (larft.h).
  for (int c = 0; c < jb; ++c) {
    ML_SHARED const float *col = S + c * lds;
    ML_DEVICE float *pc = P + (ml_i64)c * ld;
    ML_DEVICE float *vc = V + (ml_i64)c * ldv;
    // Zeros above the panel too: an outer panel's products read V from its first row.
    for (int i = lane; i < j; i += gs) vc[i - j] = 0.0f;
    for (int i = lane; i < r; i += gs) {
      const float x = col[i];
      pc[i] = x;
      vc[i] = i < c ? 0.0f : (i == c ? 1.0f : x);
    }
  }
  if (fused) {  // T is complete in Ts
    ML_DEVICE float *T = ws + p.off[ML_QRP_T] + b * p.stride[ML_QRP_T];
    for (int e = lane; e < nb * nb; e += gs) T[e] = Ts[e];
    return;
  }
  ml_larft_gram_simd(ctx, S, lds, r, jb, nb, G);
  ml_larft_from_gram(ctx, G, tau, jb, nb, Ts, ws + p.off[ML_QRP_T] + b * p.stride[ML_QRP_T]);
}

// Shared floats of qr_larft: G (nb x nb, ld nb + 1), the top block's strictly lower part
// (nb x nb), tau.
ML_HOST_FN int ml_qr_larft_shared_floats(int nb) { return nb * (nb + 1) + nb * nb + nb; }

// qr_larft: T of jb <= nb <= 64 reflectors from G = V^T V formed by a product in T's slot, as
// larft_gram (larft.h: the same arguments and operands, the top block's part of G added
// here), with the recurrence by rows: T[q, c] = -tau_c sum_{q <= l < c} T[q, l] G[l, c]
// involves row q of T only, so a simdgroup takes row q in its lanes' registers (lane l:
// columns l and l + 32) and walks c with one simdgroup sum per entry and no group barrier
// (larft_gram's recurrence takes a barrier per column and a lane per row walking its row
// serially). Group size a multiple of 32; shared ml_qr_larft_shared_floats(nb).
ML_FN void ml_step_qr_larft(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 b = ctx.group_id;
  const int jb = ML_LARFT_COUNT(p), nb = ML_LARFT_LDT(p);
  ML_DEVICE float *GT = ws + p.off[ML_LARFT_T] + b * p.stride[ML_LARFT_T];
  const int ldg = nb + 1;
  ML_SHARED float *G = ctx.scratch;  // G[l * ldg + c] = V[:, l]^T V[:, c], l < c
  ML_SHARED float *Lt = G + nb * ldg;
  ML_SHARED float *ts = Lt + nb * nb;
  ml_larft_gram_top(ctx, p, ws, b, G, ldg, Lt, ts);  // G complete; GT read in full
  const int w = ml_simd_id(ctx), nw = ml_simd_count(ctx), sl = ml_simd_lane(ctx);
  for (int q = w; q < nb; q += nw) {  // simdgroup-uniform
    float t0 = sl == q && q < jb ? ts[q] : 0.0f;
    float t1 = sl + 32 == q && q < jb ? ts[q] : 0.0f;
    for (int c = q + 1; c < jb; ++c) {
      float s = 0.0f;
      if (sl >= q && sl < c) s += t0 * G[sl * ldg + c];
      if (sl + 32 >= q && sl + 32 < c) s += t1 * G[(sl + 32) * ldg + c];
      s = ml_simd_sum(ctx, s);
      const float v = -ts[c] * s;
      if (c < 32 && sl == c) t0 = v;
      if (c >= 32 && sl + 32 == c) t1 = v;
    }
    if (sl < nb) GT[sl * nb + q] = t0;
    if (sl + 32 < nb) GT[(sl + 32) * nb + q] = t1;
  }
}

#endif  // ML_KERNELS_QR_BLOCKED_H
