// Batched matrix product of the blocked algorithms, in the portable dialect:
//   C = alpha op(A) op(B) + beta C      (column-major, every operand in the workspace)
// op(A) is m x k, op(B) k x n, C m x n. Register-blocked: a group of L x L lanes
// (L = ML_GEMM_LANES(p): 4, 8 or 16) computes a T x T tile of C (T = R L), each lane an R x R
// block of it in registers (R = ML_GEMM_REGS(p): 4, or 8 with L = 16). The operands pass
// through shared memory in k-slices of BK = 64 / R, double-buffered: the next slice's global
// loads are in flight (in registers) while the lanes multiply the current one, then land in
// the other buffer, one barrier per slice. fp32 FMA only (no reduced-precision units):
// accuracy first.
// Groups: batch x S x ceil(m / T) x ceil(n / T), tile-fastest (the tiles of one matrix
// together). Fields: m, n, k; flags ML_GEMM_TRANS_A / ML_GEMM_TRANS_B; alpha, beta (beta == 0
// never reads C, so C may hold anything, NaN included); operands ML_GEMM_A, _B, _C (off,
// stride, ld); ML_GEMM_VEC(p): ML_GEMM_VEC_* bits, the operands whose 4-float runs are
// 16-byte aligned (vector loads and stores; the host sets them from offsets, strides and
// leading dimensions, the workspace base being 16-byte aligned). Split k
// (ML_GEMM_SPLIT(p) = S > 1, for products with few tiles and a long k): slice s of the k range
// goes to group column s, which writes its raw partial product to operand ML_GEMM_PART
// (S consecutive m x n column-major blocks per matrix, ld m);
// ml_step_gemm_sum then forms C = alpha sum_s P_s + beta C.
// Lane (tx, ty) = (lane % L, lane / L) owns rows 4 tx + q + 4 L g and columns
// 4 ty + q + 4 L g (q < 4, g < R / 4): each of its shared-memory reads is 4 consecutive floats
// (one 16-byte load), consecutive lanes reading consecutive 16 bytes (no bank conflicts), and
// its stores to C are runs of 4 rows, consecutive lanes writing consecutive runs.
#ifndef ML_KERNELS_GEMM_H
#define ML_KERNELS_GEMM_H

#include "blocked_common.h"

#define ML_GEMM_TRANS_A 1
#define ML_GEMM_TRANS_B 2
// Granularity of a split k range: a multiple of every variant's slice.
#define ML_GEMM_BK 16
#define ML_GEMM_VEC_A 1
#define ML_GEMM_VEC_B 2
#define ML_GEMM_VEC_C 4
#define ML_GEMM_VEC_PART 8
// The step's arguments by name (slots of ml_step_params, set by the host, read here): the
// integers, and the operand numbers of off / stride / ld.
#define ML_GEMM_LANES(p) ((p).i[0])  // L
#define ML_GEMM_SPLIT(p) ((p).i[1])  // S, the k slices (<= 1: none)
#define ML_GEMM_REGS(p) ((p).i[2])   // R
#define ML_GEMM_VEC(p) ((p).i[3])    // ML_GEMM_VEC_* bits
#define ML_GEMM_A 0
#define ML_GEMM_B 1
#define ML_GEMM_C 2
#define ML_GEMM_PART 3

// Tile side of a group of l x l lanes with r x r outputs each.
ML_HOST_FN int ml_gemm_tile(int l, int r) { return r * l; }
// k per staged slice: every lane loads 16 / l runs of 4 floats of each operand per slice.
ML_HOST_FN int ml_gemm_bk(int r) { return 64 / r; }
// Floats per staged k row: the tile plus 4, which keeps 16-byte alignment and spreads the
// transposing stores of a k-contiguous operand over the banks.
ML_HOST_FN int ml_gemm_pitch(int l, int r) { return r * l + 4; }
// Shared floats of a group: two buffers of one slice of each operand.
ML_HOST_FN int ml_gemm_shared_floats(int l, int r) {
  return 4 * ml_gemm_bk(r) * ml_gemm_pitch(l, r);
}
// Groups of one launch over `batch` matrices (no split).
ML_HOST_FN ml_i64 ml_gemm_groups(int m, int n, int l, int r, ml_i64 batch) {
  const int t = ml_gemm_tile(l, r);
  return batch * (ml_i64)((m + t - 1) / t) * (ml_i64)((n + t - 1) / t);
}
// k per slice of a product split S ways: whole ML_GEMM_BK slices.
ML_HOST_FN int ml_gemm_split_len(int k, int s) {
  const int per = (k + s - 1) / s;
  return (per + ML_GEMM_BK - 1) / ML_GEMM_BK * ML_GEMM_BK;
}

// The k loop of the products unrolled twice, not fully: a full unroll lets the compiler hoist
// every slice's shared loads, beyond 128 registers per lane (two 256-lane groups per CUDA SM).
#if defined(ML_TARGET_CPU)
#define ML_GEMM_UNROLL2 _Pragma("GCC unroll 2")
#else
#define ML_GEMM_UNROLL2 _Pragma("unroll 2")
#endif

// 4 consecutive floats, one 16-byte access where the dialect has vector types (the address
// 16-byte aligned: the caller checks).
#if defined(ML_TARGET_CUDA)
ML_FN void ml_gemm_load4(ML_DEVICE const float *p, ML_THREAD float *v) {
  const float4 x = *(const float4 *)p;
  v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
}
ML_FN void ml_gemm_store4(ML_DEVICE float *p, ML_THREAD const float *v) {
  *(float4 *)p = make_float4(v[0], v[1], v[2], v[3]);
}
ML_FN void ml_gemm_sload4(ML_SHARED const float *p, ML_THREAD float *v) {
  const float4 x = *(const float4 *)p;
  v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
}
ML_FN void ml_gemm_sstore4(ML_SHARED float *p, ML_THREAD const float *v) {
  *(float4 *)p = make_float4(v[0], v[1], v[2], v[3]);
}
#elif defined(ML_TARGET_METAL)
ML_FN void ml_gemm_load4(ML_DEVICE const float *p, ML_THREAD float *v) {
  const float4 x = *(ML_DEVICE const float4 *)p;
  v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
}
ML_FN void ml_gemm_store4(ML_DEVICE float *p, ML_THREAD const float *v) {
  float4 x;  // componentwise: MSL's float4(a, b, c, d) has no OpenCL C++ twin for the check
  x.x = v[0], x.y = v[1], x.z = v[2], x.w = v[3];
  *(ML_DEVICE float4 *)p = x;
}
ML_FN void ml_gemm_sload4(ML_SHARED const float *p, ML_THREAD float *v) {
  const float4 x = *(ML_SHARED const float4 *)p;
  v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
}
ML_FN void ml_gemm_sstore4(ML_SHARED float *p, ML_THREAD const float *v) {
  float4 x;  // componentwise: MSL's float4(a, b, c, d) has no OpenCL C++ twin for the check
  x.x = v[0], x.y = v[1], x.z = v[2], x.w = v[3];
  *(ML_SHARED float4 *)p = x;
}
#else
ML_FN void ml_gemm_load4(ML_DEVICE const float *p, ML_THREAD float *v) {
  for (int q = 0; q < 4; ++q) v[q] = p[q];
}
ML_FN void ml_gemm_store4(ML_DEVICE float *p, ML_THREAD const float *v) {
  for (int q = 0; q < 4; ++q) p[q] = v[q];
}
ML_FN void ml_gemm_sload4(ML_SHARED const float *p, ML_THREAD float *v) {
  for (int q = 0; q < 4; ++q) v[q] = p[q];
}
ML_FN void ml_gemm_sstore4(ML_SHARED float *p, ML_THREAD const float *v) {
  for (int q = 0; q < 4; ++q) p[q] = v[q];
}
#endif

// Loads this lane's part of one k-slice of an operand into registers v (NL runs of 4): X's
// element (t, l), t along the tile (rows of op(A), columns of op(B)) and l along k, lies at
// X[l ld + t] when `along_t` (t contiguous) else at X[t ld + l]. Outside t < tn or l < kn: 0.
template <int T, int BK, int NL>
ML_FN void ml_gemm_fetch(ML_DEVICE const float *X, int ld, bool along_t, bool vec, int t0,
                         int tn, int l0, int kn, int lane, int gs, ML_THREAD float *v) {
  ML_UNROLL
  for (int u = 0; u < NL; ++u) {
    const int e = lane + gs * u;
    ML_THREAD float *w = v + 4 * u;
    if (along_t) {
      const int t = t0 + 4 * (e % (T / 4)), l = l0 + e / (T / 4);
      ML_DEVICE const float *x = X + (ml_i64)l * ld + t;
      if (vec && t + 3 < tn && l < kn) {
        ml_gemm_load4(x, w);
      } else {
        ML_UNROLL
        for (int q = 0; q < 4; ++q) w[q] = t + q < tn && l < kn ? x[q] : 0.0f;
      }
    } else {
      const int l = l0 + 4 * (e % (BK / 4)), t = t0 + e / (BK / 4);
      ML_DEVICE const float *x = X + (ml_i64)t * ld + l;
      if (vec && l + 3 < kn && t < tn) {
        ml_gemm_load4(x, w);
      } else {
        ML_UNROLL
        for (int q = 0; q < 4; ++q) w[q] = t < tn && l + q < kn ? x[q] : 0.0f;
      }
    }
  }
}

// Stores what ml_gemm_fetch loaded into a shared slice Xs[l P + t] (l, t local).
template <int T, int BK, int NL, int P>
ML_FN void ml_gemm_stage(ML_SHARED float *Xs, bool along_t, int lane, int gs,
                         ML_THREAD const float *v) {
  ML_UNROLL
  for (int u = 0; u < NL; ++u) {
    const int e = lane + gs * u;
    if (along_t) {
      ml_gemm_sstore4(Xs + (e / (T / 4)) * P + 4 * (e % (T / 4)), v + 4 * u);
    } else {
      const int l = 4 * (e % (BK / 4)), t = e / (BK / 4);
      ML_UNROLL
      for (int q = 0; q < 4; ++q) Xs[(l + q) * P + t] = v[4 * u + q];
    }
  }
}

template <int R, int L>
ML_FN void ml_gemm_tiles(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE float *ws) {
  const int T = R * L, BK = 64 / R, P = T + 4, G = R / 4, NL = 16 / L;
  const int lane = ctx.lane, gs = L * L;
  const int m = p.m, n = p.n, S = ML_GEMM_SPLIT(p) > 1 ? ML_GEMM_SPLIT(p) : 1;
  const int tm = (m + T - 1) / T, tn = (n + T - 1) / T;
  const ml_i64 tiles = (ml_i64)tm * tn;
  const ml_i64 bs = ctx.group_id / tiles;  // matrix * S + slice
  const ml_i64 b = bs / S;
  const int sl = (int)(bs - b * S);
  const int t = (int)(ctx.group_id - bs * tiles);
  const int klen = S > 1 ? ml_gemm_split_len(p.k, S) : p.k;
  const int kbeg = sl * klen;
  const int k = S > 1 ? ml_imin(p.k, kbeg + klen) : p.k;
  const int i0 = (t % tm) * T, j0 = (t / tm) * T;
  ML_DEVICE const float *A = ws + p.off[ML_GEMM_A] + b * p.stride[ML_GEMM_A];
  ML_DEVICE const float *B = ws + p.off[ML_GEMM_B] + b * p.stride[ML_GEMM_B];
  const int lda = p.ld[ML_GEMM_A], ldb = p.ld[ML_GEMM_B];
  // op(A) is tile-contiguous (rows) unless transposed; op(B) is tile-contiguous (columns)
  // only when transposed.
  const bool a_t = (p.flags & ML_GEMM_TRANS_A) == 0, b_t = (p.flags & ML_GEMM_TRANS_B) != 0;
  const int vec = ML_GEMM_VEC(p);
  const bool va = (vec & ML_GEMM_VEC_A) != 0, vb = (vec & ML_GEMM_VEC_B) != 0;
  ML_SHARED float *As = ctx.scratch;  // [2][BK][P]: As[l P + i] = op(A)(i0 + i, l0 + l)
  ML_SHARED float *Bs = As + 2 * BK * P;  // [2][BK][P]: Bs[l P + j] = op(B)(l0 + l, j0 + j)
  const int tx = lane % L, ty = lane / L;
  const bool active = ty < L;  // a group larger than L x L leaves its extra lanes idle

  float acc[R][R];
  ML_UNROLL
  for (int r = 0; r < R; ++r) {
    ML_UNROLL
    for (int s = 0; s < R; ++s) acc[r][s] = 0.0f;
  }
  float ra[4 * NL], rb[4 * NL];
  const int slices = k > kbeg ? (k - kbeg + BK - 1) / BK : 0;
  if (active && slices > 0) {
    ml_gemm_fetch<T, BK, NL>(A, lda, a_t, va, i0, m, kbeg, k, lane, gs, ra);
    ml_gemm_fetch<T, BK, NL>(B, ldb, b_t, vb, j0, n, kbeg, k, lane, gs, rb);
    ml_gemm_stage<T, BK, NL, P>(As, a_t, lane, gs, ra);
    ml_gemm_stage<T, BK, NL, P>(Bs, b_t, lane, gs, rb);
  }
  ml_barrier(ctx);
  for (int st = 0; st < slices; ++st) {
    const int cur = (st & 1) * BK * P;
    const bool more = st + 1 < slices;
    if (active && more) {  // the next slice's loads, in flight during the products below
      const int l0 = kbeg + (st + 1) * BK;
      ml_gemm_fetch<T, BK, NL>(A, lda, a_t, va, i0, m, l0, k, lane, gs, ra);
      ml_gemm_fetch<T, BK, NL>(B, ldb, b_t, vb, j0, n, l0, k, lane, gs, rb);
    }
    if (active) {
      ML_SHARED const float *as = As + cur + 4 * tx;
      ML_SHARED const float *bs = Bs + cur + 4 * ty;
      ML_GEMM_UNROLL2
      for (int l = 0; l < BK; ++l) {
        float av[R], bv[R];
        ML_UNROLL
        for (int g = 0; g < G; ++g) {
          ml_gemm_sload4(as + l * P + 4 * L * g, av + 4 * g);
          ml_gemm_sload4(bs + l * P + 4 * L * g, bv + 4 * g);
        }
        ML_UNROLL
        for (int r = 0; r < R; ++r) {
          ML_UNROLL
          for (int s = 0; s < R; ++s) acc[r][s] = ml_fma(av[r], bv[s], acc[r][s]);
        }
      }
      if (more) {  // into the other buffer: its last readers passed the previous barrier
        const int nxt = BK * P - cur;
        ml_gemm_stage<T, BK, NL, P>(As + nxt, a_t, lane, gs, ra);
        ml_gemm_stage<T, BK, NL, P>(Bs + nxt, b_t, lane, gs, rb);
      }
    }
    ml_barrier(ctx);
  }
  if (!active) return;
  // A split slice writes its raw partial product (alpha, beta applied by gemm_sum), else C.
  const bool part = S > 1;
  ML_DEVICE float *D =
      part ? ws + p.off[ML_GEMM_PART] + b * p.stride[ML_GEMM_PART] + (ml_i64)sl * m * n
           : ws + p.off[ML_GEMM_C] + b * p.stride[ML_GEMM_C];
  const int ldd = part ? m : p.ld[ML_GEMM_C];
  const bool vd = (vec & (part ? ML_GEMM_VEC_PART : ML_GEMM_VEC_C)) != 0;
  const float alpha = part ? 1.0f : p.alpha, beta = part ? 0.0f : p.beta;
  ML_UNROLL
  for (int s = 0; s < R; ++s) {
    const int j = j0 + 4 * ty + (s % 4) + 4 * L * (s / 4);
    if (j >= n) continue;
    ML_UNROLL
    for (int g = 0; g < G; ++g) {
      const int i = i0 + 4 * tx + 4 * L * g;
      if (i >= m) continue;
      ML_DEVICE float *d = D + (ml_i64)j * ldd + i;
      float c[4], o[4];
      if (vd && i + 3 < m) {
        if (beta != 0.0f) ml_gemm_load4(d, c);
        ML_UNROLL
        for (int q = 0; q < 4; ++q)
          o[q] = beta == 0.0f ? alpha * acc[4 * g + q][s]
                              : ml_fma(alpha, acc[4 * g + q][s], beta * c[q]);
        ml_gemm_store4(d, o);
      } else {
        ML_UNROLL
        for (int q = 0; q < 4; ++q) {
          if (i + q >= m) continue;
          d[q] = beta == 0.0f ? alpha * acc[4 * g + q][s]
                              : ml_fma(alpha, acc[4 * g + q][s], beta * d[q]);
        }
      }
    }
  }
}

ML_FN void ml_step_gemm(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  // Group-uniform: every lane takes the same variant. 8 x 8 blocks only in 16 x 16 groups: a
  // variant with more registers would raise the count of the whole kernel.
  const int L = ML_GEMM_LANES(p);
  if (ML_GEMM_REGS(p) == 8) ml_gemm_tiles<8, 16>(ctx, p, ws);
  else if (L == 16) ml_gemm_tiles<4, 16>(ctx, p, ws);
  else if (L == 8) ml_gemm_tiles<4, 8>(ctx, p, ws);
  else ml_gemm_tiles<4, 4>(ctx, p, ws);
}

// gemm_sum: C = alpha (P_0 + ... + P_{S-1}) + beta C for the partial products of a split
// ml_step_gemm (same fields; S = ML_GEMM_SPLIT(p)). Groups: batch x ceil(m n / group size),
// an element of C per lane.
ML_FN void ml_step_gemm_sum(ML_STEP_ARGS) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int m = p.m, n = p.n, S = ML_GEMM_SPLIT(p);
  const ml_i64 mn = (ml_i64)m * n;
  const ml_i64 per = (mn + ctx.group_size - 1) / ctx.group_size;
  const ml_i64 b = ctx.group_id / per;
  const ml_i64 e = (ctx.group_id - b * per) * ctx.group_size + ctx.lane;
  if (e >= mn) return;
  const int i = (int)(e % m), j = (int)(e / m);
  ML_DEVICE const float *P = ws + p.off[ML_GEMM_PART] + b * p.stride[ML_GEMM_PART] + e;
  float s = 0.0f;
  for (int q = 0; q < S; ++q) s += P[(ml_i64)q * mn];
  ML_DEVICE float *c =
      ws + p.off[ML_GEMM_C] + b * p.stride[ML_GEMM_C] + (ml_i64)j * p.ld[ML_GEMM_C] + i;
  *c = p.beta == 0.0f ? p.alpha * s : ml_fma(p.alpha, s, p.beta * *c);
}

#endif  // ML_KERNELS_GEMM_H
