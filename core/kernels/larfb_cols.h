// A block reflector applied to a few columns in one step (larfb_cols): C := H C or H^T C with
// H = I - V T V^T (compact WY form: V explicit, r x count, count <= 64; T upper triangular),
// for the thin updates of the blocked algorithms (the rest of a QR outer panel after each of its
// inner panels: a few dozen columns, thousands of rows). The three products of larfb()
// (X = V^T C, Y = op(T) X, C -= V Y) cost two launches each there (a split-k product and its
// sum) and their fixed latency, not their arithmetic, is the time; here one group owns CP
// columns of C over all r rows:
//   1. each lane sums V[i, q] C[i, j] over its rows i (lane, lane + gs, ...) for every
//      reflector q < KC and column j < CP (KC CP <= 64 sums in registers), a simdgroup folds
//      them by halving exchanges (ml_qrr_fold), the simdgroups' totals meet in shared memory;
//   2. Y = op(T) X, a lane per entry;
//   3. each lane subtracts V[i, :] Y[:, j] from its rows of C.
// V and C are read twice (from the cache: a few hundred KB), C written once. The group's
// columns are independent of the others', so the step's groups are matrices x column blocks.
#ifndef ML_KERNELS_LARFB_COLS_H
#define ML_KERNELS_LARFB_COLS_H

#include "qr_panel_reg.h"  // ml_qrr_fold

// The step's arguments by name (slots of ml_step_params, set by the host; p.m = r rows, p.n =
// the columns of C): the integers, and the operand numbers of off / stride / ld.
#define ML_LARFB_COUNT(p) ((p).i[0])  // reflectors (<= 64)
#define ML_LARFB_CP(p) ((p).i[1])     // columns per group: 1, 2, 4 or 8, count * CP <= 64
#define ML_LARFB_TRANS(p) ((p).i[2])  // 1: C := H^T C (Y = T^T X), 0: C := H C (Y = T X)
#define ML_LARFB_V 0
#define ML_LARFB_T 1
#define ML_LARFB_C 2

// The register class of `count` reflectors: 8, 16, 32 or 64.
ML_HOST_FN int ml_larfb_class(int count) {
  return count <= 8 ? 8 : count <= 16 ? 16 : count <= 32 ? 32 : 64;
}
// Whether the step takes count reflectors with cp columns per group.
ML_HOST_FN int ml_larfb_fits(int count, int cp) {
  return count >= 1 && count <= 64 && (cp == 1 || cp == 2 || cp == 4 || cp == 8) &&
         ml_larfb_class(count) * cp <= 64;
}
// Shared floats of a group of gs lanes: the simdgroups' partials (64 each), X and Y (64 each).
ML_HOST_FN int ml_larfb_shared_floats(int gs) { return (gs / 32) * 64 + 2 * 64; }

// Which sum lane sl's v[t] holds after ml_qrr_fold<NA, 16> (qr_panel_reg.h): the upper half
// went to the lanes with the exchange's bit set, so for NA >= 32 the lane's bits are the index's
// high bits ((NA / 32) sl + t); for fewer sums the last 5 - log2(NA) exchanges were butterflies.
template <int NA>
ML_FN int ml_larfb_index(int sl, int t) {
  const int shift = NA == 16 ? 1 : NA == 8 ? 2 : NA == 4 ? 3 : NA == 2 ? 4 : 5;
  return NA >= 32 ? (NA / 32) * sl + t : sl >> shift;
}

// One group: columns j0 .. j0 + CP - 1 (< n) of matrix b's C, KC >= count reflectors.
template <int KC, int CP>
ML_FN void ml_larfb_cols_run(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE float *ws, ml_i64 b,
                             int j0) {
  constexpr int NA = KC * CP;
  const int lane = ctx.lane, gs = ctx.group_size, nw = ml_simd_count(ctx);
  const int w = ml_simd_id(ctx), sl = ml_simd_lane(ctx);
  const int r = p.m, n = p.n, count = ML_LARFB_COUNT(p);
  const int ldv = p.ld[ML_LARFB_V], ldt = p.ld[ML_LARFB_T], ldc = p.ld[ML_LARFB_C];
  ML_DEVICE const float *V = ws + p.off[ML_LARFB_V] + b * p.stride[ML_LARFB_V];
  ML_DEVICE const float *T = ws + p.off[ML_LARFB_T] + b * p.stride[ML_LARFB_T];
  ML_DEVICE float *C = ws + p.off[ML_LARFB_C] + b * p.stride[ML_LARFB_C] + (ml_i64)j0 * ldc;
  const int ncol = n - j0 < CP ? n - j0 : CP;
  ML_SHARED float *part = ctx.scratch;  // [nw][64]
  ML_SHARED float *X = part + nw * 64;  // [KC][CP]
  ML_SHARED float *Y = X + 64;          // [KC][CP]
  float acc[NA];
  ML_UNROLL
  for (int e = 0; e < NA; ++e) acc[e] = 0.0f;
  for (int i = lane; i < r; i += gs) {
    float c[CP];
    ML_UNROLL
    for (int jj = 0; jj < CP; ++jj) c[jj] = jj < ncol ? C[(ml_i64)jj * ldc + i] : 0.0f;
    ML_UNROLL
    for (int q = 0; q < KC; ++q) {
      if (q < count) {
        const float v = V[(ml_i64)q * ldv + i];
        ML_UNROLL
        for (int jj = 0; jj < CP; ++jj) acc[q * CP + jj] = ml_fma(v, c[jj], acc[q * CP + jj]);
      }
    }
  }
  ml_qrr_fold<NA, 16>(ctx, acc);
  const int held = NA >= 32 ? NA / 32 : 1;
  const int dup = NA >= 32 ? 1 : 32 / NA;  // lanes holding the same total
  if (sl % dup == 0) {
    ML_UNROLL
    for (int t = 0; t < held; ++t) part[w * 64 + ml_larfb_index<NA>(sl, t)] = acc[t];
  }
  ml_barrier(ctx);
  for (int e = lane; e < NA; e += gs) {
    float s = 0.0f;
    for (int u = 0; u < nw; ++u) s += part[u * 64 + e];
    X[e] = s;
  }
  ml_barrier(ctx);
  // Y[q][jj] = sum_l op(T)[q][l] X[l][jj]; T upper triangular (T^T: l <= q; T: l >= q).
  const bool trans = ML_LARFB_TRANS(p) != 0;
  for (int e = lane; e < NA; e += gs) {
    const int q = e / CP, jj = e - q * CP;
    float s = 0.0f;
    if (q < count) {
      if (trans) {
        for (int l = 0; l <= q; ++l) s = ml_fma(T[(ml_i64)q * ldt + l], X[l * CP + jj], s);
      } else {
        for (int l = q; l < count; ++l) s = ml_fma(T[(ml_i64)l * ldt + q], X[l * CP + jj], s);
      }
    }
    Y[e] = s;
  }
  ml_barrier(ctx);
  for (int i = lane; i < r; i += gs) {
    float c[CP];
    ML_UNROLL
    for (int jj = 0; jj < CP; ++jj) c[jj] = jj < ncol ? C[(ml_i64)jj * ldc + i] : 0.0f;
    ML_UNROLL
    for (int q = 0; q < KC; ++q) {
      if (q < count) {
        const float v = V[(ml_i64)q * ldv + i];
        ML_UNROLL
        for (int jj = 0; jj < CP; ++jj) c[jj] = ml_fma(-v, Y[q * CP + jj], c[jj]);
      }
    }
    ML_UNROLL
    for (int jj = 0; jj < CP; ++jj)
      if (jj < ncol) C[(ml_i64)jj * ldc + i] = c[jj];
  }
}

// larfb_cols: groups batch x ceil(n / CP), group g = matrix g / blocks, column block g % blocks.
// Operands: ML_LARFB_V (r x count, column-major, explicit: zeros above and ones on the unit
// diagonal, as larfb()'s products read it), ML_LARFB_T (count x count upper triangular, its ld),
// ML_LARFB_C (r x n, its ld), all per matrix at their strides. Shared:
// ml_larfb_shared_floats(gs). Every lane of a group takes the same branch (CP and the class
// are uniform).
ML_FN void ml_step_larfb_cols(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int cp = ML_LARFB_CP(p);
  const ml_i64 blocks = (p.n + cp - 1) / cp;
  const ml_i64 b = ctx.group_id / blocks;
  const int j0 = (int)(ctx.group_id - b * blocks) * cp;
  const int kc = ml_larfb_class(ML_LARFB_COUNT(p));
  if (kc == 8) {
    if (cp == 1) ml_larfb_cols_run<8, 1>(ctx, p, ws, b, j0);
    else if (cp == 2) ml_larfb_cols_run<8, 2>(ctx, p, ws, b, j0);
    else if (cp == 4) ml_larfb_cols_run<8, 4>(ctx, p, ws, b, j0);
    else ml_larfb_cols_run<8, 8>(ctx, p, ws, b, j0);
  } else if (kc == 16) {
    if (cp == 1) ml_larfb_cols_run<16, 1>(ctx, p, ws, b, j0);
    else if (cp == 2) ml_larfb_cols_run<16, 2>(ctx, p, ws, b, j0);
    else ml_larfb_cols_run<16, 4>(ctx, p, ws, b, j0);
  } else if (kc == 32) {
    if (cp == 1) ml_larfb_cols_run<32, 1>(ctx, p, ws, b, j0);
    else ml_larfb_cols_run<32, 2>(ctx, p, ws, b, j0);
  } else {
    ml_larfb_cols_run<64, 1>(ctx, p, ws, b, j0);
  }
}

#endif  // ML_KERNELS_LARFB_COLS_H
