// Two-stage tridiagonalisation for eigvalsh. Stage 1 (sy2sb) reduces the symmetric matrix to a
// band of half-width bw: per panel of bw columns, the QR of the panel's rows below the band
// (qr_panel, two levels through larft when the rows do not fit shared memory) and the two-sided
// update of the trailing matrix as seven matrix products,
//   X = A22 V T,  W = X - (1/2) V (T^T V^T X),  A22 -= V W^T + W V^T,
// so the matrix is read a few times per panel instead of twice per column. Stage 2 (sb2st) chases
// the band to tridiagonal form by wavefronts of bulge-chasing tasks (core/kernels/sb2st.h), then
// the tridiagonal eigensolver (blocked_tridiag.h) runs as in one stage. Launches per call, np =
// ceil((n - 2) / bw) panels: about 9 np (12 np for rows past shared memory) + 1 for stage 1;
// for stage 2, 2 when the chase runs in one launch (sb_block, a group per matrix, when
// o.eigh_chase_block > 0; else sb_sweeps, o.eigh_chase_tasks = 0), else
// about q n + n / (K bw) + 2 (q = 3 for K = 1 task per launch, q = 2 for K = 2).
// eigh (with eigenvectors) runs the same stages keeping both stages' reflectors (stage 1's as one
// unit lower trapezoidal matrix with their taus, the chase's in its store), the tridiagonal
// eigensolver with vectors, then Z := Q2 Z (sb2st_back.h: a launch for the T of the chase's
// reflector blocks, then one per wavefront of blocks, G + T0 - 1 for G = ceil((n - 2) / k) groups
// of k sweeps and T0 = ceil((n - 2) / bw) tasks) and Z := Q1 Z (blocks of up to 64 of stage 1's
// reflectors: larft, then larfb's three products, the last block first).
#include "blocked_eigh.h"
#include "blocked_impl.h"
#include "blocked_tridiag.h"
#include "errors.h"

namespace ml::blocked {

namespace {

int band_of(const Options &o) { return std::clamp(o.eigh_band, 2, 64); }

// Lanes of the chase: o.eigh_chase_lanes, else one simdgroup up to bw 32 (the tasks in
// registers, ml_sb_task_w: the chase is latency-bound), else a row of the cross's strip (3 bw
// rows) each; at most 256 (the CUDA entries' launch bound: the tasks in registers need more
// than a 1024-lane group's 64 registers per lane).
int chase_lanes(int bw, const Options &o) {
  const int auto_lanes = bw <= 32 ? 32 : (3 * bw + 31) / 32 * 32;
  const int lanes = o.eigh_chase_lanes > 0 ? o.eigh_chase_lanes : auto_lanes;
  return std::max(1, std::min({o.max_group, 256, lanes}));
}

}  // namespace

namespace {

// Sweeps per block of the chase's back-transformation: o.eigh_back_sweeps (0: bw), fewer
// until sb_back_t and sb_back (4 columns) fit shared memory; 0 when none does.
int back_sweeps(int bw, const Options &o) {
  const auto fits = [&](int k) {
    return ml_sbb_t_shared_floats(bw, k) <= o.shared_floats &&
           ml_sbb_shared_floats(bw, k, ML_SBB_TILE) <= o.shared_floats;
  };
  int k = o.eigh_back_sweeps > 0 ? std::min(o.eigh_back_sweeps, 64) : bw;
  while (k > 1 && !fits(k)) --k;
  return fits(k) ? k : 0;
}

// Columns of Z per group of sb_back: o.eigh_back_cols (0: 64) rounded down to a multiple of
// the tile (4), halved while short of shared memory.
int back_cols(int bw, int k, const Options &o) {
  const int t = ML_SBB_TILE;
  int nc = std::max(t, (o.eigh_back_cols > 0 ? std::min(o.eigh_back_cols, 256) : 64) / t * t);
  while (nc > t && ml_sbb_shared_floats(bw, k, nc) > o.shared_floats)
    nc = std::max(t, nc / 2 / t * t);
  return nc;
}

}  // namespace

bool eigh_two_stage(const Call &c, const Options &o) {
  const bool chase_fits = ml_sb_chase_shared_floats(band_of(o)) + 1 <= o.shared_floats;
  if (c.op == ML_OP_EIGH)
    return o.eigh_vec_two_stage_min_n > 0 && c.n >= o.eigh_vec_two_stage_min_n &&
           (o.eigh_vec_two_stage_max_n <= 0 || c.n <= o.eigh_vec_two_stage_max_n) &&
           c.batch >= o.eigh_vec_two_stage_min_batch && chase_fits &&
           back_sweeps(band_of(o), o) > 0;
  return c.op == ML_OP_EIGVALSH && o.eigh_two_stage_min_n > 0 && c.n >= o.eigh_two_stage_min_n &&
         (o.eigh_two_stage_max_n <= 0 || c.n <= o.eigh_two_stage_max_n) &&
         c.batch >= o.eigh_two_stage_min_batch && chase_fits;
}

BandLayout band_layout(int n, int64_t batch, int64_t solver_floats, const Options &o,
                       bool vectors) {
  BandLayout L;
  L.n = n;
  L.bw = band_of(o);
  const int64_t nn = n, bw = L.bw;
  Slice s;
  L.stat = s.add(ML_STAT_FLOATS);
  L.a = s.add(nn * nn);
  L.d = s.add(nn);
  L.e = s.add(nn);
  L.v = s.add(nn * bw);
  L.x1 = s.add(nn * bw);
  L.x = s.add(nn * bw);
  L.t = s.add(bw * bw);
  L.tin = s.add(bw * bw);
  L.y = s.add(bw * bw);
  L.mm = s.add(bw * bw);
  L.sx1 = s.add(bw * bw);
  L.sx2 = s.add(bw * bw);
  L.tau = s.add(nn);
  L.qstat = s.add(ML_STAT_FLOATS);
  // Split-k partials of the products with k = the panel's rows (nn x bw at most).
  const int split = split_slices(batch, o);
  L.part_floats = split > 1 ? split * nn * bw : 0;
  L.part = L.part_floats > 0 ? s.add(L.part_floats) : 0;
  L.w = s.add(nn);
  L.scratch = s.add(solver_floats);
  if (vectors) {
    // Panels at j0 = 0, bw, .. while n - j0 - bw >= 2 (sy2sb).
    L.vectors = true;
    L.panels = n - bw >= 2 ? (n - bw - 2) / L.bw + 1 : 0;
    L.k2 = std::max(1, back_sweeps(L.bw, o));
    const int q1 = o.eigh_back_q1 > 0 ? std::min(o.eigh_back_q1, 64) : 64;
    L.q1w = std::max(L.bw, q1 / L.bw * L.bw);
    const int64_t q1w = L.q1w;
    L.vq = s.add(nn * nn);
    L.tauq = s.add(nn);
    L.tq = s.add((nn + q1w - 1) / q1w * q1w * q1w);
    L.xq1 = s.add(q1w * nn);
    L.xq2 = s.add(q1w * nn);
    L.v2 = s.add(ml_sb_v2_floats(n, L.bw));
    L.t2 = s.add(ml_sbb_t_floats(n, L.bw, L.k2));
    L.z = s.add(nn * nn);
  }
  L.per = s.floats;
  return L;
}

ml_status sy2sb(Runner &r, int64_t first, int64_t batch, int32_t kf, const Options &o,
                const BandLayout &L) {
  const Chunk ch{r, first, batch, L.per};
  const int n = L.n, bw = L.bw;
  ml_status st;
  const int tri = kf == ML_K_UPPER ? ML_STEP_TRI_UPPER : ML_STEP_TRI_LOWER;
  if ((st = load_input(ch, o, n, n, tri, L.stat, L.a))) return st;
  if (L.vectors) {
    // The panels' reflectors kept for eigh: all of them one unit lower trapezoidal n x n
    // matrix (L.vq, reflector c at column c from row c, row i standing for row i + bw of A),
    // the identity first so that the zeros above each panel are there; their taus at L.tauq.
    ml_step_params p = step_params();
    p.m = n;
    p.n = n;
    p.off[0] = L.vq;
    p.ld[0] = n;
    if ((st = ch.launch(kStep_eye, ch.batch * n, plain_lanes(o), 0, p))) return st;
  }
  // Panel W' = A[j0 + bw:n, j0:j0 + bw] (m rows, ld n); its kb = min(bw, m - 1) reflectors in V
  // (m x kb, ld n), T (ld bw). Panel columns after kb (the last panel) only get H^T from the left.
  for (int j0 = 0; n - j0 - bw >= 2; j0 += bw) {
    const int m = n - j0 - bw, kb = std::min(bw, m - 1);
    // The panel's V: in L.vq for eigh's back-transformation, else one buffer; its taus.
    const int64_t pv = L.vectors ? L.vq + static_cast<int64_t>(j0) * n + j0 : L.v;
    const int64_t pt = L.t;
    const int64_t ptau = L.vectors ? L.tauq + j0 : L.tau;
    const int64_t wp = L.a + static_cast<int64_t>(j0) * n + j0 + bw;
    const int pg = panel_lanes(m, o);
    const int nbq = ml_qr_panel_width(m, bw, pg, o.shared_floats);
    const bool two = nbq < kb;
    // Columns [c0, bw) of W', rows j..: W2 := H^T W2, H of the jb reflectors from column j of
    // V with their T (ld ldt).
    const auto update = [&](int j, int jb, int64_t tp, int ldt, int c0) -> ml_status {
      const BlockReflector h{pv + static_cast<int64_t>(j) * n + j, n, tp, ldt, m - j, jb};
      return larfb(ch, o, h, true, wp + static_cast<int64_t>(c0) * n + j, n, bw - c0,
                   LarfbWork{L.sx1, L.sx2, bw});
    };
    const int step = two ? nbq : kb;
    for (int j = 0; j < kb; j += step) {
      const int jb = std::min(step, kb - j);
      ml_step_params p = step_params();
      p.m = m;
      p.n = bw;
      ML_QRP_COL(p) = j;
      ML_QRP_WIDTH(p) = jb;
      ML_QRP_LDT(p) = two ? nbq : bw;
      ML_QRP_TAU_AT(p) = two || L.vectors ? static_cast<int>(ptau) : 0;
      p.off[ML_QRP_W] = wp;
      p.ld[ML_QRP_W] = n;
      p.off[ML_QRP_V] = pv;
      p.ld[ML_QRP_V] = n;
      p.off[ML_QRP_T] = two ? L.tin : pt;
      p.off[ML_QRP_STAT] = L.qstat;  // rank deficiency of a panel means nothing for eigvalsh
      const int sh = ml_qr_panel_shared_floats(m - j, ML_QRP_LDT(p), pg);
      if ((st = ch.launch(kStep_qr_panel, ch.batch, pg, sh, p))) return st;
      if ((st = update(j, jb, two ? L.tin : pt, two ? nbq : bw, j + jb))) return st;
    }
    if (two) {
      if ((st = larft(ch, o, pv, n, ptau, m, kb, bw, pt, pg, L.part, L.part_floats))) return st;
    }
    // The trailing matrix A22 (m x m, ld n) from both sides.
    const int64_t a22 = wp + static_cast<int64_t>(bw) * n;
    if ((st = gemm(ch, o, 0, m, kb, m, 1.0f, a22, n, pv, n, 0.0f, L.x1, n, L.part,
                   L.part_floats)) ||
        (st = gemm(ch, o, 0, m, kb, kb, 1.0f, L.x1, n, pt, bw, 0.0f, L.x, n)) ||
        (st = gemm(ch, o, ML_GEMM_TRANS_A, kb, kb, m, 1.0f, pv, n, L.x, n, 0.0f, L.y, bw, L.part,
                   L.part_floats)) ||
        (st = gemm(ch, o, ML_GEMM_TRANS_A, kb, kb, kb, 1.0f, pt, bw, L.y, bw, 0.0f, L.mm, bw)) ||
        (st = gemm(ch, o, 0, m, kb, kb, -0.5f, pv, n, L.mm, bw, 1.0f, L.x, n)) ||
        (st = gemm(ch, o, ML_GEMM_TRANS_B, m, m, kb, -1.0f, pv, n, L.x, n, 1.0f, a22, n)) ||
        (st = gemm(ch, o, ML_GEMM_TRANS_B, m, m, kb, -1.0f, L.x, n, pv, n, 1.0f, a22, n)))
      return st;
  }
  ml_step_params p = step_params();
  p.n = n;
  p.i[0] = bw;
  p.off[0] = L.a;
  p.ld[0] = n;
  p.off[1] = L.tau;    // sb_sweeps' progress words: the panels' taus are dead from here on
  p.off[2] = L.qstat;  // its ticket (in the first matrix's slice): so are the panels' rank bits
  return ch.launch(kStep_sb_band, ch.batch * n, plain_lanes(o), 0, p);
}

ml_status sb2st(Runner &r, int64_t first, int64_t batch, const Options &o, const BandLayout &L) {
  const Chunk ch{r, first, batch, L.per};
  const int n = L.n, bw = L.bw;
  ml_status st;
  // The chase of each matrix in one group (o.eigh_chase_block lanes, rounded down to a multiple
  // of 32 within o.max_group and the shared budget), where it applies; else as below.
  int block = std::min({o.eigh_chase_block, o.max_group, 1024}) / 32 * 32;
  while (block > 0 && ml_sb_block_shared_floats(bw, block) > o.shared_floats) block -= 32;
  if (block > 0 && ml_sb_block_fits(n, bw)) {
    ml_step_params p = step_params();
    p.n = n;
    p.i[1] = bw;
    p.off[0] = L.a;
    p.ld[0] = n;
    p.off[3] = L.v2;
    if ((st = ch.launch(block > 512 ? kStep_sb_block_wide : kStep_sb_block, ch.batch, block,
                        ml_sb_block_shared_floats(bw, block), p)))
      return st;
  } else if (o.eigh_chase_tasks == 0 && n >= 3) {
    // One launch: a group for every sweep that can be in flight (one per 3 tasks of the
    // first), at most 8 per multiprocessor's share of o.parallel_groups.
    const int64_t total = ch.batch * (n - 2);
    const int64_t inflight = ch.batch * (ml_sb_tasks(n, bw, 0) / 3 + 1);
    const int64_t groups = std::min({total, inflight, int64_t{8} * o.parallel_groups});
    ml_step_params p = step_params();
    p.n = n;
    p.i[1] = bw;
    p.i[2] = static_cast<int>(ch.batch);
    p.off[0] = L.a;
    p.ld[0] = n;
    p.off[1] = L.tau;
    p.off[2] = L.qstat;
    p.off[3] = L.v2;  // the reflector store (eigh), 0: none
    if ((st = ch.launch(kStep_sb_sweeps, groups, chase_lanes(bw, o),
                        ml_sb_chase_shared_floats(bw) + 1, p)))
      return st;
  }
  const int K = std::clamp(o.eigh_chase_tasks, 1, 2), q = K == 1 ? 3 : 2;
  // Chunks of K tasks of sweep s; ceil((n - 2 - s) / bw) tasks.
  const auto chunks = [&](int s) { return (ml_sb_tasks(n, bw, s) + K - 1) / K; };
  // The wavefronts' last sweep (-1: the chase ran in one launch above).
  const int last = o.eigh_chase_tasks == 0 || (block > 0 && ml_sb_block_fits(n, bw)) ? -1 : n - 3;
  const int lanes = chase_lanes(bw, o);
  // Wavefront `wave` runs chunk wave - q s of the sweeps s in [lo, hi] that have it.
  for (int wave = 0, lo = 0; last >= 0; ++wave) {
    while (lo <= last && wave - q * lo >= chunks(lo)) ++lo;
    if (lo > last) break;
    const int hi = std::min(last, wave / q);
    if (hi < lo) continue;
    ml_step_params p = step_params();
    p.m = hi - lo + 1;
    p.n = n;
    p.k = q;
    p.i[0] = wave;
    p.i[1] = bw;
    p.i[2] = hi;
    p.i[3] = K;
    p.off[0] = L.a;
    p.ld[0] = n;
    p.off[3] = L.v2;  // the reflector store (eigh), 0: none
    if ((st = ch.launch(kStep_sb_chase, ch.batch * p.m, lanes, ml_sb_chase_shared_floats(bw), p)))
      return st;
  }
  ml_step_params p = step_params();
  p.n = n;
  p.off[0] = L.a;
  p.ld[0] = n;
  p.off[1] = L.d;
  p.off[2] = L.e;
  const int gs = plain_lanes(o);
  return ch.launch(kStep_sb_extract, ch.batch * ((n + gs - 1) / gs), gs, 0, p);
}

ml_status sb2st_back(Runner &r, int64_t first, int64_t batch, const Options &o,
                     const BandLayout &L, int64_t z, int ldz, int ncols) {
  const Chunk ch{r, first, batch, L.per};
  const int n = L.n, bw = L.bw, k = L.k2;
  if (!L.vectors) return fail(ML_RUNTIME_ERROR, "two-stage eigh", "no reflectors kept");
  if (n < 3 || ncols <= 0) return ML_OK;
  const int G = ml_sbb_groups(n, k), T0 = ml_sb_tasks(n, bw, 0);
  ml_status st;
  ml_step_params p = step_params();
  p.n = n;
  p.i[1] = bw;
  p.i[2] = k;
  p.off[0] = L.v2;
  p.off[1] = L.t2;
  if ((st = ch.launch(kStep_sb_back_t, ch.batch * G * T0, std::min(o.max_group, 64),
                      ml_sbb_t_shared_floats(bw, k), p)))
    return st;
  const int nc = back_cols(bw, k, o), slices = (ncols + nc - 1) / nc;
  // A lane per 4 x 4 tile of the largest product (Z_R's rows x nc), at most 256.
  const int tiles = ml_sbb_pad(bw + k - 1) / ML_SBB_TILE * (nc / ML_SBB_TILE);
  const int lanes = std::max(1, std::min({o.max_group, 256, (tiles + 31) / 32 * 32}));
  p.k = nc;
  p.flags = ncols;
  p.off[2] = z;
  p.ld[2] = ldz;
  // Wavefront w: blocks (g, w - (G - 1 - g)) of g >= G - 1 - w while the group has that task
  // (t grows with g, the tasks of a group's first sweep shrink: a range of g).
  for (int w = 0; w < G + T0 - 1; ++w) {
    const int glo = std::max(0, G - 1 - w);
    int ghi = glo - 1;
    while (ghi + 1 < G && w - (G - 1 - (ghi + 1)) < ml_sb_tasks(n, bw, (ghi + 1) * k)) ++ghi;
    if (ghi < glo) continue;
    p.i[0] = w;
    p.i[3] = glo;
    p.m = ghi - glo + 1;
    if ((st = ch.launch(kStep_sb_back, ch.batch * p.m * slices, lanes,
                        ml_sbb_shared_floats(bw, k, nc), p)))
      return st;
  }
  return ML_OK;
}

ml_status sy2sb_back(Runner &r, int64_t first, int64_t batch, const Options &o,
                     const BandLayout &L, int64_t z, int ldz, int ncols) {
  const Chunk ch{r, first, batch, L.per};
  const int n = L.n, bw = L.bw;
  if (!L.vectors) return fail(ML_RUNTIME_ERROR, "two-stage eigh", "no panels kept");
  if (ncols > n) return fail(ML_INVALID_ARGUMENT, "two-stage eigh", "%d columns", ncols);
  // Reflector c (0 <= c < nr) acts on rows c + bw .. n - 1; Q1 = H_0 .. H_{nr - 1}, applied
  // to Z in blocks of q1w reflectors (several panels: T by larft over the block), the last
  // block first: Z = B_0 (B_1 (.. (B_last Z))).
  const int last = L.panels - 1;
  const int nr = last < 0 ? 0 : last * bw + std::min(bw, n - last * bw - bw - 1);
  const int q = L.q1w;
  ml_status st;
  for (int c0 = (nr - 1) / q * q; c0 >= 0 && nr > 0; c0 -= q) {
    const int count = std::min(q, nr - c0), m = n - c0 - bw;
    const int64_t v = L.vq + static_cast<int64_t>(c0) * n + c0;
    const int64_t t = L.tq + static_cast<int64_t>(c0 / q) * q * q;
    const BlockReflector h{v, n, t, q, m, count};
    if ((st = larft(ch, o, v, n, L.tauq + c0, m, count, q, t, panel_lanes(m, o), L.part,
                    L.part_floats)) ||
        (st = larfb(ch, o, h, false, z + c0 + bw, ldz, ncols,
                    LarfbWork{L.xq1, L.xq2, q, L.part, L.part_floats})))
      return st;
  }
  return ML_OK;
}

namespace {

BandLayout layout2(const Call &c, const Options &o) {
  const int n = static_cast<int>(c.n);
  const bool vectors = c.op == ML_OP_EIGH;
  return band_layout(n, c.batch, tridiag_scratch_floats(n, n, vectors), o, vectors);
}

}  // namespace

int64_t eigh2_per_matrix(const Call &c, int32_t, const Options &o) { return layout2(c, o).per; }

ml_status eigh2_run_chunk(const Call &c, int32_t kf, const Options &o, const Chunk &ch) {
  const BandLayout L = layout2(c, o);
  const int n = L.n;
  ml_status st;
  if ((st = sy2sb(ch.r, ch.first, ch.batch, kf, o, L)) ||
      (st = sb2st(ch.r, ch.first, ch.batch, o, L)) ||
      (st = tridiag_eig(ch, o, n, 0, n, L.d, L.e, L.w, L.vectors ? L.z : -1, n, L.scratch,
                        L.stat)))
    return st;
  if (L.vectors && ((st = sb2st_back(ch.r, ch.first, ch.batch, o, L, L.z, n, n)) ||
                    (st = sy2sb_back(ch.r, ch.first, ch.batch, o, L, L.z, n, n))))
    return st;
  if ((st = store_output(ch, o, 0, 1, n, ML_STORE_SCALE, L.w, 1, L.stat))) return st;
  if (L.vectors && (st = store_output(ch, o, 1, n, n, 0, L.z, n, L.stat))) return st;
  return store_info(ch, o, L.stat, c.info != nullptr);
}

}  // namespace ml::blocked
