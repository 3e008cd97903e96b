// The bulge chase of the two-stage tridiagonalisation (sb2st.h) with the whole chase of one
// matrix in one group: its simdgroups take the matrix's sweeps by tickets from a word in shared
// memory and hand off through progress words in shared memory, at group scope. The band stays
// in device memory where the first stage left it (n is not bounded by shared memory); within a
// group a device store is seen by the group's other lanes after a group-scope release and
// acquire, so a hand-off is a round trip through the group's own cache and shared memory
// instead of one through device-wide memory (sb_sweeps' progress words). Each simdgroup runs
// its sweeps as sb_sweeps' groups of one simdgroup do (ml_sb_sweep_w: the tasks in registers,
// the same waits), with barriers of its own simdgroup only: the same tasks in the same order
// on the same data, so the band and the stored reflectors equal sb_sweeps' and the
// wavefronts' (sb_chase at 32 lanes) to the bit.
#ifndef ML_KERNELS_SB2ST_BLOCK_H
#define ML_KERNELS_SB2ST_BLOCK_H

#include "sb2st.h"

// Shared floats of one simdgroup of sb_block at half-width bw (<= 32): ml_sb_sweep_w's (2 BWM
// floats and two BWM x (BWM + 1) transposes), then its ticket's slot.
ML_HOST_FN int ml_sb_block_simd_floats(int bw) {
  const int bwm = bw <= 8 ? 8 : bw <= 16 ? 16 : 32;
  return 2 * bwm + 2 * bwm * (bwm + 1) + 1;
}

// Progress words of sb_block for g simdgroups: a ring of 2 g (> g: every sweep in flight, and
// the one after each, has its own word; sb_block's header).
ML_HOST_FN int ml_sb_block_ring(int g) { return 2 * g; }

// Shared floats of sb_block at half-width bw with `lanes` lanes (a multiple of 32): the ring,
// the ticket, each simdgroup's floats.
ML_HOST_FN int ml_sb_block_shared_floats(int bw, int lanes) {
  const int g = lanes / 32;
  return ml_sb_block_ring(g) + 1 + g * ml_sb_block_simd_floats(bw);
}

// Whether sb_block can run an n x n band of half-width bw: the tasks in registers (bw <= 32)
// and every progress value (s + 1) T0 + k below 2^32 (T0 = ml_sb_tasks(n, bw, 0) + 1).
ML_HOST_FN int ml_sb_block_fits(int n, int bw) {
  if (bw < 2 || bw > 32 || n < 3) return 0;
  const ml_i64 t0 = (ml_i64)ml_sb_tasks(n, bw, 0) + 1;
  return (ml_i64)(n - 1) * t0 + t0 < ((ml_i64)1 << 32) ? 1 : 0;
}

// sb_block: groups = batch, group g the whole chase of matrix g; group_size 32 G lanes (G
// simdgroups, 1 <= G <= 32). p.n = n (>= 3), i[1] = bw (2..32). Operands: 0 A (ld[0]), the
// band as sb_band leaves it; 3 the reflector store when off[3] > 0 (as sb_sweeps). Shared:
// ml_sb_block_shared_floats(bw, group_size).
// Simdgroup lane 0 takes ticket T = sweep T from the group's word (relaxed; tickets go out in
// order, so the sweep before a taken one is held by a simdgroup already running, or done) and
// the simdgroup runs it by ml_sb_sweep_w, waiting before task t until sweep s - 1 has finished
// min(t + 3, its tasks) (acquire at group scope) and publishing each task (release). No
// simdgroup relies on another's timing: they meet only through these words.
// The ring: sweep s's word is slot s mod R, R = 2 G. A sweep s' finishes only after s' - 1 has
// (its last task waits for all of s' - 1), so when ticket s is taken the sweeps in flight are
// at most G consecutive ones ending at s, and sweeps up to s - G are done: the slot's earlier
// sweep s - R and its reader s - R + 1 <= s - G (R > G) have finished with it. Values grow
// within a slot ((s + 1) T0 + k, ml_sb_prog_block), so the ring is zeroed once.
ML_FN void ml_step_sb_block(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int n = p.n, bw = p.i[1], ld = p.ld[0];
  const int g = ctx.group_size / 32, ring = ml_sb_block_ring(g);
  const int fs = ml_sb_block_simd_floats(bw);
  ML_SHARED float *words = ctx.scratch;  // the ring, then the ticket
  ML_SHARED float *ticket = words + ring;
  ML_SHARED float *sh = ticket + 1 + ml_simd_id(ctx) * fs;
  ML_SHARED float *slot = sh + fs - 1;  // this simdgroup's ticket, to its lanes
  for (int i = ctx.lane; i <= ring; i += ctx.group_size) words[i] = 0.0f;
  ml_barrier(ctx);
  const ml_i64 b = ctx.group_id;
  ML_DEVICE float *A = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE float *V2 = ws + p.off[3] + b * p.stride[3];
  const int store = p.off[3] > 0;
  const ml_u32 t0 = (ml_u32)ml_sb_tasks(n, bw, 0) + 1u;
  const int l = ml_simd_lane(ctx);
  for (;;) {
    if (l == 0) slot[0] = ml_uint_as_float(ml_atomic_add_shared_u32(ticket, 1u));
    ml_simd_barrier(ctx);
    const ml_u32 tk = ml_float_as_uint(slot[0]);
    ml_simd_barrier(ctx);  // the slot is rewritten only after every lane read it
    if (tk >= (ml_u32)(n - 2)) return;
    const int s = (int)tk;
    ml_sb_prog_block pr;
    pr.prev = words + (s + ring - 1) % ring;
    pr.own = words + s % ring;
    pr.base = (ml_u32)s * t0;
    pr.t0 = t0;
    if (bw <= 8)
      ml_sb_sweep_w<8, 1>(ctx, A, ld, n, bw, s, &pr, sh, V2, store);
    else if (bw <= 16)
      ml_sb_sweep_w<16, 1>(ctx, A, ld, n, bw, s, &pr, sh, V2, store);
    else
      ml_sb_sweep_w<32, 1>(ctx, A, ld, n, bw, s, &pr, sh, V2, store);
  }
}

#endif  // ML_KERNELS_SB2ST_BLOCK_H
