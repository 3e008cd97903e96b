// Blocked Householder QR (core/kernels/qr_blocked.h): panels of nb columns factored in shared
// memory, trailing updates and the formation of Q as matrix products. Two levels when the
// panels are narrower than o.nb_outer (tall matrices: a panel's rows must fit shared memory):
// an outer panel of NB columns is factored panel by panel (each updating the rest of the
// outer panel), its reflectors' T then built at once (larft) and the trailing columns updated
// with k = NB, so the trailing matrix is read n / NB times, not n / nb. Slice per matrix:
// stat, W (the matrix, m x n), V (the reflectors, m x k), T (one NB x NB block per outer
// panel), the inner panel's T, tau, Q (m x kq), two NB-row buffers, split-k partials.
// Panels of many rows at small batches are spread over groups instead (core/kernels/qr_tsqr.h:
// row blocks factored in parallel, their R combined, the reflectors rebuilt): full-width panels
// at any height, one level, plus the TSQR region (LU, signs, the stack of R factors).
#include "blocked_impl.h"

namespace ml::blocked {
namespace {

// Lanes and flags of the panel steps over r rows.
int qr_lanes(int r, const Options &o) {
  if (r >= 1024 && o.qr_panel_lanes > 0)
    return std::max(1, std::min(o.qr_panel_lanes, o.max_group));
  return panel_lanes(r, o);
}
int qr_flags(const Options &o) { return o.qr_panel_split ? ML_QR_SPLIT_ROWS : 0; }

// Lanes of a register panel step over r rows of nb columns: the fewest that hold the rows, or
// more where o.qr_panel_reg_rows caps the rows a lane holds (whole simdgroups, at most
// ML_QRR_MAX_LANES and max_group).
int reg_lanes(int r, int nb, const Options &o) {
  const int fewest = ml_qrr_lanes(r, nb, o.max_group);
  if (o.qr_panel_reg_rows <= 0) return fewest;
  const int most = std::min(o.max_group, ML_QRR_MAX_LANES) / 32 * 32;
  const int want = ((r + o.qr_panel_reg_rows - 1) / o.qr_panel_reg_rows + 31) / 32 * 32;
  return std::max(fewest, std::min(want, most));
}

// Whether the qr_panel steps take the fused factorisation (whole simdgroups of 32 lanes).
bool fused(const Options &o) { return o.qr_panel_fused != 0 && o.max_group >= 32; }

// Lanes of a qr_panel step over r rows: the fused one's simdgroups each own r / nw rows and
// add nw partial sums per column, so about sqrt(r) of them.
int panel_gs(int r, const Options &o) {
  if (!fused(o)) return qr_lanes(r, o);
  const int most = std::min(o.max_group, 1024) / 32 * 32;
  if (o.qr_fused_lanes > 0) return std::max(32, std::min(o.qr_fused_lanes / 32 * 32, most));
  int nw = 1;
  while (nw < 32 && nw * nw < r) nw *= 2;
  return std::max(32, std::min(32 * nw, most));
}
int panel_flags(const Options &o) { return qr_flags(o) | (fused(o) ? ML_QR_FUSED : 0); }

// A panel's row blocks when spread over groups (nl = 0: one group per panel).
struct Tsqr {
  int nl = 0, hb = 0;
};

// Blocks of about o.qr_tsqr_rows rows for a panel of r >= o.qr_tsqr_min_rows rows and nb
// columns: at least two, the
// stack of their R factors within one group's shared memory, the last block >= nb rows.
Tsqr tsqr_plan(int r, int nb, const Options &o) {
  Tsqr t;
  const int h = o.qr_tsqr_rows;
  if (h < nb || r < std::max(2 * h, o.qr_tsqr_min_rows)) return t;
  int nl = r / h;
  while (nl >= 2 && ml_tsqr_tree_shared_floats(nl, nb) > o.shared_floats) --nl;
  for (; nl >= 2; --nl) {
    const int hb = (r + nl - 1) / nl;
    if (ml_tsqr_leaf_shared_floats(hb, nb) > o.shared_floats) return t;  // fewer: taller
    if (r - (nl - 1) * hb < nb) continue;
    t.nl = nl;
    t.hb = hb;
    return t;
  }
  return t;
}

// T (nb x nb at t, ld nb) of an outer panel's jb reflectors (r rows at v, ld ldv; taus at
// tau): G by the product below the top block, as larft() forms it, then qr_larft (T's rows a
// simdgroup each, core/kernels/qr_blocked.h) or larft()'s own step.
ml_status outer_t(const Chunk &ch, const Options &o, int64_t v, int ldv, int64_t tau, int r,
                  int jb, int nb, int64_t t, int64_t part, int64_t part_floats) {
  const int most = std::min(o.max_group, 1024) / 32 * 32;
  if (!o.qr_row_larft || most < 32 || nb > 64)
    return larft(ch, o, v, ldv, tau, r, jb, nb, t, panel_lanes(r, o), part, part_floats);
  ml_step_params p;
  if (ml_status st = larft_gram(ch, o, v, ldv, tau, r, jb, nb, t, part, part_floats, p))
    return st;
  const int lanes = std::min(most, 32 * nb);
  return ch.launch(kStep_qr_larft, ch.batch, lanes, ml_qr_larft_shared_floats(nb), p);
}

struct QrLayout {
  int64_t m, n, k, kq, rrows, np;
  int nb;  // panel width: o.nb, or narrower so that the first (tallest) panel fits shared memory
           // (or, in registers, the registers)
  int NB;  // outer panel width (== nb: one level)
  bool want_q;
  bool tsqr;   // panels of >= 2 o.qr_tsqr_rows rows spread over groups (one level)
  bool reg;    // one-group panels in registers (qr_panel_reg)
  int max_nl;  // most row blocks of a spread panel
  int64_t stat, w, v, t, tin, tau, q, x1, x2, part, part_floats, ts;
  int64_t y1, y2, ypart;  // the side queue's products' buffers (lookahead; 0: none)
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
  // Spread panels where every panel is served: spread, or short enough for one group at o.nb.
  L.tsqr = o.qr_tsqr_rows > 0 && c.batch <= o.qr_tsqr_max_batch && L.k > 0 &&
           c.m >= int64_t{o.qr_tsqr_min_ratio} * c.n;
  L.max_nl = 0;
  for (int64_t j = 0; L.tsqr && j < L.k; j += o.nb) {
    const int r = m - static_cast<int>(j);
    const Tsqr t = tsqr_plan(r, o.nb, o);
    L.max_nl = std::max(L.max_nl, t.nl);
    if (t.nl == 0 && ml_qr_panel_shared_floats(r, o.nb, panel_gs(r, o)) > o.shared_floats)
      L.tsqr = false;
  }
  const bool reg_large = o.qr_panel_reg > 0 && m >= o.qr_panel_reg;
  const bool reg_small = !reg_large && o.qr_panel_reg_small > 0;
  const int reg_nb = reg_large   ? ml_qrr_width(m, o.nb, o.max_group)
                     : reg_small ? ml_qrr_width(m, std::min(o.nb, o.qr_panel_reg_small), o.max_group)
                                 : 0;
  L.reg = reg_nb > 0;
  L.tsqr = L.tsqr && L.max_nl > 0 && !L.reg;
  L.nb = L.tsqr  ? o.nb
         : L.reg ? reg_nb
                 : ml_qr_panel_width(m, o.nb, panel_gs(m, o), o.shared_floats);
  // Two levels where the panels had to be narrowed (tall matrices) or the batch makes the
  // trailing products dominate (H200, outer panels of 64: qr 4096 x1 158 -> 96 ms, 2048 x8
  // 86 -> 49; but 1024 x1 8.4 -> 11.3, 2048 x1 25 -> 30: the extra steps cost one matrix more
  // than the halved passes save).
  // (Register panels narrowed by qr_panel_reg_small: one level, as measured.)
  const bool narrowed = L.nb < o.nb && !(L.reg && reg_small);
  const bool outer = !L.tsqr && (narrowed || c.batch >= o.qr_outer_min_batch);
  L.NB = outer && L.nb < o.nb_outer && L.k > L.nb ? std::min(o.nb_outer, 64) : L.nb;
  L.np = (L.k + L.NB - 1) / L.NB;
  Slice s;
  L.stat = s.add(ML_STAT_FLOATS);
  L.w = s.add(L.m * L.n);
  L.v = s.add(L.m * L.k);
  L.t = s.add(L.np * L.NB * L.NB);
  L.tin = L.NB > L.nb ? s.add(int64_t{L.nb} * L.nb) : 0;
  L.tau = L.NB > L.nb ? s.add(L.k) : 0;
  L.q = L.want_q ? s.add(L.m * L.kq) : 0;
  const int64_t xw = L.NB * std::max(L.n, L.want_q ? L.kq : 0);
  L.x1 = s.add(xw);
  L.x2 = s.add(xw);
  // Partial products of the split V^T X products (nb x width, k = the panel's rows).
  const int split = split_slices(c.batch, o);
  L.part_floats = split > 1 ? split * xw : 0;
  L.part = L.part_floats > 0 ? s.add(L.part_floats) : 0;
  L.ts = L.tsqr ? s.add(ml_tsqr_lu_floats(L.nb) + int64_t{L.max_nl} * L.nb * L.nb) : 0;
  const bool ahead = (o.qr_lookahead == 1 ? L.NB == L.nb : o.qr_lookahead >= 2) && !L.tsqr &&
                     L.k > L.NB && L.k >= o.qr_lookahead_min_k;
  L.y1 = ahead ? s.add(xw) : 0;
  L.y2 = ahead ? s.add(xw) : 0;
  L.ypart = ahead && L.part_floats > 0 ? s.add(L.part_floats) : 0;
  L.per = s.floats;
  return L;
}

int64_t per_matrix(const Call &c, int32_t kf, const Options &o) { return layout(c, kf, o).per; }

// The panel of jb columns at (j, j) over ts.nl row blocks (core/kernels/qr_tsqr.h): V, this
// panel's T (at tp, ld nb) and the rows of R in W, as qr_panel leaves them.
ml_status tsqr_panel(const Chunk &ch, const Options &o, const QrLayout &L, int j, int jb,
                     const Tsqr &ts, int64_t tp) {
  ml_step_params p = step_params();
  p.m = static_cast<int>(L.m);
  p.k = ml_tsqr_lu_floats(L.nb);
  p.flags = qr_flags(o);
  p.i[0] = j;
  p.i[1] = jb;
  p.i[2] = ts.nl;
  p.i[3] = ts.hb;
  p.off[0] = L.w;
  p.ld[0] = static_cast<int>(L.m);
  p.off[1] = L.v;
  p.ld[1] = static_cast<int>(L.m);
  p.off[2] = L.ts;
  p.ld[2] = ts.nl * jb;
  const int lanes = qr_lanes(ts.hb, o);
  const int leaf_shared = ml_tsqr_leaf_shared_floats(ts.hb, L.nb);
  if (ml_status st = ch.launch(kStep_tsqr_leaf, ch.batch * ts.nl, lanes, leaf_shared, p)) return st;
  ml_step_params t = p;
  t.n = L.nb;
  t.i[3] = static_cast<int>(tp);
  t.off[3] = L.stat;
  if (ml_status st = ch.launch(kStep_tsqr_tree, ch.batch, qr_lanes(ts.nl * jb, o),
                               ml_tsqr_tree_shared_floats(ts.nl, L.nb), t))
    return st;
  return ch.launch(kStep_tsqr_rebuild, ch.batch * ts.nl, lanes, leaf_shared, p);
}

ml_status run_chunk(const Call &c, int32_t kf, const Options &o, const Chunk &ch) {
  const QrLayout L = layout(c, kf, o);
  const int m = static_cast<int>(L.m), n = static_cast<int>(L.n), k = static_cast<int>(L.k);
  const int nb = L.nb, NB = L.NB;
  const bool two = NB > nb;
  ml_status st;
  // The products' buffers (NB x width each) and the split-k scratch of V^T X.
  const LarfbWork work{L.x1, L.x2, NB, L.part, L.part_floats};
  // Lookahead (o.qr_lookahead): after panel (one level) or outer panel (two) J, the next one's
  // columns are updated on the main queue and the rest on the side queue (its own buffers),
  // joined after the next panel or outer panel is factored, before its own split.
  const bool ahead = L.y1 > 0;
  const LarfbWork side_work{L.y1, L.y2, NB, L.ypart, L.ypart > 0 ? L.part_floats : 0};
  bool pending = false;  // a side update in flight
  // The jb reflectors from column j (rows j..) with their T (at tp, ld ldt).
  auto refl = [&](int j, int jb, int64_t tp, int ldt) {
    return BlockReflector{L.v + static_cast<int64_t>(j) * m + j, m, tp, ldt, m - j, jb};
  };
  // Columns [c0, c0 + nt) of W, rows j..: W2 := H^T W2.
  auto update = [&](int j, int jb, int64_t tp, int ldt, int c0, int nt) -> ml_status {
    return larfb(ch, o, refl(j, jb, tp, ldt), true, L.w + static_cast<int64_t>(c0) * m + j, m, nt,
                 work);
  };
  // The trailing update of columns c0.. after the reflectors from column j: all of it at once,
  // or (lookahead, when another panel of width next follows) its first `next` columns, then
  // the rest on the side queue.
  Options by_products = o;  // a two-level split's first part (next outer panel's columns)
  by_products.larfb_cols = 0;
  by_products.larfb_work = 0;
  auto trailing = [&](int j, int jb, int64_t tp, int ldt, int c0, int next) -> ml_status {
    if (!ahead || next <= 0 || c0 + next >= n) return update(j, jb, tp, ldt, c0, n - c0);
    ml_status e;
    if ((e = larfb(ch, two ? by_products : o, refl(j, jb, tp, ldt), true,
                   L.w + static_cast<int64_t>(c0) * m + j, m, next, work)))
      return e;
    if ((e = ch.r.side_begin())) return e;
    e = larfb(ch, o, refl(j, jb, tp, ldt), true, L.w + static_cast<int64_t>(c0 + next) * m + j, m,
              n - c0 - next, side_work);
    if (ml_status f = ch.r.side_end()) e = e ? e : f;
    pending = e == ML_OK;
    return e;
  };
  auto join = [&]() -> ml_status {
    if (!pending) return ML_OK;
    pending = false;
    return ch.r.join();
  };
  if ((st = load_input(ch, o, m, n, ML_STEP_TRI_FULL, L.stat, L.w))) return st;
  for (int J = 0; J < k; J += NB) {
    const int JB = std::min(NB, k - J);
    const int64_t tp = L.t + static_cast<int64_t>(J / NB) * NB * NB;
    for (int j = J; j < J + JB; j += nb) {
      const int jb = std::min(nb, J + JB - j), r = m - j;
      ml_step_params p = step_params();
      p.m = m;
      p.n = n;
      ML_QRP_COL(p) = j;
      ML_QRP_WIDTH(p) = jb;
      ML_QRP_LDT(p) = nb;
      ML_QRP_TAU_AT(p) = two ? static_cast<int>(L.tau) : 0;
      p.off[ML_QRP_W] = L.w;
      p.ld[ML_QRP_W] = m;
      p.off[ML_QRP_V] = L.v;
      p.ld[ML_QRP_V] = m;
      p.off[ML_QRP_T] = two ? L.tin : tp;
      p.off[ML_QRP_STAT] = L.stat;
      p.flags = panel_flags(o);
      const Tsqr ts = L.tsqr ? tsqr_plan(r, nb, o) : Tsqr{};
      if (ts.nl > 0) {
        if ((st = tsqr_panel(ch, o, L, j, jb, ts, tp))) return st;
      } else if (L.reg) {
        const int pg = reg_lanes(r, nb, o);
        const int form = env_or("METAL_LINALG_QR_PANEL_REG_FORM", o.qr_panel_reg_form);
        // Form 3: the rotating form in its shape's own kernel (qr_panel_rot*; class 32 in
        // qr_panel_reg's).
        const int cls = ml_qrr_class(nb);
        const int32_t step = form != 3 || cls == 32 ? kStep_qr_panel_reg
                             : cls == 16            ? kStep_qr_panel_rot16
                                                    : kStep_qr_panel_rot8;
        p.flags |= (form == 3 ? ML_QRR_FORM_ROTATE : form & 3) << ML_QRR_FORM_SHIFT;
        if ((st = ch.launch(step, ch.batch, pg, ml_qrr_shared_floats(nb, pg), p))) return st;
      } else {
        const int pg = panel_gs(r, o);
        if ((st = ch.launch(kStep_qr_panel, ch.batch, pg, ml_qr_panel_shared_floats(r, nb, pg), p)))
          return st;
      }
      // The rest of the outer panel (two levels), or all trailing columns (one).
      if (two) {
        if ((st = update(j, jb, L.tin, nb, j + jb, J + JB - j - jb))) return st;
      } else {
        if ((st = join())) return st;
        if ((st = trailing(j, jb, tp, nb, j + jb, std::min(nb, k - j - jb)))) return st;
      }
    }
    if (!two) continue;
    // T of the outer panel's JB reflectors, then the trailing columns at k = JB.
    if ((st = outer_t(ch, o, L.v + static_cast<int64_t>(J) * m + J, m, L.tau + J, m - J, JB, NB,
                      tp, L.part, L.part_floats)))
      return st;
    if ((st = join())) return st;
    if ((st = trailing(J, JB, tp, NB, J + JB, std::min(NB, k - J - JB)))) return st;
  }
  if ((st = join())) return st;
  if (L.want_q) {
    const int kq = static_cast<int>(L.kq);
    ml_step_params p = step_params();
    p.m = m;
    p.n = kq;
    p.off[0] = L.q;
    p.ld[0] = m;
    if ((st = ch.launch(kStep_eye, ch.batch * kq, plain_lanes(o), 0, p))) return st;
    // Q = H_0 ... H_{k-1} I, panel by panel from the last: Q2 := H Q2, Q2 the rows and
    // columns j.. of Q (its columns before j are still those of I there).
    for (int j = (k - 1) / NB * NB; j >= 0; j -= NB) {
      const int jb = std::min(NB, k - j);
      const int64_t tp = L.t + static_cast<int64_t>(j / NB) * NB * NB;
      if ((st = larfb(ch, o, refl(j, jb, tp, NB), false, L.q + static_cast<int64_t>(j) * m + j, m,
                      kq - j, work)))
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
