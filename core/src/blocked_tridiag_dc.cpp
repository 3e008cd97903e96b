// Sequencing of the divide-and-conquer tridiagonal eigensolver (blocked_tridiag.h,
// core/kernels/tridiag_dc.h): leaves in a launch, then per level the merges of all blocks of
// all matrices of the chunk in five launches and the products Q' = blockdiag(Q1, Q2) U.
#include "blocked_tridiag.h"
#include "errors.h"

namespace ml::blocked {

int64_t tridiag_dc_scratch_floats(int64_t n) { return ml_dc_scratch(static_cast<int>(n)); }

ml_status tridiag_eig_dc(const Chunk &ch, const Options &o, int n, int il, int count, int64_t d,
                         int64_t e, int64_t w, int64_t z, int ldz, int64_t scratch, int64_t stat) {
  if (n <= 0 || count <= 0 || ch.batch <= 0) return ML_OK;
  if (il < 0 || count > n - il || z < 0 || ldz < n)
    return fail(ML_INVALID_ARGUMENT, "tridiag_eig_dc", "values %d..%d of order %d, ldz %d", il,
                il + count - 1, n, ldz);
  ml_status st;
  ml_step_params p = tridiag_params(n, scratch, d, e, stat);
  // The scaled copies with negligible couplings zeroed, the scale in the header (count 0).
  if ((st = tridiag_prep(ch, o, p))) return st;
  const int leaves = (n + ML_DC_LEAF - 1) / ML_DC_LEAF;
  // A simdgroup per leaf: its lanes share the rotations' row updates (ML_DC_LEAF columns).
  const int ll = std::max(1, std::min(ML_DC_LEAF, o.max_group));
  p.off[3] = stat;
  ml_step_params pl = p;
  pl.flags = env_or("METAL_LINALG_DC_LEAF_JACOBI", o.dc_leaf_jacobi) != 0 ? 1 : 0;
  if ((st = ch.launch(kStep_dc_leaf, ch.batch * leaves, ll, 0, pl))) return st;
  const int lanes = plain_lanes(o);
  int cur = 0;  // which of Q, Q' holds the current eigenvectors
  for (int s = 2 * ML_DC_LEAF; s / 2 < n; s *= 2) {
    const int64_t merges = (n + s - 1) / s;
    ml_step_params q = step_params();
    q.n = n;
    q.i[0] = s;
    q.i[1] = cur;
    q.off[0] = scratch;
    const int64_t per = (s + lanes - 1) / lanes;
    // The deflation's scan over shared memory where the merge's arrays fit (i[2] = 1).
    const int64_t dsh = 5 * int64_t{s} + 2 * ML_RED_FLOATS + 4;
    const bool staged = dsh <= o.shared_floats && env_or("METAL_LINALG_DC_DEFLATE_SHARED", 1) != 0;
    ml_step_params qd = q;
    qd.i[2] = staged ? 1 : 0;
    if ((st = ch.launch(kStep_dc_deflate, ch.batch * merges, lanes,
                        staged ? static_cast<int>(dsh) : 0, qd)))
      return st;
    // The secular roots a simdgroup each where the merges are few (their pole sums then
    // spread over 32 lanes instead of one lane's serial loop).
    ml_step_params qs = q;
    int64_t sper = per;
    if (o.dc_secular_simd > 0 && ch.batch * merges <= o.dc_secular_simd && lanes % 32 == 0) {
      qs.flags = 1;
      sper = (s + lanes / 32 - 1) / (lanes / 32);
    }
    if ((st = ch.launch(kStep_dc_secular, ch.batch * merges * sper, lanes, 0, qs)) ||
        (st = ch.launch(kStep_dc_zhat, ch.batch * merges * per, lanes, 0, q)))
      return st;
    const int64_t qa = scratch + ml_dc_off_q(n, cur), qb = scratch + ml_dc_off_q(n, 1 - cur);
    const int64_t u = scratch + ml_dc_off_q(n, 2);
    q.off[1] = u;
    if ((st = ch.launch(kStep_dc_vec, ch.batch * n, lanes, 0, q))) return st;
    // Q'(rows of a half, columns of the merge) = Q(half's diagonal block) U(half's rows): the
    // full merges of one matrix at a stride of s (n + 1) as one batch of products, the last
    // (shorter) merge apart.
    const int64_t full = n / s, diag = int64_t{s} * (n + 1);
    const int h = s / 2;
    if (full > 0) {
      if (ch.batch == 1) {
        const Chunk fc{ch.r, ch.first, full, diag};
        if ((st = gemm(fc, o, 0, h, s, h, 1.0f, qa, n, u, n, 0.0f, qb, n)) ||
            (st = gemm(fc, o, 0, h, s, h, 1.0f, qa + int64_t{h} * (n + 1), n, u + h, n, 0.0f,
                       qb + h, n)))
          return st;
      } else {
        for (int64_t mg = 0; mg < full; ++mg) {
          const int64_t at = mg * diag;
          if ((st = gemm(ch, o, 0, h, s, h, 1.0f, qa + at, n, u + at, n, 0.0f, qb + at, n)) ||
              (st = gemm(ch, o, 0, h, s, h, 1.0f, qa + at + int64_t{h} * (n + 1), n, u + at + h, n,
                         0.0f, qb + at + h, n)))
            return st;
        }
      }
    }
    if (full * s < n) {
      const int lo = static_cast<int>(full * s), hi = n, mid = std::min(hi, lo + h);
      const int64_t at = int64_t{lo} * (n + 1);
      if ((st = gemm(ch, o, 0, mid - lo, hi - lo, mid - lo, 1.0f, qa + at, n, u + at, n, 0.0f,
                     qb + at, n)))
        return st;
      if (mid < hi) {
        const int64_t a2 = int64_t{mid} * (n + 1);
        if ((st = gemm(ch, o, 0, hi - mid, hi - lo, hi - mid, 1.0f, qa + a2, n, u + at + (mid - lo),
                       n, 0.0f, qb + at + (mid - lo), n)))
          return st;
      }
    }
    cur = 1 - cur;
  }
  p = step_params();
  p.n = n;
  p.i[0] = il;
  p.i[1] = count;
  p.off[0] = scratch;
  p.off[1] = scratch + ml_dc_off_q(n, cur);
  p.off[2] = z;
  p.ld[2] = ldz;
  p.off[3] = w;
  return ch.launch(kStep_dc_out, ch.batch * count, lanes, 0, p);
}

}  // namespace ml::blocked
