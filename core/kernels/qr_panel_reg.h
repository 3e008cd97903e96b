// The blocked QR's panel with the panel in registers (qr_panel_reg): the same operands,
// outputs and contract as qr_panel (qr_blocked.h: R's rows and the reflectors in W, V
// explicitly, the panel's T, tau, the rank flag), for panels of up to 32 columns whose rows
// fit the group's registers.
//
// Layout: lane l of a group of gs lanes owns the panel rows l, l + gs, ..., l + (RPL - 1) gs,
// all NB (>= jb) columns of each in registers (RPL NB <= 64 floats, 512 lanes at most, the
// fewest lanes that hold the rows: a simdgroup's share of a column's fixed work is the same
// whatever its rows). Measured on the H200 (benchmarks/results/nvidia-h200-qr-reg.md): 128
// floats a lane at 256 lanes spill (255 registers, a stack frame) and were slower. Column c takes one pass
// over the lane's rows that forms, for every column l at once, the partial sum of u_i x_il over
// the rows i > c (u = column c's tail): l = c gives sigma = u^T u, l > c the products the
// trailing columns' update needs, l < c the Gram entries v_l^T v_c that T's column c needs
// (LAPACK's larft recurrence). A simdgroup folds its NB partials into one value per lane by a
// halving exchange (31 shuffles for 32 columns instead of 32 x 5), the simdgroups' values meet
// in shared memory, and after one group barrier every lane sums them in the same order: the
// same totals, the same reflector in every lane. One barrier per column (the partials' buffer
// alternates), no shared-memory traffic for the panel itself; the workspace is read and
// written once. Against qr_panel (a simdgroup per column over the panel in shared memory, three
// barriers per column, a dependent loop over the rows per product): the arithmetic is the
// same, the latency chain of a column is a few dozen instructions instead of a few hundred.
// Forms (ML_QRR_FORM_*, Options::qr_panel_reg_form): the column loop above (ml_qrr_run) takes c
// as a run-time index, so every access to register column c (the tail u, each column's update
// and T's Gram entries) is a select or a predicate over all NB columns (~900 instructions a
// warp a column at NB = 16 on the H200). The default form rotates the registers instead: the
// current column is always register column 0 (RPL x NB moves after each column, a compact loop
// body that stays in the instruction cache); the unrolled form unrolls the column loop (column
// c a compile-time index, the updates only right of c, 8 or 16 columns: more code). Both
// (ml_qrr_col) let each lane turn the total it holds into its column's update factor, R's
// entry in the pivot row (written to W at once) and the Gram entry, so a register column's
// update is one shuffle and RPL fmas, and build T's column by pairs (row, column) a lane each.
#ifndef ML_KERNELS_QR_PANEL_REG_H
#define ML_KERNELS_QR_PANEL_REG_H

#include "qr_blocked.h"

// Floats of the panel a lane may hold, and the most lanes of a group.
#define ML_QRR_REGS 64
#define ML_QRR_MAX_LANES 512

// The register class of a panel of nb columns: 8, 16 or 32 columns.
ML_HOST_FN int ml_qrr_class(int nb) { return nb <= 8 ? 8 : nb <= 16 ? 16 : 32; }

// Rows per lane for r rows over gs lanes: the next power of two of ceil(r / gs).
ML_HOST_FN int ml_qrr_rows_per_lane(int r, int gs) {
  const int q = (r + gs - 1) / gs;
  int p = 1;
  while (p < q) p *= 2;
  return p;
}

// Lanes of the panel step over r rows of nb columns with groups of at most max_group lanes:
// whole simdgroups, as few as hold the rows at ML_QRR_REGS floats a lane (a simdgroup's share
// of a column's fixed work is the same whatever its rows, so fewer, fuller lanes issue less),
// at most ML_QRR_MAX_LANES (the step's launch bound).
ML_HOST_FN int ml_qrr_lanes(int r, int nb, int max_group) {
  const int most = (max_group < ML_QRR_MAX_LANES ? max_group : ML_QRR_MAX_LANES) / 32 * 32;
  const int rows = ML_QRR_REGS / ml_qrr_class(nb);  // rows a lane may hold
  const int need = ((r + rows - 1) / rows + 31) / 32 * 32;
  const int gs = need < most ? need : most;
  return gs < 32 ? 32 : gs;
}

// Whether r rows of nb columns fit the registers of ml_qrr_lanes(r, nb, max_group) lanes.
ML_HOST_FN int ml_qrr_fits(int r, int nb, int max_group) {
  if (nb < 1 || nb > 32 || max_group < 32 || r < 1) return 0;
  const int gs = ml_qrr_lanes(r, nb, max_group);
  return ml_qrr_rows_per_lane(r, gs) * ml_qrr_class(nb) <= ML_QRR_REGS;
}

// The widest panel (<= nb_max, one of 32, 16, 8 or nb_max itself when narrower) whose r rows fit;
// 0: none.
ML_HOST_FN int ml_qrr_width(int r, int nb_max, int max_group) {
  const int widths[4] = {nb_max < 32 ? nb_max : 32, 16, 8, 0};
  for (int i = 0; i < 4; ++i) {
    const int nb = widths[i] < nb_max ? widths[i] : nb_max;
    if (nb >= 1 && ml_qrr_fits(r, nb, max_group)) return nb;
  }
  return 0;
}

// Shared floats of the step with gs lanes and T's leading dimension nb: the simdgroups'
// partials and the pivot row (two buffers each), T, tau, each reflector's scale and beta, a
// reduction buffer.
ML_HOST_FN int ml_qrr_shared_floats(int nb, int gs) {
  return 2 * (gs / 32) * 32 + 2 * 32 + nb * nb + 3 * 32 + ML_RED_FLOATS;
}

// Folds v[0..CNT) (this lane's partial sums, CNT a power of two <= 2 O) over the simdgroup's
// lane bits O, O / 2, ..., 1: at the end v[0] holds the total over those lanes of the column
// ml_qrr_fold_shift picks for this lane (every lane of the same column the same bits: each
// step adds the same two values). Halving exchanges while more than one value is left (a lane
// keeps the half its lane bit selects and sends the other), then plain butterfly steps. Every
// lane of the simdgroup calls.
template <int CNT, int O>
ML_FN void ml_qrr_fold(ML_CTX ctx, ML_THREAD float *v) {
  const int sl = ml_simd_lane(ctx);
  int count = CNT;
  ML_UNROLL
  for (int o = O; o >= 1; o >>= 1) {
    if (count > 1) {
      const int h = count / 2;
      const bool up = (sl & o) != 0;
      ML_UNROLL
      for (int i = 0; i < CNT / 2; ++i) {
        if (i < h) {
          const float send = up ? v[i] : v[i + h];
          const float keep = up ? v[i + h] : v[i];
          v[i] = keep + ml_simd_shuffle_xor_full(ctx, send, o);
        }
      }
      count = h;
    } else {
      v[0] += ml_simd_shuffle_xor_full(ctx, v[0], o);
    }
  }
}

// The column whose total lane sl holds after the pass and fold of NB columns; the lanes of column l are
// l << shift .. (l << shift) + (1 << shift) - 1, shift = 5 - log2(NB).
template <int NB>
ML_FN int ml_qrr_fold_shift() {
  return NB == 32 ? 0 : NB == 16 ? 1 : 2;
}

// One column's pass: this lane's sums of u_i x_il over its rows for every column l, folded
// over the simdgroup (ml_qrr_fold), the first exchange (lane bit 16) taken as each pair of sums
// is ready: NB / 2 values live instead of NB. v[0] ends with the simdgroup's total of the
// column ml_qrr_fold_shift picks for this lane.
template <int RPL, int NB>
ML_FN void ml_qrr_pass(ML_CTX ctx, ML_THREAD const float *u, ML_THREAD const float (*x)[NB],
                       ML_THREAD float *v) {
  const bool up16 = (ml_simd_lane(ctx) & 16) != 0;
  ML_UNROLL
  for (int l = 0; l < NB / 2; ++l) {
    float s0 = 0.0f, s1 = 0.0f;
    ML_UNROLL
    for (int k = 0; k < RPL; ++k) {
      s0 += u[k] * x[k][l];
      s1 += u[k] * x[k][l + NB / 2];
    }
    v[l] = (up16 ? s1 : s0) + ml_simd_shuffle_xor_full(ctx, up16 ? s0 : s1, 16);
  }
  ml_qrr_fold<NB / 2, 8>(ctx, v);
}

// The panel's factorisation with RPL rows per lane and NB register columns (jb <= NB).
// P: the panel (rows j.. of W's columns j..), V likewise; Tout: the panel's T (ld nb); tau_out:
// where the taus go when has_tau. Returns whether a diagonal entry of R is exactly zero.
// The reflector of the column whose products the pass just summed (tot: this lane's total of
// column idx over the group; src: the lane holding u^T u; alpha: the pivot), into h and vs (the
// factor of u in v = [1; vs u]). Below ML_QR_FUSED_MIN (group-uniform: every lane holds the same
// sigma) the column is scaled first (by 2^60 when its plain sum underflowed) and the products
// formed and summed again from the scaled column (store: whether this lane writes its
// simdgroup's folded value, slot w of pw), vs = 1. Returns the total of column idx to use.
template <int RPL, int NB>
ML_FN float ml_qrr_reflector(ML_CTX ctx, ML_THREAD float *u, ML_THREAD const float (*x)[NB],
                             ML_SHARED float *pw, ML_SHARED float *red, bool store, int w,
                             int idx, int nw, float tot, int src, float alpha,
                             ML_THREAD ml_house_t *h, ML_THREAD float *vs) {
  const float sigma = ml_simd_shuffle_full(ctx, tot, src);
  if (sigma >= ML_QR_FUSED_MIN) {
    ml_house_finish(alpha, sigma, 1.0f, h);
    *vs = h->scale;
    return tot;
  }
  float sg = sigma, up = 1.0f;
  if (!(sigma >= ML_HOUSE_TINY)) {
    float s = 0.0f;
    ML_UNROLL
    for (int k = 0; k < RPL; ++k) s += (u[k] * ML_HOUSE_UP) * (u[k] * ML_HOUSE_UP);
    sg = ml_group_sum(ctx, s, red);
    up = ML_HOUSE_UP;
  }
  ml_house_finish(alpha, sg, up, h);
  ML_UNROLL
  for (int k = 0; k < RPL; ++k) u[k] *= h->scale;
  float v[NB / 2];
  ml_qrr_pass<RPL, NB>(ctx, u, x, v);
  ml_barrier(ctx);  // every lane has read pw
  if (store) pw[w * 32 + idx] = v[0];
  ml_barrier(ctx);
  tot = 0.0f;
  for (int q = 0; q < nw; ++q) tot += pw[q * 32 + idx];
  *vs = 1.0f;
  return tot;
}

template <int RPL, int NB>
ML_FN bool ml_qrr_run(ML_CTX ctx, ML_DEVICE float *P, int ld, ML_DEVICE float *V, int ldv,
                      int j, int r, int jb, int nb, ML_DEVICE float *Tout,
                      ML_DEVICE float *tau_out, bool has_tau) {
  const int lane = ctx.lane, gs = ctx.group_size, nw = ml_simd_count(ctx);
  const int w = ml_simd_id(ctx), sl = ml_simd_lane(ctx);
  const int shift = ml_qrr_fold_shift<NB>();
  const int idx = sl >> shift;  // the column this lane's folded total belongs to
  ML_SHARED float *part = ctx.scratch;     // [2][nw][32]
  ML_SHARED float *rowc = part + 2 * nw * 32;  // [2][32]: the pivot row
  ML_SHARED float *Ts = rowc + 2 * 32;     // nb x nb, column-major
  ML_SHARED float *taus = Ts + nb * nb;    // 32
  ML_SHARED float *cs = taus + 32;         // 32: column c's reflector is cs[c] x below row c
  ML_SHARED float *bs = cs + 32;           // 32: R's diagonal
  ML_SHARED float *red = bs + 32;          // ML_RED_FLOATS
  float x[RPL][NB];
  ML_UNROLL
  for (int k = 0; k < RPL; ++k) {
    const int i = lane + k * gs;
    ML_UNROLL
    for (int l = 0; l < NB; ++l)
      x[k][l] = i < r && l < jb ? P[(ml_i64)l * ld + i] : 0.0f;
  }
  for (int e = lane; e < nb * nb; e += gs) Ts[e] = 0.0f;
  bool zero_diag = false;
  for (int c = 0; c < jb; ++c) {
    const int buf = c & 1;
    ML_SHARED float *pw = part + buf * nw * 32;
    ML_SHARED float *rc = rowc + buf * 32;
    // u: column c below the diagonal (0 elsewhere).
    float u[RPL];
    ML_UNROLL
    for (int k = 0; k < RPL; ++k) {
      const int i = lane + k * gs;
      float s = 0.0f;
      ML_UNROLL
      for (int l = 0; l < NB; ++l) s = l == c ? x[k][l] : s;
      u[k] = i > c && i < r ? s : 0.0f;
    }
    // The pivot row (row c, lane c's first row) for every lane.
    if (lane == c) {
      ML_UNROLL
      for (int l = 0; l < NB; ++l) rc[l] = x[0][l];
    }
    float v[NB / 2];
    ml_qrr_pass<RPL, NB>(ctx, u, x, v);
    if ((sl & ((1 << shift) - 1)) == 0) pw[w * 32 + idx] = v[0];
    ml_barrier(ctx);
    float tot = 0.0f;  // the group's total of column idx
    for (int q = 0; q < nw; ++q) tot += pw[q * 32 + idx];
    ml_house_t h;
    float vs;  // factor of u in the reflector: v_c = [1; vs u]
    tot = ml_qrr_reflector<RPL, NB>(ctx, u, x, pw, red, (sl & ((1 << shift) - 1)) == 0, w, idx,
                                    nw, tot, c << shift, rc[c], &h, &vs);
    zero_diag = zero_diag || h.beta == 0.0f;
    // Every column: its total (shuffled from the lanes holding it), f_l = x_l[c] + vs t_l,
    // which is (H's product with column l) / tau for l > c and v_l^T v_c for l < c.
    ML_UNROLL
    for (int l = 0; l < NB; ++l) {
      const float t = ml_simd_shuffle_full(ctx, tot, l << shift);
      if (l > c && l < jb) {
        const float wl = h.tau * (rc[l] + vs * t), g = wl * vs;
        ML_UNROLL
        for (int k = 0; k < RPL; ++k) x[k][l] -= u[k] * g;
        if (lane == c) x[0][l] -= wl;
      }
    }
    // T's column c (LAPACK's larft recurrence), lane q < c of the first simdgroup its row q:
    // T[q, c] = -tau sum_{q <= l < c} T[q, l] (v_l^T v_c), v_l^T v_c = cs[l] f_l (the earlier
    // columns stay unscaled in the registers).
    if (w == 0 && c > 0) {
      float tq = 0.0f;
      ML_UNROLL
      for (int l = 0; l < NB; ++l) {
        const float t = ml_simd_shuffle_full(ctx, tot, l << shift);
        if (l < c && l >= sl) tq += Ts[l * nb + sl] * (cs[l] * (rc[l] + vs * t));
      }
      if (sl < c) Ts[c * nb + sl] = -h.tau * tq;
    }
    if (lane == c) {
      Ts[c * nb + c] = h.tau;
      taus[c] = h.tau;
      cs[c] = h.scale;  // the fallback scaled u by it: its x stays unscaled too
      bs[c] = h.beta;
    }
  }
  ml_barrier(ctx);  // T, tau, the scales and betas complete
  // Back to the workspace: R's rows and the reflectors in W (scaled now: cs[l] x below the
  // diagonal, beta on it), V explicitly (zeros above the panel too: an outer panel's products
  // read V from its first row).
  ML_UNROLL
  for (int k = 0; k < RPL; ++k) {
    const int i = lane + k * gs;
    if (i >= r) continue;
    ML_UNROLL
    for (int l = 0; l < NB; ++l) {
      if (l < jb) {
        const float y = i < l ? x[k][l] : (i == l ? bs[l] : cs[l] * x[k][l]);
        P[(ml_i64)l * ld + i] = y;
        V[(ml_i64)l * ldv + i] = i < l ? 0.0f : (i == l ? 1.0f : y);
      }
    }
  }
  for (int c = 0; c < jb; ++c)
    for (int i = lane; i < j; i += gs) V[(ml_i64)c * ldv + i - j] = 0.0f;
  for (int e = lane; e < nb * nb; e += gs) Tout[e] = Ts[e];
  if (has_tau)
    for (int c = lane; c < jb; c += gs) tau_out[c] = taus[c];
  return zero_diag;
}

// The forms of the panel step (bits 8..9 of the step's flags): the first one above, with the
// column a run-time index (every access to register column c a select over all NB columns);
// the rotating one, a loop whose current column is always register column 0 (the registers
// shift by one column after each); the unrolled one, the columns' loop unrolled so that column
// c is a compile-time index (class 32 takes the rotating one: 32 unrolled columns are too much
// code).
#define ML_QRR_FORM_SHIFT 8
#define ML_QRR_FORM_RUNTIME 0
#define ML_QRR_FORM_ROTATE 1
#define ML_QRR_FORM_UNROLL 2

// One column c of the rotating (ROT) or unrolled form: register column pc = ROT ? 0 : c holds
// it, register column l holds column ROT ? (l + c) mod NB : l (the finished columns at the end
// when rotating). The same pass, fold and barrier as ml_qrr_run; after them each lane turns
// the total it holds (register column idx) into that column's own numbers: the update's factor
// g (0 but for columns right of c), R's entry in row c (written to the workspace at once by the
// first simdgroup: the pivot row's registers are never updated) and the Gram entry v_l^T v_c
// (columns left of c), so that the update costs one shuffle and RPL fmas a register column,
// on the columns right of c only when unrolled. T's column c by pairs (q, l) a lane each, NB
// lanes of a row q summing by butterfly, not a dependent loop of one lane per row.
template <int RPL, int NB, bool ROT>
ML_FN void ml_qrr_col(ML_CTX ctx, ML_THREAD float (*x)[NB], int c, int r, int jb, int nb,
                      ML_DEVICE float *P, int ld, ML_SHARED float *part, ML_SHARED float *rowc,
                      ML_SHARED float *Ts, ML_SHARED float *taus, ML_SHARED float *cs,
                      ML_SHARED float *bs, ML_SHARED float *red, ML_THREAD bool *zero_diag) {
  const int lane = ctx.lane, gs = ctx.group_size, nw = ml_simd_count(ctx);
  const int w = ml_simd_id(ctx), sl = ml_simd_lane(ctx);
  const int shift = ml_qrr_fold_shift<NB>();
  const int lg = NB == 32 ? 5 : NB == 16 ? 4 : 3;
  const int idx = sl >> shift;                        // register column of this lane's total
  const bool first = (sl & ((1 << shift) - 1)) == 0;  // the first lane of those holding it
  const int pc = ROT ? 0 : c;                         // register column of column c
  const int col = ROT ? (idx + c) & (NB - 1) : idx;   // the column of register column idx
  const int buf = c & 1;
  ML_SHARED float *pw = part + buf * nw * 32;
  ML_SHARED float *rc = rowc + buf * 32;  // the pivot row by register column
  float u[RPL];
  ML_UNROLL
  for (int k = 0; k < RPL; ++k) {
    const int i = lane + k * gs;
    u[k] = i > c && i < r ? x[k][pc] : 0.0f;
  }
  if (lane == c) {
    ML_UNROLL
    for (int l = 0; l < NB; ++l) rc[l] = x[0][l];
  }
  float v[NB / 2];
  ml_qrr_pass<RPL, NB>(ctx, u, x, v);
  if (first) pw[w * 32 + idx] = v[0];
  ml_barrier(ctx);
  float t0 = 0.0f, t1 = 0.0f;  // the group's total of register column idx, two chains
  int q = 0;
  for (; q + 1 < nw; q += 2) {
    t0 += pw[q * 32 + idx];
    t1 += pw[(q + 1) * 32 + idx];
  }
  if (q < nw) t0 += pw[q * 32 + idx];
  float tot = t0 + t1;
  ml_house_t h;
  float vs;  // factor of u in the reflector: v_c = [1; vs u]
  tot = ml_qrr_reflector<RPL, NB>(ctx, u, x, pw, red, first, w, idx, nw, tot, pc << shift,
                                  rc[pc], &h, &vs);
  *zero_diag = *zero_diag || h.beta == 0.0f;
  // f = x_col[c] + vs t: (H's product with the column) / tau right of c, v_col^T v_c left of it.
  const float f = rc[idx] + vs * tot, wl = h.tau * f;
  const bool right = col > c;
  const float g = right ? wl * vs : 0.0f;
  float gram = 0.0f;
  if (col < c) gram = cs[col] * f;  // the earlier columns stay unscaled in the registers
  if (w == 0 && first && right && col < jb) P[(ml_i64)col * ld + c] = rc[idx] - wl;
  ML_UNROLL
  for (int l = 0; l < NB; ++l) {
    if (l > pc) {
      const float gl = ml_simd_shuffle_full(ctx, g, l << shift);
      ML_UNROLL
      for (int k = 0; k < RPL; ++k) x[k][l] -= u[k] * gl;
    }
  }
  // T[q, c] = -tau sum_{q <= l < c} T[q, l] (v_l^T v_c) (LAPACK's larft recurrence): pair
  // (q, l) = (e / NB, e mod NB) on lane e (mod gs), rows q < c only.
  for (int base = 0; base < c * NB; base += gs) {
    if (base + w * 32 < c * NB) {  // simdgroup-uniform
      const int e = base + lane, tq = e >> lg, l = e & (NB - 1);
      const int pl = ROT ? (l - c) & (NB - 1) : l;
      const float gl = ml_simd_shuffle_full(ctx, gram, pl << shift);
      float s = 0.0f;
      if (tq < c && l >= tq && l < c) s = Ts[l * nb + tq] * gl;
      ML_UNROLL
      for (int o = NB / 2; o >= 1; o >>= 1) s += ml_simd_shuffle_xor_full(ctx, s, o);
      if (l == 0 && tq < c) Ts[c * nb + tq] = -h.tau * s;
    }
  }
  if (lane == c) {
    Ts[c * nb + c] = h.tau;
    taus[c] = h.tau;
    cs[c] = h.scale;  // the fallback scaled u by it: its x stays unscaled too
    bs[c] = h.beta;
  }
}

// The panel by the rotating (ROT) or the unrolled form (ml_qrr_col); ml_qrr_run's contract.
template <int RPL, int NB, bool ROT>
ML_FN bool ml_qrr_run_ct(ML_CTX ctx, ML_DEVICE float *P, int ld, ML_DEVICE float *V, int ldv,
                         int j, int r, int jb, int nb, ML_DEVICE float *Tout,
                         ML_DEVICE float *tau_out, bool has_tau) {
  const int lane = ctx.lane, gs = ctx.group_size, nw = ml_simd_count(ctx);
  ML_SHARED float *part = ctx.scratch;         // [2][nw][32]
  ML_SHARED float *rowc = part + 2 * nw * 32;  // [2][32]: the pivot row
  ML_SHARED float *Ts = rowc + 2 * 32;         // nb x nb, column-major
  ML_SHARED float *taus = Ts + nb * nb;        // 32
  ML_SHARED float *cs = taus + 32;             // 32: column c's reflector is cs[c] x below row c
  ML_SHARED float *bs = cs + 32;               // 32: R's diagonal
  ML_SHARED float *red = bs + 32;              // ML_RED_FLOATS
  float x[RPL][NB];
  ML_UNROLL
  for (int k = 0; k < RPL; ++k) {
    const int i = lane + k * gs;
    ML_UNROLL
    for (int l = 0; l < NB; ++l)
      x[k][l] = i < r && l < jb ? P[(ml_i64)l * ld + i] : 0.0f;
  }
  for (int e = lane; e < nb * nb; e += gs) Ts[e] = 0.0f;
  bool zero_diag = false;
  if (ROT) {
    for (int c = 0; c < jb; ++c) {
      ml_qrr_col<RPL, NB, ROT>(ctx, x, c, r, jb, nb, P, ld, part, rowc, Ts, taus, cs, bs, red,
                               &zero_diag);
      ML_UNROLL
      for (int k = 0; k < RPL; ++k) {
        const float x0 = x[k][0];
        ML_UNROLL
        for (int l = 0; l + 1 < NB; ++l) x[k][l] = x[k][l + 1];
        x[k][NB - 1] = x0;
      }
    }
  } else {
    ML_UNROLL
    for (int c = 0; c < NB; ++c)
      if (c < jb)
        ml_qrr_col<RPL, NB, ROT>(ctx, x, c, r, jb, nb, P, ld, part, rowc, Ts, taus, cs, bs, red,
                                 &zero_diag);
  }
  ml_barrier(ctx);  // T, tau, the scales and betas complete
  // Back to the workspace: the reflectors (scaled now) and beta in W (R's rows above the
  // diagonal are there already), V explicitly (zeros above the panel too).
  ML_UNROLL
  for (int k = 0; k < RPL; ++k) {
    const int i = lane + k * gs;
    if (i >= r) continue;
    ML_UNROLL
    for (int p = 0; p < NB; ++p) {
      const int l = ROT ? (p + jb) & (NB - 1) : p;  // the column register column p holds
      if (l < jb) {
        if (i >= l) {
          const float y = i == l ? bs[l] : cs[l] * x[k][p];
          P[(ml_i64)l * ld + i] = y;
          V[(ml_i64)l * ldv + i] = i == l ? 1.0f : y;
        } else {
          V[(ml_i64)l * ldv + i] = 0.0f;
        }
      }
    }
  }
  for (int c = 0; c < jb; ++c)
    for (int i = lane; i < j; i += gs) V[(ml_i64)c * ldv + i - j] = 0.0f;
  for (int e = lane; e < nb * nb; e += gs) Tout[e] = Ts[e];
  if (has_tau)
    for (int c = lane; c < jb; c += gs) tau_out[c] = taus[c];
  return zero_diag;
}

// qr_panel_reg: qr_panel's arguments and operands (ML_QRP_*); group size a multiple of 32 with
// ml_qrr_rows_per_lane(m - j, group size) x ml_qrr_class(nb) <= ML_QRR_REGS; shared
// ml_qrr_shared_floats(nb, group size). CLS 0: every class, the flags' form; CLS 8 or 16: that
// class in the rotating form only (the qr_panel_rot* steps: kernels without the other forms'
// and classes' code, whose registers the compiler allocates for that class's loops: sm_90,
// 512 lanes: no spill at 16, 16 bytes at 8, against 160 for qr_panel_reg), for RMIN <= rows
// per lane <= RMAX.
template <int CLS, int RMIN, int RMAX>
ML_FN void ml_qrr_step(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE float *ws) {
  if (ctx.group_id >= p.groups) return;
  const ml_i64 b = ctx.group_id;
  const int j = ML_QRP_COL(p), jb = ML_QRP_WIDTH(p), nb = ML_QRP_LDT(p);
  const int r = p.m - j;
  const int ld = p.ld[ML_QRP_W], ldv = p.ld[ML_QRP_V];
  ML_DEVICE float *P = ws + p.off[ML_QRP_W] + b * p.stride[ML_QRP_W] + (ml_i64)j * ld + j;
  ML_DEVICE float *V = ws + p.off[ML_QRP_V] + b * p.stride[ML_QRP_V] + (ml_i64)j * ldv + j;
  ML_DEVICE float *T = ws + p.off[ML_QRP_T] + b * p.stride[ML_QRP_T];
  ML_DEVICE float *st = ws + p.off[ML_QRP_STAT] + b * p.stride[ML_QRP_STAT];
  const bool has_tau = ML_QRP_TAU_AT(p) > 0;
  ML_DEVICE float *tau = ws + (has_tau ? ML_QRP_TAU_AT(p) + b * p.stride[ML_QRP_STAT] + j : 0);
  const int rpl = ml_qrr_rows_per_lane(r, ctx.group_size), cls = ml_qrr_class(nb);
  const int form = (p.flags >> ML_QRR_FORM_SHIFT) & 3;
  bool zero_diag = false;
  // A class kernel's rows per lane clamped to its range at compile time: the branches outside
  // it (never taken) instantiate no other shape.
#define ML_QRR_R(R) (R < RMIN ? RMIN : R > RMAX ? RMAX : R)
#define ML_QRR_RUN(R, N)                                                                        \
  zero_diag = CLS != 0                                                                         \
                  ? ml_qrr_run_ct<ML_QRR_R(R), N, true>(ctx, P, ld, V, ldv, j, r, jb, nb, T, tau, \
                                                        has_tau)                               \
              : form == ML_QRR_FORM_RUNTIME                                                    \
                  ? ml_qrr_run<R, N>(ctx, P, ld, V, ldv, j, r, jb, nb, T, tau, has_tau)         \
              : form == ML_QRR_FORM_UNROLL && N <= 16                                          \
                  ? ml_qrr_run_ct<R, N, (N > 16)>(ctx, P, ld, V, ldv, j, r, jb, nb, T, tau, has_tau) \
                  : ml_qrr_run_ct<R, N, true>(ctx, P, ld, V, ldv, j, r, jb, nb, T, tau, has_tau)
  if (CLS == 0 && cls == 32) {
    if (rpl == 1) ML_QRR_RUN(1, 32);
    else ML_QRR_RUN(2, 32);
  } else if (CLS == 16 || (CLS == 0 && cls == 16)) {
    if (rpl == 1) ML_QRR_RUN(1, 16);
    else if (rpl == 2) ML_QRR_RUN(2, 16);
    else ML_QRR_RUN(4, 16);
  } else {
    if (rpl == 1) ML_QRR_RUN(1, 8);
    else if (rpl == 2) ML_QRR_RUN(2, 8);
    else if (rpl == 4) ML_QRR_RUN(4, 8);
    else ML_QRR_RUN(8, 8);
  }
#undef ML_QRR_RUN
#undef ML_QRR_R
  if (ctx.lane == 0 && zero_diag) st[2] = (float)((int)st[2] | ML_INFO_RANK_DEFICIENT);
}

ML_FN void ml_step_qr_panel_reg(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  ml_qrr_step<0, 1, 8>(ctx, p, ws);
}
// The rotating form of class 16 and of class 8; qr_panel_reg's contract otherwise.
ML_FN void ml_step_qr_panel_rot16(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  ml_qrr_step<16, 1, 4>(ctx, p, ws);
}
ML_FN void ml_step_qr_panel_rot8(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  ml_qrr_step<8, 1, 8>(ctx, p, ws);
}

#endif  // ML_KERNELS_QR_PANEL_REG_H
