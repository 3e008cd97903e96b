// Shared pieces of the linear-system kernels (linsys_cholesky.h, linsys_lu.h,
// linsys_triangular.h): the kernel flags, the pivot search over a group, the triangular solve
// of a block of right-hand sides in shared memory and the chunk width of the right-hand sides.
//
// Conventions (docs/design.md section 5.1):
//  - A is p.n x p.n (lu_factor: p.m x p.n) row-major, one matrix per group (ctx.group_id).
//  - The ops with a right-hand side (solve, solve_triangular) take B as a second input pointer
//    (the table's outs code O0B: out0 is X, the entry's out2 slot carries B) and its column
//    count nrhs as p.m (A is square, so m is free); B and X are n x nrhs row-major, or nrhs x n
//    under ML_K_LS_RIGHT (X A = B).
//  - Right-hand sides are solved in chunks of W columns held in shared memory; W is chosen by
//    the host from the scratch budget (choose_flags) and carried in the flags' bits 8..19, so
//    any nrhs runs in a bounded scratch.
//  - info as the CPU backend (LAPACK): k > 0 for the first failing pivot / minor, or
//    ML_INFO_LS_NONFINITE (0x40000000) for NaN/Inf in what the op reads; every output entry of
//    such a matrix is NaN (lu_factor keeps a singular matrix's factorization).
#ifndef ML_KERNELS_LINSYS_COMMON_H
#define ML_KERNELS_LINSYS_COMMON_H

#include "group.h"

// Kernel flags: the C API's ml_ls_flag bits (same values), plus the chunk width.
#define ML_K_LS_UPPER 1
#define ML_K_LS_RIGHT 2
#define ML_K_LS_UNIT 4
#define ML_K_LS_CHUNK_SHIFT 8
#define ML_K_LS_CHUNK_MAX 4095
#define ML_K_LS_BITS (ML_K_LS_UPPER | ML_K_LS_RIGHT | ML_K_LS_UNIT)
// Widest chunk of right-hand sides the host picks (more columns per chunk need more shared
// memory per group for fewer passes over the factors).
#define ML_LS_CHUNK_PREF 64
#ifndef ML_INFO_LS_NONFINITE
#define ML_INFO_LS_NONFINITE 0x40000000
#endif
// Reduction floats of the linear-system kernels: the pivot search's 2 x 32 slots and a
// separate ML_RED_FLOATS for ml_group_max.
#define ML_LS_RED_FLOATS (64 + ML_RED_FLOATS)

// The chunk width carried in flags (at least 1).
ML_HOST_FN int ml_ls_chunk(int flags) {
  const int w = (flags >> ML_K_LS_CHUNK_SHIFT) & ML_K_LS_CHUNK_MAX;
  return w > 0 ? w : 1;
}
// Row stride of a chunk of w right-hand sides in shared memory (odd: conflict-free columns).
ML_HOST_FN int ml_ls_chunk_ld(int w) { return w | 1; }

// Scratch of a chunked kernel: base floats plus the n x ld(W) chunk that flags carry; and
// whether the narrowest chunk (W = 1) fits beside base in the budget.
ML_HOST_FN int ml_ls_chunked_floats(int base, int n, int flags) {
  return base + n * ml_ls_chunk_ld(ml_ls_chunk(flags));
}
ML_HOST_FN int ml_ls_chunk_fits(int base, int n, int budget) {
  return base + n * ml_ls_chunk_ld(1) <= budget;
}

// flags with the widest chunk (up to min(cols, ML_LS_CHUNK_PREF)) whose n x ld(W) block fits
// beside `base` scratch floats in the budget; W = 1 when none fits (fits() rejects that shape).
ML_HOST_FN int ml_ls_choose_chunk(int cols, int n, int flags, int base, int budget) {
  int w = cols < ML_LS_CHUNK_PREF ? cols : ML_LS_CHUNK_PREF;
  if (w < 1) w = 1;
  while (w > 1 && base + n * ml_ls_chunk_ld(w) > budget) --w;
  return (flags & ML_K_LS_BITS) | (w << ML_K_LS_CHUNK_SHIFT);
}

// ---- pivot search (partial pivoting: the first row of largest |value|, as isamax) ----
// Each lane brings its candidate (best |value|, -1 for none; its row); the group's choice goes
// to red[0..63] (per simdgroup: max in red[s], its smallest row in red[32 + s]) before the
// next barrier, and ml_ls_pivot_take reads it after that barrier. Simdgroup-uniform control
// flow: every lane calls.
ML_FN void ml_ls_pivot_publish(ML_CTX ctx, float best, int row, ML_SHARED float *red) {
  const float mx = ml_simd_max(ctx, best);
  const float cand = (best >= 0.0f && best == mx) ? (float)row : 1.0e9f;
  const float mi = ml_simd_min(ctx, cand);
  if (ml_simd_lane(ctx) == 0) {
    red[ml_simd_id(ctx)] = mx;
    red[32 + ml_simd_id(ctx)] = mi;
  }
}
// The pivot row published by every simdgroup (the same on every lane), or `none` when no lane
// had a candidate (a column of NaN).
ML_FN int ml_ls_pivot_take(ML_CTX ctx, ML_SHARED const float *red, int none) {
  const int ns = ml_simd_count(ctx);
  float b = -1.0f, bi = 1.0e9f;
  for (int s = 0; s < ns; ++s) {
    const float v = red[s], i = red[32 + s];
    if (v > b || (v == b && i < bi)) {
      b = v;
      bi = i;
    }
  }
  return (b >= 0.0f && bi < 1.0e9f) ? (int)bi : none;
}

// Entry (i, k) of op(S): S (stride ld) or its transpose.
ML_FN float ml_ls_op(ML_SHARED const float *S, int ld, int trans, int i, int k) {
  return trans ? S[k * ld + i] : S[i * ld + k];
}

// Solves op(T) Y = X in place for the w columns of X (n x w, row stride ldx), where T is the
// lower (lower != 0) or upper triangle of op(S) (unit: ones on the diagonal, not read).
// Column-oriented substitution: step k updates every row below (above) k with row k, the
// lane that finishes row k + 1 (k - 1) also dividing it by the diagonal, so one barrier per
// step. Starts reading X without a barrier of its own (the caller's last one must cover X and
// S) and ends with one.
ML_FN void ml_ls_trsm_chunk(ML_CTX ctx, ML_SHARED const float *S, int ld, int n, int trans,
                            int lower, int unit, ML_SHARED float *X, int ldx, int w) {
  const int lane = ctx.lane, gs = ctx.group_size;
  const int first = lower ? 0 : n - 1;
  if (!unit) {
    const float d = ml_ls_op(S, ld, trans, first, first);
    for (int c = lane; c < w; c += gs) X[first * ldx + c] /= d;
  }
  ml_barrier(ctx);
  for (int s = 0; s + 1 < n; ++s) {
    const int k = lower ? s : n - 1 - s;         // the row now final
    const int rows = n - 1 - s;                  // rows still to update
    const int next = lower ? k + 1 : k - 1;      // the row this step finishes
    for (int e = lane; e < rows * w; e += gs) {
      const int r = e / w, c = e - r * w;
      const int i = lower ? k + 1 + r : r;       // below k, or above it
      float v = X[i * ldx + c] - ml_ls_op(S, ld, trans, i, k) * X[k * ldx + c];
      if (!unit && i == next) v /= ml_ls_op(S, ld, trans, i, i);
      X[i * ldx + c] = v;
    }
    ml_barrier(ctx);
  }
}

// Whether count floats at bm hold a NaN/Inf (the same on every lane; one ml_group_max into
// red, 32 floats).
ML_FN int ml_ls_nonfinite(ML_CTX ctx, ML_DEVICE const float *bm, ml_i64 count,
                          ML_SHARED float *red2) {
  float bad = 0.0f;
  for (ml_i64 t = ctx.lane; t < count; t += ctx.group_size)
    if (!ml_isfinite(bm[t])) bad = 1.0f;
  return ml_group_max(ctx, bad, red2) != 0.0f;
}

#endif  // ML_KERNELS_LINSYS_COMMON_H
