// Steps every blocked algorithm shares (core/kernels/steps.h): the scan of the input, the
// scaled load into the workspace, the identity, the stores into the call's outputs and the
// info words. Working matrices are column-major in the device workspace `ws`.
//
// Per-matrix statistics slot (ML_STAT_FLOATS floats, operand named "stat" below):
//   [0] e: the input was scaled by 2^-e (max |a| in [1, 2)), exact as a float
//   [1] 1 when the input holds a non-finite value (the load then writes zeros, the stores NaN)
//   [2] ML_INFO_* bits the steps found (rank deficiency, no convergence), as a float
#ifndef ML_KERNELS_BLOCKED_COMMON_H
#define ML_KERNELS_BLOCKED_COMMON_H

#include "group.h"

// The parameters of every step kernel (step_list.h): fn(ML_STEP_ARGS) is
// fn(ctx, p, ws, a, o0, o1, o2, info), the group's context, the launch's ml_step_params, the
// workspace, the call's input and its three outputs and info (README.md, "Step kernels").
#define ML_STEP_ARGS                                                                           \
  ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE float *ws, ML_DEVICE const float *a,                 \
      ML_DEVICE float *o0, ML_DEVICE float *o1, ML_DEVICE float *o2, ML_DEVICE int *info

#define ML_STAT_FLOATS 4

// Lanes of a group of the resident reductions (trd_res, brd_res) at most: the host caps them,
// and the CUDA build gives those steps the registers of 512-lane groups.
#define ML_RES_MAX_LANES 512

// Which part of a square input the scan and the load read (eigh reads one triangle).
#define ML_STEP_TRI_FULL 0
#define ML_STEP_TRI_LOWER 1
#define ML_STEP_TRI_UPPER 2

// Store flags.
#define ML_STORE_UPPER 1      // zero below the diagonal (R)
#define ML_STORE_SCALE 2      // multiply by 2^e (values of the scaled problem)
#define ML_STORE_TRANSPOSE 4  // out(i, c) = W(c, i)

// Element (i, c) of input matrix am (m x n row-major) as the scan and the load read it.
ML_FN float ml_step_input(ML_DEVICE const float *am, int n, int i, int c, int tri) {
  if ((tri == ML_STEP_TRI_LOWER && i < c) || (tri == ML_STEP_TRI_UPPER && i > c))
    return am[(ml_i64)c * n + i];
  return am[(ml_i64)i * n + c];
}

// scan: the input's max |a| in two steps. scan: groups batch x ceil(m / 32), each a block of
// 32 rows of the call's input a (matrix first + b, m x n row-major; flags: ML_STEP_TRI_*),
// writing its block's max (Inf when a value is not finite) to partial[block] (operand 1:
// the first ceil(m / 32) floats of the matrix's W, which the load overwrites later).
// scan_final: one group per matrix, from the partials to the stat slot (operand 0): e, the
// non-finite flag, info 0.
ML_FN void ml_step_scan(ML_STEP_ARGS) {
  (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int m = p.m, n = p.n, tri = p.flags;
  const int blocks = (m + 31) / 32;
  const ml_i64 b = ctx.group_id / blocks;
  const int rb = (int)(ctx.group_id - b * blocks);
  const int i0 = rb * 32, rows = ml_imin(32, m - i0);
  ML_DEVICE const float *am = a + (p.first + b) * (ml_i64)m * n + (ml_i64)i0 * n;
  float amax = 0.0f;
  for (int e = ctx.lane; e < rows * n; e += ctx.group_size) {
    const int i = i0 + e / n, c = e % n;
    if ((tri == ML_STEP_TRI_LOWER && i < c) || (tri == ML_STEP_TRI_UPPER && i > c)) continue;
    const float x = am[e];
    amax = ml_isfinite(x) ? ml_fmax(amax, ml_fabs(x)) : ml_inf();
  }
  amax = ml_group_max(ctx, amax, ctx.scratch);
  if (ctx.lane == 0) ws[p.off[1] + b * p.stride[1] + rb] = amax;
}

ML_FN void ml_step_scan_final(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 b = ctx.group_id;
  const int blocks = (p.m + 31) / 32;
  ML_DEVICE const float *part = ws + p.off[1] + b * p.stride[1];
  float amax = 0.0f;
  for (int q = ctx.lane; q < blocks; q += ctx.group_size) amax = ml_fmax(amax, part[q]);
  amax = ml_group_max(ctx, amax, ctx.scratch);
  if (ctx.lane == 0) {
    ML_DEVICE float *st = ws + p.off[0] + b * p.stride[0];
    const bool bad = !ml_isfinite(amax);
    st[0] = (float)(bad || amax == 0.0f ? 0 : ml_ilogb(amax));
    st[1] = bad ? 1.0f : 0.0f;
    st[2] = 0.0f;
    st[3] = 0.0f;
  }
}

// The steps over 32 x 32 tiles (groups batch x ceil(m / 32) x ceil(n / 32), the tiles of a
// matrix column by column): the group's matrix (returned) and its tile's first row *i0 and
// column *c0.
ML_FN ml_i64 ml_step_tile_of(ML_CTX ctx, int m, int n, ML_THREAD int *i0, ML_THREAD int *c0) {
  const int tm = (m + 31) / 32, tn = (n + 31) / 32;
  const ml_i64 tiles = (ml_i64)tm * tn;
  const ml_i64 b = ctx.group_id / tiles;
  const int t = (int)(ctx.group_id - b * tiles);
  *i0 = (t % tm) * 32;
  *c0 = (t / tm) * 32;
  return b;
}

// load: W = 2^-e * input, column-major (operand 1, ld[1]); zeros for a non-finite matrix.
// flags: ML_STEP_TRI_* (a triangle is mirrored: W is then the symmetric matrix). Groups:
// batch x ceil(m / 32) x ceil(n / 32), one 32 x 32 tile each through shared memory (32 x 33
// floats), read along rows and written along columns. Operand 0: stat.
ML_FN void ml_step_load(ML_STEP_ARGS) {
  (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int m = p.m, n = p.n;
  int i0 = 0, c0 = 0;
  const ml_i64 b = ml_step_tile_of(ctx, m, n, &i0, &c0);
  ML_DEVICE const float *st = ws + p.off[0] + b * p.stride[0];
  const float scale = ml_ldexp(1.0f, -(int)st[0]);
  const bool bad = st[1] != 0.0f;
  ML_DEVICE const float *am = a + (p.first + b) * (ml_i64)m * n;
  ML_DEVICE float *W = ws + p.off[1] + b * p.stride[1];
  ML_SHARED float *tile = ctx.scratch;  // tile[r * 33 + c]
  for (int e = ctx.lane; e < 32 * 32; e += ctx.group_size) {
    const int r = e / 32, c = e % 32;
    const int i = i0 + r, cc = c0 + c;
    float x = 0.0f;
    if (i < m && cc < n && !bad) x = ml_step_input(am, n, i, cc, p.flags) * scale;
    tile[r * 33 + c] = x;
  }
  ml_barrier(ctx);
  for (int e = ctx.lane; e < 32 * 32; e += ctx.group_size) {
    const int c = e / 32, r = e % 32;
    const int i = i0 + r, cc = c0 + c;
    if (i < m && cc < n) W[(ml_i64)cc * p.ld[1] + i] = tile[r * 33 + c];
  }
}

// eye: operand 0 (m x n, column-major, ld[0]) = the first n columns of the m x m identity.
// Groups: batch x n, a column each.
ML_FN void ml_step_eye(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const ml_i64 b = ctx.group_id / p.n;
  const int c = (int)(ctx.group_id - b * p.n);
  ML_DEVICE float *col = ws + p.off[0] + b * p.stride[0] + (ml_i64)c * p.ld[0];
  for (int i = ctx.lane; i < p.m; i += ctx.group_size) col[i] = i == c ? 1.0f : 0.0f;
}

// store: the call's output o<i[0]> (matrix first + b, m x n row-major) from workspace
// matrix W (operand 0, column-major, ld[0]); flags ML_STORE_*; NaN everywhere for a matrix
// whose input was not finite (operand 3: stat). Groups: batch x ceil(m / 32) x ceil(n / 32),
// 32 x 32 tiles through shared memory (32 x 33 floats).
ML_FN void ml_step_store(ML_STEP_ARGS) {
  (void)a, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int m = p.m, n = p.n;
  int i0 = 0, c0 = 0;
  const ml_i64 b = ml_step_tile_of(ctx, m, n, &i0, &c0);
  ML_DEVICE const float *st = ws + p.off[3] + b * p.stride[3];
  const bool bad = st[1] != 0.0f;
  const float scale = (p.flags & ML_STORE_SCALE) ? ml_ldexp(1.0f, (int)st[0]) : 1.0f;
  ML_DEVICE const float *W = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE float *out = p.i[0] == 0 ? o0 : p.i[0] == 1 ? o1 : o2;
  out += (p.first + b) * (ml_i64)m * n;
  const bool tr = (p.flags & ML_STORE_TRANSPOSE) != 0;
  ML_SHARED float *tile = ctx.scratch;  // tile[c * 33 + r] = out(i0 + r, c0 + c)
  for (int e = ctx.lane; e < 32 * 32; e += ctx.group_size) {
    // Read W along its columns: out's rows (r) fastest, or out's columns when transposed.
    const int hi = e / 32, lo = e % 32;
    const int r = tr ? hi : lo, c = tr ? lo : hi;
    const int i = i0 + r, cc = c0 + c;
    float x = 0.0f;
    if (i < m && cc < n) x = tr ? W[(ml_i64)i * p.ld[0] + cc] : W[(ml_i64)cc * p.ld[0] + i];
    tile[c * 33 + r] = x;
  }
  ml_barrier(ctx);
  const float qnan = ml_nan();
  for (int e = ctx.lane; e < 32 * 32; e += ctx.group_size) {
    const int r = e / 32, c = e % 32;
    const int i = i0 + r, cc = c0 + c;
    if (i >= m || cc >= n) continue;
    float x = tile[c * 33 + r] * scale;
    if ((p.flags & ML_STORE_UPPER) && cc < i) x = 0.0f;
    out[(ml_i64)i * n + cc] = bad ? qnan : x;
  }
}

// info: info[first + b] = ML_INFO_NONFINITE for a non-finite input, else the stat slot's
// bits (operand 0). Groups: ceil(batch / group size), a matrix per lane.
ML_FN void ml_step_info(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2;
  if (ctx.group_id >= p.groups || !info) return;
  const ml_i64 b = ctx.group_id * ctx.group_size + ctx.lane;
  if (b >= p.batch) return;
  ML_DEVICE const float *st = ws + p.off[0] + b * p.stride[0];
  info[p.first + b] = st[1] != 0.0f ? ML_INFO_NONFINITE : (int)st[2];
}

#endif  // ML_KERNELS_BLOCKED_COMMON_H
