// Two-stage tridiagonalisation of a symmetric matrix, the steps of its second stage (the host
// sequences both: core/src/blocked_eigh2.cpp). The first stage reduces the matrix to a band of
// half-width bw by QR panels and matrix products (qr_blocked.h, larft.h, gemm.h); these steps
// then bring the band to tridiagonal form by bulge chasing, on the full symmetric n x n matrix
// (column-major, ld[0]) where the first stage left it:
//   sb_band     the band made exact: entries up to 3 bw below the diagonal (all the chase
//               reads) outside the band set to 0, those inside mirrored into the upper triangle;
//   sb_chase    one wavefront of the chase: every active sweep advances by K tasks;
//   sb_sweeps   the whole chase in one launch, groups taking sweeps by tickets and waiting on
//               the sweep before through progress words in device memory;
//   sb_extract  d and e of the tridiagonal;
// and in sb2st_block.h, sb_block: the whole chase of a matrix in one group, its simdgroups
// taking the sweeps (ml_sb_sweep_w at SC 1), hand-offs through shared memory.
// When operand 3 is given (p.off[3] > 0), each task also stores its reflector for the
// back-transformation of eigenvectors: task t of sweep s at slot q = s T0 + t (T0 =
// ml_sb_tasks(n, bw, 0)), floats [q (bw + 1), q (bw + 1) + m) hold v (v[0] = 1, m <= bw rows
// from r0 = s + 1 + t bw) and float q (bw + 1) + bw its tau (0: H = I). The chase applies
// each H = I - tau v v^T as A := H A H, so with H_1 .. H_N in the order the chase applied them
// (sweeps in order, a sweep's tasks in order) the tridiagonal is T = Q2^T B Q2, Q2 = H_1 .. H_N,
// and the band B's eigenvectors are Q2 times T's (H_N applied first).
// Sweep s (0 <= s <= n - 3) annihilates column s below its subdiagonal; its task t reflects rows
// J = [r0, r1), r0 = s + 1 + t bw, r1 = min(r0 + bw, n) (at least two rows), with the reflector
// of column c0 (s for t = 0, else r0 - bw: the first column of the bulge task t - 1 made) over
// those rows, applied on both sides to rows and columns [c0, hi), hi = min(n, r1 + bw): nothing
// outside that cross is nonzero in the rows J. Only the bulge's first column is annihilated; the
// rest of it lies in the columns the next sweeps annihilate anyway (the band stays within 2 bw).
// Tasks (s, t) and (s - 1, t') touch disjoint crosses when t' >= t + 3 and depend on each other
// when t' <= t + 2, so a launch may run chunk c of K tasks of sweep s at wavefront L = q s + c
// when q K >= K + 2 (q = 3 for K = 1, q = 2 for K >= 2): every sweep's tasks in order, each
// after the tasks of the sweep before that it depends on, and the launch's groups (one sweep
// each) on disjoint data. No group waits for another: correct on any schedule of the groups.
// sb_sweeps runs the same tasks in one launch, each waiting for the ones it depends on.
// Two implementations of a task, the same mathematics: in groups of one simdgroup (32 lanes)
// up to bw 32, in registers (ml_sb_task_w: a lane per row of each of the cross's blocks, only
// the lower triangle read and written, every sum a loop in one lane); otherwise the cross's
// column strip in shared memory (ml_sb_task, both triangles kept). A launch's groups all take
// the same one, so the one-launch chase and the wavefronts agree to the bit at any group size.
// In (s, t)'s cross the only entry the sweep before changes after its task t + 1 is
// X = A[r0 + 2 bw - 1, r0 + bw - 1] (its task t + 2's pivot): the register sweep
// (ml_sb_sweep_w) loads task t + 1's rows at the start of task t and reloads X alone after
// the wait.
#ifndef ML_KERNELS_SB2ST_H
#define ML_KERNELS_SB2ST_H

#include "blocked_common.h"
#include "householder.h"

// Shared floats of sb_chase for half-width bw: the cross's column strip (3 bw rows, ld 3 bw + 1)
// over bw columns, the reflector, reduction buffers.
// Up to bw 32 also those of the tasks in registers (ml_sb_task_w, ml_sb_sweep_w: 2 BWM floats,
// then two BWM x (BWM + 1) transposes: the rows a sweep carries from task to task, a task's).
ML_HOST_FN int ml_sb_chase_shared_floats(int bw) {
  const int strip = (3 * bw + 1) * bw + bw + ML_RED_FLOATS;
  const int bwm = bw <= 8 ? 8 : bw <= 16 ? 16 : 32;
  const int regs = bw <= 32 ? 2 * bwm + 2 * bwm * (bwm + 1) : 0;
  return strip > regs ? strip : regs;
}

// sb_band: groups batch x n, column j each. p.n = n, i[0] = bw. Operand 0: A (ld[0]); 1: the
// progress words of sb_sweeps (n per matrix), 2: its ticket (one word), both zeroed.
ML_FN void ml_step_sb_band(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int n = p.n, bw = p.i[0], ld = p.ld[0];
  const ml_i64 b = ctx.group_id / n;
  const int j = (int)(ctx.group_id - b * n);
  ML_DEVICE float *A = ws + p.off[0] + b * p.stride[0];
  // The progress words and the ticket of sb_sweeps.
  if (ctx.lane == 0) {
    ws[p.off[1] + b * p.stride[1] + j] = 0.0f;
    if (ctx.group_id == 0) ws[p.off[2]] = 0.0f;
  }
  const int end = ml_imin(n, j + 3 * bw + 1);
  // Column j's entries from the diagonal down; row j of the columns after j (upper triangle)
  // belongs to this group alone.
  for (int i = j + ctx.lane; i < end; i += ctx.group_size) {
    const float x = i - j <= bw ? A[(ml_i64)j * ld + i] : 0.0f;
    A[(ml_i64)j * ld + i] = x;
    if (i > j) A[(ml_i64)i * ld + j] = x;
  }
}

// Slot of task t of sweep s in the reflector store (operand 3), in floats.
ML_FN ml_i64 ml_sb_v2_slot(int n, int bw, int s, int t) {
  return ((ml_i64)s * ((n - 2 + bw - 1) / bw) + t) * (bw + 1);
}

// Floats of the reflector store of one n x n matrix at half-width bw.
ML_HOST_FN ml_i64 ml_sb_v2_floats(int n, int bw) {
  return n < 3 ? 0 : (ml_i64)(n - 2) * ((n - 2 + bw - 1) / bw) * (bw + 1);
}

// Tasks of sweep s of an n x n band of half-width bw.
ML_HOST_FN int ml_sb_tasks(int n, int bw, int s) { return (n - 2 - s + bw - 1) / bw; }

// The task in registers, for a group of one simdgroup (32 lanes) and bw <= BWM <= 32: lane l
// holds row l of each of the cross's three blocks,
//   R.l  column c0 + l over the rows J (l < jo = r0 - c0; lane 0's is the column the reflector
//        annihilates), R.l[j] = A[r0 + j, c0 + l];
//   R.d  row l of J x J, R.d[j] = A[r0 + l, r0 + j] (l < m; loaded for j <= l, the task takes
//        the rest from the lanes holding their mirrors);
//   R.b  row r1 + l below J, R.b[j] = A[r1 + l, r0 + j] (l < nb = hi - r1);
// entries past m are 0. Only the lower triangle of A is read and written, each entry the task
// changes loaded and stored once, and every load and store coalesced (a column's rows from
// consecutive lanes). Every sum is a plain loop in one lane (the same bits in every lane, and in
// the wavefront launches and the one-launch chase); the lanes share x and D v through 2 BWM
// floats of shared memory, and rows through transposes.
template <int BWM>
struct ml_sb_rows {
  float l[BWM], d[BWM], b[BWM];
};

// Barriers of the tasks in registers: the group's when the group is the one simdgroup (SC 0),
// the simdgroup's alone when each simdgroup of a larger group runs sweeps of its own (SC 1,
// sb2st_block.h). Lanes are the simdgroup's (ml_simd_lane) either way.
template <int SC>
ML_FN void ml_sb_bar(ML_CTX ctx) {
  if (SC)
    ml_simd_barrier(ctx);
  else
    ml_barrier(ctx);
}
template <int SC>
ML_FN void ml_sb_bar_device(ML_CTX ctx) {
  if (SC)
    ml_simd_barrier(ctx);
  else
    ml_barrier_device(ctx);
}

// R from A for task (r0, m, c0, jo, r1, nb); parts: 1 R.l, 2 R.d, 4 R.b (the others untouched).
template <int BWM>
ML_FN void ml_sb_load_w(ML_CTX ctx, ML_DEVICE const float *A, int ld, int r0, int m, int c0,
                        int jo, int r1, int nb, int parts, ML_THREAD ml_sb_rows<BWM> *R) {
  const int l = ml_simd_lane(ctx);
  const ml_i64 cl = (ml_i64)(c0 + l) * ld + r0;
  ML_UNROLL
  for (int j = 0; j < BWM; ++j) {
    const ml_i64 cj = (ml_i64)(r0 + j) * ld;
    if (parts & 1) R->l[j] = l < jo && j < m ? A[cl + j] : 0.0f;
    if (parts & 2) R->d[j] = l < m && j <= l ? A[cj + r0 + l] : 0.0f;
    if (parts & 4) R->b[j] = l < nb && j < m ? A[cj + r1 + l] : 0.0f;
  }
}

// Task t of sweep s on R (loaded; R.d its lower entries, j <= l), then R's lower entries back
// to A (R.b only when store_b: a sweep carries them to its next task, which stores them as its
// R.l); sh: ml_sb_chase_shared_floats, its second transpose U used here (R.d's upper entries,
// R.l's coalesced stores). V2 as ml_sb_task. Uniform over the group (SC 0) or the simdgroup
// (SC 1, ml_sb_bar); the caller orders the stores before what reads them.
template <int BWM, int SC = 0>
ML_FN void ml_sb_task_w(ML_CTX ctx, ML_DEVICE float *A, int ld, int n, int bw, int s, int t,
                        ML_SHARED float *sh, ML_DEVICE float *V2, int store, int store_b,
                        ML_THREAD ml_sb_rows<BWM> *R) {
  const int l = ml_simd_lane(ctx);
  const int r0 = s + 1 + t * bw;
  const int r1 = ml_imin(r0 + bw, n), m = r1 - r0;
  const int c0 = t == 0 ? s : r0 - bw, hi = ml_imin(n, r1 + bw);
  const int jo = r0 - c0, nb = hi - r1;
  ML_SHARED float *U = sh + 2 * BWM + BWM * (BWM + 1);  // U[i (BWM + 1) + j]: lane i's [j]
  // x = lane 0's R.l to every lane, the reflector in each; R.d's upper entries from the lanes
  // that hold them (D[l, j] = D[j, l]).
  if (l == 0) {
    ML_UNROLL
    for (int j = 0; j < BWM; ++j) sh[j] = R->l[j];
  }
  if (l < BWM) {
    ML_UNROLL
    for (int j = 0; j < BWM; ++j) U[l * (BWM + 1) + j] = R->d[j];
  }
  ml_sb_bar<SC>(ctx);
  if (l < m) {
    ML_UNROLL
    for (int j = 0; j < BWM; ++j)
      if (j > l && j < m) R->d[j] = U[j * (BWM + 1) + l];
  }
  float sigma = 0.0f;
  ML_UNROLL
  for (int j = 1; j < BWM; ++j) sigma = ml_fma(sh[j], sh[j], sigma);
  float up = 1.0f;
  if (sigma < ML_HOUSE_TINY) {
    sigma = 0.0f;
    ML_UNROLL
    for (int j = 1; j < BWM; ++j) {
      const float y = sh[j] * ML_HOUSE_UP;
      sigma = ml_fma(y, y, sigma);
    }
    up = ML_HOUSE_UP;
  }
  ml_house_t h;
  ml_house_finish(sh[0], sigma, up, &h);
  const float tau = h.tau;
  float v[BWM];
  v[0] = 1.0f;
  ML_UNROLL
  for (int j = 1; j < BWM; ++j) v[j] = sh[j] * h.scale;  // 0 past m
  const float vl = l == 0 ? 1.0f : (l < BWM ? sh[l] * h.scale : 0.0f);  // v[l]
  if (store && l < m) V2[l] = vl;
  if (store && l == 0) V2[bw] = tau;
  if (tau != 0.0f) {
    // Rows of the column strip times H: w = tau (row . v), row -= w v^T; J x J from both sides:
    // p = tau D v, w = p - (tau / 2)(p . v) v, D -= v w^T + w v^T. The rows below J last (the
    // entry a sweep's task reloads lies there: its load overlaps the rest).
    float wl = 0.0f, pd = 0.0f;
    ML_UNROLL
    for (int j = 0; j < BWM; ++j) {
      wl = ml_fma(R->l[j], v[j], wl);
      pd = ml_fma(R->d[j], v[j], pd);
    }
    wl *= tau;
    pd *= tau;
    if (l < BWM) sh[BWM + l] = l < m ? pd : 0.0f;
    ML_UNROLL
    for (int j = 0; j < BWM; ++j) R->l[j] = ml_fma(-wl, v[j], R->l[j]);
    ml_sb_bar<SC>(ctx);
    float pv = 0.0f;
    ML_UNROLL
    for (int j = 0; j < BWM; ++j) pv = ml_fma(sh[BWM + j], v[j], pv);
    const float k = 0.5f * tau * pv;
    const float wdl = ml_fma(-k, vl, pd);
    ML_UNROLL
    for (int j = 0; j < BWM; ++j) {
      const float wj = ml_fma(-k, v[j], sh[BWM + j]);
      R->d[j] -= ml_fma(vl, wj, wdl * v[j]);
    }
    float wb = 0.0f;
    ML_UNROLL
    for (int j = 0; j < BWM; ++j) wb = ml_fma(R->b[j], v[j], wb);
    wb *= tau;
    ML_UNROLL
    for (int j = 0; j < BWM; ++j) R->b[j] = ml_fma(-wb, v[j], R->b[j]);
  }
  if (l == 0) {
    ML_UNROLL
    for (int j = 0; j < BWM; ++j) R->l[j] = j == 0 ? h.beta : 0.0f;
  }
  // The lower entries back, a column's rows from consecutive lanes (R.l through U).
  ml_sb_bar<SC>(ctx);  // U's reads above done
  if (l < BWM) {
    ML_UNROLL
    for (int j = 0; j < BWM; ++j) U[l * (BWM + 1) + j] = R->l[j];
  }
  ml_sb_bar<SC>(ctx);
  ML_UNROLL
  for (int j = 0; j < BWM; ++j) {
    const ml_i64 cj = (ml_i64)(r0 + j) * ld;
    if (l < m && j < jo) A[(ml_i64)(c0 + j) * ld + r0 + l] = U[j * (BWM + 1) + l];
    if (l < m && j <= l) A[cj + r0 + l] = R->d[j];
    if (store_b && l < nb && j < m) A[cj + r1 + l] = R->b[j];
  }
}

// The task by ml_sb_task_w when the group is one simdgroup and bw <= BWM: loaded, run, stored.
template <int BWM>
ML_FN void ml_sb_task_w_all(ML_CTX ctx, ML_DEVICE float *A, int ld, int n, int bw, int s, int t,
                            ML_SHARED float *sh, ML_DEVICE float *V2, int store) {
  const int r0 = s + 1 + t * bw;
  const int r1 = ml_imin(r0 + bw, n);
  const int c0 = t == 0 ? s : r0 - bw, hi = ml_imin(n, r1 + bw);
  ml_sb_rows<BWM> R;
  ml_sb_load_w<BWM>(ctx, A, ld, r0, r1 - r0, c0, r0 - c0, r1, hi - r1, 7, &R);
  ml_sb_task_w<BWM>(ctx, A, ld, n, bw, s, t, sh, V2, store, 1, &R);
  ml_barrier_device(ctx);
}

// Whether the chase runs its tasks in registers (ml_sb_task_w): one simdgroup, bw <= 32.
ML_HOST_FN int ml_sb_fast(int group_size, int bw) { return group_size == 32 && bw <= 32; }

// The progress words of the one-launch chases, read and set by lane 0 of the group running a
// sweep: the sweep before's finished tasks (acquire), this sweep's (release).
// sb_sweeps: a word per sweep and matrix in device memory (w this sweep's, w - 1 the one
// before), at device scope.
struct ml_sb_prog_device {
  ML_DEVICE float *w;
};
ML_FN ml_u32 ml_sb_prog_prev(ML_THREAD const ml_sb_prog_device *p) {
  return ml_load_acquire_u32(p->w - 1);
}
ML_FN void ml_sb_prog_set(ML_THREAD const ml_sb_prog_device *p, ml_u32 k) {
  ml_store_release_u32(p->w, k);
}
// sb_block (sb2st_block.h): a ring of words in shared memory, at group scope. Sweep s's word
// (own) holds (s + 1) T0 + its finished tasks (T0 > every sweep's tasks), so a word only grows
// and a value left by an earlier sweep of the same slot reads as 0 finished (prev: sweep
// s - 1's word, base = s T0).
struct ml_sb_prog_block {
  ML_SHARED float *prev;
  ML_SHARED float *own;
  ml_u32 base, t0;
};
ML_FN ml_u32 ml_sb_prog_prev(ML_THREAD const ml_sb_prog_block *p) {
  const ml_u32 v = ml_load_acquire_block_u32(p->prev);
  return v > p->base ? v - p->base : 0u;
}
ML_FN void ml_sb_prog_set(ML_THREAD const ml_sb_prog_block *p, ml_u32 k) {
  ml_store_release_block_u32(p->own, p->base + p->t0 + k);
}

// Rows J x J and those below J of a task (as ml_sb_load_w's parts 2 and 4) into d and b.
template <int BWM>
ML_FN void ml_sb_load_db(ML_CTX ctx, ML_DEVICE const float *A, int ld, int r0, int m, int r1,
                         int nb, ML_THREAD float *d, ML_THREAD float *b) {
  const int l = ml_simd_lane(ctx);
  ML_UNROLL
  for (int j = 0; j < BWM; ++j) {
    const ml_i64 cj = (ml_i64)(r0 + j) * ld;
    d[j] = l < m && j <= l ? A[cj + r0 + l] : 0.0f;
    b[j] = l < nb && j < m ? A[cj + r1 + l] : 0.0f;
  }
}

// Sweep s of one matrix by ml_sb_task_w (the one-launch chase, as ml_step_sb_sweeps' plain
// loop: the same tasks, waits and releases, to the bit the same results), with what task t + 1
// needs mostly in hand when it starts: its rows J x J and below J loaded at the start of task t
// (the sweep before has finished its task t + 2 then, the last to change them but for one
// entry, X = A[r1 + bw - 1, r0 + bw - 1] of task t + 1, the first entry of the column its task
// t + 3 annihilates: reloaded after the wait), its columns left of J (task t's rows below J)
// carried through shared memory. prog: the progress words (ml_sb_prog_device, or at SC 1, a
// simdgroup of several running the sweep, ml_sb_prog_block).
template <int BWM, int SC, typename P>
ML_FN void ml_sb_sweep_w(ML_CTX ctx, ML_DEVICE float *A, int ld, int n, int bw, int s,
                         ML_THREAD const P *prog, ML_SHARED float *sh, ML_DEVICE float *V2,
                         int store) {
  const int l = ml_simd_lane(ctx);
  const int nt = ml_sb_tasks(n, bw, s), np = s > 0 ? ml_sb_tasks(n, bw, s - 1) : 0;
  ML_SHARED float *T = sh + 2 * BWM;  // T[j (BWM + 1) + i]: row j below J, column i of J
  ml_sb_rows<BWM> R;
  float nd[BWM], nbr[BWM];  // the next task's rows J x J and below J
  ml_u32 seen = 0;           // lane 0: the sweep before's progress last read
  for (int t = 0; t < nt; ++t) {
    if (l == 0 && s > 0) {
      const ml_u32 need = (ml_u32)ml_imin(t + 3, np);
      while (seen < need) seen = ml_sb_prog_prev(prog);
    }
    ml_sb_bar_device<SC>(ctx);
    const int r0 = s + 1 + t * bw;
    const int r1 = ml_imin(r0 + bw, n), m = r1 - r0;
    const int c0 = t == 0 ? s : r0 - bw, hi = ml_imin(n, r1 + bw), nb = hi - r1;
    if (t == 0) {
      ml_sb_load_w<BWM>(ctx, A, ld, r0, m, c0, r0 - c0, r1, nb, 7, &R);
    } else {
      ML_UNROLL
      for (int j = 0; j < BWM; ++j) {
        R.l[j] = l < bw && j < m ? T[j * (BWM + 1) + l] : 0.0f;
        R.d[j] = nd[j];
        R.b[j] = nbr[j];
      }
      if (l == bw - 1 && l < nb) {
        ML_UNROLL
        for (int j = 0; j < BWM; ++j)
          if (j == bw - 1 && j < m) R.b[j] = A[(ml_i64)(r0 + j) * ld + r1 + l];
      }
    }
    if (t + 1 < nt) {
      const int q0 = r1, q1 = ml_imin(q0 + bw, n);
      ml_sb_load_db<BWM>(ctx, A, ld, q0, q1 - q0, q1, ml_imin(n, q1 + bw) - q1, nd, nbr);
    }
    ml_sb_task_w<BWM, SC>(ctx, A, ld, n, bw, s, t, sh, V2 + ml_sb_v2_slot(n, bw, s, t), store,
                          t + 1 >= nt, &R);
    if (t + 1 < nt && l < BWM) {
      ML_UNROLL
      for (int j = 0; j < BWM; ++j) T[l * (BWM + 1) + j] = R.b[j];
    }
    ml_sb_bar_device<SC>(ctx);
    if (l == 0) ml_sb_prog_set(prog, (ml_u32)(t + 1));
  }
}

// Task t of sweep s on A (ld), the group's shared strip S (ld 3 bw + 1, bw columns), v (bw)
// and red: the cross loaded, reflected from both sides, written back; when store, its
// reflector to V2 (v, then tau at V2[bw]). Group-uniform; ends with a device-memory barrier
// (the group's writes to A done).
ML_FN void ml_sb_task(ML_CTX ctx, ML_DEVICE float *A, int ld, int n, int bw, int s, int t,
                      ML_SHARED float *S, ML_SHARED float *v, ML_SHARED float *red,
                      ML_DEVICE float *V2, int store) {
  if (ml_sb_fast(ctx.group_size, bw)) {
    if (bw <= 8)
      ml_sb_task_w_all<8>(ctx, A, ld, n, bw, s, t, S, V2, store);
    else if (bw <= 16)
      ml_sb_task_w_all<16>(ctx, A, ld, n, bw, s, t, S, V2, store);
    else
      ml_sb_task_w_all<32>(ctx, A, ld, n, bw, s, t, S, V2, store);
    return;
  }
  const int lane = ctx.lane, gs = ctx.group_size;
  const int lds = 3 * bw + 1;  // S[j * lds + i] = A[c0 + i, r0 + j]
  const int r0 = s + 1 + t * bw;
  const int r1 = ml_imin(r0 + bw, n), m = r1 - r0;
  const int c0 = t == 0 ? s : r0 - bw, hi = ml_imin(n, r1 + bw);
  const int nr = hi - c0, jo = r0 - c0;  // rows of the strip; J starts at strip row jo
  // A row of the strip per lane, its m loads independent (and coalesced across the lanes).
  for (int i = lane; i < nr; i += gs)
    for (int j = 0; j < m; ++j) S[j * lds + i] = A[(ml_i64)(r0 + j) * ld + c0 + i];
  ml_barrier(ctx);
  // The reflector of column c0's rows J (strip row 0, by symmetry).
  ml_house_t h;
  ml_house(ctx, S[0], S + lds, lds, m - 1, red, &h);
  for (int j = lane; j < m; j += gs) v[j] = j == 0 ? 1.0f : S[j * lds] * h.scale;
  if (store) {
    for (int j = lane; j < m; j += gs) V2[j] = j == 0 ? 1.0f : S[j * lds] * h.scale;
    if (lane == 0) V2[bw] = h.tau;
  }
  ml_barrier(ctx);
  if (h.tau != 0.0f) {
    const float tau = h.tau;
    // The strip times H (a row per lane), then the rows J from the left: D = H D H.
    for (int i = 1 + lane; i < nr; i += gs) {
      float w = 0.0f;
      for (int j = 0; j < m; ++j) w += S[j * lds + i] * v[j];
      w *= tau;
      for (int j = 0; j < m; ++j) S[j * lds + i] -= w * v[j];
    }
    ml_barrier(ctx);
    for (int j = lane; j < m; j += gs) {
      ML_SHARED float *col = S + j * lds + jo;
      float u = 0.0f;
      for (int k = 0; k < m; ++k) u += v[k] * col[k];
      u *= tau;
      for (int k = 0; k < m; ++k) col[k] -= u * v[k];
    }
    ml_barrier(ctx);
    // D symmetric to the bit (its upper part from the lower): both triangles are stored.
    for (int e = lane; e < m * m; e += gs) {
      const int r = e / m, q = e - r * m;
      if (r > q) S[r * lds + jo + q] = S[q * lds + jo + r];
    }
  }
  for (int j = lane; j < m; j += gs) S[j * lds] = j == 0 ? h.beta : 0.0f;
  ml_barrier(ctx);
  // Back: the column strip, and the row strip outside J (J x J is in the column strip).
  for (int i = lane; i < nr; i += gs)
    for (int j = 0; j < m; ++j) A[(ml_i64)(r0 + j) * ld + c0 + i] = S[j * lds + i];
  for (int e = lane; e < nr * m; e += gs) {
    const int i = e / m, j = e - i * m;
    if (i < jo || i >= jo + m) A[(ml_i64)(c0 + i) * ld + r0 + j] = S[j * lds + i];
  }
  ml_barrier_device(ctx);  // the next task reads what this one wrote
}

// sb_chase: groups batch x p.m, group g running sweep s = i[2] - g (the latest first: on a
// runner that runs groups in order, a wrong spacing shows as a wrong result), its tasks
// [c K, min(c K + K, tasks of s)) with c = i[0] - p.k s (L = i[0] the wavefront, q = p.k).
// p.n = n, i[1] = bw (2..64), i[3] = K. Operand 0: A (ld[0]), symmetric (both triangles kept).
// Shared: ml_sb_chase_shared_floats(bw).
ML_FN void ml_step_sb_chase(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int n = p.n, bw = p.i[1], K = p.i[3], ld = p.ld[0];
  const ml_i64 b = ctx.group_id / p.m;
  const int s = p.i[2] - (int)(ctx.group_id - b * p.m);
  const int c = p.i[0] - p.k * s;
  ML_DEVICE float *A = ws + p.off[0] + b * p.stride[0];
  ML_SHARED float *S = ctx.scratch;
  ML_SHARED float *v = S + (3 * bw + 1) * bw;
  ML_SHARED float *red = v + bw;
  const int end = ml_imin(c * K + K, ml_sb_tasks(n, bw, s));
  const int store = p.off[3] > 0;
  ML_DEVICE float *V2 = ws + p.off[3] + b * p.stride[3];
  for (int t = c * K; t < end; ++t)
    ml_sb_task(ctx, A, ld, n, bw, s, t, S, v, red, V2 + ml_sb_v2_slot(n, bw, s, t), store);
}

// sb_sweeps: the whole chase in one launch. p.groups groups (any number: correct on any
// schedule, also when they run one after another) take sweeps by tickets, ticket T = sweep
// T / batch of matrix T % batch, from the word at off[2] (zeroed by sb_band), and run each
// sweep's tasks in order; before task t a group waits until the sweep before (taken earlier,
// so by a group already running) has finished its first min(t + 3, tasks) tasks, read from
// that sweep's progress word (off[1], a word per sweep and matrix, zeroed by sb_band), and
// after it publishes t + 1 in its own. p.n = n, i[1] = bw, i[2] = batch. Operand 0: A (ld[0]).
// Shared: ml_sb_chase_shared_floats(bw) + 1.
ML_FN void ml_step_sb_sweeps(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int n = p.n, bw = p.i[1], ld = p.ld[0];
  const ml_u32 batch = (ml_u32)p.i[2], total = batch * (ml_u32)(n - 2);
  ML_SHARED float *S = ctx.scratch;
  ML_SHARED float *v = S + (3 * bw + 1) * bw;
  ML_SHARED float *red = v + bw;
  ML_SHARED float *tick = S + ml_sb_chase_shared_floats(bw);
  ML_DEVICE float *ticket = ws + p.off[2];
  for (;;) {
    if (ctx.lane == 0) tick[0] = ml_uint_as_float(ml_atomic_add_u32(ticket, 1u));
    ml_barrier(ctx);
    const ml_u32 tk = ml_float_as_uint(tick[0]);
    ml_barrier(ctx);  // tick is rewritten only after every lane read it
    if (tk >= total) return;
    const ml_i64 b = (ml_i64)(tk % batch);
    const int s = (int)(tk / batch);
    ML_DEVICE float *A = ws + p.off[0] + b * p.stride[0];
    ML_DEVICE float *prog = ws + p.off[1] + b * p.stride[1] + s;
    ml_sb_prog_device pd;
    pd.w = prog;
    ML_DEVICE float *V2 = ws + p.off[3] + b * p.stride[3];
    if (ml_sb_fast(ctx.group_size, bw)) {
      if (bw <= 8)
        ml_sb_sweep_w<8, 0>(ctx, A, ld, n, bw, s, &pd, S, V2, p.off[3] > 0);
      else if (bw <= 16)
        ml_sb_sweep_w<16, 0>(ctx, A, ld, n, bw, s, &pd, S, V2, p.off[3] > 0);
      else
        ml_sb_sweep_w<32, 0>(ctx, A, ld, n, bw, s, &pd, S, V2, p.off[3] > 0);
      continue;
    }
    const int nt = ml_sb_tasks(n, bw, s), np = s > 0 ? ml_sb_tasks(n, bw, s - 1) : 0;
    ml_u32 seen = 0;  // lane 0: the sweep before's progress last read (it only grows)
    for (int t = 0; t < nt; ++t) {
      if (ctx.lane == 0 && s > 0) {
        const ml_u32 need = (ml_u32)ml_imin(t + 3, np);
        while (seen < need) seen = ml_load_acquire_u32(prog - 1);
      }
      ml_barrier_device(ctx);
      ml_sb_task(ctx, A, ld, n, bw, s, t, S, v, red,
                 ws + p.off[3] + b * p.stride[3] + ml_sb_v2_slot(n, bw, s, t), p.off[3] > 0);
      if (ctx.lane == 0) ml_store_release_u32(prog, (ml_u32)(t + 1));
    }
  }
}

// sb_extract: groups batch x ceil(n / group size); d[i] = A[i, i], e[i] = A[i + 1, i].
// p.n = n. Operands: 0 A (ld[0]), 1 d (n floats), 2 e (n - 1 floats).
ML_FN void ml_step_sb_extract(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int n = p.n, ld = p.ld[0];
  const ml_i64 gpm = (n + ctx.group_size - 1) / ctx.group_size;
  const ml_i64 b = ctx.group_id / gpm;
  const int i = (int)(ctx.group_id - b * gpm) * ctx.group_size + ctx.lane;
  if (i >= n) return;
  ML_DEVICE const float *A = ws + p.off[0] + b * p.stride[0];
  ws[p.off[1] + b * p.stride[1] + i] = A[(ml_i64)i * ld + i];
  if (i + 1 < n) ws[p.off[2] + b * p.stride[2] + i] = A[(ml_i64)i * ld + i + 1];
}

#endif  // ML_KERNELS_SB2ST_H
