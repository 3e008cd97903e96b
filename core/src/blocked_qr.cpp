// Blocked Householder QR (core/kernels/qr_blocked.h): panels of nb columns, trailing updates
// and the formation of Q as matrix products. Slice per matrix: stat, W (the matrix, m x n),
// V (the reflectors, m x k), T (one nb x nb block per panel), Q (m x kq), two nb-row buffers.
#include "blocked_impl.h"

namespace ml::blocked {
namespace {

struct QrLayout {
  int64_t m, n, k, kq, rrows, np;
  int nb;  // panel width: o.nb, or narrower so that the first (tallest) panel fits shared memory
  bool want_q;
  int64_t stat, w, v, t, q, x1, x2, part, part_floats;
  int64_t per;
};

QrLayout layout(const Call &c, int32_t kf, const Options &o) {
  QrLayout L;
  L.m = c.m;
  L.n = c.n;
  L.k = std::min(c.m, c.n);
  L.want_q = kf != ML_K_QR_R;
  L.kq = kf == ML_K_QR_COMPLETE ? c.m : L.k;
  L.rrows = kf == ML_K_QR_COMPLETE ? c.m : L.k;
  const int m = static_cast<int>(c.m);
  L.nb = ml_qr_panel_width(m, o.nb, panel_lanes(m, o), o.shared_floats);
  L.np = (L.k + L.nb - 1) / L.nb;
  Slice s;
  L.stat = s.add(ML_STAT_FLOATS);
  L.w = s.add(L.m * L.n);
  L.v = s.add(L.m * L.k);
  L.t = s.add(L.np * L.nb * L.nb);
  L.q = L.want_q ? s.add(L.m * L.kq) : 0;
  const int64_t xw = L.nb * std::max(L.n, L.want_q ? L.kq : 0);
  L.x1 = s.add(xw);
  L.x2 = s.add(xw);
  // Partial products of the split V^T X products (nb x width, k = the panel's rows).
  const int split = split_slices(c.batch, o);
  L.part_floats = split > 1 ? split * xw : 0;
  L.part = L.part_floats > 0 ? s.add(L.part_floats) : 0;
  L.per = s.floats;
  return L;
}

int64_t per_matrix(const Call &c, int32_t kf, const Options &o) { return layout(c, kf, o).per; }

ml_status run_chunk(const Call &c, int32_t kf, const Options &o, const Chunk &ch) {
  const QrLayout L = layout(c, kf, o);
  const int m = static_cast<int>(L.m), n = static_cast<int>(L.n), k = static_cast<int>(L.k);
  const int nb = L.nb;
  ml_status st;
  if ((st = load_input(ch, o, m, n, ML_STEP_TRI_FULL, L.stat, L.w))) return st;
  for (int j = 0; j < k; j += nb) {
    const int jb = std::min(nb, k - j), r = m - j;
    const int64_t tp = L.t + static_cast<int64_t>(j / nb) * nb * nb;
    ml_step_params p = step_params();
    p.m = m;
    p.n = n;
    p.i[0] = j;
    p.i[1] = jb;
    p.i[2] = nb;
    p.off[0] = L.w;
    p.ld[0] = m;
    p.off[1] = L.v;
    p.ld[1] = m;
    p.off[2] = tp;
    p.off[3] = L.stat;
    const int pg = panel_lanes(r, o);
    if ((st = ch.launch(kStep_qr_panel, ch.batch, pg, ml_qr_panel_shared_floats(r, nb, pg), p)))
      return st;
    const int nt = n - j - jb;
    if (nt <= 0) continue;
    const int64_t vj = L.v + static_cast<int64_t>(j) * m + j;
    const int64_t w2 = L.w + static_cast<int64_t>(j + jb) * m + j;
    // W2 -= V (T^T (V^T W2))
    if ((st = gemm(ch, o, ML_GEMM_TRANS_A, jb, nt, r, 1.0f, vj, m, w2, m, 0.0f, L.x1, nb, L.part,
                   L.part_floats)) ||
        (st = gemm(ch, o, ML_GEMM_TRANS_A, jb, nt, jb, 1.0f, tp, nb, L.x1, nb, 0.0f, L.x2, nb)) ||
        (st = gemm(ch, o, 0, r, nt, jb, -1.0f, vj, m, L.x2, nb, 1.0f, w2, m)))
      return st;
  }
  if (L.want_q) {
    const int kq = static_cast<int>(L.kq);
    ml_step_params p = step_params();
    p.m = m;
    p.n = kq;
    p.off[0] = L.q;
    p.ld[0] = m;
    if ((st = ch.launch(kStep_eye, ch.batch * kq, plain_lanes(o), 0, p))) return st;
    // Q = H_0 ... H_{k-1} I, panel by panel from the last: Q2 -= V (T (V^T Q2)), Q2 the rows
    // and columns j.. of Q (its columns before j are still those of I there).
    for (int j = (k - 1) / nb * nb; j >= 0; j -= nb) {
      const int jb = std::min(nb, k - j), r = m - j, nq = kq - j;
      const int64_t tp = L.t + static_cast<int64_t>(j / nb) * nb * nb;
      const int64_t vj = L.v + static_cast<int64_t>(j) * m + j;
      const int64_t q2 = L.q + static_cast<int64_t>(j) * m + j;
      if ((st = gemm(ch, o, ML_GEMM_TRANS_A, jb, nq, r, 1.0f, vj, m, q2, m, 0.0f, L.x1, nb,
                     L.part, L.part_floats)) ||
          (st = gemm(ch, o, 0, jb, nq, jb, 1.0f, tp, nb, L.x1, nb, 0.0f, L.x2, nb)) ||
          (st = gemm(ch, o, 0, r, nq, jb, -1.0f, vj, m, L.x2, nb, 1.0f, q2, m)))
        return st;
    }
    if ((st = store_output(ch, o, 0, m, kq, 0, L.q, m, L.stat))) return st;
  }
  if ((st = store_output(ch, o, 1, static_cast<int>(L.rrows), n, ML_STORE_UPPER | ML_STORE_SCALE,
                         L.w, m, L.stat)))
    return st;
  return store_info(ch, o, L.stat, c.info != nullptr);
}

}  // namespace

const Algo *qr_algo() {
  static const Algo a{per_matrix, run_chunk};
  return &a;
}

}  // namespace ml::blocked
