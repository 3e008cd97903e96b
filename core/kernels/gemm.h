// Batched matrix product of the blocked algorithms, in the portable dialect:
//   C = alpha op(A) op(B) + beta C      (column-major, every operand in the workspace)
// op(A) is m x k, op(B) k x n, C m x n. Tiled: a group of L x L lanes (L = p.i[0]: 4, 8 or
// 16) computes a T x T tile of C (T = 4 L), each lane a 4 x 4 block of it in registers, the
// operands staged through shared memory in slices of ML_GEMM_BK along k. fp32 FMA only (no
// reduced-precision units): accuracy first.
// Groups: batch x S x ceil(m / T) x ceil(n / T), tile-fastest (the tiles of one matrix
// together). Fields: m, n, k; flags ML_GEMM_TRANS_A / ML_GEMM_TRANS_B; alpha, beta (beta == 0
// never reads C, so C may hold anything, NaN included); operand 0 A, 1 B, 2 C (off, stride,
// ld). Split k (i[1] = S > 1, for products with few tiles and a long k): slice s of the k
// range goes to group column s, which writes its raw partial product to operand 3 (S
// consecutive m x n column-major blocks per matrix, ld m); ml_step_gemm_sum then forms
// C = alpha sum_s P_s + beta C.
// Lane (tx, ty) = (lane % L, lane / L) owns rows tx + L r and columns ty + L s (r, s < 4):
// consecutive lanes read consecutive shared-memory rows (no bank conflicts) and write
// consecutive rows of C (coalesced, column-major).
#ifndef ML_KERNELS_GEMM_H
#define ML_KERNELS_GEMM_H

#define ML_GEMM_TRANS_A 1
#define ML_GEMM_TRANS_B 2
#define ML_GEMM_BK 16

// Tile side of a group of l x l lanes.
ML_HOST_FN int ml_gemm_tile(int l) { return 4 * l; }
// Shared floats of a group of l x l lanes: the two staged slices.
ML_HOST_FN int ml_gemm_shared_floats(int l) { return 2 * ML_GEMM_BK * ml_gemm_tile(l); }
// Groups of one launch over `batch` matrices.
ML_HOST_FN ml_i64 ml_gemm_groups(int m, int n, int l, ml_i64 batch) {
  const int t = ml_gemm_tile(l);
  return batch * (ml_i64)((m + t - 1) / t) * (ml_i64)((n + t - 1) / t);
}
// k per slice of a product split S ways: whole ML_GEMM_BK slices.
ML_HOST_FN int ml_gemm_split_len(int k, int s) {
  const int per = (k + s - 1) / s;
  return (per + ML_GEMM_BK - 1) / ML_GEMM_BK * ML_GEMM_BK;
}

ML_FN void ml_step_gemm(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE float *ws,
                        ML_DEVICE const float *a, ML_DEVICE float *o0, ML_DEVICE float *o1,
                        ML_DEVICE float *o2, ML_DEVICE int *info) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int L = p.i[0], T = 4 * L, gs = ctx.group_size, lane = ctx.lane;
  const int m = p.m, n = p.n, S = p.i[1] > 1 ? p.i[1] : 1;
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
  ML_DEVICE const float *A = ws + p.off[0] + b * p.stride[0];
  ML_DEVICE const float *B = ws + p.off[1] + b * p.stride[1];
  ML_DEVICE float *C = ws + p.off[2] + b * p.stride[2];
  const int lda = p.ld[0], ldb = p.ld[1], ldc = p.ld[2];
  const bool ta = (p.flags & ML_GEMM_TRANS_A) != 0, tb = (p.flags & ML_GEMM_TRANS_B) != 0;
  ML_SHARED float *As = ctx.scratch;          // As[l * T + i] = op(A)(i0 + i, l0 + l)
  ML_SHARED float *Bs = As + ML_GEMM_BK * T;  // Bs[l * T + j] = op(B)(l0 + l, j0 + j)
  const int tx = lane % L, ty = lane / L;
  const bool active = ty < L;  // a group larger than L x L leaves its extra lanes idle

  float acc[4][4];
  ML_UNROLL
  for (int r = 0; r < 4; ++r) {
    ML_UNROLL
    for (int s = 0; s < 4; ++s) acc[r][s] = 0.0f;
  }
  const int slice = ML_GEMM_BK * T;
  for (int l0 = kbeg; l0 < k; l0 += ML_GEMM_BK) {
    // Stage: memory-contiguous index fastest across lanes.
    for (int e = lane; e < slice; e += gs) {
      int i, l;
      if (ta) {
        l = e % ML_GEMM_BK;
        i = e / ML_GEMM_BK;
      } else {
        i = e % T;
        l = e / T;
      }
      const int gi = i0 + i, gl = l0 + l;
      float x = 0.0f;
      if (gi < m && gl < k) x = ta ? A[(ml_i64)gi * lda + gl] : A[(ml_i64)gl * lda + gi];
      As[l * T + i] = x;
    }
    for (int e = lane; e < slice; e += gs) {
      int j, l;
      if (tb) {
        j = e % T;
        l = e / T;
      } else {
        l = e % ML_GEMM_BK;
        j = e / ML_GEMM_BK;
      }
      const int gj = j0 + j, gl = l0 + l;
      float x = 0.0f;
      if (gj < n && gl < k) x = tb ? B[(ml_i64)gl * ldb + gj] : B[(ml_i64)gj * ldb + gl];
      Bs[l * T + j] = x;
    }
    ml_barrier(ctx);
    if (active) {
      for (int l = 0; l < ML_GEMM_BK; ++l) {
        float av[4], bv[4];
        ML_UNROLL
        for (int r = 0; r < 4; ++r) av[r] = As[l * T + tx + L * r];
        ML_UNROLL
        for (int s = 0; s < 4; ++s) bv[s] = Bs[l * T + ty + L * s];
        ML_UNROLL
        for (int r = 0; r < 4; ++r) {
          ML_UNROLL
          for (int s = 0; s < 4; ++s) acc[r][s] = ml_fma(av[r], bv[s], acc[r][s]);
        }
      }
    }
    ml_barrier(ctx);
  }
  if (!active) return;
  // A split slice writes its raw partial product (alpha, beta applied by gemm_sum), else C.
  const bool part = S > 1;
  ML_DEVICE float *D = part ? ws + p.off[3] + b * p.stride[3] + (ml_i64)sl * m * n : C;
  const int ldd = part ? m : ldc;
  const float alpha = part ? 1.0f : p.alpha, beta = part ? 0.0f : p.beta;
  ML_UNROLL
  for (int s = 0; s < 4; ++s) {
    const int j = j0 + ty + L * s;
    if (j >= n) continue;
    ML_UNROLL
    for (int r = 0; r < 4; ++r) {
      const int i = i0 + tx + L * r;
      if (i >= m) continue;
      ML_DEVICE float *d = D + (ml_i64)j * ldd + i;
      *d = beta == 0.0f ? alpha * acc[r][s] : ml_fma(alpha, acc[r][s], beta * *d);
    }
  }
}

// gemm_sum: C = alpha (P_0 + ... + P_{S-1}) + beta C for the partial products of a split
// ml_step_gemm (same fields; S = i[1]). Groups: batch x ceil(m n / group size), an element
// of C per lane.
ML_FN void ml_step_gemm_sum(ML_CTX ctx, ML_STEP_PARAMS p, ML_DEVICE float *ws,
                            ML_DEVICE const float *a, ML_DEVICE float *o0, ML_DEVICE float *o1,
                            ML_DEVICE float *o2, ML_DEVICE int *info) {
  (void)a, (void)o0, (void)o1, (void)o2, (void)info;
  if (ctx.group_id >= p.groups) return;
  const int m = p.m, n = p.n, S = p.i[1];
  const ml_i64 mn = (ml_i64)m * n;
  const ml_i64 per = (mn + ctx.group_size - 1) / ctx.group_size;
  const ml_i64 b = ctx.group_id / per;
  const ml_i64 e = (ctx.group_id - b * per) * ctx.group_size + ctx.lane;
  if (e >= mn) return;
  const int i = (int)(e % m), j = (int)(e / m);
  ML_DEVICE const float *P = ws + p.off[3] + b * p.stride[3] + e;
  float s = 0.0f;
  for (int q = 0; q < S; ++q) s += P[(ml_i64)q * mn];
  ML_DEVICE float *c = ws + p.off[2] + b * p.stride[2] + (ml_i64)j * p.ld[2] + i;
  *c = p.beta == 0.0f ? p.alpha * s : ml_fma(p.alpha, s, p.beta * *c);
}

#endif  // ML_KERNELS_GEMM_H
