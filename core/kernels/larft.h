// The triangular factor T of a block of Householder reflectors in compact WY form
// (LAPACK's larft, forward, columnwise): H_0 H_1 ... H_{jb-1} = I - V T V^T, V explicit
// (unit lower trapezoidal: V[i, c] = 0 for i < c, 1 at i = c), T upper triangular.
// T[0:c, c] = -tau_c T[0:c, 0:c] G[0:c, c] with G = V^T V: the Gram matrix first (every
// entry an independent dot product, spread over the lanes), then the recurrence, a column
// per barrier. The panel steps that produce V build G from their shared-memory copy
// (qr_blocked.h). For reflectors another step left in the workspace the host forms most of G
// by a matrix product and ml_step_larft_gram finishes it (blocked.cpp larft()); ml_step_larft,
// G inside one group, is the reference that step is tested against.
#ifndef ML_KERNELS_LARFT_H
#define ML_KERNELS_LARFT_H

#include "blocked_common.h"

// The arguments of the larft and larft_gram steps by name (slots of ml_step_params, set by
// the host, read here; p.m: the rows of V): the integers, and the operand numbers of off /
// stride / ld.
#define ML_LARFT_COUNT(p) ((p).i[1])  // jb, the reflectors
#define ML_LARFT_LDT(p) ((p).i[2])    // nb (<= 64), T's order and leading dimension
#define ML_LARFT_HAS_G(p) ((p).i[3])  // larft_gram: 1 when G holds the product
#define ML_LARFT_BLOCKS(p) ((p).i[0])  // larft: 0, or the blocks of one launch (below)
#define ML_LARFT_V 0
#define ML_LARFT_TAU 1
#define ML_LARFT_T 2

// Shared floats of the recurrence: G and T (nb x nb each, nb <= 64).
ML_HOST_FN int ml_larft_shared_floats(int nb) { return 2 * nb * nb; }
// Shared floats of ml_step_larft: the recurrence's and tau.
ML_HOST_FN int ml_larft_step_shared_floats(int nb) { return ml_larft_shared_floats(nb) + nb; }
// Rows of V each slice of the blocks form of ml_step_larft stages at a time, the lanes of a
// slice (a 16 x 16 grid of 4 x 4 tiles of G), the lanes a block of nb reflectors needs, and
// the shared floats with gs lanes (gs / ML_LARFT_BLOCK_LANES slices, at least one).
#define ML_LARFT_ROWS 64
#define ML_LARFT_BLOCK_LANES 256
ML_HOST_FN int ml_larft_blocks_lanes(int nb) { return 16 * ((nb + 3) / 4); }
ML_HOST_FN int ml_larft_blocks_slices(int gs) {
  return gs >= ML_LARFT_BLOCK_LANES ? gs / ML_LARFT_BLOCK_LANES : 1;
}
ML_HOST_FN int ml_larft_blocks_shared_floats(int nb, int gs) {
  const int h = ml_larft_blocks_slices(gs), rows = h * ML_LARFT_ROWS;
  return ml_larft_step_shared_floats(nb) + (rows > nb ? rows : nb) * (nb + 1);
}

// T (nb x nb, column-major, zeros outside the upper jb x jb triangle) into the workspace from
// G (G[q * nb + c] = V[:, q]^T V[:, c] for q < c) and tau, both in shared memory; Ts: nb * nb
// shared floats. Starts and ends with a barrier (G and tau must be complete before).
// Row q of T depends only on row q's earlier entries (T[q, c] = -tau_c sum_{q <= l < c} T[q, l]
// G[l, c]), and row q is always lane q % gs's: the recurrence needs no barrier per column
// (one per column measured 73 us for a 64-column T on the H200, mostly waiting). Every lane
// runs l from 0 (T[q, l] = 0 below the diagonal), so a simdgroup reads G[l, c] at one address
// (a broadcast) and its rows of T at consecutive ones; four accumulators overlap the loads.
ML_FN void ml_larft_from_gram(ML_CTX ctx, ML_SHARED const float *G, ML_SHARED const float *tau,
                              int jb, int nb, ML_SHARED float *Ts, ML_DEVICE float *T) {
  const int lane = ctx.lane, gs = ctx.group_size;
  for (int e = lane; e < nb * nb; e += gs) {
    const int c = e / nb, q = e - c * nb;
    Ts[e] = (q == c && c < jb) ? tau[c] : 0.0f;
  }
  ml_barrier(ctx);
  for (int q0 = 0; q0 < jb; q0 += gs) {
    const int q = q0 + lane;
    for (int c = q0 + 1; c < jb; ++c) {
      if (q >= c) continue;
      float t0 = 0.0f, t1 = 0.0f, t2 = 0.0f, t3 = 0.0f;
      int l = q0;
      for (; l + 3 < c; l += 4) {
        t0 = ml_fma(Ts[l * nb + q], G[l * nb + c], t0);
        t1 = ml_fma(Ts[(l + 1) * nb + q], G[(l + 1) * nb + c], t1);
        t2 = ml_fma(Ts[(l + 2) * nb + q], G[(l + 2) * nb + c], t2);
        t3 = ml_fma(Ts[(l + 3) * nb + q], G[(l + 3) * nb + c], t3);
      }
      for (; l < c; ++l) t0 = ml_fma(Ts[l * nb + q], G[l * nb + c], t0);
      Ts[c * nb + q] = -tau[c] * ((t0 + t1) + (t2 + t3));
    }
  }
  ml_barrier(ctx);
  for (int e = lane; e < nb * nb; e += gs) T[e] = Ts[e];
  ml_barrier_device(ctx);
}

// G[q * nb + c] = V[:, q]^T V[:, c] for q < c < jb over rows c.. < r (V[:, c] is 0 above row
// c, V[c, c] = 1; column q at V + q * ldv, V in shared or device memory: P). A simdgroup per
// entry (simdgroup-uniform loop), its lanes reading consecutive rows. No barrier.
template <typename P, typename I>
ML_FN void ml_larft_gram_simd(ML_CTX ctx, P V, I ldv, int r, int jb, int nb, ML_SHARED float *G) {
  const int sl = ml_simd_lane(ctx), nw = ml_simd_count(ctx);
  for (int e = ml_simd_id(ctx); e < jb * jb; e += nw) {
    const int c = e / jb, q = e - c * jb;
    if (q >= c) continue;
    P vq = V + q * ldv;
    P vc = V + c * ldv;
    float s = 0.0f;
    for (int i = c + 1 + sl; i < r; i += 32) s += vq[i] * vc[i];
    s = ml_simd_sum(ctx, s);
    if (sl == 0) G[q * nb + c] = vq[c] + s;
  }
}

// The first phase of the larft_gram and qr_larft steps (their arguments p, matrix b): tau
// into ts (jb floats) and G[l * ldg + c] for l < c: the product below the top block, in T's
// slot (read in full; 0 without ML_LARFT_HAS_G), plus the top block's part, staged in L
// (nb * nb shared floats by rows: L[i * nb + c] = V[i, c], its strictly lower part). Ends
// with a barrier.
ML_FN void ml_larft_gram_top(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE const float *ws, ml_i64 b,
                             ML_SHARED float *G, int ldg, ML_SHARED float *L,
                             ML_SHARED float *ts) {
  const int r = p.m, jb = ML_LARFT_COUNT(p), nb = ML_LARFT_LDT(p), ldv = p.ld[ML_LARFT_V];
  const int has_g = ML_LARFT_HAS_G(p);
  const int top = jb < r ? jb : r;
  ML_DEVICE const float *V = ws + p.off[ML_LARFT_V] + b * p.stride[ML_LARFT_V];
  ML_DEVICE const float *tau = ws + p.off[ML_LARFT_TAU] + b * p.stride[ML_LARFT_TAU];
  ML_DEVICE const float *GT = ws + p.off[ML_LARFT_T] + b * p.stride[ML_LARFT_T];
  const int lane = ctx.lane, gs = ctx.group_size;
  for (int c = lane; c < jb; c += gs) ts[c] = tau[c];
  for (int e = lane; e < jb * jb; e += gs) {
    const int c = e / jb, i = e - c * jb;
    L[i * nb + c] = (i > c && i < top) ? V[(ml_i64)c * ldv + i] : 0.0f;  // row i, column c
    G[c * ldg + i] = has_g ? GT[c * nb + i] : 0.0f;
  }
  ml_barrier(ctx);
  // G[q, c] += V[c, q] + sum over rows c+1 .. top-1 of V[i, q] V[i, c] (V[c, c] = 1). L holds
  // the block by rows, so consecutive lanes (consecutive q) read consecutive floats and V[i, c]
  // is one broadcast (by columns, the lanes of a simdgroup read one bank nb floats apart).
  for (int e = lane; e < jb * jb; e += gs) {
    const int c = e / jb, q = e - c * jb;
    if (q >= c || c >= top) continue;
    float s = L[c * nb + q];
    for (int i = c + 1; i < top; ++i) s = ml_fma(L[i * nb + q], L[i * nb + c], s);
    G[q * ldg + c] += s;
  }
  ml_barrier(ctx);
}

// The blocks form (ML_LARFT_BLOCKS(p) = nblk > 0): the T of each of nblk blocks of nb
// reflectors in one launch, a group per matrix and block (one to four slices of
// ML_LARFT_BLOCK_LANES lanes, or ml_larft_blocks_lanes(nb) lanes at least): block k's
// V at ML_LARFT_V + k nb (ld + 1) (the blocks along one diagonal, as the tridiagonalisation
// leaves them), p.m - k nb rows and min(nb, rows) reflectors, its tau at ML_LARFT_TAU + k nb,
// its T at ML_LARFT_T + k nb nb. V made explicit first (zeros above the unit diagonal, ones
// on it, written), so G = V^T V over all rows, each lane summing a 4 x 4 tile of G in
// registers. Shared: ml_larft_blocks_shared_floats(nb, group size).
ML_FN void ml_larft_blocks(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE float *ws) {
  const int nblk = ML_LARFT_BLOCKS(p), nb = ML_LARFT_LDT(p), ldv = p.ld[ML_LARFT_V];
  const ml_i64 b = ctx.group_id / nblk;
  const int k = (int)(ctx.group_id - b * nblk), r = p.m - k * nb;
  if (r <= 0) return;
  const int jb = r < nb ? r : nb, lane = ctx.lane, gs = ctx.group_size;
  ML_DEVICE float *V =
      ws + p.off[ML_LARFT_V] + b * p.stride[ML_LARFT_V] + (ml_i64)k * nb * (ldv + 1);
  ML_DEVICE const float *tau = ws + p.off[ML_LARFT_TAU] + b * p.stride[ML_LARFT_TAU] + k * nb;
  ML_SHARED float *G = ctx.scratch;
  ML_SHARED float *Ts = G + nb * nb;
  ML_SHARED float *ts = Ts + nb * nb;
  // A chunk's rows of V, S[i * (nb + 1) + c] (a padded stride: consecutive lanes store
  // consecutive rows of a column in different banks); then the slices' tiles.
  ML_SHARED float *S = ts + nb;
  const int ls = nb + 1;
  for (int c = lane; c < jb; c += gs) ts[c] = tau[c];
  // The block's unit upper part made explicit: a block may span several panels of the
  // reduction, and a panel writes its columns' zeros from its own first row only (the
  // back-transformation's products read V in full too).
  for (int e = lane; e < jb * jb; e += gs) {
    const int c = e / jb, i = e - c * jb;
    if (i <= c) V[(ml_i64)c * ldv + i] = i == c ? 1.0f : 0.0f;
  }
  ml_barrier_device(ctx);
  // Slice h = lane / 256 of the lanes takes rows h ML_LARFT_ROWS .. of every staged chunk of
  // H ML_LARFT_ROWS rows; its lane l = lane % 256 sums the 4 x 4 tile of G at rows 4 (l % 16)
  // .., columns 4 (l / 16) .. (only entries q < c < jb are kept): 8 shared loads and 16 fmas a
  // row. The slices' tiles are added in slice order at the end.
  const int H = ml_larft_blocks_slices(gs), hs = lane / ML_LARFT_BLOCK_LANES;
  const int tl = lane % ML_LARFT_BLOCK_LANES, q0 = 4 * (tl % 16), c0 = 4 * (tl / 16);
  const bool tile = hs < H && q0 < jb && c0 < jb && q0 < c0 + 4;
  const int chunk = H * ML_LARFT_ROWS;
  float acc[16];
  ML_UNROLL
  for (int t = 0; t < 16; ++t) acc[t] = 0.0f;
  for (int i0 = 0; i0 < r; i0 += chunk) {
    ml_barrier(ctx);
    for (int e = lane; e < chunk * jb; e += gs) {
      const int i = e % chunk, c = e / chunk;
      S[i * ls + c] = i0 + i < r ? V[(ml_i64)c * ldv + i0 + i] : 0.0f;
    }
    ml_barrier(ctx);
    const int ia = hs * ML_LARFT_ROWS, left = r - i0 - ia;
    const int ib = ia + (left < ML_LARFT_ROWS ? left : ML_LARFT_ROWS);
    if (tile)
      for (int i = ia; i < ib; ++i) {
        float x[4], y[4];
        ML_UNROLL
        for (int a = 0; a < 4; ++a) {
          x[a] = q0 + a < jb ? S[i * ls + q0 + a] : 0.0f;
          y[a] = c0 + a < jb ? S[i * ls + c0 + a] : 0.0f;
        }
        ML_UNROLL
        for (int a = 0; a < 4; ++a) {
          ML_UNROLL
          for (int b2 = 0; b2 < 4; ++b2) acc[4 * a + b2] = ml_fma(x[a], y[b2], acc[4 * a + b2]);
        }
      }
  }
  // The slices' tiles through S (H nb x nb), summed in slice order into G.
  ml_barrier(ctx);
  ML_UNROLL
  for (int a = 0; a < 4; ++a) {
    ML_UNROLL
    for (int b2 = 0; b2 < 4; ++b2) {
      const int q = q0 + a, c = c0 + b2;
      if (tile && q < c && c < jb) S[(hs * nb + q) * nb + c] = acc[4 * a + b2];
    }
  }
  ml_barrier(ctx);
  for (int e = lane; e < jb * jb; e += gs) {
    const int c = e / jb, q = e - c * jb;
    if (q >= c) continue;
    float g = 0.0f;
    for (int h = 0; h < H; ++h) g += S[(h * nb + q) * nb + c];
    G[q * nb + c] = g;
  }
  ml_larft_from_gram(ctx, G, ts, jb, nb, Ts,
                     ws + p.off[ML_LARFT_T] + b * p.stride[ML_LARFT_T] + (ml_i64)k * nb * nb);
}

// larft: one group per matrix. p.m = r (rows of V), ML_LARFT_COUNT = jb, ML_LARFT_LDT = nb.
// Operands: ML_LARFT_V (column-major, its ld; explicit, unit lower trapezoidal), ML_LARFT_TAU
// (jb floats), ML_LARFT_T (nb x nb, column-major, ld nb). Shared:
// ml_larft_step_shared_floats(nb).
ML_FN void ml_step_larft(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  if (ML_LARFT_BLOCKS(p) > 0) {
    ml_larft_blocks(ctx, p, ws);
    return;
  }
  const ml_i64 b = ctx.group_id;
  const int r = p.m, jb = ML_LARFT_COUNT(p), nb = ML_LARFT_LDT(p), ldv = p.ld[ML_LARFT_V];
  ML_DEVICE const float *V = ws + p.off[ML_LARFT_V] + b * p.stride[ML_LARFT_V];
  ML_DEVICE const float *tau = ws + p.off[ML_LARFT_TAU] + b * p.stride[ML_LARFT_TAU];
  ML_SHARED float *G = ctx.scratch;
  ML_SHARED float *Ts = G + nb * nb;
  ML_SHARED float *ts = Ts + nb * nb;
  for (int c = ctx.lane; c < jb; c += ctx.group_size) ts[c] = tau[c];
  ml_larft_gram_simd(ctx, V, (ml_i64)ldv, r, jb, nb, G);
  ml_barrier(ctx);
  ml_larft_from_gram(ctx, G, ts, jb, nb, Ts, ws + p.off[ML_LARFT_T] + b * p.stride[ML_LARFT_T]);
}

// larft from a Gram matrix formed by a matrix product: G = V[top:r]^T V[top:r] over the rows
// below the jb x jb top block (top = jb), then here the top block's unit lower part (its
// diagonal taken as 1, nothing above it read) and the recurrence. One group per matrix.
// Arguments as ml_step_larft's, and ML_LARFT_HAS_G = 1 when G holds the product (0: no rows
// below the top block, G taken as 0); operand ML_LARFT_T: G in, T out (nb x nb, column-major,
// ld nb: the same slot, G read before T is written). Shared: ml_larft_step_shared_floats(nb).
ML_FN void ml_step_larft_gram(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 b = ctx.group_id;
  const int jb = ML_LARFT_COUNT(p), nb = ML_LARFT_LDT(p);
  ML_SHARED float *G = ctx.scratch;
  ML_SHARED float *Ts = G + nb * nb;  // the top block's part first (free until the recurrence)
  ML_SHARED float *ts = Ts + nb * nb;
  ml_larft_gram_top(ctx, p, ws, b, G, nb, Ts, ts);
  ml_larft_from_gram(ctx, G, ts, jb, nb, Ts, ws + p.off[ML_LARFT_T] + b * p.stride[ML_LARFT_T]);
}

#endif  // ML_KERNELS_LARFT_H
