// Householder tridiagonalisation with the trailing matrix resident in the groups' shared memory
// (the step trd_res; sequenced by core/src/blocked_eigh.cpp after the panels of
// sytrd_blocked.h, or alone). For one or a few matrices the panel scheme of sytrd_blocked.h
// is bound by latency: every column costs two passes over the trailing matrix from device
// memory, each a chain of dependent loads and group barriers. Here G persistent groups per
// matrix each hold a share of the trailing matrix's columns, column i of A[k0:n, k0:n] (both
// triangles, rows k0 .. n - 1) in group (i - k0) mod G, for the whole reduction, so that a
// column's work is shared-memory traffic and only vectors of n floats pass between groups:
//   reflector j   the group owning column j (brought up to date first) forms H_j = I - tau v v^T
//                 of A[j+1:n, j] (d_j, e_j, tau_j as sytrd_blocked.h), writes v to a vector in
//                 device memory and the reflector into A's column j (zero to row j, 1 at row
//                 j + 1, v below: the form the back-transformation reads), then releases the
//                 word F = j + 1;
//   y = A v       every group, after acquiring F >= j + 1, forms y_i = A[j+1:n, i]^T v for its
//                 columns i > j (a simdgroup per column and slice of rows), writes them to
//                 device memory, then adds 1 to the word C (release);
//   update        every group, after acquiring C >= G (j - k0 + 1), reads all of y, sums y^T v
//                 (in the same order in every group: the same bits),
//                 w = tau y - (tau^2 / 2) (y^T v) v, and updates its columns i > j:
//                 A[j+1:n, i] -= v w_i + w v_i; the owner of column j + 1 updates that column
//                 first and forms reflector j + 1 before the others.
// Two exchanges through device memory per column, no product per panel. y alternates between
// two buffers by the parity of j: a group writes step j + 1's before a slower group may have
// read step j's, never step j + 2's (that needs every group's y of step j + 1, written after
// it read step j's). v has one buffer: the owner of j + 1 writes it only
// after C says every group has read v_j.
// Groups wait on each other both ways, so all G x batch groups must run at once: the host
// launches no more groups than the device holds at a time (one per multiprocessor). The CPU
// runner runs this step's groups on concurrent threads.
// Tagged hand-offs (p.flags & 8, backends with ML_HAS_TAGGED): v (with tau) and y pass as
// tagged words (compat_cuda.h: a float and the step's column j in one 64-bit access), two
// buffers of each by the parity of j, and a reader polls the words it needs until their tags
// read j (one word at a time: eight loads in flight a lane before any is waited on measured
// slower on the H200, eigh 2048 x1 22.6 -> 25.7 ms): no words F and C, no fences, no atomics, one trip through the device's cache per
// hand-off instead of a flag's round trip and then the data's. A group whose columns are all
// eliminated stops (no one waits for it: y's rows past j come from the groups owning those
// columns). Why two buffers suffice: the owner of column j + 2 writes v_{j+2} (buffer j % 2)
// only after reading y_{j+1} of every group that still owns a column past j + 1, which each
// wrote after reading v_{j+1} and all of step j's words; a group whose last column is j + 1
// formed v_{j+1} after reading step j's; every other group has stopped. Likewise y_{j+2}
// follows v_{j+2}.
// Operands: 0 A (n x n, column-major, ld[0]), 2 the vectors of sytrd_blocked.h (d, e, tau; v in
// the PU slot, y in the Y and PU + n slots), 3 the two words F, C (zeroed by a launch with
// flags 4 before: a group per matrix), then, from float 32, the tagged buffers (flags 4 | 8
// sets every tag to ~0 first; ml_trd_res_sync_floats(n) floats in all). p.n = n; i[0] = k0
// (the first column left; A[k0:n, k0:n] up to date in both triangles), i[1] = G (groups per
// matrix), i[2] = the columns a group holds at most (ceil((n - k0) / G)).
#ifndef ML_KERNELS_SYTRD_RESIDENT_H
#define ML_KERNELS_SYTRD_RESIDENT_H

#include "blocked_common.h"
#include "gemm.h"
#include "householder.h"
#include "sytrd_blocked.h"

// Shared floats of trd_res: nc columns of r rows (a stride of r rounded up to a multiple of 4),
// v and y / w (as long), the dot products' partial sums (a slot per simdgroup or column), a
// reduction buffer and one float after it (tau, tagged).
ML_HOST_FN int ml_trd_res_stride(int r) { return (r + 3) / 4 * 4; }
ML_HOST_FN int ml_trd_res_shared_floats(int r, int nc, int gs) {
  const int nsimd = (gs + 31) / 32, rs = ml_trd_res_stride(r);
  return nc * rs + 2 * rs + (nc > nsimd ? nc : nsimd) + ML_RED_FLOATS + 1;
}

// Floats of operand 3 per matrix: the words F and C, then (from float 32) two tagged v
// buffers of n + 1 words (row k at word k, tau at word n) and two tagged y buffers of n.
ML_HOST_FN int ml_trd_res_sync_floats(int n) { return 32 + 4 * (n + 1) + 4 * n; }
#define ML_TRD_RES_TV(sync, n, par) ((sync) + 32 + (par) * 2 * ((n) + 1))
#define ML_TRD_RES_TY(sync, n, par) ((sync) + 32 + 4 * ((n) + 1) + (par) * 2 * (n))
#define ML_TRD_RES_NO_TAG 0xffffffffu

// Reflector of column i (in shared memory at col, row k at col[k - k0]), by the group owning
// it: d_i, e_i, tau_i into vec, v into vg (row k at vg[k]), the reflector into A's column i
// (acol, rows k0 .. n - 1), then F = i + 1 released. The last column has no reflector.
// Tagged (tv: the tagged v buffer of step i's parity, else 0): v and tau as tagged words of
// tag i instead, no release.
// From the lanes' partial sums s, su of the squares of A[i+2:n, i] and of its entries times
// ML_HOUSE_UP (any split of the rows over the lanes), whose writes to col this call's first
// barrier orders before its reads.
ML_FN void ml_trd_res_reflect_sums(ML_CTX ctx, int n, int k0, int i, ML_SHARED const float *col,
                                   ML_DEVICE float *vec, ML_DEVICE float *vg,
                                   ML_DEVICE float *acol, ML_DEVICE float *flag,
                                   ML_SHARED float *red, ML_DEVICE float *tv, float s, float su) {
  const int lane = ctx.lane, gs = ctx.group_size;
  // Both sums behind one barrier (red: 64 floats).
  s = ml_simd_sum(ctx, s);
  su = ml_simd_sum(ctx, su);
  if (ml_simd_lane(ctx) == 0) {
    red[ml_simd_id(ctx)] = s;
    red[32 + ml_simd_id(ctx)] = su;
  }
  ml_barrier(ctx);
  float sigma = red[0], sigma_up = red[32];
  for (int w = 1; w < ml_simd_count(ctx); ++w) {
    sigma += red[w];
    sigma_up += red[32 + w];
  }
  ml_house_t h;
  h.beta = 0.0f;
  h.tau = 0.0f;
  h.scale = 1.0f;
  if (i + 1 < n) {
    const float alpha = col[i + 1 - k0];
    if (sigma < ML_HOUSE_TINY) ml_house_finish(alpha, sigma_up, ML_HOUSE_UP, &h);
    else ml_house_finish(alpha, sigma, 1.0f, &h);
  }
  const float hs = h.scale;
#if ML_HAS_TAGGED
  if (tv) {
    for (int k = k0 + lane; k < n; k += gs) {
      float v = 0.0f;
      if (k == i + 1) v = 1.0f;
      else if (k > i + 1) v = col[k - k0] * hs;
      acol[k] = v;
      if (k > i) ml_store_tagged(tv + 2 * k, v, (ml_u32)i);
    }
    if (lane == 0) {
      vec[ML_TRD_D(n) + i] = col[i - k0];
      vec[ML_TRD_TAU(n) + i] = h.tau;
      if (i + 1 < n) {
        vec[ML_TRD_E(n) + i] = h.beta;
        ml_store_tagged(tv + 2 * n, h.tau, (ml_u32)i);
      }
    }
    return;
  }
#endif
  for (int k = k0 + lane; k < n; k += gs) {
    float v = 0.0f;
    if (k == i + 1) v = 1.0f;
    else if (k > i + 1) v = col[k - k0] * hs;
    acol[k] = v;
    if (k > i) vg[k] = v;
  }
  if (lane == 0) {
    vec[ML_TRD_D(n) + i] = col[i - k0];
    vec[ML_TRD_TAU(n) + i] = h.tau;
    if (i + 1 < n) vec[ML_TRD_E(n) + i] = h.beta;
  }
  ml_barrier_device(ctx);
  if (lane == 0 && i + 1 < n) ml_store_release_u32(flag, (ml_u32)(i + 1));
}
ML_FN void ml_trd_res_reflect(ML_CTX ctx, int n, int k0, int i, ML_SHARED const float *col,
                              ML_DEVICE float *vec, ML_DEVICE float *vg, ML_DEVICE float *acol,
                              ML_DEVICE float *flag, ML_SHARED float *red, ML_DEVICE float *tv) {
  float s = 0.0f, su = 0.0f;
  for (int k = i + 2 + ctx.lane; k < n; k += ctx.group_size) {
    const float x = col[k - k0], xu = x * ML_HOUSE_UP;
    s += x * x;
    su += xu * xu;
  }
  ml_trd_res_reflect_sums(ctx, n, k0, i, col, vec, vg, acol, flag, red, tv, s, su);
}


// Lane 0 waits until the word w counts at least want; then the group's barrier (device).
ML_FN void ml_trd_res_wait(ML_CTX ctx, ML_DEVICE float *w, ml_u32 want) {
  if (ctx.lane == 0) {
    for (;;) {
      if (ml_load_acquire_u32(w) >= want) break;
      ml_spin_relax();
    }
  }
  ml_barrier_device(ctx);
}

// Group g of matrix b: the whole reduction of columns k0 .. n - 1. Shared arrays are indexed by
// the row's offset q = k - k0 (q < r = n - k0).
ML_FN void ml_trd_res_run(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE float *ws, ml_i64 b, int g) {
  const int n = p.n, k0 = p.i[0], G = p.i[1], ncmax = p.i[2], r = n - k0;
  const int rs = ml_trd_res_stride(r);
  const bool vec4 = (p.flags & 32) == 0;  // 4-row shared accesses (else a row at a time)
  const bool wide = (p.flags & 64) == 0;  // the many-columns forms below (else off, to measure)
  const int lane = ctx.lane, gs = ctx.group_size;
  const int sl = ml_simd_lane(ctx), sid = ml_simd_id(ctx), nsimd = ml_simd_count(ctx);
  const int ld = p.ld[0];
  ML_DEVICE float *A = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE float *vec = ws + p.off[2] + b * p.stride[2];
  ML_DEVICE float *sync = ws + p.off[3] + b * p.stride[3];
  ML_DEVICE float *vg = vec + ML_TRD_PU(n);  // v, row k at vg[k]
  ML_DEVICE float *yg0 = vec + ML_TRD_Y(n), *yg1 = vg + n;
  ML_SHARED float *cols = ctx.scratch;  // own column c at cols + c rs
  ML_SHARED float *vs = cols + ncmax * rs;
  ML_SHARED float *wv = vs + rs;  // y, then w
  ML_SHARED float *part = wv + rs;
  ML_SHARED float *red = part + (ncmax > nsimd ? ncmax : nsimd);
  const int nc = g < r ? (r - g + G - 1) / G : 0;  // columns k0 + g + G c, c < nc
#if ML_HAS_TAGGED
  const bool tagged = (p.flags & 8) != 0;
#else
  const bool tagged = false;
#endif
  // The tagged v buffer of step j's parity (0: the flag-and-fence hand-offs).
#define ML_TRD_RES_TVJ(j) (tagged ? ML_TRD_RES_TV(sync, n, (j) & 1) : (ML_DEVICE float *)0)

  // The columns, their padding rows r .. rs - 1 and those of v and w zero (so that 4-row
  // accesses up to rs change nothing and add nothing).
  for (int c = 0; c < nc; ++c) {
    ML_DEVICE const float *src = A + (ml_i64)(k0 + g + G * c) * ld + k0;
    for (int q = lane; q < rs; q += gs) cols[c * rs + q] = q < r ? src[q] : 0.0f;
  }
  for (int q = r + lane; q < rs; q += gs) vs[q] = wv[q] = 0.0f;
  ml_barrier(ctx);
  if (g == 0)
    ml_trd_res_reflect(ctx, n, k0, k0, cols, vec, vg, A + (ml_i64)k0 * ld, sync, red,
                       ML_TRD_RES_TVJ(k0));

  for (int j = k0; j < n - 1; ++j) {
    const int q1 = j + 1 - k0;  // the first row left, as an offset
    // 4-row accesses start at qa: rows qa .. q1 - 1 of v and w read as zero (those rows of
    // the columns are eliminated: never read again, left unchanged by the update).
    const int qa = vec4 ? q1 / 4 * 4 : q1;
    ML_DEVICE float *yg = (j & 1) ? yg1 : yg0;
    const int c0 = q1 - g <= 0 ? 0 : (q1 - g + G - 1) / G;
    const int na = nc - c0, rows = r - q1;
    // Tagged: nothing left to do for a group whose columns are all eliminated.
    if (tagged && na <= 0) break;
    // v_j.
    float tau;
#if ML_HAS_TAGGED
    if (tagged) {
      ML_DEVICE const float *tv = ML_TRD_RES_TV(sync, n, j & 1);
      ml_barrier(ctx);  // every lane done with step j - 1's v
      if (qa + lane < q1) vs[qa + lane] = 0.0f;
      for (int q = q1 + lane; q < r; q += gs) vs[q] = ml_poll_tagged(tv + 2 * (k0 + q), (ml_u32)j);
      if (lane == 0) red[ML_RED_FLOATS] = ml_poll_tagged(tv + 2 * n, (ml_u32)j);
      ml_barrier(ctx);
      tau = red[ML_RED_FLOATS];
    } else
#endif
    {
      ml_trd_res_wait(ctx, sync, (ml_u32)(j + 1));
      if (qa + lane < q1) vs[qa + lane] = 0.0f;
      for (int q = q1 + lane; q < r; q += gs) vs[q] = vg[k0 + q];
      tau = vec[ML_TRD_TAU(n) + j];
      ml_barrier(ctx);
    }
    // y_i = A[j+1:n, i]^T v for the own columns i > j: a simdgroup per column and slice of
    // rows (S slices when there are fewer columns than simdgroups).
    const int S = na > 0 && na < nsimd ? nsimd / na : 1;
    if (vec4 && wide && na >= 2 * nsimd) {
      // Many columns a simdgroup: four at a time, v loaded once for the four and their four
      // sums reduced together (independent shuffle chains).
      for (int t0 = 4 * sid; t0 < na; t0 += 4 * nsimd) {
        const int nu = na - t0 < 4 ? na - t0 : 4;
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int q = qa + 4 * sl; q < rs; q += 128) {
          float y[4];
          ml_gemm_sload4(vs + q, y);
          for (int u = 0; u < 4; ++u) {
            if (u >= nu) break;
            float x[4];
            ml_gemm_sload4(cols + (c0 + t0 + u) * rs + q, x);
            for (int k = 0; k < 4; ++k) acc[u] = ml_fma(x[k], y[k], acc[u]);
          }
        }
        for (int u = 0; u < 4; ++u) {
          const float sum = ml_simd_sum(ctx, acc[u]);
          if (sl == 0 && u < nu) part[t0 + u] = sum;
        }
      }
    } else if (vec4) {
      // Rows qa .. rs - 1 (v zero outside q1 .. r - 1), 4 rows a lane per access.
      const int seg = ((rs - qa + S - 1) / S + 127) / 128 * 128;
      for (int t = sid; t < na * S; t += nsimd) {
        ML_SHARED const float *col = cols + (c0 + t / S) * rs;
        const int e0 = qa + (t % S) * seg, e1 = e0 + seg < rs ? e0 + seg : rs;
        float a0 = 0.0f, a1 = 0.0f;
        int q = e0 + 4 * sl;
        for (; q + 128 < e1; q += 256) {
          float x[4], y[4], x2[4], y2[4];
          ml_gemm_sload4(col + q, x);
          ml_gemm_sload4(vs + q, y);
          ml_gemm_sload4(col + q + 128, x2);
          ml_gemm_sload4(vs + q + 128, y2);
          for (int k = 0; k < 4; ++k) {
            a0 = ml_fma(x[k], y[k], a0);
            a1 = ml_fma(x2[k], y2[k], a1);
          }
        }
        if (q < e1) {
          float x[4], y[4];
          ml_gemm_sload4(col + q, x);
          ml_gemm_sload4(vs + q, y);
          for (int k = 0; k < 4; ++k) a0 = ml_fma(x[k], y[k], a0);
        }
        const float s = ml_simd_sum(ctx, a0 + a1);
        if (sl == 0) part[t] = s;
      }
    } else {
      const int seg = ((rows + S - 1) / S + 31) / 32 * 32;
      for (int t = sid; t < na * S; t += nsimd) {
        ML_SHARED const float *col = cols + (c0 + t / S) * rs;
        const int e0 = q1 + (t % S) * seg, e1 = e0 + seg < r ? e0 + seg : r;
        float a0 = 0.0f, a1 = 0.0f;
        int q = e0 + sl;
        for (; q + 32 < e1; q += 64) {
          a0 = ml_fma(col[q], vs[q], a0);
          a1 = ml_fma(col[q + 32], vs[q + 32], a1);
        }
        if (q < e1) a0 = ml_fma(col[q], vs[q], a0);
        const float s = ml_simd_sum(ctx, a0 + a1);
        if (sl == 0) part[t] = s;
      }
    }
    ml_barrier(ctx);
    float yv = 0.0f;
#if ML_HAS_TAGGED
    if (tagged) {
      ML_DEVICE float *ty = ML_TRD_RES_TY(sync, n, j & 1);
      for (int c = lane; c < na; c += gs) {
        float y = 0.0f;
        for (int s = 0; s < S; ++s) y += part[c * S + s];
        ml_store_tagged(ty + 2 * (k0 + g + G * (c0 + c)), y, (ml_u32)j);
      }
      for (int q = q1 + lane; q < r; q += gs) {
        const float y = ml_poll_tagged(ty + 2 * (k0 + q), (ml_u32)j);
        wv[q] = y;
        yv = ml_fma(y, vs[q], yv);
      }
    } else
#endif
    {
      if (lane < na) {
        float y = 0.0f;
        for (int s = 0; s < S; ++s) y += part[lane * S + s];
        yg[k0 + g + G * (c0 + lane)] = y;
      }
      ml_barrier_device(ctx);
      if (lane == 0) ml_atomic_add_release_u32(sync + 1, 1u);
      ml_trd_res_wait(ctx, sync + 1, (ml_u32)G * (ml_u32)(j - k0 + 1));
      // w = tau y - (tau^2 / 2) (y^T v) v, y^T v summed over all rows in the same order in
      // every group (the same bits).
      for (int q = q1 + lane; q < r; q += gs) {
        const float y = yg[k0 + q];
        wv[q] = y;
        yv = ml_fma(y, vs[q], yv);
      }
    }
    const float alpha = -0.5f * tau * tau * ml_group_sum(ctx, yv, red);
    for (int q = q1 + lane; q < r; q += gs) wv[q] = tau * wv[q] + alpha * vs[q];
    if (qa + lane < q1) wv[qa + lane] = 0.0f;
    ml_barrier(ctx);
    // A[j+1:n, i] -= v w_i + w v_i, column j + 1 first (then its reflector) when it is ours.
    const bool next = q1 % G == g;
    const int cn = q1 / G;
    for (int pass = next ? 0 : 1; pass < 2; ++pass) {
      const int ca = pass == 0 ? cn : c0, cb = pass == 0 ? cn + 1 : nc;
      // Pass 0 (4-row form): the squares of column j + 1's new rows j + 3 .. summed on the way,
      // so its reflector needs no pass of its own over the column and one barrier less.
      float s2 = 0.0f, su2 = 0.0f;
      if (vec4) {
        // 4 rows a lane: v and w loaded once for all the columns. Pass 1 with fewer 4-row
        // chunks than lanes: the columns in cs slices (lanes t and t + nq take the same rows of
        // different columns), so that every lane works when a group holds many columns.
        const int nq = (rs - qa) / 4;
        int cs = 1;
        if (pass == 1 && wide && nq > 0 && nq < gs) {
          cs = gs / nq;
          if (cs > cb - ca) cs = cb - ca;
          if (cs < 1) cs = 1;
        }
        for (int t = lane; t < nq * cs; t += gs) {
          const int q = qa + 4 * (t % nq), c1 = ca + t / nq;
          float vq[4], wq[4];
          ml_gemm_sload4(vs + q, vq);
          ml_gemm_sload4(wv + q, wq);
          for (int c = c1; c < cb; c += cs) {
            if (pass == 1 && next && c == cn) continue;
            ML_SHARED float *col = cols + c * rs + q;
            const int qi = g + G * c;
            const float wi = wv[qi], vi = vs[qi];
            float x[4];
            ml_gemm_sload4(col, x);
            for (int k = 0; k < 4; ++k) x[k] -= vq[k] * wi + wq[k] * vi;
            ml_gemm_sstore4(col, x);
            if (pass == 0)
              for (int k = 0; k < 4; ++k)
                if (q + k >= q1 + 2) {
                  const float xu = x[k] * ML_HOUSE_UP;
                  s2 += x[k] * x[k];
                  su2 += xu * xu;
                }
          }
        }
      } else {
        for (int c = ca; c < cb; ++c) {
          if (pass == 1 && next && c == cn) continue;
          ML_SHARED float *col = cols + c * rs;
          const int qi = g + G * c;
          const float wi = wv[qi], vi = vs[qi];
          for (int q = q1 + lane; q < r; q += gs) col[q] -= vs[q] * wi + wv[q] * vi;
        }
      }
      if (pass == 0 && vec4) {
        ml_trd_res_reflect_sums(ctx, n, k0, j + 1, cols + cn * rs, vec, vg,
                                A + (ml_i64)(j + 1) * ld, sync, red, ML_TRD_RES_TVJ(j + 1), s2,
                                su2);
      } else if (pass == 0) {
        ml_barrier(ctx);
        ml_trd_res_reflect(ctx, n, k0, j + 1, cols + cn * rs, vec, vg,
                           A + (ml_i64)(j + 1) * ld, sync, red, ML_TRD_RES_TVJ(j + 1));
      }
    }
  }
#undef ML_TRD_RES_TVJ
}

ML_FN void ml_step_trd_res(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  if ((p.flags & 4) != 0) {  // zero matrix group_id's two words (and void its tags)
    ML_DEVICE float *sync = ws + p.off[3] + ctx.group_id * p.stride[3];
    if (ctx.lane < 2) sync[ctx.lane] = 0.0f;
#if ML_HAS_TAGGED
    if ((p.flags & 8) != 0) {
      const int words = 4 * p.n + 2;  // from float 32 on: v (2 x (n + 1)), y (2 x n)
      for (int k = ctx.lane; k < words; k += ctx.group_size)
        ml_store_tagged(sync + 32 + 2 * k, 0.0f, ML_TRD_RES_NO_TAG);
    }
#endif
    return;
  }
  const ml_i64 b = ctx.group_id / p.i[1];
  ml_trd_res_run(ctx, p, ws, b, (int)(ctx.group_id - b * p.i[1]));
}

#endif  // ML_KERNELS_SYTRD_RESIDENT_H
