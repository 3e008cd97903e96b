// Blocked eigh / eigvalsh: the load of one triangle (mirrored, scaled), the Householder
// tridiagonalisation in panels of nb columns (core/kernels/sytrd_blocked.h: per column two
// launches over many groups, per panel one rank-2nb update of the trailing matrix as a matrix
// product), the tridiagonal eigensolver (blocked_tridiag.h), and for eigh the
// back-transformation Z = Q Z in compact WY form, panels from the last, as matrix products.
// Launches per call, np = ceil(n / nb): the load's (load_input) + n + np (trd_update) +
// n - 1 (trd_symv) + np - 1 (trailing updates) + the solver's + 1 (eigenvalues) + 1 (info
// words, when asked): 2 n + 2 np + the load's + the solver's for eigvalsh; eigh adds np (T;
// np - 1 when n = 1 mod nb) + 3 ceil((n - 1) / nb) (back-transformation) + 1 (eigenvectors).
// n = 4096, nb = 32: 8448 and 8961, plus the load's and the solver's. With each panel in one
// launch (trd_panel, Options::trd_panel_groups) the n + np + n - 1 per-column launches become 2 np.
#include "blocked_eigh.h"

#include <cstdlib>

#include "blocked_impl.h"
#include "blocked_tridiag.h"
#include "errors.h"

namespace ml::blocked {

namespace {

// Lanes of trd_symv: simdgroups each computing one dot product at a time (untiled) or a slice
// of each (tiled).
constexpr int kSymvLanes = 256;
// Entries of the dot products one simdgroup of the untiled trd_symv computes at least.
constexpr int kSymvWork = 1024;
// v of up to this many entries is staged in shared memory by trd_symv.
constexpr int kSymvStage = 4096;
// Tiled trd_symv: groups per device unit-pair (Options::parallel_groups) aimed at, and the
// fewest outputs per group (each group reads all of v once).
constexpr int kSymvGroupsPer = 4;
constexpr int kSymvMinPer = 2;
constexpr int kSymvMaxPer = 16;

// trd_panel's default groups double from this many outputs per column over the chunk.
constexpr int64_t kPanelWideOutputs = 4096;

// METAL_LINALG_TRD_LANES / _ROWS / _SYMV_PER override the Options fields, _SYMV_LANES
// kSymvLanes (experiments; env_or, blocked_impl.h).

struct TrdPlan {
  int ug, rows;  // trd_update: lanes, rows per group (a divisor of ug)
  int sg;        // trd_symv: lanes
  int per;       // trd_symv: outputs per group (tiled; 0: from the size), -1: untiled
  int panel;     // trd_panel's groups (0: a launch per step)
  int tri;       // trd_panel's triangle form: rows per chunk (0: off)
};

// The triangle form's rows per chunk (METAL_LINALG_TRD_TRI_ROWS overrides
// Options::trd_tri_rows; 0 or less: off), rounded up to a multiple of 32.
int tri_rows(const Options &o) {
  const int h = env_or("METAL_LINALG_TRD_TRI_ROWS", o.trd_tri_rows);
  return h <= 0 ? 0 : (h + ML_TRD_TRI_T - 1) / ML_TRD_TRI_T * ML_TRD_TRI_T;
}

TrdPlan trd_plan(const Options &o, int64_t batch, int n) {
  TrdPlan t;
  t.ug = std::max(1, std::min(env_or("METAL_LINALG_TRD_LANES", o.trd_lanes), o.max_group));
  t.rows = env_or("METAL_LINALG_TRD_ROWS", o.trd_rows);
  if (t.rows <= 0 || t.rows > t.ug || t.ug % t.rows != 0) t.rows = t.ug;
  t.sg = std::max(1, std::min(env_or("METAL_LINALG_TRD_SYMV_LANES", kSymvLanes), o.max_group));
  t.per = env_or("METAL_LINALG_TRD_SYMV_PER", o.trd_symv_per);
  t.panel = env_or("METAL_LINALG_TRD_PANEL_GROUPS", o.trd_panel_groups);
  t.tri = tri_rows(o);
  const int tri_batch = env_or("METAL_LINALG_TRD_TRI_MAX_BATCH", o.trd_tri_max_batch);
  if (tri_batch > 0 && batch > tri_batch) t.tri = 0;
  // -1: parallel_groups, twice that from batch x n = 4096 outputs per column (measured on the
  // H200: 264 groups fastest at 512..2048 x1, 528 at 4096 x1 and 1024 x8 .. 512 x64).
  if (t.panel < 0)
    t.panel = std::max(1, o.parallel_groups) * (batch * n >= kPanelWideOutputs ? 2 : 1);
  return t;
}

// Outputs per item of trd_panel's symv: about one item per group per phase.
constexpr int kPanelMaxPer = 64;
// With the triangle form: outputs per item of the panel's dot products (tiled).
constexpr int kTriPer = 2;

// The panel at j0 (width jb) in one launch of trd_panel (after the one that zeroes its words).
ml_status trd_panel(const Chunk &ch, const TrdPlan &tp, ml_step_params p, int n, int nb,
                    int64_t sync) {
  const int j0 = p.i[0], jb = p.i[2], gs = tp.ug, rows0 = n - 1 - j0;
  const int nsg = (gs + 31) / 32;
  const int64_t outs = int64_t{rows0} + jb;  // the most outputs of a column (c = jb - 1)
  const int per_full = static_cast<int>(
      std::clamp<int64_t>((ch.batch * outs + tp.panel - 1) / tp.panel, 1, kPanelMaxPer));
  const int stage = rows0 <= kSymvStage ? 1 : 0;
  // The triangle form: chunks of h rows (at most the column's, rounded up to 32), doubled
  // while the items outnumber the partial sums' slots (n + 128, ML_TRD_PS); the panel's dot
  // products (V^T v, W^T v) kTriPer outputs an item, each over all the group's simdgroups.
  int h = 0, per = per_full, tiled = 0;
  if (tp.tri > 0 && rows0 > 0) {
    per = kTriPer;
    tiled = 2;
    h = std::min(tp.tri, (rows0 + ML_TRD_TRI_T - 1) / ML_TRD_TRI_T * ML_TRD_TRI_T);
    while (ml_trd_tri_items(rows0, h) + (2 * jb + per - 1) / per > n + 128) h *= 2;
  }
  int shared = std::max(ml_trd_update_shared_floats(nb, gs, tp.rows),
                        ml_trd_symv_shared_floats(rows0, stage, per * nsg));
  if (h > 0) shared = std::max(shared, ML_RED_FLOATS + nsg * h + ML_TRD_TRI_T);
  p.off[3] = sync;
  p.flags = 4;
  ml_status st;
  const int step = h > 0 ? kStep_trd_panel_tri : kStep_trd_panel;
  if ((st = ch.launch(step, 1, 32, 0, p))) return st;
  p.m = tp.rows;
  p.k = h;
  p.flags = stage | tiled;
  p.i[1] = shared;
  p.i[3] = per;
  const int64_t symv = h > 0 ? ml_trd_tri_items(rows0, h) + (2 * jb + per - 1) / per
                             : (outs + per - 1) / per;
  const int64_t items =
      ch.batch * std::max<int64_t>((n - j0 + tp.rows - 1) / tp.rows, symv);
  return ch.launch(step, std::min<int64_t>(tp.panel, items), gs, shared + 1, p);
}

// The resident tridiagonalisation (trd_res) of a chunk: from column k0 (a panel boundary, n:
// not taken) with g groups per matrix of gs lanes, nc columns each at most.
struct ResPlan {
  int k0, g, gs, nc, shared;
};

ResPlan res_plan(const Options &o, int64_t batch, int n, int nb) {
  ResPlan rp{n, 0, 0, 0, 0};
  const int64_t groups = env_or("METAL_LINALG_TRD_RES_GROUPS", o.trd_res_groups);
  const int64_t max_batch = env_or("METAL_LINALG_TRD_RES_MAX_BATCH", o.trd_res_max_batch);
  if (groups <= 0 || max_batch <= 0 || batch > max_batch || n < 2) return rp;
  const int lanes = env_or("METAL_LINALG_TRD_RES_LANES", o.trd_res_lanes);
  const int gs = std::max(32, std::min({lanes, o.max_group, ML_RES_MAX_LANES})) / 32 * 32;
  // Every group takes part in every column's exchanges: at most one group per column, and
  // (trd_res_min_cols) no fewer than that many columns a group at the start.
  const int per = std::max(1, env_or("METAL_LINALG_TRD_RES_MIN_COLS", o.trd_res_min_cols));
  const int g = static_cast<int>(std::min<int64_t>(groups / batch, std::max(1, n / per)));
  if (g < 1) return rp;
  for (int k0 = 0; k0 < n; k0 += nb) {
    const int r = n - k0, nc = (r + g - 1) / g;
    const int shared = ml_trd_res_shared_floats(r, nc, gs);
    if (nc <= gs && shared <= o.shared_floats) return ResPlan{k0, g, gs, nc, shared};
  }
  return rp;
}

// Lanes of the blocks form of larft for blocks of bt reflectors: up to four slices of 256
// sharing a block's rows, as many as the group and shared memory hold; 0 where even the
// smallest group that holds G's tiles does not fit (T then comes a panel at a time).
int t_block_lanes(const Options &o, int bt) {
  for (int h = 4; h > 1; --h)
    if (h * ML_LARFT_BLOCK_LANES <= o.max_group &&
        ml_larft_blocks_shared_floats(bt, h * ML_LARFT_BLOCK_LANES) <= o.shared_floats)
      return h * ML_LARFT_BLOCK_LANES;
  const int lanes = std::min(ML_LARFT_BLOCK_LANES, o.max_group / 32 * 32);
  return lanes >= ml_larft_blocks_lanes(bt) &&
                 ml_larft_blocks_shared_floats(bt, lanes) <= o.shared_floats
             ? lanes
             : 0;
}

}  // namespace

EighLayout eigh_layout(int n, bool vectors, int64_t solver_floats, const Options &o) {
  EighLayout L;
  L.n = n;
  L.nb = o.nb;
  L.vectors = vectors;
  // Blocks of bt reflectors for the back-transformation (METAL_LINALG_TRD_BACK_NB overrides
  // Options::trd_back_nb; 0: nb), their T in one launch where a group's lanes hold G.
  const int want = env_or("METAL_LINALG_TRD_BACK_NB", o.trd_back_nb);
  L.bt = want >= 1 && want <= 64 ? want : o.nb;
  L.t_blocks = t_block_lanes(o, L.bt) > 0 && env_or("METAL_LINALG_TRD_T_BLOCKS", 1) != 0;
  if (!L.t_blocks) L.bt = o.nb;  // T a panel at a time, as the reduction goes
  const int64_t nn = n, nb = o.nb, bt = L.bt, nbt = (nn + bt - 1) / bt;
  Slice s;
  L.stat = s.add(ML_STAT_FLOATS);
  L.a = s.add(nn * nn);
  const bool panels = env_or("METAL_LINALG_TRD_PANEL_GROUPS", o.trd_panel_groups) != 0;
  L.dv = s.add(ml_trd_vec_floats(n, panels && tri_rows(o) != 0 ? 1 : 0));
  L.p = s.add(nn * 3 * nb);
  if (vectors) {
    L.t = s.add(nbt * bt * bt);
    L.z = s.add(nn * nn);
    L.x1 = s.add(bt * nn);
    L.x2 = s.add(bt * nn);
  }
  L.w = s.add(nn);
  L.scratch = s.add(solver_floats);
  L.sync = s.add(ml_trd_res_sync_floats(n));
  L.per = s.floats;
  return L;
}

ml_status sytrd(Runner &r, int64_t first, int64_t batch, int32_t kf, const Options &o,
                const EighLayout &L) {
  const Chunk ch{r, first, batch, L.per};
  const int n = L.n, nb = L.nb;
  if (nb < 1 || nb > 64) return fail(ML_RUNTIME_ERROR, "blocked eigh", "panel width %d", nb);
  ml_status st;
  const int tri = kf == ML_K_UPPER ? ML_STEP_TRI_UPPER : ML_STEP_TRI_LOWER;
  if ((st = load_input(ch, o, n, n, tri, L.stat, L.a))) return st;
  const TrdPlan tp = trd_plan(o, batch, n);
  const int sg = tp.sg, nsg = (sg + 31) / 32;  // simdgroups of trd_symv
  const int ug = tp.ug, urows = tp.rows;
  const bool fused =
      tp.panel > 0 && (o.trd_panel_max_batch <= 0 || ch.batch <= o.trd_panel_max_batch);
  // T of the reflectors of the panel at j0 (eigh; the last column of the matrix has none).
  const auto panel_t = [&](int j0) -> ml_status {
    const int kr = std::min(nb, n - 1 - j0);
    if (!L.vectors || kr <= 0 || L.t_blocks) return ML_OK;
    return larft(ch, o, L.a + static_cast<int64_t>(j0) * n + j0 + 1, n, L.tau() + j0,
                 n - 1 - j0, kr, nb, L.t + static_cast<int64_t>(j0 / nb) * nb * nb,
                 panel_lanes(n - 1 - j0, o));
  };
  // Panels up to rp.k0, then the columns left in one launch of trd_res.
  const ResPlan rp = res_plan(o, ch.batch, n, nb);
  for (int j0 = 0; j0 < rp.k0; j0 += nb) {
    const int jb = std::min(nb, n - j0);
    ml_step_params p = step_params();
    p.n = n;
    p.i[0] = j0;
    p.i[2] = jb;
    p.off[0] = L.a;
    p.ld[0] = n;
    p.off[1] = L.p;
    p.ld[1] = n;
    p.off[2] = L.dv;
    int symv_groups = 0;  // per matrix, of the last trd_symv
    if (fused && (st = trd_panel(ch, tp, p, n, nb, L.sync))) return st;
    for (int c = 0; c <= jb && !fused; ++c) {
      const int i = j0 + c, rows = n - 1 - i;
      // Column c - 1 of W, column i (c < jb) or the panel's reflectors into A (c = jb).
      const int upd_groups = ((c == jb ? n - j0 : n - i) + urows - 1) / urows;
      p.m = urows;
      p.flags = 0;
      p.i[1] = c;
      p.i[3] = symv_groups;
      if ((st = ch.launch(kStep_trd_update, ch.batch * upd_groups, ug,
                          ml_trd_update_shared_floats(nb, ug, urows), p)))
        return st;
      if (c == jb || rows <= 0) continue;
      // The reflector, y = A22 v_i and the panel's dot products. Tiled: a few outputs per group,
      // each summed by all its simdgroups, enough groups to fill the device. Untiled: one
      // output per simdgroup at a time, several for short columns (v staged fewer times).
      const int outs = rows + 2 * c;
      const int stage = rows <= kSymvStage ? 1 : 0;
      int per = 0, tiled_floats = 0;
      if (tp.per >= 0) {
        const int64_t want = int64_t{kSymvGroupsPer} * std::max(1, o.parallel_groups);
        per = tp.per > 0 ? std::min(tp.per, kSymvMaxPer)
                         : static_cast<int>(std::clamp<int64_t>((ch.batch * outs + want - 1) / want,
                                                                kSymvMinPer, kSymvMaxPer));
        tiled_floats = per * nsg;
      }
      p.m = upd_groups;
      p.flags = stage | (per > 0 ? 2 : 0);
      p.i[3] = per > 0 ? per : nsg * std::clamp(kSymvWork / rows, 1, 8);
      symv_groups = (outs + p.i[3] - 1) / p.i[3];
      if ((st = ch.launch(kStep_trd_symv, ch.batch * symv_groups, sg,
                          ml_trd_symv_shared_floats(rows, stage, tiled_floats), p)))
        return st;
    }
    // A22 -= [V W] [W V]^T over the rows and columns after the panel.
    const int nt = n - j0 - jb;
    const int64_t a22 = L.a + static_cast<int64_t>(j0 + jb) * n + j0 + jb;
    const int64_t pv = L.p + j0 + jb, pw = pv + static_cast<int64_t>(jb) * n;
    if ((st = gemm(ch, o, ML_GEMM_TRANS_B, nt, nt, 2 * jb, -1.0f, pv, n, pw, n, 1.0f, a22, n)))
      return st;
    if ((st = panel_t(j0))) return st;
  }
  // T of every block of bt reflectors in one launch (the blocks form of larft.h).
  const auto block_t = [&]() -> ml_status {
    if (!L.vectors || !L.t_blocks || n < 2) return ML_OK;
    ml_step_params q = step_params();
    const int bt = L.bt, nblk = (n - 1 + bt - 1) / bt;
    q.m = n - 1;
    ML_LARFT_BLOCKS(q) = nblk;
    ML_LARFT_COUNT(q) = bt;
    ML_LARFT_LDT(q) = bt;
    q.off[ML_LARFT_V] = L.a + 1;
    q.ld[ML_LARFT_V] = n;
    q.off[ML_LARFT_TAU] = L.tau();
    q.off[ML_LARFT_T] = L.t;
    const int lanes = t_block_lanes(o, bt);
    return ch.launch(kStep_larft, ch.batch * nblk, lanes, ml_larft_blocks_shared_floats(bt, lanes),
                     q);
  };
  if (rp.k0 >= n) return block_t();
  ml_step_params p = step_params();
  p.n = n;
  p.off[0] = L.a;
  p.ld[0] = n;
  p.off[2] = L.dv;
  p.off[3] = L.sync;
  const int tagged = env_or("METAL_LINALG_TRD_RES_TAGGED", o.trd_res_tagged) != 0 ? 8 : 0;
  // Shared accesses of 4 rows (1, the default) or of one row (0), for measurement.
  const int row1 = env_or("METAL_LINALG_TRD_RES_VEC", 1) == 0 ? 32 : 0;
  // The forms for groups holding many columns (the default, 1), or not (0), for measurement.
  const int narrow = env_or("METAL_LINALG_TRD_RES_WIDE", 1) == 0 ? 64 : 0;
  p.flags = 4 | tagged;
  if ((st = ch.launch(kStep_trd_res, ch.batch, 32, 0, p))) return st;
  p.flags = tagged | row1 | narrow;
  p.i[0] = rp.k0;
  p.i[1] = rp.g;
  p.i[2] = rp.nc;
  if ((st = ch.launch(kStep_trd_res, ch.batch * rp.g, rp.gs, rp.shared, p))) return st;
  for (int j0 = rp.k0; j0 < n; j0 += nb)
    if ((st = panel_t(j0))) return st;
  return block_t();
}

ml_status ormtr(Runner &r, int64_t first, int64_t batch, const Options &o, const EighLayout &L,
                int64_t z, int ldz, int ncols) {
  const Chunk ch{r, first, batch, L.per};
  const int n = L.n, nb = L.bt, kr = n - 1;
  // Z = P_0 (P_1 (... (P_last Z))), P = I - V T V^T of a block of bt reflectors acting on rows
  // j + 1 .. n - 1.
  for (int j = (kr - 1) / nb * nb; j >= 0 && kr > 0; j -= nb) {
    const BlockReflector h{L.a + static_cast<int64_t>(j) * n + j + 1, n,
                           L.t + static_cast<int64_t>(j / nb) * nb * nb, nb, n - 1 - j,
                           std::min(nb, kr - j)};
    if (ml_status st = larfb(ch, o, h, false, z + j + 1, ldz, ncols, LarfbWork{L.x1, L.x2, nb}))
      return st;
  }
  return ML_OK;
}

namespace {

EighLayout layout(const Call &c, const Options &o) {
  const bool vectors = c.op == ML_OP_EIGH;
  const int n = static_cast<int>(c.n);
  return eigh_layout(n, vectors, tridiag_scratch_floats(n, n, vectors), o);
}

int64_t per_matrix(const Call &c, int32_t kf, const Options &o) {
  if (eigh_two_stage(c, o)) return eigh2_per_matrix(c, kf, o);
  return layout(c, o).per;
}

ml_status run_chunk(const Call &c, int32_t kf, const Options &o, const Chunk &ch) {
  if (eigh_two_stage(c, o)) return eigh2_run_chunk(c, kf, o, ch);
  const EighLayout L = layout(c, o);
  const int n = L.n;
  ml_status st;
  if ((st = sytrd(ch.r, ch.first, ch.batch, kf, o, L))) return st;
  if ((st = tridiag_eig(ch, o, n, 0, n, L.d(), L.e(), L.w, L.vectors ? L.z : -1, n, L.scratch,
                        L.stat)))
    return st;
  if (L.vectors && (st = ormtr(ch.r, ch.first, ch.batch, o, L, L.z, n, n))) return st;
  if ((st = store_output(ch, o, 0, 1, n, ML_STORE_SCALE, L.w, 1, L.stat))) return st;
  if (L.vectors && (st = store_output(ch, o, 1, n, n, 0, L.z, n, L.stat))) return st;
  return store_info(ch, o, L.stat, c.info != nullptr);
}

}  // namespace

const Algo *eigh_algo() {
  static const Algo a{per_matrix, run_chunk};
  return &a;
}

}  // namespace ml::blocked
