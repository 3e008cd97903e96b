// Householder bidiagonalisation with the trailing matrix resident in the groups' shared memory
// (the step brd_res; sequenced by core/src/blocked_svd.cpp after the panels of
// gebrd_blocked.h, or alone). For one or a few matrices the panel scheme is bound by latency:
// three launches per column, each re-reading the trailing matrix from device memory. Here G
// persistent groups per matrix each hold a share of the ROWS of the trailing matrix, row
// k0 + g + G i of A[k0:M, k0:N] in group g (columns k0 .. N - 1, row-major in shared memory),
// for the whole reduction, and only vectors of N floats pass between groups. Per column c:
//   partials   every group, for its rows r > c, forms z_g = sum_r A(r, c) A(r, c+1:N) and the
//              sums of A(r, c)^2 and of (A(r, c) 2^60)^2 (ml_house_finish's rescaled sum);
//              the owner of row c also writes row c (columns c .. N - 1) to a row buffer;
//              each group writes its partial vector P_g to device memory, then adds 1 to the
//              word C1 (release);
//   reduce     after C1 counts every group: group g sums slice g of the partial vectors over
//              all groups (a fixed order) into Z, then adds 1 to the word C2;
//   reflectors after C2 counts every group, each group reads Z and row c and forms, with the
//              same arithmetic in every group (bitwise the same results), the column
//              reflector (d_c, tauq_c, v from alpha = A(c, c) and the sums), the tau-scaled
//              product w = tauq v^T A(c:M, c+1:N) = tauq (A(c, c+1:N) + scale z), the
//              updated row c = A(c, c+1:N) - w, and from it the row reflector (e_c, taup_c,
//              u); its rows' share of V(:, c), group 0 U(:, c) and the scalars;
//   update     each group updates its rows r > c with both reflectors at once:
//              A(r, :) -= v_r w + t_r u, t_r = taup (A(r, :) u - v_r (w^T u)) (A(r, :) u a
//              dot over the group's own row), fused with the next column's partials.
// Two exchanges through device memory per column (both all-to-all: the partials' reduction
// is split over the groups so that no group reads more than about 2 N floats per column).
// Owning columns instead would need the column's reflector handed out, the row gathered and
// A u (length M) reduced: three or four exchanges. The partial vectors and Z have one buffer
// each (a group writes column c + 1's partials only after C2 says every group has summed
// column c's; Z of column c + 1 only after C1 says every group has read Z of column c), the
// row buffer two by the parity of c (the owner of row c + 2 writes it only after every group
// has published column c + 1's partials, so has read row c).
// The last column has no row reflector (and no update); at N - 2 the row reflector has one
// entry (tau 0). The reflectors are written as gebrd_blocked.h's steps leave them (V(k0:M, c):
// 0 above c, 1 at c, v below; U(k0+1:N, c): 0 to row c, 1 at c + 1, u below), so larft and the
// back-transformations run unchanged; W itself is not written back (d and e are the result).
// Groups wait on each other both ways, so all G x batch groups must run at once: the host
// launches no more groups than the device holds at a time (one per multiprocessor). Control
// flow depends on the shape only, so a non-finite matrix completes the hand-offs like any
// other. The CPU runner runs this step's groups on concurrent threads.
// Operands (offsets from the matrix's slice, stride[0] floats apart): off[0] W (M x N, ld M,
// A[k0:M, k0:N] up to date), off[1] V, off[2] U, off[3] the vector block (ML_BRD_*), ld[0] the
// hand-off region (ml_brd_res_floats(N, G): G partial vectors of N + 2 floats, Z, two row
// buffers of N, the words C1, C2; zeroed by a launch with flags 4 before: a group per matrix).
// m = M, n = N; i[0] = k0 (a panel boundary), i[1] = G (groups per matrix), i[2] = the rows a
// group holds at most (ceil((M - k0) / G)).
// Tagged hand-offs (p.flags & 8, backends with ML_HAS_TAGGED; sytrd_resident.h): the partial
// vectors, Z and the row buffer pass as tagged words of tag c, two buffers of each by the parity
// of c, in the region ml_brd_res_tagged_floats(N, G) at ld[0] (every tag set to ~0 first by the
// launch with flags 4 | 8: i[3] groups per matrix); readers poll the words they need until
// their tags read c, with no words C1, C2, fences or atomics. Two buffers suffice: a group
// writes column c + 2's partials (and row) after forming column c + 1's reflectors, which
// needed every group's slice of Z for c + 1, which each wrote after reading column c + 1's
// partials, after finishing column c; Z of c + 2 follows every group's partials of c + 2.
#ifndef ML_KERNELS_GEBRD_RESIDENT_H
#define ML_KERNELS_GEBRD_RESIDENT_H

#include "blocked_common.h"
#include "gebrd_blocked.h"
#include "householder.h"

// Reduction slots of brd_res: three sums per simdgroup behind one barrier.
#define ML_BRD_RES_RED 96

// Shared floats of brd_res: nr rows of nq = N - k0 columns (odd row stride), w and u (nq
// each), per row x, v, t (nr each), the rows' dot products (a slot per row or simdgroup), the
// reduction's team sums (gs), the group sums.
ML_HOST_FN int ml_brd_res_shared_floats(int nr, int nq, int gs) {
  const int nsimd = (gs + 31) / 32;
  return nr * ml_shared_ld(nq) + 2 * nq + 3 * nr + (nr > nsimd ? nr : nsimd) + gs +
         ML_BRD_RES_RED;
}
// Device floats per matrix of the hand-offs with G groups: the partial vectors, their sums, two
// row buffers, two words.
ML_HOST_FN ml_i64 ml_brd_res_floats(int n, int g) {
  return (ml_i64)(g + 1) * (n + 2) + 2 * (ml_i64)n + 2;
}

// Device floats per matrix of the tagged hand-offs: two buffers (by parity) of the G partial
// vectors and Z (N + 2 words each), two row buffers of N words; a word is two floats.
ML_HOST_FN ml_i64 ml_brd_res_tagged_floats(int n, int g) {
  return 4 * (ml_i64)(g + 1) * (n + 2) + 4 * (ml_i64)n;
}
// Partial vector h (h = G: Z) of parity par, and the row buffer of parity par, as words.
#define ML_BRD_RES_TP(Pt, G, N, h, par) ((Pt) + 2 * ((ml_i64)((par) * ((G) + 1) + (h)) * ((N) + 2)))
#define ML_BRD_RES_TR(Pt, G, N, par) ((Pt) + 4 * (ml_i64)((G) + 1) * ((N) + 2) + 2 * (par) * (ml_i64)(N))


// The reflector of [alpha; x] from |x|^2 and |x 2^60|^2 (as ml_brd_house).
ML_FN void ml_brd_res_house(float alpha, float sigma, float sigma_up, ML_THREAD ml_house_t *h) {
  if (sigma < ML_HOUSE_TINY) ml_house_finish(alpha, sigma_up, ML_HOUSE_UP, h);
  else ml_house_finish(alpha, sigma, 1.0f, h);
}

// Lane 0 waits until the word w counts at least want; then the group's barrier (device).
ML_FN void ml_brd_res_wait(ML_CTX ctx, ML_DEVICE float *w, ml_u32 want) {
  if (ctx.lane == 0) {
    for (;;) {
      if (ml_load_acquire_u32(w) >= want) break;
      ml_spin_relax();
    }
  }
  ml_barrier_device(ctx);
}

// Group g of matrix b: the whole bidiagonalisation of columns k0 .. N - 1. Shared arrays are
// indexed by the column's offset q = column - k0 (q < nq) and the own row's index i (row
// k0 + g + G i, i < nr).
ML_FN void ml_brd_res_run(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE float *ws, ml_i64 b, int g) {
  const int M = p.m, N = p.n, k0 = p.i[0], G = p.i[1], nrmax = p.i[2];
  const int nq = N - k0, ldq = ml_shared_ld(nq);
  const int lane = ctx.lane, gs = ctx.group_size;
  const int sl = ml_simd_lane(ctx), sid = ml_simd_id(ctx), nsimd = ml_simd_count(ctx);
  ML_DEVICE float *base = ws + b * p.stride[0];
  ML_DEVICE const float *W = base + p.off[0];
  ML_DEVICE float *V = base + p.off[1];
  ML_DEVICE float *U = base + p.off[2];
  ML_DEVICE float *vec = base + p.off[3];
  ML_DEVICE float *P = base + p.ld[0];  // partial vector of group h at P + h (N + 2)
  ML_DEVICE float *Z = P + (ml_i64)G * (N + 2);
  ML_DEVICE float *R = Z + (N + 2);
  ML_DEVICE float *sync = R + 2 * N;
  ML_DEVICE float *mine = P + (ml_i64)g * (N + 2);
  ML_SHARED float *a = ctx.scratch;  // own row i, column offset q at a[i ldq + q]
  ML_SHARED float *wv = a + nrmax * ldq;
  ML_SHARED float *uv = wv + nq;
  ML_SHARED float *xs = uv + nq;
  ML_SHARED float *vs = xs + nrmax;
  ML_SHARED float *tv = vs + nrmax;
  ML_SHARED float *part = tv + nrmax;
  ML_SHARED float *team = part + (nrmax > nsimd ? nrmax : nsimd);
  ML_SHARED float *red = team + gs;
  const int nr = g < M - k0 ? (M - k0 - g + G - 1) / G : 0;
#if ML_HAS_TAGGED
  const bool tagged = (p.flags & 8) != 0;
#else
  const bool tagged = false;
#endif
  ML_DEVICE float *Pt = base + p.ld[0];  // the tagged region (tagged)

  for (int e = lane; e < nr * nq; e += gs) {
    const int i = e % nr, q = e / nr;
    a[i * ldq + q] = W[(ml_i64)(k0 + q) * M + k0 + g + G * i];
  }
  ml_barrier(ctx);

  for (int c = k0; c < N; ++c) {
    const int cq = c - k0;
    const ml_u32 want = (ml_u32)G * (ml_u32)(cq + 1);
    ML_DEVICE float *Rc = R + (c & 1) * N;
    ML_DEVICE float *tmine = ML_BRD_RES_TP(Pt, G, N, g, c & 1);
    ML_DEVICE float *tR = ML_BRD_RES_TR(Pt, G, N, c & 1);
    ML_DEVICE float *tZ = ML_BRD_RES_TP(Pt, G, N, G, c & 1);
    const ml_u32 tag = (ml_u32)c;
    // The first own row at or below c; whether row c is ours (then it is row i0).
    const int i0 = cq - g <= 0 ? 0 : (cq - g + G - 1) / G;
    const bool own = cq % G == g;
    // ---- Partials of column c, after the update of step c - 1 on the rows >= c (column c
    // first, its entries below row c kept in xs).
    const bool upd = c > k0;
    {
      float s = 0.0f, su = 0.0f;
      for (int i = i0 + lane; i < nr; i += gs) {
        const int r = k0 + g + G * i;
        float x = a[i * ldq + cq];
        if (upd) {
          x -= vs[i] * wv[cq] + tv[i];  // u_c = 1
          a[i * ldq + cq] = x;
        }
        if (r == c) {
#if ML_HAS_TAGGED
          if (tagged) ml_store_tagged(tR + 2 * c, x, tag);
          else
#endif
            Rc[c] = x;
        }
        const float xb = r > c ? x : 0.0f, xu = xb * ML_HOUSE_UP;
        xs[i] = xb;
        s += xb * xb;
        su += xu * xu;
      }
      s = ml_simd_sum(ctx, s);
      su = ml_simd_sum(ctx, su);
      if (sl == 0) {
        red[sid] = s;
        red[32 + sid] = su;
      }
      ml_barrier(ctx);
      if (lane == 0) {
        float t = red[0], tu = red[32];
        for (int w = 1; w < nsimd; ++w) {
          t += red[w];
          tu += red[32 + w];
        }
#if ML_HAS_TAGGED
        if (tagged) {
          ml_store_tagged(tmine, t, tag);
          ml_store_tagged(tmine + 2, tu, tag);
        } else
#endif
        {
          mine[0] = t;
          mine[1] = tu;
        }
      }
    }
    for (int q = cq + 1 + lane; q < nq; q += gs) {
      const float wq = upd ? wv[q] : 0.0f, uq = upd ? uv[q] : 0.0f;
      float z = 0.0f;
      for (int i = i0; i < nr; ++i) {
        float y = a[i * ldq + q];
        if (upd) {
          y -= vs[i] * wq + tv[i] * uq;
          a[i * ldq + q] = y;
        }
        z = ml_fma(xs[i], y, z);
      }
#if ML_HAS_TAGGED
      if (tagged) {
        if (own) ml_store_tagged(tR + 2 * (k0 + q), a[i0 * ldq + q], tag);
        ml_store_tagged(tmine + 2 * (2 + k0 + q), z, tag);
      } else
#endif
      {
        if (own) Rc[k0 + q] = a[i0 * ldq + q];
        mine[2 + k0 + q] = z;
      }
    }
    if (tagged) {
      ml_barrier(ctx);  // wv, uv and xs read by every lane before they change
    } else {
      ml_barrier_device(ctx);
      if (lane == 0) ml_atomic_add_release_u32(sync, 1u);
      ml_brd_res_wait(ctx, sync, want);
    }

    // ---- Reduce: entries t < ne of the partial vectors (t < 2 the sums of squares, t >= 2
    // column c + t - 1 at index c + 1 + t), slice g summed over the groups in order.
    {
      const int ne = N - c + 1, per = (ne + G - 1) / G, t0 = g * per;
      const int cnt = t0 < ne ? (ne - t0 < per ? ne - t0 : per) : 0;
      const int teams = cnt > 0 && cnt <= gs / 2 ? gs / cnt : 1;
      for (int l = lane; l < teams * cnt; l += gs) {
        const int h0 = l / cnt, t = t0 + l - h0 * cnt, e = t < 2 ? t : c + 1 + t;
        float s = 0.0f;
#if ML_HAS_TAGGED
        if (tagged) {
          for (int h = h0; h < G; h += teams)
            s += ml_poll_tagged(ML_BRD_RES_TP(Pt, G, N, h, c & 1) + 2 * e, tag);
          if (teams == 1) ml_store_tagged(tZ + 2 * e, s, tag);
          else team[l] = s;
          continue;
        }
#endif
        for (int h = h0; h < G; h += teams) s += P[(ml_i64)h * (N + 2) + e];
        if (teams == 1) Z[e] = s;
        else team[l] = s;
      }
      if (teams > 1) {
        ml_barrier(ctx);
        for (int l = lane; l < cnt; l += gs) {
          const int t = t0 + l, e = t < 2 ? t : c + 1 + t;
          float s = 0.0f;
          for (int h = 0; h < teams; ++h) s += team[h * cnt + l];
#if ML_HAS_TAGGED
          if (tagged) ml_store_tagged(tZ + 2 * e, s, tag);
          else
#endif
            Z[e] = s;
        }
      }
    }
    if (tagged) {
      ml_barrier(ctx);
    } else {
      ml_barrier_device(ctx);
      if (lane == 0) ml_atomic_add_release_u32(sync + 1, 1u);
      ml_brd_res_wait(ctx, sync + 1, want);
    }

    // ---- The column reflector (every group alike), w, the updated row c (in uv), V(:, c).
    ml_house_t hq;
#if ML_HAS_TAGGED
    if (tagged) {
      ml_brd_res_house(ml_poll_tagged(tR + 2 * c, tag), ml_poll_tagged(tZ, tag),
                       ml_poll_tagged(tZ + 2, tag), &hq);
      for (int q = cq + 1 + lane; q < nq; q += gs) {
        const float r = ml_poll_tagged(tR + 2 * (k0 + q), tag);
        const float wt = hq.tau * (r + hq.scale * ml_poll_tagged(tZ + 2 * (2 + k0 + q), tag));
        wv[q] = wt;
        uv[q] = r - wt;
      }
    } else
#endif
    {
      ml_brd_res_house(Rc[c], Z[0], Z[1], &hq);
      for (int q = cq + 1 + lane; q < nq; q += gs) {
        const float r = Rc[k0 + q];
        const float wt = hq.tau * (r + hq.scale * Z[2 + k0 + q]);
        wv[q] = wt;
        uv[q] = r - wt;
      }
    }
    for (int i = lane; i < nr; i += gs) {
      const int r = k0 + g + G * i;
      const float v = r < c ? 0.0f : r == c ? 1.0f : (hq.tau == 0.0f ? 0.0f : xs[i] * hq.scale);
      vs[i] = v;
      V[(ml_i64)c * M + r] = v;
    }
    if (g == 0 && lane == 0) {
      vec[ml_brd_vec(N, ML_BRD_D) + c] = hq.beta;
      vec[ml_brd_vec(N, ML_BRD_TAUQ) + c] = hq.tau;
    }
    ml_barrier(ctx);
    if (c == N - 1) break;

    // ---- The row reflector from the updated row c (alpha at c + 1, x = uv[c + 2 ..]), in one
    // pass with the own rows' dots with x (a simdgroup per row and slice of columns; S slices
    // when there are fewer rows than simdgroups) and x^T w.
    const int c1 = cq + 1;
    const int i1 = c1 - g <= 0 ? 0 : (c1 - g + G - 1) / G;  // the first own row below c
    const int na = nr > i1 ? nr - i1 : 0, len = nq - c1 - 1;
    const int S = na > 0 && na < nsimd ? nsimd / na : 1;
    const int seg = ((len + S - 1) / S + 31) / 32 * 32;
    for (int t = sid; t < na * S; t += nsimd) {
      ML_SHARED const float *row = a + (i1 + t / S) * ldq;
      const int e0 = c1 + 1 + (t % S) * seg, e1 = e0 + seg < nq ? e0 + seg : nq;
      float a0 = 0.0f, a1 = 0.0f;
      int q = e0 + sl;
      for (; q + 32 < e1; q += 64) {
        a0 = ml_fma(row[q], uv[q], a0);
        a1 = ml_fma(row[q + 32], uv[q + 32], a1);
      }
      if (q < e1) a0 = ml_fma(row[q], uv[q], a0);
      const float s = ml_simd_sum(ctx, a0 + a1);
      if (sl == 0) part[t] = s;
    }
    {
      float s = 0.0f, su = 0.0f, xw = 0.0f;
      for (int q = c1 + 1 + lane; q < nq; q += gs) {
        const float x = uv[q], xu = x * ML_HOUSE_UP;
        s += x * x;
        su += xu * xu;
        xw = ml_fma(x, wv[q], xw);
      }
      s = ml_simd_sum(ctx, s);
      su = ml_simd_sum(ctx, su);
      xw = ml_simd_sum(ctx, xw);
      if (sl == 0) {
        red[sid] = s;
        red[32 + sid] = su;
        red[64 + sid] = xw;
      }
    }
    ml_barrier(ctx);
    float sp = red[0], spu = red[32], xw = red[64];
    for (int w = 1; w < nsimd; ++w) {
      sp += red[w];
      spu += red[32 + w];
      xw += red[64 + w];
    }
    ml_house_t hp;
    ml_brd_res_house(uv[c1], sp, spu, &hp);
    const float wu = wv[c1] + hp.scale * xw;  // w^T u
    for (int i = i1 + lane; i < nr; i += gs) {
      float d = 0.0f;
      for (int k = 0; k < S; ++k) d += part[(i - i1) * S + k];
      tv[i] = hp.tau * (a[i * ldq + c1] + hp.scale * d - vs[i] * wu);
    }
    // u below c + 1 (uv[c1] is left as it is: other lanes may still read alpha; u_{c+1} = 1).
    for (int q = c1 + 1 + lane; q < nq; q += gs) {
      const float u = hp.tau == 0.0f ? 0.0f : uv[q] * hp.scale;
      uv[q] = u;
      if (g == 0) U[(ml_i64)c * N + k0 + q] = u;
    }
    if (g == 0) {
      for (int r = k0 + 1 + lane; r <= c + 1; r += gs)
        U[(ml_i64)c * N + r] = r == c + 1 ? 1.0f : 0.0f;
      if (lane == 0) {
        vec[ml_brd_vec(N, ML_BRD_E) + c] = hp.beta;
        vec[ml_brd_vec(N, ML_BRD_TAUP) + c] = hp.tau;
      }
    }
    ml_barrier(ctx);
  }
}

ML_FN void ml_step_brd_res(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  if ((p.flags & 4) != 0 && (p.flags & 8) != 0) {  // void the tags: i[3] groups per matrix
#if ML_HAS_TAGGED
    const ml_i64 b = ctx.group_id / p.i[3], part = ctx.group_id - b * p.i[3];
    const ml_i64 words = ml_brd_res_tagged_floats(p.n, p.i[1]) / 2;
    const ml_i64 per = (words + p.i[3] - 1) / p.i[3], w0 = part * per;
    const ml_i64 w1 = w0 + per < words ? w0 + per : words;
    ML_DEVICE float *Pt = ws + b * p.stride[0] + p.ld[0];
    for (ml_i64 w = w0 + ctx.lane; w < w1; w += ctx.group_size)
      ml_store_tagged(Pt + 2 * w, 0.0f, 0xffffffffu);
#endif
    return;
  }
  if ((p.flags & 4) != 0) {  // zero matrix group_id's two words
    ML_DEVICE float *sync = ws + ctx.group_id * p.stride[0] + p.ld[0] +
                            (ml_i64)(p.i[1] + 1) * (p.n + 2) + 2 * (ml_i64)p.n;
    if (ctx.lane < 2) sync[ctx.lane] = 0.0f;
    return;
  }
  const ml_i64 b = ctx.group_id / p.i[1];
  ml_brd_res_run(ctx, p, ws, b, (int)(ctx.group_id - b * p.i[1]));
}

#endif  // ML_KERNELS_GEBRD_RESIDENT_H
